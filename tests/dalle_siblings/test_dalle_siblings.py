"""Facts in the vae-training, dalle-training and generation-and-ranking sub-skills.

Two sources of truth:
- facts_58c1e1a.json: flags and a few call keywords extracted with `ast` from the repository
  scripts (train_vae.py, train_dalle.py, generate.py, README.md) at commit 58c1e1a by
  extract_facts.py; the scripts are not in the wheel, so the facts file stands in for them.
- the installed dalle-pytorch 1.6.6 wheel, located with importlib.util.find_spec (which does not
  import it: importing needs heavy dependencies) and read with `ast` at test time; likewise
  torch's and deepspeed's sources for the two claims that depend on them.
"""
from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
FACTS_PATH = HERE / "facts_58c1e1a.json"
FULL_COMMIT = "58c1e1a4fef10725a79bd45cdb5581c03e3e59e7"
SUBS = ("vae-training", "dalle-training", "generation-and-ranking")
REQUIRED = object()

# `--x` tokens in the documents that are not flags of the three scripts: yttm's own CLI flags
# (data-and-tokenizers.md), argparse's built-in --help, and the README's misspelled flag, which
# the docs quote as wrong.
NON_SCRIPT_FLAGS = {"--vocab_size", "--data", "--model", "--help", "--gentext"}


# ----------------------------------------------------------------------------- helpers

def package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    assert spec is not None and spec.submodule_search_locations, f"{name} is not installed"
    return Path(list(spec.submodule_search_locations)[0])


def parse_source(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def find_def(tree: ast.Module, qualname: str):
    node = tree
    for part in qualname.split("."):
        body = node.body
        matches = [n for n in body if isinstance(n, (ast.ClassDef, ast.FunctionDef)) and n.name == part]
        assert matches, f"{qualname}: {part} not found"
        node = matches[0]
    return node


def const_eval(node: ast.expr):
    """Value of a default expression made of literals (tuples with *, arithmetic)."""
    return eval(compile(ast.Expression(node), "<default>", "eval"), {"__builtins__": {}}, {})


def signature(func: ast.FunctionDef) -> dict:
    """Parameter name -> default value (REQUIRED when none); self dropped."""
    a = func.args
    out: dict = {}
    positional = a.posonlyargs + a.args
    pad = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
    for arg, d in zip(positional, pad):
        out[arg.arg] = REQUIRED if d is None else const_eval(d)
    for arg, d in zip(a.kwonlyargs, a.kw_defaults):
        out[arg.arg] = REQUIRED if d is None else const_eval(d)
    out.pop("self", None)
    return out


def split_row(line: str) -> list[str]:
    cells = re.split(r"(?<!\\)\|", line.strip())
    return [c.strip() for c in cells[1:-1]]


MARKER_RE = re.compile(r"<!--\s*(flags|signature):\s*(.+?)\s*-->")


def marked_tables(text: str) -> list[tuple[str, str, list[list[str]]]]:
    lines = text.splitlines()
    found = []
    for i, line in enumerate(lines):
        m = MARKER_RE.search(line)
        if not m:
            continue
        j = i + 1
        assert lines[j].lstrip().startswith("|"), f"marker {m.group(0)} not followed by a table"
        rows = []
        j += 2  # header and separator
        while j < len(lines) and lines[j].lstrip().startswith("|"):
            rows.append(split_row(lines[j]))
            j += 1
        found.append((m.group(1), m.group(2), rows))
    return found


def ticked(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def cell_default(cell: str):
    if cell.strip().lower() == "required":
        return REQUIRED
    toks = ticked(cell)
    assert len(toks) == 1, f"default cell {cell!r} must be `literal` or required"
    return ast.literal_eval(toks[0])


def doc_paths() -> list[Path]:
    paths = []
    for sub in SUBS:
        root = REPO / "sub-skills" / sub
        paths.append(root / "SKILL.md")
        paths.extend(sorted((root / "references").glob("*.md")))
    return paths


def all_tables():
    for p in doc_paths():
        for kind, target, rows in marked_tables(p.read_text(encoding="utf-8")):
            yield p, kind, target, rows


def facts() -> dict:
    return json.loads(FACTS_PATH.read_text(encoding="utf-8"))


def fact_type(rec: dict) -> str:
    if rec.get("action") == "store_true":
        return "store_true"
    return rec.get("type") or "str"


def expected_script_flags(script: str) -> dict[str, dict]:
    out = {}
    for rec in facts()["scripts"][script]["flags"]:
        out[tuple(rec["flags"])] = {"default": REQUIRED if rec["required"] else rec["default"],
                                    "type": fact_type(rec)}
    return out


def wrap_arg_parser_flags() -> dict[tuple, dict]:
    """Flags distributed_utils.wrap_arg_parser adds, read from the wheel and DeepSpeed."""
    out: dict[tuple, dict] = {}

    def collect(func: ast.FunctionDef, into: dict):
        for node in ast.walk(func):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "add_argument":
                names = tuple(ast.literal_eval(a) for a in node.args)
                kw = {k.arg: k.value for k in node.keywords}
                action = ast.literal_eval(kw["action"]) if "action" in kw else None
                if "default" in kw:
                    default = ast.literal_eval(kw["default"])
                else:
                    default = False if action == "store_true" else None
                typ = "store_true" if action == "store_true" else (
                    kw["type"].id if isinstance(kw.get("type"), ast.Name) else
                    "lambda" if isinstance(kw.get("type"), ast.Lambda) else "str")
                into[names] = {"default": default, "type": typ}

    dp = package_dir("dalle_pytorch")
    collect(find_def(parse_source(dp / "distributed_utils.py"), "wrap_arg_parser"), out)
    ds_backend = {}
    collect(find_def(parse_source(dp / "distributed_backends" / "deepspeed_backend.py"),
                     "DeepSpeedBackend.wrap_arg_parser"), ds_backend)
    # with deepspeed installed, its add_config_arguments replaces the placeholder --deepspeed
    assert ds_backend[("--deepspeed",)]["type"] == "lambda"
    out[("--local_rank",)] = ds_backend[("--local_rank",)]
    ds = {}
    collect(find_def(parse_source(package_dir("deepspeed") / "__init__.py"), "_add_core_arguments"), ds)
    out.update(ds)
    return out


# ----------------------------------------------------------------------------- facts file

def test_facts_file_records_pinned_commit_and_scripts():
    f = facts()
    assert f["commit"] == FULL_COMMIT and f["repository"] == "lucidrains/DALLE-pytorch"
    assert set(f["scripts"]) == {"train_vae.py", "train_dalle.py", "generate.py"}
    counts = {s: len(v["flags"]) for s, v in f["scripts"].items()}
    assert counts == {"train_vae.py": 18, "train_dalle.py": 42, "generate.py": 13}
    assert f["scripts"]["train_vae.py"]["calls_wrap_arg_parser"]
    assert f["scripts"]["train_dalle.py"]["calls_wrap_arg_parser"]
    assert not f["scripts"]["generate.py"]["calls_wrap_arg_parser"]


# ----------------------------------------------------------------------------- flag tables

@pytest.mark.parametrize("script", ["train_vae.py", "train_dalle.py", "generate.py"])
def test_flag_tables_cover_every_flag_with_its_default_and_type(script):
    expected = expected_script_flags(script)
    documented: dict[tuple, tuple] = {}
    for path, kind, target, rows in all_tables():
        if kind != "flags" or target != script:
            continue
        for row in rows:
            names = tuple(t for t in ticked(row[0]) if t.startswith("--"))
            assert names in expected, f"{path.name}: {names} is not a {script} flag at 58c1e1a"
            want = expected[names]
            assert row[1] == want["type"], f"{path.name}: {names} type {row[1]} != {want['type']}"
            got = cell_default(row[2])
            assert got is want["default"] if want["default"] is REQUIRED else got == want["default"], \
                f"{path.name}: {names} default {row[2]} != {want['default']!r}"
            documented[names] = (path.name, row)
    missing = set(expected) - set(documented)
    assert not missing, f"{script} flags without a table row: {sorted(missing)}"


def test_distributed_flag_tables_match_wheel_and_deepspeed():
    expected = wrap_arg_parser_flags()
    tables = [(p, rows) for p, kind, target, rows in all_tables()
              if kind == "flags" and target == "wrap_arg_parser"]
    assert len(tables) == 2  # train_vae reference and train_dalle reference
    for path, rows in tables:
        seen = set()
        for row in rows:
            names = tuple(ticked(row[0]))
            assert names in expected, f"{path.name}: {names} not added by wrap_arg_parser"
            assert row[1] == expected[names]["type"], f"{path.name}: {names} type"
            assert cell_default(row[2]) == expected[names]["default"], f"{path.name}: {names} default"
            seen.add(names)
        assert seen == set(expected), f"{path.name}: missing {set(expected) - seen}"


def test_every_flag_mentioned_in_the_documents_exists():
    known = set(NON_SCRIPT_FLAGS)
    for script in ("train_vae.py", "train_dalle.py", "generate.py"):
        for names in expected_script_flags(script):
            known.update(names)
    for names in wrap_arg_parser_flags():
        known.update(names)
    for path in doc_paths():
        for flag in re.findall(r"(?<![\w-])--[a-z][a-z0-9_]*", path.read_text(encoding="utf-8")):
            assert flag in known, f"{path.relative_to(REPO)} mentions unknown flag {flag}"


# ----------------------------------------------------------------------------- library signatures

def test_signature_tables_match_installed_wheel():
    dp = package_dir("dalle_pytorch")
    checked = set()
    for path, kind, target, rows in all_tables():
        if kind != "signature":
            continue
        rel, qualname = target.split()
        assert rel.startswith("dalle_pytorch/")
        sig = signature(find_def(parse_source(dp.parent / rel), qualname))
        documented = {}
        for row in rows:
            (name,) = ticked(row[0])
            documented[name] = cell_default(row[1])
        assert list(documented) == list(sig), f"{path.name} {qualname}: names/order differ"
        for name, want in sig.items():
            got = documented[name]
            assert (got is REQUIRED) if want is REQUIRED else (got == want), \
                f"{path.name} {qualname}.{name}: {got!r} != {want!r}"
        checked.add(qualname)
    assert checked == {"DiscreteVAE.__init__", "DALLE.__init__", "DALLE.generate_images",
                       "DALLE.generate_texts", "CLIP.__init__"}


def test_dalle_is_keyword_only_and_generate_images_has_no_mask_or_kwargs():
    tree = parse_source(package_dir("dalle_pytorch") / "dalle_pytorch.py")
    init = find_def(tree, "DALLE.__init__")
    assert [a.arg for a in init.args.args] == ["self"] and init.args.kwonlyargs
    gen = find_def(tree, "DALLE.generate_images")
    assert gen.args.kwarg is None and "mask" not in signature(gen)
    # README ranking example passes mask=; the docs must call that out
    readme_kws = set(facts()["readme"]["generate_images_keywords"])
    assert "mask" in readme_kws and not (readme_kws - {"mask"}) - set(signature(gen))
    doc = (REPO / "sub-skills/generation-and-ranking/references/clip-reranking.md").read_text()
    assert "unexpected keyword argument 'mask'" in doc


def test_pretrained_vae_facts_in_vae_choices():
    tree = parse_source(package_dir("dalle_pytorch") / "vae.py")
    src = ast.unparse(tree)
    assert signature(find_def(tree, "OpenAIDiscreteVAE.__init__")) == {}
    assert signature(find_def(tree, "VQGanVAE.__init__")) == {"vqgan_model_path": None,
                                                             "vqgan_config_path": None}
    consts = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    assert "~/.cache/dalle" in consts and "1.11.0" in consts
    assert {"https://cdn.openai.com/dall-e/encoder.pkl", "https://cdn.openai.com/dall-e/decoder.pkl"} <= consts
    assert any("heibox.uni-heidelberg.de" in c for c in consts)
    assert {"vqgan.1024.model.ckpt", "vqgan.1024.config.yml"} <= consts
    assert "model.load_state_dict(state, strict=False)" in src
    assert "self.image_size = 256" in ast.unparse(find_def(tree, "VQGanVAE.__init__"))
    doc = (REPO / "sub-skills/vae-training/references/vae-choices.md").read_text()
    for needle in ("~/.cache/dalle", "https://cdn.openai.com/dall-e/", "heibox.uni-heidelberg.de",
                   "vqgan.1024.config.yml", "vqgan.1024.model.ckpt", "strict=False", "older than 1.11"):
        assert needle in doc, needle
    init = ast.unparse(parse_source(package_dir("dalle_pytorch") / "__init__.py"))
    assert "from pkg_resources import get_distribution" in init


def test_tokenizer_facts():
    tree = parse_source(package_dir("dalle_pytorch") / "tokenizer.py")
    top_imports = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            top_imports.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            top_imports.add(node.module.split(".")[0])
    assert {"youtokentome", "tokenizers", "transformers", "ftfy", "regex"} <= top_imports

    def assigns_self_tokenizer(cls: str) -> bool:
        return any(isinstance(n, ast.Attribute) and n.attr == "tokenizer" and isinstance(n.ctx, ast.Store)
                   for n in ast.walk(find_def(tree, cls)))
    assert not assigns_self_tokenizer("SimpleTokenizer")
    assert not any(isinstance(n, ast.FunctionDef) and n.name == "__getattr__"
                   for n in ast.walk(find_def(tree, "SimpleTokenizer")))
    for cls in ("HugTokenizer", "ChineseTokenizer", "YttmTokenizer"):
        assert assigns_self_tokenizer(cls), cls
    assert "self.vocab_size = 49408" in ast.unparse(find_def(tree, "SimpleTokenizer.__init__"))
    assert "bert-base-chinese" in ast.unparse(find_def(tree, "ChineseTokenizer.__init__"))
    assert any(isinstance(n, ast.Assign) and getattr(n.targets[0], "id", None) == "tokenizer"
               for n in tree.body), "module-level default tokenizer instance"
    gen_texts = ast.unparse(find_def(parse_source(package_dir("dalle_pytorch") / "dalle_pytorch.py"),
                                     "DALLE.generate_texts"))
    assert "tokenizer.tokenizer.encode(" in gen_texts and "tokenizer.tokenizer.decode(" in gen_texts
    assert facts()["scripts"]["generate.py"]["generate_texts_keywords"] == [["filter_thres", "text"]]


def test_top_k_flag_is_a_fraction_threshold():
    gen = facts()["scripts"]["generate.py"]
    top_k = next(r for r in gen["flags"] if r["flags"] == ["--top_k"])
    assert top_k["type"] == "float" and top_k["default"] == 0.9
    assert gen["generate_images_keywords"] == [["filter_thres"]]
    func = ast.unparse(find_def(parse_source(package_dir("dalle_pytorch") / "dalle_pytorch.py"), "top_k"))
    assert "k = max(int((1 - thres) * num_logits), 1)" in func
    # the documented examples of the arithmetic
    for thres, share in ((0.9, 0.10), (0.99, 0.01), (0.5, 0.5), (0.0, 1.0)):
        assert max(int((1 - thres) * 10000), 1) == pytest.approx(share * 10000, abs=1)


def test_dalle_script_vs_class_defaults():
    f = facts()["scripts"]["train_dalle.py"]
    cls = signature(find_def(parse_source(package_dir("dalle_pytorch") / "dalle_pytorch.py"), "DALLE.__init__"))
    assert set(f["dalle_params_keys"]) <= set(cls), "script passes an argument DALLE lacks"
    flags = {r["dest"]: r for r in f["flags"]}
    assert cls["shift_tokens"] is True and flags["shift_tokens"]["default"] is False
    assert cls["rotary_emb"] is True and flags["rotary_emb"]["default"] is False
    assert cls["depth"] is REQUIRED and flags["depth"]["default"] == 2
    assert cls["num_text_tokens"] == 10000
    assert {"sparse_attn", "sandwich_norm", "optimize_for_inference"}.isdisjoint(f["dalle_params_keys"])
    transformer = ast.unparse(parse_source(package_dir("dalle_pytorch") / "transformer.py"))
    for attn in ("'full'", "'sparse'", "'axial_row'", "'axial_col'", "'conv_like'"):
        assert f"attn_type == {attn}" in transformer


def test_train_vae_facts_used_by_the_docs():
    f = facts()["scripts"]["train_vae.py"]
    assert ["normalize", "nrow", "range"] in f["make_grid_keywords"]
    assert f["saved_files"] == ["./vae-final.pt", "./vae.pt"]
    assert f["wandb_projects"] == ["dalle_train_vae"]
    dvae = signature(find_def(parse_source(package_dir("dalle_pytorch") / "dalle_pytorch.py"),
                              "DiscreteVAE.__init__"))
    assert set(f["vae_params_keys"]) <= set(dvae)
    assert set(f["discrete_vae_extra_keywords"][0]) <= set(dvae)
    doc = (REPO / "sub-skills/vae-training/references/train-vae-script.md").read_text()
    for key in f["vae_params_keys"]:
        assert f"`{key}`" in doc, key
    assert "distributed-backends.md#break-make-grid" in doc  # the fix is stated once, in the owner
    owner = (REPO / "sub-skills/distributed-and-backends/references/distributed-backends.md").read_text()
    assert "change `range` to `value_range` (PR #459, open)" in owner


def test_train_dalle_checkpoint_keys_are_documented():
    f = facts()["scripts"]["train_dalle.py"]
    doc = (REPO / "sub-skills/dalle-training/references/checkpoints-and-resume.md").read_text()
    for key in f["save_obj_keys"] + ["weights", "opt_state", "scheduler_state"]:
        assert f"| `{key}` |" in doc, key
    assert f["aux_filename"] == ["auxiliary.pt"]


def test_lr_decay_verbose_keyword_rejected_by_installed_torch():
    f = facts()["scripts"]["train_dalle.py"]
    assert f["reduce_lr_on_plateau_keywords"] == [["cooldown", "factor", "min_lr", "mode", "patience", "verbose"]]
    init = find_def(parse_source(package_dir("torch") / "optim" / "lr_scheduler.py"), "ReduceLROnPlateau.__init__")
    assert init.args.kwarg is None and "verbose" not in signature(init)


def test_generate_outputs_and_readme_disagreements():
    f = facts()
    gen = f["scripts"]["generate.py"]
    assert gen["output_file_patterns"] == [".png", "caption.txt"]
    assert gen["save_image_keywords"] == [["normalize"]]
    assert gen["torch_load_keywords"] == [[]]  # no map_location
    assert f["readme"]["generate_flags_shown"] == ["--gentext"]
    assert f["readme"]["generate_output_pattern"][0].endswith(".jpg")
    doc = (REPO / "sub-skills/generation-and-ranking/references/generate-script.md").read_text()
    assert "--gentext" in doc and "`--gentxt`" in doc and ".jpg" in doc and "PNG" in doc

    parser = argparse.ArgumentParser(exit_on_error=False)
    for rec in gen["flags"]:
        kwargs = {"dest": rec["dest"], "required": rec["required"]}
        if rec["action"]:
            kwargs["action"] = rec["action"]
        parser.add_argument(*rec["flags"], **kwargs)
    ok = parser.parse_args(["--dalle_path", "d.pt", "--text", "a|b", "--gentxt"])
    assert ok.gentxt is True
    with pytest.raises(SystemExit):  # README: --gentext is not a flag
        with _quiet():
            parser.parse_args(["--dalle_path", "d.pt", "--text", "a", "--gentext"])
    with pytest.raises((SystemExit, argparse.ArgumentError)):  # README: no --dalle_path
        with _quiet():
            parser.parse_args(["--chinese", "--text", "x"])


class _quiet:
    def __enter__(self):
        import io
        self._err, sys.stderr = sys.stderr, io.StringIO()

    def __exit__(self, *exc):
        sys.stderr = self._err
        return False


# ----------------------------------------------------------------------------- examples

def _parser_for(script: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(exit_on_error=False, add_help=False)
    recs = list(facts()["scripts"][script]["flags"])
    if facts()["scripts"][script]["calls_wrap_arg_parser"]:
        for names, rec in wrap_arg_parser_flags().items():
            recs.append({"flags": list(names), "dest": None, "required": False,
                         "action": "store_true" if rec["type"] == "store_true" else None})
    group = p.add_mutually_exclusive_group() if script == "train_dalle.py" else None
    for rec in recs:
        kwargs = {"required": rec["required"]}
        if rec.get("dest"):
            kwargs["dest"] = rec["dest"]
        if rec["action"]:
            kwargs["action"] = rec["action"]
        target = group if group is not None and rec["flags"][0] in ("--vae_path", "--dalle_path") else p
        target.add_argument(*rec["flags"], **kwargs)
    return p


def code_blocks(text: str):
    for m in re.finditer(r"```(\w*)\n(.*?)```", text, re.S):
        yield m.group(1), m.group(2)


def test_shell_examples_parse_with_the_scripts_flags():
    n = 0
    for path in doc_paths():
        for lang, body in code_blocks(path.read_text(encoding="utf-8")):
            if lang != "bash":
                continue
            for line in body.splitlines():
                line = line.split("#", 1)[0].strip()
                m = re.match(r"python (train_vae\.py|train_dalle\.py|generate\.py)\s+(.*)", line)
                if not m:
                    continue
                import shlex
                args = shlex.split(m.group(2))
                _parser_for(m.group(1)).parse_args(args)
                n += 1
    assert n >= 5


def test_python_examples_parse_and_use_real_argument_names():
    dp = package_dir("dalle_pytorch")
    tree = parse_source(dp / "dalle_pytorch.py")
    sigs = {"generate_images": signature(find_def(tree, "DALLE.generate_images")),
            "CLIP": signature(find_def(tree, "CLIP.__init__")),
            "DALLE": signature(find_def(tree, "DALLE.__init__")),
            "DiscreteVAE": signature(find_def(tree, "DiscreteVAE.__init__")),
            "tokenize": signature(find_def(parse_source(dp / "tokenizer.py"), "SimpleTokenizer.tokenize"))}
    n = 0
    for path in doc_paths():
        for lang, body in code_blocks(path.read_text(encoding="utf-8")):
            if lang != "python":
                continue
            mod = ast.parse(textwrap.dedent(body))
            for node in ast.walk(mod):
                if isinstance(node, ast.Call):
                    name = getattr(node.func, "attr", None) or getattr(node.func, "id", None)
                    if name in sigs:
                        kws = {k.arg for k in node.keywords if k.arg}
                        assert kws <= set(sigs[name]), f"{path.name}: {name} got {kws - set(sigs[name])}"
                        n += 1
    assert n >= 5


def test_plain_checkpoints_load_with_torch_default_weights_only(python_exe):
    """Structure of train_dalle.py / train_vae.py checkpoints survives torch.load defaults."""
    f = facts()["scripts"]
    code = textwrap.dedent(f"""
        import io, torch
        from torch.optim import Adam
        from torch.optim.lr_scheduler import ReduceLROnPlateau
        m = torch.nn.Linear(4, 4); opt = Adam(m.parameters(), lr=3e-4)
        m(torch.randn(2, 4)).sum().backward(); opt.step()
        sch = ReduceLROnPlateau(opt, mode="min", factor=0.5, patience=10, cooldown=10, min_lr=1e-6)
        sch.step(1.0)
        hp = {{k: None for k in {f['train_dalle.py']['dalle_params_keys']!r}}}
        hp.update(attn_types=("full",), shared_attn_ids=("0", "1"), text_seq_len=256, stable=False)
        vae_hp = {{k: 1 for k in {f['train_vae.py']['vae_params_keys']!r}}}
        dalle = dict(hparams=hp, vae_params=vae_hp, epoch=3, version="1.6.6",
                     vae_class_name="DiscreteVAE", weights=m.state_dict(),
                     opt_state=opt.state_dict(), scheduler_state=sch.state_dict())
        assert set(dalle) >= set({f['train_dalle.py']['save_obj_keys']!r})
        for obj in (dalle, dict(hparams=vae_hp, weights=m.state_dict())):
            buf = io.BytesIO(); torch.save(obj, buf); buf.seek(0)
            out = torch.load(buf)  # torch 2.13 default: weights_only=True
            assert set(out) == set(obj)
        try:
            ReduceLROnPlateau(opt, verbose=True)
        except TypeError as exc:
            print("verbose rejected:", exc)
        else:
            raise SystemExit("verbose accepted")
        print("ok", torch.__version__)
    """)
    res = subprocess.run([python_exe, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "verbose rejected" in res.stdout and res.stdout.strip().endswith(("ok 2.13.0", "ok 2.13.0+cpu"))


# ----------------------------------------------------------------------------- structure

def _slug(heading: str) -> str:
    s = re.sub(r"`", "", heading.strip()).lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


@pytest.mark.parametrize("sub", SUBS)
def test_sub_skill_front_matter_license_and_links(sub):
    root = REPO / "sub-skills" / sub
    text = (root / "SKILL.md").read_text(encoding="utf-8")
    _, fm, body = text.split("---", 2)
    meta = yaml.safe_load(fm)
    assert meta["name"] == sub
    assert meta["disable-model-invocation"] is True
    assert meta["metadata"] == {"disco-role": "operating"}
    assert meta["license"] == "MIT"
    desc = meta["description"]
    assert 0 < len(desc) <= 1024 and "<" not in desc and ">" not in desc
    assert (root / "LICENSE").read_text().startswith("MIT License")
    assert len(body.splitlines()) < 500
    assert "../distributed-and-backends/SKILL.md" in body
    for ref in sorted((root / "references").glob("*.md")):
        assert f"(references/{ref.name})" in body, f"{ref.name} not linked from SKILL.md"


def test_references_state_versions_have_tocs_and_valid_anchors():
    for path in doc_paths():
        text = path.read_text(encoding="utf-8")
        if path.name != "SKILL.md":
            assert "Verified against" in text and "58c1e1a" in text, path.name
            if len(text.splitlines()) > 100:
                assert "## Contents" in "\n".join(text.splitlines()[:30]), f"{path.name}: no TOC"
        headings = {_slug(h) for h in re.findall(r"^#{1,6} (.+)$", text, re.M)} | set(re.findall(r'<a id="([^"]+)"', text))
        for target, anchor in re.findall(r"\]\(([^)#\s]*)#([^)]+)\)", text):
            dest = (path.parent / target) if target else path
            assert dest.exists(), f"{path.name}: link target {target} missing"
            dest_heads = headings if not target else {
                _slug(h) for h in re.findall(r"^#{1,6} (.+)$", dest.read_text(encoding="utf-8"), re.M)} | set(
                re.findall(r'<a id="([^"]+)"', dest.read_text(encoding="utf-8")))
            assert anchor in dest_heads, f"{path.name}: anchor #{anchor} not found in {dest.name}"
        for target in re.findall(r"\]\(([^)#\s]+)\)", text):
            assert (path.parent / target).exists(), f"{path.name}: {target} missing"


# ----------------------------------------------------------------------------- data paths

def test_data_pipeline_facts():
    f = facts()["scripts"]
    vae, dalle, gen = f["train_vae.py"], f["train_dalle.py"], f["generate.py"]
    assert {"ImageFolder", "Resize", "CenterCrop", "ExponentialLR", "Adam", "cuda"} <= set(vae["called"])
    assert "set_epoch" not in vae["called"]
    assert dalle["dataloader_keywords"] == [["batch_size", "drop_last", "sampler", "shuffle"]]
    assert dalle["webloader_keywords"] == [["batch_size", "num_workers", "shuffle"]]
    assert dalle["stream_prefixes"] == ["pipe:curl -L -s ", "pipe:gsutil cat "]
    assert {"WebDataset", "select", "map_dict", "to_tuple", "batched", "slice", "RandomResizedCrop",
            "TextImageDataset", "clip_grad_norm_", "StopIteration", "half"} <= set(dalle["called"])
    assert ["map_location"] in dalle["torch_load_keywords"]
    assert "use_cache" not in json.dumps(gen["generate_images_keywords"])
    assert "clip" not in gen["generate_images_keywords"][0]
    loader = parse_source(package_dir("dalle_pytorch") / "loader.py")
    globs = {n.value for n in ast.walk(loader) if isinstance(n, ast.Constant) and isinstance(n.value, str)
             and n.value.startswith("**/")}
    assert globs == {"**/*.txt", "**/*.png", "**/*.jpg", "**/*.jpeg", "**/*.bmp"}
    init_src = ast.unparse(find_def(loader, "TextImageDataset.__init__"))
    assert "text_file.stem: text_file" in init_src and "image_file.stem: image_file" in init_src
    doc = (REPO / "sub-skills/dalle-training/references/data-and-tokenizers.md").read_text()
    for needle in ("`*.png`, `*.jpg`, `*.jpeg`, `*.bmp`", "`*.txt`", "stem", "`drop_last=True`",
                   "curl -L -s", "gsutil cat", "4 workers"):
        assert needle in doc, needle


# ----------------------------------------------------------------------------- quoted messages

def _wheel_text(name: str) -> str:
    return (package_dir("dalle_pytorch") / name).read_text(encoding="utf-8")


# (document, fragment quoted in it, where the fragment must occur)
QUOTED = [
    ("vae-training/references/train-vae-script.md", "folder does not contain any images", "train_vae.py"),
    ("vae-training/references/train-vae-script.md", "image size must be a power of 2", "dalle_pytorch.py"),
    ("dalle-training/references/data-and-tokenizers.md", "dataset is empty", "train_dalle.py"),
    ("dalle-training/references/data-and-tokenizers.md", "No folder, no .tar(.gz) and no url", "train_dalle.py"),
    ("dalle-training/references/data-and-tokenizers.md", "is too long for context length", "tokenizer.py"),
    ("dalle-training/references/train-dalle-flags.md", "is too long for context length", "tokenizer.py"),
    ("dalle-training/references/checkpoints-and-resume.md", "is too long for context length", "tokenizer.py"),
    ("dalle-training/references/checkpoints-and-resume.md", "torch version must be <= 1.10", "vae.py"),
    ("dalle-training/references/dalle-model-arguments.md", "is not valid", "transformer.py"),
    ("generation-and-ranking/references/generate-script.md", "created ", "generate.py"),
    ("generation-and-ranking/references/generate-script.md", " images at \"", "generate.py"),
]


@pytest.mark.parametrize("doc,fragment,source", QUOTED)
def test_quoted_messages_exist_in_source(doc, fragment, source):
    assert fragment in (REPO / "sub-skills" / doc).read_text(encoding="utf-8")
    scripts = facts()["scripts"]
    if source in scripts:
        assert any(fragment in m for m in scripts[source]["messages"]), (source, fragment)
    else:
        assert fragment in _wheel_text(source), (source, fragment)


def test_train_dalle_never_trains_with_null_cond_prob():
    f = facts()["scripts"]["train_dalle.py"]
    assert f["model_call_keywords"] == [["return_loss"]]
    fwd = signature(find_def(parse_source(package_dir("dalle_pytorch") / "dalle_pytorch.py"), "DALLE.forward"))
    assert fwd["null_cond_prob"] == 0.0
    doc = (REPO / "sub-skills/generation-and-ranking/references/clip-reranking.md").read_text()
    assert "`null_cond_prob > 0`, which `train_dalle.py` never sets" in doc


# ----------------------------------------------------------------------------- audit additions

def _table_rows(text: str, first_cell_prefix: str) -> list[list[str]]:
    return [split_row(l) for l in text.splitlines()
            if l.startswith("| " + first_cell_prefix)]


def test_top_k_keeps_a_share_of_the_whole_vocabulary_not_of_image_codes():
    """generate-script.md's table: k is taken over text+image logits; text logits are masked at
    image positions, so the image codes kept are min(k, num_tokens)."""
    src = ast.unparse(parse_source(package_dir("dalle_pytorch") / "dalle_pytorch.py"))
    # DALLE widens the text vocabulary by text_seq_len and the logits cover text + image tokens
    assert "num_text_tokens = num_text_tokens + text_seq_len" in src
    assert "total_tokens = num_text_tokens + num_image_tokens" in src
    assert "nn.Linear(dim, self.total_tokens)" in src
    gen = ast.unparse(find_def(parse_source(package_dir("dalle_pytorch") / "dalle_pytorch.py"),
                               "DALLE.generate_images"))
    assert "logits = logits[:, -1, :]" in gen and "top_k(logits, thres=filter_thres)" in gen
    tok = ast.unparse(parse_source(package_dir("dalle_pytorch") / "tokenizer.py"))
    assert "self.vocab_size = 49408" in tok
    doc = (REPO / "sub-skills/generation-and-ranking/references/generate-script.md").read_text()
    text_vocab = 49408 + 256
    for label, codes in (("`DiscreteVAE` with 8192", 8192), ("`VQGanVAE` default", 1024),
                         ("`OpenAIDiscreteVAE`", 8192)):
        n = text_vocab + codes
        k = max(int((1 - 0.9) * n), 1)  # same expression as dalle_pytorch.top_k
        (row,) = _table_rows(doc, label)
        assert row[1] == str(n) and row[2] == str(k), (label, row)
        kept = min(k, codes)
        if kept == codes:
            assert row[3].startswith(f"all {codes}"), row
        else:
            assert row[3].startswith(f"{kept} of {codes} ({round(100 * kept / codes)} %)"), row
    # the recipe for a 10 % share of the default VQGAN codes
    thres = 1 - 0.1 * 1024 / (text_vocab + 1024)
    assert f"about {thres:.3f}" in doc


def test_deepspeed_config_flag_conflicts_with_the_scripts_config_dict():
    """Both scripts always pass config_params; the wheel forwards it to deepspeed.initialize,
    which asserts when args.deepspeed_config is also set."""
    for script in ("train_vae.py", "train_dalle.py"):
        (kws,) = facts()["scripts"][script]["distribute_keywords"]
        assert "config_params" in kws and "args" in kws, script
    backend = ast.unparse(find_def(
        parse_source(package_dir("dalle_pytorch") / "distributed_backends" / "deepspeed_backend.py"),
        "DeepSpeedBackend._distribute"))
    assert "self.backend_module.initialize(" in backend and "**kwargs" in backend
    init = ast.unparse(find_def(parse_source(package_dir("deepspeed") / "__init__.py"), "initialize"))
    assert "if config is None and config_params is not None:" in init
    assert "assert config is None, 'Not sure how to proceed, we were given deepspeed configs" in init
    for doc in ("vae-training/references/train-vae-script.md", "dalle-training/references/train-dalle-flags.md"):
        (row,) = _table_rows((REPO / "sub-skills" / doc).read_text(), "`--deepspeed_config`")
        assert "Do not pass it" in row[3] and "distributed-backends.md#break-ds-config" in row[3]
    # the assertion message and its fix are stated once, in DALLE-pytorch's distributed-and-backends
    owner = " ".join((REPO / "sub-skills/distributed-and-backends/references/distributed-backends.md").read_text().split())
    assert "`AssertionError: Not sure how to proceed, we were given deepspeed configs in the deepspeed arguments and deepspeed.initialize() function call`" in owner
    assert "never pass `--deepspeed_config`/`--deepscale_config` to these scripts; edit the dict" in owner


def test_sparse_attention_needs_an_op_deepspeed_no_longer_ships():
    attn = ast.unparse(find_def(parse_source(package_dir("dalle_pytorch") / "attention.py"), "SparseAttention"))
    assert "from deepspeed.ops.sparse_attention import" in attn
    assert not (package_dir("deepspeed") / "ops" / "sparse_attention").exists()
    fwd = signature(find_def(parse_source(package_dir("dalle_pytorch") / "attention.py"), "SparseAttention.forward"))
    assert "cache" not in fwd  # CachedAs always passes cache=, hence #416
    base = signature(find_def(parse_source(package_dir("dalle_pytorch") / "attention.py"), "Attention.forward"))
    assert "cache" in base
    transformer = ast.unparse(parse_source(package_dir("dalle_pytorch") / "transformer.py"))
    assert "if isinstance(attn, Attention):\n                attn = CachedAs(" in transformer


def test_decode_value_ranges_per_vae():
    dp = parse_source(package_dir("dalle_pytorch") / "dalle_pytorch.py")
    fwd = ast.unparse(find_def(dp, "DiscreteVAE.forward"))
    # the decoder is trained against the normalized input ...
    assert "img = self.norm(img)" in fwd and "recon_loss = self.loss_fn(img, out)" in fwd
    # ... and decode returns the decoder output as is (no de-normalization, no clamp)
    dec = ast.unparse(find_def(dp, "DiscreteVAE.decode"))
    assert "self.decoder(image_embeds)" in dec and "norm" not in dec and "clamp" not in dec
    vae = parse_source(package_dir("dalle_pytorch") / "vae.py")
    assert "img = (img.clamp(-1.0, 1.0) + 1) * 0.5" in ast.unparse(find_def(vae, "VQGanVAE.decode"))
    assert "unmap_pixels(torch.sigmoid(" in ast.unparse(find_def(vae, "OpenAIDiscreteVAE.decode"))
    assert "torch.clamp(" in ast.unparse(find_def(vae, "unmap_pixels"))
    gen = ast.unparse(find_def(dp, "DALLE.generate_images"))
    assert "img.shape[1] == 3" in gen and "images = vae.decode(img_seq)" in gen
    doc = (REPO / "sub-skills/generation-and-ranking/references/clip-reranking.md").read_text()
    (row,) = _table_rows(doc, "`DiscreteVAE` |")
    assert "`[-1, 1]`" in row[1] and "does not undo `norm`" in row[1]
    assert "Asserts 3 channels" in doc
    clip_fwd = ast.unparse(find_def(dp, "CLIP.forward"))
    assert "self.visual_pos_emb(torch.arange(image_emb.shape[1]" in clip_fwd


def test_wheel_dependencies_named_in_the_docs():
    import importlib.metadata as md
    reqs = {re.split(r"[\s(<>=;\[]", r, maxsplit=1)[0].lower() for r in md.requires("dalle-pytorch") or []}
    assert "wandb" not in reqs and {"webdataset", "dall-e", "youtokentome", "taming-transformers-rom1504"} <= reqs
    skill = (REPO / "sub-skills/dalle-training/SKILL.md").read_text()
    assert "pip install wandb && wandb login" in skill and "not a dalle-pytorch dependency" in skill
    assert "`WebDataset` is" in (REPO / "sub-skills/dalle-training/references/checkpoints-and-resume.md").read_text()


def test_batch_size_is_deepspeeds_global_train_batch_size():
    for script, doc in (("train_vae.py", "vae-training/references/train-vae-script.md"),
                        ("train_dalle.py", "dalle-training/references/train-dalle-flags.md")):
        assert "train_batch_size" in facts()["scripts"][script]["deepspeed_config_keys"], script
        (row,) = _table_rows((REPO / "sub-skills" / doc).read_text(), "`--batch_size`")
        assert "global `train_batch_size`" in row[3] and "Horovod it is per process" in row[3], doc
    assert "gradient_accumulation_steps" in facts()["scripts"]["train_dalle.py"]["deepspeed_config_keys"]


def test_token_id_zero_is_padding_everywhere():
    fwd = ast.unparse(find_def(parse_source(package_dir("dalle_pytorch") / "dalle_pytorch.py"), "DALLE.forward"))
    assert "text = torch.where(text == 0, text_range, text)" in fwd
    tok = parse_source(package_dir("dalle_pytorch") / "tokenizer.py")
    for cls in ("HugTokenizer", "ChineseTokenizer", "YttmTokenizer"):
        assert "{0}" in ast.unparse(find_def(tok, f"{cls}.decode")), cls
        assert "torch.zeros(len(all_tokens), context_length" in ast.unparse(find_def(tok, f"{cls}.tokenize"))
    doc = (REPO / "sub-skills/dalle-training/references/data-and-tokenizers.md").read_text()
    assert "`DALLE.forward` turns every 0 into a padding id" in doc


def test_text_seq_len_flag_still_drives_the_loader_on_resume():
    f = facts()["scripts"]["train_dalle.py"]
    assert f["text_seq_len_assignments"] == ["args.text_seq_len"]
    (ds_kw,) = f["text_image_dataset_keywords"]
    assert ds_kw["text_len"] == "TEXT_SEQ_LEN"
    fwd = ast.unparse(find_def(parse_source(package_dir("dalle_pytorch") / "dalle_pytorch.py"), "DALLE.forward"))
    assert "assert text.shape[-1] == self.text_seq_len" in fwd
    assert "does not have the correct length" in fwd
    for doc in ("SKILL.md", "references/checkpoints-and-resume.md", "references/train-dalle-flags.md"):
        text = (REPO / "sub-skills/dalle-training" / doc).read_text()
        assert "`--text_seq_len`" in text and ("repeat" in text or "match" in text), doc


def test_vae_temperature_reaches_floor_where_documented():
    import math
    f = {r["dest"]: r["default"] for r in facts()["scripts"]["train_vae.py"]["flags"]}
    temp, step = f["starting_temp"], 0
    while temp > f["temp_min"]:  # the script's update, applied at i % 100 == 0
        temp = max(temp * math.exp(-f["anneal_rate"] * step), f["temp_min"])
        if temp <= f["temp_min"]:
            break
        step += 100
    doc = (REPO / "sub-skills/vae-training/references/train-vae-script.md").read_text()
    assert f"after about {step:,} steps" in doc, step


def test_dataloaders_have_no_workers_as_documented():
    s = facts()["scripts"]
    for script, doc in (("train_vae.py", "vae-training/references/train-vae-script.md"),
                        ("train_dalle.py", "dalle-training/references/data-and-tokenizers.md")):
        (kws,) = s[script]["dataloader_keywords"]
        assert "num_workers" not in kws, script
        assert re.search(r"no\s+`num_workers`", (REPO / "sub-skills" / doc).read_text()), doc


def test_training_samples_an_image_every_100_iterations():
    f = facts()["scripts"]["train_dalle.py"]
    assert f["generate_images_keywords"] == [["filter_thres"]]  # no use_cache
    flags = {n for r in f["flags"] for n in r["flags"]}
    assert not any("sample" in n or "log_image" in n for n in flags)
    doc = (REPO / "sub-skills/dalle-training/references/train-dalle-flags.md").read_text()
    assert "generate_images(text[:1], filter_thres=0.9)" in doc and "no flag turns it off" in doc

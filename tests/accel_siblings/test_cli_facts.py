"""Every command, flag, env var and API name the three Accelerate sibling sub-skills state is
checked against accelerate 1.15.0 itself: its argument parsers, its launch merge code, its
source text, and import resolution. accelerate is imported only in one subprocess
(`_cli_oracle.py`), never in the pytest process."""
from __future__ import annotations

import ast
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

SKILLS = ("configuration-and-cli", "training-loop-integration", "checkpointing-and-tracking")
ORACLE = Path(__file__).with_name("_cli_oracle.py")

FENCE_RE = re.compile(r"^\s*```(\w*)")
HEADING_RE = re.compile(r"^(#{1,6})\s+(.*)$")
SPAN_RE = re.compile(r"`([^`]+)`")
CMD_RE = re.compile(r"\baccelerate ((?:config (?:default|update)\b)|[a-z][a-z0-9-]*)")
FLAG_RE = re.compile(r"(?<![\w-])(--[a-z][a-z0-9_-]*|-[a-z])\b")
ENV_RE = re.compile(r"^(ACCELERATE|FSDP|HF|XDG|KMP|OMP|MASTER|CUDA|LOCAL|WORLD|PARALLELISM|TORCH)_[A-Z0-9_]+$")
API_HEADS = ("accelerate", "Accelerator", "accelerator", "ProjectConfiguration", "DataLoaderConfiguration",
             "GradientAccumulationPlugin", "AutocastKwargs", "GeneralTracker", "PartialState", "LoggerType")
API_RE = re.compile(r"^(?:%s)(?:\.\w+)+$|^(?:%s)$" % ("|".join(API_HEADS), "|".join(API_HEADS[1:])))
CALL_RE = re.compile(r"\b((?:%s)(?:\.\w+)*)\(([^()]*)\)" % "|".join(API_HEADS))
KW_RE = re.compile(r"(?:^|,)\s*(\w+)\s*=")


def docs(repo_root: Path) -> list[Path]:
    out = []
    for skill in SKILLS:
        base = repo_root / "sub-skills" / skill
        out += [base / "SKILL.md", *sorted((base / "references").glob("*.md"))]
    return out


def segments(md: Path):
    """(line number, heading command context, [code segments on that line], fenced language)."""
    ctx_by_level: dict[int, str | None] = {}
    in_fence, lang = False, ""
    for n, line in enumerate(md.read_text().splitlines(), 1):
        m = FENCE_RE.match(line)
        if m:
            in_fence, lang = (not in_fence), m.group(1)
            continue
        heading_ctx = next((ctx_by_level[k] for k in sorted(ctx_by_level, reverse=True)
                            if ctx_by_level[k]), None)
        if in_fence:
            yield n, heading_ctx, [line], lang
            continue
        h = HEADING_RE.match(line)
        if h:
            level = len(h.group(1))
            for k in [k for k in ctx_by_level if k >= level]:
                del ctx_by_level[k]
            cm = CMD_RE.search(h.group(2))
            ctx_by_level[level] = cm.group(1) if cm else None
            continue
        spans = SPAN_RE.findall(line)
        if spans:
            yield n, heading_ctx, spans, ""


def script_options(path: Path) -> set[str]:
    text = path.read_text()
    return set(re.findall(r"""["'](--?[a-z][\w-]*)["']""", text))


def dotted(node) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *reversed(parts)])
    return None


def ast_calls(code: str, where: str) -> list:
    """Calls with keyword arguments in a Python block, also when they span several lines."""
    out = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Call):
            name = dotted(node.func)
            if name and name.split(".")[0] in API_HEADS and node.keywords:
                out.append((name, [k.arg for k in node.keywords if k.arg], where))
    return out


@pytest.fixture(scope="session")
def doc_facts(repo_root):
    """Everything the docs name, with the context needed to check it."""
    flags, commands, envs, apis, calls, code_blocks = [], [], set(), set(), [], []
    for md in docs(repo_root):
        rel = md.relative_to(repo_root)
        block: list[str] = []
        for n, heading_ctx, segs, lang in segments(md):
            where = f"{rel}:{n}"
            if lang == "sbatch":  # a SLURM batch script (srun/head/bash flags): tests/jobspec/test_doc_recipes.py
                continue
            if lang == "python":
                block.append(segs[0])
            state = heading_ctx
            for seg in segs:
                for tok in seg.replace("\\", " ").split():
                    tok_clean = tok.strip("(),;|")
                    if ENV_RE.match(tok_clean.split("=")[0]):
                        envs.add((tok_clean.split("=")[0], where))
                    if API_RE.match(tok_clean.split("(")[0]):
                        apis.add(tok_clean.split("(")[0])
                # walk tokens in order: `accelerate X` sets the command, `x.py` sets a script
                # `mpirun`/`mpiexec` hand the flags after them to MPI, not accelerate; `gcloud`'s are its own
                # `python -m torch.distributed.run` / `deepspeed --x` (the argv accelerate starts,
                # launch-child-environment.md) hand the flags after them to torchrun / deepspeed's runner
                for m in re.finditer(r"accelerate (config (?:default|update)\b|[a-z][a-z0-9-]*)|(\S+\.py)\b|"
                                     r"\b(mpirun|mpiexec|gcloud)\b|(?:python -m )?\b(torch\.distributed\.run)\b|"
                                     r"\b(deepspeed)(?= --)|" + FLAG_RE.pattern.replace("(--", "(?P<flag>--", 1), seg):
                    if m.group(4):
                        state = "script:run.py"
                    elif m.group(5):
                        state = "script:runner.py"
                    elif m.group(3):
                        state = "external:" + m.group(3)
                    elif m.group(1):
                        state = m.group(1)
                        commands.append((state, where))
                    elif m.group(2):
                        state = "script:" + Path(m.group(2)).name
                    else:
                        flags.append((m.group("flag"), state, where))
                for cm in CALL_RE.finditer(seg):
                    calls.append((cm.group(1), KW_RE.findall(cm.group(2)), where))
        if block:
            code_blocks.append((str(rel), "\n".join(block)))
            calls += ast_calls("\n".join(block), str(rel))
    return {"flags": flags, "commands": commands, "envs": sorted(envs), "apis": sorted(apis),
            "calls": calls, "python_blocks": code_blocks}


@pytest.fixture(scope="session")
def oracle(doc_facts, tmp_path_factory, sandbox):
    work = tmp_path_factory.mktemp("cli-oracle")
    request = {
        "api": doc_facts["apis"] + [c[0] for c in doc_facts["calls"]],
        "calls": [[name, kws] for name, kws, _ in doc_facts["calls"] if kws],
    }
    env = sandbox(work / "sandbox", use_cpu=False)  # private HOME/HF_HOME/TMPDIR, offline
    proc = subprocess.run([sys.executable, str(ORACLE), str(work)], input=json.dumps(request),
                          capture_output=True, text=True, timeout=120, env=env, cwd=work)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def test_oracle_is_the_pinned_release(oracle):
    assert oracle["accelerate_version"] == "1.15.0"


def test_every_reference_states_verified_versions(repo_root):
    for md in docs(repo_root):
        assert "1.15.0" in md.read_text(), f"{md} does not state the accelerate version it was verified against"


def test_docs_name_only_real_commands(doc_facts, oracle):
    real = set(oracle["commands"])
    bad = [(c, w) for c, w in doc_facts["commands"] if c not in real]
    assert not bad, f"commands that accelerate 1.15.0 does not have: {bad}"
    assert len(doc_facts["commands"]) > 20


def test_every_command_is_documented(repo_root, oracle):
    text = (repo_root / "sub-skills/configuration-and-cli/references/commands.md").read_text()
    missing = [c for c in oracle["commands"] if f"accelerate {c}" not in text]
    assert not missing


def test_every_launch_option_is_documented(repo_root, oracle):
    text = (repo_root / "sub-skills/configuration-and-cli/references/commands.md").read_text()
    documented = set(FLAG_RE.findall(text))
    canonical = {o for group in oracle["launch_groups"].values() for o in group} - {"-h"}
    missing = sorted(canonical - documented)
    assert not missing, f"launch options missing from commands.md: {missing}"


def test_flags_belong_to_their_command(repo_root, doc_facts, oracle):
    cmds = oracle["commands"]
    every = {o for c in cmds.values() for o in c["options"]}
    scripts = {p.name: script_options(p) for s in SKILLS
               for p in (repo_root / "sub-skills" / s / "examples").glob("*.py")}
    # the bundle's own table generators (a Provenance line shows their rerun): options of the
    # generator plus those tests/_generated_blocks.cli parses for it (--check)
    shared = script_options(repo_root / "tests" / "_generated_blocks.py")
    for gen in (repo_root / "tests").glob("*/_*.py"):
        if "gb.cli(" in gen.read_text():
            scripts[gen.name] = script_options(gen) | shared
    ds_zero = Path(importlib.util.find_spec("deepspeed").submodule_search_locations[0]) / "utils" / "zero_to_fp32.py"
    scripts["zero_to_fp32.py"] = script_options(ds_zero)
    # the `deepspeed` launcher, named by its file where a doc shows the flags accelerate hands it
    scripts["runner.py"] = script_options(ds_zero.parents[1] / "launcher" / "runner.py")
    # torchrun (python -m torch.distributed.run), the process accelerate runs in-process
    scripts["run.py"] = script_options(Path(importlib.util.find_spec("torch").submodule_search_locations[0])
                                       / "distributed" / "run.py")
    # the bundle's validator, whose launch-command options configuration-and-cli names
    # (its parser lives in cli_args.py; cli.py keeps the argparse-free fast path)
    vdir = repo_root / "sub-skills/distributed-training-backends/scripts/backend_validator"
    scripts["validate_backend_config.py"] = script_options(vdir / "cli.py") | script_options(vdir / "cli_args.py")
    # the bundle's name and release-change look-up, which the behaviour-changes pages point to
    scripts["lookup.py"] = script_options(repo_root / "scripts" / "lookup.py")
    # the user's own script in commands.md#script-arguments-and-which-parser-complains (set-5 s5-acl-01)
    scripts["train.py"] = {"--config-path"}
    bad = []
    for flag, state, where in doc_facts["flags"]:
        if state is None:
            ok = flag in every
        elif state.startswith("external:"):
            ok = True  # an MPI launcher's own flag (the doc names the launcher before it)
        elif state.startswith("script:"):
            ok = flag in scripts.get(state[7:], set())
        else:
            ok = flag in cmds[state]["options"] if state in cmds else False
        if not ok:
            bad.append((flag, state, where))
    assert not bad, f"flags not accepted by the command they are shown with: {bad}"
    assert len(doc_facts["flags"]) > 150


def test_underscore_options_have_hyphen_aliases(oracle):
    for name, spec in oracle["commands"].items():
        opts = set(spec["options"])
        for o in opts:
            if o.startswith("--") and "_" in o:
                assert o.replace("_", "-") in opts, f"accelerate {name}: {o} has no hyphen spelling"


def test_env_vars_exist_in_source(doc_facts):
    roots = []
    for pkg in ("accelerate", "huggingface_hub"):
        roots.append(Path(importlib.util.find_spec(pkg).submodule_search_locations[0]))
    roots.append(Path(importlib.util.find_spec("torch").submodule_search_locations[0]) / "distributed")
    text = "\n".join(p.read_text(errors="ignore") for r in roots for p in r.rglob("*.py"))
    # names assembled from a prefix (ACCELERATE_FP8_*) or set by deepspeed's import: lookup.py's table,
    # an AST scan of the pinned packages (references/facts/names.json)
    facts = json.loads((Path(__file__).resolve().parents[2] / "references" / "facts" / "names.json").read_text())
    scanned = {e["n"] for e in facts["entries"] if e["s"] in ("accelerate-env", "deepspeed-env")}
    missing = [(e, w) for e, w in doc_facts["envs"]
               if f'"{e}"' not in text and f"'{e}'" not in text and e not in scanned]
    assert not missing, f"environment variables not found as literals in accelerate/hf_hub/torch.distributed: {missing}"
    assert len(doc_facts["envs"]) > 20


def test_api_names_resolve(doc_facts, oracle):
    assert not oracle["api_missing"], f"names that do not resolve in accelerate 1.15.0: {oracle['api_missing']}"
    assert len(doc_facts["apis"]) > 30


def test_keyword_arguments_exist(doc_facts, oracle):
    assert not oracle["bad_kwargs"], f"keyword arguments the callee does not accept: {oracle['bad_kwargs']}"
    assert sum(1 for _, kws, _ in doc_facts["calls"] if kws) > 5


def test_python_blocks_parse(doc_facts):
    assert doc_facts["python_blocks"]
    for rel, code in doc_facts["python_blocks"]:
        ast.parse(code, filename=rel)


def test_precedence_as_documented(oracle):
    p = oracle["precedence"]
    assert p["file_only"] == {"num_processes": 4, "mixed_precision": "fp16", "multi_gpu": True}
    assert p["cli_over_file"] == {"num_processes": 2, "mixed_precision": "no"}
    assert p["nested_file_only"] == "INDUCTOR" and p["nested_cli_over_file"] == "no"
    assert p["default_file_read"] == 4
    assert p["default_file_with_cpu_flag"] == {"num_processes": 0, "mixed_precision": "no"}


def test_keys_never_applied_from_file(oracle):
    assert oracle["precedence"]["ignored_top_level"] == {
        "rdzv_backend": "static", "same_network": False, "enable_cpu_affinity": False,
        "downcast_bf16": False, "tpu_use_sudo": False,
        "main_process_port": 29777,  # control: a key with a None CLI default is applied
    }


def test_config_locations(oracle):
    assert oracle["config_locations"] == {
        "HF_HOME": "/x/hf/accelerate/default_config.yaml",
        "XDG_CACHE_HOME": "/x/xdg/huggingface/accelerate/default_config.yaml",
        "neither": "/x/home/.cache/huggingface/accelerate/default_config.yaml",
    }


def test_config_default_output_matches_docs(repo_root, oracle):
    text = (repo_root / "sub-skills/configuration-and-cli/references/config-file-and-precedence.md").read_text()
    para = text.split("`accelerate config default` on a CPU-only host writes", 1)[1].split("\n\n", 1)[0]
    documented = dict(re.findall(r"`(\w+): ([^`]+)`", para))
    actual = {k: (str(v).lower() if isinstance(v, bool) else str(v))
              for k, v in json.loads(oracle["basic_config_text"]).items()}
    assert documented == actual


def test_simple_launcher_env_as_documented(repo_root, oracle):
    text = (repo_root / "sub-skills/configuration-and-cli/references/config-file-and-precedence.md").read_text()
    for var in oracle["simple_env_keys"]:
        if var not in ("MASTER_ADDR", "MASTER_PORT"):
            assert f"`{var}`" in text, f"{var} is exported by the simple launcher but not documented"


def test_abbreviation_and_conflicts(oracle):
    assert oracle["launch_abbrev_refused"] is True
    assert "only use one of" in oracle["cpu_and_multi_gpu_error"]


def test_tracker_table_matches_accelerate(repo_root, oracle):
    text = (repo_root / "sub-skills/checkpointing-and-tracking/references/trackers.md").read_text()
    rows = re.findall(r"^\| `(\w+)` \| .* \| (yes|no) \|$", text, flags=re.M)
    assert {name: need == "yes" for name, need in rows} == {
        name: spec["requires_logging_directory"] for name, spec in oracle["trackers"].items()}
    assert sorted(oracle["logger_types"]) == sorted(["all", *oracle["trackers"]])


def test_missing_tracker_package_is_dropped_silently(oracle):
    assert oracle["tensorboard_dropped"] == (not oracle["tensorboard_available"])


def test_missing_tracker_warning_as_documented(repo_root, oracle):
    """trackers.md: a missing package is dropped quietly unless no tracker is left, then one warning."""
    assert not oracle["tensorboard_available"], "the pinned test environment has no tensorboard"
    only_missing, one_left = oracle["tracker_warnings_only_missing"], oracle["tracker_warnings_one_left"]
    assert len(only_missing) == 1 and one_left == []
    text = " ".join((repo_root / "sub-skills/checkpointing-and-tracking/references/trackers.md").read_text().split())
    quoted = re.search(r'"`log_with=\.\.\.` (was passed but no supported trackers are currently installed)"', text)
    assert quoted and quoted.group(1) in only_missing[0]
    assert "drops tensorboard without a word" in text


def test_example_paths_named_in_docs_exist(repo_root):
    for md in docs(repo_root):
        skill_dir = md.parent if md.name == "SKILL.md" else md.parent.parent
        for tok in re.findall(r"([\w./-]*examples/\w+\.py)", md.read_text()):
            assert any((base / tok).is_file() for base in (md.parent, skill_dir, repo_root)), f"{md}: {tok}"


def test_deepspeed_zero_to_fp32_functions_exist(repo_root):
    src = Path(importlib.util.find_spec("deepspeed").submodule_search_locations[0]) / "utils" / "zero_to_fp32.py"
    defined = {n.name: [a.arg for a in n.args.args] for n in ast.walk(ast.parse(src.read_text()))
               if isinstance(n, ast.FunctionDef)}
    text = (repo_root / "sub-skills/checkpointing-and-tracking/references/checkpointing.md").read_text()
    named = re.findall(r"deepspeed\.utils\.zero_to_fp32\.(\w+)\(([^)]*)\)", text)
    assert len(named) == 2
    for fn, args in named:
        assert fn in defined, fn
        for arg in [a.strip() for a in args.split(",") if a.strip()]:
            assert arg in defined[fn], (fn, arg)


def test_config_loading_rules(oracle):
    lo = oracle["loading"]
    assert lo["minimal_no"] == {"compute_environment": "LOCAL_MACHINE", "num_processes": 1}
    assert lo["missing_distributed_type"].startswith("ValueError") and "distributed_type" in lo["missing_distributed_type"]
    assert "unknown keys" in lo["unknown_top_level_key"] and "not_a_key" in lo["unknown_top_level_key"]
    assert lo["unknown_nested_key_error"] == ""  # nested blocks are never key-checked
    assert lo["json_in_yaml"] == ""


def test_console_scripts_as_documented(repo_root):
    from importlib.metadata import distribution

    scripts = sorted(ep.name for ep in distribution("accelerate").entry_points if ep.group == "console_scripts")
    text = (repo_root / "sub-skills/configuration-and-cli/references/commands.md").read_text()
    line = text.split("Console scripts installed by the wheel:", 1)[1].split("\n\n", 1)[0]
    assert sorted(re.findall(r"`([\w-]+)`", line)) == scripts


def test_stale_iteration_trap_as_documented(repo_root, oracle):
    """checkpointing.md: without total_limit the next save raises; with it, pruning comes first."""
    none, limited = oracle["stale_iteration"]["none"], oracle["stale_iteration"]["2"]
    assert none[0][0].endswith("already exists"), none
    assert limited[0] == ["ok", ["checkpoint_0", "checkpoint_1"]], limited
    assert limited[1][0].endswith("already exists") and limited[1][1] == ["checkpoint_1"], limited
    text = " ".join((repo_root / "sub-skills/checkpointing-and-tracking/references/checkpointing.md").read_text().split())
    assert "pruning runs **before** that check" in text
    assert "leaving only `checkpoint_1`" in text


DEFAULT_TABLES = {  # class -> reference whose "| Field | Default | Meaning |" table lists it
    "DataLoaderConfiguration": "training-loop-integration/references/training-loop.md",
    "GradientAccumulationPlugin": "training-loop-integration/references/gradient-accumulation.md",
    "ProjectConfiguration": "checkpointing-and-tracking/references/checkpointing.md",
}


def _doc_default(cell: str):
    word = cell.split()[0].strip("`").lower()
    return {"false": False, "true": True, "none": None}.get(word, int(word) if word.isdigit() else word)


@pytest.mark.parametrize("cls", sorted(DEFAULT_TABLES))
def test_documented_defaults_match_dataclasses(cls, repo_root, oracle):
    text = (repo_root / "sub-skills" / DEFAULT_TABLES[cls]).read_text()
    assert cls in text and text.count("| Field | Default |") == 1
    body = text[text.index("| Field | Default |"):]
    rows = re.findall(r"^\| `(\w+)` \| ([^|]+) \|", body.split("\n\n")[0], flags=re.M)
    actual = oracle["dataclass_defaults"][cls]
    assert {name for name, _ in rows} == set(actual), cls
    for name, cell in rows:
        doc = _doc_default(cell)
        if doc == "project_dir":  # documented as following project_dir
            assert actual[name] is None and oracle["project_logging_dir_follows_project_dir"]
        else:
            assert doc == actual[name], (cls, name, cell, actual[name])


def test_zero3_save_model_is_16bit(repo_root):
    """checkpointing.md: under ZeRO-3, save_model/get_state_dict gather the 16-bit copy, or raise."""
    src = (Path(importlib.util.find_spec("accelerate").submodule_search_locations[0]) / "accelerator.py").read_text()
    body = src[src.index("    def get_state_dict("):]
    body = body[:body.index("\n    def ", 10)]
    assert "_zero3_consolidated_16bit_state_dict()" in body and "Cannot get 16bit model weights" in body
    text = " ".join((repo_root / "sub-skills/checkpointing-and-tracking/references/checkpointing.md").read_text().split())
    assert "gathered **16-bit** copy (`_zero3_consolidated_16bit_state_dict`), not the fp32 master weights" in text


def test_tracker_entry_points_are_main_process_only(repo_root):
    """trackers.md: main_process_only=False cannot make Accelerator log per rank."""
    src = (Path(importlib.util.find_spec("accelerate").submodule_search_locations[0]) / "accelerator.py").read_text()
    for name in ("init_trackers", "log"):
        assert re.search(rf"@on_main_process\n    def {name}\(", src), name
    text = " ".join((repo_root / "sub-skills/checkpointing-and-tracking/references/trackers.md").read_text().split())
    assert "through `Accelerator` it changes nothing" in text


def test_config_keys_and_flag_only_threads_as_documented(repo_root, oracle):
    """The documented top-level key list is ClusterConfig's, and num_cpu_threads_per_process is a
    launch flag only: as a top-level key it raises (set-4 s4-acl-04)."""
    text = (repo_root / "sub-skills/configuration-and-cli/references/config-file-and-precedence.md").read_text()
    para = text.split("- Accepted top-level keys, exactly", 1)[1].split("Any other key raises.", 1)[0]
    assert sorted(re.findall(r"`(\w+)`", para.split("):", 1)[1])) == oracle["cluster_config_fields"]
    assert "had unknown keys" in oracle["num_cpu_threads_key_error"]
    assert "num_cpu_threads_per_process" in oracle["num_cpu_threads_key_error"]


def test_mpirun_launch_command_and_env_as_documented(repo_root, oracle):
    """accelerate builds mpirun itself; the env it adds has no CCL_* variable; OMP_NUM_THREADS is
    physical cores / (num_processes / num_machines) (set-4 s4-acl-01, s4-acl-04)."""
    text = (repo_root / "sub-skills/configuration-and-cli/references/cpu-multiprocess.md").read_text()
    m = oracle["mpirun"]
    assert m["cmd_head"][:9] == ["mpirun", "--hostfile", "hosts", "--npernode", "4", "-n", "8", "--bind-to", "socket"]
    assert "`mpirun --hostfile hosts --npernode 4 -n 8 --bind-to socket python train.py`" in text
    assert m["master"] == ["10.0.0.1", "29500"] and m["omp"] == "8"
    assert not [k for k in m["env_added"] if "CCL" in k]
    para = text.split("- Environment added to the ranks, exactly:", 1)[1].split("(plus", 1)[0]
    assert sorted(re.findall(r"`(\w+)`", para)) == m["env_added"]
    assert "no `CCL_WORKER_COUNT`, no `mpirun_ccl` config key" in text

"""The distributed-and-backends documents agree with the recorded repository facts (commit 58c1e1a),
the recorded upstream facts, the installed packages, the availability checker and the bundle linter."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from importlib import metadata

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent.parent
SKILL = REPO / "sub-skills" / "distributed-and-backends"

COMMIT = "58c1e1a4fef10725a79bd45cdb5581c03e3e59e7"


def flat(text: str) -> str:
    return " ".join(text.split())


def table_rows(text: str, heading: str) -> list[list[str]]:
    """Rows (cells) of the first Markdown table after `heading`."""
    start = text.index(heading)
    rows, seen = [], False
    for line in text[start:].splitlines()[1:]:
        if line.startswith("|"):
            seen = True
            cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
            if not set("".join(cells)) <= set("- "):
                rows.append(cells)
        elif seen:
            break
    return rows[1:]  # drop the header row


# --------------------------------------------------------------------------- front matter, license, layout

def test_front_matter(front_matter, docs):
    fm = front_matter
    assert set(fm) == {"name", "description", "disable-model-invocation", "metadata", "license"}
    assert fm["name"] == "distributed-and-backends" == SKILL.name
    assert fm["disable-model-invocation"] is True
    assert fm["metadata"] == {"disco-role": "operating"}
    assert fm["license"] == "MIT"
    desc = fm["description"]
    assert 0 < len(desc) <= 1024 and "<" not in desc and ">" not in desc
    for word in ("DeepSpeed", "Horovod", "Apex", "sparse attention", "attn_types", "Docker", "CUDA"):
        assert word in desc
    assert len(docs["SKILL.md"].splitlines()) < 500


def test_license_file():
    text = (SKILL / "LICENSE").read_text()
    assert text.startswith("MIT License\n")
    assert "Copyright (c) 2026 The pytorch-distributed-training skill bundle authors" in text
    assert "lucidrains/DALLE-pytorch (MIT License, Copyright (c)\n2021 Phil Wang)" in text
    assert "Permission is hereby granted, free of charge" in text


def test_every_reference_linked_and_versions_stated(docs):
    refs = sorted(p.name for p in (SKILL / "references").iterdir())
    assert refs == ["distributed-backends.md", "docker-and-system-setup.md", "launching.md", "troubleshooting.md"]
    for r in refs:
        assert f"[references/{r}](references/{r})" in docs["SKILL.md"], r
        assert docs[f"references/{r}"].split("\n", 3)[2].startswith("Verified against:"), r


def test_versions_named_match_installed(docs, repo_facts):
    assert repo_facts["commit"] == COMMIT
    assert metadata.version("dalle-pytorch") == "1.6.6"
    assert metadata.version("deepspeed") == "0.19.8"
    assert metadata.version("torch").startswith("2.13.0")
    for name in ("references/distributed-backends.md", "references/troubleshooting.md"):
        head = flat(docs[name][:800])
        assert "dalle-pytorch 1.6.6" in head and "deepspeed 0.19.8" in head and "torch 2.13.0" in head
        assert "58c1e1a" in head
    assert COMMIT in docs["references/distributed-backends.md"]
    assert "commit `58c1e1a`" in docs["SKILL.md"]


# --------------------------------------------------------------------------- flags

NONEXISTENT = {"--zero_stage"}  # named only as a requested, missing flag (#276)


@pytest.fixture(scope="session")
def pip_help() -> str:
    return subprocess.run([sys.executable, "-m", "pip", "install", "--help"], capture_output=True, text=True,
                          timeout=120).stdout


def test_every_flag_named_exists(all_docs_text, repo_facts, oracle_ds, oracle_nods, checker_help, pip_help,
                                 upstream_facts):
    known = set()
    for script in repo_facts["scripts"].values():
        for f in script["flags"]:
            known.update(f["flags"])
    for o in (oracle_ds, oracle_nods):
        for a in o["parser_actions"]:
            known.update(a["flags"])
    known.update(re.findall(r"--[a-z][\w-]*", checker_help))
    known.update(re.findall(r"--[a-z][\w-]*", pip_help))
    for key in ("install_apex.sh", "install_deepspeed.sh", "docker/Dockerfile", "README.md"):
        known.update(re.findall(r"--[a-z][\w-]*", json.dumps(repo_facts[key])))
    # the `deepspeed` launcher's own options, read from the installed deepspeed/launcher/runner.py
    import importlib.util

    runner = Path(importlib.util.find_spec("deepspeed").submodule_search_locations[0]) / "launcher" / "runner.py"
    known.update(re.findall(r'add_argument\(\s*"(--[a-z][\w-]*)"', runner.read_text()))
    # every quoted flag literal of the installed launchers references/launching.md compares: the deepspeed
    # runner (short-and-long option pairs), torchrun and torch.distributed.launch (read, not imported)
    torch_dist = Path(importlib.util.find_spec("torch").submodule_search_locations[0]) / "distributed"
    for src in (runner, torch_dist / "run.py", torch_dist / "launch.py"):
        known.update(re.findall(r"[\"'](--[a-z][\w-]*)", src.read_text()))
    assert "--num_gpus" in known
    for key in ("deepspeed_install_sh", "apex_config_settings_example", "pip", "horovodrun"):
        known.update(re.findall(r"--[a-z][\w-]*", json.dumps(upstream_facts[key])))
    named = set(re.findall(r"(?<![\w-])--[a-z][\w-]*", all_docs_text))
    assert len(named) > 40
    assert not (NONEXISTENT & known)
    unknown = sorted(named - known - NONEXISTENT)
    assert not unknown, f"flags named in the docs but found nowhere: {unknown}"


def test_backend_only_flag_table_defaults(docs, repo_facts):
    td = {f["flags"][0]: f for f in repo_facts["scripts"]["train_dalle.py"]["flags"]}
    tv = {f["flags"][0]: f for f in repo_facts["scripts"]["train_vae.py"]["flags"]}
    rows = table_rows(docs["references/distributed-backends.md"], "## Flags that only matter under one backend")
    assert len(rows) == 7
    for cells in rows:
        flag = cells[0].strip("`")
        default = cells[1].split(" (")[0]
        assert str(td[flag]["default"]) == default, (flag, default)
    assert "4 (train_vae.py: 8)" in [r[1] for r in rows]
    assert tv["--batch_size"]["default"] == 8
    for absent in ("--ga_steps", "--amp", "--fp16", "--flops_profiler", "--keep_n_checkpoints", "--clip_grad_norm"):
        assert absent not in tv and absent in td
        assert f"`{absent}`" in docs["references/distributed-backends.md"]


def test_distributed_flags_in_scripts(repo_facts):
    for script in ("train_dalle.py", "train_vae.py"):
        assert repo_facts[script]["wrap_arg_parser_line"] and repo_facts[script]["set_backend_line"]
    assert not repo_facts["generate.py"]["imports_distributed_utils"]


# --------------------------------------------------------------------------- the DeepSpeed dict

def test_deepspeed_dict_table(docs, repo_facts):
    ds = repo_facts["train_dalle.py"]["deepspeed_config"]
    assert (ds["line_start"], ds["line_end"]) == (481, 500)
    rows = table_rows(docs["references/distributed-backends.md"], "## The DeepSpeed config the scripts build")
    assert [r[0].strip("`") for r in rows] == ds["keys"]
    values = ds["values"]
    assert values["amp"] == {"enabled": "args.amp", "opt_level": "'O1'"}
    fp = values["flops_profiler"]
    assert (fp["profile_step"], fp["module_depth"], fp["top_modules"], fp["detailed"], fp["output_file"]) == (
        "200", "-1", "1", "True", "None")
    row = {r[0].strip("`"): r[1] for r in rows}
    assert "`profile_step` 200, `module_depth` -1, `top_modules` 1, `detailed` True, `output_file` None" in \
        row["flops_profiler"]
    assert "'opt_level': 'O1'" in row["amp"] and "**every** run" in row["amp"]
    assert ds["key_lines"]["amp"] == [488, 491]
    assert repo_facts["train_vae.py"]["deepspeed_config"]["keys"] == ["train_batch_size"]
    assert repo_facts["train_vae.py"]["deepspeed_config"]["line_start"] == 182
    assert "no `zero_optimization`" in docs["references/distributed-backends.md"]
    assert "zero_optimization" not in ds["keys"] and "bf16" not in ds["keys"] and "optimizer" not in ds["keys"]


# --------------------------------------------------------------------------- citations

CITE = re.compile(r"`?(train_dalle\.py|train_vae\.py|generate\.py):(\d+)(?:-(\d+))?`?((?:,\s*`\d+`)*)")


def known_lines(facts, script) -> set[int]:
    lines = set()
    sec = facts[script]
    for f in facts["scripts"][script]["flags"]:
        lines.add(f["line"])
    for key, val in sec.items():
        if key == "deepspeed_config":
            lines.add(val["line_start"])
            for a, b in val["key_lines"].values():
                lines.update((a, b))
        elif isinstance(val, list) and all(isinstance(v, int) for v in val):
            lines.update(val)
    return lines


def test_line_citations_are_recorded_facts(all_docs_text, repo_facts):
    cited = 0
    for m in CITE.finditer(all_docs_text):
        script, a, b, more = m.group(1), int(m.group(2)), m.group(3), m.group(4)
        ok = known_lines(repo_facts, script)
        nums = [a] + [int(n) for n in re.findall(r"\d+", more)]
        if b:
            ds = repo_facts[script].get("deepspeed_config", {})
            spans = [tuple(v) for v in ds.get("key_lines", {}).values()] + [(ds.get("line_start"), ds.get("line_end"))]
            assert (a, int(b)) in spans, m.group(0)
        for n in nums:
            assert n in ok, f"{script}:{n} is not a recorded fact line"
            cited += 1
    assert cited >= 30


def test_readme_and_script_line_mentions(all_docs_text, repo_facts):
    text = flat(all_docs_text)
    readme = {int(k) for k in repo_facts["README.md"]["selected_lines"]}
    for n in re.findall(r"README (?:line|lines) (\d+)", text) + re.findall(r"README lines \d+ and (\d+)", text):
        assert int(n) in readme, n
    for script in ("install_apex.sh", "install_deepspeed.sh"):
        for n in re.findall(rf"`{re.escape(script)}` line (\d+)", text):
            assert n in repo_facts[script]["lines"], (script, n)
    assert "dalle_pytorch/__init__.py` line 4" in text


def test_readme_quotes_are_verbatim(all_docs_text, repo_facts):
    """A backticked quote right after "README line N" is that whole line (a shell prompt "$ "
    dropped), so a shortened or reworded command cannot pass as a quotation."""
    text = flat(all_docs_text)
    readme = repo_facts["README.md"]["selected_lines"]
    quotes = re.findall(r"README line (\d+)(?::| shows(?: the)?(?: [a-z]+)?) `([^`]+)`", text)
    assert quotes, "no README quotation found"
    for n, quoted in quotes:
        assert quoted == readme[n].strip().removeprefix("$ "), (n, quoted, readme[n])


def test_issue_numbers_were_read(all_docs_text, upstream_facts):
    read = upstream_facts["issues_read"]
    own = set(read["lucidrains/DALLE-pytorch"])
    other = set(read["other"])
    for m in re.finditer(r"(?:([\w.-]+/[\w.-]+))?#(\d+)", all_docs_text):
        repo, num = m.group(1), m.group(2)
        if repo:
            assert f"{repo}#{num}" in other, m.group(0)
        else:
            assert num in own, f"#{num} cited but not recorded as read"
    assert "#416" in all_docs_text and "#276" in all_docs_text


# --------------------------------------------------------------------------- Docker and install scripts

def test_dockerfile_table(docs, repo_facts):
    lines = repo_facts["docker/Dockerfile"]["lines"]
    rows = table_rows(docs["references/docker-and-system-setup.md"], "## What the repository's Dockerfile does")
    assert len(rows) == 6
    for cells in rows:
        span = [int(x) for x in re.findall(r"\d+", cells[0])]
        src = " ".join(lines.get(str(n), "") for n in range(span[0], span[-1] + 1))
        assert src, cells[0]
        for code in re.findall(r"`([^`]+)`", cells[1]):
            assert code in src, (code, src)
    doc = docs["references/docker-and-system-setup.md"]
    readme = repo_facts["README.md"]["selected_lines"]
    assert f"`{readme['546']}`" in doc and f"`{readme['552']}`" in flat(doc)
    assert "`pytorch/pytorch:1.8.1-cuda10.2-cudnn7-devel`" in doc
    assert lines["2"] == "ARG IMG_TAG=1.8.1-cuda10.2-cudnn7-devel"


def test_install_scripts_table(docs, repo_facts, upstream_facts):
    doc = docs["references/docker-and-system-setup.md"]
    rows = table_rows(doc, "## What the install scripts do")
    by_script = {r[0].split("`")[1]: r for r in rows}
    assert set(by_script) == {"install_deepspeed.sh", "install_apex.sh"}
    for script, cells in by_script.items():
        lines = repo_facts[script]["lines"]
        for m in re.finditer(r"line (\d+) (?:`([^`]+)`)?", cells[1]):
            n, code = m.group(1), m.group(2)
            assert n in lines, (script, n)
            if code:
                assert code in lines[n], (script, n, code)
    flags = upstream_facts["deepspeed_install_sh"]["flags"]
    assert "`-r` is `--allow_sudo`" in doc and flags["-r"] == "--allow_sudo"
    assert "`-s` is `--pip_sudo`" in doc and flags["-s"] == "--pip_sudo"
    assert "commit `edaa722`" in doc and upstream_facts["deepspeed_install_sh"]["commit"].startswith("edaa722")
    assert "`DS_BUILD_SPARSE_ATTN=1 ./install.sh -s`" in doc
    assert repo_facts["setup.py"]["install_requires"][:1] == ["axial_positional_embedding"]
    for dep in ("deepspeed", "horovod", "apex", "triton", "wandb"):
        assert not any(r.lower().startswith(dep) for r in repo_facts["setup.py"]["install_requires"])
    assert "torch>=1.6" in repo_facts["setup.py"]["install_requires"]


def test_upstream_version_claims(docs, upstream_facts):
    text = flat("\n".join(docs.values()))
    v = upstream_facts["deepspeed_versions"]
    assert v["0.19.7"]["accepts_amp_key"] and not v["0.19.8"]["accepts_amp_key"]
    assert "0.19.7 still accepted it" in text
    assert v["0.19.6"]["ships_ops_sparse_attention"] and not v["0.19.7"]["ships_ops_sparse_attention"]
    assert "deepspeed 0.19.7 dropped `deepspeed/ops/sparse_attention`; 0.19.6 still ships it" in text
    b = upstream_facts["deepspeed_sparse_attn_builder_0.19.6"]
    assert "`>= 1.5 and < 2.0`" in text and ">= 1.5 and < 2.0" in b["torch_requirement"]
    assert "`triton==1.0.0`" in text and "triton==1.0.0" in b["triton_hint"]
    for loc, msg in v["0.19.7"]["engine_amp_messages"].items():
        assert f"`{msg}" in text, msg
        assert f"line {loc.rsplit(':', 1)[1]} in 0.19.7" in text, loc
    apex = upstream_facts["pypi_apex"]
    assert apex["has_amp_module"] is False and apex["summary"].startswith("Pyramid toolkit")
    assert "apex` (0.9.10dev) is a Pyramid web toolkit" in text
    assert upstream_facts["pip"]["26.3"]["has_global_option"] is False
    assert "`no such option: --global-option`" in text


def test_repo_facts_used_by_claims(repo_facts, docs):
    td = repo_facts["train_dalle.py"]
    assert td["aux_filename"] == "auxiliary.pt" and td["cp_dir_format"] == "{stem}-{tag}-cp" and td["ds_tag"] == "ds"
    assert td["keep_n_glob"] == "global*" and td["zero_stage_checks"] == [502, 569]
    assert repo_facts[".gitignore"]["ignores_dalle_ds_cp"] is True
    doc = docs["references/distributed-backends.md"]
    assert "`dalle-ds-cp/auxiliary.pt`" in doc and "`<stem>-ds-cp`" in doc and "`dalle-ds-cp/`" in doc
    assert repo_facts["train_vae.py"]["make_grid_range_line"] == [262]
    assert repo_facts["generate.py"]["torch_load_line"] == [82]


# --------------------------------------------------------------------------- the availability checker

def test_checker_flags_and_exit_codes(docs, checker_help):
    help_flags = set(re.findall(r"--[a-z][\w-]*", checker_help))
    vocab = set(re.findall(r"[a-z][a-z0-9-]+", checker_help.split("--require vocabulary", 1)[1].split("exit codes:")[0]))
    checked = 0
    for name, text in docs.items():
        for line in text.splitlines():
            if "check_backend_availability" in line:
                for fl in re.findall(r"(?<![\w-])--[a-z][\w-]*", line):
                    assert fl in help_flags, (name, fl)
                    checked += 1
    assert checked >= 6
    for cells in table_rows(docs["SKILL.md"], "## Check the environment first"):
        for fl in re.findall(r"--[a-z][\w-]*", cells[0]):
            assert fl in help_flags, fl
            checked += 1
    for fl in ("--probe", "--include-cuda", "--json", "--format", "--require", "--only"):
        assert fl in help_flags and fl in "\n".join(docs.values()), fl
    # every --require NAME the docs use is in the checker's vocabulary
    used = set()
    for text in docs.values():
        used.update(re.findall(r"--require ([a-z][a-z0-9,-]+)", text))
    names = {n for u in used for n in u.split(",")}
    listed = re.findall(r"`--require` names used here: (.*?)\.\n\n", docs["references/troubleshooting.md"], re.S)[0]
    names |= set(re.findall(r"`([a-z][a-z0-9-]+)`", listed))
    names |= set(re.findall(r"`([a-z][a-z0-9-]+)`", table_rows(docs["SKILL.md"], "## Check the environment first")[-1][1]))
    assert names >= {"dalle-deepspeed", "dalle-horovod", "apex-amp", "gpu"}
    assert names <= vocab, sorted(names - vocab)
    # exit codes as the help states them
    codes = dict(re.findall(r"^\s+([0-4])\s+(.+)$", checker_help.split("exit codes:", 1)[1], re.M))
    assert codes["2"].startswith("usage error") and codes["3"].startswith("a probe or the CUDA child crashed")
    assert codes["4"].startswith("internal error") and codes["1"].startswith("at least one --require'd item unmet")
    t = flat(docs["references/troubleshooting.md"])
    assert ("Exit codes: 0 ok, 1 a `--require` item unmet, 2 usage error, 3 a probe or the CUDA child crashed or "
            "timed out, 4 internal error.") in t
    s = flat(docs["SKILL.md"])
    assert "Other exit codes: 2 usage error, 3 a probe or the CUDA child crashed or timed out, 4 internal error." in s
    assert "--json          " in checker_help or "same as --format json" in checker_help
    assert "imports nothing it reports on" in checker_help and "imports nothing it reports on" in s
    assert "(default 30)" in flat(checker_help.rsplit("--timeout SECONDS", 1)[1])[:120]
    assert "timed_out" in checker_help
    assert "after `--timeout` seconds (default 30) and reported as `timed_out`, exit 3" in t


def test_checker_output_matches_troubleshooting(docs, checker_outputs, oracle_ds):
    real, fake = checker_outputs["real"], checker_outputs["fake"]
    assert real and fake, checker_outputs["stderr"][-2000:]
    both = real + fake
    shows = []
    for heading in ("## Backend import and selection", "## DeepSpeed", "## Apex AMP", "## Horovod",
                    "## CUDA and the machine"):
        for cells in table_rows(docs["references/troubleshooting.md"], heading):
            shows.append(cells[-1])
    fragments = [f for cell in shows for f in re.findall(r"`([^`]+)`", cell)]
    assert len(fragments) >= 15
    setuptools_major = int((oracle_ds["setuptools_version"] or "0").split(".")[0])
    conditional = {"import needs missing: ... pkg_resources", "install 'setuptools<82'"}
    for frag in fragments:
        if frag.startswith("--") or frag in {"no", "dalle-deepspeed", "dalle-horovod", "deepspeed-sparse-attention",
                                             "apex-amp", "horovod", "deepspeed"}:
            continue  # flag or verdict/row names, checked against --help elsewhere
        if frag in conditional and setuptools_major < 82:
            assert "pkg_resources" not in real.split("dalle-pytorch", 1)[1].splitlines()[0]
            continue
        parts = [p for p in frag.split("...") if p.strip()]
        flat_output = " ".join(both.split())  # text mode wraps long verdict reasons
        for part in parts:
            assert " ".join(part.split()) in flat_output, frag
    assert "flavour=pypi-namesake" in fake and "import_error: ImportError:" in fake


# --------------------------------------------------------------------------- bundle linter

def test_bundle_linter_clean_for_this_sub_skill():
    linter = REPO / "scripts" / "check_bundle.py"
    assert linter.is_file()
    p = subprocess.run([sys.executable, str(linter), "--format", "json"], capture_output=True, text=True, timeout=120)
    data = json.loads(p.stdout)
    mine = [f for f in data["findings"] if "distributed-and-backends" in json.dumps(f)]
    assert mine == []
    sizes = {f["path"]: f for f in data["files"]}
    assert sizes["sub-skills/distributed-and-backends/SKILL.md"]["lines"] < 500


# --------------------------------------------------------------------------- the seed's routes, boundaries, safety

def test_skill_keeps_seed_routes_boundaries_and_safety(docs, repo_facts):
    skill = docs["SKILL.md"]
    rows = table_rows(skill, "## Typical routes")
    requests = [r[0] for r in rows]
    for seed_request in ('"Can I use DeepSpeed?"', '"What does `--deepspeed` do?"', '"Use Horovod"',
                         '"Install Apex or sparse attention"', '"Choose `attn_types`"'):
        assert seed_request in requests, seed_request
    for sibling in ("../vae-training/SKILL.md", "../dalle-training/SKILL.md", "../generation-and-ranking/SKILL.md"):
        assert f"`{sibling}`" in skill
        assert (SKILL / sibling).resolve().is_file(), sibling
    safety = flat(skill.split("## Safety rules", 1)[1])
    for phrase in ("source builds", "`sudo apt-get`", "Docker builds", "distributed launchers",
                   "explicit approval", "proves only that torch sees a device",
                   "Keep DeepSpeed, Horovod, Apex and triton optional"):
        assert phrase in safety, phrase
    # attn_types named in the route exist as values the script's help text lists
    attn = next(f for f in repo_facts["scripts"]["train_dalle.py"]["flags"] if f["flags"] == ["--attn_types"])
    assert attn["default"] == "full"
    route = next(r for r in rows if r[0] == '"Choose `attn_types`"')[1]
    import importlib.util

    tsrc = (Path(importlib.util.find_spec("dalle_pytorch").submodule_search_locations[0]) / "transformer.py").read_text()
    accepted = set(re.findall(r"attn_type == '(\w+)'", tsrc))
    assert accepted == {"full", "sparse", "axial_row", "axial_col", "conv_like"}
    for value in accepted:
        assert f"`{value}`" in route
    table = table_rows(docs["references/distributed-backends.md"], "## Attention types")
    assert {v.strip("`") for r in table for v in r[0].split(", ")} == accepted
    setup = docs["references/docker-and-system-setup.md"]
    assert setup.count("**[approval]**") >= 5


def test_data_loading_claims(repo_facts, docs):
    td, tv = repo_facts["train_dalle.py"], repo_facts["train_vae.py"]
    assert td["webdataset_not_handed_to_deepspeed"] is True
    assert td["set_epoch_lines"] == [598] and tv["set_epoch_lines"] == []
    assert td["training_data_line"] == [514] and tv["training_data_line"] == [189]
    assert td["distributed_sampler_line"] == [408] and tv["distributed_sampler_line"] == [124]
    doc = flat(docs["references/distributed-backends.md"])
    assert "`train_vae.py` never does, so its shard order repeats each epoch" in doc
    assert "a WebDataset is not handed over" in doc


def test_what_breaks_entries_complete(docs):
    doc = docs["references/distributed-backends.md"]
    section = doc.split("## What breaks with today's packages", 1)[1].split("\n## ", 1)[0]
    entries = re.split(r"\n### \d+\. ", section)[1:]
    assert len(entries) == 8
    assert "eight known failures" in docs["SKILL.md"]
    for e in entries:
        for part in ("**Symptom**", "**Cause**", "**Fix**"):
            assert part in e, (e.splitlines()[0], part)
        assert "**Evidence**" not in e  # the evidence trail lives in the Provenance section
    # each entry's evidence: one Provenance row per entry
    provenance = doc.split("\n## Provenance", 1)[1]
    for n in range(1, 9):
        assert f"| What breaks, {n}: " in provenance, n
    titles = " ".join(e.splitlines()[0] for e in entries)
    for topic in ("`amp` key", "Sparse attention", "Assertions", "`pkg_resources`", "`pip install apex`",
                  "`make_grid(range=...)`", "`--lr_decay`", "No CPU mode"):
        assert topic in titles, topic

"""The release-change index (`lookup.py --changes`): its files stay valid and verified, the torch side
agrees with the installed torch, and the query front end behaves as its --help says.

- references/facts/release_changes.jsonl (accelerate, deepspeed) is checked against the upstream git
  history by tests/audit/verify_release_changes.py, which CI cannot run (no mirrors): here every line
  must have a matching record in tests/audit/release_changes_verified.json, and every entry for a commit
  after the last release tag must have its `pinned_check` text in the installed package.
- references/facts/torch_api_history.jsonl and transformers_api_history.jsonl are generated from wheels
  by tests/facts/api_history.py; CI has no wheels, so here the pinned side is re-derived from the
  installed torch 2.13.0 and transformers 5.25.0 with the same parser: every name the history leaves
  present must be there, with the recorded signature and field default.
"""
from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
sys.path.insert(0, str(REPO / "tests" / "facts"))
import _changes  # noqa: E402
import api_history as tah  # noqa: E402

LOOKUP = REPO / "scripts" / "lookup.py"
SITE = Path(sysconfig.get_paths()["purelib"])
RECORDS = REPO / "tests" / "audit" / "release_changes_verified.json"
PROFILES = [tah.TORCH, tah.TRANSFORMERS]


def run(*args, data=None):
    extra = ["--changes-data", str(data)] if data else []
    p = subprocess.run([sys.executable, str(LOOKUP), *args, *extra], capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


# ---------------------------------------------------------------- the committed files

def test_git_side_entries_are_valid_and_each_line_was_verified():
    lines = [ln for ln in _changes.DATA.read_text(encoding="utf-8").splitlines() if ln.strip()]
    entries = _changes.load(_changes.DATA)
    assert len(entries) == len(lines)
    by_lib = {lib: sum(e["lib"] == lib for e in entries) for lib in ("accelerate", "deepspeed")}
    assert all(n >= 40 for n in by_lib.values()), by_lib
    records = json.loads(RECORDS.read_text(encoding="utf-8"))["entries"]
    unverified = [ln[:80] for ln in lines if hashlib.sha256(ln.strip().encode()).hexdigest() not in records]
    assert not unverified, f"re-run tests/audit/verify_release_changes.py --write: {unverified[:3]}"
    keys = [(e["lib"], e["sha"]) for e in entries]
    assert len(keys) == len(set(keys)), "one entry per merge commit"
    pinned = {"accelerate": (1, 15, 0), "deepspeed": (0, 19, 8)}
    assert all(_changes.vkey(e["version"]) <= pinned[e["lib"]] for e in entries)


def test_changes_after_the_last_tag_are_in_the_installed_release():
    checked = 0
    for e in _changes.load(_changes.DATA):
        pin = e.get("pinned_check")
        if pin:
            text = (SITE / pin["path"]).read_text(encoding="utf-8", errors="replace")
            assert pin["contains"] in text, (e["lib"], e["pr"], pin["path"])
            checked += 1
    assert checked >= 1


def test_coverage_file_matches_the_verified_walk():
    cover = _changes.coverage()
    rec = json.loads(RECORDS.read_text(encoding="utf-8"))["coverage"]
    for lib in ("accelerate", "deepspeed"):
        assert cover[lib]["commits_walked"] == rec[lib]["commits"] >= 700, lib
        assert cover[lib]["included"] == rec[lib]["included"] <= rec[lib]["commits"]
        assert cover[lib]["included"] == sum(e["lib"] == lib for e in _changes.load(_changes.DATA))
    for prof in PROFILES:
        assert cover[prof.lib]["versions"][-1] == prof.pinned
    assert "covers" in _changes.coverage_line(cover)


@pytest.mark.parametrize("prof", PROFILES, ids=lambda p: p.lib)
def test_api_history_is_the_generator_output(prof):
    src = json.loads(prof.sources.read_text(encoding="utf-8"))
    assert src["entries_sha256"] == hashlib.sha256(prof.out.read_bytes()).hexdigest(), \
        f"{prof.out.name} was edited by hand; regenerate it with tests/facts/api_history.py {prof.lib} --write"
    assert src["versions"][-1] == prof.pinned and len(src["versions"]) >= 8


@pytest.mark.parametrize("prof", PROFILES, ids=lambda p: p.lib)
def test_api_history_agrees_with_the_installed_package(prof):
    """Replay the history: a name's last entry decides whether the pinned release has it; the parser
    run on the installed package must agree, and a pinned signature or field default must match."""
    installed = tah.surface(tah.installed_files(prof), prof)
    names, fields, env = installed["names"], installed["fields"], installed["env"]
    bound = set(installed["bound"])

    def importable(name, via_parent):
        """Defined or re-exported, bound by an import, under a sys.modules alias, or (via_parent: for a
        method of a class that the module imports from elsewhere) under a bound parent name."""
        parts = name.split(".")
        parents = {".".join(parts[:i]) for i in range(1, len(parts))} if via_parent else set()
        return name in names or name in fields or name in bound or bool(parents & bound) or any(
            name.startswith(b[:-1]) for b in bound if b.endswith(".*"))

    entries = _changes.load(prof.out)
    assert len(entries) >= 100 and {e["lib"] for e in entries} == {prof.lib}
    last = {}
    for e in entries:
        last[e["names"][0]] = e  # the file is in version order
    present = absent = signed = defaults = 0
    for name, e in last.items():
        if e["area"] == "env":
            assert (name in env) == (e["kind"] != "remove"), name
            continue
        if e["kind"] == "remove" and "signature" not in e:
            assert not importable(name, via_parent=False), name
            absent += 1
            continue
        assert importable(name, via_parent=True), name
        present += 1
        if "signature" in e and name in names:  # a class moved to C++ keeps no Python signature
            assert e["signature"] == f"({tah.fmt_params(names[name])})", name
            signed += 1
        if "default" in e:
            assert fields[name] == e["default"], name
            defaults += 1
    assert present >= 30 and absent >= 1 and signed + defaults >= 10


def test_known_changes_are_in_the_histories():
    """One change per history, each checkable by eye in the installed source."""
    torch_e = [e for e in _changes.load(_changes.TORCH) if e["version"] == "2.13.0"
               and e["names"] == ["torch.nn.parallel.distributed.DistributedDataParallel.__init__"]]
    assert torch_e and "`forward_sync_buffers`" in torch_e[0]["text"]
    assert "`broadcast_buffers` from `True` to `None`" in torch_e[0]["text"]
    tf = {e["names"][0]: e for e in _changes.load(_changes.TRANSFORMERS)}
    gone = tf["transformers.training_args.TrainingArguments.save_safetensors"]
    assert gone["kind"] == "remove" and gone["version"] == "5.0.0"
    assert tf["transformers.training_args.TrainingArguments.eval_strategy"]["version"] == "4.41.2"


def test_torch_diff_rules_on_synthetic_surfaces():
    old = {"names": {"m.f": [["a", None]], "m.g": None, "m.h": None, "m.C": None, "m.C.run": [["x", "1"]]},
           "env": {"TORCH_OLD": ["m"]}, "bound": []}
    new = {"names": {"m.f": [["a", None], ["b", "2"]], "m.h": None, "m.C": None, "m.C.run": [["x", "3"]],
                     "m.D": None, "m.D.go": []},
           "env": {"TORCH_NEW": ["m"]}, "bound": ["m.g"]}
    out = {(e["kind"], e["names"][0]): e for e in tah.diff("1.0.0", old, "1.1.0", new)}
    assert ("add", "m.D") in out and ("add", "m.D.go") not in out  # a new class's methods ride on it
    assert not any(n == "m.g" for _, n in out)  # still bound in the module: not removed
    assert "gains `b` (default `2`)" in out[("add", "m.f")]["text"]
    assert "from `1` to `3`" in out[("change", "m.C.run")]["text"]
    assert ("add", "TORCH_NEW") in out and ("remove", "TORCH_OLD") in out
    moved = {"names": {}, "env": {}, "bound": ["m.*"]}
    assert tah.diff("1.0.0", {"names": {"m.sub.x": None}, "env": {}}, "1.1.0", moved) == []
    req = tah.diff("1", {"names": {"m.f": [["a", None]]}, "env": {}}, "2",
                   {"names": {"m.f": [["a", "None"]]}, "env": {}, "bound": []})
    assert "from no default (required) to `None`" in req[0]["text"]


def test_surface_parser_on_a_small_package(tmp_path):
    files = [("torch/distributed/newpkg/__init__.py",
              "import sys\nfrom .impl import api_fn\nfrom typing import Optional\n"
              "sys.modules[f'torch.distributed.oldpkg.{x}'] = None\n"),
             ("torch/distributed/newpkg/impl.py",
              "import os\nV = os.environ.get('TORCH_FOO_BAR')\n"
              "def api_fn(a, b=1, *args, c=None, **kw): pass\n"
              "def _private(): pass\nclass K:\n    def __init__(self, z): pass\n    def _hidden(self): pass\n"),
             ("torch/distributed/_internal/x.py", "def f(): pass\n")]
    s = tah.surface(files)
    assert s["names"]["torch.distributed.newpkg.impl.api_fn"] == [["a", None], ["b", "1"], ["*args", None],
                                                                   ["c", "None"], ["**kw", None]]
    assert "torch.distributed.newpkg.api_fn" in s["names"] and "torch.distributed.newpkg.Optional" not in s["names"]
    assert "torch.distributed.newpkg.impl.K.__init__" in s["names"]
    assert not any("_private" in n or "_hidden" in n or "_internal" in n for n in s["names"])
    assert s["env"] == {"TORCH_FOO_BAR": ["torch.distributed.newpkg.impl"]}
    assert "torch.distributed.oldpkg.*" in s["bound"]


# ---------------------------------------------------------------- the query front end

SYN = [
    {"lib": "accelerate", "version": "1.9.0", "pr": 3659, "sha": "a" * 40, "kind": "fix", "area": "data-loader",
     "names": ["DataLoaderShard"], "text": "Empty prepared loaders yield nothing.", "symptom": "UnboundLocalError"},
    {"lib": "accelerate", "version": "1.5.0", "pr": 3409, "sha": "b" * 40, "kind": "fix", "area": "launch",
     "names": ["--zero_stage"], "text": "A typed flag beats the nested config key."},
    {"lib": "deepspeed", "version": "0.16.4", "pr": 7039, "sha": "c" * 40, "kind": "change", "area": "zero",
     "names": ["log_trace_cache_warnings"], "text": "Trace cache warnings silent by default."},
    {"lib": "torch", "version": "2.6.0", "kind": "add", "area": "fsdp", "names": ["torch.distributed.fsdp.fully_shard"],
     "text": "public path", "evidence": "torch 2.5.1 -> 2.6.0 (wheel sources)"},
]


@pytest.fixture
def syn(tmp_path):
    p = tmp_path / "release_changes.jsonl"
    p.write_text("".join(json.dumps(e) + "\n" for e in SYN), encoding="utf-8")
    (tmp_path / "release_changes_coverage.json").write_text(json.dumps(
        {"accelerate": {"from": "v1.0.0", "to": "abc"}, "deepspeed": {"from": "v0.14.1", "to": "def"}}),
        encoding="utf-8")
    return p


def test_all_words_must_match_and_newest_first(syn):
    rc, out, err = run("--changes", "accelerate fix", data=syn)
    assert rc == 0 and err == ""
    assert out.index("accelerate 1.9.0") < out.index("accelerate 1.5.0")
    assert "before the fix users saw: UnboundLocalError" in out and "deepspeed" not in out.split("index covers")[0]
    rc, out, _ = run("--changes", "unboundlocalerror", data=syn)  # the symptom, any case
    assert rc == 0 and "#3659" in out.replace("PR #", "#")
    rc, out, _ = run("--changes", "#3409", data=syn)
    assert rc == 0 and "--zero_stage" in out and "3659" not in out
    assert "index covers: accelerate v1.0.0 .. abc." in out  # only the packages of the hits
    rc, out, _ = run("--changes", "zero_stage nomatchword", data=syn)
    assert rc == 1 and "no release change matches" in out  # a miss says everything that was searched
    assert "index covers: accelerate v1.0.0 .. abc; deepspeed v0.14.1 .. def" in out


def test_since_until_lib_filters_and_json(syn):
    rc, out, _ = run("--changes", "--lib", "accelerate", "--since", "1.5.0", data=syn)
    assert rc == 0 and "1.9.0" in out and "1.5.0  fix" not in out
    rc, out, _ = run("--changes", "--lib", "accelerate", "--until", "1.5.0", data=syn)
    assert rc == 0 and "1.5.0" in out and "1.9.0" not in out
    rc, out, _ = run("--changes", "zero", "--output", "json", "--limit", "1", data=syn)
    doc = json.loads(out)
    assert rc == 0 and len(doc["hits"]) == 1 and doc["more"] == 1 and doc["hits"][0]["lib"] == "deepspeed"
    rc, out, _ = run("--changes", "fully_shard", data=syn)
    assert rc == 0 and "torch 2.6.0  add  torch 2.5.1 -> 2.6.0" in out


@pytest.mark.parametrize("args, msg", [
    (("--since", "1.0.0"), "--lib, --since and --until go with --changes"),
    (("--changes", "x", "--since", "one"), "not a release version"),
    (("--changes",), "--changes needs a TEXT"),
    (("--changes", "x", "--limit", "0"), "--limit must be at least 1"),
    (("NAME", "--changes", "x"), "not with a NAME"),
])
def test_bad_arguments_are_one_line_errors(syn, args, msg):
    rc, out, err = run(*args, data=syn)
    assert rc == 2 and out == "" and msg in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("line, msg", [
    ("{not json", "not JSON"),
    (json.dumps(dict(SYN[0], lib="horovod")), "lib 'horovod'"),
    (json.dumps(dict(SYN[0], version="1.9")), "is not X.Y.Z"),
    (json.dumps(dict(SYN[0], sha="xyz")), "40 hex"),
    (json.dumps({k: v for k, v in SYN[0].items() if k != "pr"}), "'pr' missing"),
    (json.dumps({k: v for k, v in SYN[3].items() if k != "evidence"}), "'evidence' missing"),
    (json.dumps(dict(SYN[0], names=[])), "names must be"),
    (json.dumps(dict(SYN[0], pr=True)), "'pr' missing or not int"),
])
def test_a_malformed_index_line_is_named(tmp_path, line, msg):
    p = tmp_path / "bad.jsonl"
    p.write_text(json.dumps(SYN[1]) + "\n" + line + "\n", encoding="utf-8")
    rc, out, err = run("--changes", "x", data=p)
    assert rc == 2 and "bad.jsonl line 2" in err and msg in err and "Traceback" not in err


def test_a_missing_index_is_an_error_for_changes_but_not_for_names(tmp_path):
    rc, _, err = run("--changes", "x", data=tmp_path / "none.jsonl")
    assert rc == 2 and "cannot read the release-change index" in err
    rc, out, err = run("--nproc-per-node", data=tmp_path / "none.jsonl")
    assert rc == 0 and "release changes naming" not in out and err == ""


def test_a_name_lookup_lists_that_names_changes(syn):
    rc, out, _ = run("log_trace_cache_warnings", data=syn)
    assert rc == 0 and "release changes naming log_trace_cache_warnings" in out
    assert "deepspeed 0.16.4  change  PR #7039" in out
    rc, out, _ = run("fully_shard", data=syn)  # not a config name, but its history is known
    assert rc == 1 and "not found" in out and "torch 2.6.0  add" in out
    rc, out, _ = run("log_trace_cache_warnings", "--output", "json", data=syn)
    assert json.loads(out)["release_changes"][0]["pr"] == 7039


def test_the_real_index_answers_a_torch_and_a_name_query():
    rc, out, _ = run("--changes", "forward_sync_buffers")
    assert rc == 0 and "torch 2.13.0" in out and "DistributedDataParallel.__init__" in out
    rc, out, _ = run("--changes", "register_fsdp_forward_method", "--lib", "torch")
    assert rc == 0 and "torch.distributed.fsdp.register_fsdp_forward_method" in out and "2.6.0" in out

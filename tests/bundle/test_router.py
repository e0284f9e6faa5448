"""The top-level SKILL.md: front matter, triggers, one route per sub-skill, helpers, safety rules, facts."""
from __future__ import annotations

import ast
import importlib.metadata as md
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
TEXT = (REPO / "SKILL.md").read_text(encoding="utf-8")
_, FRONT, BODY = TEXT.split("---\n", 2)
FM = yaml.safe_load(FRONT)
SPEC = json.loads((Path(__file__).parent / "spec_facts.json").read_text())

TRIGGERS = ["Accelerate", "DeepSpeed", "FSDP", "Megatron", "FP8", "TPU", "DALLE-pytorch", "Horovod", "Apex",
            "multi-GPU", "multi-node", "which backend"]


# Each row names the stack it is for; several rows may lead to one sub-skill.
ROW_PREFIXES = ("Accelerate: ", "DALLE-pytorch: ", "PyTorch: ", "Any stack: ", "DeepSpeed without Accelerate: ",
                "Transformers Trainer: ")


def section(title: str) -> str:
    return BODY.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def sub_skills() -> list[str]:
    return sorted(p.parent.name for p in (REPO / "sub-skills").glob("*/SKILL.md"))


def helper_scripts() -> list[str]:
    """Runnable helpers: scripts/*.py at the root and sub-skills/*/scripts/*.py (not packages)."""
    found = [p for p in (REPO / "scripts").glob("*.py")] + list((REPO / "sub-skills").glob("*/scripts/*.py"))
    return sorted(str(p.relative_to(REPO)) for p in found if not p.name.startswith("_"))


def test_front_matter_only_spec_fields():
    assert set(FM) <= set(SPEC["skills_ref"]["ALLOWED_FIELDS"])
    assert FM["name"] == "pytorch-distributed-training"
    assert FM["license"] == "Apache-2.0"


def test_description_limits_and_triggers_in_first_250_characters():
    desc = FM["description"]
    assert 1 <= len(desc) <= 1024 and "<" not in desc and ">" not in desc
    head = desc[:250]
    missing = [w for w in TRIGGERS if w not in head]
    assert not missing, f"trigger words not in the first 250 characters: {missing}"


def test_routing_table_has_one_row_per_existing_sub_skill():
    rows = [ln for ln in section("Route the request").splitlines() if ln.startswith("| ") and "---" not in ln][1:]
    routed = []
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert len(cells) == 2, row
        m = re.fullmatch(r"\[(?:(Accelerate|DALLE-pytorch)'s )?([a-z0-9-]+)\]\(sub-skills/([a-z0-9-]+)/SKILL\.md\)", cells[1])
        assert m and m.group(2) == m.group(3), row
        # the two near-identical names always carry their stack
        stack = {"distributed-training-backends": "Accelerate", "distributed-and-backends": "DALLE-pytorch"}
        assert m.group(1) == stack.get(m.group(2)), row
        assert cells[0].startswith(ROW_PREFIXES), row
        routed.append(m.group(2))
    assert len(rows) == len(set(rows))
    assert sorted(set(routed)) == sub_skills(), "every sub-skill with a SKILL.md needs a router row"


def test_every_helper_script_is_named_with_a_usage_line():
    helpers = section("Helper scripts")
    for script in helper_scripts():
        lines = [ln for ln in helpers.splitlines() if f"`python3 {script}" in ln]
        assert len(lines) == 1, f"{script}: needs one usage line in the router"


@pytest.fixture(scope="module")
def helper_help():
    """--help of every helper, run once (they import no heavy packages)."""
    out = {}
    for script in helper_scripts():
        r = subprocess.run([sys.executable, script, "--help"], capture_output=True, text=True, timeout=60,
                           cwd=REPO, stdin=subprocess.DEVNULL)
        out[script] = r
    return out


def test_helpers_answer_help_and_know_the_flags_the_router_shows(helper_help):
    helpers = section("Helper scripts")
    for script, r in helper_help.items():
        assert r.returncode == 0, f"{script} --help: {r.stderr[-500:]}"
        assert "exit codes" in r.stdout.lower() and "example" in r.stdout.lower(), \
            f"{script} --help lacks examples or exit codes, as the router promises"
        line = next(ln for ln in helpers.splitlines() if f"`python3 {script}" in ln)
        usage = re.search(r"`python3 (\S+)([^`]*)`", line).group(2).split()
        shown = [t for t in usage if t.startswith("--")]
        shown += re.findall(r"`(--[a-z-]+)(?: [A-Z_]+)?`", line)
        for flag in shown:
            assert flag in r.stdout, f"{script}: router shows {flag}, --help does not"
    avail = "sub-skills/distributed-and-backends/scripts/check_backend_availability.py"
    if avail in helper_help:
        assert "accelerate-fsdp2" in helper_help[avail].stdout
        assert "environment of the Python" in helper_help[avail].stdout.replace("\n", " ")


def test_safety_rules_of_both_seeds():
    rules = section("Safety rules (apply in every sub-skill)").replace("\n   ", " ")
    for phrase in ("source builds", "`sudo apt-get`", "Docker builds", "distributed launchers",
                   "explicit approval", "Parsing is not running",
                   "A CUDA allocation proves only that torch sees a device",
                   "Optional backends stay optional", "DeepSpeed", "Horovod", "Apex"):
        assert phrase in rules, phrase


# ---------------------------------------------------------------- every code span in the router is a checked fact

ACCELERATE = Path(md.distribution("accelerate").locate_file("accelerate"))
ACCELERATOR_METHODS = {n.name for c in ast.parse((ACCELERATE / "accelerator.py").read_text()).body
                       if isinstance(c, ast.ClassDef) and c.name == "Accelerator"
                       for n in c.body if isinstance(n, ast.FunctionDef)}


def _console_scripts(dist):
    return {e.name for e in md.distribution(dist).entry_points if e.group == "console_scripts"}


def _subcommand(name, rel):
    return re.search(rf"add_parser\(\s*\"{name}\"", (ACCELERATE / rel).read_text()) is not None


def _dalle_facts():
    return json.loads((REPO / "tests" / "dalle_siblings" / "facts_58c1e1a.json").read_text())


FACTS = {
    "accelerate": lambda: "accelerate" in _console_scripts("accelerate"),
    "torch.distributed": lambda: __import__("importlib").import_module("torch.distributed").is_available(),
    "fully_shard": lambda: hasattr(__import__("importlib").import_module("torch.distributed.fsdp"), "fully_shard"),
    "accelerate launch": lambda: _subcommand("launch", "commands/launch.py"),
    "accelerate config": lambda: _subcommand("config", "commands/config/config.py"),
    "deepspeed": lambda: any(f.name == "deepspeed" and f.parent.name == "bin"
                             for f in map(Path, map(str, md.distribution("deepspeed").files))),
    "torchrun": lambda: "torchrun" in _console_scripts("torch"),
    "deepspeed.initialize": lambda: re.search(r"^def initialize\(", Path(
        md.distribution("deepspeed").locate_file("deepspeed/__init__.py")).read_text(), re.M) is not None,
    "Accelerator": lambda: bool(ACCELERATOR_METHODS),
    # the recovery script DeepSpeed ships and copies into each checkpoint folder
    "zero_to_fp32": lambda: Path(md.distribution("deepspeed").locate_file("deepspeed/utils/zero_to_fp32.py")).is_file(),
    # the key `accelerate config` writes into the YAML's deepspeed_config block
    "deepspeed_config_file": lambda: 'deepspeed_config["deepspeed_config_file"]' in (
        ACCELERATE / "commands/config/cluster.py").read_text(),
    "dalle_pytorch": lambda: "dalle_pytorch" in md.distribution("dalle-pytorch").read_text("top_level.txt").split(),
    "--distributed_backend": lambda: "'--distributed_backend'" in Path(
        md.distribution("dalle-pytorch").locate_file("dalle_pytorch/distributed_utils.py")).read_text(),
    **{m: (lambda m=m: m in ACCELERATOR_METHODS)
       for m in ("prepare", "backward", "accumulate", "unwrap_model", "save_state", "load_state",
                 "gather_for_metrics")},
    **{s: (lambda s=s: s in _dalle_facts()["scripts"]) for s in ("train_vae.py", "train_dalle.py", "generate.py")},
    # the hit format find_docs.py documents in its own help
    "PATH:FIRST-LAST": lambda: "PATH:FIRST-LAST" in (REPO / "scripts" / "find_docs.py").read_text(),
}
# Spans that are not facts about a package: commands named in a safety rule, flags of our helpers
# (checked against their --help above), and the helpers' usage lines (checked above).
NOT_FACTS = {"sudo apt-get", "--help"}


def router_spans():
    spans = []
    for ln in BODY.splitlines():
        spans += re.findall(r"`([^`]+)`", ln)
    return spans


def test_every_code_span_in_the_router_is_verified():
    helper_flags = set(re.findall(r"`(--[a-z-]+)(?: [A-Z_]+)?`", section("Helper scripts")))  # checked against --help
    unverified = []
    for span in router_spans():
        if span in NOT_FACTS or span.split(" ")[0] in helper_flags or span.startswith(
                ("python3 ", "sub-skills/", "references/", "scripts/")):
            continue
        check = FACTS.get(span)
        if check is None:
            unverified.append(span)
        else:
            assert check(), f"router fact does not hold in the installed packages: {span}"
    assert not unverified, f"code spans with no fact check: {unverified}"

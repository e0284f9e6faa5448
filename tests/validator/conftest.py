"""Fixtures for the validator tests.

The validator runs in-process (it is standard library + PyYAML). accelerate,
torch and deepspeed run only in ONE oracle subprocess per session
(tests/oracle/accelerate_oracle.py), fed every rule example and every corpus
config at once.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / "sub-skills" / "distributed-training-backends" / "scripts"
ORACLE = REPO / "tests" / "oracle" / "accelerate_oracle.py"

# The deepspeed_config_file the examples name, and an unparseable one.
DS_CONFIG = {"zero_optimization": {"stage": 2}, "train_micro_batch_size_per_gpu": "auto",
             "gradient_accumulation_steps": "auto", "bf16": {"enabled": "auto"}}


def _import_validator():
    if str(SCRIPTS) not in sys.path:
        sys.path.insert(0, str(SCRIPTS))
    import backend_validator.cli as cli  # noqa: E402
    import backend_validator.core as core  # noqa: E402
    import backend_validator.docs as docs  # noqa: E402
    cli._rules_loaded()
    return cli, core, docs


@pytest.fixture(scope="session")
def bv():
    cli, core, docs = _import_validator()

    class NS:
        pass

    ns = NS()
    ns.cli, ns.core, ns.docs = cli, core, docs
    return ns


@pytest.fixture(scope="session")
def workspace(tmp_path_factory):
    d = tmp_path_factory.mktemp("launchdir")
    (d / "ds_config.json").write_text(json.dumps(DS_CONFIG), encoding="utf-8")
    (d / "broken.json").write_text('{"zero_optimization": {"stage": 2},}\n{', encoding="utf-8")
    return d


def own_rule(rid: str) -> bool:
    return rid.startswith(("acc-", "yaml-", "input-"))


@pytest.fixture(scope="session")
def rule_examples(bv):
    """[(rule, label, lang, text)] for every rule of this area (acc-/yaml-/input-)."""
    out = []
    for r in sorted(bv.core.REGISTRY.values(), key=lambda r: r.id):
        if not own_rule(r.id):
            continue
        _, ex = bv.docs.parse_doc(r.doc)
        for label in ("Fails", "Passes"):
            if label in ex:
                lang, text = ex[label]
                out.append((r, label, lang, text))
    return out


def example_name(lang: str) -> str:
    return "config.json" if lang == "json" else "config.yaml"


def corpus_files(corpus_dir: Path):
    files = sorted(p for p in (corpus_dir / "accelerate").iterdir() if p.suffix in (".yaml", ".yml", ".json"))
    files += sorted(p for p in (corpus_dir / "broken").iterdir() if p.suffix in (".yaml", ".yml"))
    return files


@pytest.fixture(scope="session")
def oracle(rule_examples, workspace, corpus_dir, python_exe):
    """Run the oracle once on every rule example and corpus config; return {id: result}."""
    configs = []
    for r, label, lang, text in rule_examples:
        configs.append({"id": f"{r.id}:{label}", "text": text, "name": example_name(lang), "cwd": str(workspace)})
    for p in corpus_files(corpus_dir):
        configs.append({"id": f"corpus:{p.parent.name}/{p.name}", "path": str(p), "name": p.name})
    proc = subprocess.run([python_exe, str(ORACLE)], input=json.dumps({"configs": configs, "facts": True}),
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    answer = json.loads(proc.stdout)
    assert answer["versions"]["accelerate"] == "1.15.0", answer["versions"]
    results = {r["id"]: r for r in answer["results"]}
    results["__versions__"] = answer["versions"]
    results["__patches__"] = answer["patches"]
    results["__facts__"] = answer["facts"]
    return results


@pytest.fixture(scope="session")
def run_validator(bv):
    """validate(text, name, cwd, check_imports=False) -> cli.FileResult (in-process)."""

    def validate(text, name, cwd, check_imports=False):
        opts = bv.core.Options(cwd=str(cwd), check_imports=check_imports)
        return bv.cli.validate_text(text, name, "auto", opts)

    return validate


@pytest.fixture(scope="session")
def helpers():
    class H:
        pass

    h = H()
    h.example_name = example_name
    h.corpus_files = corpus_files
    h.own_rule = own_rule
    return h

"""Session fixtures for the backends_docs tests: one oracle subprocess answers every question
that needs torch/accelerate/deepspeed (they are never imported in the pytest process)."""
from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def _load(name):
    spec = importlib.util.spec_from_file_location(f"backends_docs_{name}", HERE / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


D = _load("_docs")

MEMORY_GRID = [(7_000_000_000, 131_072_000, 8, 1), (1_300_000_000, 50_000_000, 4, 2),
               (70_000_000_000, 1_000_000_000, 8, 4), (350_000_000, 25_000_000, 1, 1)]


@pytest.fixture(scope="session")
def docs():
    return {p: p.read_text(encoding="utf-8") for p in D.DOCS}


def python_snippets(docs):
    out = []
    for path, text in docs.items():
        for i, (info, body) in enumerate(D.fenced_blocks(text)):
            if info == "python":
                out.append((f"{path.name}#py{i}", body))
    return out


@pytest.fixture(scope="session")
def oracle(docs):
    # probes used by test_names.py to show the resolver rejects misspellings and accepts twins
    probes = ["accelerate.utils.DeepSpeedPlugins", "accelerate.utils.DeepSpeedPlugin",
              "FullyShardedDataParallelPlugin.reshard_after_foward", "DeepSpeedPlugin.zero3_init",
              "TERecipeKwarg", "FP8BackendTyp"]
    spans = [s for t in docs.values() for _, s in D.code_spans(t)] + probes
    imports, classes, fields = D.Resolver.wanted(spans)
    table = D.table_rows(docs[D.REFS / "api-reference.md"], "Class")
    class_table = [D.spans_in(r[0])[0] for r in table]
    imports = sorted(set(imports) | {f"{D.spans_in(r[1])[0]}.{D.spans_in(r[0])[0]}" for r in table})
    runnable = [(n, b) for n, b in python_snippets(docs) if not b.startswith("# cpu: no-run")]
    req = {
        "examples": [str(p.relative_to(D.REPO)) for p in D.accelerate_examples()],
        "snippets": runnable,
        "imports": imports,
        "classes": sorted(set(classes) | set(class_table)),
        "fields": [list(f) for f in fields],
        "class_fields": class_table + ["MegatronLMPlugin"],
        "estimates": MEMORY_GRID,
        "to_fsdp2": [str((D.EXAMPLES / "fsdp1.yaml").relative_to(D.REPO))],
    }
    proc = subprocess.run([sys.executable, str(HERE / "_oracle.py")], input=json.dumps(req),
                          capture_output=True, text=True, cwd=D.REPO, timeout=300)
    if proc.returncode != 0:
        pytest.fail(f"oracle failed:\n{proc.stderr[-4000:]}")
    ans = json.loads(proc.stdout)
    ans["facts"]["validator_flags"] = validator_flags()
    ans["facts"]["rule_ids"] = validator_rule_ids()
    return ans


def validator_rule_ids():
    """Rule ids of the validator registry (`--list-rules`, first column)."""
    if not D.VALIDATOR.is_file():
        return []
    out = subprocess.run([sys.executable, str(D.VALIDATOR), "--list-rules"], capture_output=True, text=True)
    return sorted({line.split()[0] for line in out.stdout.splitlines() if line.strip()})


def validator_flags():
    """Flags of the bundled validator CLI (an empty list if it does not exist yet)."""
    if not D.VALIDATOR.is_file():
        return []
    out = subprocess.run([sys.executable, str(D.VALIDATOR), "--help"], capture_output=True, text=True)
    return sorted(set(re.findall(r"(?<![\w-])--[a-z][\w-]*", out.stdout)))


@pytest.fixture(scope="session")
def resolver(oracle):
    return D.Resolver(oracle["facts"], oracle)


@pytest.fixture(scope="session")
def docs_mod():
    return D

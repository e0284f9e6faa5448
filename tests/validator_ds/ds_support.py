"""Fixtures and helpers for the DeepSpeed / cross-file validator tests (conftest.py re-exports the
fixtures; test modules import the helpers from here by this unique module name).

The validator runs in-process. deepspeed, accelerate and torch run only in two oracle
subprocesses per session, each fed every job at once:
tests/oracle/deepspeed_oracle.py (rule examples, edge cases, review set; the opt-in corpus layer
adds one more for the corpus JSONs per consumer and their mutations) and
tests/oracle/accelerate_oracle.py (cross-file examples: YAML + JSON through accelerate launch).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SCRIPTS = REPO / "sub-skills" / "distributed-training-backends" / "scripts"
DS_ORACLE = REPO / "tests" / "oracle" / "deepspeed_oracle.py"
ACC_ORACLE = REPO / "tests" / "oracle" / "accelerate_oracle.py"
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
if str(SCRIPTS) not in sys.path:
    sys.path.insert(0, str(SCRIPTS))

import ds_edge_cases  # noqa: E402
import ds_examples  # noqa: E402
import ds_review_cases  # noqa: E402


def ds_rules():
    return {rid: r for rid, r in ds_examples.load_rules().items() if r.family == "deepspeed"}


def xf_rules():
    return {rid: r for rid, r in ds_examples.load_rules().items() if r.family == "cross"}


def corpus_ds_files(corpus_dir: Path):
    files = sorted((corpus_dir / "deepspeed").iterdir())
    files += sorted(p for p in (corpus_dir / "broken").iterdir() if p.suffix in (".json", ".conf"))
    return [p for p in files if p.is_file()]


def validate_json(text: str, consumer=None, world_size=None, name="ds_config.json"):
    """Run loader + consumer resolution + deepspeed rules; return (findings, consumer)."""
    from backend_validator import core, deepspeed, loader_json
    ds_examples.load_rules()
    doc = loader_json.load_text(text, name)
    opts = core.Options(consumer=consumer, world_size=world_size)
    ctx = core.Context(doc=doc, options=opts)
    ctx.consumer, ctx.consumer_reason = deepspeed.resolve_consumer(doc, consumer, False)
    findings = deepspeed.consumer_parse_findings(doc.parse_findings, ctx.consumer) + core.run_rules(ctx, "deepspeed")
    return findings, ctx.consumer


def _run(script: Path, payload, timeout=170):
    env = dict(os.environ)
    p = subprocess.run([sys.executable, str(script)], input=json.dumps(payload), capture_output=True, text=True,
                       timeout=timeout, env=env)
    if p.returncode != 0 or not p.stdout.strip():
        pytest.fail(f"oracle {script.name} failed (rc {p.returncode}): {p.stderr[-3000:]}")
    return json.loads(p.stdout)


@pytest.fixture(scope="session")
def ds_oracle(tmp_path_factory):
    """Results keyed by job id: rule examples ("rule|fails"), edge cases, cross-file world sizes and
    the review set. The corpus jobs run in `ds_corpus_oracle` (opt-in corpus layer)."""
    jobs = []
    for rid, r in ds_rules().items():
        ex = ds_examples.parse(r.doc)
        cons = ex["consumer"] or "deepspeed"
        for kind in ("fails", "passes"):
            jobs.append({"id": f"{rid}|{kind}", "text": ex[kind]["json"], "consumer": cons,
                         "world_size": ex["world_size"], "effect": ex["effect"] if kind == "fails" else None})
    jobs += ds_edge_cases.edge_jobs() + xf_world_jobs() + review_jobs()
    return {r["id"]: r for r in _run(DS_ORACLE, jobs)}


@pytest.fixture(scope="session")
def ds_corpus_oracle(corpus_dir):
    """Corpus files under each consumer ("corpus|<name>|<consumer>") and their seeded mutations."""
    jobs = []
    for p in corpus_ds_files(corpus_dir):
        text = p.read_text(encoding="utf-8", errors="replace")
        for cons in ("deepspeed", "accelerate", "transformers"):
            jobs.append({"id": f"corpus|{p.name}|{cons}", "text": text, "consumer": cons, "world_size": None})
    jobs += mutation_jobs(corpus_dir)
    return {r["id"]: r for r in _run(DS_ORACLE, jobs)}


def _pair_world(yaml_text):
    import yaml
    y = yaml.safe_load(yaml_text)
    return int(y.get("num_processes", 1)) * int(y.get("num_machines", 1))


def review_jobs():
    """ds_review_cases: every standalone config with its consumer and world size, and the JSON of
    every YAML pair as Accelerate feeds it to deepspeed at the YAML's world size."""
    jobs = [{"id": f"review|{i}", "text": t, "consumer": c, "world_size": w}
            for i, t, c, w in ds_review_cases.STANDALONE]
    jobs += [{"id": f"reviewpair|{i}", "text": j, "consumer": "accelerate", "world_size": _pair_world(y)}
             for i, y, j, _n, _w in ds_review_cases.PAIRS if j is not None]
    return jobs


@pytest.fixture(scope="session")
def review_pairs(tmp_path_factory):
    """{id: (launch_dir, yaml_path)} for ds_review_cases.PAIRS written to disk."""
    out = {}
    for i, y, j, name, where in ds_review_cases.PAIRS:
        launch = tmp_path_factory.mktemp(f"review-{i}")
        ydir = launch / "cfg" if where == "yamldir" else launch
        ydir.mkdir(exist_ok=True)
        (ydir / "config.yaml").write_text(y, encoding="utf-8")
        if j is not None:
            (ydir / name).write_text(j, encoding="utf-8")
        out[i] = (launch, ydir / "config.yaml")
    return out


@pytest.fixture(scope="session")
def review_acc_oracle(review_pairs):
    items = [{"id": i, "path": str(y), "name": "config.yaml", "cwd": str(d)} for i, (d, y) in review_pairs.items()]
    return {r["id"]: r for r in _run(ACC_ORACLE, {"configs": items})["results"]}


def mutation_jobs(corpus_dir):
    from backend_validator import deepspeed as D, loader_json
    docs = []
    for p in corpus_ds_files(corpus_dir):
        try:
            docs.append(loader_json.load_path(str(p)).data)
        except Exception:  # noqa: BLE001 - unparseable broken files
            pass
    keys = sorted(set(D.TOP_LEVEL_KEYS) | {k for b in D.STRICT_BLOCKS.values() for k in b[0]})
    return ds_edge_cases.mutation_jobs(docs, keys)


@pytest.fixture(scope="session")
def xf_cases(tmp_path_factory):
    """{(rule, kind): (launch_dir, yaml_path, example)} written to disk."""
    out = {}
    for rid, r in xf_rules().items():
        ex = ds_examples.parse(r.doc)
        for kind in ("fails", "passes"):
            d = tmp_path_factory.mktemp(f"{rid}-{kind}")
            y = d / "config.yaml"
            y.write_text(ex[kind]["yaml"], encoding="utf-8")
            if "json" in ex[kind]:
                (d / "ds_config.json").write_text(ex[kind]["json"], encoding="utf-8")
            out[(rid, kind)] = (d, y, ex)
    return out


@pytest.fixture(scope="session")
def acc_oracle(xf_cases):
    items = [{"id": f"{rid}|{kind}", "path": str(y), "name": "config.yaml", "cwd": str(d)}
             for (rid, kind), (d, y, ex) in xf_cases.items()]
    ans = _run(ACC_ORACLE, {"configs": items})
    return {r["id"]: r for r in ans["results"]}


def xf_world_jobs():
    """Cross examples marked ``Oracle: deepspeed-world=yaml``: their JSON through the deepspeed
    oracle as Accelerate reads it, with the world size the YAML launches."""
    import yaml
    jobs = []
    for rid, r in xf_rules().items():
        ex = ds_examples.parse(r.doc)
        if ex.get("deepspeed-world") != "yaml":
            continue
        for kind in ("fails", "passes"):
            y = yaml.safe_load(ex[kind]["yaml"])
            w = int(y.get("num_processes", 1)) * int(y.get("num_machines", 1))
            jobs.append({"id": f"xfworld|{rid}|{kind}", "text": ex[kind]["json"], "consumer": "accelerate",
                         "world_size": w})
    return jobs


# deepspeed.initialize with the script's own torch.optim.AdamW, one step, per config; one process
# (DeepSpeed's CPU accelerator, the oracle's _setup). Used by the offload tests.
_CLIENT_OPTIMIZER_PROBE = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from deepspeed_oracle import _setup
torch, deepspeed = _setup()
out = {}
for name, cfg in json.loads(sys.argv[2]).items():
    m = torch.nn.Linear(4, 4)
    try:
        eng, *_ = deepspeed.initialize(model=m, optimizer=torch.optim.AdamW(m.parameters(), lr=1e-3), config=cfg)
        eng.backward(eng(torch.randn(2, 4)).sum())
        eng.step()
        out[name] = {"ok": True, "stage": int(eng.zero_optimization_stage()), "cpu_optimizer_path":
                     eng.zero_use_cpu_optimizer(), "optimizer": type(eng.basic_optimizer).__name__}
    except BaseException as e:
        out[name] = {"ok": False, "error": type(e).__name__, "message": str(e)[:300]}
print("RESULT " + json.dumps(out))
"""


def run_with_client_optimizer(configs: dict) -> dict:
    """{name: DeepSpeed config} -> {name: {"ok", "stage", "cpu_optimizer_path", "optimizer"} or
    {"ok": False, "error", "message"}} from real deepspeed.initialize runs on the CPU accelerator."""
    env = dict(os.environ, DS_ACCELERATOR="cpu")
    r = subprocess.run([sys.executable, "-c", _CLIENT_OPTIMIZER_PROBE, str(DS_ORACLE.parent), json.dumps(configs)],
                       capture_output=True, text=True, timeout=600, env=env)
    line = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")]
    assert line, r.stdout[-2000:] + r.stderr[-2000:]
    return json.loads(line[0][len("RESULT "):])

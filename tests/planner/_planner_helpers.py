"""Helpers shared by the plan_backend.py tests (a uniquely named module: pytest runs with
--import-mode=importlib, and conftest.py puts this folder on sys.path)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / "sub-skills" / "distributed-training-backends" / "scripts"
PLANNER = SCRIPTS / "plan_backend.py"
VALIDATOR = SCRIPTS / "validate_backend_config.py"


def run_planner(*args, cwd=None):
    return subprocess.run([sys.executable, str(PLANNER), *map(str, args)], capture_output=True, text=True,
                          timeout=120, cwd=cwd or REPO, stdin=subprocess.DEVNULL)


def plan_json(*args):
    r = run_planner(*args, "--output", "json")
    assert r.returncode in (0, 1), r.stderr
    return json.loads(r.stdout)


def candidate(result, strategy, offload="none", device=None):
    found = [c for c in result["candidates"] if c["strategy"] == strategy and c["offload"] == offload
             and (device is None or c["offload_device"] == device)]
    assert found, (strategy, offload)
    return found[0]


def write_config(tmp_path: Path, cfg: dict, name="config.json") -> Path:
    p = tmp_path / name
    p.write_text(json.dumps(cfg))
    return p


def run_inproc(module, *args):
    """(exit code, stdout, stderr) of the planner's main() in this process: the same code path as
    the CLI minus interpreter start; argparse usage errors arrive as SystemExit."""
    import contextlib
    import io
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = module.main([str(a) for a in args])
        except SystemExit as exc:
            rc = exc.code
    return rc, out.getvalue(), err.getvalue()


def run_ranks(worker: Path, tmp: Path, *args, world: int = 2, env: dict | None = None, timeout: int = 600):
    """Run `worker OUT.json *args` as `world` CPU processes of one gloo job (file:// rendezvous in tmp,
    DS_ACCELERATOR=cpu, one thread each) and return each rank's JSON. A rank that fails or a job
    that outlives `timeout` seconds fails the test, with the rank's stderr; every rank is killed."""
    import pytest
    base = dict(os.environ, DS_ACCELERATOR="cpu", WORLD_SIZE=str(world), PLANNER_STORE=str(tmp / "store"),
                PYTHONWARNINGS="ignore", OMP_NUM_THREADS="1", **(env or {}))
    import time
    procs, logs = [], [tmp / f"rank{rank}.log" for rank in range(world)]
    try:
        for rank in range(world):
            e = dict(base, RANK=str(rank), LOCAL_RANK=str(rank))
            with open(logs[rank], "w") as log:       # a file, not a pipe: a full pipe would stall the job
                procs.append(subprocess.Popen([sys.executable, str(worker), str(tmp / f"rank{rank}.json"),
                                               *map(str, args)], env=e, cwd=REPO, stdout=log,
                                              stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL))
        deadline = time.monotonic() + timeout
        for p in procs:
            try:
                p.wait(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                tails = "\n".join(f"rank {r}: {logs[r].read_text(errors='replace')[-1000:]}" for r in range(world))
                pytest.fail(f"{world}-process job {worker.name} hung for {timeout} s\n{tails}")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for rank, p in enumerate(procs):
        assert p.returncode == 0, f"rank {rank} exit {p.returncode}: {logs[rank].read_text(errors='replace')[-2000:]}"
    return [json.loads((tmp / f"rank{r}.json").read_text()) for r in range(world)]

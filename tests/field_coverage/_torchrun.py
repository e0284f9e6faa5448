"""One way to run a field-coverage probe: real torchrun (python -m torch.distributed.run) on
127.0.0.1 with a free port, and the probe's last "RESULT {json}" line read back.

A test module's probe_run(tmp_path_factory) is its one probe run; its fixture returns
shared(probe_run, tmp_path_factory): the result of the run conftest.py started early (prefetch), or
of a run started there and then."""
from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

_TESTS = str(Path(__file__).resolve().parents[1])  # tests/, for _ports
if _TESTS not in sys.path:
    sys.path.append(_TESTS)
import _ports  # noqa: E402


def free_port() -> int:
    """A free port, chosen and reserved by tests/_ports.py (outside the ephemeral range)."""
    return _ports.free_port()


def torchrun(probe: Path, *args: str, nproc: int, cwd: Path, env: dict, timeout: int = 600):
    """Start PROBE under torchrun with NPROC local ranks; the completed process is returned."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(nproc),
           "--master_addr", "127.0.0.1", "--master_port", str(free_port()), str(probe), *map(str, args)]
    return subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def result(proc) -> dict:
    """The last RESULT line of a probe that exited 0 (the run's tail is the failure message)."""
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, (proc.stdout + proc.stderr)[-3000:]
    return json.loads(lines[-1][len("RESULT "):])


_STARTED: dict = {}


def prefetch(runs, tmp_path_factory, workers: int = 2) -> ThreadPoolExecutor:
    """Start every probe run in runs, `workers` at a time; the caller shuts the pool down."""
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="probe")
    for run in runs:
        _STARTED[run] = pool.submit(run, tmp_path_factory)
    return pool


def shared(run, tmp_path_factory):
    """What run(tmp_path_factory) returns (or raises), from its prefetched run when there is one."""
    started = _STARTED.get(run)
    return started.result() if started is not None else run(tmp_path_factory)


def side_by_side(run, tmp: Path, *variants) -> dict:
    """run(tmp, v) for every variant at once (two torchrun jobs on two cores), as {variant: result}."""
    with ThreadPoolExecutor(max_workers=len(variants), thread_name_prefix="variant") as pool:
        futures = {v: pool.submit(run, tmp, v) for v in variants}
        return {v: f.result() for v, f in futures.items()}

"""`InitProcessGroupKwargs(timeout=...)` takes a timedelta; a bare number fails only when the group is made.

hangs-and-timeouts.md "Longer timeouts for slow steps": the dataclass accepts `timeout=30`, and the
`Accelerator` that creates the process group then raises torch's `_check_valid_timeout` TypeError; a
`timedelta` reaches the default group. One process, gloo on CPU (accelerate 1.15.0, torch 2.13.0), one child
per case so each `Accelerator` is the first of its process."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _ports import free_port  # noqa: E402

CHILD = r"""
import datetime, json, os, sys
from accelerate import Accelerator
from accelerate.utils import InitProcessGroupKwargs
timeout = datetime.timedelta(seconds=77) if sys.argv[1] == "timedelta" else 77
kw = InitProcessGroupKwargs(backend="gloo", timeout=timeout)       # the dataclass takes either
out = {"built": True}
try:
    Accelerator(cpu=True, kwargs_handlers=[kw])
    import torch, torch.distributed as dist
    out["group_timeout_s"] = dist.GroupMember.WORLD._get_backend(torch.device("cpu")).options._timeout.total_seconds()
except Exception as e:
    import traceback
    out.update(error=type(e).__name__, message=str(e), where=traceback.extract_tb(e.__traceback__)[-1].name)
print(json.dumps(out))
"""


def _run(case: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACCELERATE_", "MASTER_", "TORCH_DISTRIBUTED"))}
    env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), RANK="0", WORLD_SIZE="1", LOCAL_RANK="0",
               OMP_NUM_THREADS="1")
    r = subprocess.run([sys.executable, "-c", CHILD, case], capture_output=True, text=True, timeout=180, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_int_timeout_fails_when_the_accelerator_creates_the_group():
    out = _run("int")
    assert out["built"] is True                       # InitProcessGroupKwargs(timeout=77) itself raised nothing
    assert out["error"] == "TypeError", out
    assert out["message"].startswith("Expected timeout argument to be of type datetime.timedelta"), out
    assert out["where"] == "_check_valid_timeout", out


def test_timedelta_timeout_reaches_the_default_group():
    out = _run("timedelta")
    assert "error" not in out, out
    assert out["group_timeout_s"] == 77.0, out

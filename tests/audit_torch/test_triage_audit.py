"""Behaviour claims of sub-skills/failure-triage/references that no reproduction test ran yet.

- numerics.md: DeepSpeed's DynamicLossScaler (DS_ACCELERATOR=cpu, one gloo process): what it logs on
  an overflow, when it lowers the scale (hysteresis), and the error at the minimum scale.
- generation-under-sharding.md: under FSDP2 a rank that runs one forward more than its peer waits in
  the parameter all-gather until the group timeout (2-rank gloo job in _jobs_audit.py).
The ledger is tests/audit/claims/failure-triage.yaml.
"""
from __future__ import annotations

import os
import subprocess
import sys

from pathlib import Path

_TESTS = str(Path(__file__).resolve().parents[1])  # tests/, for _ports
if _TESTS not in sys.path:
    sys.path.append(_TESTS)
import _ports  # noqa: E402

SCALER = r"""
import io, logging, torch
import deepspeed
from deepspeed.utils import logger
deepspeed.init_distributed(dist_backend="gloo", auto_mpi_discovery=False)
buf = io.StringIO(); logger.addHandler(logging.StreamHandler(buf)); logger.setLevel(logging.INFO)
from deepspeed.runtime.constants import FP16_HYSTERESIS_DEFAULT
from deepspeed.runtime.fp16.loss_scaler import DynamicLossScaler
s = DynamicLossScaler(init_scale=4, scale_window=1000, min_scale=1, delayed_shift=FP16_HYSTERESIS_DEFAULT,
                      consecutive_hysteresis=False, raise_error_at_min_scale=True, dtype=torch.half)
scales = []
for _ in range(4):
    try:
        s.update_scale(True); scales.append(s.cur_scale)
    except Exception as e:
        scales.append("ERR " + str(e))
print("HYST", FP16_HYSTERESIS_DEFAULT)
print("SCALES", scales)
for line in buf.getvalue().splitlines():
    if "OVERFLOW" in line:
        print("LOG", line)
"""


def _port() -> str:
    """A free port, chosen and reserved by tests/_ports.py (outside the ephemeral range)."""
    return str(_ports.free_port())


def test_deepspeed_dynamic_loss_scaler_overflow_lines():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MASTER_", "RANK", "WORLD_SIZE", "LOCAL_"))}
    env.update(DS_ACCELERATOR="cpu", MASTER_ADDR="127.0.0.1", MASTER_PORT=_port(), RANK="0", WORLD_SIZE="1",
               LOCAL_RANK="0")
    out = subprocess.run([sys.executable, "-c", SCALER], capture_output=True, text=True, timeout=240, env=env,
                         stdin=subprocess.DEVNULL)
    lines = out.stdout.splitlines()
    assert "HYST 2" in lines, out.stderr[-3000:]
    # default hysteresis 2: the first overflow keeps the scale, then each overflow halves it, then the error
    assert ("SCALES [4, 2.0, 1.0, 'ERR Current loss scale already at minimum - cannot decrease scale anymore. "
            "Exiting run.']") in lines, (lines, out.stderr[-3000:])
    logs = [x for x in lines if x.startswith("LOG ")]
    assert len(logs) == 3 and all(x.startswith("LOG [deepspeed] OVERFLOW! Rank 0 Skipping step.") for x in logs)
    assert "but hysteresis is 2. Reducing hysteresis to 1" in logs[0]
    assert "Attempted loss scale: 4, reducing to 2" in logs[1]


def test_fsdp2_rank_with_an_extra_forward_waits_in_the_gather(audit_job):
    j = [audit_job.rank(r, "audit") for r in (0, 1)]
    assert "Timed out waiting 3000ms" in j[0]["fsdp_extra_forward"]["error"]["msg"]
    assert j[1]["fsdp_extra_forward"]["ok"] == 1

"""The gloo size-mismatch abort, provoked for real: a 2-stage DeepSpeed pipeline (CPU accelerator, gloo) trained
with micro-batch 2 and evaluated on batch 8 without dynamic_shape (tests/deepspeed_direct/_ds_runtime_probe.py,
variant "static"); the receiving stage's stderr is triaged. ~15 s."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import _repro as R  # noqa: E402  (tests/failure_triage is on sys.path: conftest.py)

DS = Path(__file__).resolve().parents[1] / "deepspeed_direct"
sys.path.insert(0, str(DS))
import _ds_matrix as m  # noqa: E402


@pytest.mark.reproduces("torch-gloo-received-size-mismatch")
def test_pipeline_eval_batch_size_aborts_the_receiving_stage(tmp_path, request):
    port = m._port()
    procs = [subprocess.Popen([sys.executable, str(DS / "_ds_runtime_probe.py"), "pipe", str(tmp_path), "static"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=m._env(m.EXT, rk, 2, port), cwd=tmp_path) for rk in range(2)]
    outs = []
    for p in procs:
        try:
            outs.append(p.communicate(timeout=240))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            outs.append(p.communicate())
    stage1 = outs[1][1]
    assert procs[1].returncode != 0
    for entry_id in request.node.get_closest_marker("reproduces").args:
        R.assert_reproduced(stage1, entry_id)

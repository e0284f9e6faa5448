"""parallelism-and-precision.md: with TP enabled, a model without DTensor parameters is skipped by
`Accelerator._prepare_tp` (it logs "skip the TP preparation"), and on the multi-process path without FSDP2
`prepare_model` then raises NotImplementedError "Model should undergo tensor parallel". The set-4 answer
eval (s4-acb-08) caught the reference saying training then runs unsharded with no error.

accelerate 1.15.0 in a child process; the state singleton is forced to MULTI_CPU with a TP-enabled
parallelism config (what prepare reads), so no TP device mesh or launcher is needed for the check.
"""
from __future__ import annotations

import subprocess
import sys
import textwrap

CHILD = textwrap.dedent("""
    import types, torch
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState
    from accelerate.utils import DistributedType
    acc = Accelerator(cpu=True)
    AcceleratorState._shared_state["distributed_type"] = DistributedType.MULTI_CPU
    AcceleratorState._shared_state["parallelism_config"] = types.SimpleNamespace(
        tp_enabled=True, cp_enabled=False, sp_enabled=False, dp_shard_enabled=False, fsdp_enabled=False, tp_size=2)
    try:
        acc.prepare(torch.nn.Linear(2, 2))
        print("accepted")
    except NotImplementedError as e:
        print("raises", "undergo tensor parallel" in str(e))
""")


def test_non_dtensor_model_is_skipped_by_prepare_tp_then_refused_by_prepare_model():
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "raises True", out.stdout
    assert "we skip the TP preparation" in out.stdout + out.stderr

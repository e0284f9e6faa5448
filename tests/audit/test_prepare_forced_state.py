"""What `Accelerator.prepare` checks before and after its backend dispatch, read with the AcceleratorState
singleton forced to each distributed type in one child process (accelerate 1.15.0; what `prepare` reads,
so no launcher or device mesh is needed):

- quantized-models.md: the multi-entry `hf_device_map` check sits in `prepare` itself, before the
  dispatch, so DeepSpeed and FSDP raise it too (set-3 s3-acb-06 caught the reference saying FSDP2 and
  DeepSpeed never check the device map);
- parallelism-and-precision.md: with TP enabled, a model without DTensor parameters is skipped by
  `_prepare_tp` ("skip the TP preparation"), and on the multi-process path without FSDP2 `prepare_model`
  then raises NotImplementedError "Model should undergo tensor parallel" (set-4 s4-acb-08 caught the
  reference saying it trains unsharded with no error).
"""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

CHILD = textwrap.dedent("""
    import json, types, torch
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState
    from accelerate.utils import DistributedType
    acc = Accelerator(cpu=True)
    out = {"device_map": {}}
    for name in ("DEEPSPEED", "FSDP", "MULTI_GPU", "MEGATRON_LM", "NO"):
        m = torch.nn.Linear(2, 2)
        m.hf_device_map = {"a": 0, "b": 1}
        AcceleratorState._shared_state["distributed_type"] = getattr(DistributedType, name)
        try:
            acc.prepare(m)
            out["device_map"][name] = "accepted"
        except ValueError as e:
            out["device_map"][name] = "raises" if "loaded with `device_map='auto'`" in str(e) else str(e)[:80]
    AcceleratorState._shared_state["distributed_type"] = DistributedType.MULTI_CPU
    AcceleratorState._shared_state["parallelism_config"] = types.SimpleNamespace(
        tp_enabled=True, cp_enabled=False, sp_enabled=False, dp_shard_enabled=False, fsdp_enabled=False, tp_size=2)
    try:
        acc.prepare(torch.nn.Linear(2, 2))
        out["tp_non_dtensor"] = "accepted"
    except NotImplementedError as e:
        out["tp_non_dtensor"] = "raises" if "undergo tensor parallel" in str(e) else str(e)[:80]
    print("RESULT " + json.dumps(out))
""")


@pytest.fixture(scope="module")
def run():
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):]), out.stdout + out.stderr


def test_multi_entry_device_map_raises_in_prepare_for_every_distributed_type(run):
    assert run[0]["device_map"] == {"DEEPSPEED": "raises", "FSDP": "raises", "MULTI_GPU": "raises",
                                    "MEGATRON_LM": "raises", "NO": "accepted"}, run[0]


def test_non_dtensor_model_is_skipped_by_prepare_tp_then_refused_by_prepare_model(run):
    assert run[0]["tp_non_dtensor"] == "raises", run[0]
    assert "we skip the TP preparation" in run[1]

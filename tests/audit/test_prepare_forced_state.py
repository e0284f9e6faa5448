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
- training-loop.md: FSDP2's model/optimizer counts are per `prepare` call: a model without an
  optimizer (or the reverse) and two models in one call raise, while a GAN's `prepare(G, optG)` and
  `prepare(D, optD)` both pass (set-6 s6-acb-03 caught the reference saying one model per Accelerator).
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
    # FSDP2's counts (set-6 s6-acb-03): the real plugin with fsdp_version 2 makes state.is_fsdp2 true;
    # _prepare_fsdp2 (fully_shard, needs a device mesh) is replaced by a recorder, so a call that passes
    # the checks shows up in `reached`.
    from accelerate import FullyShardedDataParallelPlugin
    AcceleratorState._shared_state["parallelism_config"] = None
    AcceleratorState._shared_state["distributed_type"] = DistributedType.FSDP
    AcceleratorState._shared_state["fsdp_plugin"] = FullyShardedDataParallelPlugin(fsdp_version=2)
    reached = []
    acc._prepare_fsdp2 = lambda *a: (reached.append([type(x).__name__ for x in a]), a)[1]
    G, D = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
    optG, optD = torch.optim.SGD(G.parameters(), lr=0.1), torch.optim.SGD(D.parameters(), lr=0.1)
    dl = torch.utils.data.DataLoader(list(range(4)))
    fsdp2 = {"is_fsdp2": acc.is_fsdp2}
    for name, call in [("model_alone", (G,)), ("optimizer_alone", (optG,)), ("G_optG_D_optD", (G, optG, D, optD)),
                       ("G_optG", (G, optG)), ("D_optD", (D, optD)), ("dataloader_alone", (dl,))]:
        try:
            acc.prepare(*call)
            fsdp2[name] = "passes"
        except ValueError as e:
            fsdp2[name] = ("together" if "must be passed together" in str(e) else
                           "one_model" if "Only one model is supported when using FSDP2" in str(e) else str(e)[:80])
    fsdp2["reached"] = reached
    out["fsdp2"] = fsdp2
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


def test_fsdp2_counts_models_and_optimizers_per_prepare_call(run):
    f = run[0]["fsdp2"]
    assert f["is_fsdp2"] is True, f
    assert f["model_alone"] == f["optimizer_alone"] == "together", f
    assert f["G_optG_D_optD"] == "one_model", f
    assert f["G_optG"] == f["D_optD"] == f["dataloader_alone"] == "passes", f
    assert f["reached"] == [["Linear", "SGD"], ["Linear", "SGD"], ["DataLoader"]], f

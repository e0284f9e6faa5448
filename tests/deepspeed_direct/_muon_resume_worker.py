"""One process for test_muon_resume_dtype.py (deepspeed 0.19.8, DS_ACCELERATOR=cpu, gloo, world 1).

usage: python _muon_resume_worker.py MODE OUTDIR   (RANK/WORLD_SIZE/MASTER_* from the caller)
bf16 ZeRO-2, optimizer type Muon, bias-free Linear layers (no FusedAdam build for 1-D params). Two steps,
save_checkpoint, a new engine, load_checkpoint, one more step. Records the flat Muon momentum buffer's dtype
after the fresh steps, right after load_checkpoint and after the step that follows.
MODE "pinned": deepspeed as installed. MODE "old": DeepSpeedZeroOptimizer._muon_momentum_buffer replaced by
one that keeps an existing buffer as it is (no dtype conversion), the behaviour before the fix.
Writes OUTDIR/MODE.json, then os._exit(0).
"""
from __future__ import annotations

import datetime
import importlib
import json
import os
import sys
import traceback
import warnings


def main():
    mode, outdir = sys.argv[1], sys.argv[2]
    warnings.simplefilter("ignore")
    os.environ.setdefault("TORCHDYNAMO_DISABLE", "1")
    import torch
    import torch.distributed as tdist
    tdist.init_process_group("gloo", rank=0, world_size=1, timeout=datetime.timedelta(seconds=20))
    import deepspeed
    importlib.import_module("deepspeed.comm.torch").build_shm_op = lambda: None
    deepspeed.init_distributed(dist_backend="gloo")
    from deepspeed.runtime.zero.stage_1_and_2 import DeepSpeedZeroOptimizer as Z
    if mode == "old":
        def old_buffer(self, tensor_list, param_group_idx, dtype, device):
            flatten_copy = self.optimizer.param_groups[param_group_idx]['params'][0]
            state = self.optimizer.state.setdefault(flatten_copy, {})
            grads = self.all_grad_tensors.get(param_group_idx)
            if state.get("momentum_buffer") is None:
                state["momentum_buffer"] = torch.zeros(sum(t.numel() for t in tensor_list),
                                                       dtype=grads[0].dtype if grads else dtype, device=device)
            return state["momentum_buffer"]
        Z._muon_momentum_buffer = old_buffer

    cfg = {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1, "bf16": {"enabled": True},
           "optimizer": {"type": "Muon", "params": {"lr": 1e-3, "momentum": 0.9}},
           "zero_optimization": {"stage": 2}}
    res = {"mode": mode}

    def engine():
        torch.manual_seed(0)
        m = torch.nn.Sequential(torch.nn.Linear(8, 8, bias=False), torch.nn.Linear(8, 8, bias=False))
        e, *_ = deepspeed.initialize(model=m, config=cfg, model_parameters=m.parameters())
        return e

    def step(e):
        x = torch.ones(2, 8, dtype=torch.bfloat16)
        e.backward(e(x).float().pow(2).sum())
        e.step()

    def mom(e):
        return sorted({str(s["momentum_buffer"].dtype) for s in e.optimizer.optimizer.state.values()
                       if "momentum_buffer" in s})

    try:
        e = engine()
        step(e)
        step(e)
        res["fresh"] = mom(e)
        ck = os.path.join(outdir, f"ck_{mode}")
        e.save_checkpoint(ck, tag="t")
        e2 = engine()
        e2.load_checkpoint(ck, tag="t")
        res["after_load"] = mom(e2)
        step(e2)
        res["after_resume_step"] = mom(e2)
        res["resume"] = "ok"
    except Exception as ex:  # noqa: BLE001
        res["resume"] = f"{type(ex).__name__}: {ex}"[:400]
        res["tb"] = traceback.format_exc()[-1200:]
    with open(os.path.join(outdir, f"{mode}.json"), "w") as f:
        json.dump(res, f)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()

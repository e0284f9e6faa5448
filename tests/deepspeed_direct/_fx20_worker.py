"""Child process (one per rank) for test_fx20_comm_paths.py; deepspeed 0.19.8, DS_ACCELERATOR=cpu, gloo.

usage: python _fx20_worker.py CASE OUT_JSON   (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT from the caller)
CASE:
  comms_block      ZeRO-2 overlap_comm with "comms_logger": {"enabled": false, "prof_all": true}
  comms_none       the same config without the comms_logger key
  comms_configure  the block, then deepspeed.comm.configure(enabled=False) after initialize
                   -> comms_logger.enabled and get_accelerator().synchronize() calls during one train step
  moe_z2           ZeRO-2, per-expert ModuleList, rank 0 runs expert 0, rank 1 experts 1 and 2 (rank-dependent
                   routing) -> steps finished or the exception text
  moe_z2_fused     ZeRO-2, all experts in one 3-D parameter called on every rank, same routing
  moe_z2_frozen    ZeRO-2, the moe_z2 model and routing with the experts frozen (requires_grad False; only the
                   Linear layers around the block train, as with LoRA on attention only)
                   -> steps finished, whether the trainable weights moved and the expert weights did not
  z3_generate      ZeRO-3, 3 forwards inside deepspeed.runtime.zero.unwrap_model_for_generation, then train
                   -> reset_step calls during those forwards, hooks left, _invalidate_trace calls on exit
Writes one JSON object to OUT_JSON, then os._exit(0).
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
    case, out = sys.argv[1], sys.argv[2]
    warnings.simplefilter("ignore")
    os.environ.setdefault("TORCHDYNAMO_DISABLE", "1")
    import torch
    import torch.distributed as tdist
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    tdist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=20))
    import deepspeed
    importlib.import_module("deepspeed.comm.torch").build_shm_op = lambda: None
    deepspeed.init_distributed(dist_backend="gloo")
    from deepspeed.accelerator import get_accelerator
    torch.manual_seed(0)
    opt = {"type": "AdamW", "params": {"lr": 1e-3, "torch_adam": True}}
    base = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1, "optimizer": opt}
    res = {"case": case, "rank": rank}

    if case.startswith("comms_"):
        cfg = dict(base, zero_optimization={"stage": 2, "overlap_comm": True, "contiguous_gradients": True,
                                            "reduce_scatter": True, "reduce_bucket_size": 50})
        if case != "comms_none":
            cfg["comms_logger"] = {"enabled": False, "verbose": False, "prof_all": True, "debug": False}
        model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 8), torch.nn.Linear(8, 1))
        engine, *_ = deepspeed.initialize(model=model, config=cfg, model_parameters=model.parameters())
        if case == "comms_configure":
            deepspeed.comm.configure(enabled=False)
        import deepspeed.comm.comm as dcomm
        res["logger_enabled"] = bool(dcomm.comms_logger.enabled)
        acc = get_accelerator()
        calls = [0]
        orig = acc.synchronize

        def counting(*a, **k):
            calls[0] += 1
            return orig(*a, **k)
        acc.synchronize = counting
        loss = engine(torch.ones(1, 8)).sum()
        engine.backward(loss)
        engine.step()
        acc.synchronize = orig
        res["synchronize_calls"] = calls[0]

    elif case.startswith("moe_z2"):
        fused = case == "moe_z2_fused"
        frozen = case == "moe_z2_frozen"

        class MoE(torch.nn.Module):
            def __init__(self):
                super().__init__()
                if fused:
                    self.w = torch.nn.Parameter(torch.randn(3, 8, 8) * 0.1)
                else:
                    self.experts = torch.nn.ModuleList(torch.nn.Linear(8, 8, bias=False) for _ in range(3))

            def forward(self, x):
                hit = [0] if tdist.get_rank() == 0 else [1, 2]   # per-rank token routing
                if fused:                                         # one module, one parameter, every rank
                    return sum(x @ self.w[e] for e in hit)
                return sum(self.experts[e](x) for e in hit)

        model = torch.nn.Sequential(torch.nn.Linear(8, 8), MoE(), torch.nn.Linear(8, 1))
        if frozen:
            model[1].requires_grad_(False)
        before = [p.detach().clone() for p in model.parameters()]
        cfg = dict(base, zero_optimization={"stage": 2, "overlap_comm": False})
        engine, *_ = deepspeed.initialize(model=model, config=cfg,
                                          model_parameters=[p for p in model.parameters() if p.requires_grad])
        steps = 0
        try:
            for _ in range(2):
                loss = engine(torch.ones(1, 8)).sum()
                engine.backward(loss)
                engine.step()
                steps += 1
        except Exception as e:  # gloo reports the mismatched collective or the peer's exit
            res["error"] = f"{type(e).__name__}: {str(e)[:300]}"
        res["steps"] = steps
        if frozen:
            moved = [not torch.equal(b, p.detach()) for b, p in zip(before, model.parameters())]
            flags = [p.requires_grad for p in model.parameters()]
            res["trainable_moved"] = all(m for m, f in zip(moved, flags) if f)
            res["frozen_moved"] = any(m for m, f in zip(moved, flags) if not f)
            res["expert_grads_none"] = all(p.grad is None for p in model[1].parameters())

    elif case == "z3_generate":
        from deepspeed.runtime.zero import partitioned_param_coordinator as ppc
        from deepspeed.runtime.zero.stage3 import unwrap_model_for_generation
        counts = {"reset_step": 0, "invalidate": 0}
        orig_reset, orig_inv = ppc.PartitionedParameterCoordinator.reset_step, \
            ppc.PartitionedParameterCoordinator._invalidate_trace

        def reset_step(self, *a, **k):
            counts["reset_step"] += 1
            return orig_reset(self, *a, **k)

        def invalidate(self, *a, **k):
            counts["invalidate"] += 1
            return orig_inv(self, *a, **k)
        ppc.PartitionedParameterCoordinator.reset_step = reset_step
        ppc.PartitionedParameterCoordinator._invalidate_trace = invalidate
        model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 8), torch.nn.Linear(8, 1))
        cfg = dict(base, zero_optimization={"stage": 3, "stage3_param_persistence_threshold": 0})
        engine, *_ = deepspeed.initialize(model=model, config=cfg, model_parameters=model.parameters())
        x = torch.ones(1, 8)
        for _ in range(2):
            engine.backward(engine(x).sum())
            engine.step()
        off = engine.optimizer.parameter_offload
        with unwrap_model_for_generation(engine):
            res["hooks_inside"] = {"forward_hooks": len(off.forward_hooks), "backward_hooks": len(off.backward_hooks),
                                   "root_pre_hook_registered": bool(model._forward_pre_hooks)}
            before, inv_before = counts["reset_step"], counts["invalidate"]
            with torch.no_grad():
                for _ in range(3):
                    engine.module(x)
            res["reset_step_during_generate"] = counts["reset_step"] - before
        res["invalidate_on_reregister"] = counts["invalidate"] - inv_before
        res["forward_hooks_after"] = len(off.forward_hooks)
        engine.backward(engine(x).sum())
        engine.step()
        res["trained_after"] = True
    else:
        raise SystemExit(f"unknown case {case}")
    with open(out, "w") as f:
        json.dump(res, f)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    try:
        main()
    except Exception:
        traceback.print_exc()
        sys.stdout.flush()
        os._exit(1)

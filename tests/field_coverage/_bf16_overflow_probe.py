"""One gloo rank, DS_ACCELERATOR=cpu: a bf16 DeepSpeed engine gets non-finite gradients at ZeRO
stages 0, 1 and 2 (and at stage 2 with bf16.check_grad_overflow false); prints JSON per case:
whether weights changed or became non-finite, engine.skipped_steps, and the case marker so the
test can attribute the OVERFLOW log lines."""
import json
import os
import sys

import torch
import deepspeed
from deepspeed.accelerator import get_accelerator

deepspeed.init_distributed(dist_backend="gloo")


def run(stage, **bf16):
    torch.manual_seed(0)
    m = torch.nn.Linear(4, 1)
    cfg = {"train_micro_batch_size_per_gpu": 1, "zero_allow_untested_optimizer": True,
           "zero_optimization": {"stage": stage}, "optimizer": {"type": "SGD", "params": {"lr": 0.1}},
           "bf16": {"enabled": True, **bf16}}
    eng, _, _, _ = deepspeed.initialize(model=m, model_parameters=m.parameters(), config=cfg)
    before = [p.detach().float().clone() for p in eng.module.parameters()]
    loss = eng(torch.ones(1, 4, dtype=torch.bfloat16)).sum() * float("inf")
    eng.backward(loss)
    eng.step()
    after = [p.detach().float() for p in eng.module.parameters()]
    return {"changed": any(not torch.equal(a, b) for a, b in zip(before, after)),
            "finite": all(bool(torch.isfinite(a).all()) for a in after),
            "skipped_steps": eng.skipped_steps, "global_steps": eng.global_steps}


out = {"bf16_supported": get_accelerator().is_bf16_supported()}
if out["bf16_supported"]:
    for name, stage, extra in [("stage0", 0, {}), ("stage1", 1, {}), ("stage2", 2, {}),
                               ("stage2_no_check", 2, {"check_grad_overflow": False})]:
        print(f"CASE {name}", flush=True)
        out[name] = run(stage, **extra)
print("CASE end", flush=True)
print("RESULT " + json.dumps(out), flush=True)
# Leave without interpreter teardown: under load a finished gloo rank can still abort while Python
# finalizes (SIGABRT, "terminate called without an active exception"; seen in CI even after
# destroy_process_group()). Every file is closed and stdout flushed first.
sys.stdout.flush()
sys.stderr.flush()
os._exit(0)

"""One gloo rank, DS_ACCELERATOR=cpu: the learning rate a DeepSpeed engine applies with a WarmupLR
`scheduler` section, per optimizer step (deepspeed 0.19.8). Prints RESULT <json>."""
import json

import torch
import deepspeed

deepspeed.init_distributed(dist_backend="gloo")


def lrs(sched_params, opt_lr=1e-5, steps=6):
    m = torch.nn.Linear(2, 1)
    cfg = {"train_micro_batch_size_per_gpu": 1, "zero_allow_untested_optimizer": True,
           "optimizer": {"type": "SGD", "params": {"lr": opt_lr}},
           "scheduler": {"type": "WarmupLR", "params": sched_params}}
    eng, opt, _, _ = deepspeed.initialize(model=m, model_parameters=m.parameters(), config=cfg)
    seen = []
    for _ in range(steps):
        seen.append(float(f"{opt.param_groups[0]['lr']:.6g}"))  # the lr this step uses
        eng.backward(eng(torch.ones(1, 2)).sum())
        eng.step()
    return seen


out = {
    "defaults": lrs({"warmup_num_steps": 4}),
    "linear": lrs({"warmup_num_steps": 4, "warmup_type": "linear"}),
    "explicit_max": lrs({"warmup_num_steps": 4, "warmup_max_lr": 0.01, "warmup_type": "linear"}),
}
print("RESULT " + json.dumps(out), flush=True)

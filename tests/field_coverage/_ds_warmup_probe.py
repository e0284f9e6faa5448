"""One gloo rank, DS_ACCELERATOR=cpu: the learning rate a DeepSpeed engine applies with a WarmupLR
`scheduler` section, per optimizer step (deepspeed 0.19.8). Prints RESULT <json>."""
import json
import os
import sys

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


# DALLE-pytorch 1.6.6's DeepSpeedBackend (loaded from the wheel without the package __init__, which
# needs the model dependencies) in this torchrun-started rank: it initialises from torchrun's
# variables, and a scheduler handed to distribute() is stepped by the engine.
def dalle_backend():
    import importlib.util
    import sys
    import types
    pkg = list(importlib.util.find_spec("dalle_pytorch").submodule_search_locations)[0]
    stub = types.ModuleType("dalle_pytorch")
    stub.__path__ = [pkg]
    sys.modules["dalle_pytorch"] = stub
    from dalle_pytorch.distributed_backends import DeepSpeedBackend
    b = DeepSpeedBackend()
    b.has_backend()
    b.initialize()
    return b


def client_scheduler(b, micro_steps, ga=1, manual=False):
    import argparse
    m = torch.nn.Linear(2, 1)
    opt = torch.optim.SGD(m.parameters(), lr=1.0)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    ns = argparse.Namespace(deepspeed=True, deepspeed_config=None, local_rank=-1)
    eng, _, _, ds_sched = b.distribute(args=ns, model=m, optimizer=opt, model_parameters=m.parameters(),
                                       lr_scheduler=sched,
                                       config_params={"train_batch_size": ga, "gradient_accumulation_steps": ga})
    for _ in range(micro_steps):
        eng.backward(eng(torch.ones(1, 2)).sum())
        eng.step()
        if manual and eng.is_gradient_accumulation_boundary():
            sched.step()                      # what a script that also steps it itself does
    return {"same_object": ds_sched is sched, "scheduler_steps": sched.last_epoch}


b = dalle_backend()
out["dalle_backend"] = {"world": b.get_world_size(), "rank": b.get_rank(), "local_rank": b.get_local_rank()}
out["client_scheduler"] = {
    "three_steps": client_scheduler(b, 3),
    "four_micro_steps_ga2": client_scheduler(b, 4, ga=2),
    "three_steps_plus_manual": client_scheduler(b, 3, manual=True),
}
print("RESULT " + json.dumps(out), flush=True)
# Leave without interpreter teardown: under load a finished gloo rank can still abort while Python
# finalizes (SIGABRT, "terminate called without an active exception"; seen in CI even after
# destroy_process_group()). Every file is closed and stdout flushed first.
sys.stdout.flush()
sys.stderr.flush()
os._exit(0)

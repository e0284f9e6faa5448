"""One gloo rank, DS_ACCELERATOR=cpu: DeepSpeedEngine.save_checkpoint / load_checkpoint tags, the
`latest` file, and load_optimizer_states=False at ZeRO stages 2 and 3. argv[1]: scratch dir.
Prints RESULT <json>."""
import json
import os
import sys

import torch
import deepspeed

deepspeed.init_distributed(dist_backend="gloo")
ROOT = sys.argv[1]


def engine(stage):
    torch.manual_seed(0)
    m = torch.nn.Linear(300, 400)  # 120000 weights: above the ZeRO-3 persistence threshold
    cfg = {"train_micro_batch_size_per_gpu": 1, "zero_allow_untested_optimizer": True,
           "zero_optimization": {"stage": stage}, "optimizer": {"type": "SGD", "params": {"lr": 0.5}}}
    eng, _, _, _ = deepspeed.initialize(model=m, model_parameters=m.parameters(), config=cfg)
    return eng


def step(eng):
    loss = eng(torch.ones(1, 300)).sum()
    eng.backward(loss)
    eng.step()


def weight_sum(eng):
    w = eng.module.weight
    if hasattr(w, "ds_tensor"):
        with deepspeed.zero.GatheredParameters([w]):
            return round(float(w.sum()), 3)
    return round(float(w.sum()), 3)


out = {}
for stage in (2, 3):
    d = os.path.join(ROOT, f"s{stage}")
    eng = engine(stage)
    step(eng)
    eng.save_checkpoint(d)
    first = weight_sum(eng)
    step(eng)
    eng.save_checkpoint(d)
    second = weight_sum(eng)
    r = {"tags": sorted(x for x in os.listdir(d) if x.startswith("global_step")),
         "latest": open(os.path.join(d, "latest")).read().strip(), "first": first, "second": second}
    r["fresh"] = weight_sum(engine(stage))
    for name, kwargs in [("default", {}), ("tag_step1", {"tag": "global_step1"}),
                         ("tag_step1_no_optim", {"tag": "global_step1", "load_optimizer_states": False}),
                         ("tag_step1_module_only", {"tag": "global_step1", "load_module_only": True})]:
        e = engine(stage)
        path, client = e.load_checkpoint(d, **kwargs)
        r[name] = {"path_ends": os.path.basename(path) if path else None, "weights": weight_sum(e)}
    os.remove(os.path.join(d, "latest"))
    e = engine(stage)
    try:
        path, client = e.load_checkpoint(d)
        r["no_latest"] = {"path": path, "weights": weight_sum(e)}
    except Exception as ex:
        r["no_latest"] = {"error": f"{type(ex).__name__}: {ex}"}
    out[f"stage{stage}"] = r
print("RESULT " + json.dumps(out), flush=True)
# Leave without interpreter teardown: under load a finished gloo rank can still abort while Python
# finalizes (SIGABRT, "terminate called without an active exception"; seen in CI even after
# destroy_process_group()). Every file is closed and stdout flushed first.
sys.stdout.flush()
sys.stderr.flush()
os._exit(0)

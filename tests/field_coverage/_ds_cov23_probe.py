"""One gloo rank under torchrun, DS_ACCELERATOR=cpu (deepspeed 0.19.8, torch 2.13.0). Set-23 writers' mining (W2):

(a) mode: DeepSpeedEngine.train()/eval() and the engine's own `training` flag, at ZeRO stages 0 and 3, for a
    Linear + Dropout model put in eval() before deepspeed.initialize (what TRL's prepare_deepspeed builds for
    a frozen reference model).
(b) empty_safetensors: the size of a safetensors file written from an empty state dict with the
    {"format": "pt"} metadata PEFT and the Trainer write (the 40-byte adapter_model.safetensors).

argv[1]: scratch dir. Prints RESULT <json>; ends with os._exit(0) after printing."""
import json
import os
import sys

import torch
import deepspeed

deepspeed.init_distributed(dist_backend="gloo")
ROOT = sys.argv[1]


def mode(stage):
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Dropout(0.5))
    m.eval()
    cfg = {"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": stage}}
    eng, _, _, _ = deepspeed.initialize(model=m, config=cfg)
    seen = {"after_initialize": [eng.training, eng.module.training]}
    x = torch.ones(2, 8)
    with torch.no_grad():
        seen["eval_outputs_equal"] = bool(torch.equal(eng(x), eng(x)))
    for name, call in (("eval", lambda: eng.eval()), ("train", lambda: eng.train()),
                       ("train_false", lambda: eng.train(False))):
        call()
        seen[name] = [eng.training, eng.module.training, eng.module[1].training]
    eng.train()
    with torch.no_grad():
        seen["train_outputs_equal"] = bool(torch.equal(eng(x), eng(x)))
    return seen


def empty_safetensors():
    from safetensors.torch import load_file, save_file
    path = os.path.join(ROOT, "adapter_model.safetensors")
    save_file({}, path, metadata={"format": "pt"})
    with open(path, "rb") as f:
        raw = f.read()
    n = int.from_bytes(raw[:8], "little")
    return {"size": len(raw), "header_len": n, "header": raw[8:8 + n].decode(), "keys": sorted(load_file(path))}


out = {"mode": {str(s): mode(s) for s in (0, 3)}, "empty_safetensors": empty_safetensors()}
print("RESULT " + json.dumps(out), flush=True)
os._exit(0)

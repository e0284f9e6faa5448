"""One rank of test_pad_across_processes_bool.py (accelerate 1.15.0, torch 2.13.0, gloo CPU, 2 ranks).

Usage: RANK/WORLD_SIZE/MASTER_* set; python _pad_bool_job.py OUTDIR -> OUTDIR/rankN.json.
Rank r holds a bool mask of shape (2, 3 * (r + 1)); pads it along dim 1 with the real Accelerator, then
the cast-first fix (pad an int64 copy, gather, .bool()) and the cast-back fix (pad, .to(bool), gather).
"""
from __future__ import annotations

import json
import os
import sys

import torch
from accelerate import Accelerator

out = sys.argv[1]
acc = Accelerator(cpu=True)
r = acc.process_index
mask = torch.arange(3 * (r + 1)).repeat(2, 1) % 2 == 0
res = {"in": str(mask.dtype)}
padded = acc.pad_across_processes(mask, dim=1)
res["padded_dtype"] = str(padded.dtype)
res["padded_shape"] = list(padded.shape)
res["padded_row0"] = padded[0].tolist()
fixed = acc.gather(acc.pad_across_processes(mask.long(), dim=1)).bool()
res["cast_first"] = {"dtype": str(fixed.dtype), "shape": list(fixed.shape)}
back = acc.gather(acc.pad_across_processes(mask, dim=1).to(mask.dtype))
res["cast_back"] = {"dtype": str(back.dtype), "shape": list(back.shape)}
with open(os.path.join(out, f"rank{r}.json"), "w") as f:
    json.dump(res, f)
sys.stdout.flush()
os._exit(0)

"""Child probe of _resume_order_matrix.py: one CPU process, accelerate 1.15.0, a prepared DataLoader over
12 items (batch 2, shuffle=True, so 6 batches per epoch).

usage: _resume_order_probe.py SAMPLER MODE DIR OUT.json
  SAMPLER  default (use_seedable_sampler=False, accelerate's default) | seedable (use_seedable_sampler=True)
           | stateful (use_stateful_dataloader=True) | default2 (the default, run on 2 gloo ranks: RANK and
           WORLD_SIZE set by the generator; rank r writes OUT-rank<r>.json for r > 0)
  MODE     full    uninterrupted: epochs 0, 1 and 2, the prepared loader iterated three times
           save    epoch 0, then 2 batches of epoch 1, then accelerator.save_state(DIR)
           RECIPE  a fresh process: set_seed(0), Accelerator, prepare, load_state(DIR), then the recipe
                   (RECIPES below); then the prepared loader is iterated once more without set_epoch
Writes {"batches": [...], "next_pass": [...], "error": ...} to OUT.json, then os._exit(0).
"""
from __future__ import annotations

import json
import os
import sys

SAMPLER, MODE, DIR, OUT = sys.argv[1:5]
RANK = int(os.environ.get("RANK", "0"))
if RANK:   # several ranks (SAMPLER default2 under a 2-rank environment): one file per rank
    OUT = OUT.replace(".json", f"-rank{RANK}.json")
RECIPES = ("skip", "set_epoch+skip", "set_epoch+skip+iteration0", "skip+set_epoch_new", "no_skip")


def _emit(obj):
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump(obj, f)
        f.flush()
    sys.stdout.flush()
    os._exit(0)


def _ids(loader, limit=None):
    out = []
    for batch in loader:
        out.append([int(x) for x in batch[0].tolist()])
        if limit is not None and len(out) == limit:
            break
    return out


def main():
    import torch
    from accelerate import Accelerator
    from accelerate.utils import DataLoaderConfiguration, set_seed
    from torch.utils.data import DataLoader, TensorDataset

    set_seed(0)
    cfg = DataLoaderConfiguration(use_seedable_sampler=SAMPLER == "seedable",
                                  use_stateful_dataloader=SAMPLER == "stateful")
    acc = Accelerator(cpu=True, dataloader_config=cfg)
    try:
        dl = acc.prepare(DataLoader(TensorDataset(torch.arange(12)), batch_size=2, shuffle=True))
    except Exception as e:   # use_stateful_dataloader without torchdata
        _emit({"error": f"{type(e).__name__}: {str(e).splitlines()[0]}", "at": "prepare"})
    bs = dl.batch_sampler
    inner = getattr(bs, "batch_sampler", bs)   # BatchSamplerShard wraps the BatchSampler
    res = {"sampler_class": type(getattr(inner, "sampler", inner)).__name__}
    if MODE == "full":
        res["epochs"] = [_ids(dl) for _ in range(3)]
        _emit(res)
    if MODE == "save":
        res["epoch0"] = _ids(dl)
        res["epoch1_head"] = _ids(dl, 2)
        res["iteration_at_save"] = dl.iteration
        acc.save_state(DIR)
        res["files"] = sorted(os.listdir(DIR))
        _emit(res)
    acc.load_state(DIR)
    res["iteration_after_load"] = dl.iteration
    loader = dl
    if MODE.startswith("set_epoch"):
        dl.set_epoch(1)
    if "skip" in MODE.split("+"):
        loader = acc.skip_first_batches(dl, 2)
        res["skipped_iteration"] = loader.iteration
        res["skipped_class"] = type(loader).__name__
        if MODE.endswith("iteration0"):   # accelerate before the fix: the new loader started at iteration 0
            loader.iteration = 0
        if MODE.endswith("set_epoch_new"):   # the Trainer's order: skip, then set_epoch on the new loader
            loader.set_epoch(1)
    res["batches"] = _ids(loader)
    res["next_pass"] = _ids(dl)
    dl.set_epoch(2)
    res["next_pass_set_epoch2"] = _ids(dl)
    _emit(res)


if __name__ == "__main__":
    try:
        main()
    except Exception as e:   # a crash still leaves a JSON
        _emit({"error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}", "at": MODE})

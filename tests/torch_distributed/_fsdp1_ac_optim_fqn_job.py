"""FSDP1 use_orig_params=False + activation checkpointing: DCP optimizer state dict FQNs (torch 2.13.0 CPU, 2 gloo ranks).

Usage: python _fsdp1_ac_optim_fqn_job.py OUTDIR -> OUTDIR/rank{0,1}.json.
The model is FSDP-wrapped per block, then apply_activation_checkpointing wraps each block inside its FSDP unit, so
a flat parameter's name is blocks.N._fsdp_wrapped_module._checkpoint_wrapped_module._flat_param (the layout of
pytorch/pytorch#124546). get_optimizer_state_dict / set_optimizer_state_dict run as installed ("now") and with the
prefix-stripping line of _get_fqns removed ("old", the pre-#124698 handling of that layout).
"""
from __future__ import annotations

import functools
import inspect
import json
import os
import sys
import textwrap
import warnings

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _meet import meet  # noqa: E402

WORLD = 2
STRIP_LINE = 'name = name.replace(_CHECKPOINT_PREFIX, "")'


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(4, 4), nn.Linear(4, 4)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block(), Block()])

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return x


def build():
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
        CheckpointImpl, apply_activation_checkpointing, checkpoint_wrapper)
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp.wrap import ModuleWrapPolicy
    torch.manual_seed(0)
    model = FSDP(Net(), auto_wrap_policy=ModuleWrapPolicy({Block}), use_orig_params=False,
                 device_id=torch.device("cpu"))
    apply_activation_checkpointing(
        model, checkpoint_wrapper_fn=functools.partial(checkpoint_wrapper, checkpoint_impl=CheckpointImpl.NO_REENTRANT),
        check_fn=lambda m: isinstance(m, Block))
    opt = torch.optim.AdamW(model.parameters(), lr=0.1)
    model(torch.ones(2, 4)).sum().backward()
    opt.step()
    return model, opt


def old_get_fqns():
    import torch.distributed.checkpoint.state_dict as sd
    src = textwrap.dedent(inspect.getsource(sd._get_fqns))
    assert src.count(STRIP_LINE) == 1, "the _get_fqns prefix line moved: update the job"
    ns: dict = {}
    exec(compile(src.replace(STRIP_LINE, "pass"), sd.__file__, "exec"), vars(sd).copy(), ns)
    return ns["_get_fqns"]


def run(old):
    import torch.distributed.checkpoint.state_dict as sd
    saved = sd._get_fqns
    if old:
        sd._get_fqns = old_get_fqns()
    try:
        model, opt = build()
        # nn.Module's own walk (CheckpointWrapper's named_parameters override strips its prefix)
        r = {"flat_names": sorted(n for n, _ in nn.Module.named_parameters(model))}
        try:
            osd = sd.get_optimizer_state_dict(model, opt)
            r["osd_state_keys"] = sorted(osd["state"])
            sd.set_optimizer_state_dict(model, opt, osd)
            r["set"] = "ok"
        except Exception as e:  # noqa: BLE001
            r["error"] = f"{type(e).__name__}: {str(e)[:300]}"
        return r
    finally:
        sd._get_fqns = saved


def main(rank, outdir):
    warnings.simplefilter("ignore")
    store = dist.FileStore(os.path.join(outdir, "store"), WORLD)
    meet(store, WORLD)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=WORLD)
    r = {"torch": torch.__version__, "now": run(False), "old": run(True)}
    with open(os.path.join(outdir, f"rank{rank}.json"), "w") as f:
        json.dump(r, f, indent=1)
    os._exit(0)


if __name__ == "__main__":
    mp.spawn(main, args=(sys.argv[1],), nprocs=WORLD, join=True)

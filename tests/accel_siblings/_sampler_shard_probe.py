"""One rank of _sampler_shard_matrix.py: prepare one DataLoader per sampler kind on 2 gloo ranks and record,
per pass, the order the rank's sampler (or iterable dataset) drew before sharding and the items the rank got.

usage (one process per rank, RANK/WORLD_SIZE/MASTER_* set by the generator):
    python _sampler_shard_probe.py CONFIG OUT_DIR
CONFIG: default | seedable | seedable_ds1 | seedable_ds2 | seedable_same
  default        use_seedable_sampler=False
  seedable       use_seedable_sampler=True, data_seed None
  seedable_dsN   use_seedable_sampler=True, data_seed=N
  seedable_same  use_seedable_sampler=True, data_seed=1, every rank seeded alike (torch.manual_seed(100))
Every other config seeds rank r with torch.manual_seed(100 + r) (ranks whose global RNG differs, as after
set_seed(..., device_specific=True), no seed at all, or different RNG use before the pass).
Passes: epoch 0, epoch 1, then dl.set_epoch(0) and a third pass (does the epoch number pick the order?).
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch
from torch.utils.data import (BatchSampler, DataLoader, Dataset, IterableDataset, RandomSampler, Sampler,
                              WeightedRandomSampler)

N, BS = 16, 2
RECORD: list = []
_DEPTH = [0]


def _recording(cls):
    """Patch CLS.__iter__ so the outermost sampler iteration appends what it yields to RECORD."""
    if cls.__dict__.get("_probe_wrapped"):
        return
    orig = cls.__iter__

    def __iter__(self):
        _DEPTH[0] += 1
        try:
            for i in orig(self):
                if _DEPTH[0] == 1:
                    RECORD.append(int(i))
                yield i
        finally:
            _DEPTH[0] -= 1

    cls.__iter__ = __iter__
    cls._probe_wrapped = True


class Items(Dataset):
    def __len__(self):
        return N

    def __getitem__(self, i):
        return i


class RandpermSampler(Sampler):
    """A custom sampler with no generator attribute: draws from the global torch RNG."""

    def __len__(self):
        return N

    def __iter__(self):
        return iter(torch.randperm(N).tolist())


class GeneratorSampler(Sampler):
    """A custom sampler with a `generator` attribute (None until prepare fills it) that it draws from."""

    def __init__(self):
        self.generator = None

    def __len__(self):
        return N

    def __iter__(self):
        return iter(torch.randperm(N, generator=self.generator).tolist())


class ShuffledStream(IterableDataset):
    """An iterable dataset that shuffles with the global torch RNG each pass (no generator attribute)."""

    def __iter__(self):
        order = torch.randperm(N).tolist()
        RECORD.extend(order)
        return iter(order)


class ShuffledStreamGen(IterableDataset):
    """The same, drawing from `self.generator` (a torch.Generator seeded per rank)."""

    def __init__(self, seed):
        self.generator = torch.Generator().manual_seed(seed)

    def __iter__(self):
        order = torch.randperm(N, generator=self.generator).tolist()
        RECORD.extend(order)
        return iter(order)


def loaders(rank: int) -> dict:
    ds = Items()
    return {
        "random": lambda: DataLoader(ds, batch_size=BS, shuffle=True),
        "sequential": lambda: DataLoader(ds, batch_size=BS),
        "weighted": lambda: DataLoader(ds, batch_size=BS, sampler=WeightedRandomSampler(
            torch.linspace(1.0, 4.0, N), num_samples=N, replacement=False)),
        # the same, with a generator seeded alike on every rank (0) before prepare
        "weighted_gen": lambda: DataLoader(ds, batch_size=BS, sampler=WeightedRandomSampler(
            torch.linspace(1.0, 4.0, N), num_samples=N, replacement=False, generator=torch.Generator().manual_seed(0))),
        "custom_gen": lambda: DataLoader(ds, batch_size=BS, sampler=GeneratorSampler()),
        "custom_nogen": lambda: DataLoader(ds, batch_size=BS, sampler=RandpermSampler()),
        "batch_sampler": lambda: DataLoader(ds, batch_sampler=BatchSampler(RandomSampler(ds), BS, drop_last=False)),
        "iterable": lambda: DataLoader(ShuffledStream(), batch_size=BS),
        "iterable_gen": lambda: DataLoader(ShuffledStreamGen(100 + rank), batch_size=BS),
        "iterable_shard": lambda: DataLoader(ShuffledStream(), batch_size=BS),
        "iterable_gen_shard": lambda: DataLoader(ShuffledStreamGen(100 + rank), batch_size=BS),
    }


def main() -> None:
    config, out = sys.argv[1], Path(sys.argv[2])
    rank = int(os.environ["RANK"])
    seed = 100 if config == "seedable_same" else 100 + rank
    data_seed = {"seedable_ds1": 1, "seedable_ds2": 2, "seedable_same": 1}.get(config)
    from accelerate import Accelerator
    from accelerate.data_loader import get_sampler
    from accelerate.utils import DataLoaderConfiguration
    torch.manual_seed(seed)
    cfg = DataLoaderConfiguration(use_seedable_sampler=config != "default", data_seed=data_seed)
    acc = Accelerator(cpu=True, dataloader_config=cfg)
    # the *_shard cases: the same iterable datasets with dispatch_batches=False (IterableDatasetShard)
    acc_shard = Accelerator(cpu=True, dataloader_config=DataLoaderConfiguration(
        use_seedable_sampler=cfg.use_seedable_sampler, data_seed=data_seed, dispatch_batches=False))
    res = {"num_processes": acc.num_processes, "cases": {}}
    for name, make in loaders(rank).items():
        torch.manual_seed(seed)
        dl = (acc_shard if name.endswith("_shard") else acc).prepare(make())
        bs = getattr(dl, "batch_sampler", None)     # BatchSamplerShard wraps the loader's own batch sampler
        s = getattr(getattr(bs, "batch_sampler", bs), "sampler", None) if bs is not None else get_sampler(dl)
        if s is not None and not isinstance(dl.dataset, IterableDataset):
            _recording(type(s))
        case = {"dl_class": type(dl).__name__, "sampler_class": type(s).__name__ if s is not None else None,
                "synchronized": getattr(dl, "synchronized_generator", None) is not None,
                "rng_types": list(getattr(dl, "rng_types", None) or []), "len": len(dl) if not isinstance(dl.dataset, IterableDataset)
                else None, "passes": []}
        for p in range(3):
            if p == 2:
                dl.set_epoch(0)
            RECORD.clear()
            got = [int(i) for b in dl for i in b.tolist()]
            case["passes"].append({"drawn": list(RECORD), "got": got})
        case["generator_attr"] = None if s is None or not hasattr(s, "generator") else (
            "None" if s.generator is None else "set")
        res["cases"][name] = case
    (out / f"rank{rank}.json").write_text(json.dumps(res))
    acc.end_training()


if __name__ == "__main__":
    main()

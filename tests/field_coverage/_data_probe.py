"""Runs under `torchrun --nproc_per_node 2` (gloo, CPU). Records which samples each rank gets from
Accelerate-prepared DataLoaders (map-style and iterable, dispatched or sharded) and how often each
rank's dataset is iterated; rank 0 writes JSON to argv[1] (read by test_data_sharding.py)."""
import json
import os
import sys

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Dataset, IterableDataset

from accelerate import Accelerator
from accelerate.data_loader import prepare_data_loader

acc = Accelerator(cpu=True)
RANK = acc.process_index
OUT = {"distributed_type": str(acc.distributed_type), "num_processes": acc.num_processes}
READS = {"n": 0}


class Range(Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return i


class Stream(IterableDataset):
    """8 items per rank, tagged with the rank that produced them (rank * 100 + i)."""

    def __iter__(self):
        READS["n"] += 1
        for i in range(8):
            yield RANK * 100 + i


def every_rank(v):
    got = [None] * acc.num_processes
    dist.all_gather_object(got, v)
    return got


def batches(dl):
    return [b.tolist() for b in dl]


# map-style: each rank its own batches; the last one padded from the start (even_batches)
OUT["map_default"] = every_rank(batches(acc.prepare(DataLoader(Range(10), batch_size=2))))
OUT["map_split_batches"] = every_rank(batches(prepare_data_loader(DataLoader(Range(8), batch_size=4), split_batches=True)))
OUT["map_uneven_no_pad"] = every_rank(batches(prepare_data_loader(DataLoader(Range(10), batch_size=2), even_batches=False)))

# iterable: the Accelerator default dispatches from rank 0
dl = acc.prepare(DataLoader(Stream(), batch_size=2))
OUT["iterable_default_class"] = type(dl).__name__
READS["n"] = 0
OUT["iterable_default"] = every_rank(batches(dl))
OUT["iterable_default_reads"] = every_rank(READS["n"])

# iterable with dispatch_batches=False: every rank reads its whole stream and keeps its slice
dl = prepare_data_loader(DataLoader(Stream(), batch_size=2), dispatch_batches=False)
OUT["iterable_shard_class"] = type(dl).__name__ + "/" + type(dl.dataset).__name__
READS["n"] = 0
OUT["iterable_shard"] = every_rank(batches(dl))
OUT["iterable_shard_reads"] = every_rank(READS["n"])

# not prepared: each rank keeps its whole (already per-rank) stream
OUT["iterable_unprepared"] = every_rank(batches(DataLoader(Stream(), batch_size=2)))

# The matrix (training-loop.md#prepared-loader-matrix): 13 items, DataLoader batch_size 4, per dataset
# kind x dispatch_batches x even_batches x split_batches x drop_last; pass 1 records each rank's batches
# and the remainder known at the end; pass 2 runs gather / gather_for_metrics on every batch, only when
# every rank has the same batch count and shapes (otherwise the collective would break).
from accelerate.utils import DataLoaderConfiguration  # noqa: E402

N, BS = 13, 4


class Sized(IterableDataset):
    def __iter__(self):
        return iter(range(N))

    def __len__(self):
        return N


class Unsized(IterableDataset):
    def __iter__(self):
        return iter(range(N))


KINDS = {"map": lambda: Range(N), "iter_len": Sized, "iter": Unsized}
MATRIX = []
for kind, make in KINDS.items():
    for dispatch in (None, True, False):
        for even in (True, False):
            for split in (False, True):
                for drop in (False, True):
                    acc.dataloader_config = DataLoaderConfiguration(
                        dispatch_batches=dispatch, even_batches=even, split_batches=split)
                    row = {"kind": kind, "dispatch": dispatch, "even": even, "split": split, "drop": drop}
                    try:
                        dl = acc.prepare(DataLoader(make(), batch_size=BS, drop_last=drop))
                        row["wrapper"] = type(dl).__name__
                        mine = [b.tolist() for b in dl]
                        rem = dl.remainder
                        err = None
                    except Exception as e:  # noqa: BLE001 - recorded, same on every rank
                        mine, rem, err = None, None, f"{type(e).__name__}: {str(e)[:90]}"
                    ranks = every_rank({"batches": mine, "remainder": rem, "error": err})
                    row["ranks"] = ranks
                    shapes = [None if r["batches"] is None else [len(b) for b in r["batches"]] for r in ranks]
                    if all(s is not None and s == shapes[0] for s in shapes):
                        g, gm = [], []
                        for b in dl:
                            g += acc.gather(b).tolist()
                            gm += acc.gather_for_metrics(b).tolist()
                        row["gather"], row["gather_for_metrics"] = g, gm
                    MATRIX.append(row)
OUT["matrix"] = MATRIX

if RANK == 0:
    with open(sys.argv[1], "w") as f:
        json.dump(OUT, f, indent=1, sort_keys=True)
acc.wait_for_everyone()
# tear the gloo group down before interpreter exit: left to static destruction, a rank can abort
# ("terminate called without an active exception", SIGABRT) after the work is done
dist.destroy_process_group()
# Leave without interpreter teardown: under load a finished gloo rank can still abort while Python
# finalizes (SIGABRT, "terminate called without an active exception"; seen in CI even after
# destroy_process_group()). Every file is closed and stdout flushed first.
sys.stdout.flush()
sys.stderr.flush()
os._exit(0)

"""DataLoader worker processes under DDP: worker seeds per rank, IterableDataset sharding, and what
`persistent_workers=True` keeps from the epoch (torch 2.13.0 CPU; data-loading.md "DataLoader workers
under DDP").

One process plays each rank: DataLoader workers draw their seeds from the creating process's torch
RNG, which is the only rank-dependent input, so a rank is reproduced by torch.manual_seed(seed) in
this process (no process group is needed for any of it). Two workers per loader; about 5 s.
Threads: open-mmlab/OpenPCDet#886, pytorch/pytorch#3880, pytorch/pytorch#31246,
Lightning-AI/pytorch-lightning#6960 (seeds); huggingface/datasets#5360, vahidk/tfrecord#78,
karpathy/llama2.c#522 (IterableDataset); starVLA/starVLA#470,
webdataset/webdataset#172, meta-pytorch/data#426 (persistent workers).
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _loader_worker_datasets import EpochEcho, RandomDraws, ShardedStream, Stream  # noqa: E402


def draws(seed, **kw):
    torch.manual_seed(seed)
    return [tuple(x) for x in DataLoader(RandomDraws(), batch_size=None, num_workers=2, **kw)]


def test_same_seed_on_every_rank_gives_every_rank_the_same_worker_randomness():
    """base_seed is drawn from the creating process's torch RNG when the iterator is made; worker w gets
    torch seed base_seed + w and its own numpy and random seeds derived from it. Same manual_seed on
    two ranks: identical numpy, random and torch draws per worker, so identical augmentations."""
    rank0, rank1 = draws(0), draws(0)
    assert rank0 == rank1
    by_worker = {w: s for w, s, *_ in rank0}
    assert by_worker[1] == by_worker[0] + 1                 # base_seed + worker id
    w0 = [r[2:] for r in rank0 if r[0] == 0]
    w1 = [r[2:] for r in rank0 if r[0] == 1]
    assert w0 != w1                                          # workers of one rank differ, numpy included


def test_seed_offset_by_rank_or_a_per_rank_generator_separates_the_ranks():
    assert draws(0) != draws(1)                               # torch.manual_seed(seed + rank)
    g0, g1 = torch.Generator().manual_seed(100), torch.Generator().manual_seed(101)
    assert draws(0, generator=g0) != draws(0, generator=g1)  # DataLoader(generator=...) feeds base_seed


def test_iterable_dataset_is_replayed_by_every_worker_unless_it_shards_itself():
    assert sorted(DataLoader(Stream(4), batch_size=None, num_workers=2)) == [0, 0, 1, 1, 2, 2, 3, 3]
    got = {r: sorted(int(x) for x in DataLoader(ShardedStream(8, r, 2), batch_size=None, num_workers=2))
           for r in (0, 1)}
    assert got == {0: [0, 1, 4, 5], 1: [2, 3, 6, 7]}          # disjoint, together everything once


def test_iterable_dataset_refuses_a_distributed_sampler():
    with pytest.raises(ValueError, match="DataLoader with IterableDataset: expected unspecified sampler option"):
        DataLoader(Stream(), sampler=DistributedSampler(range(4), num_replicas=2, rank=0))


@pytest.mark.parametrize("persistent", [False, True])
def test_set_epoch_reaches_the_sampler_but_a_dataset_attribute_reaches_only_new_workers(persistent):
    """The sampler is iterated in the main process, so sampler.set_epoch(e) takes effect with persistent
    workers too. The dataset lives in each worker as a copy made when the workers start: an attribute
    set in the main process afterwards reaches workers started later (persistent_workers=False starts
    them per epoch) and never reaches persistent ones."""
    ds = EpochEcho()
    sampler = DistributedSampler(range(8), num_replicas=2, rank=0, shuffle=True)
    seen = DataLoader(ds, batch_size=None, num_workers=2, persistent_workers=persistent)
    order = DataLoader(range(8), batch_size=None, sampler=sampler, num_workers=2, persistent_workers=persistent)
    epochs, orders = [], []
    for e in range(3):
        ds.epoch = e
        sampler.set_epoch(e)
        epochs.append(sorted({int(x) for x in seen}))
        orders.append([int(x) for x in order])
    assert epochs == ([[0], [0], [0]] if persistent else [[0], [1], [2]])
    assert len({tuple(o) for o in orders}) == 3              # a new permutation every epoch either way

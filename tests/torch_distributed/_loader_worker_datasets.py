"""Datasets for test_dataloader_workers_ddp.py, in their own module so DataLoader workers can unpickle
them under any start method (fork, spawn, forkserver)."""
from __future__ import annotations

import random

import numpy as np
import torch
from torch.utils.data import Dataset, IterableDataset, get_worker_info


class RandomDraws(Dataset):
    """Each item reports the worker that made it, that worker's torch seed and one draw from each RNG an
    augmentation pipeline uses (numpy, random, torch)."""

    def __len__(self):
        return 4

    def __getitem__(self, i):
        w = get_worker_info()
        return (w.id if w else -1, torch.initial_seed(), int(np.random.randint(1 << 30)), random.random(),
                torch.rand(1).item())


class Stream(IterableDataset):
    """A stream of 0..n-1 that does not look at get_worker_info(): every worker replays all of it."""

    def __init__(self, n=4):
        self.n = n

    def __iter__(self):
        return iter(range(self.n))


class ShardedStream(Stream):
    """The same stream split by rank and worker: worker w of rank r of R takes every (R * workers)-th item."""

    def __init__(self, n=8, rank=0, world=2):
        super().__init__(n)
        self.rank, self.world = rank, world

    def __iter__(self):
        w = get_worker_info()
        wid, nw = (w.id, w.num_workers) if w else (0, 1)
        return iter(range(self.rank * nw + wid, self.n, self.world * nw))


class EpochEcho(Dataset):
    """Returns the dataset's own `epoch` attribute, as the worker's copy of the dataset sees it."""

    def __init__(self):
        self.epoch = 0

    def __len__(self):
        return 2

    def __getitem__(self, i):
        return self.epoch

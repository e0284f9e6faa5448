"""Runs under torchrun (gloo, CPU): DataLoader(IterableDataset, batch_size=None) through
accelerator.prepare. argv: out.json, case (float | scalar | batched), dispatch (1 = default, 0 =
DataLoaderConfiguration(dispatch_batches=False)). Every rank writes <out>.rank<r>.json with the
wrapper class and either the batch shapes it got or the exception it raised (read by
test_iterable_batch_size_none.py)."""
import json
import sys
import traceback

import torch
from torch.utils.data import DataLoader, IterableDataset

from accelerate import Accelerator, DataLoaderConfiguration

OUT, CASE, DISPATCH = sys.argv[1], sys.argv[2], sys.argv[3] == "1"


class Stream(IterableDataset):
    """The issue's dataset: 4 items, __len__ and set_epoch; what an item is depends on CASE."""

    def __iter__(self):
        for i in range(4):
            if CASE == "float":
                yield float(i)
            elif CASE == "scalar":
                yield torch.tensor(float(i))  # 0-dim
            else:
                yield torch.full((2, 3), float(i))  # an item that already is a batch of 2

    def __len__(self):
        return 4

    def set_epoch(self, epoch):
        self.epoch = epoch


cfg = DataLoaderConfiguration() if DISPATCH else DataLoaderConfiguration(dispatch_batches=False)
acc = Accelerator(cpu=True, dataloader_config=cfg)
rec = {"num_processes": acc.num_processes}
try:
    dl = acc.prepare(DataLoader(Stream(), batch_size=None))
    rec["class"] = type(dl).__name__
    rec["shapes"] = [list(b.shape) for b in dl]
except Exception as e:  # noqa: BLE001 - the outcome is what is recorded
    rec["error"] = f"{type(e).__name__}: {e}"
    rec["where"] = traceback.extract_tb(e.__traceback__)[-1].name
with open(f"{OUT}.rank{acc.process_index}.json", "w") as f:
    json.dump(rec, f)

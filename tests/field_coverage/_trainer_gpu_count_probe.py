"""Runs under torchrun (1 or 2 gloo ranks, CPU): the same Trainer command at a different process
count. Train set 32 samples, per_device_train_batch_size=4, 1 epoch; eval set 13 samples (labels
0..12), per_device_eval_batch_size=4. Rank 0 writes JSON to argv[1]: optimizer steps, the global
train batch, and the labels compute_metrics received (read by test_trainer_gpu_count.py)."""
import json
import os
import sys

import torch
from torch.utils.data import Dataset

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _tiny_trainer_model import Tiny  # noqa: E402
from transformers import Trainer, TrainingArguments  # noqa: E402


class Rows(Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return {"x": torch.full((4,), float(i)), "labels": torch.tensor(float(i))}


SEEN = {}


def metrics(pred):
    SEEN["labels"] = sorted(int(v) for v in pred.label_ids.reshape(-1).tolist())
    return {"n": len(SEEN["labels"])}


args = TrainingArguments(output_dir=sys.argv[1] + ".out", per_device_train_batch_size=4, per_device_eval_batch_size=4,
                         num_train_epochs=1, learning_rate=1e-3, report_to="none", save_strategy="no",
                         use_cpu=True, logging_strategy="no", disable_tqdm=True)
tr = Trainer(model=Tiny(), args=args, train_dataset=Rows(32), eval_dataset=Rows(13), compute_metrics=metrics)
tr.train()
ev = tr.evaluate()
if args.process_index == 0:
    with open(sys.argv[1], "w") as f:
        json.dump({"world_size": args.world_size, "steps": tr.state.global_step,
                   "total_train_batch": args.per_device_train_batch_size * args.world_size,
                   "eval_n": ev["eval_n"], "labels": SEEN["labels"]}, f)

# End every rank together and skip interpreter teardown: a rank whose gloo threads are still alive when
# Python finalizes can abort ("terminate called without an active exception", SIGABRT), which a CI
# rehearsal saw once after the result was written.
if torch.distributed.is_initialized():
    torch.distributed.barrier()
sys.stdout.flush()
os._exit(0)

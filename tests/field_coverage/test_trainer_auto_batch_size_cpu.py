"""`auto_find_batch_size` in the pinned Trainer (transformers 5.25.0, accelerate 1.15.0), run on CPU.

The out-of-memory error is simulated: the tiny model raises torch's CUDA OOM text
("CUDA out of memory.") when a batch is larger than a limit, separately for training
(`model.training`) and evaluation. Everything else is the real Trainer: `Trainer.train` wraps
`_inner_training_loop` in `transformers.trainer_utils.find_executable_batch_size`, which hands it to
accelerate's decorator, and `Trainer._evaluate` re-raises an evaluation OOM as its own RuntimeError.

What it shows (the claims in tests/audit/claims/distributed-training-backends.yaml, fx16b):
- a training OOM restarts the whole inner loop at int(bs * 0.9): 16 -> 14 -> 12 -> 10; the size
  that fit is `trainer.state.train_batch_size` and the `train_batch_size` of a checkpoint's
  trainer_state.json; `per_device_eval_batch_size` is never touched;
- an OOM during in-training evaluation does not shrink anything: train() raises
  "Evaluation hit an out-of-memory error ... reduce `per_device_eval_batch_size`" (the OOM is its
  `__cause__`), the inner loop ran once, and the new message is not one the finder treats as OOM;
- without auto_find_batch_size, and for a standalone `trainer.evaluate()`, the OOM comes out as is.
"""
from __future__ import annotations

import json
import os

import pytest
import torch

from _tiny_trainer_model import Tiny, global_state_restored  # noqa: E402
from accelerate.utils.memory import should_reduce_batch_size
from transformers import Trainer, TrainingArguments

OOM = "CUDA out of memory. Tried to allocate 2.00 GiB (simulated)"


@pytest.fixture(scope="module", autouse=True)
def _leave_no_global_state():
    with global_state_restored():
        yield


class OomTiny(Tiny):
    """Raises torch's OOM text when a batch exceeds the limit of the current mode; records the
    batch sizes it was called with."""

    def __init__(self, train_limit: int, eval_limit: int):
        super().__init__()
        self.train_limit, self.eval_limit = train_limit, eval_limit
        self.seen = {"train": [], "eval": []}

    def forward(self, x, labels=None):
        mode = "train" if self.training else "eval"
        self.seen[mode].append(x.shape[0])
        if x.shape[0] > (self.train_limit if self.training else self.eval_limit):
            raise RuntimeError(OOM)
        return super().forward(x, labels)


def dataset(n=32):
    g = torch.Generator().manual_seed(0)
    return [{"x": torch.randn(4, generator=g), "labels": torch.randn((), generator=g)} for _ in range(n)]


def make(tmp_path, model, **kw):
    os.environ.pop("ACCELERATE_MIXED_PRECISION", None)
    base = dict(use_cpu=True, report_to="none", save_strategy="no", max_steps=1, auto_find_batch_size=True)
    base.update(kw)
    args = TrainingArguments(str(tmp_path), **base)
    return Trainer(model=model, args=args, train_dataset=dataset(), eval_dataset=dataset(128))


def test_training_oom_shrinks_the_train_batch_by_0_9_and_records_it(tmp_path):
    torch.manual_seed(0)
    model = OomTiny(train_limit=10, eval_limit=10**6)
    tr = make(tmp_path, model, per_device_train_batch_size=16, per_device_eval_batch_size=64,
              save_strategy="steps", save_steps=1)
    tr.train()
    # each retry re-runs the inner loop from the start with int(bs * 0.9)
    assert model.seen["train"] == [16, 14, 12, 10]
    assert tr.state.train_batch_size == 10 and tr._train_batch_size == 10
    state = json.loads((tmp_path / "checkpoint-1" / "trainer_state.json").read_text())
    assert state["train_batch_size"] == 10
    # the arguments keep what the user passed; the eval batch size is not part of the search
    assert tr.args.per_device_train_batch_size == 16
    assert tr.args.per_device_eval_batch_size == 64


def test_eval_oom_during_training_raises_instead_of_shrinking(tmp_path):
    torch.manual_seed(0)
    model = OomTiny(train_limit=10**6, eval_limit=8)
    tr = make(tmp_path, model, per_device_train_batch_size=2, per_device_eval_batch_size=64,
              eval_strategy="steps", eval_steps=1)
    with pytest.raises(RuntimeError) as info:
        tr.train()
    msg = str(info.value)
    assert msg.startswith("Evaluation hit an out-of-memory error.")
    assert "reduce `per_device_eval_batch_size` instead" in msg
    assert OOM in str(info.value.__cause__)
    # one pass of the inner loop, the train batch never changed, eval was tried once at 64
    assert model.seen["train"] == [2]
    assert model.seen["eval"] == [64]
    assert tr._train_batch_size == 2 and tr.args.per_device_eval_batch_size == 64
    # why the finder lets it through: the hyphenated text is not one of its OOM markers
    assert not should_reduce_batch_size(info.value)
    assert should_reduce_batch_size(info.value.__cause__)


def test_eval_oom_without_auto_find_and_standalone_evaluate_are_unchanged(tmp_path):
    torch.manual_seed(0)
    model = OomTiny(train_limit=10**6, eval_limit=8)
    tr = make(tmp_path, model, auto_find_batch_size=False, per_device_train_batch_size=2,
              per_device_eval_batch_size=64, eval_strategy="steps", eval_steps=1)
    with pytest.raises(RuntimeError, match="CUDA out of memory"):
        tr.train()

    model = OomTiny(train_limit=10**6, eval_limit=8)
    tr = make(tmp_path / "b", model, per_device_eval_batch_size=64)
    with pytest.raises(RuntimeError) as info:
        tr.evaluate()          # not wrapped by the finder nor by _evaluate's re-raise
    assert OOM in str(info.value)
    # the fix the message asks for: a smaller eval batch
    tr.args.per_device_eval_batch_size = 8
    assert "eval_loss" in tr.evaluate()


def test_the_eval_oom_message_matches_its_catalog_entry(tmp_path):
    import re
    from pathlib import Path

    import yaml
    repo = Path(__file__).resolve().parents[2]
    entries = yaml.safe_load((repo / "sub-skills/failure-triage/catalog/transformers.yaml").read_text(encoding="utf-8"))
    entry = next(e for e in entries if e["id"] == "transformers-eval-oom-auto-find-batch-size")
    tr = make(tmp_path, OomTiny(train_limit=10**6, eval_limit=8), per_device_train_batch_size=2,
              per_device_eval_batch_size=64, eval_strategy="steps", eval_steps=1)
    with pytest.raises(RuntimeError) as info:
        tr.train()
    assert re.search(entry["pattern"], str(info.value))
    assert entry["example"] == f"RuntimeError: {info.value}"


class OomOnceTiny(Tiny):
    """Raises torch's OOM text on its `fail_at`-th training forward (after some optimizer steps)."""

    def __init__(self, fail_at: int):
        super().__init__()
        self.fail_at, self.calls, self.seen = fail_at, 0, []

    def forward(self, x, labels=None):
        if self.training:
            self.calls += 1
            self.seen.append(x.shape[0])
            if self.calls == self.fail_at:
                raise RuntimeError(OOM)
        return super().forward(x, labels)


def test_a_retry_keeps_the_weights_and_optimizer_state_of_the_failed_attempt(tmp_path):
    """The step counter and the LR schedule restart; the model and (no DeepSpeed/FSDP) the optimizer
    object are reused, so the steps taken before the OOM stay in the weights and in Adam's state."""
    torch.manual_seed(0)
    model = OomOnceTiny(fail_at=3)                  # steps 1 and 2 at 16 succeed, step 3 runs out
    init = {k: v.clone() for k, v in model.state_dict().items()}
    tr = make(tmp_path, model, per_device_train_batch_size=16, max_steps=5, learning_rate=0.1)
    tr.train()
    assert model.seen[:4] == [16, 16, 16, 14] and len(model.seen) == 8   # 3 calls at 16, then 5 steps
    assert tr.state.global_step == 5 and tr.state.train_batch_size == 14
    adam_steps = {float(v["step"]) for v in tr.optimizer.state_dict()["state"].values()}
    assert adam_steps == {7.0}                       # 2 steps of the failed attempt + 5 of the retry

    fresh = OomOnceTiny(fail_at=-1)
    fresh.load_state_dict(init)
    tr2 = make(tmp_path / "fresh", fresh, auto_find_batch_size=False, per_device_train_batch_size=14,
               max_steps=5, learning_rate=0.1)
    tr2.train()
    assert not torch.allclose(model.lin.weight, fresh.lin.weight)   # not a clean restart at 14

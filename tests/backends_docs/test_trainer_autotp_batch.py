"""Where the Trainer takes the TP size for its total train batch size (transformers 5.25.0, CPU, no
process group): Trainer.get_tp_size and get_total_train_batch_size run on a stand-in object that has
the attributes they read. Backs "Trainer with AutoTP" in
sub-skills/distributed-training-backends/references/deepspeed-autotp.md and the batch-size row of
transformers-trainer-runtime.md (set-21 miss s21-K11-01).
"""
from __future__ import annotations

from types import SimpleNamespace

from transformers import Trainer


def stand_in(ds_config=None, model_tp=None, parallelism_config=None):
    model = SimpleNamespace() if model_tp is None else SimpleNamespace(_tp_size=model_tp)
    args = SimpleNamespace(hf_deepspeed_config=SimpleNamespace(config=ds_config) if ds_config else None)
    t = SimpleNamespace(model=model, args=args, is_deepspeed_enabled=ds_config is not None,
                        accelerator=SimpleNamespace(parallelism_config=parallelism_config), _train_batch_size=4)
    for name in ("get_tp_size", "get_cp_size", "get_sp_size"):
        setattr(t, name, getattr(Trainer, name).__get__(t))
    return t


def total(t, world=16, ga=1):
    return Trainer.get_total_train_batch_size(t, SimpleNamespace(world_size=world, gradient_accumulation_steps=ga))


def test_autotp_size_from_the_deepspeed_config_divides_the_world_size():
    t = stand_in({"tensor_parallel": {"autotp_size": 2}})
    assert t.get_tp_size() == 2
    assert total(t) == 32          # 4 x 1 x 16 / 2


def test_without_tp_the_total_uses_the_whole_world():
    t = stand_in({"zero_optimization": {"stage": 2}})
    assert t.get_tp_size() == 1
    assert total(t) == 64


def test_the_models_own_tp_size_wins_over_the_deepspeed_config():
    t = stand_in({"tensor_parallel": {"autotp_size": 2}}, model_tp=4)
    assert t.get_tp_size() == 4
    assert total(t) == 16


def test_accelerate_parallelism_config_is_the_last_fallback():
    t = stand_in(parallelism_config=SimpleNamespace(tp_size=2, cp_size=1, sp_size=1))
    assert t.get_tp_size() == 2
    assert total(t, ga=2) == 64    # 4 x 2 x 16 / 2

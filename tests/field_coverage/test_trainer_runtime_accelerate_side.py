"""The Accelerate half of two Transformers Trainer mechanisms (transformers-trainer-runtime.md),
run in-process without transformers (accelerate 1.15.0):

- the Trainer always builds `TorchDynamoPlugin(backend=args.torch_compile_backend,
  mode=args.torch_compile_mode, dynamic=None)`; the fields it leaves `None` come from the
  `ACCELERATE_DYNAMO_*` variables that `accelerate launch` exports;
- the Trainer's `--deepspeed` JSON reaches `DeepSpeedPlugin(hf_ds_config=...)`, which fills a
  `stage3_gather_16bit_weights_on_model_save: "auto"` from `zero3_save_16bit_model`
  (`ACCELERATE_DEEPSPEED_ZERO3_SAVE_16BIT_MODEL`)."""
from __future__ import annotations

import accelerate.utils as accelerate_utils


def _clean(monkeypatch):
    import os
    for k in list(os.environ):
        if k.startswith(("ACCELERATE_DYNAMO_", "ACCELERATE_DEEPSPEED_")):
            monkeypatch.delenv(k)


def test_trainer_dynamo_plugin_fields_left_none_come_from_the_launcher(monkeypatch):
    _clean(monkeypatch)
    plugin = accelerate_utils.TorchDynamoPlugin
    # torch_compile off: the Trainer passes backend=None, mode=None -> nothing compiles without a launcher value
    assert plugin(backend=None, mode=None, dynamic=None).backend.value == "NO"
    # ... but an accelerate config with a dynamo backend compiles the Trainer's model anyway
    monkeypatch.setenv("ACCELERATE_DYNAMO_BACKEND", "INDUCTOR")
    monkeypatch.setenv("ACCELERATE_DYNAMO_MODE", "max-autotune")
    p = plugin(backend=None, mode=None, dynamic=None)
    assert (p.backend.value, p.mode) == ("INDUCTOR", "max-autotune")
    # torch_compile=True fills backend "inductor" in TrainingArguments: it beats the launcher's NO,
    # while an unset torch_compile_mode still takes the launcher's mode
    monkeypatch.setenv("ACCELERATE_DYNAMO_BACKEND", "NO")
    p = plugin(backend="inductor", mode=None, dynamic=None)
    assert (p.backend.value, p.mode) == ("INDUCTOR", "max-autotune")


def _ds(value):
    zero = {"stage": 3}
    if value is not None:
        zero["stage3_gather_16bit_weights_on_model_save"] = value
    return {"zero_optimization": zero, "train_micro_batch_size_per_gpu": 1}


def test_zero3_gather_on_save_auto_is_filled_from_the_launcher(monkeypatch):
    _clean(monkeypatch)
    plugin = accelerate_utils.DeepSpeedPlugin

    def gather(value):
        return plugin(hf_ds_config=_ds(value)).hf_ds_config.config["zero_optimization"].get(
            "stage3_gather_16bit_weights_on_model_save", "absent")

    assert gather("auto") is False  # unset variable: "auto" becomes false -> no weights file under ZeRO-3
    assert gather(None) == "absent"  # absent stays absent: DeepSpeed's own default (false) applies
    assert gather(True) is True
    monkeypatch.setenv("ACCELERATE_DEEPSPEED_ZERO3_SAVE_16BIT_MODEL", "true")
    assert gather("auto") is True

"""checkpointing.md: transformers 5.25.0 `PreTrainedModel.save_pretrained` has no `save_function`
parameter (4.x had one); a `save_function=` keyword goes into **kwargs and is never called, so the
4.x recipe `save_pretrained(..., save_function=accelerator.save)` silently writes with the default
writer. Runs a one-layer GPT-2 save on CPU."""
from __future__ import annotations

import inspect


def test_save_function_is_not_a_parameter_and_is_never_called(tmp_path):
    from transformers import GPT2Config, GPT2LMHeadModel
    from transformers import PreTrainedModel

    params = inspect.signature(PreTrainedModel.save_pretrained).parameters
    assert "save_function" not in params and "kwargs" in params
    model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=8, n_head=2, vocab_size=16, n_positions=8))
    called = []
    model.save_pretrained(tmp_path, save_function=lambda *a, **k: called.append(a))
    assert called == []
    assert (tmp_path / "model.safetensors").is_file()  # written by the default (safetensors) writer

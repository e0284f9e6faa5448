"""Transformers `generate` on an FSDP2 (`fully_shard`) root, decoder-only against encoder-decoder
(torch 2.13.0 CPU, transformers 5.25.0, 2 gloo ranks; failure-triage generation-under-sharding.md FSDP2 row).

A decoder-only model's generate enters every step through `self.__call__`, so the root's pre-forward hook
gathers the root group. An encoder-decoder model's generate first runs `self.get_encoder()(...)` directly
(`_prepare_text_encoder_decoder_kwargs_for_generation`), so the shared embedding in the root group is still
sharded there: the DTensor error, until register_fsdp_forward_method(model, "generate"). Set-21 miss
s21-K1-06: the bundle said generate on the root "works" for any Transformers model (measured on Llama only).
"""
from __future__ import annotations

import inspect
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _autograd_ddp_ignore_jobs import run_job  # noqa: E402 - the 2-rank job runner of this folder

MIXED = "RuntimeError: aten.embedding.default got mixed torch.Tensor and DTensor"


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    return run_job(HERE / "_fsdp2_generate_transformers_job.py", tmp_path_factory.mktemp("fsdp2_generate_tf"))


def test_decoder_only_generate_on_the_root_works_without_registering(job):
    for r in job:
        assert r["llama_plain"] == "same as unsharded"
        assert r["llama_registered"] == "same as unsharded"


def test_encoder_decoder_generate_needs_register_fsdp_forward_method(job):
    for r in job:
        assert r["t5_plain"].startswith(MIXED), r["t5_plain"]
        assert r["t5_registered"] == "same as unsharded"


def test_the_encoder_is_called_directly_in_the_pinned_transformers():
    from transformers.generation.utils import GenerationMixin
    src = inspect.getsource(GenerationMixin._prepare_text_encoder_decoder_kwargs_for_generation)
    assert "encoder = self.get_encoder()" in src and "encoder(**encoder_kwargs)" in src

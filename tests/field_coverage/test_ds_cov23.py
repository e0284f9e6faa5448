"""Behaviour claims written from the set-23 writers' mining (W2): DeepSpeedEngine.train()/eval() leave the
engine's own `training` flag at True (deepspeed-engine-methods.md, zero3-parameters.md), and the 40-byte
empty adapter file the transformers 4.x Trainer wrote under ZeRO-3 + PEFT (transformers-trainer-saving-eval.md).
One run of _ds_cov23_probe.py under torchrun, one gloo rank, DS_ACCELERATOR=cpu: deepspeed 0.19.8,
torch 2.13.0 (CPU build), safetensors as installed with transformers 5.25.0."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from _torchrun import result, shared, torchrun  # noqa: E402

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
REF = REPO / "sub-skills" / "distributed-training-backends" / "references"


def probe_run(tmp_path_factory):
    scratch = tmp_path_factory.mktemp("dscov23")
    env = dict(os.environ, DS_ACCELERATOR="cpu", OMP_NUM_THREADS="1")
    return result(torchrun(HERE / "_ds_cov23_probe.py", scratch, nproc=1, cwd=scratch, env=env))


@pytest.fixture(scope="module")
def res(tmp_path_factory):
    return shared(probe_run, tmp_path_factory)


@pytest.mark.parametrize("stage", ["0", "3"])
def test_initialize_keeps_the_module_mode_and_engine_flag_stays_true(res, stage):
    r = res["mode"][stage]
    assert r["after_initialize"] == [True, False]          # engine.training, engine.module.training
    assert r["eval_outputs_equal"] is True                 # dropout off: the module is in eval mode


@pytest.mark.parametrize("stage", ["0", "3"])
def test_train_and_eval_switch_only_the_module(res, stage):
    r = res["mode"][stage]
    assert r["eval"] == [True, False, False]
    assert r["train"] == [True, True, True]
    assert r["train_false"] == [True, False, False]
    assert r["train_outputs_equal"] is False               # dropout on after engine.train()


def test_empty_state_dict_safetensors_is_40_bytes(res):
    r = res["empty_safetensors"]
    assert r["size"] == 40 and r["header_len"] == 32 and r["keys"] == []
    assert json.loads(r["header"]) == {"__metadata__": {"format": "pt"}}


def test_pages_state_the_run():
    methods = " ".join((REF / "deepspeed-engine-methods.md").read_text(encoding="utf-8").split())
    assert "`engine.training` read `True` every time while `engine.module.training` followed the calls" in methods
    saving = " ".join((REF / "transformers-trainer-saving-eval.md").read_text(encoding="utf-8").split())
    assert "metadata is exactly 40 bytes (8-byte header length + the 32-byte JSON header)" in saving

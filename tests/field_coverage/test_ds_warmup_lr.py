"""Behaviour claims of sub-skills/distributed-training-backends/references/deepspeed-warmup-lr.md:
the learning rate each optimizer step uses under a WarmupLR `scheduler` section (one gloo rank,
DS_ACCELERATOR=cpu, deepspeed 0.19.8)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from _torchrun import result, shared, torchrun  # noqa: E402

HERE = Path(__file__).resolve().parent
DOC = HERE.parents[1] / "sub-skills" / "distributed-training-backends" / "references" / "deepspeed-warmup-lr.md"


def probe_run(tmp_path_factory):
    """This module's probe run (field_coverage/conftest.py may start it early, beside the others)."""
    scratch = tmp_path_factory.mktemp("warmup")
    env = dict(os.environ, DS_ACCELERATOR="cpu", OMP_NUM_THREADS="1")
    return result(torchrun(HERE / "_ds_warmup_probe.py", nproc=1, cwd=scratch, env=env))


@pytest.fixture(scope="module")
def lrs(tmp_path_factory):
    return shared(probe_run, tmp_path_factory)


def test_default_is_log_warmup_to_the_optimizer_lr_after_two_zero_steps(lrs):
    assert lrs["defaults"] == [0.0, 0.0, 5e-06, 7.92481e-06, 1e-05, 1e-05]


def test_linear_warmup(lrs):
    assert lrs["linear"] == [0.0, 0.0, 2.5e-06, 5e-06, 7.5e-06, 1e-05]


def test_explicit_max_lr_replaces_the_optimizer_lr(lrs):
    assert lrs["explicit_max"] == [0.0, 0.0, 0.0025, 0.005, 0.0075, 0.01]


def test_docstring_default_is_stale_in_this_version():
    import inspect
    from deepspeed.runtime.lr_schedules import WarmupLR
    assert inspect.signature(WarmupLR.__init__).parameters["warmup_max_lr"].default is None
    assert "Default: 0.001" in WarmupLR.__doc__ or "Default: 0.001" in (WarmupLR.__init__.__doc__ or "")


def test_reference_states_what_the_run_shows():
    text = DOC.read_text()
    for phrase in ["0, 0, 5e-06, 7.92e-06, 1e-05", "0, 0, 2.5e-06, 5e-06, 7.5e-06, 1e-05", "`warmup_max_lr`",
                   "first two optimizer steps", "docstring"]:
        assert phrase in text, phrase


# ---- sub-skills/distributed-and-backends/references/launching.md (DALLE-pytorch's DeepSpeedBackend)
LAUNCHING = HERE.parents[1] / "sub-skills" / "distributed-and-backends" / "references" / "launching.md"


def test_dalle_deepspeed_backend_initialises_from_torchrun_variables(lrs):
    assert lrs["dalle_backend"] == {"world": 1, "rank": 0, "local_rank": 0}


def test_client_scheduler_is_stepped_by_the_engine_per_optimizer_step(lrs):
    s = lrs["client_scheduler"]
    assert s["three_steps"] == {"same_object": True, "scheduler_steps": 3}
    assert s["four_micro_steps_ga2"]["scheduler_steps"] == 2          # per optimizer step, not per micro-batch
    assert s["three_steps_plus_manual"]["scheduler_steps"] == 6       # the script stepping too: twice per step


def test_launching_reference_states_what_the_run_shows():
    text = LAUNCHING.read_text()
    for phrase in ["| 3 `engine.step()` calls | 3 |", "| 4 micro-batches with `gradient_accumulation_steps` 2 | 2 |",
                   "6: **stepped twice** per step", "also works: torchrun sets the five variables"]:
        assert phrase in text, phrase

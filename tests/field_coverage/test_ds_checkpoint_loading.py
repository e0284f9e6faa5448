"""Behaviour claims of sub-skills/distributed-training-backends/references/deepspeed-checkpoint-loading.md:
one gloo rank with DS_ACCELERATOR=cpu (deepspeed 0.19.8) saves two checkpoints at ZeRO stages 2
and 3 and loads them back with the load_checkpoint options."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from _torchrun import result, shared, torchrun  # noqa: E402

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
DOC = REPO / "sub-skills" / "distributed-training-backends" / "references" / "deepspeed-checkpoint-loading.md"


def probe_run(tmp_path_factory):
    """This module's probe run (field_coverage/conftest.py may start it early, beside the others)."""
    scratch = tmp_path_factory.mktemp("dsckpt")
    env = dict(os.environ, DS_ACCELERATOR="cpu", OMP_NUM_THREADS="1")
    proc = torchrun(HERE / "_ds_ckpt_probe.py", scratch, nproc=1, cwd=scratch, env=env)
    out = result(proc)
    out["log"] = proc.stdout + proc.stderr
    return out


@pytest.fixture(scope="module")
def res(tmp_path_factory):
    return shared(probe_run, tmp_path_factory)


@pytest.mark.parametrize("stage", ["stage2", "stage3"])
def test_tags_and_latest(res, stage):
    r = res[stage]
    assert r["tags"] == ["global_step1", "global_step2"] and r["latest"] == "global_step2"
    assert len({r["fresh"], r["first"], r["second"]}) == 3  # the three weight states are distinguishable
    assert r["default"]["weights"] == r["second"]
    assert r["tag_step1"]["weights"] == r["first"]


@pytest.mark.parametrize("stage", ["stage2", "stage3"])
def test_missing_latest_loads_nothing(res, stage):
    r = res[stage]
    assert r["no_latest"] == {"path": None, "weights": r["fresh"]}
    assert "Unable to find latest file at" in res["log"]


def test_stage2_options_honour_the_tag(res):
    r = res["stage2"]
    assert r["tag_step1_no_optim"]["weights"] == r["first"]
    assert r["tag_step1_module_only"]["weights"] == r["first"]


def test_stage3_no_optimizer_states_reads_latest_not_the_tag(res):
    r = res["stage3"]
    assert r["tag_step1_no_optim"]["weights"] == r["second"]


def test_stage3_module_only_loads_no_weights(res):
    r = res["stage3"]
    assert r["tag_step1_module_only"]["weights"] == r["fresh"]


def test_reference_states_what_the_run_shows():
    text = DOC.read_text()
    for phrase in ["Unable to find latest file at", "`(None, None)`", "`load_module_only=True`",
                   "`load_optimizer_states=False`", "whatever `latest` names", "keeps its freshly initialised weights"]:
        assert phrase in text, phrase

"""Claims of the bf16 overflow section of sub-skills/failure-triage/references/numerics.md: one
gloo rank with DS_ACCELERATOR=cpu (deepspeed 0.19.8), an inf loss at ZeRO stages 0, 1, 2."""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from _torchrun import result, shared, torchrun  # noqa: E402

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
DOC = REPO / "sub-skills" / "failure-triage" / "references" / "numerics.md"
OVERFLOW = "[deepspeed] OVERFLOW! Skipping step. Gradients are non-finite, weights were not updated."


def probe_run(tmp_path_factory):
    """This module's probe run (field_coverage/conftest.py may start it early, beside the others)."""
    scratch = tmp_path_factory.mktemp("bf16")
    env = dict(os.environ, DS_ACCELERATOR="cpu", OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    proc = torchrun(HERE / "_bf16_overflow_probe.py", nproc=1, cwd=scratch, env=env)
    text = proc.stdout + proc.stderr
    res = result(proc)
    # log lines between one CASE marker and the next belong to that case
    logs, case = {}, None
    for line in text.splitlines():
        m = re.match(r"CASE (\w+)", line)
        if m:
            case = m.group(1)
            logs.setdefault(case, [])
        elif case:
            logs[case].append(line)
    return res, logs


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return shared(probe_run, tmp_path_factory)


def test_cpu_accelerator_reports_bf16(run):
    out, _ = run
    assert out["bf16_supported"] is True  # deepspeed/accelerator/cpu_accelerator.py returns True unconditionally


@pytest.mark.parametrize("case,logged", [("stage0", False), ("stage1", True), ("stage2", True)])
def test_non_finite_gradients_skip_the_step(run, case, logged):
    out, logs = run
    assert out[case] == {"changed": False, "finite": True, "skipped_steps": 1, "global_steps": 1}
    assert any(OVERFLOW in l for l in logs[case]) is logged


def test_disabling_the_check_applies_non_finite_updates(run):
    out, logs = run
    assert out["stage2_no_check"]["changed"] is True and out["stage2_no_check"]["finite"] is False
    assert out["stage2_no_check"]["skipped_steps"] == 0
    assert not any("OVERFLOW" in l for l in logs["stage2_no_check"])


def test_reference_states_what_the_run_shows():
    text = DOC.read_text()
    assert OVERFLOW in text and '"check_grad_overflow": false' in text and "`engine.skipped_steps`" in text

"""The same Trainer command on 1 and on 2 processes (transformers 5.25.0, accelerate 1.15.0, gloo on
CPU): claims of sub-skills/distributed-training-backends/references/transformers-trainer-runtime.md
("Same command, more GPUs, different scores")."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from _torchrun import side_by_side, torchrun  # noqa: E402

PROBE = Path(__file__).resolve().parent / "_trainer_gpu_count_probe.py"


def _run(tmp: Path, nproc: int) -> dict:
    out = tmp / f"n{nproc}.json"
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    env.pop("ACCELERATE_USE_CPU", None)
    proc = torchrun(PROBE, out, nproc=nproc, cwd=tmp, env=env, timeout=300)
    assert proc.returncode == 0 and out.exists(), (proc.stdout + proc.stderr)[-3000:]
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return side_by_side(_run, tmp_path_factory.mktemp("gpu_count"), 1, 2)


def test_more_processes_bigger_global_batch_fewer_steps(runs):
    assert (runs[1]["total_train_batch"], runs[1]["steps"]) == (4, 8)
    assert (runs[2]["total_train_batch"], runs[2]["steps"]) == (8, 4)  # same epochs, half the updates


def test_evaluation_sees_each_sample_once_at_any_process_count(runs):
    # 13 eval samples, 2 ranks x batch 4: the sampler pads to 16, gather_for_metrics drops the 3 repeats
    for n in (1, 2):
        assert runs[n]["eval_n"] == 13 and runs[n]["labels"] == list(range(13))

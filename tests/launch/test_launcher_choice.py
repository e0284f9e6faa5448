"""launcher-choice.md is what accelerate 1.15.0 does (set-11 miss s11-acl-j01): _launcher_choice.py runs
`launch_command` for every config state x flag set with the launchers recorded, and `PartialState` in the
worker's situations with the real init_process_group (this CPU build has no NCCL, like Windows builds).
The page's generated blocks must equal a fresh rendering word for word (~1.5 s, in-process)."""
from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import _generated_blocks as gb  # noqa: E402
import _launcher_choice as gen  # noqa: E402


@pytest.fixture(scope="module")
def data():
    logging.disable(logging.WARNING)
    try:
        return gen.collect()
    finally:
        logging.disable(logging.NOTSET)


def test_page_is_the_fresh_run(data):
    gb.assert_page_is_rendered(gen.PAGE, gen.render(data))


def test_num_processes_never_changes_the_mode(data):
    launch = data["launch"]
    # the miss: a MULTI_GPU default file + --num_processes 1 still goes through torchrun
    assert launch["default file `MULTI_GPU`, 2 processes|--num_processes 1"] == ("multi_gpu_launcher", 1)
    assert launch["default file `NO`|--num_processes 1"] == ("simple_launcher", 1)
    assert launch["default file `DEEPSPEED`, 2 processes|--num_processes 1"] == ("deepspeed_launcher", 1)
    for col in gen.COLUMNS:      # --cpu wins over every file, default or explicit
        assert launch[f"{col}|--cpu"] == ("simple_launcher", 1), col
    assert launch["default file `MULTI_GPU`, 2 processes|--multi_gpu --num_processes 1"][0] == "error"
    assert "Less than two GPU ids" in launch["default file `MULTI_GPU`, 2 processes|--gpu_ids 0"][1]
    assert launch["no file, 2 GPUs|"] == ("multi_gpu_launcher", 2)
    assert launch["no file, 2 GPUs|--num_processes 1"] == ("simple_launcher", 1)


def test_worker_backend_choice(data):
    by = dict(zip(gen.WORKER_CASES, data["workers"]))
    tr = "torchrun (`LOCAL_RANK` set)"
    nccl = by[(tr, True, False, None)]
    assert nccl["init"] == "nccl" and nccl["outcome"] == "RuntimeError: Distributed package doesn't have NCCL built in"
    assert by[(tr, True, False, "gloo")]["outcome"] == "initialised"
    assert str(by[(tr, True, False, "gloo")]["chosen"][1]).endswith("MULTI_GPU")
    assert by[(tr, False, True, "nccl")]["kwargs"] == {}          # the handler's default is dropped
    assert by[(tr, False, True, "=nccl")]["error"].startswith("ValueError: Your assigned backend nccl")
    assert by[(tr, False, False, None)]["final"][0] == "NO"       # torchrun without CUDA or cpu: alone
    assert "init" not in by[("simple launcher (no `LOCAL_RANK`)", True, False, None)]

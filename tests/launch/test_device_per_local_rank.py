"""More workers than GPUs under accelerate 1.15.0 (set-19 miss s19-K6-09: the answer said Accelerate puts each
process on cuda:LOCAL_RANK; "Duplicate GPU detected : rank 2 and rank 0 both on CUDA device ...").

- Worker side, _device_per_local_rank_job.py: real gloo groups of forked workers with torchrun's variables and
  torch.cuda patched to report G GPUs; PartialState picks `local_process_index % device_count`, so with 4
  workers on 2 GPUs rank 2 gets cuda:0 like rank 0. DDP (`prepare`) and `wait_for_everyone` get the
  unreduced local index.
- Launcher side, in this process: accelerate's `launch_command` with torch.cuda reporting 2 GPUs and
  `torch.distributed.run.run` recorded (nothing starts): num_processes from the config file (or the flag)
  reaches torchrun's --nproc_per_node unchanged, with no warning or error about the GPU count; only when
  neither is given does it default to torch.cuda.device_count(). torchrun's own `--nproc-per-node 4` is
  taken as given too.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import subprocess
import sys
import warnings
from pathlib import Path
from unittest import mock

import pytest
import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import _ports  # noqa: E402


@pytest.fixture(scope="module")
def workers(tmp_path_factory):
    out = tmp_path_factory.mktemp("device_per_local_rank")
    subprocess.run([sys.executable, str(HERE / "_device_per_local_rank_job.py"), str(out)], check=True,
                   timeout=240, cwd=HERE.parents[1])
    res: dict = {}
    for f in sorted(out.glob("*.json")):
        name, rank = f.stem.rsplit(".rank", 1)
        res.setdefault(name, {})[int(rank)] = json.loads(f.read_text(encoding="utf-8"))
    return res


def test_accelerate_device_is_local_rank_modulo_gpu_count(workers):
    four = workers["4-workers-2-gpus"]
    assert [four[r]["device"] for r in range(4)] == ["cuda:0", "cuda:1", "cuda:0", "cuda:1"]
    assert [four[r]["set_device"] for r in range(4)] == [["cuda:0"], ["cuda:1"], ["cuda:0"], ["cuda:1"]]
    assert {four[r]["distributed_type"] for r in range(4)} == {"MULTI_GPU"}
    assert [four[r]["local_process_index"] for r in range(4)] == [0, 1, 2, 3]
    one = workers["2-workers-1-gpu"]
    assert [one[r]["device"] for r in range(2)] == ["cuda:0", "cuda:0"]       # both on the one GPU, no error
    two = workers["2-workers-2-gpus"]
    assert [two[r]["device"] for r in range(2)] == ["cuda:0", "cuda:1"]       # the matched case
    assert not any("error" in r for s in workers.values() for r in s.values())


def test_ddp_and_barrier_get_the_unreduced_local_index(workers):
    four = workers["4-workers-2-gpus"]
    assert four[2]["ddp"] == {"device_ids": [2], "output_device": 2}          # while the model sits on cuda:0
    assert four[3]["barrier_device_ids"] == [3]
    assert workers["2-workers-1-gpu"][1]["ddp"] == {"device_ids": [1], "output_device": 1}
    cpu = workers["2-workers-cpu"]                                            # MULTI_CPU: torch.cpu.device_count() == 1
    assert [cpu[r]["device"] for r in range(2)] == ["cpu:0", "cpu:0"]
    assert cpu[1]["ddp"] == {"device_ids": None, "output_device": None} and cpu[1]["set_device"] == []


def _launch(tmp_path, flags, cfg=None, gpus=2):
    """(nproc_per_node torchrun got, CUDA_VISIBLE_DEVICES it ran under, warnings logged or raised)."""
    import accelerate.commands.config.config_args as ca
    import accelerate.commands.launch as cl
    import torch
    import torch.distributed.run as distrib_run
    port = str(_ports.free_port())
    default = tmp_path / "default_config.yaml"
    if default.exists():
        default.unlink()
    if cfg is not None:
        default.write_text(yaml.safe_dump({"compute_environment": "LOCAL_MACHINE", "machine_rank": 0,
                                           "num_machines": 1, "mixed_precision": "no", "use_cpu": False,
                                           "main_process_port": int(port), **cfg}), encoding="utf-8")
    else:
        flags = flags + ["--main_process_port", port]
    seen: dict = {}

    def run(args):
        seen["nproc_per_node"] = args.nproc_per_node
        seen["CUDA_VISIBLE_DEVICES"] = os.environ.get("CUDA_VISIBLE_DEVICES")

    class Keep(logging.Handler):
        def emit(self, record):
            seen.setdefault("logged", []).append(record.getMessage())

    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ACCELERATE_", "FSDP_", "PET_")) and k != "CUDA_VISIBLE_DEVICES"}
    handler = Keep(level=logging.WARNING)
    log = logging.getLogger("accelerate.commands.launch")
    log.addHandler(handler)
    try:
        with contextlib.ExitStack() as st, warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            st.enter_context(mock.patch.dict(os.environ, env, clear=True))
            st.enter_context(mock.patch.object(cl, "default_config_file", str(default)))
            st.enter_context(mock.patch.object(ca, "default_config_file", str(default)))
            st.enter_context(mock.patch.object(torch.cuda, "is_available", lambda: True))
            st.enter_context(mock.patch.object(torch.cuda, "device_count", lambda: gpus))
            st.enter_context(mock.patch.object(distrib_run, "run", run))
            cl.launch_command(cl.launch_command_parser().parse_args(flags + ["train.py"]))
    finally:
        log.removeHandler(handler)
    seen["warnings"] = seen.get("logged", []) + [str(w.message) for w in caught]
    return seen


def _about_gpu_count(messages):
    return [m for m in messages if "num_processes" in m or "GPU" in m or "device" in m]


def test_launch_starts_the_configured_count_on_fewer_gpus_without_a_word(tmp_path):
    # a default config written on a 4-GPU machine, used on a 2-GPU one (Kaggle T4 x2)
    got = _launch(tmp_path, [], cfg={"distributed_type": "MULTI_GPU", "num_processes": 4, "gpu_ids": "all"})
    assert got["nproc_per_node"] == "4" and got["CUDA_VISIBLE_DEVICES"] is None
    assert _about_gpu_count(got["warnings"]) == []
    # gpu_ids lists 2 GPUs, num_processes says 4: both reach torchrun as they are
    got = _launch(tmp_path, [], cfg={"distributed_type": "MULTI_GPU", "num_processes": 4, "gpu_ids": "0,1"})
    assert (got["nproc_per_node"], got["CUDA_VISIBLE_DEVICES"]) == ("4", "0,1")
    assert _about_gpu_count(got["warnings"]) == []


def test_launch_num_processes_flag_beats_the_file_and_defaults_to_the_gpu_count(tmp_path):
    cfg = {"distributed_type": "MULTI_GPU", "num_processes": 4, "gpu_ids": "all"}
    assert _launch(tmp_path, ["--num_processes", "2"], cfg=cfg)["nproc_per_node"] == "2"
    got = _launch(tmp_path, ["--num_processes", "4"])          # no file, 2 GPUs: multi-GPU turns on, 4 start
    assert got["nproc_per_node"] == "4"
    # the one GPU-related line is "More than one GPU was found, enabling multi-GPU training"; nothing compares
    # the 4 processes with the 2 GPUs
    assert not any("4" in m or "`--num_processes` was set" in m for m in got["warnings"])
    assert any("More than one GPU was found, enabling multi-GPU training" in m for m in got["warnings"])
    got = _launch(tmp_path, [])                                  # no file, no flag: torch.cuda.device_count()
    assert got["nproc_per_node"] == "2"
    assert any("`--num_processes` was set to a value of `2`" in m for m in got["warnings"])


def test_torchrun_takes_an_integer_nproc_per_node_as_given():
    import torch
    import torch.distributed.run as distrib_run
    with mock.patch.object(torch.cuda, "is_available", lambda: True), \
            mock.patch.object(torch.cuda, "device_count", lambda: 2):
        assert distrib_run.determine_local_world_size("4") == 4
        assert distrib_run.determine_local_world_size("gpu") == 2

"""How the Transformers Trainer picks its parallel mode (transformers 5.25.0, accelerate 1.15.0, CPU):
claims of sub-skills/distributed-training-backends/references/transformers-trainer-runtime.md
("Which parallel mode the Trainer picks", set-18 miss s18-H7-01).

In-process: one plain process with several visible GPUs, simulated by forcing
`torch.cuda.device_count()` to 4 (the only input of `n_gpu` when Accelerate's distributed type is NO,
`training_args.py::_setup_devices`); a model spread by `device_map`, simulated by setting
`model.hf_device_map` (the only input of `Trainer.is_model_parallel`). 32 samples,
per_device_train_batch_size=2, 1 epoch. Subprocess: a notebook-kernel stand-in, one plain `python`
process calling accelerate's `notebook_launcher` (_trainer_notebook_probe.py)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from _tiny_trainer_model import Tiny, global_state_restored  # noqa: E402
from _torchrun import free_port, result, shared  # noqa: E402

import transformers
from transformers import Trainer, TrainingArguments
from transformers.training_args import ParallelMode

HERE = Path(__file__).resolve().parent


def dataset(n=32):
    g = torch.Generator().manual_seed(0)
    return [{"x": torch.randn(4, generator=g), "labels": torch.randn((), generator=g)} for _ in range(n)]


@pytest.fixture
def four_visible_gpus(monkeypatch, tmp_path):
    """A plain process (no launcher variables, no use_cpu) on a host whose CUDA reports 4 devices."""
    for var in ("ACCELERATE_USE_CPU", "LOCAL_RANK", "RANK", "WORLD_SIZE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    with global_state_restored():
        yield TrainingArguments(str(tmp_path), per_device_train_batch_size=2, num_train_epochs=1,
                                report_to="none", save_strategy="no", disable_tqdm=True)


def test_one_process_several_gpus_is_dataparallel(four_visible_gpus):
    """No device_map: n_gpu = device count, nn.DataParallel, batch x4, steps divided by 4."""
    assert transformers.__version__ == "5.25.0"
    args = four_visible_gpus
    assert (args.n_gpu, args.parallel_mode, args.train_batch_size) == (4, ParallelMode.NOT_DISTRIBUTED, 8)
    trainer = Trainer(model=Tiny(), args=args, train_dataset=dataset())
    assert trainer.is_model_parallel is False and args.n_gpu == 4
    trainer.train()
    assert isinstance(trainer.model_wrapped, torch.nn.DataParallel)
    assert (trainer.state.train_batch_size, trainer.state.global_step) == (8, 4)  # 32 / (2 x 4)


def test_device_map_over_gpus_is_model_parallel_without_data_parallel(four_visible_gpus):
    """hf_device_map on 2 GPUs: Trainer() sets is_model_parallel and forces args._n_gpu = 1, so the
    same args turn NOT_PARALLEL, no DataParallel, batch = per-device, steps not divided."""
    args = four_visible_gpus
    model = Tiny()
    model.hf_device_map = {"lin.weight": 0, "lin.bias": 1}
    assert args.parallel_mode == ParallelMode.NOT_DISTRIBUTED  # before Trainer(...)
    trainer = Trainer(model=model, args=args, train_dataset=dataset())
    assert trainer.is_model_parallel is True and trainer.place_model_on_device is False
    assert (args.n_gpu, args.parallel_mode, args.train_batch_size) == (1, ParallelMode.NOT_PARALLEL, 2)
    trainer.train()
    assert trainer.model_wrapped is model  # no wrapper
    assert (trainer.state.train_batch_size, trainer.state.global_step) == (2, 16)  # 32 / 2


def test_device_map_on_cpu_or_disk_only_is_not_model_parallel(four_visible_gpus):
    """Only "cpu"/"disk" entries do not count: no model parallelism, n_gpu stays 4 (DataParallel)."""
    model = Tiny()
    model.hf_device_map = {"lin": "cpu"}
    trainer = Trainer(model=model, args=four_visible_gpus, train_dataset=dataset())
    assert trainer.is_model_parallel is False and four_visible_gpus.n_gpu == 4


def probe_run(tmp_path_factory):
    """This module's probe run (field_coverage/conftest.py may start it early, beside the others)."""
    scratch = tmp_path_factory.mktemp("notebook")
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    for var in ("ACCELERATE_USE_CPU", "LOCAL_RANK", "RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(var, None)
    proc = subprocess.run([sys.executable, str(HERE / "_trainer_notebook_probe.py"), str(scratch), str(free_port())],
                          env=env, cwd=scratch, capture_output=True, text=True, timeout=300)
    return result(proc)


@pytest.fixture(scope="module")
def notebook(tmp_path_factory):
    return shared(probe_run, tmp_path_factory)


def test_trainer_in_the_kernel_is_one_process(notebook):
    (rec,) = notebook["in_kernel"]
    assert rec["pid"] == notebook["kernel_pid"]
    assert (rec["world_size"], rec["parallel_mode"], rec["steps"], rec["model_wrapped"]) == (1, "NOT_PARALLEL", 16, "Tiny")


def test_notebook_launcher_starts_one_process_per_device(notebook):
    ranks = notebook["launched"]
    assert [r["rank"] for r in ranks] == [0, 1]
    assert notebook["kernel_pid"] not in {r["pid"] for r in ranks} and len({r["pid"] for r in ranks}) == 2
    for r in ranks:
        assert (r["world_size"], r["parallel_mode"], r["model_wrapped"]) == (2, "DISTRIBUTED", "DistributedDataParallel")
        assert r["steps"] == 8  # 32 / (2 x 2): the steps divided by the process count


def test_notebook_launcher_refuses_after_an_accelerator_in_the_kernel(notebook):
    assert notebook["refused"].startswith("To launch a multi-device training from your notebook, the `Accelerator` "
                                          "should only be initialized inside your training function.")

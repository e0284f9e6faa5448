"""Generator for sub-skills/configuration-and-cli/references/launcher-choice.md (accelerate 1.15.0, torch 2.13.0).

Two tables, both from accelerate's own code run in this process:

- "launcher-choice": accelerate's `launch_command_parser` + `launch_command` (so `_validate_launch_command`
  decides) for every config state x flag set; the launcher functions (simple, multi_gpu, deepspeed, tpu,
  sagemaker) are replaced by recorders, so nothing starts. The default config file is a temporary file
  patched in where accelerate looks (`default_config_file` in commands/launch.py and config_args.py). The
  host is fixed: CUDA reported available with 1 GPU (2 in one column), no other accelerator.
- "worker-backend": `PartialState(cpu, **InitProcessGroupKwargs(backend=...).to_kwargs())` (what
  Accelerator passes) in the worker's situation (LOCAL_RANK set by torchrun or not, CUDA reported or
  not); torch.distributed.init_process_group is the real one (world size 1, this CPU build has no
  NCCL, like every Windows build), stopped right after it returns or raises.

python tests/launch/_launcher_choice.py [--write]   prints the blocks (--write: puts them in the page).
"""
from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import warnings
from pathlib import Path
from unittest import mock

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import _ports  # noqa: E402  (tests/ is on sys.path)
import _generated_blocks as gb  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PAGE_PATH = ROOT / "sub-skills" / "configuration-and-cli" / "references" / "launcher-choice.md"
PAGE = {"launcher-choice": PAGE_PATH, "worker-backend": PAGE_PATH}

LOCAL = {"compute_environment": "LOCAL_MACHINE", "machine_rank": 0, "num_machines": 1, "mixed_precision": "no",
         "use_cpu": False, "gpu_ids": "all"}
# column title -> (where the file is, its distributed_type and num_processes or None for no file, GPUs)
COLUMNS = {
    "no file, 1 GPU": (None, None, 1),
    "no file, 2 GPUs": (None, None, 2),
    "default file `NO`": ("default", {"distributed_type": "NO", "num_processes": 1}, 1),
    "default file `MULTI_GPU`, 2 processes": ("default", {"distributed_type": "MULTI_GPU", "num_processes": 2}, 1),
    "default file `MULTI_CPU`, 2 processes": ("default", {"distributed_type": "MULTI_CPU", "num_processes": 2}, 1),
    "default file `DEEPSPEED`, 2 processes": ("default", {"distributed_type": "DEEPSPEED", "num_processes": 2,
                                                          "deepspeed_config": {"zero_stage": 2}}, 1),
    "default file `FSDP`, 2 processes": ("default", {"distributed_type": "FSDP", "num_processes": 2,
                                                     "fsdp_config": {"fsdp_version": 2}}, 1),
    "`--config_file` `MULTI_GPU`, 2 processes": ("explicit", {"distributed_type": "MULTI_GPU", "num_processes": 2},
                                                 1),
}
FLAGS = ["", "--num_processes 1", "--num_processes 2", "--multi_gpu", "--multi_gpu --num_processes 1",
         "--gpu_ids 0", "--cpu", "--use_deepspeed", "--use_fsdp"]
LAUNCHERS = {"simple_launcher": "python", "multi_gpu_launcher": "torchrun", "deepspeed_launcher": "deepspeed",
             "tpu_launcher": "xla", "tpu_pod_launcher": "xla pod", "sagemaker_launcher": "sagemaker"}


Notes = gb.Notes


def launch_case(column: str, flags: str, tmp: Path) -> tuple:
    """(launcher name, processes it starts) or ("error", text) for one command."""
    import accelerate.commands.config.config_args as ca
    import accelerate.commands.launch as cl
    import torch
    where, cfg, gpus = COLUMNS[column]
    default = tmp / "default_config.yaml"
    explicit = tmp / "cfg.yaml"
    for f in (default, explicit):
        if f.exists():
            f.unlink()
    argv = flags.split()
    if cfg is not None:
        (default if where == "default" else explicit).write_text(yaml.safe_dump({**LOCAL, **cfg}), encoding="utf-8")
        if where == "explicit":
            argv = ["--config_file", str(explicit)] + argv
    seen: list = []

    def recorder(name):
        def rec(*a):
            args = a[-1]
            seen.append((name, args))
        return rec

    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACCELERATE_", "FSDP_", "PET_"))}
    with contextlib.ExitStack() as st:
        st.enter_context(mock.patch.dict(os.environ, env, clear=True))
        for name in LAUNCHERS:
            st.enter_context(mock.patch.object(cl, name, recorder(name)))
        st.enter_context(mock.patch.object(cl, "default_config_file", str(default)))
        st.enter_context(mock.patch.object(ca, "default_config_file", str(default)))
        st.enter_context(mock.patch.object(torch.cuda, "is_available", lambda: True))
        st.enter_context(mock.patch.object(torch.cuda, "device_count", lambda: gpus))
        try:
            args = cl.launch_command_parser().parse_args(argv + ["train.py"])
            cl.launch_command(args)
        except Exception as exc:  # noqa: BLE001 - a refusal is a cell too
            return ("error", f"{type(exc).__name__}: {str(exc).strip().splitlines()[0]}")
    name, args = seen[-1]
    if name == "simple_launcher":
        return (name, 1)
    return (name, args.num_processes // max(int(args.num_machines or 1), 1))


def render_launchers(data: dict) -> str:
    notes = Notes()
    cols = list(COLUMNS)
    out = ("`python` = `simple_launcher` (one plain process), `torchrun` = `multi_gpu_launcher`, `deepspeed` = "
           "`deepspeed_launcher` (torchrun on one machine); ×N = processes started.\n\n")
    out += "| `accelerate launch` flags | " + " | ".join(cols) + " |\n| --- |" + " --- |" * len(cols) + "\n"
    for flags in FLAGS:
        cells = []
        for c in cols:
            kind, val = data[f"{c}|{flags}"]
            if kind == "error":
                cells.append(f"**{val.split(':')[0]}** {notes.ref(val)}")
            else:
                cells.append(f"{LAUNCHERS[kind]} ×{val}")
        out += f"| {('`' + flags + '`') if flags else 'none'} | " + " | ".join(cells) + " |\n"
    return out + "\n" + notes.block()


# (started by, CUDA reported, cpu, backend: "x" through InitProcessGroupKwargs(backend="x"), "=x" as
# PartialState(backend="x") directly)
WORKER_CASES = [
    ("simple launcher (no `LOCAL_RANK`)", True, False, None),
    ("torchrun (`LOCAL_RANK` set)", True, False, None),
    ("torchrun (`LOCAL_RANK` set)", True, False, "gloo"),
    ("torchrun (`LOCAL_RANK` set)", True, True, None),
    ("torchrun (`LOCAL_RANK` set)", False, False, None),
    ("torchrun (`LOCAL_RANK` set)", False, True, None),
    ("torchrun (`LOCAL_RANK` set)", False, True, "nccl"),
    ("torchrun (`LOCAL_RANK` set)", False, True, "=nccl"),
    ("simple launcher (no `LOCAL_RANK`)", False, True, None),
]


class _Stop(Exception):
    pass


def _port() -> int:
    """A free port, chosen and reserved by tests/_ports.py (outside the ephemeral range)."""
    return _ports.free_port()


def worker_case(started: str, cuda: bool, cpu: bool, backend) -> dict:
    import torch
    import torch.distributed as dist
    from accelerate.state import PartialState
    from accelerate.utils import InitProcessGroupKwargs
    real_init = dist.init_process_group
    got: dict = {}

    def init(*a, **k):
        got["init"] = k.get("backend", a[0] if a else None)
        try:
            real_init(*a, **k)
            got["outcome"] = "initialised"
        except Exception as exc:  # noqa: BLE001 - the error is the result
            got["outcome"] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0]}"
        if cuda:     # stop before CUDA device setup, which this CPU host cannot do
            raise _Stop

    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ACCELERATE_", "FSDP_", "PET_")) and k not in
           ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
    env["OMP_NUM_THREADS"] = "1"   # else MULTI_CPU calls torch.set_num_threads in this (test) process
    if started.startswith("torchrun"):
        env.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", LOCAL_WORLD_SIZE="1", MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(_port()))
    real_prepare = PartialState._prepare_backend

    def prepare(self, *a, **k):
        got["chosen"] = real_prepare(self, *a, **k)
        return got["chosen"]

    PartialState._reset_state()
    with contextlib.ExitStack() as st:
        st.enter_context(mock.patch.dict(os.environ, env, clear=True))
        st.enter_context(mock.patch.object(torch.cuda, "is_available", lambda: cuda))
        st.enter_context(mock.patch.object(torch.cuda, "device_count", lambda: int(cuda)))
        st.enter_context(mock.patch.object(dist, "init_process_group", init))
        st.enter_context(mock.patch.object(dist, "is_mpi_available", lambda: False))  # as in the pinned wheels
        st.enter_context(mock.patch.object(PartialState, "_prepare_backend", prepare))
        if backend and backend.startswith("="):
            kw = {"backend": backend[1:]}
        else:
            kw = InitProcessGroupKwargs(backend=backend).to_kwargs() if backend else {}
        got["kwargs"] = kw
        st.enter_context(warnings.catch_warnings())
        warnings.simplefilter("ignore")
        try:
            state = PartialState(cpu=cpu, **kw)
            got["final"] = (str(state.distributed_type).split(".")[-1], state.num_processes)
        except _Stop:
            pass
        except Exception as exc:  # noqa: BLE001
            got["error"] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0]}"
        finally:
            if dist.is_initialized():
                dist.destroy_process_group()
            PartialState._reset_state()
    return got


def render_workers(data: list) -> str:
    notes = Notes()
    out = ("| Worker started by | CUDA | `cpu` | backend asked → backend reaching `PartialState` | "
           "`_prepare_backend` gives | `init_process_group(backend=…)` | Result on a build without NCCL |\n"
           "| --- | --- | --- | --- | --- | --- | --- |\n")
    for (started, cuda, cpu, backend), got in zip(WORKER_CASES, data):
        b, t = got.get("chosen", (None, None))
        chosen = f"`{b}`, `{str(t).split('.')[-1]}`"
        init = f"`{got['init']}`" if "init" in got else "not called"
        if "error" in got:
            res = f"**{got['error'].split(':')[0]}** {notes.ref(got['error'])}"
        elif "outcome" in got and got["outcome"] != "initialised":
            res = f"**{got['outcome'].split(':')[0]}** {notes.ref(got['outcome'])}"
        elif "outcome" in got:
            res = "process group up"
        else:
            res = "no process group"
        if "final" in got:
            res += f"; state `{got['final'][0]}`"
        reach = f"`{got['kwargs']['backend']}`" if "backend" in got["kwargs"] else "none"
        if not backend:
            asked = "— → none"
        elif backend.startswith("="):
            asked = f"`PartialState(backend=\"{backend[1:]}\")` → {reach}"
        else:
            asked = f"`InitProcessGroupKwargs(backend=\"{backend}\")` → {reach}"
        out += f"| {started} | {'yes' if cuda else 'no'} | {cpu} | {asked} | {chosen} | {init} | {res} |\n"
    return out + "\n" + notes.block()


def collect() -> dict:
    with tempfile.TemporaryDirectory() as d:
        launch = {f"{c}|{f}": launch_case(c, f, Path(d)) for c in COLUMNS for f in FLAGS}
    workers = [worker_case(*case) for case in WORKER_CASES]
    return {"launch": launch, "workers": workers}


def render(data: dict) -> dict:
    return {"launcher-choice": render_launchers(data["launch"]), "worker-backend": render_workers(data["workers"])}


if __name__ == "__main__":
    import logging
    logging.disable(logging.WARNING)
    rendered = render(collect())
    if sys.argv[1:] == ["--write"]:
        gb.write(PAGE, rendered)
    else:
        for name, text in rendered.items():
            print(f"--- {name}\n{text}")

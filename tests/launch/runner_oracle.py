"""Oracle for torchrun and deepspeed command lines, in ONE process for many commands.

Usage:  python runner_oracle.py < request.json > answer.json
Request: {"commands": [{"id", "launcher": "torchrun" | "deepspeed", "argv": [...], "cwd": dir}, ...]}
Answer:  {"versions": {...}, "results": [{"id", "verdict", "stage", "message", "values"}]}

torchrun (torch 2.13.0): torch/distributed/run.py::get_args_parser().parse_args, then run(args) itself
with elastic_launch replaced by a recorder (so --standalone, the single-node c10d switch and
config_from_args run for real; no agent, rendezvous or worker starts), then WorkerSpec's own check.
deepspeed (0.19.8): deepspeed/launcher/runner.py::main itself, with the accelerator reporting 8
devices, the ssh reachability probe answering yes, and encode_world_info replaced by a recorder that stops the run (everything before it
- hostfile, VISIBLE_DEVICES, include/exclude, num_nodes/num_gpus, resource filters, --no_ssh
rank - runs for real); the multi-node launcher-name dispatch that follows is replayed by name.
"""
from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import sys
import warnings

warnings.simplefilter("ignore")
logging.disable(logging.CRITICAL)


class _Recorded(Exception):
    pass


def run_torchrun(item):
    import torch.distributed.run as tr
    from torch.distributed.elastic.agent.server.api import WorkerSpec
    res = {"id": item["id"], "verdict": "accept", "stage": None, "message": None, "values": {}}
    try:
        args = tr.get_args_parser().parse_args(item["argv"])
    except SystemExit as e:
        res.update(verdict="reject", stage="parse", message=f"exit {e.code}")
        return res
    seen = {}

    def fake_launch(config, entrypoint):
        seen["config"] = config
        return lambda *a: None

    old = tr.elastic_launch
    tr.elastic_launch = fake_launch
    try:
        tr.run(args)
        cfg = seen["config"]
        WorkerSpec(role=cfg.role, local_world_size=cfg.nproc_per_node, rdzv_handler=None, entrypoint="x", args=())
    except AssertionError as e:
        res.update(verdict="reject", stage="run", message=f"AssertionError: {str(e)[:200]}")
        return res
    except Exception as e:  # noqa: BLE001
        res.update(verdict="reject", stage="run", message=f"{type(e).__name__}: {str(e)[:200]}")
        return res
    finally:
        tr.elastic_launch = old
    res["values"] = {"min_nodes": cfg.min_nodes, "max_nodes": cfg.max_nodes, "nproc_per_node": cfg.nproc_per_node,
                     "rdzv_backend": cfg.rdzv_backend, "rdzv_endpoint": cfg.rdzv_endpoint,
                     "node_rank": cfg.rdzv_configs.get("rank"), "master_port": args.master_port}
    return res


def run_deepspeed(item):
    from deepspeed.launcher import runner
    res = {"id": item["id"], "verdict": "accept", "stage": None, "message": None, "values": {}}
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            args = runner.parse_args(item["argv"])
    except SystemExit as e:
        res.update(verdict="reject", stage="parse", message=f"exit {e.code}")
        return res

    class Acc:
        def device_count(self):
            return 8

        def visible_devices_envs(self):
            return ["CUDA_VISIBLE_DEVICES"]

    seen = {}

    def record(active):
        seen["active"] = dict(active)
        raise _Recorded()

    old_acc, old_enc = runner.get_accelerator, runner.encode_world_info
    old_call, old_out = runner.subprocess.check_call, runner.subprocess.check_output
    runner.get_accelerator, runner.encode_world_info = (lambda: Acc()), record
    # ssh reachability of the hostfile's first host depends on the cluster, not the command
    runner.subprocess.check_call = lambda *a, **k: 0
    runner.subprocess.check_output = lambda *a, **k: b"10.0.0.1"
    old_cwd = os.getcwd()
    os.environ.pop("CUDA_VISIBLE_DEVICES", None)
    try:
        os.chdir(item.get("cwd") or old_cwd)
        runner.main(item["argv"])
        res.update(verdict="reject", stage="main", message="runner.main returned early")
    except _Recorded:
        active = seen["active"]
        multi = (args.force_multi or len(active) > 1) and not args.no_ssh
        if multi and args.launcher.lower() not in ("pdsh", "openmpi", "mpich", "impi", "mvapich", "slurm"):
            res.update(verdict="reject", stage="launcher", message=f"Unknown launcher {args.launcher}")
        res["values"] = {"hosts": len(active), "world_size": sum(len(v) for v in active.values())}
    except SystemExit as e:
        res.update(verdict="reject", stage="main", message=f"exit {e.code}")
    except Exception as e:  # noqa: BLE001
        res.update(verdict="reject", stage="main", message=f"{type(e).__name__}: {str(e)[:200]}")
    finally:
        os.chdir(old_cwd)
        runner.get_accelerator, runner.encode_world_info = old_acc, old_enc
        runner.subprocess.check_call, runner.subprocess.check_output = old_call, old_out
    return res


def main():
    req = json.load(sys.stdin)
    for k in list(os.environ):
        if k.startswith("PET_"):
            del os.environ[k]
    real = sys.stdout
    sys.stdout = sys.stderr
    try:
        import deepspeed
        import torch
        out = []
        for item in req["commands"]:
            out.append(run_torchrun(item) if item["launcher"] == "torchrun" else run_deepspeed(item))
    finally:
        sys.stdout = real
    real.write(json.dumps({"versions": {"torch": torch.__version__, "deepspeed": deepspeed.__version__},
                           "results": out}, default=str))


if __name__ == "__main__":
    main()

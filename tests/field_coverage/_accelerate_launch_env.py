"""Generate the tables of sub-skills/configuration-and-cli/references/launch-child-environment.md by
running accelerate 1.15.0's own launch handling in this process: launch_command_parser ->
launch_command (_validate_launch_command, then prepare_simple_launcher_cmd_env / prepare_multi_gpu_env /
prepare_deepspeed_cmd_env / prepare_tpu). Nothing is started: subprocess.Popen and
torch.distributed.run.run are replaced by recorders that keep the argv and the environment the child
would get. Machine facts are fixed so the output is the same anywhere: no GPU, no RTX 40xx, ports free,
8 physical cores, FP8 and bf16 reported available, no default_config.yaml, a clean environment
(PATH and HOME only).

python tests/field_coverage/_accelerate_launch_env.py [--write]   prints the generated Markdown (--write: puts
it between the references' <!-- generated --> markers)."""
from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

import yaml

SCRIPT = "train.py"
BASE_ENV = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent-home"}

DS_INLINE = {"zero_stage": 2, "gradient_accumulation_steps": 4, "offload_optimizer_device": "none",
             "offload_param_device": "none", "zero3_init_flag": False}
FSDP1 = {"fsdp_version": 1, "fsdp_sharding_strategy": "FULL_SHARD", "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
         "fsdp_transformer_layer_cls_to_wrap": "LlamaDecoderLayer", "fsdp_backward_prefetch": "BACKWARD_PRE",
         "fsdp_state_dict_type": "SHARDED_STATE_DICT", "fsdp_offload_params": False,
         "fsdp_sync_module_states": True, "fsdp_cpu_ram_efficient_loading": True, "fsdp_use_orig_params": True}
FSDP2 = {"fsdp_version": 2, "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
         "fsdp_transformer_layer_cls_to_wrap": "LlamaDecoderLayer", "fsdp_state_dict_type": "SHARDED_STATE_DICT",
         "fsdp_reshard_after_forward": True, "fsdp_offload_params": False, "fsdp_cpu_ram_efficient_loading": True,
         "fsdp_activation_checkpointing": True}


def _cfg(distributed_type, **kw):
    base = {"compute_environment": "LOCAL_MACHINE", "distributed_type": distributed_type, "mixed_precision": "bf16",
            "num_machines": 1, "num_processes": 4, "machine_rank": 0, "gpu_ids": "all", "use_cpu": False}
    base.update(kw)
    return base


# (label, argv after `accelerate launch`, config file dict or None). `cfg.yaml` stands for the file.
CASES = [
    ("bare, no config file, CPU-only host", [SCRIPT], None),
    ("single process CPU", ["--cpu", SCRIPT], None),
    ("CPU, 4 processes asked", ["--cpu", "--num_processes", "4", SCRIPT], None),
    ("CPU threads and debug", ["--cpu", "--num_cpu_threads_per_process", "6", "--debug", SCRIPT], None),
    ("CPU multi-node, Open MPI mpirun", ["--cpu", "--num_processes", "8", "--num_machines", "2",
                                   "--mpirun_hostfile", "/job/hostfile", "--main_process_ip", "10.0.0.1",
                                   "--main_process_port", "29500", SCRIPT], None, "openmpi"),
    ("CPU multi-node, Intel MPI / MVAPICH mpirun, from file", ["--config_file", "cfg.yaml", SCRIPT],
     _cfg("MULTI_CPU", use_cpu=True, mixed_precision="no", num_machines=2, num_processes=8,
          main_process_ip="10.0.0.1", main_process_port=29500,
          mpirun_config={"mpirun_hostfile": "/job/hostfile"}), "impi"),
    ("CPU, 4 processes, shell has MASTER_PORT=12345 OMP_NUM_THREADS=3", ["--cpu", "--num_processes", "4", SCRIPT],
     None, None, {"MASTER_PORT": "12345", "OMP_NUM_THREADS": "3"}),
    ("multi-GPU, shell has MASTER_ADDR=10.9.9.9 MASTER_PORT=12345", ["--multi_gpu", "--num_processes", "2", SCRIPT],
     None, None, {"MASTER_ADDR": "10.9.9.9", "MASTER_PORT": "12345"}),
    ("multi-GPU, 1 node", ["--multi_gpu", "--num_processes", "4", SCRIPT], None),
    ("multi-GPU + gpu_ids, bf16, debug, threads", ["--multi_gpu", "--num_processes", "2", "--gpu_ids", "0,1",
                                                   "--mixed_precision", "bf16", "--debug",
                                                   "--num_cpu_threads_per_process", "4", SCRIPT], None),
    ("multi-node rank 0, static", ["--multi_gpu", "--num_processes", "16", "--num_machines", "2",
                                   "--machine_rank", "0", "--main_process_ip", "10.0.0.1",
                                   "--main_process_port", "29500", SCRIPT], None),
    ("multi-node rank 1, static", ["--multi_gpu", "--num_processes", "16", "--num_machines", "2",
                                   "--machine_rank", "1", "--main_process_ip", "10.0.0.1",
                                   "--main_process_port", "29500", SCRIPT], None),
    ("multi-node rank 1, c10d", ["--multi_gpu", "--num_processes", "16", "--num_machines", "2",
                                 "--machine_rank", "1", "--main_process_ip", "10.0.0.1",
                                 "--main_process_port", "29500", "--rdzv_backend", "c10d", SCRIPT], None),
    ("multi-node rank 1, --same_network", ["--multi_gpu", "--num_processes", "16", "--num_machines", "2",
                                           "--machine_rank", "1", "--main_process_ip", "10.0.0.1",
                                           "--main_process_port", "29500", "--same_network", SCRIPT], None),
    ("multi-node from a config file, rank 1", ["--config_file", "cfg.yaml", SCRIPT],
     _cfg("MULTI_GPU", num_machines=2, num_processes=16, machine_rank=1, main_process_ip="10.0.0.1",
          main_process_port=29500, rdzv_backend="c10d", same_network=True)),
    ("mixed precision fp16 from file", ["--config_file", "cfg.yaml", SCRIPT], _cfg("MULTI_GPU", mixed_precision="fp16")),
    ("dynamo", ["--multi_gpu", "--num_processes", "2", "--dynamo_backend", "inductor", "--dynamo_mode",
                "max-autotune", "--dynamo_use_dynamic", "--dynamo_use_fullgraph", SCRIPT], None),
    ("FP8 (TE) from file", ["--config_file", "cfg.yaml", SCRIPT],
     _cfg("MULTI_GPU", mixed_precision="fp8", fp8_config={"backend": "TE", "fp8_format": "HYBRID",
                                                          "amax_history_len": 16, "amax_compute_algo": "max",
                                                          "margin": 0, "interval": 1,
                                                          "override_linear_precision": [False, False, False],
                                                          "use_autocast_during_eval": False})),
    ("FSDP v1 from file", ["--config_file", "cfg.yaml", SCRIPT], _cfg("FSDP", fsdp_config=FSDP1)),
    ("FSDP v2 from file", ["--config_file", "cfg.yaml", SCRIPT], _cfg("FSDP", fsdp_config=FSDP2)),
    ("FSDP v2 + parallelism_config", ["--config_file", "cfg.yaml", SCRIPT],
     _cfg("FSDP", fsdp_config=FSDP2, parallelism_config={"parallelism_config_dp_shard_size": 2,
                                                         "parallelism_config_tp_size": 2})),
    ("FSDP v1 flags + --use_parallelism_config (accepted)", ["--use_fsdp", "--fsdp_version", "1", "--num_processes",
                                                             "2", "--use_parallelism_config", SCRIPT], None),
    ("DeepSpeed inline keys, 1 node", ["--config_file", "cfg.yaml", SCRIPT],
     _cfg("DEEPSPEED", deepspeed_config=DS_INLINE)),
    ("DeepSpeed deepspeed_config_file, 1 node", ["--config_file", "cfg.yaml", SCRIPT],
     _cfg("DEEPSPEED", mixed_precision="no", deepspeed_config={"deepspeed_config_file": "ds.json",
                                                               "zero3_init_flag": True})),
    ("DeepSpeed flags only, 1 node", ["--use_deepspeed", "--num_processes", "2", "--zero_stage", "3",
                                      "--gradient_accumulation_steps", "2", SCRIPT], None),
    ("DeepSpeed + --num_cpu_threads_per_process 4", ["--use_deepspeed", "--num_processes", "2",
                                                     "--num_cpu_threads_per_process", "4", SCRIPT], None),
    ("DeepSpeed 2 nodes, pdsh (default)", ["--config_file", "cfg.yaml", SCRIPT],
     _cfg("DEEPSPEED", num_machines=2, num_processes=16, main_process_ip="10.0.0.1", main_process_port=29500,
          deepspeed_config={**DS_INLINE, "deepspeed_hostfile": "/job/hostfile"})),
    ("DeepSpeed 2 nodes, nossh, rank 1", ["--config_file", "cfg.yaml", SCRIPT],
     _cfg("DEEPSPEED", num_machines=2, num_processes=16, machine_rank=1, main_process_ip="10.0.0.1",
          main_process_port=29500, deepspeed_config={**DS_INLINE, "deepspeed_hostfile": "/job/hostfile",
                                                     "deepspeed_multinode_launcher": "nossh"})),
    ("DeepSpeed 2 nodes, standard (torchrun), rank 1", ["--config_file", "cfg.yaml", SCRIPT],
     _cfg("DEEPSPEED", num_machines=2, num_processes=16, machine_rank=1, main_process_ip="10.0.0.1",
          main_process_port=29500, deepspeed_config={**DS_INLINE, "deepspeed_multinode_launcher": "standard"})),
    ("Megatron-LM from file", ["--config_file", "cfg.yaml", SCRIPT],
     _cfg("MEGATRON_LM", megatron_lm_config={"megatron_lm_tp_degree": 2, "megatron_lm_pp_degree": 2,
                                             "megatron_lm_num_micro_batches": 4,
                                             "megatron_lm_sequence_parallelism": True,
                                             "megatron_lm_gradient_clipping": 1.0,
                                             "megatron_lm_use_distributed_optimizer": True})),
    ("refused: SageMaker file (every one, 1.15.0)", ["--config_file", "cfg.yaml", SCRIPT],
     {"compute_environment": "AMAZON_SAGEMAKER", "distributed_type": "DATA_PARALLEL", "mixed_precision": "fp16",
      "use_cpu": False, "debug": True, "ec2_instance_type": "ml.p4d.24xlarge", "iam_role_name": "role",
      "profile": "default", "region": "us-east-1", "num_machines": 2}),
    ("refused: --multi_gpu with 1 process", ["--multi_gpu", "--num_processes", "1", SCRIPT], None),
    ("refused: two backends", ["--cpu", "--use_deepspeed", SCRIPT], None),
    ("refused: parallelism config without FSDP2", ["--multi_gpu", "--num_processes", "2",
                                                   "--use_parallelism_config", SCRIPT], None),
    ("refused: cpu_ram_efficient_loading without sync_module_states", ["--config_file", "cfg.yaml", SCRIPT],
     _cfg("FSDP", fsdp_config={**FSDP2, "fsdp_sync_module_states": False})),
    ("refused: 2 machines, no main_process_ip (simple launcher)",
     ["--cpu", "--num_processes", "8", "--num_machines", "2", SCRIPT], None),
    ("TPU (XLA), no torch_xla TPU present", ["--tpu", "--debug", "--mixed_precision", "bf16", SCRIPT], None),
]


def _ds_import_env():
    import re
    import deepspeed
    src = Path(deepspeed.__file__).read_text(encoding="utf-8")
    return re.findall(r'^os\.environ\.setdefault\("(\w+)", "([^"]*)"\)', src, re.M)


DS_IMPORT_ENV = _ds_import_env()


class _Popen:
    def __init__(self, cmd, env=None, **_):
        _RECORD.append(("popen", list(cmd), dict(env or {})))
        self.returncode = 0

    def wait(self):
        return 0


_RECORD: list = []


def _torchrun_argv(ns):
    import torch.distributed.run as distrib_run
    default = distrib_run.get_args_parser().parse_args(["x"])
    out = []
    for key, value in sorted(vars(ns).items()):
        dflt = getattr(default, key, object())
        if key in ("training_script", "training_script_args") or dflt == value or (value is None and dflt is False):
            continue
        out.append(f"--{key}" if value is True else f"--{key}={value}")
    return ["python", "-m", "torch.distributed.run", *out, ns.training_script, *ns.training_script_args]


def _fake_tpu(args):
    from accelerate.utils.launch import prepare_tpu
    _, env = prepare_tpu(args, {})
    _RECORD.append(("xmp", ["torch_xla xmp.spawn(main) in the launcher process"], dict(BASE_ENV, **env)))


def _fake_sagemaker(sagemaker_config, args):
    from accelerate.utils.launch import prepare_sagemager_args_inputs
    with contextlib.redirect_stdout(None):
        est, _ = prepare_sagemager_args_inputs(sagemaker_config, args)
    desc = (f"SageMaker HuggingFace estimator: entry_point={est['entry_point']} source_dir={est['source_dir']} "
            f"instance_count={est['instance_count']} instance_type={est['instance_type']} "
            f"distribution={est['distribution']} hyperparameters={est['hyperparameters']}")
    _RECORD.append(("sagemaker", [desc], dict(BASE_ENV, **est["environment"])))


def _fake_run(ns):
    _RECORD.append(("torchrun", _torchrun_argv(ns), dict(os.environ)))


@contextlib.contextmanager
def _machine(tmp: Path, mpi=None):
    import psutil
    import torch
    import accelerate.commands.launch as cl
    import accelerate.utils.launch as ul
    import torch.distributed.run as distrib_run
    old = os.getcwd()
    with contextlib.ExitStack() as st:
        st.enter_context(mock.patch.dict(os.environ, BASE_ENV, clear=True))
        if mpi:     # a stand-in mpirun on PATH that answers --version like the real one
            bindir = Path(st.enter_context(tempfile.TemporaryDirectory()))
            (bindir / "mpirun").write_text(f"#!/bin/sh\necho '{MPI_VERSION[mpi]}'\n")
            (bindir / "mpirun").chmod(0o755)
            os.environ["PATH"] = f"{bindir}:{BASE_ENV['PATH']}"
        real_ds = cl.deepspeed_launcher

        def ds_launcher(args):  # the launcher process imports deepspeed here, and deepspeed/__init__
            for name, value in DS_IMPORT_ENV:                          # sets these defaults in os.environ
                os.environ.setdefault(name, value)
            return real_ds(args)
        st.enter_context(mock.patch.object(cl, "deepspeed_launcher", ds_launcher))
        for target, value in [
            (cl, ("subprocess", SimpleNamespace(Popen=_Popen, CalledProcessError=subprocess.CalledProcessError))),
            (distrib_run, ("run", _fake_run)),
            (cl, ("check_cuda_p2p_ib_support", lambda: True)), (cl, ("tpu_launcher", _fake_tpu)),
            (cl, ("sagemaker_launcher", _fake_sagemaker)),
            (cl, ("default_config_file", str(tmp / "absent" / "default_config.yaml"))),
            (cl, ("is_bf16_available", lambda *a, **k: True)),
            (ul, ("is_port_in_use", lambda *a, **k: False)), (ul, ("is_fp8_available", lambda: True)),
            (psutil, ("cpu_count", lambda logical=True: 8)),
            (torch.cuda, ("device_count", lambda: 0)), (torch.cuda, ("is_available", lambda: False)),
        ]:
            st.enter_context(mock.patch.object(target, value[0], value[1]))
        os.chdir(tmp)
        try:
            yield cl
        finally:
            os.chdir(old)


MPI_VERSION = {"openmpi": "mpirun (Open MPI) 4.1.6", "impi": "Intel(R) MPI Library for Linux* OS, Version 2021.13"}


def run_case(argv, cfg, tmp: Path, mpi=None, shell=None):
    """Return (kind, argv, env added, .deepspeed_env names or None, error or None)."""
    _RECORD.clear()
    for f in tmp.iterdir():
        f.unlink()
    if cfg is not None:
        (tmp / "cfg.yaml").write_text(yaml.safe_dump(cfg), encoding="utf-8")
    shell = shell or {}
    with _machine(tmp, mpi) as cl:
        os.environ.update(shell)
        parser = cl.launch_command_parser()
        args = parser.parse_args(argv)
        try:
            cl.launch_command(args)
        except Exception as exc:  # noqa: BLE001 - a refusal is a row too
            return ("refused", [], {}, None, f"{type(exc).__name__}: {exc}", {})
    kind, cmd, env = _RECORD[-1]
    before = {**BASE_ENV, **shell}
    added = {k: v for k, v in env.items() if before.get(k) != v and k != "PATH"}
    added = {k: v.replace(str(tmp), "<cwd>") for k, v in added.items()}
    cmd = ["python" if c == sys.executable else c for c in cmd]
    dsenv = None
    if (tmp / ".deepspeed_env").exists():
        dsenv = sorted(line.split("=", 1)[0] for line in (tmp / ".deepspeed_env").read_text().splitlines() if line)
    kept = {k: v for k, v in shell.items() if env.get(k) == v}
    return (kind, cmd, added, dsenv, None, kept)


DYNAMO_DEFAULTS = {"ACCELERATE_DYNAMO_BACKEND": "NO", "ACCELERATE_DYNAMO_MODE": "default",
                   "ACCELERATE_DYNAMO_USE_DYNAMIC": "False", "ACCELERATE_DYNAMO_USE_FULLGRAPH": "False",
                   "ACCELERATE_DYNAMO_USE_REGIONAL_COMPILATION": "False"}
LEGEND = ("**D** in a cell = the five dynamo variables at their defaults: "
          + ", ".join(f"`{k}={v}`" for k, v in DYNAMO_DEFAULTS.items()) + ".")


def _cell_env(env):
    if all(env.get(k) == v for k, v in DYNAMO_DEFAULTS.items()):
        env = {k: v for k, v in env.items() if k not in DYNAMO_DEFAULTS}
        return "**D**<br>" + "<br>".join(f"`{k}={v}`" for k, v in sorted(env.items()))
    return "<br>".join(f"`{k}={v}`" for k, v in sorted(env.items()))


def matrix_md(tmp: Path) -> str:
    rows = [LEGEND, "", "| # | Case | `accelerate launch` arguments (+ file) | Process started (argv) | Variables added to the children's environment |",
            "| --- | --- | --- | --- | --- |"]
    for i, (label, argv, cfg, *rest) in enumerate(CASES, 1):
        kind, cmd, env, dsenv, err, kept = run_case(argv, cfg, tmp, *rest)
        args = f"`{' '.join(argv)}`"
        if cfg is not None:
            flat = []
            for k, v in cfg.items():
                if k in ("compute_environment", "use_cpu", "gpu_ids"):
                    continue
                if isinstance(v, dict):
                    flat.append(f"{k}: {{{', '.join(f'{a}: {b}' for a, b in v.items())}}}")
                else:
                    flat.append(f"{k}: {v}")
            args += "<br>file: " + "; ".join(f"`{x}`" for x in flat)
        if err:
            proc, envc = "refused", err.replace("`", "'").strip()
        else:
            proc = f"`{' '.join(cmd)}`"
            envc = _cell_env(env)
            if kept:
                envc += ("<br>kept in torchrun's environment: " if kind == "torchrun" else "<br>kept from the shell: ") + ", ".join(f"`{k}={v}`" for k, v in sorted(kept.items()))
            if dsenv is not None:
                envc += "<br>**`.deepspeed_env` (cwd) gets**: " + ", ".join(f"`{n}`" for n in dsenv)
        rows.append(f"| {i} | {label} | {args} | {proc} | {envc} |")
    return "\n".join(rows)


# ---- keys of the file that never reach a child ---------------------------------------------------

TOP = {"num_processes": 16, "machine_rank": 1, "num_machines": 2, "gpu_ids": "all", "main_process_ip": "10.0.0.1",
       "main_process_port": 29500, "rdzv_backend": "c10d", "same_network": True, "main_training_function": "main",
       "enable_cpu_affinity": True, "downcast_bf16": "yes", "tpu_name": "t", "tpu_zone": "z",
       "tpu_use_cluster": True, "tpu_use_sudo": True, "commands": ["echo"], "tpu_env": ["A=1"],
       "mixed_precision": "bf16", "debug": True, "dynamo_config": {"dynamo_backend": "INDUCTOR"}}
PATHS = [
    ("MULTI_GPU (torchrun)", {"distributed_type": "MULTI_GPU"}),
    ("FSDP (torchrun)", {"distributed_type": "FSDP", "fsdp_config": FSDP2}),
    ("MEGATRON_LM (torchrun)", {"distributed_type": "MEGATRON_LM", "megatron_lm_config": {"megatron_lm_tp_degree": 2}}),
    ("DEEPSPEED standard (torchrun)", {"distributed_type": "DEEPSPEED",
                                       "deepspeed_config": {**DS_INLINE, "deepspeed_multinode_launcher": "standard"}}),
    ("DEEPSPEED pdsh (deepspeed runner)", {"distributed_type": "DEEPSPEED",
                                           "deepspeed_config": {**DS_INLINE, "deepspeed_hostfile": "/job/hostfile"}}),
    ("NO / MULTI_CPU (simple launcher)", {"distributed_type": "MULTI_CPU", "use_cpu": True}),
]


def dropped_md(tmp: Path) -> str:
    """For each path: the top-level keys of the file whose value is not the merged one (every value
    differs from the flag's default), and the merged keys no code of the launcher path reads."""
    import accelerate.commands.launch as cl
    reads: set = set()
    merged: dict = {}

    class Tracking(argparse.Namespace):
        def __getattribute__(self, name):
            reads.add(name)
            return object.__getattribute__(self, name)

    orig = cl._validate_launch_command
    cli_defaults = vars(cl.launch_command_parser().parse_args([SCRIPT]))

    def validate(args):
        args, defaults, mp = orig(args)
        merged.clear()
        merged.update(vars(args))
        args.__class__ = Tracking
        reads.clear()
        return args, defaults, mp

    rows = ["| Path (distributed_type) | Keys of the file dropped while merging | Keys merged but never read by this launcher path |",
            "| --- | --- | --- |"]
    for label, extra in PATHS:
        cfg = {"compute_environment": "LOCAL_MACHINE", **TOP, **extra}
        with mock.patch.object(cl, "_validate_launch_command", validate):
            kind, cmd, env, dsenv, err, _ = run_case(["--config_file", "cfg.yaml", SCRIPT], cfg, tmp)
        assert err is None, (label, err)
        if kind == "torchrun":               # _filter_args hands every torchrun-named attribute over
            import torch.distributed.run as distrib_run
            reads |= set(vars(distrib_run.get_args_parser().parse_args(["x"])))
        dropped = sorted(k for k in cfg if not isinstance(cfg[k], dict) and k in cli_defaults
                         and k not in ("mixed_precision", "debug") and merged.get(k) != cfg[k])
        unread = sorted(k for k in cfg if k not in dropped and not isinstance(cfg[k], dict)
                        and k not in ("compute_environment", "distributed_type", "use_cpu", "mixed_precision",
                                      "debug") and k not in reads)
        rows.append(f"| {label} | {', '.join(f'`{k}`' for k in dropped)} | {', '.join(f'`{k}`' for k in unread) or '—'} |")
    return "\n".join(rows)


def generate() -> dict:
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        return {"matrix": matrix_md(tmp), "dropped": dropped_md(tmp)}


DOC = Path(__file__).resolve().parents[2] / "sub-skills/configuration-and-cli/references/launch-child-environment.md"


def write_doc(out: dict) -> None:
    for name, key, path in (("launch matrix", "matrix", DOC.with_name("launch-child-matrix.md")),
                            ("dropped keys", "dropped", DOC)):
        text = path.read_text(encoding="utf-8")
        start, end = f"<!-- generated: {name} -->\n", "<!-- end generated -->"
        pre, rest = text.split(start, 1)
        text = pre + start + out[key].strip() + "\n" + end + rest.split(end, 1)[1]
        path.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    out = generate()
    if sys.argv[1:] == ["--write"]:
        write_doc(out)
    else:
        print(out["matrix"])
        print()
        print(out["dropped"])

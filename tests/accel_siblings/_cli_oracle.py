"""Ground truth from accelerate's own parsers and launch code, printed as JSON.

Run as `python _cli_oracle.py WORKDIR` (one subprocess per test session, so the
pytest process never imports accelerate). WORKDIR is a scratch directory: HF_HOME
is pointed into it *before* accelerate is imported, so the default config path is
sandboxed. stdin: JSON {"api": [dotted names], "calls": [[callable, [kwargs]]]}
to resolve; stdout: one JSON object.
"""
from __future__ import annotations

import argparse
import contextlib
import inspect
import io
import json
import os
import sys
from pathlib import Path

work = Path(sys.argv[1])
os.environ["HF_HOME"] = str(work / "hf")
for k in [k for k in os.environ if k.startswith("ACCELERATE_")]:
    del os.environ[k]
request = json.load(sys.stdin)

import accelerate  # noqa: E402
from accelerate.commands.accelerate_cli import (  # noqa: E402
    env_command_parser, estimate_command_parser, get_config_parser, launch_command_parser,
    merge_command_parser, test_command_parser, to_fsdp2_command_parser, tpu_command_parser,
)
from accelerate.commands.config import config_args  # noqa: E402
from accelerate.commands.launch import _validate_launch_command  # noqa: E402
from accelerate.commands.utils import CustomArgumentParser  # noqa: E402

out: dict = {"accelerate_version": accelerate.__version__}

# 1. Command tree, the way accelerate_cli.main() builds it.
root = CustomArgumentParser("accelerate", allow_abbrev=False)
sub = root.add_subparsers()
for register in (get_config_parser, estimate_command_parser, env_command_parser, launch_command_parser,
                 merge_command_parser, tpu_command_parser, test_command_parser, to_fsdp2_command_parser):
    register(subparsers=sub)


def walk(parser, path, commands, groups):
    opts, positionals = [], []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                walk(child, f"{path} {name}".strip(), commands, groups)
        elif action.option_strings:
            opts.extend(action.option_strings)
        else:
            positionals.append(action.dest)
    commands[path] = {"options": sorted(opts), "positionals": positionals}
    groups[path] = {
        g.title: [a.option_strings[0] for a in g._group_actions if a.option_strings]
        for g in parser._action_groups
    }


commands: dict = {}
groups: dict = {}
walk(root, "", commands, groups)
commands.pop("")
out["commands"] = commands
out["launch_groups"] = groups["launch"]


# 2. Precedence: CLI flag > config file > built-in default, via the launcher's own merge.
def merged(cli: list[str], yaml_text: str | None):
    argv = list(cli)
    if yaml_text is not None:
        cfg = work / f"cfg{abs(hash(yaml_text))}.yaml"
        cfg.write_text(yaml_text)
        argv = ["--config_file", str(cfg), *argv]
    args = launch_command_parser().parse_args([*argv, "train.py"])
    with contextlib.redirect_stderr(io.StringIO()):
        args, defaults, _ = _validate_launch_command(args)
    return args


base = "compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_GPU\nnum_processes: 4\nmixed_precision: fp16\n"
prec = {}
a = merged([], base)
prec["file_only"] = {"num_processes": a.num_processes, "mixed_precision": a.mixed_precision, "multi_gpu": a.multi_gpu}
a = merged(["--num_processes", "2", "--mixed_precision", "no"], base)
prec["cli_over_file"] = {"num_processes": a.num_processes, "mixed_precision": a.mixed_precision}
ignored_yaml = base + ("rdzv_backend: c10d\nsame_network: true\nenable_cpu_affinity: true\n"
                       "downcast_bf16: true\ntpu_use_sudo: true\nmain_process_port: 29777\n")
a = merged([], ignored_yaml)
prec["ignored_top_level"] = {k: getattr(a, k) for k in
                             ("rdzv_backend", "same_network", "enable_cpu_affinity", "downcast_bf16",
                              "tpu_use_sudo", "main_process_port")}
nested = base + "dynamo_config:\n  dynamo_backend: INDUCTOR\n"
prec["nested_file_only"] = merged([], nested).dynamo_backend
prec["nested_cli_over_file"] = merged(["--dynamo_backend", "no"], nested).dynamo_backend
# The default file is read only without --cpu (and only when --config_file is absent).
default_file = Path(config_args.default_config_file)
default_file.parent.mkdir(parents=True, exist_ok=True)
default_file.write_text(base)
prec["default_file_path"] = str(default_file)
prec["default_file_read"] = merged([], None).num_processes
a = merged(["--cpu"], None)
prec["default_file_with_cpu_flag"] = {"num_processes": a.num_processes, "mixed_precision": a.mixed_precision}
default_file.unlink()
out["precedence"] = prec

# How a config file is loaded (load_config_from_file).
from accelerate.commands.config.config_args import load_config_from_file  # noqa: E402


def load(text: str, name: str = "load.yaml"):
    path = work / name
    path.write_text(text)
    try:
        return load_config_from_file(str(path)), ""
    except Exception as exc:  # noqa: BLE001 - the message is the fact under test
        return None, f"{type(exc).__name__}: {exc}"


loading = {}
cfg, _ = load("distributed_type: 'NO'\n")
loading["minimal_no"] = {"compute_environment": str(cfg.compute_environment.value), "num_processes": cfg.num_processes}
loading["missing_distributed_type"] = load("num_processes: 2\n")[1]
loading["unknown_top_level_key"] = load("distributed_type: 'NO'\nnot_a_key: 1\n")[1]
cfg, err = load("distributed_type: 'NO'\nfsdp_config:\n  not_a_key: 1\n")
loading["unknown_nested_key_error"] = err
loading["json_in_yaml"] = load('{"distributed_type": "NO", "num_processes": 1}', "j.yaml")[1]
out["loading"] = loading

# Abbreviations and conflicting hardware flags.
try:
    with contextlib.redirect_stderr(io.StringIO()):
        launch_command_parser().parse_args(["--num_proc", "2", "train.py"])
    out["launch_abbrev_refused"] = False
except SystemExit:
    out["launch_abbrev_refused"] = True
try:
    merged(["--cpu", "--multi_gpu", "--num_processes", "2"], None)
    out["cpu_and_multi_gpu_error"] = ""
except ValueError as exc:
    out["cpu_and_multi_gpu_error"] = str(exc)

# 3. Where the default config lives, for several HF_HOME / XDG_CACHE_HOME settings.
import subprocess  # noqa: E402

probe = "from accelerate.commands.config.config_args import default_config_file as f; print(f)"
locations = {}
for label, extra in {"HF_HOME": {"HF_HOME": "/x/hf"},
                     "XDG_CACHE_HOME": {"XDG_CACHE_HOME": "/x/xdg"},
                     "neither": {"HOME": "/x/home"}}.items():
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HOME", "XDG_CACHE_HOME")}
    env.update(extra)
    locations[label] = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True,
                                      text=True, check=True).stdout.strip()
out["config_locations"] = locations

# 4. `accelerate config default` on this host (write_basic_config is what it calls).
from accelerate.commands.config.default import write_basic_config  # noqa: E402

basic = work / "basic" / "default_config.yaml"
with contextlib.redirect_stdout(io.StringIO()):
    write_basic_config(mixed_precision="no", save_location=str(basic))
out["basic_config_text"] = basic.read_text()

# 5. Environment the simple launcher exports (what `--cpu` gives the training process).
from accelerate.utils.launch import prepare_simple_launcher_cmd_env  # noqa: E402

args = merged(["--cpu", "--num_processes", "1", "--num_machines", "1", "--dynamo_backend", "no"], None)
cmd, env = prepare_simple_launcher_cmd_env(args)
out["simple_env_keys"] = sorted(k for k in env if k not in os.environ or env[k] != os.environ.get(k))

# 5b. Keys a config file accepts (top level) and the MPI multi-CPU launch: accelerate builds the
# mpirun command itself; _get_mpirun_args is replaced (no MPI here) by Open MPI's argument names.
out["cluster_config_fields"] = sorted(config_args.ClusterConfig.__dataclass_fields__)
out["num_cpu_threads_key_error"] = load("distributed_type: MULTI_CPU\nnum_processes: 8\n"
                                        "num_cpu_threads_per_process: 4\n")[1]
import psutil  # noqa: E402
import accelerate.utils.launch as _launch  # noqa: E402

_omp = os.environ.pop("OMP_NUM_THREADS", None)
_real_count, _real_mpi = psutil.cpu_count, _launch._get_mpirun_args
psutil.cpu_count = lambda logical=True: 32
_launch._get_mpirun_args = lambda: ("mpirun", "--hostfile", "-n", "--npernode", "--bind-to")
try:
    mpi_args = merged(["--cpu", "--mpirun_hostfile", "hosts", "--num_processes", "8", "--num_machines", "2",
                       "--main_process_ip", "10.0.0.1", "--main_process_port", "29500",
                       "--mixed_precision", "no", "--dynamo_backend", "no"], None)
    mpi_cmd, mpi_env = prepare_simple_launcher_cmd_env(mpi_args)
finally:
    psutil.cpu_count, _launch._get_mpirun_args = _real_count, _real_mpi
    if _omp is not None:
        os.environ["OMP_NUM_THREADS"] = _omp
out["mpirun"] = {
    "cmd_head": mpi_cmd[: mpi_cmd.index("train.py")],
    "env_added": sorted(k for k in mpi_env if k not in os.environ or mpi_env[k] != os.environ.get(k)),
    "omp": mpi_env.get("OMP_NUM_THREADS"),
    "master": [mpi_env.get("MASTER_ADDR"), mpi_env.get("MASTER_PORT")],
}


# 6. Dotted API names and keyword arguments named in the docs. `accelerator.x` is resolved on a
# real single-process instance, so instance attributes (step, trackers, …) count too.
from accelerate import Accelerator, PartialState  # noqa: E402

PartialState(cpu=True)  # single process, no process group; accelerate.logging needs a state
instance = Accelerator(cpu=True)
MISSING = object()


def resolve(name: str):
    parts = name.split(".")
    if parts[0] == "accelerator":
        obj, rest = instance, parts[1:]
    elif parts[0] != "accelerate":
        for mod in ("accelerate", "accelerate.utils", "accelerate.tracking"):
            m = __import__(mod, fromlist=["_"])
            if hasattr(m, parts[0]):
                obj = getattr(m, parts[0])
                break
        else:
            return MISSING
        rest = parts[1:]
    else:
        obj, rest, i = None, [], len(parts)
        while i > 0:
            try:
                obj = __import__(".".join(parts[:i]), fromlist=["_"])
                rest = parts[i:]
                break
            except ImportError:
                i -= 1
        if obj is None:
            return MISSING
    for p in rest:
        if inspect.isclass(obj) and p in getattr(obj, "__dataclass_fields__", {}):
            obj = obj.__dataclass_fields__[p]
        elif hasattr(obj, p):
            obj = getattr(obj, p)
        else:
            return MISSING
    return obj


out["api_missing"] = [n for n in request["api"] if resolve(n) is MISSING]
bad_kwargs = []
for name, kwargs in request["calls"]:
    obj = resolve(name)
    if obj is MISSING:
        bad_kwargs.append([name, "unresolved"])
        continue
    try:
        params = inspect.signature(obj).parameters
    except (TypeError, ValueError):
        bad_kwargs.append([name, "no signature"])
        continue
    has_var_kw = any(p.kind is p.VAR_KEYWORD for p in params.values())
    for kw in kwargs:
        if kw not in params and not has_var_kw:
            bad_kwargs.append([name, kw])
out["bad_kwargs"] = bad_kwargs

# 7. Trackers accelerate knows, and the package each needs.
from accelerate.tracking import LOGGER_TYPE_TO_CLASS  # noqa: E402
from accelerate.utils import LoggerType  # noqa: E402

out["trackers"] = {name: {"requires_logging_directory": cls.requires_logging_directory}
                   for name, cls in LOGGER_TYPE_TO_CLASS.items()}
out["logger_types"] = [m.value for m in LoggerType]
from accelerate.tracking import filter_trackers  # noqa: E402
from accelerate.utils import is_tensorboard_available  # noqa: E402

out["tensorboard_available"] = bool(is_tensorboard_available())
out["tensorboard_dropped"] = filter_trackers(["tensorboard"], logging_dir=str(work)) == []

# What the user sees at Accelerator(...) when requested tracker packages are missing.
import warnings  # noqa: E402

from accelerate.tracking import GeneralTracker  # noqa: E402


class _Null(GeneralTracker):
    name, requires_logging_directory = "null", False

    def __init__(self):
        super().__init__()

    @property
    def tracker(self):
        return None


def tracker_warnings(log_with):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        Accelerator(cpu=True, log_with=log_with, project_dir=str(work))
    return [str(w.message) for w in caught if "tracker" in str(w.message)]


out["tracker_warnings_only_missing"] = tracker_warnings("tensorboard")
out["tracker_warnings_one_left"] = tracker_warnings(["tensorboard", _Null()])
# 8. Automatic checkpoint naming when `iteration` is not advanced after a resume.
import shutil  # noqa: E402

import torch  # noqa: E402

from accelerate.utils import ProjectConfiguration  # noqa: E402


def stale_iteration(total_limit):
    root = work / f"ckpt_{total_limit}"
    shutil.rmtree(root, ignore_errors=True)
    acc = Accelerator(cpu=True, project_config=ProjectConfiguration(
        project_dir=str(root), automatic_checkpoint_naming=True, total_limit=total_limit))
    acc.prepare(torch.nn.Linear(2, 2))
    acc.save_state()
    acc.save_state()
    acc.project_configuration.iteration = 0  # what a fresh process starts with
    acc.load_state()
    steps = []
    for _ in range(2):
        try:
            acc.save_state()
            steps.append(["ok", sorted(os.listdir(root / "checkpoints"))])
        except ValueError as e:
            steps.append([str(e).split(" (")[0].split("/")[-1] + ": " + str(e).split(") ")[1][:14],
                          sorted(os.listdir(root / "checkpoints"))])
    return steps


out["stale_iteration"] = {"none": stale_iteration(None), "2": stale_iteration(2)}
# 9. Dataclass defaults the references tabulate.
import dataclasses  # noqa: E402

from accelerate import DataLoaderConfiguration  # noqa: E402
from accelerate.utils import GradientAccumulationPlugin  # noqa: E402

out["dataclass_defaults"] = {
    c.__name__: {f.name: (None if f.default is dataclasses.MISSING else f.default) for f in dataclasses.fields(c)}
    for c in (DataLoaderConfiguration, GradientAccumulationPlugin, ProjectConfiguration)}
out["project_logging_dir_follows_project_dir"] = ProjectConfiguration(project_dir="p").logging_dir == "p"
json.dump(out, sys.stdout)

"""Oracle: run accelerate 1.15.0's own code on Accelerate config files, on CPU, in ONE process.

Usage:  python accelerate_oracle.py < request.json > answer.json
Request: {"configs": [{"id": str, "text": str, "name": "config.yaml", "cwd": optional dir}, ...]}
         (or {"id", "path"} to read a file; "name" decides .json vs YAML reading as accelerate does)
Answer:  {"versions": {...}, "results": [{"id", "verdict": "accept" | "reject", "stage", "error",
          "message", "env_dependent", "loaded", "args", "env", "plugins", "notes"}, ...]}

Stages, in the order accelerate runs them:
  load      accelerate/commands/config/config_args.py::load_config_from_file
  launch    accelerate/commands/launch.py::launch_command_parser + _validate_launch_command
  env       accelerate/utils/launch.py::prepare_simple_launcher_cmd_env / prepare_multi_gpu_env /
            prepare_deepspeed_cmd_env / prepare_tpu / prepare_sagemager_args_inputs, chosen the way
            commands/launch.py::launch_command chooses the launcher
  plugins   built from that environment exactly as Accelerator() builds them:
            FullyShardedDataParallelPlugin(), DeepSpeedPlugin() (+ set_mixed_precision, as
            AcceleratorState does), MegatronLMPlugin(), ParallelismConfig(), TorchDynamoPlugin(),
            the FP8 backend enum + AORecipeKwargs / TERecipeKwargs / MSAMPRecipeKwargs
  accelerator  checks of Accelerator.__init__ / AcceleratorState.__init__ that need a live
            Accelerator, replayed on the built plugins (marked "emulated" in notes):
            ParallelismConfig._validate_accelerator (accelerate's own method, on a stand-in
            accelerator object), the cp>1 FSDP checks of AcceleratorState, MS-AMP+FSDP,
            torchao+FSDP+cpu_ram_efficient_loading, int(ACCELERATE_GRADIENT_ACCUMULATION_STEPS)
  prepare   Accelerator._prepare_deepspeed's "auto" fill on a copy of the DeepSpeed plugin's config
            (an "auto" it has no value for raises ValueError; see _prepare_fill)
  deepspeed DeepSpeed's ZeRO config model (deepspeed/runtime/zero/config.py::DeepSpeedZeroConfig)
            on the ZeRO block accelerate generates when no deepspeed_config_file is used
  torchrun  torch/distributed/run.py::config_from_args on the arguments accelerate hands to torchrun
            (parsing and LaunchConfig only; nothing is started), then the WorkerSpec that
            torch/distributed/launcher/api.py::launch_agent builds from it (its __post_init__ refuses
            nproc_per_node <= 0, e.g. num_processes 0 or fewer processes than machines)
  deepspeed-runner  for multi-node DeepSpeed: the `deepspeed ...` command accelerate builds, parsed
            by deepspeed/launcher/runner.py::parse_args, and runner.main's launcher-name dispatch
            (emulated by name; no runner is started)
  compile   torch.compile(lambda x: x, **TorchDynamoPlugin.to_kwargs()) for the inductor backend
            (lazy: validates the mode, compiles nothing)

Judgement calls (each found by the reviewer differential in tests/validator/test_reviewer_set.py):
  - launch-dir dependent: only a *text* deepspeed_config_file that names no existing file (a number
    or mapping there fails wherever the job is launched);
  - num_processes auto / gpu / cpu: torchrun counts the launching machine's devices, so the world
    size is unknown; ParallelismConfig's size check is assumed to pass (its other checks still run);
  - plugins.deepspeed.zero_model records the offload devices DeepSpeed's ZeRO model keeps (its
    non-strict models drop "auto" values, so offload_*_device: auto silently becomes none).

What the oracle patches so that the verdict depends on the file, not on this machine (each is
listed in the answer's "patches"): FP8 libraries reported available (TE/MS-AMP/torchao are not
installed here; torchao's Float8LinearConfig is a recording stub); no GPU needed for
sync_module_states (a CUDA device index 0 is reported, nothing touches a device); the port check
only type-checks the port (no socket); mpirun is reported as Open MPI; transformers' version
check for TP passes. What it cannot reach: the training script, process groups, device meshes,
torchrun/deepspeed runner argument parsing, SageMaker's estimator, TPU spawning, model-dependent
checks (layer classes to wrap, MoE classes), prepare()-time DeepSpeed checks.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import operator
import os
import shutil
import sys
import tempfile
import types
import warnings

warnings.simplefilter("ignore")
logging.disable(logging.CRITICAL)
os.environ.setdefault("ACCELERATE_LOG_LEVEL", "CRITICAL")

_KEEP_ENV = ("ACCELERATE_", "FSDP_", "PARALLELISM_CONFIG_", "MEGATRON_LM_", "MASTER_", "CUDA_VISIBLE_DEVICES",
             "OMP_NUM_THREADS", "KMP_", "XLA_", "PYTHONPATH")
_ARG_KEYS = ("num_processes", "num_machines", "machine_rank", "gpu_ids", "main_process_ip", "main_process_port",
             "rdzv_backend", "same_network", "enable_cpu_affinity", "downcast_bf16", "tpu_use_sudo", "use_cpu",
             "mixed_precision", "dynamo_backend", "multi_gpu", "use_deepspeed", "use_fsdp", "use_megatron_lm", "tpu",
             "tpu_use_cluster", "use_parallelism_config", "rdzv_endpoint", "master_addr", "master_port",
             "nproc_per_node", "nnodes", "node_rank", "debug", "mpirun_hostfile")


def _jsonable(v, depth=0):
    if depth > 20:
        return repr(v)
    if v is None or isinstance(v, (bool, int, float, str)):
        if isinstance(v, float) and (v != v or v in (float("inf"), float("-inf"))):
            return repr(v)
        return v
    if isinstance(v, dict):
        return {str(k): _jsonable(x, depth + 1) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x, depth + 1) for x in v]
    if hasattr(v, "name") and hasattr(v, "value") and type(v).__module__ != "builtins":  # enums
        return getattr(v, "name")
    if callable(v):
        return getattr(v, "__name__", repr(v))
    return repr(v)


class Stop(Exception):
    def __init__(self, stage, exc, env_dependent=False):
        self.stage, self.exc, self.env_dependent = stage, exc, env_dependent


@contextlib.contextmanager
def patched_env(new):
    old = dict(os.environ)
    os.environ.clear()
    os.environ.update({k: str(v) for k, v in new.items()})  # as utils/environment.py::patch_environment
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(old)


@contextlib.contextmanager
def patch(obj, name, value):
    old = getattr(obj, name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        setattr(obj, name, old)


def _install_patches(notes):
    import accelerate.utils.launch as ulaunch
    import accelerate.utils.dataclasses as udc

    ulaunch.is_fp8_available = lambda: True
    udc.is_transformer_engine_available = lambda: True
    udc.is_torchao_available = lambda: True
    # torchao's Float8LinearConfig: a recording stub (torchao is not installed here)
    ao = types.ModuleType("torchao")
    f8 = types.ModuleType("torchao.float8")

    class Float8LinearConfig:  # noqa: D401 - stub
        def __init__(self, **kw):
            self.kw = kw

    f8.Float8LinearConfig = Float8LinearConfig
    ao.float8 = f8
    sys.modules.setdefault("torchao", ao)
    sys.modules.setdefault("torchao.float8", f8)

    def port_check(port=None):
        if port is None:
            port = 29500
        operator.index(port)  # socket.connect_ex needs an int port; a string fails the same way
        if not 0 <= port <= 65535:
            raise OverflowError("connect_ex(): port must be 0-65535.")  # what socket raises
        return False

    ulaunch.is_port_in_use = port_check
    ulaunch._get_mpirun_args = lambda: ("mpirun", "--hostfile", "-n", "--npernode", "--bind-to")
    udc.is_cuda_available = lambda: True
    real_compare = udc.compare_versions

    def compare_versions(lib, op, ver):
        if lib == "transformers":
            return True
        return real_compare(lib, op, ver)

    udc.compare_versions = compare_versions
    notes.extend(["fp8 libraries reported available (torchao Float8LinearConfig stubbed)",
                  "port check type-checks only", "mpirun reported as Open MPI",
                  "CUDA reported available for sync_module_states (device index 0, never touched)",
                  "transformers>=4.52 version check for TP passes"])


def _loaded_view(cfg):
    out = {}
    for k, v in cfg.__dict__.items():
        out[k] = _jsonable(v)
    return out


def _env_diff(base, env):
    return {k: v for k, v in env.items() if k.startswith(_KEEP_ENV) and base.get(k) != v}


def run_one(item):
    import torch
    from accelerate.commands.config.config_args import load_config_from_file
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils import launch as ulaunch
    from accelerate.utils import dataclasses as udc
    from accelerate.utils.dataclasses import ComputeEnvironment, DistributedType
    from accelerate.utils.environment import parse_choice_from_env

    res = {"id": item.get("id"), "verdict": "accept", "stage": None, "error": None, "message": None,
           "env_dependent": False, "loaded": None, "raw": None, "args": {}, "env": {}, "plugins": {}, "notes": []}
    tmpdir = tempfile.mkdtemp(prefix="acc_oracle_")
    name = item.get("name") or "config.yaml"
    if "path" in item and item["path"]:
        path = os.path.abspath(item["path"])
    elif item.get("argv") is not None and item.get("text") is None:
        path = None  # a launch command without a config file (tests/launch)
    else:
        path = os.path.join(tmpdir, os.path.basename(name))
        with open(path, "w", encoding="utf-8") as f:
            f.write(item["text"])
    cwd = item.get("cwd") or tmpdir
    old_cwd = os.getcwd()
    base_env = dict(os.environ)
    try:
        os.chdir(cwd)
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            _run_stages(item, res, path, base_env, load_config_from_file, _validate_launch_command,
                        launch_command_parser, ulaunch, udc, ComputeEnvironment, DistributedType,
                        parse_choice_from_env, torch)
    except Stop as s:
        res["verdict"] = "reject"
        res["stage"] = s.stage
        res["error"] = type(s.exc).__name__
        res["message"] = str(s.exc).strip().splitlines()[0][:400] if str(s.exc).strip() else type(s.exc).__name__
        res["env_dependent"] = s.env_dependent
    finally:
        os.chdir(old_cwd)
        os.environ.clear()
        os.environ.update(base_env)
        shutil.rmtree(tmpdir, ignore_errors=True)  # one per item: left behind they piled up in /tmp
    return res


def _run_stages(item, res, path, base_env, load_config_from_file, _validate_launch_command,
                launch_command_parser, ulaunch, udc, ComputeEnvironment, DistributedType,
                parse_choice_from_env, torch):
    # ---- load
    cfg = None
    if path is not None:
        try:
            import yaml
            with open(path, encoding="utf-8") as f:
                res["raw"] = _jsonable(json.load(f) if path.endswith(".json") else yaml.safe_load(f))
        except Exception:
            res["raw"] = None
        try:
            cfg = load_config_from_file(path)
        except Exception as e:  # noqa: BLE001
            raise Stop("load", e)
        res["loaded"] = _loaded_view(cfg)

    # ---- launch: argument merge + validation ("argv": a whole command line, {config} = the file)
    parser = launch_command_parser()
    if item.get("argv") is not None:
        try:
            args = parser.parse_args([a.replace("{config}", path or "") for a in item["argv"]])
        except SystemExit as e:
            raise Stop("parse", ValueError(f"argparse exit status {e.code}"))
    else:
        args = parser.parse_args(["--config_file", path, "train.py"])
    try:
        args, defaults, mp_from_config = _validate_launch_command(args)
    except Exception as e:  # noqa: BLE001
        raise Stop("launch", e)
    res["args"] = {k: _jsonable(getattr(args, k, None)) for k in _ARG_KEYS if hasattr(args, k)}
    res["args_all"] = {k: _jsonable(v) for k, v in vars(args).items() if k != "nondefault"}

    # ---- env: the launcher launch_command would pick
    env = None
    launcher = None
    try:
        if args.use_deepspeed and not args.cpu:
            launcher = "deepspeed"
            fields = list(defaults.deepspeed_config.keys()) if defaults else []
            if mp_from_config:
                fields.append("mixed_precision")
            args.deepspeed_fields_from_accelerate_config = ",".join(fields)
            cmd, env = ulaunch.prepare_deepspeed_cmd_env(args)
            res["cmd"] = _jsonable(cmd)
        elif (args.use_fsdp or args.use_megatron_lm or args.multi_gpu) and not args.cpu:
            launcher = "torchrun"
            env = ulaunch.prepare_multi_gpu_env(args)
        elif args.tpu and not args.cpu:
            launcher = "tpu"
            if args.no_python:
                raise ValueError("--no_python cannot be used with TPU launcher")
            args, env = ulaunch.prepare_tpu(args, {}, bool(args.tpu_use_cluster))
            env = dict(base_env, **env)
            res["notes"].append("TPU: environment prepared; xmp.spawn / xla_dist not reachable")
        elif defaults is not None and defaults.compute_environment == ComputeEnvironment.AMAZON_SAGEMAKER:
            launcher = "sagemaker"
            args.aws_access_key_id, args.aws_secret_access_key = "oracle", "oracle"
            sm_args, _inputs = ulaunch.prepare_sagemager_args_inputs(defaults, args)
            env = dict(base_env, **{k: str(v) for k, v in (sm_args.get("environment") or {}).items()})
            res["notes"].append("SageMaker: estimator arguments prepared with dummy credentials; estimator not built")
        else:
            launcher = "simple"
            cmd, env = ulaunch.prepare_simple_launcher_cmd_env(args)
            res["cmd"] = _jsonable(cmd)
        # launchers that start a subprocess.Popen(cmd, env=current_env) need text values: Popen encodes
        # each with os.fsencode (the torchrun path instead str()s them in patch_environment)
        popen = launcher == "simple" or (launcher == "deepspeed" and res.get("cmd"))
        if popen:
            for k, v in env.items():
                os.fsencode(k)
                os.fsencode(v)
    except Exception as e:  # noqa: BLE001
        raise Stop("env", e)
    res["launcher"] = launcher
    res["args_after_env"] = {k: _jsonable(getattr(args, k, None)) for k in _ARG_KEYS + (
        "zero_stage", "fsdp_version", "fsdp_sharding_strategy", "deepspeed_multinode_launcher") if hasattr(args, k)}
    for k in ("rdzv_endpoint", "master_addr", "master_port", "nproc_per_node", "nnodes", "node_rank"):
        if hasattr(args, k):
            res["args"][k] = _jsonable(getattr(args, k))
    res["env"] = {k: str(v) for k, v in _env_diff(base_env, env).items()}
    if launcher in ("tpu", "sagemaker"):
        return

    # ---- plugins, built from the environment the training process would inherit
    plugins = res["plugins"]
    with patched_env(env):
        fsdp_plugin = ds_plugin = None
        try:
            if os.environ.get("ACCELERATE_USE_FSDP", "false").lower() == "true":
                with patch(torch.cuda, "current_device", lambda: 0):
                    fsdp_plugin = udc.FullyShardedDataParallelPlugin()
                p = fsdp_plugin
                plugins["fsdp"] = {k: _jsonable(getattr(p, k, None)) for k in (
                    "fsdp_version", "sharding_strategy", "reshard_after_forward", "backward_prefetch",
                    "state_dict_type", "auto_wrap_policy", "transformer_cls_names_to_wrap", "min_num_params",
                    "use_orig_params", "sync_module_states", "forward_prefetch", "activation_checkpointing",
                    "activation_checkpointing_offload", "cpu_ram_efficient_loading", "ignored_modules")}
                plugins["fsdp"]["cpu_offload"] = _jsonable(getattr(p.cpu_offload, "offload_params", p.cpu_offload)) \
                    if p.fsdp_version == 1 else type(p.cpu_offload).__name__
            if os.environ.get("ACCELERATE_USE_DEEPSPEED", "false").lower() == "true":
                ds_plugin = udc.DeepSpeedPlugin()
                ds_plugin.set_mixed_precision(parse_choice_from_env("ACCELERATE_MIXED_PRECISION", "no"))
                p = ds_plugin
                plugins["deepspeed"] = {k: _jsonable(getattr(p, k, None)) for k in (
                    "zero_stage", "offload_optimizer_device", "offload_param_device", "offload_optimizer_nvme_path",
                    "offload_param_nvme_path", "gradient_accumulation_steps", "gradient_clipping", "zero3_init_flag",
                    "zero3_save_16bit_model", "enable_msamp", "msamp_opt_level")}
                plugins["deepspeed"]["config"] = _jsonable(p.deepspeed_config)
            if os.environ.get("ACCELERATE_USE_MEGATRON_LM", "false").lower() == "true":
                m = udc.MegatronLMPlugin()
                plugins["megatron"] = {k: _jsonable(getattr(m, k, None)) for k in (
                    "tp_degree", "pp_degree", "num_micro_batches", "gradient_clipping", "sequence_parallelism",
                    "recompute_activations", "use_distributed_optimizer", "context_parallel_size")}
            pc = None
            if os.environ.get("ACCELERATE_USE_PARALLELISM_CONFIG", "false").lower() == "true":
                from accelerate.parallelism_config import ParallelismConfig
                pc = ParallelismConfig()
                plugins["parallelism"] = {"dp_replicate_size": pc.dp_replicate_size, "dp_shard_size": pc.dp_shard_size,
                                          "tp_size": pc.tp_size, "cp_size": pc.cp_size, "sp_size": pc.sp_size,
                                          "cp_backend": pc.cp_backend, "sp_backend": pc.sp_backend,
                                          "cp_comm_strategy": _jsonable(getattr(pc.cp_handler, "cp_comm_strategy", None)),
                                          "sp_attn": _jsonable(getattr(pc.sp_handler, "sp_attn_implementation", None))}
            dyn = udc.TorchDynamoPlugin()
            plugins["dynamo"] = {"backend": _jsonable(dyn.backend), "mode": dyn.mode, "fullgraph": dyn.fullgraph,
                                 "dynamic": dyn.dynamic, "use_regional_compilation": dyn.use_regional_compilation}
            mp = parse_choice_from_env("ACCELERATE_MIXED_PRECISION", "no")
            fp8_backend = None
            if mp == "fp8":
                if ds_plugin is not None and ds_plugin.enable_msamp:
                    fp8_backend = udc.FP8BackendType.MSAMP
                else:
                    fp8_backend = udc.FP8BackendType(parse_choice_from_env("ACCELERATE_FP8_BACKEND", "NO"))
                recipe = None
                if fp8_backend == udc.FP8BackendType.AO:
                    recipe = udc.AORecipeKwargs()
                    plugins["fp8"] = {"backend": "AO", "pad_inner_dim": recipe.pad_inner_dim,
                                      "enable_fsdp_float8_all_gather": recipe.enable_fsdp_float8_all_gather}
                elif fp8_backend == udc.FP8BackendType.TE:
                    recipe = udc.TERecipeKwargs()
                    plugins["fp8"] = {"backend": "TE", **{k: _jsonable(getattr(recipe, k)) for k in (
                        "use_autocast_during_eval", "margin", "interval", "fp8_format", "amax_history_len",
                        "amax_compute_algo", "override_linear_precision", "use_mxfp8_block_scaling")}}
                elif fp8_backend == udc.FP8BackendType.MSAMP:
                    recipe = udc.MSAMPRecipeKwargs()
                    plugins["fp8"] = {"backend": "MSAMP", "opt_level": recipe.opt_level}
                else:
                    plugins["fp8"] = {"backend": "NO (auto-detected from installed libraries)"}
                    res["notes"].append("fp8 backend auto-detection depends on installed libraries: not reached")
        except Exception as e:  # noqa: BLE001
            # a deepspeed_config_file path that does not exist in the launch directory depends on where
            # accelerate launch is run, not on the file alone
            # (only for a text value: a number or mapping there fails wherever it is launched)
            ds_file = cfg.deepspeed_config.get("deepspeed_config_file") if cfg is not None and isinstance(
                cfg.deepspeed_config, dict) else None
            raise Stop("plugins", e, env_dependent=isinstance(e, ValueError) and isinstance(ds_file, str) and
                       "expected a string path to an existing deepspeed config" in str(e).lower())

        # ---- accelerator-level checks (emulated around accelerate's own objects)
        try:
            dt = _state_distributed_type(env, DistributedType, fsdp_plugin, ds_plugin)
            world = _world_size(args)
            if pc is not None:
                is_fsdp2 = dt == DistributedType.FSDP and fsdp_plugin is not None and fsdp_plugin.fsdp_version == 2
                if world is None:  # the machine decides the world size: assume it matches the sizes
                    res["notes"].append("world size decided by the machine (nproc_per_node auto/gpu/...): "
                                        "ParallelismConfig size check assumed to pass")
                multi = (world if world is not None else pc.total_size) > 1 and dt in (DistributedType.MULTI_GPU,)
                if dt == DistributedType.MULTI_GPU and not os.environ.get(
                        "ACCELERATE_ALLOW_CP_STANDALONE", "false").lower() == "true":
                    if pc.cp_enabled and fsdp_plugin is None:
                        raise ValueError("`cp_size > 1` specified in the `parallelism_config`, but no `fsdp_plugin` "
                                         "was provided (AcceleratorState, emulated)")
                if pc.cp_enabled and fsdp_plugin is not None and fsdp_plugin.fsdp_version == 1:
                    raise ValueError("Using `cp_size>1` requires FSDP2, but the provided `fsdp_plugin` is using FSDP1 "
                                     "(AcceleratorState, emulated)")
                fake = types.SimpleNamespace(num_processes=world if world is not None else pc.total_size,
                                             multi_device=multi, is_fsdp2=is_fsdp2,
                                             distributed_type=dt, is_main_process=True)
                pc._validate_accelerator(fake)
                plugins["parallelism"]["validated_total"] = pc.total_size
                res["notes"].append("ParallelismConfig._validate_accelerator run on a stand-in accelerator")
            if mp == "fp8":
                if fp8_backend == udc.FP8BackendType.MSAMP and dt == DistributedType.FSDP:
                    raise NotImplementedError("`accelerate` + `MS-AMP` + `FSDP` is not supported (Accelerator, emulated)")
                if fp8_backend == udc.FP8BackendType.AO and dt == DistributedType.FSDP and \
                        fsdp_plugin.cpu_ram_efficient_loading:
                    raise ValueError("torchao with FSDP2 and cpu_ram_efficient_loading is not supported "
                                     "(Accelerator, emulated)")
            gas = int(parse_choice_from_env("ACCELERATE_GRADIENT_ACCUMULATION_STEPS", 1))
            plugins["accelerator"] = {"gradient_accumulation_steps": gas, "distributed_type": _jsonable(dt),
                                      "world_size": world}
        except Exception as e:  # noqa: BLE001
            raise Stop("accelerator", e)

        # ---- Accelerator._prepare_deepspeed: every "auto" leaf left in the plugin's config is filled
        # from the objects passed to prepare() or raises ValueError (replayed on a copy; see _prepare_fill)
        if ds_plugin is not None:
            try:
                _prepare_fill(ds_plugin, gas)
            except Exception as e:  # noqa: BLE001
                raise Stop("prepare", e)

        # ---- DeepSpeed's own ZeRO config model on the accelerate-generated block
        if ds_plugin is not None and os.environ.get("ACCELERATE_DEEPSPEED_CONFIG_FILE", "none") == "none":
            try:
                from deepspeed.runtime.zero.config import DeepSpeedZeroConfig
                zc = {k: v for k, v in ds_plugin.deepspeed_config.get("zero_optimization", {}).items()}
                for off in ("offload_optimizer", "offload_param"):
                    if isinstance(zc.get(off), dict):
                        zc[off] = {k: v for k, v in zc[off].items() if v is not None}
                zm = DeepSpeedZeroConfig(**zc)
                # what DeepSpeed's model kept (its non-strict models drop "auto" values silently)
                plugins["deepspeed"]["zero_model"] = {
                    "stage": _jsonable(zm.stage),
                    "offload_optimizer": _jsonable(getattr(zm.offload_optimizer, "device", None)),
                    "offload_param": _jsonable(getattr(zm.offload_param, "device", None))}
            except Exception as e:  # noqa: BLE001
                raise Stop("deepspeed", e)

        # ---- torchrun: the launchers that call torch.distributed.run.run(args) (MULTI_*, FSDP,
        # MEGATRON_LM, single-node or `standard` DeepSpeed) - torchrun's own argument parsing and
        # LaunchConfig construction (config_from_args), which starts nothing
        if launcher == "torchrun" or (launcher == "deepspeed" and not res.get("cmd")):
            try:
                import torch.distributed.run as distrib_run
                targs = ulaunch._filter_args(args, distrib_run.get_args_parser(),
                                             ["--training_script", args.training_script,
                                              "--training_script_args", args.training_script_args])
                config, cmd_, cmd_args_ = distrib_run.config_from_args(targs)
                # launch_agent's first check on the launch config: torch's own WorkerSpec.__post_init__
                # (local_world_size > 0), built without a rendezvous handler; nothing is started
                from torch.distributed.elastic.agent.server.api import WorkerSpec
                try:
                    WorkerSpec(role=config.role, local_world_size=config.nproc_per_node, rdzv_handler=None,
                               entrypoint=cmd_, args=tuple(cmd_args_))
                except AssertionError:
                    raise AssertionError(f"WorkerSpec refuses local_world_size={config.nproc_per_node} "
                                         "(torch launch_agent: no worker would start)") from None
            except Exception as e:  # noqa: BLE001
                raise Stop("torchrun", e)

        # ---- the `deepspeed` runner command accelerate builds for multi-node launches: parsed with
        # deepspeed's own argument parser, then runner.main's launcher dispatch (emulated, by name)
        cmd = res.get("cmd") or []
        if launcher == "deepspeed" and cmd and cmd[0] == "deepspeed" and "--launcher" in cmd:
            try:
                from deepspeed.launcher import constants as dsc
                from deepspeed.launcher.runner import parse_args as ds_parse_args
                with contextlib.redirect_stderr(io.StringIO()):
                    ds_args = ds_parse_args(cmd[1:])
                known = (dsc.PDSH_LAUNCHER, dsc.OPENMPI_LAUNCHER, dsc.MPICH_LAUNCHER, dsc.IMPI_LAUNCHER,
                         dsc.MVAPICH_LAUNCHER, dsc.SLURM_LAUNCHER)
                if ds_args.launcher.lower() not in known:
                    raise NotImplementedError(f"Unknown launcher {ds_args.launcher} (deepspeed runner, emulated)")
            except SystemExit as e:
                raise Stop("deepspeed-runner", ValueError(f"deepspeed runner rejected its arguments ({e})"))
            except Exception as e:  # noqa: BLE001
                raise Stop("deepspeed-runner", e)

        # ---- torch.compile argument check (inductor)
        if plugins.get("dynamo", {}).get("backend") == "INDUCTOR":
            try:
                torch.compile(lambda x: x, **dyn.to_kwargs())
            except Exception as e:  # noqa: BLE001
                raise Stop("compile", e)


def _prepare_fill(plugin, gas):
    """Accelerator._prepare_deepspeed's fill, replayed on a copy of the plugin's config with the
    kwargs it computes when prepare() gets a dataloader (batch 4), a model whose config has
    hidden_size 8, DummyOptim when the config has an optimizer block (a torch optimizer otherwise)
    and DummyScheduler (warmup 10, total 100) when it has a scheduler block:
    deepspeed_config_process(must_match=False, ...) raises for an "auto" it has no value for."""
    import copy
    hf = plugin.hf_ds_config
    old = hf.config
    hf.config = copy.deepcopy(old)
    plugin.deepspeed_config = hf.config
    try:
        plugin.fill_match("gradient_accumulation_steps", must_match=False, gradient_accumulation_steps=gas)
        mb = 4 if plugin.is_auto("train_micro_batch_size_per_gpu") else plugin.get_value(
            "train_micro_batch_size_per_gpu")
        kw = {"gradient_clipping": 1.0, "zero_optimization.stage3_gather_16bit_weights_on_model_save": False,
              "zero_optimization.reduce_bucket_size": 64, "zero_optimization.stage3_prefetch_bucket_size": 57,
              "zero_optimization.stage3_param_persistence_threshold": 80}
        if mb is not None:
            kw["train_micro_batch_size_per_gpu"] = mb
            g = plugin.get_value("gradient_accumulation_steps")
            if isinstance(mb, int) and isinstance(g, int):
                kw["train_batch_size"] = mb * g
        if "optimizer" in hf.config:
            kw.update({"optimizer.params.lr": 1e-3, "optimizer.params.weight_decay": 0.0})
            if "scheduler" in hf.config:
                kw.update({"scheduler.params.warmup_min_lr": 0, "scheduler.params.warmup_max_lr": 1e-3,
                           "scheduler.params.warmup_num_steps": 10, "scheduler.params.total_num_steps": 100})
        plugin.deepspeed_config_process(must_match=False, **kw)
    finally:
        hf.config = old
        plugin.deepspeed_config = old


def _state_distributed_type(env, DistributedType, fsdp_plugin, ds_plugin):
    if ds_plugin is not None:
        return DistributedType.DEEPSPEED
    if fsdp_plugin is not None:
        return DistributedType.FSDP
    if env.get("ACCELERATE_USE_MEGATRON_LM", "false").lower() == "true":
        return DistributedType.MEGATRON_LM
    if env.get("ACCELERATE_USE_CPU", "False").lower() == "true":
        return DistributedType.MULTI_CPU
    return DistributedType.MULTI_GPU


def _world_size(args):
    """The world size the file decides, or None when torchrun derives it from this machine
    (nproc_per_node auto / gpu / cpu / xpu ...)."""
    try:
        if getattr(args, "nnodes", None) is not None and getattr(args, "nproc_per_node", None) is not None:
            return int(args.nproc_per_node) * int(args.nnodes)
        if getattr(args, "nproc_per_node", None) is not None:
            return int(args.nproc_per_node)
        return int(args.num_processes)
    except (TypeError, ValueError):
        return None


def facts():
    """Names and values the validator's schema copies, read from the installed packages."""
    import dataclasses
    import inspect
    import re
    import typing

    import torch
    from accelerate.commands.config import config_args
    from accelerate.commands.launch import launch_command_parser
    from accelerate.utils import constants, dataclasses as udc
    from accelerate.utils.environment import str_to_bool

    parser = launch_command_parser()
    defaults = {a.dest: _jsonable(a.default) for a in parser._actions if a.dest != "help"}
    checks_src = inspect.getsource(udc.DeepSpeedPlugin._deepspeed_config_checks)
    ds_exclusive = [n.replace("ACCELERATE_", "").replace("DEEPSPEED_", "").lower()
                    for n in re.findall(r'"(ACCELERATE_[A-Z0-9_]+)"', checks_src.split("env_variable_names_to_ignore = [")[1])]
    words = {}
    for w in ("y", "yes", "t", "true", "on", "1", "n", "no", "f", "false", "off", "0", "maybe", "enabled"):
        try:
            words[w] = str_to_bool(w)
        except ValueError:
            words[w] = None
    try:
        from torch._inductor import list_mode_options
        modes = sorted(list_mode_options().keys()) if callable(list_mode_options) else []
    except Exception:  # noqa: BLE001
        modes = []
    try:
        from deepspeed.runtime.zero.offload_config import OffloadDeviceEnum
        devices = sorted(e.value for e in OffloadDeviceEnum)
    except Exception:  # noqa: BLE001
        devices = []
    return {
        "cluster_fields": [f.name for f in dataclasses.fields(config_args.ClusterConfig)],
        "sagemaker_fields": [f.name for f in dataclasses.fields(config_args.SageMakerConfig)],
        "sagemaker_required": [f.name for f in dataclasses.fields(config_args.SageMakerConfig)
                               if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
                               and f.name not in ("compute_environment", "distributed_type", "mixed_precision",
                                                  "use_cpu", "debug")],
        "distributed_types": [e.value for e in udc.DistributedType],
        "sagemaker_distributed_types": [e.value for e in udc.SageMakerDistributedType],
        "compute_environments": [e.value for e in udc.ComputeEnvironment],
        "precisions": [e.value for e in udc.PrecisionType],
        "dynamo_backends": [e.value for e in udc.DynamoBackend],
        "fp8_backends": [e.value for e in udc.FP8BackendType],
        "fp8_formats": list(typing.get_args(udc.FP8Format)),
        "fp8_amax_algos": list(typing.get_args(udc.AmaxComputeAlgorithm)),
        "fp8_opt_levels": list(typing.get_args(udc.OptLevel)),
        "fsdp_sharding_strategy": list(constants.FSDP_SHARDING_STRATEGY),
        "fsdp_auto_wrap_policy": list(constants.FSDP_AUTO_WRAP_POLICY),
        "fsdp_backward_prefetch": list(constants.FSDP_BACKWARD_PREFETCH),
        "fsdp_state_dict_type": list(constants.FSDP_STATE_DICT_TYPE),
        "ds_multinode_launchers": list(constants.DEEPSPEED_MULTINODE_LAUNCHERS),
        "ds_file_exclusive": ds_exclusive,
        "ds_offload_devices": devices,
        "parser_defaults": defaults,
        "truth_words": words,
        "inductor_modes": modes,
        "torch": torch.__version__,
        # ACCELERATE_FP8_* names the recipe kwargs classes read back (setup_fp8_env exports any fp8_* arg)
        "fp8_env_read": sorted({("fp8_" + n).lower() for c in (udc.TERecipeKwargs, udc.AORecipeKwargs,
                                                               udc.MSAMPRecipeKwargs)
                                for n in re.findall(r'env_prefix \+ "(\w+)"', inspect.getsource(c))}),
        # attributes prepare_multi_gpu_env reads with getattr (present only when a config file sets them)
        "multi_gpu_env_getattr": re.findall(r'getattr\(args, "(\w+)"',
                                            inspect.getsource(__import__("accelerate.utils.launch",
                                                                         fromlist=["x"]).prepare_multi_gpu_env)),
    }


def main():
    req = json.load(sys.stdin)
    notes = []
    real_stdout = sys.stdout
    sys.stdout = sys.stderr  # libraries print on import; stdout carries only the JSON answer
    try:
        _install_patches(notes)
        import accelerate
        import torch
        try:
            import deepspeed
            dsv = deepspeed.__version__
        except Exception:  # noqa: BLE001
            dsv = None
        results = [run_one(item) for item in req.get("configs", [])]
        fact_table = facts() if req.get("facts") else None
    finally:
        sys.stdout = real_stdout
    out = {"versions": {"accelerate": accelerate.__version__, "torch": torch.__version__, "deepspeed": dsv},
           "patches": notes, "results": results, "facts": fact_table}
    sys.stdout.write(json.dumps(out, default=str))


if __name__ == "__main__":
    main()

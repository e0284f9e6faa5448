"""Oracle run in ONE subprocess by the backends_docs tests (keeps torch/accelerate/deepspeed
out of the pytest process). Reads a JSON request on stdin, writes a JSON answer on stdout.

Request keys:
  examples: [path, ...]        accelerate YAML/JSON configs to load and launch-simulate
  snippets: [[name, code], ...] Python snippets to exec (fresh namespace each)
  imports:  [dotted, ...]       import paths to resolve
  classes:  [name, ...]         class names to resolve in the public namespaces
  fields:   [[class, field], ...]
Answer keys mirror them, plus "facts" (name sets read from the installed packages).
"""
from __future__ import annotations

import contextlib
import dataclasses
import importlib
import io
import json
import logging
import os
import sys
import traceback
import warnings

warnings.simplefilter("ignore")
logging.disable(logging.CRITICAL)

NAMESPACES = [
    "accelerate",
    "accelerate.utils",
    "accelerate.utils.dataclasses",
    "accelerate.parallelism_config",
    "accelerate.local_sgd",
    "accelerate.state",
    "accelerate.utils.deepspeed",
    "deepspeed.ops.adam",
    "deepspeed.runtime.zero.utils",
    "torch.amp",
    "importlib.metadata",
    "accelerate.commands.config.config_args",
    "deepspeed",
    "deepspeed.runtime.zero.config",
    "deepspeed.runtime.zero.offload_config",
    "deepspeed.runtime.config",
    "torch.distributed.fsdp",
    "torch.distributed.fsdp.wrap",
    "torch.distributed.device_mesh",
    "torch.optim",
]


def _resolve(dotted: str):
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except Exception:
            continue
        for p in parts[i:]:
            obj = getattr(obj, p)
        return obj
    raise ImportError(dotted)


def _class(name: str):
    for ns in NAMESPACES:
        try:
            mod = importlib.import_module(ns)
        except Exception:
            continue
        if hasattr(mod, name):
            return getattr(mod, name)
    return None


def _field_names(cls):
    if dataclasses.is_dataclass(cls):
        return [f.name for f in dataclasses.fields(cls)]
    mf = getattr(cls, "model_fields", None)  # pydantic (DeepSpeed config models)
    if mf:
        names = []
        for n, f in mf.items():
            names.append(n)
            if getattr(f, "alias", None):
                names.append(f.alias)
        return names
    import inspect

    try:
        return [p for p in inspect.signature(cls).parameters if p not in ("self", "args", "kwargs")]
    except (TypeError, ValueError):
        return []


def facts():
    from accelerate.commands.config.config_args import ClusterConfig, SageMakerConfig
    from accelerate.commands.launch import launch_command_parser
    from accelerate.commands.to_fsdp2 import to_fsdp2_command_parser
    from accelerate.commands.accelerate_cli import main as _  # noqa: F401
    import accelerate.utils.constants as C
    from accelerate.utils.dataclasses import (
        DistributedType, DynamoBackend, PrecisionType, DDPCommunicationHookType, FP8BackendType)
    from deepspeed.runtime.zero.config import DeepSpeedZeroConfig
    from deepspeed.runtime.zero.offload_config import DeepSpeedZeroOffloadOptimizerConfig, DeepSpeedZeroOffloadParamConfig
    import deepspeed.runtime.constants as DSC
    from deepspeed.launcher import runner

    lp = launch_command_parser()
    flags, dests = set(), set()
    for a in lp._actions:
        flags.update(a.option_strings)
        dests.add(a.dest)
    tp = to_fsdp2_command_parser()
    to_fsdp2_flags = {s for a in tp._actions for s in a.option_strings}
    ds_flags = {s for a in runner.parse_args.__globals__["argparse"].ArgumentParser()._actions for s in a.option_strings}
    # deepspeed launcher flags: parse its parser by calling the builder with --help suppressed
    import argparse
    ds_parser = None
    orig = argparse.ArgumentParser.parse_args

    def grab(self, *a, **k):
        nonlocal ds_parser
        ds_parser = self
        raise SystemExit(0)

    argparse.ArgumentParser.parse_args = grab
    try:
        runner.parse_args([])
    except SystemExit:
        pass
    finally:
        argparse.ArgumentParser.parse_args = orig
    if ds_parser is not None:
        ds_flags = {s for a in ds_parser._actions for s in a.option_strings}
    ds_json = set()
    for v in vars(DSC).values():
        if isinstance(v, str) and v.replace("_", "").isalnum() and v.islower():
            ds_json.add(v)
    for cls in (DeepSpeedZeroConfig, DeepSpeedZeroOffloadOptimizerConfig, DeepSpeedZeroOffloadParamConfig):
        ds_json.update(_field_names(cls))
    subcommands = set()
    from accelerate.commands import accelerate_cli
    import inspect
    src = inspect.getsource(accelerate_cli)
    values = set()
    for enum in (DistributedType, DynamoBackend, PrecisionType, DDPCommunicationHookType, FP8BackendType):
        values.update(str(m.value) for m in enum)
    for name in ("FSDP_SHARDING_STRATEGY", "FSDP_AUTO_WRAP_POLICY", "FSDP_BACKWARD_PREFETCH",
                 "FSDP_STATE_DICT_TYPE", "FSDP2_STATE_DICT_TYPE", "DEEPSPEED_MULTINODE_LAUNCHERS",
                 "TORCH_DYNAMO_MODES"):
        values.update(str(v) for v in getattr(C, name, []))
    import accelerate.utils.dataclasses as D
    from accelerate.parallelism_config import ParallelismConfig
    from accelerate import Accelerator
    plugin_fields = set(inspect.signature(Accelerator.__init__).parameters) - {"self"}
    for obj in list(vars(D).values()) + [ParallelismConfig]:
        if isinstance(obj, type) and dataclasses.is_dataclass(obj):
            plugin_fields.update(f.name for f in dataclasses.fields(obj))
    constants = {k: v for k, v in vars(C).items() if k.isupper() and isinstance(v, str)}
    return {
        "plugin_fields": sorted(plugin_fields),
        "constants": constants,
        "cluster_fields": sorted(f.name for f in dataclasses.fields(ClusterConfig)),
        "sagemaker_fields": sorted(f.name for f in dataclasses.fields(SageMakerConfig)),
        "launch_flags": sorted(flags),
        "launch_dests": sorted(dests),
        "launch_defaults": {a.dest: (None if a.default is None else str(a.default)) for a in lp._actions},
        "to_fsdp2_flags": sorted(to_fsdp2_flags),
        "deepspeed_runner_flags": sorted(ds_flags),
        "ds_json_keys": sorted(ds_json),
        "enum_values": sorted(values),
        "cli_source": src,
    }


def simulate(path: str):
    """config file -> accelerate's loader -> launch arg merge -> launcher env -> plugin under that env."""
    out = {"path": path}
    from accelerate.commands.config.config_args import load_config_from_file
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils import launch as L

    try:
        cfg = load_config_from_file(path)
        out["load"] = "ok"
        out["distributed_type"] = str(cfg.distributed_type)
    except Exception as e:  # noqa: BLE001
        out["load"] = f"{type(e).__name__}: {e}"
        return out
    saved = dict(os.environ)
    try:
        args = launch_command_parser().parse_args(["--config_file", path, "train.py"])
        args, defaults, mp_from_config = _validate_launch_command(args)
        if args.use_deepspeed:
            fields = list(defaults.deepspeed_config.keys())
            if mp_from_config:
                fields.append("mixed_precision")
            args.deepspeed_fields_from_accelerate_config = ",".join(fields)
            cmd, env = L.prepare_deepspeed_cmd_env(args)
            out["launcher"] = "deepspeed" if cmd else "torchrun"
        elif args.use_fsdp or args.multi_gpu or args.use_megatron_lm:
            env = L.prepare_multi_gpu_env(args)
            out["launcher"] = "torchrun"
        else:
            cmd, env = L.prepare_simple_launcher_cmd_env(args)
            out["launcher"] = "simple"
        out["launch"] = "ok"
        out["env"] = {k: v for k, v in env.items() if k not in saved or saved[k] != v}
    except Exception as e:  # noqa: BLE001
        out["launch"] = f"{type(e).__name__}: {e}"
        return out
    # build the plugin the training process would build from that environment
    try:
        os.environ.clear()
        os.environ.update(env)
        from accelerate.utils import DeepSpeedPlugin, FullyShardedDataParallelPlugin
        from accelerate.parallelism_config import ParallelismConfig

        built = {}
        if env.get("ACCELERATE_USE_DEEPSPEED") == "true":
            p = DeepSpeedPlugin()
            built["DeepSpeedPlugin"] = {"zero_stage": p.zero_stage,
                                        "offload_optimizer_device": p.offload_optimizer_device,
                                        "offload_param_device": p.offload_param_device,
                                        "zero3_init_flag": p.zero3_init_flag}
        if env.get("ACCELERATE_USE_FSDP") == "true":
            p = FullyShardedDataParallelPlugin()
            built["FullyShardedDataParallelPlugin"] = {
                "fsdp_version": p.fsdp_version, "reshard_after_forward": str(p.reshard_after_forward),
                "state_dict_type": str(p.state_dict_type), "cpu_ram_efficient_loading": p.cpu_ram_efficient_loading}
        if env.get("ACCELERATE_USE_PARALLELISM_CONFIG") == "true":
            pc = ParallelismConfig()
            built["ParallelismConfig"] = {"total_size": pc.total_size}
        out["plugin"] = "ok"
        out["built"] = built
    except Exception as e:  # noqa: BLE001
        out["plugin"] = f"{type(e).__name__}: {e}"
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return out


def run_snippet(name: str, code: str):
    saved = dict(os.environ)
    buf = io.StringIO()
    try:
        with contextlib.redirect_stdout(buf):
            exec(compile(code, name, "exec"), {"__name__": "__snippet__"})
        return {"name": name, "ok": True, "stdout": buf.getvalue()}
    except Exception:  # noqa: BLE001
        return {"name": name, "ok": False, "error": traceback.format_exc(limit=3)}
    finally:
        os.environ.clear()
        os.environ.update(saved)


def estimates(grid):
    """DeepSpeed's own estimators for each (P, L, G, M) in grid."""
    from deepspeed.runtime.zero.stage_1_and_2 import estimate_zero2_model_states_mem_needs as z2
    from deepspeed.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs as z3

    out = []
    for P, L, G, M in grid:
        row = {"P": P, "L": L, "G": G, "M": M}
        row["zero2 none"] = z2(P, num_gpus_per_node=G, num_nodes=M, cpu_offload=False)[::-1]
        row["zero2 optimizer"] = z2(P, num_gpus_per_node=G, num_nodes=M, cpu_offload=True)[::-1]
        row["zero3 none"] = z3(P, L, num_gpus_per_node=G, num_nodes=M, cpu_offload=False, zero_init=True)[1::-1]
        row["zero3 optimizer"] = z3(P, L, num_gpus_per_node=G, num_nodes=M, cpu_offload=True,
                                    cpu_offload_params=False, zero_init=True)[1::-1]
        row["zero3 optimizer+param"] = z3(P, L, num_gpus_per_node=G, num_nodes=M, cpu_offload=True,
                                          cpu_offload_params=True, zero_init=True)[1::-1]
        out.append(row)
    return out


def to_fsdp2(paths):
    import yaml
    from accelerate.commands import to_fsdp2 as T

    keymap = {k: (v if isinstance(v, str) else v.name) for k, v in T.ARGUMENT_KEY_MAPPING.items()}
    converted = {}
    for p in paths:
        with open(p) as fh:
            converted[p] = T.convert_config_to_fsdp2(yaml.safe_load(fh))
    return {"key_mapping": keymap, "value_mapping": T.ARGUMENT_VALUE_MAPPING, "converted": converted}


def main():
    req = json.load(sys.stdin)
    ans = {"facts": facts()}
    ans["estimates"] = estimates(req.get("estimates", []))
    ans["to_fsdp2"] = to_fsdp2(req.get("to_fsdp2", []))
    ans["examples"] = [simulate(p) for p in req.get("examples", [])]
    ans["snippets"] = [run_snippet(n, c) for n, c in req.get("snippets", [])]
    res = {}
    for d in req.get("imports", []):
        try:
            _resolve(d)
            res[d] = True
        except Exception:  # noqa: BLE001
            res[d] = False
    ans["imports"] = res
    ans["classes"] = {n: _class(n) is not None for n in req.get("classes", [])}
    fl = {}
    for cls_name, field in req.get("fields", []):
        cls = _class(cls_name)
        fl[f"{cls_name}.{field}"] = bool(cls is not None and (field in _field_names(cls) or hasattr(cls, field)))
    ans["fields"] = fl
    ans["class_fields"] = {n: _field_names(_class(n)) for n in req.get("class_fields", []) if _class(n) is not None}
    ans["versions"] = {m: importlib.import_module(m).__version__ for m in ("torch", "accelerate", "deepspeed")}
    sys.stdout.write(json.dumps(ans, default=str))


if __name__ == "__main__":
    main()

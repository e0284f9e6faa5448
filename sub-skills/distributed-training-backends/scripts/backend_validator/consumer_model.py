"""What each consumer does to a DeepSpeed config before DeepSpeed reads it (standard library only).

A model of accelerate 1.15.0 and deepspeed 0.19.8 (and the Transformers Trainer, which builds
an Accelerate plugin) used by the rules; ``tests/validator_ds/test_consumer_model.py`` compares
every function here, key by key, with the real objects on a generated grid of configs
(tests/oracle/consumer_oracle.py).

Stages, in the order they run:

1. ``launch_fields`` - what ``accelerate launch`` exports from the YAML's ``deepspeed_config``
   (accelerate/utils/launch.py::prepare_deepspeed_cmd_env) and how ``DeepSpeedPlugin.__post_init__``
   reads it back (accelerate/utils/dataclasses.py). The two NVMe paths are not exported.
2. ``plugin_config`` - the dict ``DeepSpeedPlugin.__post_init__`` builds: from the fields alone
   without ``deepspeed_config_file``; with one, the JSON plus ``gradient_accumulation_steps`` 1 when
   absent, the plugin fields written only where the JSON says ``"auto"`` (``fill_match``), and
   ``steps_per_print`` set to infinity in both forms.
3. ``set_mixed_precision`` - AcceleratorState adds ``{"enabled": false}`` fp16/bf16 blocks
   (``{"enabled": true, "auto_cast": true}`` for fp16, ``{"enabled": true}`` for bf16 when the block is
   absent) and fills ``"auto"`` enabled flags.
4. ``prepare_fill`` - ``Accelerator._prepare_deepspeed``: ``zero_allow_untested_optimizer`` when the
   script passes a torch optimizer, then every remaining ``"auto"`` leaf is filled from the values
   it computes; a leaf it has no value for raises ValueError.
5. ``zero_reads`` - what DeepSpeed's ZeRO model keeps: "auto" leaves dropped, legacy
   ``cpu_offload`` / ``cpu_offload_param`` turned into offload blocks, ``stage3_*`` aliases.
"""
from __future__ import annotations

import copy
import math

# YAML deepspeed_config key -> DeepSpeedPlugin field -> key in the DeepSpeed config
# (DeepSpeedPlugin.__post_init__ plugin_to_config_mapping; the same fields are the ones
# _deepspeed_config_checks refuses beside a deepspeed_config_file, so one table serves both)
from .ds_values import ACCELERATE_FIELDS_EXCLUSIVE_WITH_FILE as PLUGIN_TO_CONFIG

if False:  # pragma: no cover - annotations only: importing typing costs start time (bench_validator.py)
    from typing import Any, Dict, Optional, Tuple

# Fields prepare_deepspeed_cmd_env exports (the NVMe paths are not among them).
EXPORTED = ("zero_stage", "gradient_accumulation_steps", "gradient_clipping", "offload_optimizer_device",
            "offload_param_device", "zero3_save_16bit_model")
# Legacy ZeRO booleans DeepSpeed still reads (deepspeed/runtime/zero/config.py, json_schema_extra
# "deprecated"): key -> the offload block it creates when true. cpu_offload_use_pin_memory is
# deprecated without a replacement (read, value not transferred).
LEGACY_OFFLOAD = {"cpu_offload": "offload_optimizer", "cpu_offload_param": "offload_param"}
# stage3_* names DeepSpeed accepts as pydantic aliases of the ZeRO fields (populate_by_name=True).
STAGE3_ALIASES = {"stage3_prefetch_bucket_size": "prefetch_bucket_size",
                  "stage3_param_persistence_threshold": "param_persistence_threshold",
                  "stage3_model_persistence_threshold": "model_persistence_threshold",
                  "stage3_max_live_parameters": "max_live_parameters",
                  "stage3_max_reuse_distance": "max_reuse_distance",
                  "stage3_gather_16bit_weights_on_model_save": "gather_16bit_weights_on_model_save",
                  "stage3_module_granularity_threshold": "module_granularity_threshold",
                  "stage3_use_all_reduce_for_fetch_params": "use_all_reduce_for_fetch_params",
                  "stage3_allgather_sequential": "allgather_sequential"}
ZERO_DEFAULTS = {"stage": 0, "prefetch_bucket_size": 50_000_000, "param_persistence_threshold": 100_000,
                 "reduce_bucket_size": 500_000_000, "gather_16bit_weights_on_model_save": False}
# The keys Accelerator._prepare_deepspeed always has a value for, and those that depend on
# the objects passed to prepare() (a dataloader, a model with config.hidden_size, DummyOptim,
# DummyScheduler).
PREPARE_ALWAYS = ("gradient_clipping", "zero_optimization.stage3_gather_16bit_weights_on_model_save")
PREPARE_FROM_OBJECTS = ("train_micro_batch_size_per_gpu", "train_batch_size", "zero_optimization.reduce_bucket_size",
                        "zero_optimization.stage3_prefetch_bucket_size",
                        "zero_optimization.stage3_param_persistence_threshold", "optimizer.params.lr",
                        "optimizer.params.weight_decay", "scheduler.params.warmup_min_lr",
                        "scheduler.params.warmup_max_lr", "scheduler.params.warmup_num_steps",
                        "scheduler.params.total_num_steps")


class Refused(Exception):
    """The consumer raises here: ``stage`` names where, the message says why."""

    def __init__(self, stage: str, message: str) -> None:
        super().__init__(message)
        self.stage = stage


def _node(cfg: Dict, dotted: str) -> Tuple[Optional[Dict], str]:
    """HfDeepSpeedConfig.find_config_node: the parent mapping (None when a link is missing)."""
    *parents, leaf = dotted.split(".")
    for p in parents:
        cfg = cfg.get(p) if isinstance(cfg, dict) else None
        if cfg is None:
            return None, leaf
    return cfg, leaf


def get_value(cfg: Dict, dotted: str, default: Any = None) -> Any:
    node, leaf = _node(cfg, dotted)
    return default if node is None else node.get(leaf, default)


def launch_fields(ds_block: Optional[Dict]) -> Dict[str, Any]:
    """DeepSpeedPlugin fields after __post_init__, from an Accelerate YAML's deepspeed_config as
    `accelerate launch` exports it (strings through the environment)."""
    b = ds_block if isinstance(ds_block, dict) else {}
    env = {}
    for k in EXPORTED:
        v = b.get(k)
        if v is None:
            continue
        s = str(v)
        if k in ("gradient_clipping", "offload_optimizer_device", "offload_param_device", "zero3_save_16bit_model"):
            s = s.lower()
        env[k] = s
    gas = env.get("gradient_accumulation_steps", "auto")
    clip = env.get("gradient_clipping", "auto")
    try:
        stage = int(env.get("zero_stage", 2))
    except ValueError as e:
        raise Refused("plugin", f"ValueError: {e}") from None
    try:
        clip_v = clip if clip == "auto" else float(clip)
    except ValueError as e:
        raise Refused("plugin", f"ValueError: {e}") from None
    return {
        "gradient_accumulation_steps": int(gas) if gas.isdigit() else gas,
        "gradient_clipping": clip_v,
        "zero_stage": stage,
        "offload_optimizer_device": env.get("offload_optimizer_device", "none"),
        "offload_param_device": env.get("offload_param_device", "none"),
        "offload_optimizer_nvme_path": "none",  # not exported by the launcher
        "offload_param_nvme_path": "none",
        "zero3_save_16bit_model": env.get("zero3_save_16bit_model", "false") == "true",
    }


# DeepSpeedPlugin._deepspeed_config_checks: YAML settings refused next to deepspeed_config_file
# (ACCELERATE_CONFIG_DS_FIELDS lists the YAML's deepspeed_config keys, plus mixed_precision when
# the YAML sets it).
EXCLUSIVE_WITH_FILE = tuple(PLUGIN_TO_CONFIG) + ("mixed_precision",)


def accelerate_config(acc_yaml: Dict, ds_json: Optional[Dict]) -> Tuple[Dict, str]:
    """(plugin dict after __post_init__, mixed precision) for an Accelerate config that selects
    DeepSpeed; ``ds_json`` is the parsed deepspeed_config_file (None when the YAML has none)."""
    block = acc_yaml.get("deepspeed_config") if isinstance(acc_yaml.get("deepspeed_config"), dict) else {}
    mp = acc_yaml.get("mixed_precision")
    if ds_json is not None:
        fields = list(block) + (["mixed_precision"] if mp is not None else [])
        clash = [f for f in fields if f in EXCLUSIVE_WITH_FILE]
        if clash:
            raise Refused("plugin", "ValueError: When using `deepspeed_config_file`, the following accelerate config "
                          f"variables will be ignored: {clash}")
    mp_s = "no" if mp is None else str(mp).lower()
    return plugin_config(launch_fields(block), ds_json), mp_s


def check_hf_config(cfg: Dict, stage: str) -> None:
    """HfDeepSpeedConfig.__init__ asks for zero_optimization.stage: find_config_node returns a
    non-mapping zero_optimization (the legacy boolean form) as the parent and .get fails."""
    z = cfg.get("zero_optimization")
    if z is not None and not isinstance(z, dict):
        raise Refused(stage, f"AttributeError: {type(z).__name__!r} object has no attribute 'get' "
                      "(zero_optimization is not a mapping)")


def accelerator_checks(acc_yaml: Dict) -> None:
    """Accelerator.__init__ reads ACCELERATE_GRADIENT_ACCUMULATION_STEPS with int() (after the
    plugin and AcceleratorState exist)."""
    block = acc_yaml.get("deepspeed_config") if isinstance(acc_yaml.get("deepspeed_config"), dict) else {}
    v = block.get("gradient_accumulation_steps")
    if v is None:
        return
    try:
        int(str(v))
    except ValueError as e:
        raise Refused("accelerator", f"ValueError: {e}") from None


def plugin_config(fields: Dict[str, Any], ds_json: Optional[Dict]) -> Dict:
    """The dict DeepSpeedPlugin.__post_init__ leaves in ``deepspeed_config``."""
    if ds_json is None:
        cfg = {
            "train_batch_size": "auto",
            "train_micro_batch_size_per_gpu": "auto",
            "gradient_accumulation_steps": fields["gradient_accumulation_steps"],
            "zero_optimization": {
                "stage": fields["zero_stage"],
                "offload_optimizer": {"device": fields["offload_optimizer_device"],
                                      "nvme_path": fields["offload_optimizer_nvme_path"]
                                      if fields["offload_optimizer_device"] == "nvme" else None},
                "offload_param": {"device": fields["offload_param_device"],
                                  "nvme_path": fields["offload_param_nvme_path"]
                                  if fields["offload_param_device"] == "nvme" else None},
                "stage3_gather_16bit_weights_on_model_save": fields["zero3_save_16bit_model"],
            },
        }
        if fields["gradient_clipping"]:
            cfg["gradient_clipping"] = fields["gradient_clipping"]
    else:
        cfg = copy.deepcopy(ds_json)
        if "gradient_accumulation_steps" not in cfg:
            cfg["gradient_accumulation_steps"] = 1
        if "zero_optimization" not in cfg:
            raise Refused("plugin", "ValueError: Please specify the ZeRO optimization config in the DeepSpeed config.")
        check_hf_config(cfg, "plugin")
        for field, key in PLUGIN_TO_CONFIG.items():
            v = fields.get(field)
            if v is None:
                continue
            node, leaf = _node(cfg, key)
            if node is not None and node.get(leaf) == "auto":
                node[leaf] = v
    cfg["steps_per_print"] = math.inf
    return cfg


def set_mixed_precision(cfg: Dict, mixed_precision: str) -> None:
    """DeepSpeedPlugin.set_mixed_precision as AcceleratorState calls it (not ROCm, no MS-AMP)."""
    want = {"fp16.enabled": mixed_precision == "fp16", "bf16.enabled": mixed_precision in ("bf16", "fp8")}
    if mixed_precision == "fp16" and "fp16" not in cfg:
        cfg["fp16"] = {"enabled": True, "auto_cast": True}
    elif mixed_precision in ("bf16", "fp8") and "bf16" not in cfg:
        cfg["bf16"] = {"enabled": True}
    if mixed_precision != "no":
        other = "bf16" if mixed_precision == "fp16" else "fp16"
        blk = cfg.get(other, {})
        if str(blk.get("enabled", "False")).lower() == "true":
            raise Refused("mixed_precision", f"ValueError: `--mixed_precision` arg cannot be set to `{mixed_precision}` "
                          f"when `{other}` is set in the DeepSpeed config file.")
    for dtype in ("fp16", "bf16"):
        if dtype not in cfg:
            cfg[dtype] = {"enabled": False}
    for key, v in want.items():
        node, leaf = _node(cfg, key)
        if node is not None and node.get(leaf) == "auto":
            node[leaf] = v


# transformers/integrations/deepspeed.py::HfTrainerDeepSpeedConfig (commit 3a80c16):
# keys trainer_config_process / trainer_config_finalize fill from TrainingArguments; the
# "match" ones also compare an explicit value with the argument (a mismatch raises ValueError).
TRAINER_MATCH = ("train_micro_batch_size_per_gpu", "gradient_accumulation_steps", "train_batch_size",
                 "gradient_clipping", "optimizer.params.lr", "optimizer.params.betas", "optimizer.params.eps",
                 "optimizer.params.weight_decay", "scheduler.params.warmup_max_lr", "fp16.enabled", "amp.enabled",
                 "amp.opt_level", "bf16.enabled", "scheduler.params.total_num_steps",
                 "scheduler.params.warmup_num_steps")
TRAINER_FILL_ONLY = ("scheduler.params.warmup_min_lr", "zero_optimization.reduce_bucket_size")
TRAINER_FILL_ONLY_ZERO3 = ("zero_optimization.stage3_prefetch_bucket_size",
                           "zero_optimization.stage3_param_persistence_threshold")


def _trainer_fill(cfg: Dict, args: Dict[str, Any], key: str, match: bool, mism: list) -> None:
    node, leaf = _node(cfg, key)
    if node is None or key not in args:
        return
    if node.get(leaf) == "auto":
        node[leaf] = args[key]
    elif match and node.get(leaf) is not None and node.get(leaf) != args[key]:
        mism.append(f"- ds {key}={node.get(leaf)} vs hf {args[key]}")


def trainer_process(cfg: Dict, args: Dict[str, Any]) -> list:
    """HfTrainerDeepSpeedConfig.trainer_config_process (before the plugin exists): ``args`` maps
    each dotted key to its TrainingArguments-derived value. Returns the mismatches it noted
    (they raise only in trainer_finalize)."""
    mism: list = []
    for key in TRAINER_MATCH[:13]:
        _trainer_fill(cfg, args, key, True, mism)
    _trainer_fill(cfg, args, "scheduler.params.warmup_min_lr", False, mism)
    return mism


def trainer_finalize(cfg: Dict, args: Dict[str, Any], mism: list) -> None:
    """trainer_config_finalize (after the plugin and set_mixed_precision): the hidden-size keys
    only when one of them is "auto", the stage3_* ones only under ZeRO-3, then the scheduler
    step counts; raises for any mismatch noted."""
    hidden = ("zero_optimization.reduce_bucket_size",) + TRAINER_FILL_ONLY_ZERO3
    if any(get_value(cfg, k) == "auto" for k in hidden):
        _trainer_fill(cfg, args, "zero_optimization.reduce_bucket_size", False, mism)
        if get_value(cfg, "zero_optimization.stage", -1) == 3:
            for key in TRAINER_FILL_ONLY_ZERO3:
                _trainer_fill(cfg, args, key, False, mism)
    for key in TRAINER_MATCH[13:]:
        _trainer_fill(cfg, args, key, True, mism)
    if mism:
        raise Refused("trainer", "ValueError: Please correct the following DeepSpeed config values that mismatch "
                      "TrainingArguments values: " + " ".join(mism))


def iter_leaves(cfg: Dict, prefix: str = ""):
    for k, v in cfg.items():
        if isinstance(v, dict):
            yield from iter_leaves(v, prefix + k + ".")
        else:
            yield prefix + k, v


def prepare_fill(cfg: Dict, values: Dict[str, Any], torch_optimizer: bool) -> None:
    """Accelerator._prepare_deepspeed after the plugin: ``values`` are the kwargs it computed."""
    if torch_optimizer:
        cfg["zero_allow_untested_optimizer"] = True
    for key, v in list(iter_leaves(cfg)):
        if v == "auto":
            if key not in values:
                raise Refused("prepare_deepspeed", f"ValueError: `{key}` not found in kwargs.")
            node, leaf = _node(cfg, key)
            node[leaf] = values[key]


def client_optimizer_refused(cfg: Dict) -> Optional[bool]:
    """For a script that passes a torch optimizer (no "optimizer" block): True when DeepSpeed
    refuses it - offload of the optimizer is on, but Accelerate swapped the optimizer for
    DeepSpeedCPUAdam only when ``zero_optimization.offload_optimizer.device`` says so (legacy
    ``cpu_offload`` is not looked at). None when Accelerate itself crashes on the check (an
    ``offload_optimizer`` that is null)."""
    z = cfg.get("zero_optimization")
    if not isinstance(z, dict):
        return False
    blk = z.get("offload_optimizer", {})
    if not isinstance(blk, dict):
        return None
    force = cfg.get("zero_force_ds_cpu_optimizer", True)
    swapped = blk.get("device", "none") != "none" and bool(force)
    reads = zero_reads(cfg)
    return bool(reads["offload_optimizer"] in ("cpu", "nvme") and force and not swapped)


def zero_reads(cfg: Dict) -> Dict[str, Any]:
    """What DeepSpeedZeroConfig keeps from ``cfg["zero_optimization"]`` (values already valid):
    "auto" leaves dropped (DeepSpeedConfigModel, strict=False), stage3_* aliases, legacy
    cpu_offload / cpu_offload_param (true: a cpu offload block; false or absent: none)."""
    z = cfg.get("zero_optimization")
    if isinstance(z, bool):
        return {**ZERO_DEFAULTS, "stage": 1 if z else 0, "offload_optimizer": None, "offload_param": None}
    z = {k: v for k, v in (z or {}).items() if v != "auto"}
    out: Dict[str, Any] = dict(ZERO_DEFAULTS)
    for k, v in z.items():
        name = STAGE3_ALIASES.get(k, k)
        if name in out:
            out[name] = v
    out["stage"] = int(out["stage"])
    for which in ("offload_optimizer", "offload_param"):
        blk = z.get(which)
        if isinstance(blk, dict):
            dev = blk.get("device", "none")
            out[which] = "none" if dev == "auto" else dev
        else:
            out[which] = None
    for legacy, which in LEGACY_OFFLOAD.items():
        if z.get(legacy) and out[which] is None:
            out[which] = "cpu"
    if out["gather_16bit_weights_on_model_save"] is False and z.get("stage3_gather_fp16_weights_on_model_save") \
            and "gather_16bit_weights_on_model_save" not in z and "stage3_gather_16bit_weights_on_model_save" not in z:
        out["gather_16bit_weights_on_model_save"] = bool(z["stage3_gather_fp16_weights_on_model_save"])
    return out


def precision_reads(cfg: Dict) -> Dict[str, bool]:
    """fp16 / bf16 enabled as DeepSpeedConfig reads them ("bfloat16" is bf16's legacy name)."""
    out = {}
    for name, keys in (("fp16", ("fp16",)), ("bf16", ("bf16", "bfloat16"))):
        v = False
        for k in keys:
            b = cfg.get(k)
            if isinstance(b, dict):
                e = b.get("enabled", False)
                v = False if e == "auto" else bool(e)
                break
        out[name] = v
    return out

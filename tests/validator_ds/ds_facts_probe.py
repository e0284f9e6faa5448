"""Subprocess probe: dump the facts deepspeed 0.19.8 / accelerate 1.15.0 / torch hold, as JSON.
Run by test_ds_facts.py (keeps torch/deepspeed out of the pytest process)."""
import enum
import inspect
import json
import os
import sys
import typing
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'sub-skills',
                                'distributed-training-backends', 'scripts'))

warnings.filterwarnings("ignore")
import contextlib  # noqa: E402

with contextlib.redirect_stdout(sys.stderr):
    import torch
    import deepspeed
    from deepspeed.runtime import config as dsc
    from deepspeed.runtime import lr_schedules
    from deepspeed.runtime.zero.config import DeepSpeedZeroConfig
    from deepspeed.runtime.zero.offload_config import (DeepSpeedZeroOffloadOptimizerConfig,
                                                       DeepSpeedZeroOffloadParamConfig)
    from deepspeed.runtime.precision_config import DeepSpeedFP16Config, DeepSpeedBF16Config
    from deepspeed.monitor.config import TensorBoardConfig, WandbConfig, CSVConfig, CometConfig
    from deepspeed.comm.config import CommsLoggerConfig
    from deepspeed.compile.config import CompileConfig
    from deepspeed.runtime.tensor_parallel.config import TPTrainingConfig
    from deepspeed.inference.config import WeightQuantConfig
    from deepspeed.runtime.zenflow.zenflow_config import ZenFlowConfig
    from deepspeed.runtime.zero.leaf_module_config import DeepSpeedZeroLeafModuleConfig
    from deepspeed.utils.config import DeepSpeedThroughputTimerConfig
    import accelerate
    from accelerate.utils import DeepSpeedPlugin

MODELS = {"zero_optimization": DeepSpeedZeroConfig, "offload_param": DeepSpeedZeroOffloadParamConfig,
          "offload_optimizer": DeepSpeedZeroOffloadOptimizerConfig, "fp16": DeepSpeedFP16Config,
          "bf16": DeepSpeedBF16Config, "tensorboard": TensorBoardConfig, "wandb": WandbConfig,
          "csv_monitor": CSVConfig, "comet": CometConfig, "comms_logger": CommsLoggerConfig,
          "compile": CompileConfig, "hybrid_engine": dsc.HybridEngineConfig, "tensor_parallel": TPTrainingConfig,
          "weight_quantization": WeightQuantConfig, "zenflow": ZenFlowConfig,
          "leaf_module": DeepSpeedZeroLeafModuleConfig, "timers_throughput": DeepSpeedThroughputTimerConfig}


def kind(ann):
    origin = typing.get_origin(ann)
    args = [a for a in typing.get_args(ann) if a is not type(None)]
    optional = origin is typing.Union and type(None) in typing.get_args(ann)
    if optional and len(args) == 1:
        k, _, ch = kind(args[0])
        return k, True, ch
    if isinstance(ann, type) and issubclass(ann, enum.Enum):
        return "enum", False, [m.value for m in ann]
    if origin is typing.Literal:
        return "enum", False, list(typing.get_args(ann))
    if ann is bool:
        return "bool", False, []
    if ann is int:
        return "int", False, []
    if ann is float:
        return "float", False, []
    if ann is str or (isinstance(ann, type) and issubclass(ann, os.PathLike)):
        return "str", False, []
    if ann is list or origin is list:
        inner = typing.get_args(ann)
        if inner and typing.get_origin(inner[0]) is typing.Literal:
            return "list", False, list(typing.get_args(inner[0]))
        return "list", False, []
    if ann is dict or origin is dict or ann is typing.Dict:
        return "dict", False, []
    if isinstance(ann, type) and issubclass(ann, deepspeed.runtime.config_utils.DeepSpeedConfigModel):
        return "model", False, []
    return "other:" + str(ann), False, []


out = {"models": {}}
for name, cls in MODELS.items():
    fields = {}
    for fn, f in cls.model_fields.items():
        k, opt, ch = kind(f.annotation)
        meta = {}
        for m in f.metadata:
            for a in ("ge", "gt", "le", "lt"):
                if getattr(m, a, None) is not None:
                    meta[a] = getattr(m, a)
        d = f.default
        try:
            json.dumps(d)
        except TypeError:
            d = repr(d)
        extra = f.json_schema_extra or {}
        fields[fn] = {"kind": k, "optional": opt, "choices": ch, "alias": f.alias, "default": d, **meta,
                      "deprecated": extra.get("new_param") if extra.get("deprecated") else None}
    out["models"][name] = fields
out["removed_top"] = sorted(dsc._REMOVED_TOP_LEVEL_CONFIG_KEYS)
out["removed_zero"] = sorted(dsc._REMOVED_ZERO_CONFIG_KEYS)
out["ds_optimizers"] = sorted(dsc.DEEPSPEED_OPTIMIZERS)
out["lr_schedules"] = sorted(lr_schedules.VALID_LR_SCHEDULES)
sched = {}
for n in lr_schedules.VALID_LR_SCHEDULES:
    sig = inspect.signature(getattr(lr_schedules, n).__init__)
    ps = [p for p in sig.parameters.values() if p.name not in ("self", "optimizer")]
    sched[n] = {"params": [p.name for p in ps], "required": [p.name for p in ps if p.default is p.empty]}
out["sched"] = sched
out["torch_optim"] = sorted(n for n in dir(torch.optim) if isinstance(getattr(torch.optim, n), type)
                            and issubclass(getattr(torch.optim, n), torch.optim.Optimizer))
out["torch_sched"] = sorted(n for n in dir(torch.optim.lr_scheduler)
                            if isinstance(getattr(torch.optim.lr_scheduler, n), type))
out["dtypes"] = {m.name: [v for v in m.values if isinstance(v, str)] for m in dsc.DtypeEnum} \
    if hasattr(next(iter(dsc.DtypeEnum)), "values") else None
out["dtype_values"] = {m.name: [str(v) for v in (m._all_values if hasattr(m, "_all_values") else [])]
                       for m in dsc.DtypeEnum}
out["fused_adam_params"] = [p for p in inspect.signature(deepspeed.ops.adam.FusedAdam.__init__).parameters
                            if p not in ("self", "params")]
root = os.path.dirname(deepspeed.__file__)
texts = []
for dp, _, fs in os.walk(root):
    for f in fs:
        if f.endswith(".py"):
            with open(os.path.join(dp, f), encoding="utf-8", errors="replace") as fh:
                texts.append(fh.read())
out["ds_source"] = "\n".join(texts)
aroot = os.path.dirname(accelerate.__file__)
out["acc_post_init"] = inspect.getsource(DeepSpeedPlugin.__post_init__)
out["acc_checks"] = inspect.getsource(DeepSpeedPlugin._deepspeed_config_checks)
with open(os.path.join(aroot, "accelerator.py"), encoding="utf-8") as fh:
    out["acc_accelerator"] = fh.read()
out["acc_set_mp"] = inspect.getsource(DeepSpeedPlugin.set_mixed_precision)
import importlib  # noqa: E402

ocls = {}
with contextlib.redirect_stdout(sys.stderr):
    from backend_validator import deepspeed as VD  # noqa: E402
    for t, classes in VD.OPTIMIZER_CLASSES.items():
        names = set()
        for dotted in classes:
            mod, _, cls = dotted.rpartition(".")
            c = getattr(importlib.import_module(mod), cls)
            names |= {p for p in inspect.signature(c.__init__).parameters if p not in ("self", "params", "model_params")}
        ocls[t] = sorted(names)
out["optimizer_ctor_params"] = ocls
out["versions"] = {"deepspeed": deepspeed.__version__, "accelerate": accelerate.__version__}
json.dump(out, sys.stdout)

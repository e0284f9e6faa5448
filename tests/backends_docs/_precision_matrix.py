"""Generator for the run-backed tables of
sub-skills/distributed-training-backends/references/mixed-precision-sources.md (where the mixed-precision value
comes from per path, what zero.Init / FSDP use), fsdp-plugin-versions.md (FullyShardedDataParallelPlugin fields per
FSDP version) and the state-singleton block of configuration-and-cli/references/state-in-effect.md
(transformers 5.25.0, accelerate 1.15.0, deepspeed 0.19.8, torch 2.13.0, CPU, one process, DS_ACCELERATOR=cpu).

Each case runs in its own child (`python _precision_matrix.py case NAME`), one rank (RANK=LOCAL_RANK=0,
WORLD_SIZE=1, gloo), with the environment `accelerate launch` would export (ACCELERATE_USE_DEEPSPEED,
ACCELERATE_DEEPSPEED_ZERO_STAGE, ACCELERATE_MIXED_PRECISION, ...). The DeepSpeed and FSDP cases use the GPU
stand-ins of _trainer_backend_matrix.py (gloo on the branch a GPU host takes). Recorded: what
TrainingArguments computed, the fp16/bf16 `enabled` values in the DeepSpeed config at each step, the dtype of the
parameters `from_pretrained` built under zero.Init, what the Accelerator reports, the FSDP policy dtypes, the
errors raised.

usage: python tests/backends_docs/_precision_matrix.py capture | render | write | --check   (about 3 minutes)
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import _generated_blocks as gb  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CAPTURE = HERE / "precision_capture.json"
REFS = ROOT / "sub-skills" / "distributed-training-backends" / "references"
REF = {"precision-trainer": REFS / "mixed-precision-sources.md",
       "precision-accelerator": REFS / "mixed-precision-sources.md",
       "state-singletons": ROOT / "sub-skills" / "configuration-and-cli" / "references" / "state-in-effect.md"}

Z3 = {"zero_optimization": {"stage": 3}, "train_micro_batch_size_per_gpu": "auto", "train_batch_size": "auto",
      "gradient_accumulation_steps": "auto"}
ENV_DS = {"ACCELERATE_USE_DEEPSPEED": "true", "ACCELERATE_DEEPSPEED_ZERO_STAGE": "3",
          "ACCELERATE_DEEPSPEED_ZERO3_INIT": "true"}
# Trainer cases: label -> (environment, TrainingArguments extras, DeepSpeed JSON written to ds.json or None)
TRAINER = {
    "launch env no, no flag": ({**ENV_DS, "ACCELERATE_MIXED_PRECISION": "no"}, {}, None),
    "launch env no, --bf16": ({**ENV_DS, "ACCELERATE_MIXED_PRECISION": "no"}, {"bf16": True}, None),
    "launch env fp16, --bf16": ({**ENV_DS, "ACCELERATE_MIXED_PRECISION": "fp16"}, {"bf16": True}, None),
    "launch env bf16, no flag": ({**ENV_DS, "ACCELERATE_MIXED_PRECISION": "bf16"}, {}, None),
    "launch env bf16, --fp16": ({**ENV_DS, "ACCELERATE_MIXED_PRECISION": "bf16"}, {"fp16": True}, None),
    "launch env bf16 + file bf16 auto, no flag": ({**ENV_DS, "ACCELERATE_MIXED_PRECISION": "bf16",
                                                   "ACCELERATE_DEEPSPEED_CONFIG_FILE": "ds.json"}, {},
                                                  {**Z3, "bf16": {"enabled": "auto"}}),
    "launch env fp16 + file bf16 true": ({**ENV_DS, "ACCELERATE_MIXED_PRECISION": "fp16",
                                          "ACCELERATE_DEEPSPEED_CONFIG_FILE": "ds.json"}, {},
                                         {**Z3, "bf16": {"enabled": True}}),
    "launch env no + file bf16 true, no flag": ({**ENV_DS, "ACCELERATE_MIXED_PRECISION": "no",
                                                 "ACCELERATE_DEEPSPEED_CONFIG_FILE": "ds.json"}, {},
                                                {**Z3, "bf16": {"enabled": True}}),
    "--deepspeed bf16 auto, --bf16": ({}, {"bf16": True}, {**Z3, "bf16": {"enabled": "auto"}}),
    "--deepspeed bf16 auto, no flag": ({}, {}, {**Z3, "bf16": {"enabled": "auto"}}),
    "--deepspeed bf16 true, no flag": ({}, {}, {**Z3, "bf16": {"enabled": True}}),
    "--deepspeed no blocks, --bf16": ({}, {"bf16": True}, dict(Z3)),
    "--deepspeed fp16 true, --bf16": ({}, {"bf16": True}, {**Z3, "fp16": {"enabled": True}}),
    "fsdp, --bf16": ({}, {"bf16": True, "fsdp": True}, None),
    "fsdp + launch env fp16, no flag": ({"ACCELERATE_MIXED_PRECISION": "fp16"}, {"fsdp": True}, None),
}
# plain Accelerator cases: label -> (environment, what the child builds; see _accel_case)
ACCEL = {
    "env fp16, Accelerator(mixed_precision=bf16)": ({"ACCELERATE_MIXED_PRECISION": "fp16"}, "plain"),
    "env bf16, Accelerator()": ({"ACCELERATE_MIXED_PRECISION": "bf16"}, "plain_none"),
    "DeepSpeedPlugin(zero_stage=3), mixed_precision=bf16": ({}, "ds_bf16"),
    "DeepSpeedPlugin(zero_stage=3), no mixed_precision": ({}, "ds_none"),
    "JSON bf16 auto, mixed_precision=bf16": ({}, "ds_json_auto"),
    "JSON bf16 true, mixed_precision=fp16": ({}, "ds_json_clash"),
    "FSDP2 plugin, mixed_precision=bf16": ({}, "fsdp2"),
    "FSDP1 plugin, mixed_precision=bf16": ({}, "fsdp1"),
    "FSDP2 plugin with its own policy (fp16), mixed_precision=bf16": ({}, "fsdp2_own"),
    "FSDP2 plugin mixed_precision_policy='fp16', mixed_precision=bf16": ({}, "fsdp2_str"),
}
FSDP_FIELDS = [  # (field, value given, extra kwargs)
    ("sharding_strategy", "SHARD_GRAD_OP", {}),
    ("reshard_after_forward", "SHARD_GRAD_OP", {}),
    ("reshard_after_forward", False, {}),
    ("backward_prefetch", "BACKWARD_POST", {}),
    ("forward_prefetch", True, {}),
    ("use_orig_params", True, {}),
    ("sync_module_states", True, {}),
    ("cpu_ram_efficient_loading", True, {}),
    ("activation_checkpointing_offload", True, {"activation_checkpointing": True}),
    ("state_dict_type", "LOCAL_STATE_DICT", {}),
    ("ignored_modules", "lm_head", {}),
    ("ignored_modules (torch < 2.7 forced)", "lm_head", {}),
    ("mixed_precision_policy", "bf16", {}),
    ("mixed_precision_policy", {"param_dtype": "torch.bfloat16"}, {}),
]
CASES = ["trainer:" + k for k in TRAINER] + ["accel:" + k for k in ACCEL] + ["fsdp_fields", "singletons"]


def _err(e: BaseException) -> str:
    return f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"


def _flags(ds) -> str:
    if ds is None:
        return "-"
    return f"fp16={ds.get('fp16', {}).get('enabled', 'absent')} bf16={ds.get('bf16', {}).get('enabled', 'absent')}"


def _trainer_case(label: str, out: dict) -> None:
    env, extra, ds_json = TRAINER[label]
    import importlib

    import _trainer_backend_matrix as tbm
    importlib.import_module("deepspeed.comm.torch").build_shm_op = lambda: None
    if extra.get("fsdp"):
        tbm._fsdp_stand_in()
    else:
        tbm._gpu_stand_in()
    import torch
    import transformers.training_args as ta
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments
    from transformers.integrations import deepspeed as tds

    ta.is_torch_bf16_gpu_available = lambda: True  # stand-in for a bf16-capable GPU host (the check is host-only)

    GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=64, n_positions=16)).save_pretrained("m")
    kw = dict(extra)
    if ds_json is not None:
        Path("ds.json").write_text(json.dumps(ds_json))
        if not env.get("ACCELERATE_DEEPSPEED_CONFIG_FILE"):
            kw["deepspeed"] = "ds.json"
    try:
        args = TrainingArguments("o", report_to=[], **kw)
    except Exception as e:  # noqa: BLE001
        out["args_error"] = _err(e)
        return
    out["args_mixed_precision"] = args.mixed_precision
    plug = args.deepspeed_plugin
    out["ds_after_args"] = _flags(plug.deepspeed_config) if plug else "-"
    out["zero3_enabled"] = tds.is_deepspeed_zero3_enabled()
    mismatches = getattr(getattr(args, "hf_deepspeed_config", None), "mismatches", None)
    model = GPT2LMHeadModel.from_pretrained("m")
    p = model.transformer.h[0].attn.c_attn.weight
    out["param_dtype"] = str(getattr(p, "ds_tensor", p).dtype).replace("torch.", "")
    out["partitioned"] = hasattr(p, "ds_id")
    try:
        tr = Trainer(model=model, args=args)
    except Exception as e:  # noqa: BLE001
        out["trainer_error"] = _err(e)
        return
    st = tr.accelerator.state
    out["accelerator_mixed_precision"] = st.mixed_precision
    if st.deepspeed_plugin is not None:
        out["ds_after_trainer"] = _flags(st.deepspeed_plugin.deepspeed_config)
    hf = getattr(st.deepspeed_plugin, "hf_ds_config", None)
    mismatches = getattr(hf, "mismatches", None) or mismatches
    out["mismatches"] = list(mismatches or [])
    fp = getattr(st, "fsdp_plugin", None)
    if fp is not None and fp.mixed_precision_policy is not None:
        out["fsdp_param_dtype"] = str(fp.mixed_precision_policy.param_dtype).replace("torch.", "")
    out["torch"] = torch.__version__.split("+")[0]


def _accel_case(label: str, out: dict) -> None:
    kind = ACCEL[label][1]
    import importlib

    import _trainer_backend_matrix as tbm
    if kind.startswith("ds"):
        importlib.import_module("deepspeed.comm.torch").build_shm_op = lambda: None
        tbm._gpu_stand_in()
    elif kind.startswith("fsdp"):
        tbm._fsdp_stand_in()
    import torch
    from accelerate import Accelerator
    from accelerate.utils import DeepSpeedPlugin, FullyShardedDataParallelPlugin

    try:
        if kind == "plain":
            acc = Accelerator(cpu=True, mixed_precision="bf16")
        elif kind == "plain_none":
            acc = Accelerator(cpu=True)
        elif kind.startswith("ds"):
            if kind in ("ds_bf16", "ds_none"):
                plug = DeepSpeedPlugin(zero_stage=3, gradient_accumulation_steps=1)
            else:
                blk = {"enabled": "auto"} if kind == "ds_json_auto" else {"enabled": True}
                plug = DeepSpeedPlugin(hf_ds_config={**Z3, "gradient_accumulation_steps": 1, "bf16": blk})
            mp = {"ds_bf16": "bf16", "ds_none": None, "ds_json_auto": "bf16", "ds_json_clash": "fp16"}[kind]
            acc = Accelerator(deepspeed_plugin=plug, mixed_precision=mp)
            out["ds_config"] = _flags(plug.deepspeed_config)
            out["distributed_type"] = str(acc.distributed_type).split(".")[-1]
            out["mixed_precision"] = acc.mixed_precision
            import deepspeed

            cfg = {**plug.deepspeed_config, "train_batch_size": 1, "train_micro_batch_size_per_gpu": 1,
                   "gradient_accumulation_steps": 1}
            with deepspeed.zero.Init(config_dict_or_path=cfg):
                lin = torch.nn.Linear(4, 4)
            out["zero_init_dtype"] = str(lin.weight.ds_tensor.dtype).replace("torch.", "")
        else:
            from torch.distributed.fsdp import MixedPrecisionPolicy
            version = 1 if kind == "fsdp1" else 2
            own = {"fsdp2_own": MixedPrecisionPolicy(param_dtype=torch.float16, reduce_dtype=torch.float16),
                   "fsdp2_str": "fp16"}.get(kind)
            plug = FullyShardedDataParallelPlugin(fsdp_version=version, mixed_precision_policy=own)
            acc = Accelerator(fsdp_plugin=plug, mixed_precision="bf16")
            pol = acc.state.fsdp_plugin.mixed_precision_policy
            out["fsdp_policy"] = ", ".join(f"{k}={str(getattr(pol, k)).replace('torch.', '')}"
                                           for k in ("param_dtype", "reduce_dtype", "buffer_dtype", "output_dtype")
                                           if hasattr(pol, k))
    except Exception as e:  # noqa: BLE001
        out["error"] = _err(e)
        return
    out["distributed_type"] = str(acc.distributed_type).split(".")[-1]
    out["mixed_precision"] = acc.mixed_precision


def _fsdp_fields(out: dict) -> None:
    import logging

    import accelerate.utils.dataclasses as dc
    from accelerate.utils import FullyShardedDataParallelPlugin

    class Grab(logging.Handler):
        def __init__(self):
            super().__init__()
            self.msgs = []

        def emit(self, record):
            self.msgs.append(record.getMessage())

    grab = Grab()
    logging.getLogger("accelerate.utils.dataclasses").addHandler(grab)
    real_ver = dc.is_torch_version
    for field, value, more in FSDP_FIELDS:
        name = field.split(" ")[0]
        for version in (1, 2):
            grab.msgs.clear()
            if "forced" in field:
                dc.is_torch_version = lambda op, v, _r=real_ver: True if (op, v) == ("<", "2.7.0") else _r(op, v)
            if isinstance(value, dict):
                import torch
                v = {"param_dtype": torch.bfloat16, "reduce_dtype": torch.bfloat16,
                     ("buffer_dtype" if version == 1 else "output_dtype"): torch.bfloat16}
            else:
                v = value
            saved = dict(os.environ)  # cpu_ram_efficient_loading writes FSDP_CPU_RAM_EFFICIENT_LOADING
            try:
                import warnings
                with warnings.catch_warnings(record=True) as w:
                    warnings.simplefilter("always")
                    p = FullyShardedDataParallelPlugin(fsdp_version=version, **{name: v}, **more)
                got = getattr(p, name)
                got = type(got).__name__ if name == "mixed_precision_policy" else str(got)
                msgs = [m for m in grab.msgs] + [str(x.message) for x in w]
                res = f"kept: {got}" if not msgs else f"warned, now {got}: {msgs[0].splitlines()[-1][:90]}"
            except Exception as e:  # noqa: BLE001
                res = "raises " + _err(e)
            finally:
                dc.is_torch_version = real_ver
                os.environ.clear()
                os.environ.update(saved)
            out[f"{field}={value!r}|v{version}"] = res
    out["wrap"] = wrap_without_no_split()


def wrap_without_no_split() -> dict:
    """TRANSFORMER_BASED_WRAP with no class names: how many submodules each FSDP version's policy wraps, for a
    model without `_no_split_modules` and for the same model declaring it (set-9 close call s9-acb-g04)."""
    import torch
    from accelerate.utils import FullyShardedDataParallelPlugin
    from accelerate.utils.fsdp_utils import fsdp2_prepare_auto_wrap_policy

    class Blk(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = torch.nn.ModuleList([Blk(), Blk()])
            self.head = torch.nn.Linear(4, 2)

    got = {}
    for declared in (False, True):
        for names in (None, "Linear, ReLU"):
            model = Net()
            if declared:
                model._no_split_modules = ["Blk"]
            for version in (1, 2):
                key = f"no_split={'Blk' if declared else 'absent'} names={names}|v{version}"
                try:
                    p = FullyShardedDataParallelPlugin(fsdp_version=version, auto_wrap_policy="TRANSFORMER_BASED_WRAP",
                                                       transformer_cls_names_to_wrap=names)
                    if version == 1:
                        p.set_auto_wrap_policy(model)
                        wrapped = [n for n, m in model.named_modules() if n and p.auto_wrap_policy(m, False, 0)]
                    else:
                        pol = fsdp2_prepare_auto_wrap_policy(p, model)
                        wrapped = [n for n, m in model.named_modules() if n and pol(m)]
                    got[key] = "wraps " + (", ".join(wrapped) or "nothing below the root")
                except Exception as e:  # noqa: BLE001
                    got[key] = "raises " + _err(e)
    return got


def _singletons(out: dict) -> None:
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState, GradientState, PartialState

    steps = []

    def step(what, fn):
        try:
            got = fn()
        except Exception as e:  # noqa: BLE001
            got = "raises " + _err(e)
        steps.append([what, str(got)])

    step("`PartialState()` before any Accelerator",
         lambda: f"ok, distributed_type {PartialState().distributed_type}".replace("DistributedType.", ""))
    step("`AcceleratorState()` before any Accelerator", lambda: AcceleratorState().mixed_precision)
    step("`Accelerator(cpu=True)` right after that failed call", lambda: Accelerator(cpu=True).mixed_precision)
    AcceleratorState._reset_state()
    steps.append(["`AcceleratorState._reset_state()`", "clears the half-built shared state"])
    a = Accelerator(cpu=True, mixed_precision="bf16", gradient_accumulation_steps=2)
    steps.append(["`Accelerator(cpu=True, mixed_precision='bf16', gradient_accumulation_steps=2)`",
                  f"mixed_precision {a.mixed_precision}"])
    step("`AcceleratorState()` afterwards",
         lambda: f"same state: {AcceleratorState() .__dict__ is AcceleratorState._shared_state}, "
                 f"mixed_precision {AcceleratorState().mixed_precision}")
    step("`AcceleratorState(mixed_precision='bf16')` (same value)", lambda: AcceleratorState(mixed_precision="bf16").mixed_precision)
    step("`AcceleratorState(mixed_precision='fp16')`", lambda: AcceleratorState(mixed_precision="fp16"))
    step("`Accelerator(mixed_precision='fp16')` (a second Accelerator)", lambda: Accelerator(mixed_precision="fp16"))
    step("`Accelerator()` (a second one, no arguments)",
         lambda: f"ok, mixed_precision {Accelerator().mixed_precision}, shares state: {Accelerator().state.__dict__ is a.state.__dict__}")
    step("`Accelerator(gradient_accumulation_steps=4)` (a second one)",
         lambda: f"ok, first Accelerator's gradient_accumulation_steps now {(Accelerator(gradient_accumulation_steps=4), a.gradient_accumulation_steps)[1]}, GradientState num_steps {GradientState().num_steps}")
    step("`PartialState(cpu=True)` afterwards", lambda: f"same state: {PartialState(cpu=True).__dict__ is PartialState._shared_state}")
    AcceleratorState._reset_state(reset_partial_state=True)
    GradientState._reset_state()
    step("`AcceleratorState._reset_state(True)`, then `Accelerator(cpu=True, mixed_precision='fp16')`",
         lambda: f"ok, mixed_precision {Accelerator(cpu=True, mixed_precision='fp16').mixed_precision}")
    out["steps"] = steps


def case_main(name: str) -> None:
    out: dict = {}
    try:
        import warnings
        warnings.filterwarnings("ignore")
        if name.startswith("trainer:"):
            _trainer_case(name[8:], out)
        elif name.startswith("accel:"):
            _accel_case(name[6:], out)
        elif name == "fsdp_fields":
            _fsdp_fields(out)
        else:
            _singletons(out)
    except Exception as e:  # recorded, the test refuses it
        import traceback
        out["crash"] = _err(e)
        out["tb"] = traceback.format_exc()[-1500:]
    Path("rank0.json").write_text(json.dumps(out, indent=1, sort_keys=True, default=str))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def collect() -> dict:
    root = Path(tempfile.mkdtemp(prefix="precision"))
    base = gb.child_env(root, DS_ACCELERATOR="cpu", TOKENIZERS_PARALLELISM="false",
                        TORCH_EXTENSIONS_DIR=str(root / "ext"))
    data = {}
    for i, case in enumerate(CASES):
        d = root / f"c{i}"
        d.mkdir()
        env = dict(base)
        if case.startswith("trainer:"):
            env.update(TRAINER[case[8:]][0])
        elif case.startswith("accel:"):
            env.update(ACCEL[case[6:]][0])
        if case != "singletons" and case != "fsdp_fields":
            env.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", LOCAL_WORLD_SIZE="1", MASTER_ADDR="127.0.0.1",
                       MASTER_PORT=str(29811 + i))
        got = gb.run_ranks([sys.executable, str(Path(__file__).resolve()), "case", case], [env], d, 240, "crash", 3000)
        data[case] = got["rank0"]
        print(case, "crash" if "crash" in got["rank0"] else "ok", file=sys.stderr, flush=True)
    return data


def load_capture() -> dict:
    return gb.load_json(CAPTURE)


def _cell(x) -> str:
    return str(x).replace("|", "\\|") if x not in (None, "") else "-"


def render(data: dict) -> dict:
    rows = ["| Path (what the launcher exported, what the script passed) | `args.mixed_precision` | DeepSpeed "
            "`fp16`/`bf16` enabled after `TrainingArguments` | `from_pretrained` parameters (zero.Init) | "
            "Accelerator's `mixed_precision` | after `Trainer(...)` | error or mismatch |",
            "| --- | --- | --- | --- | --- | --- | --- |"]
    for k in TRAINER:
        r = data["trainer:" + k]
        part = f"{r.get('param_dtype')}{' partitioned' if r.get('partitioned') else ''}" if "param_dtype" in r else "-"
        after = r.get("ds_after_trainer") or (f"FSDP param_dtype {r['fsdp_param_dtype']}" if "fsdp_param_dtype" in r
                                              else "-")
        err = r.get("args_error") or r.get("trainer_error") or "; ".join(r.get("mismatches") or []) or "-"
        rows.append(f"| {k} | {_cell(r.get('args_mixed_precision'))} | {_cell(r.get('ds_after_args'))} | {part} | "
                    f"{_cell(r.get('accelerator_mixed_precision'))} | {_cell(after)} | {_cell(err)} |")
    trainer = "\n".join(rows) + "\n"
    rows = ["| Accelerator built with | `distributed_type` | `accelerator.mixed_precision` | DeepSpeed config / FSDP "
            "policy | zero.Init parameter dtype | error |", "| --- | --- | --- | --- | --- | --- |"]
    for k in ACCEL:
        r = data["accel:" + k]
        rows.append(f"| {k} | {_cell(r.get('distributed_type'))} | {_cell(r.get('mixed_precision'))} | "
                    f"{_cell(r.get('ds_config') or r.get('fsdp_policy'))} | {_cell(r.get('zero_init_dtype'))} | "
                    f"{_cell(r.get('error'))} |")
    accel = "\n".join(rows) + "\n"
    rows = ["| Call, in order (one process) | Result |", "| --- | --- |"]
    rows += [f"| {w} | {_cell(g)} |" for w, g in data["singletons"]["steps"]]
    single = "\n".join(rows) + "\n"
    return {"precision-trainer": trainer, "precision-accelerator": accel,
            "state-singletons": single}


USAGE = __doc__.strip().splitlines()[-1]

if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "case":
        case_main(sys.argv[2])
    else:
        gb.cli(sys.argv[1] if len(sys.argv) > 1 else "", page=REF, capture=CAPTURE, collect=collect,
               render=render, usage=USAGE)

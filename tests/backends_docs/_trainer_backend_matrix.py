"""Generator for the run-backed tables of
sub-skills/distributed-training-backends/references/transformers-trainer-backends.md and
transformers-trainer-checkpoint-files.md
(transformers 5.25.0, accelerate 1.15.0, deepspeed 0.19.8, torch 2.13.0, CPU, gloo).

Per case (one process; DDP, DeepSpeed ZeRO-2 / ZeRO-3 (gather flag off and on), FSDP1, FSDP2 with
FULL_STATE_DICT and SHARDED_STATE_DICT, each at 2 ranks) every rank runs this file with `rank CASE`:
a 1-layer GPT-2 (hidden 16), per_device_train_batch_size 1, gradient_accumulation_steps 2, max_steps 2,
save_steps 1, then `trainer.save_model(final)`, then a second Trainer resumed from checkpoint-1 to step 2.
Recorded per rank: the Accelerator the Trainer built (distributed type, plugin fields, accumulation
steps), the order of optimizer / scheduler creation and `accelerator.prepare` calls inside `train()`,
the classes behind `trainer.model` / `trainer.model_wrapped` / optimizer / scheduler, every file each
rank opened for writing while saving (an audit hook on `open`, plus transformers' safetensors writer),
the loaders a resume calls, and the step-2 loss of both runs. The DDP and FSDP cases run with
ACCELERATE_GRADIENT_ACCUMULATION_STEPS=4 in the environment (what `accelerate launch` exports from a
config saying 4).

usage: python tests/backends_docs/_trainer_backend_matrix.py capture | render | write | --check
       (about 4 minutes on 2 cores for `capture` / `--check`; the test only compares the page with the capture)
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import _generated_blocks as gb  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CAPTURE = HERE / "trainer_backend_capture.json"
REFS = ROOT / "sub-skills" / "distributed-training-backends" / "references"
REF = {"trainer-backends-accel": REFS / "transformers-trainer-backends.md",
       "trainer-backends-wrap": REFS / "transformers-trainer-backends.md",
       "trainer-backends-save": REFS / "transformers-trainer-checkpoint-files.md",
       "trainer-backends-resume": REFS / "transformers-trainer-checkpoint-files.md"}

DS_BASE = {"train_micro_batch_size_per_gpu": "auto", "train_batch_size": "auto",
           "gradient_accumulation_steps": "auto", "gradient_clipping": "auto"}
# case -> (ranks, TrainingArguments extras, environment extras)
CASES = {
    "single": (1, {"use_cpu": True}, {}),
    "ddp": (2, {"use_cpu": True}, {"ACCELERATE_GRADIENT_ACCUMULATION_STEPS": "4"}),
    "zero2": (2, {"deepspeed": {**DS_BASE, "zero_optimization": {"stage": 2}}}, {}),
    "zero3": (2, {"deepspeed": {**DS_BASE, "zero_optimization": {"stage": 3}}}, {}),
    "zero3_gather": (2, {"deepspeed": {**DS_BASE, "zero_optimization": {
        "stage": 3, "stage3_gather_16bit_weights_on_model_save": True}}}, {}),
    # no stand-in: what a CPU-only host does with deepspeed= and no use_cpu
    "zero2_cpu_plain": (2, {"deepspeed": {**DS_BASE, "zero_optimization": {"stage": 2}}}, {"PROBE_NO_STAND_IN": "1"}),
    "zero2_use_cpu": (2, {"use_cpu": True, "deepspeed": {**DS_BASE, "zero_optimization": {"stage": 2}}}, {}),
    # the accelerate-launch route: no wrapper argument, the backend from the exported environment
    "ds_env": (2, {}, {"ACCELERATE_USE_DEEPSPEED": "true", "ACCELERATE_DEEPSPEED_ZERO_STAGE": "2",
                       "ACCELERATE_GRADIENT_ACCUMULATION_STEPS": "2", "ACCELERATE_MIXED_PRECISION": "no"}),
    "ds_env_ga4": (2, {}, {"ACCELERATE_USE_DEEPSPEED": "true", "ACCELERATE_DEEPSPEED_ZERO_STAGE": "2",
                           "ACCELERATE_GRADIENT_ACCUMULATION_STEPS": "4", "ACCELERATE_MIXED_PRECISION": "no"}),
    "fsdp1": (2, {"fsdp": True, "fsdp_config": {"version": 1, "sync_module_states": False,
                                                "state_dict_type": "SHARDED_STATE_DICT"}},
              {"ACCELERATE_GRADIENT_ACCUMULATION_STEPS": "4"}),
    "fsdp2": (2, {"fsdp": True}, {"ACCELERATE_GRADIENT_ACCUMULATION_STEPS": "4"}),
    "fsdp2_use_cpu": (2, {"use_cpu": True, "fsdp": True}, {}),
    "fsdp2_sharded": (2, {"fsdp": True, "fsdp_config": {"state_dict_type": "SHARDED_STATE_DICT"}},
                      {"ACCELERATE_GRADIENT_ACCUMULATION_STEPS": "4"}),
    # resumed with the other state_dict_type (RESUME_WITH)
    "fsdp2_sharded_to_full": (2, {"fsdp": True, "fsdp_config": {"state_dict_type": "SHARDED_STATE_DICT"}}, {}),
    "fsdp2_full_to_sharded": (2, {"fsdp": True}, {}),
    # weights-only checkpoints (save_only_model=True) resumed
    "zero2_save_only": (2, {"save_only_model": True, "deepspeed": {**DS_BASE, "zero_optimization": {"stage": 2}}}, {}),
    "fsdp2_save_only": (2, {"save_only_model": True, "fsdp": True}, {}),
    # the same route for FSDP
    "fsdp_env": (2, {}, {"ACCELERATE_USE_FSDP": "true", "FSDP_VERSION": "2", "FSDP_AUTO_WRAP_POLICY": "TRANSFORMER_BASED_WRAP",
                         "FSDP_TRANSFORMER_CLS_TO_WRAP": "GPT2Block"}),
    # both: the Trainer's fsdp=True against a launcher config saying FSDP1 / SHARDED / size-based wrapping
    "fsdp2_vs_env": (2, {"fsdp": True}, {"ACCELERATE_USE_FSDP": "true", "FSDP_VERSION": "1",
                                         "FSDP_STATE_DICT_TYPE": "SHARDED_STATE_DICT", "FSDP_AUTO_WRAP_POLICY": "SIZE_BASED_WRAP",
                                         "FSDP_MIN_NUM_PARAMS": "100"}),
}
# case -> TrainingArguments of the resuming Trainer that differ from the saving one
RESUME_WITH = {"fsdp2_sharded_to_full": {"fsdp_config": {"state_dict_type": "FULL_STATE_DICT"}},
               "fsdp2_full_to_sharded": {"fsdp_config": {"state_dict_type": "SHARDED_STATE_DICT"}}}
SAVE_ONLY = {"zero2_save_only": "zero2", "fsdp2_save_only": "fsdp2"}  # case -> the case it equals until saving
LABEL = {"single": "one process", "ddp": "DDP (`MULTI_CPU`)", "zero2": "ZeRO-2", "zero3": "ZeRO-3",
         "zero3_gather": "ZeRO-3 + gather flag", "zero2_use_cpu": "ZeRO-2 + `use_cpu=True`",
         "zero2_cpu_plain": "ZeRO-2 on a CPU-only host, no `use_cpu`",
         "ds_env": "ZeRO-2 from launcher env (GA 2)", "ds_env_ga4": "ZeRO-2 from launcher env, GA 4 vs argument 2",
         "fsdp1": "FSDP1", "fsdp2": "FSDP2", "fsdp2_use_cpu": "`fsdp=True` + `use_cpu=True`",
         "fsdp2_sharded": "FSDP2 SHARDED", "fsdp2_sharded_to_full": "FSDP2 saved SHARDED, resumed FULL",
         "fsdp2_full_to_sharded": "FSDP2 saved FULL, resumed SHARDED",
         "zero2_save_only": "ZeRO-2 + `save_only_model=True`", "fsdp2_save_only": "FSDP2 + `save_only_model=True`", "fsdp_env": "FSDP2 from launcher env",
         "fsdp2_vs_env": "`fsdp=True` vs launcher env FSDP1, SHARDED, size-based"}


# --------------------------------------------------------------------------------------------- one rank
def _fsdp_stand_in():
    """The FSDP cases only. Accelerate turns an FSDP plugin on only for a MULTI_GPU-like distributed type; on
    this CPU host the Trainer's `use_cpu=True` gives MULTI_CPU, where the plugin is dropped and the run is
    plain DDP (the `fsdp2_use_cpu` case records that). Stand-in: MULTI_GPU with gloo whose device is the CPU,
    so AcceleratorState, the Trainer and Accelerate take their GPU FSDP path on CPU tensors."""
    import torch
    from accelerate.state import PartialState
    from accelerate.utils import DistributedType
    real_prep, real_set = PartialState._prepare_backend, PartialState.set_device

    def prep(self, cpu=False, sagemaker_dp=False, backend=None):
        got, dt = real_prep(self, cpu, sagemaker_dp, backend)
        if got is None and not cpu and int(os.environ.get("LOCAL_RANK", -1)) != -1:
            return "gloo", DistributedType.MULTI_GPU
        return got, dt

    def set_device(self):
        if self.device is None and self.distributed_type == DistributedType.MULTI_GPU and not torch.cuda.is_available():
            self.device = torch.device("cpu")
            return
        real_set(self)

    PartialState._prepare_backend, PartialState.set_device = prep, set_device


def _gpu_stand_in():
    """The DeepSpeed cases only. On a GPU host PartialState._prepare_backend returns ("nccl", MULTI_GPU) when
    LOCAL_RANK is set; this CPU host returns backend None, and the Trainer's `args.world_size` would then be 1
    (each rank would fill `train_batch_size` for one process and think it is rank 0). Stand-in, as in
    tests/accel_siblings/_handoff_probe.py: "gloo" on the same branch, so the GPU init path runs."""
    from accelerate.state import PartialState
    real = PartialState._prepare_backend

    def prep(self, cpu=False, sagemaker_dp=False, backend=None):
        got, dt = real(self, cpu, sagemaker_dp, backend)
        return ("gloo" if got is None and not cpu and int(os.environ.get("LOCAL_RANK", -1)) != -1 else got), dt

    PartialState._prepare_backend = prep


def rank_main(case: str) -> None:  # noqa: C901 (one linear scenario)
    rank = int(os.environ.get("RANK", "0"))
    out: dict = {}
    try:
        _rank_body(case, rank, out)
    except Exception as e:  # recorded, the matrix shows it
        import traceback
        out["error"] = f"{type(e).__name__}: {str(e)[:300]}"
        out["tb"] = traceback.format_exc()[-1500:]
    Path(f"rank{rank}.json").write_text(json.dumps(out, indent=1, sort_keys=True, default=str))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _rank_body(case: str, rank: int, out: dict) -> None:  # noqa: C901
    import warnings

    warnings.filterwarnings("ignore")
    n, extra, env = CASES[case]
    work = Path.cwd()
    if "deepspeed" in extra or env.get("ACCELERATE_USE_DEEPSPEED"):  # the DeepSpeed cases
        import importlib

        importlib.import_module("deepspeed.comm.torch").build_shm_op = lambda: None
        if not env.get("PROBE_NO_STAND_IN"):
            _gpu_stand_in()
    if (extra.get("fsdp") or env.get("ACCELERATE_USE_FSDP")) and not extra.get("use_cpu"):
        _fsdp_stand_in()
    import torch
    import transformers
    import transformers.modeling_utils as mu
    import transformers.trainer as tm
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback, TrainingArguments

    phase = {"dir": None, "writes": None}

    def note_write(path):
        if phase["dir"] is None or not isinstance(path, (str, bytes, os.PathLike)):
            return
        p = os.path.abspath(os.fsdecode(path))
        if p.startswith(phase["dir"] + os.sep):
            phase["writes"].append(os.path.relpath(p, phase["dir"]).removesuffix(".tmp"))  # DCP renames .metadata.tmp

    def hook(event, args):
        if event == "open" and len(args) >= 3:
            path, mode, flags = args[0], args[1], args[2]
            if (mode and any(c in mode for c in "wax+")) or (
                    mode is None and isinstance(flags, int) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT)):
                note_write(path)

    sys.addaudithook(hook)
    real_safe = mu.safe_save_file

    def safe_save(sd, filename, *a, **k):
        note_write(filename)
        return real_safe(sd, filename, *a, **k)

    mu.safe_save_file = safe_save
    real_torch_save = torch.save  # its C++ zip writer opens the file outside Python's `open`

    def torch_save(obj, f, *a, **k):
        note_write(f)
        return real_torch_save(obj, f, *a, **k)

    torch.save = torch.serialization.save = torch_save

    def watch(d):
        phase["dir"], phase["writes"] = os.path.abspath(d), []

    calls: list = []

    def tname(x):
        return type(x).__name__

    # the order of the integration steps inside train()
    real_ds_init = tm.deepspeed_init

    def ds_init(trainer, *a, **k):
        calls.append("deepspeed_init")
        return real_ds_init(trainer, *a, **k)

    tm.deepspeed_init = ds_init
    real_ds_load = tm.deepspeed_load_checkpoint

    def ds_load(engine, path, **k):
        calls.append(f"deepspeed_load_checkpoint({tname(engine)})")
        return real_ds_load(engine, path, **k)

    tm.deepspeed_load_checkpoint = ds_load
    for name in ("load_fsdp_model", "load_fsdp_optimizer"):
        real = getattr(tm, name)

        def wrapped(*a, _real=real, _name=name, **k):
            calls.append(_name)
            return _real(*a, **k)

        setattr(tm, name, wrapped)

    class Data(torch.utils.data.Dataset):
        def __len__(self):
            return 16

        def __getitem__(self, i):
            g = torch.Generator().manual_seed(i)
            x = torch.randint(0, 32, (8,), generator=g)
            return {"input_ids": x, "labels": x}

    class Snap(TrainerCallback):
        def __init__(self, tr):
            self.tr = tr

        def on_train_begin(self, args, state, control, **kw):
            t = self.tr
            out.setdefault("begin", {
                "model": tname(t.model), "model_wrapped": tname(t.model_wrapped),
                "model_is_wrapped": t.model is t.model_wrapped,
                "optimizer": tname(t.optimizer), "inner_optimizer": tname(getattr(t.optimizer, "optimizer", None)),
                "lr_scheduler": tname(t.lr_scheduler), "accelerator_models": [tname(m) for m in t.accelerator._models],
                "callback_model": tname(kw.get("model")),
            })

        def on_step_begin(self, args, state, control, **kw):
            calls.append(f"step_begin(global_step={state.global_step})")

    def make_trainer(out_dir, **more):
        args = TrainingArguments(output_dir=out_dir, per_device_train_batch_size=1, gradient_accumulation_steps=2,
                                 max_steps=2, save_steps=1, logging_steps=1, report_to=[], seed=0,
                                 learning_rate=1e-2, disable_tqdm=True, **{**extra, **more})
        torch.manual_seed(0)
        model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=32, n_positions=16))
        tr = Trainer(model=model, args=args, train_dataset=Data())
        tr.add_callback(Snap(tr))
        real_create_opt = tr.create_optimizer

        def create_optimizer(model=None):
            before = tr.optimizer
            res = real_create_opt(model) if model is not None else real_create_opt()
            built = "builds" if before is None else "keeps"
            calls.append(f"create_optimizer({tname(model if model is not None else tr.model)}): {built} "
                         f"{tname(tr.optimizer)}")
            return res

        tr.create_optimizer = create_optimizer
        real_sched = tr.create_scheduler

        def create_scheduler(*a, **k):
            calls.append(f"create_scheduler(optimizer={tname(tr.optimizer)})")
            return real_sched(*a, **k)

        tr.create_scheduler = create_scheduler
        real_prep = tr.accelerator.prepare

        def prepare(*objs, **k):
            given = ", ".join(tname(o) for o in objs)
            res = real_prep(*objs, **k)
            got = res if isinstance(res, (tuple, list)) else (res,)
            calls.append(f"prepare({given}) -> " + ", ".join(tname(o) for o in got))
            return res

        tr.accelerator.prepare = prepare
        return tr, model

    out_dir = str(work / "out")
    tr, passed = make_trainer(out_dir)
    acc = tr.accelerator
    st = acc.state
    a = {"distributed_type": str(st.distributed_type).split(".")[-1], "num_processes": st.num_processes,
         "accelerator.gradient_accumulation_steps": acc.gradient_accumulation_steps,
         "args.gradient_accumulation_steps": tr.args.gradient_accumulation_steps,
         "mixed_precision": acc.mixed_precision, "optimizer_at_init": tname(tr.optimizer),
         "is_deepspeed_enabled": tr.is_deepspeed_enabled, "is_fsdp_enabled": tr.is_fsdp_enabled,
         "should_save": tr.args.should_save}
    fp = getattr(st, "fsdp_plugin", None)
    if fp is not None:
        a["fsdp"] = {"fsdp_version": fp.fsdp_version, "state_dict_type": str(fp.state_dict_type).split(".")[-1],
                     "auto_wrap_policy": getattr(fp.auto_wrap_policy, "__name__", str(fp.auto_wrap_policy)),
                     "transformer_cls_names_to_wrap": fp.transformer_cls_names_to_wrap,
                     "reshard_after_forward": str(fp.reshard_after_forward).split(".")[-1],
                     "cpu_ram_efficient_loading": fp.cpu_ram_efficient_loading,
                     "sync_module_states": fp.sync_module_states, "use_orig_params": fp.use_orig_params}
    dp = getattr(st, "deepspeed_plugin", None)
    if dp is not None:
        c = dp.deepspeed_config
        a["deepspeed"] = {"zero_stage": dp.zero_stage, "gradient_accumulation_steps": c.get("gradient_accumulation_steps"),
                          "train_micro_batch_size_per_gpu": c.get("train_micro_batch_size_per_gpu"),
                          "train_batch_size": c.get("train_batch_size"), "gradient_clipping": c.get("gradient_clipping")}
    out["accelerator"] = a

    # checkpoint-1 is written inside train(); watch it with an on_save-free trick: wrap _save_checkpoint
    real_save_ckpt = tr._save_checkpoint
    ck_writes: dict = {}

    def save_ckpt(model, trial):
        folder = os.path.join(out_dir, f"checkpoint-{tr.state.global_step}")
        watch(folder)
        calls.append(f"_save_checkpoint(step {tr.state.global_step})")
        res = real_save_ckpt(model, trial)
        ck_writes[f"checkpoint-{tr.state.global_step}"] = sorted(phase["writes"])
        phase["dir"] = None
        return res

    tr._save_checkpoint = save_ckpt
    try:
        res = tr.train()
    except Exception as e:  # a refused configuration: the row shows the error
        out["train_error"] = f"{type(e).__name__}: {' '.join(str(e).split())[:400]}"
        return
    finally:
        out["train_calls"] = list(calls)
        calls.clear()
    eng = tr.model_wrapped
    if tr.is_deepspeed_enabled:
        out["engine_gradient_accumulation_steps"] = eng.gradient_accumulation_steps()
    out["after_train"] = {"model": tname(tr.model), "model_wrapped": tname(tr.model_wrapped),
                          "deepspeed_attr": tname(getattr(tr, "deepspeed", None)),
                          "unwrap_model": tname(acc.unwrap_model(tr.model_wrapped)),
                          "passed_model_is_trainer_model": passed is tr.model}
    out["losses"] = [[h["step"], round(h["loss"], 5)] for h in tr.state.log_history if "loss" in h]
    out["global_step"] = res.global_step
    out["checkpoint_writes"] = ck_writes
    final = os.path.join(work, "final")
    watch(final)
    tr.save_model(final)
    out["save_model_writes"] = sorted(phase["writes"])
    phase["dir"] = None
    torch.distributed.barrier() if torch.distributed.is_initialized() else None
    if rank == 0:
        def listing(d):
            return sorted(os.path.relpath(os.path.join(r, f), d) for r, _, fs in os.walk(d) for f in fs)
        out["listing"] = {"checkpoint-1": listing(os.path.join(out_dir, "checkpoint-1")), "final": listing(final)}

    # resume from checkpoint-1 in a second Trainer
    tr2, _ = make_trainer(str(work / "out2"), save_strategy="no", **RESUME_WITH.get(case, {}))
    real_lfc, real_los, real_rng = tr2._load_from_checkpoint, tr2._load_optimizer_and_scheduler, tr2._load_rng_state

    def lfc(path, model=None):
        calls.append(f"_load_from_checkpoint(model={tname(model) if model is not None else 'None'})")
        return real_lfc(path, model) if model is not None else real_lfc(path)

    def los(path):
        calls.append("_load_optimizer_and_scheduler")
        return real_los(path)

    def rng(path):
        calls.append("_load_rng_state")
        return real_rng(path)

    tr2._load_from_checkpoint, tr2._load_optimizer_and_scheduler, tr2._load_rng_state = lfc, los, rng
    try:
        tr2.train(resume_from_checkpoint=os.path.join(out_dir, "checkpoint-1"))
        out["resume_losses"] = [[h["step"], round(h["loss"], 5)] for h in tr2.state.log_history if "loss" in h]
    except BaseException as e:  # torch.distributed.checkpoint's CheckpointException is a BaseException
        text = str(e).replace(str(work), "<run>")
        if type(e).__name__ == "CheckpointException":  # one traceback per rank: keep the last line of the first
            text = [ln for ln in text.splitlines() if ln.strip()][-1].strip()
        out["resume_error"] = f"{type(e).__name__}: {' '.join(text.split())[:300]}"
    out["resume_calls"] = list(calls)
    out["versions"] = {"transformers": transformers.__version__, "torch": torch.__version__.split("+")[0]}


# --------------------------------------------------------------------------------------------- collect
def collect() -> dict:
    root = Path(tempfile.mkdtemp(prefix="trbackend"))
    base = gb.child_env(root, DS_ACCELERATOR="cpu", TOKENIZERS_PARALLELISM="false",
                        TORCH_EXTENSIONS_DIR=str(root / "ext"))
    data = {}
    for i, (case, (n, _kw, env)) in enumerate(CASES.items()):
        d = root / case
        d.mkdir()
        envs = []
        for r in range(n):
            e = {**base, **env}
            if n > 1:
                e.update(RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(n), LOCAL_WORLD_SIZE=str(n),
                         MASTER_ADDR="127.0.0.1", MASTER_PORT=str(29731 + i))
            envs.append(e)
        got = gb.run_ranks([sys.executable, str(Path(__file__).resolve()), "rank", case], envs, d, 300, "error", 4000)
        data[case] = got
        print(case, "ok" if all("error" not in v for v in got.values()) else "ERROR", file=sys.stderr, flush=True)
    return data


def load_capture() -> dict:
    return gb.load_json(CAPTURE)


# --------------------------------------------------------------------------------------------- render
def _files(names) -> str:
    """Names grouped by folder: `a, b, global_step1/{x, y}`; "nothing" for none."""
    if not names:
        return "nothing"
    top, sub = [], {}
    for n in sorted(set(names)):
        d, _, f = n.rpartition("/")
        (sub.setdefault(d, []).append(f) if d else top.append(f))
    return ", ".join(top + [f"{d}/{{{', '.join(fs)}}}" for d, fs in sorted(sub.items())])


def _calls(seq, skip=("step_begin", "_save_checkpoint", "prepare(DataLoader)")) -> str:
    return " → ".join(c.replace("GPT2LMHeadModel", "Model").replace("FSDPModel", "FSDPGPT2LMHeadModel")
                      .split("(optimizer=")[0] for c in seq if not c.startswith(skip))


def _loaders(seq) -> str:
    """The resume calls: every loader, and where the model's `prepare` sits between them."""
    out = []
    for c in seq:
        if c.startswith(("_load", "load_", "deepspeed_load")):
            out.append(c.replace("GPT2LMHeadModel", "Model").replace("FSDPModel", "FSDPGPT2LMHeadModel"))
        elif c.startswith("prepare(") and not c.startswith("prepare(DataLoader") and "prepare" not in out:
            out.append("prepare")
    return " → ".join(out)


def _plugin(a: dict) -> str:
    if "fsdp" in a:
        f = a["fsdp"]
        extra = f", `use_orig_params` {f['use_orig_params']}" if f["fsdp_version"] == 1 else ""
        cls = f" ({', '.join(f['transformer_cls_names_to_wrap'])})" if f["transformer_cls_names_to_wrap"] else ""
        return (f"FSDP{f['fsdp_version']}, `reshard_after_forward` {f['reshard_after_forward']}, "
                f"`{f['auto_wrap_policy']}`{cls}, `{f['state_dict_type']}`{extra}")
    if "deepspeed" in a:
        d = a["deepspeed"]
        return (f"ZeRO-{d['zero_stage']}: micro {d['train_micro_batch_size_per_gpu']}, GA "
                f"{d['gradient_accumulation_steps']}, `train_batch_size` {d['train_batch_size']}")
    return "none"


def _grouped(header: list, rows: list) -> str:
    """One line per distinct content; the cases that share it are listed together in the first cell."""
    merged: dict = {}
    for label, cells in rows:
        merged.setdefault(cells, []).append(label)
    return "\n".join(header + [f"| {'; '.join(labels)} | {cells} |" for cells, labels in merged.items()]) + "\n"


def render(data: dict) -> dict:
    heads = {"accel": ["| Case | `distributed_type`, processes | Plugin as built (filled values) | GA: `accelerator` / `args` / "
                       "engine |", "| --- | --- | --- | --- |"],
             "wrap": ["| Case | Calls inside `train()` in order (after the dataloader's `prepare`) | `trainer.model` | "
                      "`trainer.model_wrapped` | `trainer.optimizer` (inner) | `unwrap_model(model_wrapped)` |",
                     "| --- | --- | --- | --- | --- | --- |"],
             "save": ["| Case | `checkpoint-1`: rank 0 writes | rank 1 writes | `trainer.save_model(dir)`: rank 0 "
                      "writes | rank 1 |", "| --- | --- | --- | --- | --- |"],
             "resume": ["| Case | `train(resume_from_checkpoint=...)`: loaders in order | loss at step 2: "
                        "uninterrupted / resumed |", "| --- | --- | --- |"]}
    rows: dict = {k: [] for k in heads}
    for case in [c for c in CASES if c in data]:
        r0, r1 = data[case]["rank0"], data[case].get("rank1")
        lab = LABEL[case]
        a, b, at = r0["accelerator"], r0.get("begin"), r0.get("after_train")
        eng = r0.get("engine_gradient_accumulation_steps")
        procs = f"{a['num_processes']} process" + ("es" if a["num_processes"] > 1 else "")
        resumed_other = case in RESUME_WITH  # its first run is a row above: only its resume row is shown
        same_start = resumed_other or case in SAVE_ONLY  # Accelerator and prepare as a row above
        if not same_start:
            rows["accel"].append((lab, f"`{a['distributed_type']}`, {procs} | {_plugin(a)} | "
                                       f"{a['accelerator.gradient_accumulation_steps']} / "
                                       f"{a['args.gradient_accumulation_steps']} / {eng if eng is not None else '-'}"))
        if "train_error" in r0:  # refused at train(): no model, files or resume to show
            err = r0["train_error"]
            kind, detail = err.split(": ", 1)
            detail = detail[detail.find("- ds"):].split(" The easiest")[0] if "- ds" in detail else detail[:140]
            rows["wrap"].append((lab, f"{_calls(r0['train_calls'])} → raises `{kind}` \"`{detail}`\" | - | - | - | -"))
            continue
        if not same_start:
            rows["wrap"].append((lab, f"{_calls(r0['train_calls'])} | `{at['model']}` | `{at['model_wrapped']}` | "
                                      f"`{b['optimizer']}` (`{b['inner_optimizer']}`) | `{at['unwrap_model']}`"))
        if not resumed_other:
            rows["save"].append((lab, f"{_files(r0['checkpoint_writes']['checkpoint-1'])} | "
                                      f"{'-' if r1 is None else _files(r1['checkpoint_writes']['checkpoint-1'])} | "
                                      f"{_files(r0['save_model_writes'])} | "
                                      f"{'-' if r1 is None else _files(r1['save_model_writes'])}"))
        first = dict(r0["losses"]).get(2)
        again = dict(r0.get("resume_losses", [])).get(2)
        if "resume_error" in r0:
            kind, detail = r0["resume_error"].split(": ", 1)
            detail = detail.split("; rank local")[0].replace("<run>/out/", "")
            rows["resume"].append((lab, f"{_loaders(r0['resume_calls'])} → raises `{kind}` \"{detail[:160]}\" "
                                        f"| {first} / -"))
            continue
        rows["resume"].append((lab, f"{_loaders(r0['resume_calls'])} | {first} / {again}"))
    return {f"trainer-backends-{k}": _grouped(heads[k], rows[k]) for k in heads}


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "rank":
        rank_main(sys.argv[2])
    gb.cli(sys.argv[1] if len(sys.argv) > 1 else "", page=REF, capture=CAPTURE, collect=collect, render=render,
           usage=__doc__)

"""The Transformers Trainer claims, run on CPU against the pinned transformers 5.25.0.

One module so transformers is imported once (its import is the slow part). What runs here:
TrainingArguments construction (precision, report_to, batch size, timeout, FSDP plugin args),
one Trainer over a tiny torch model (module-scoped; its Accelerator, DDP kwargs, training_step),
HfTrainerDeepSpeedConfig.trainer_config_process / trainer_config_finalize (no deepspeed import:
the class only reads package metadata) and deepspeed_load_checkpoint with a stand-in engine.
Error messages are matched against the failure-triage catalog patterns, so a catalog entry that
stops matching what 5.25.0 raises fails here.

Forced branches: bf16 support is forced off (is_torch_bf16_gpu_available -> False) so the
"unsupported" error is raised on any machine; ACCELERATE_MIXED_PRECISION is set per case.
"""
from __future__ import annotations

import inspect
import io
import os
import re
from datetime import timedelta
from pathlib import Path

import pytest
import torch
import yaml

import transformers
import transformers.training_args as ta
from _tiny_trainer_model import Tiny, global_state_restored  # noqa: E402
from transformers import Trainer, TrainingArguments
from transformers.integrations import deepspeed as hf_ds

REPO = Path(__file__).resolve().parents[2]
CATALOG = {e["id"]: e for e in yaml.safe_load(
    (REPO / "sub-skills/failure-triage/catalog/transformers.yaml").read_text(encoding="utf-8"))}


def catalog_matches(entry_id: str, message: str) -> bool:
    return re.search(CATALOG[entry_id]["pattern"], message) is not None


def raised(fn) -> str:
    with pytest.raises(ValueError) as info:
        fn()
    return str(info.value)


def dataset(n=8):
    g = torch.Generator().manual_seed(0)
    return [{"x": torch.randn(4, generator=g), "labels": torch.randn((), generator=g)} for _ in range(n)]


@pytest.fixture(scope="module", autouse=True)
def _leave_no_global_state():
    with global_state_restored():
        yield


@pytest.fixture(scope="module")
def out_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("hf_trainer"))


@pytest.fixture(scope="module")
def trainer(out_dir):
    os.environ.pop("ACCELERATE_MIXED_PRECISION", None)
    args = TrainingArguments(out_dir, use_cpu=True, per_device_train_batch_size=2, gradient_accumulation_steps=4,
                             max_steps=1, report_to="none", save_strategy="no", ddp_bucket_cap_mb=7,
                             ddp_static_graph=True, ddp_broadcast_buffers=False)
    torch.manual_seed(0)
    return Trainer(model=Tiny(), args=args, train_dataset=dataset())


# ------------------------------------------------------------------ TrainingArguments

def test_training_arguments_defaults_batch_and_timeout(out_dir):
    """report_to defaults to "none" (-> []); train_batch_size = per_device x max(1, n_gpu);
    ddp_timeout is seconds."""
    assert transformers.__version__ == "5.25.0"
    args = TrainingArguments(out_dir, use_cpu=True, per_device_train_batch_size=3, ddp_timeout=7)
    assert args.report_to == []
    assert inspect.signature(TrainingArguments).parameters["report_to"].default == "none"
    assert args.n_gpu == 0 and args.train_batch_size == 3  # max(1, 0)
    args._n_gpu = 4  # the single-process multi-GPU (DataParallel) case, forced
    assert args.train_batch_size == 12
    assert args.ddp_timeout_delta == timedelta(seconds=7)
    assert TrainingArguments(out_dir, use_cpu=True).ddp_timeout == 1800


def test_mixed_precision_env_then_flags(out_dir, monkeypatch):
    """ACCELERATE_MIXED_PRECISION (default "no") first, then fp16 / bf16 override it."""
    monkeypatch.delenv("ACCELERATE_MIXED_PRECISION", raising=False)
    assert TrainingArguments(out_dir, use_cpu=True).mixed_precision == "no"
    monkeypatch.setenv("ACCELERATE_MIXED_PRECISION", "bf16")
    assert TrainingArguments(out_dir, use_cpu=True).mixed_precision == "bf16"
    assert TrainingArguments(out_dir, use_cpu=True, fp16=True).mixed_precision == "fp16"
    monkeypatch.setenv("ACCELERATE_MIXED_PRECISION", "fp16")
    assert TrainingArguments(out_dir, use_cpu=True, bf16=True).mixed_precision == "bf16"


def test_precision_errors_match_the_catalog(out_dir, monkeypatch):
    """bf16 without bf16 support (forced off) and fp16+bf16 raise the messages the catalog matches."""
    monkeypatch.delenv("ACCELERATE_MIXED_PRECISION", raising=False)
    monkeypatch.setattr(ta, "is_torch_bf16_gpu_available", lambda *a, **k: False)
    monkeypatch.setattr(ta, "is_torch_xla_available", lambda *a, **k: False)
    msg = raised(lambda: TrainingArguments(out_dir, bf16=True))
    assert catalog_matches("transformers-bf16-unsupported", msg), msg
    msg = raised(lambda: TrainingArguments(out_dir, use_cpu=True, fp16=True, bf16=True))
    assert catalog_matches("transformers-fp16-and-bf16", msg), msg


def test_fsdp_defaults_to_version_2_and_warns_on_activation_checkpointing(out_dir, monkeypatch):
    """fsdp=True without a version -> FSDP2; activation_checkpointing with FSDP logs a warning
    (the raise when both FSDP's and the argument's are true is in create_accelerator_and_postprocess,
    which needs an FSDP device type: its text is checked in the installed source)."""
    args = TrainingArguments(out_dir, use_cpu=True, fsdp=True)
    assert args.fsdp_plugin_args["fsdp_version"] == 2
    assert TrainingArguments(out_dir, use_cpu=True, fsdp=True,
                             fsdp_config={"version": 1}).fsdp_plugin_args["fsdp_version"] == 1
    seen = []
    monkeypatch.setattr(ta.logger, "warning", lambda msg, *a, **k: seen.append(str(msg)))
    TrainingArguments(out_dir, use_cpu=True, fsdp=True, activation_checkpointing=True)
    assert any("activation_checkpointing" in m and "FSDP" in m for m in seen), seen
    src = inspect.getsource(Trainer.create_accelerator_and_postprocess)
    assert "fsdp_plugin.activation_checkpointing and self.args.activation_checkpointing" in src
    assert "can't both be set to True" in src


# ------------------------------------------------------------------ one Trainer on CPU

def test_trainer_gives_accelerate_one_accumulation_step(trainer, monkeypatch):
    assert trainer.args.gradient_accumulation_steps == 4
    assert trainer.accelerator.gradient_accumulation_steps == 1
    assert trainer.accelerator.gradient_state.num_steps == 1
    # the launcher's variable is never read: the Trainer passes a GradientAccumulationPlugin
    monkeypatch.setenv("ACCELERATE_GRADIENT_ACCUMULATION_STEPS", "8")
    trainer.create_accelerator_and_postprocess()
    assert trainer.accelerator.gradient_accumulation_steps == 1


def test_ddp_kwargs_are_read_once_at_construction(trainer):
    h = trainer.accelerator.ddp_handler
    assert (h.bucket_cap_mb, h.static_graph, h.broadcast_buffers) == (7, True, False)
    assert h.find_unused_parameters is True  # not a PreTrainedModel, no ddp_find_unused_parameters
    trainer.args.ddp_bucket_cap_mb = 99  # changing the argument afterwards changes nothing
    try:
        assert trainer.accelerator.ddp_handler.bucket_cap_mb == 7
    finally:
        trainer.args.ddp_bucket_cap_mb = 7


def test_num_steps_with_accumulation_raises(out_dir):
    args = TrainingArguments(out_dir, use_cpu=True, gradient_accumulation_steps=2, report_to="none",
                             accelerator_config={"gradient_accumulation_kwargs": {"num_steps": 2}})
    msg = raised(lambda: Trainer(model=Tiny(), args=args, train_dataset=dataset()))
    assert "`num_steps` is set but `gradient_accumulation_steps` is greater than 1" in msg


def test_training_step_divides_only_an_unnormalised_loss(trainer):
    """training_step divides by current_gradient_accumulation_steps unless the loss is already
    normalised: compute_loss_func given, or loss_is_scaled_for_ga set."""
    trainer.create_accelerator_and_postprocess()  # a TrainingArguments built since resets AcceleratorState
    batch = trainer.data_collator(dataset(2))
    model = trainer.model
    with torch.no_grad():
        full = model(**batch)["loss"].item()
    assert trainer.model_accepts_loss_kwargs is False
    trainer.current_gradient_accumulation_steps = 4
    try:
        assert trainer.training_step(model, dict(batch)).item() == pytest.approx(full / 4, rel=1e-5)
        trainer.compute_loss_func = lambda outputs, labels, num_items_in_batch=None: (
            (outputs["logits"] - labels) ** 2).mean()
        assert trainer.training_step(model, dict(batch)).item() == pytest.approx(full, rel=1e-5)
        trainer.compute_loss_func = None
        trainer.loss_is_scaled_for_ga = True
        assert trainer.training_step(model, dict(batch)).item() == pytest.approx(full, rel=1e-5)
    finally:
        trainer.compute_loss_func = None
        trainer.loss_is_scaled_for_ga = None
        model.zero_grad(set_to_none=True)


# ------------------------------------------------------------------ DeepSpeed integration helpers

def _ds_config(**extra):
    cfg = {"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto",
           "train_batch_size": "auto", "zero_optimization": {"stage": 2}}
    cfg.update(extra)
    return hf_ds.HfTrainerDeepSpeedConfig(cfg)


def test_trainer_fills_auto_then_refuses_mismatches(trainer, out_dir):
    """trainer_config_process fills "auto" from TrainingArguments; a set value that disagrees is
    collected and trainer_config_finalize raises the catalog's mismatch message."""
    ds = _ds_config()
    ds.trainer_config_process(trainer.args)
    assert ds.config["train_micro_batch_size_per_gpu"] == 2 and ds.config["gradient_accumulation_steps"] == 4
    ds.trainer_config_finalize(trainer.args, trainer.model, 1)
    assert ds.mismatches == []

    ds = _ds_config(bf16={"enabled": "auto"}, fp16={"enabled": "auto"})  # "auto" precision follows args
    ds.trainer_config_process(trainer.args)
    assert ds.config["bf16"]["enabled"] is False and ds.config["fp16"]["enabled"] is False

    ds = _ds_config(bf16={"enabled": True})  # accelerate config bf16, TrainingArguments bf16 unset
    ds.trainer_config_process(trainer.args)
    msg = raised(lambda: ds.trainer_config_finalize(trainer.args, trainer.model, 1))
    assert "- ds bf16.enabled=True vs hf bf16|bf16_full_eval=False" in msg
    assert catalog_matches("transformers-deepspeed-config-mismatch", msg), msg


def test_auto_bucket_sizes_need_a_hidden_size(trainer):
    ds = _ds_config(zero_optimization={"stage": 3, "reduce_bucket_size": "auto"})
    ds.trainer_config_process(trainer.args)
    msg = raised(lambda: ds.trainer_config_finalize(trainer.args, trainer.model, 1))  # Tiny has no config
    assert catalog_matches("transformers-deepspeed-auto-needs-hidden-size", msg), msg


class _Engine:
    def __init__(self, load_path):
        self.load_path, self.calls = load_path, []

    def load_checkpoint(self, path, **kw):
        self.calls.append(path)
        return self.load_path, {}


def test_deepspeed_resume_needs_a_global_step_folder(tmp_path):
    """deepspeed_load_checkpoint: no global_step* sub-folder -> "Can't find a valid checkpoint";
    one present but the engine loads nothing -> "[deepspeed] failed to resume"."""
    engine = _Engine(None)
    msg = raised(lambda: hf_ds.deepspeed_load_checkpoint(engine, str(tmp_path)))
    assert engine.calls == [] and catalog_matches("transformers-no-valid-checkpoint", msg), msg
    (tmp_path / "global_step3").mkdir()
    msg = raised(lambda: hf_ds.deepspeed_load_checkpoint(engine, str(tmp_path)))
    assert engine.calls == [str(tmp_path)] and catalog_matches("transformers-deepspeed-resume-failed", msg), msg
    hf_ds.deepspeed_load_checkpoint(_Engine(str(tmp_path / "global_step3")), str(tmp_path))  # a load: no error


def test_zero3_detection_needs_a_live_hf_deepspeed_config():
    """is_deepspeed_zero3_enabled() (what generate reads for synced_gpus) follows a weak reference
    to the last HfDeepSpeedConfig: true while a stage-3 one is alive, false once it is collected."""
    import gc
    ds = _ds_config(zero_optimization={"stage": 3})
    assert hf_ds.is_deepspeed_zero3_enabled() is True
    del ds
    gc.collect()
    assert hf_ds.is_deepspeed_zero3_enabled() is False
    # the Trainer's TrainingArguments holds one for the whole run
    assert "self.hf_deepspeed_config = HfTrainerDeepSpeedConfig(self.deepspeed)" in inspect.getsource(
        TrainingArguments.__post_init__)


def test_no_missed_zero3_init_check_in_the_installed_trainer():
    """5.25.0 has no "was not initialized with `Zero-3`" ValueError anywhere on the Trainer path;
    modeling_utils only logs that zero.init() is activated."""
    pkg = Path(transformers.__file__).parent
    for rel in ("trainer.py", "training_args.py", "integrations/deepspeed.py", "modeling_utils.py"):
        assert "was not initialized with `Zero-3`" not in (pkg / rel).read_text(encoding="utf-8"), rel
    assert "Detected DeepSpeed ZeRO-3: activating zero.init() for this model" in (
        pkg / "modeling_utils.py").read_text(encoding="utf-8")
    init = inspect.getsource(Trainer.__init__)
    assert not re.search(r"(?i)zero-?3", init)  # no ZeRO-3 check of any wording at construction


def test_from_pretrained_drops_low_cpu_mem_usage(tmp_path):
    """transformers 5 pops low_cpu_mem_usage in from_pretrained and never reads it: any value loads
    the same model and reaches neither the config nor __init__, where an unknown keyword fails."""
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=8, n_head=2, vocab_size=16, n_positions=8)).save_pretrained(tmp_path)
    loaded = [GPT2LMHeadModel.from_pretrained(tmp_path, low_cpu_mem_usage=v) for v in (True, False, "unread")]
    for m in loaded:
        assert not hasattr(m.config, "low_cpu_mem_usage")
        assert all(torch.equal(a, b) for a, b in zip(m.state_dict().values(), loaded[0].state_dict().values()))
    with pytest.raises(TypeError, match="unexpected keyword argument 'not_an_argument'"):
        GPT2LMHeadModel.from_pretrained(tmp_path, not_an_argument=True)


def test_gradient_checkpointing_is_an_alias_of_activation_checkpointing(out_dir):
    with pytest.warns(FutureWarning, match="`gradient_checkpointing` is deprecated"):
        args = TrainingArguments(out_dir, use_cpu=True, gradient_checkpointing=True)
    assert args.activation_checkpointing is True and args.gradient_checkpointing is True
    assert TrainingArguments(out_dir, use_cpu=True, activation_checkpointing=True).gradient_checkpointing is True


def test_validator_trainer_facts_against_the_installed_fill_lists(out_dir):
    """tests/validator_ds/transformers_facts.json (read at commit 3a80c166, the consumer oracle's
    model) against the installed 5.25.0 trainer_config_process / finalize: the same keys, except
    that 5.25.0 no longer fills amp.enabled / amp.opt_level (apex amp is gone)."""
    import json
    facts = json.loads((REPO / "tests/validator_ds/transformers_facts.json").read_text(encoding="utf-8"))
    src = inspect.getsource(hf_ds.HfTrainerDeepSpeedConfig)

    def keys(method, kind):
        body = inspect.getsource(getattr(hf_ds.HfTrainerDeepSpeedConfig, method))
        return set(re.findall(rf'{kind}\(\s*"([^"]+)"', body))

    process, finalize = facts["trainer_config_process"], facts["trainer_config_finalize"]
    assert keys("trainer_config_process", "fill_match") == set(process["fill_match"]) - {"amp.enabled", "amp.opt_level"}
    assert keys("trainer_config_process", "fill_only") == set(process["fill_only"])
    assert keys("trainer_config_finalize", "fill_match") == set(finalize["fill_match"])
    assert keys("trainer_config_finalize", "fill_only") == set(
        finalize["fill_only_any_stage"]) | set(finalize["fill_only_zero3"])
    assert '"amp.' not in src
    ds = _ds_config(amp={"enabled": "auto"})  # run: an "auto" amp block is left as it is
    ds.trainer_config_process(TrainingArguments(out_dir, use_cpu=True))
    assert ds.config["amp"]["enabled"] == "auto"


def test_accelerate_deepspeed_weakref_with_transformers():
    """With transformers installed, accelerate's DeepSpeedPlugin(zero_stage=3).set_deepspeed_weakref
    builds transformers' HfDeepSpeedConfig, so from_pretrained's is_deepspeed_zero3_enabled() sees
    ZeRO-3 (the absent case: tests/field_coverage/test_zero3_parameters.py, transformers hidden)."""
    from accelerate.utils import DeepSpeedPlugin
    from accelerate.utils.imports import is_transformers_available
    plugin = DeepSpeedPlugin(zero_stage=3)
    assert is_transformers_available() and plugin.zero3_init_flag is True
    plugin.set_deepspeed_weakref()
    assert hf_ds.is_deepspeed_zero3_enabled() is True
    assert isinstance(plugin.dschf, hf_ds.HfDeepSpeedConfig)


def test_trainer_deepspeed_config_is_accelerates_hf_deepspeed_config():
    """The validator's oracle and test_plugin_overwrites.py model the Trainer's config object with
    accelerate's HfDeepSpeedConfig: transformers' class is a subclass of it, and TrainingArguments
    hands that object to DeepSpeedPlugin(hf_ds_config=...)."""
    from accelerate.utils.deepspeed import HfDeepSpeedConfig as AccelerateHfDeepSpeedConfig
    assert issubclass(hf_ds.HfTrainerDeepSpeedConfig, AccelerateHfDeepSpeedConfig)
    assert "DeepSpeedPlugin(hf_ds_config=self.hf_deepspeed_config)" in inspect.getsource(TrainingArguments)


# ------------------------------------------------------------------ set-3 fixes (s3-tr-07, s3-tr-02)

def test_ddp_backend_choices_and_the_cpu_branch_passes_no_timeout(out_dir, monkeypatch):
    """s3-tr-07: --ddp_backend accepts exactly the dataclass choices (argparse rejects 'ccl');
    _setup_devices passes backend+timeout to PartialState, but the use_cpu branch passes no timeout."""
    from transformers import HfArgumentParser
    choices = ta.TrainingArguments.__dataclass_fields__["ddp_backend"].metadata["choices"]
    assert choices == ["nccl", "gloo", "mpi", "xccl", "hccl", "cncl", "mccl"]
    parser = HfArgumentParser(TrainingArguments)
    monkeypatch.setattr("sys.stderr", io.StringIO())
    with pytest.raises(SystemExit):
        parser.parse_args_into_dataclasses(["--output_dir", out_dir, "--ddp_backend", "ccl"])
    seen = []

    class Stop(Exception):
        pass

    def fake_state(**kwargs):
        seen.append(kwargs)
        raise Stop

    monkeypatch.setattr(ta, "PartialState", fake_state)
    monkeypatch.delenv("ACCELERATE_USE_CPU", raising=False)
    for use_cpu in (True, False):
        with pytest.raises(Stop):  # __post_init__ reaches _setup_devices
            TrainingArguments(out_dir, use_cpu=use_cpu, ddp_backend="gloo", ddp_timeout=7)
    monkeypatch.undo()  # _setup_devices reset the shared state before the stub raised: rebuild it
    TrainingArguments(out_dir, use_cpu=True)
    cpu, other = seen[-2], seen[-1]
    assert cpu["backend"] == "gloo" and cpu["cpu"] is True and "timeout" not in cpu
    assert other["backend"] == "gloo" and other["timeout"] == timedelta(seconds=7)


def test_deepspeed_train_discards_the_optimizers_argument(trainer, monkeypatch):
    """s3-tr-02: under DeepSpeed, Trainer(optimizers=(opt, sched)) does not survive train()'s
    deepspeed_init: it sets trainer.optimizer = None, then an "optimizer" section gives DummyOptim and
    no section gives create_optimizer()'s fresh one from `optim`; the scheduler returned replaces
    trainer.lr_scheduler (DummyScheduler, or None -> create_scheduler). No error is raised.
    deepspeed.utils is stubbed (deepspeed_init only takes its logger) to keep deepspeed unimported."""
    import logging
    import sys
    import types
    from accelerate.utils import DummyOptim, DummyScheduler
    fake = types.ModuleType("deepspeed.utils")
    fake.logger = logging.getLogger("stub-deepspeed")
    monkeypatch.setitem(sys.modules, "deepspeed", types.ModuleType("deepspeed"))
    monkeypatch.setitem(sys.modules, "deepspeed.utils", fake)
    saved = trainer.optimizer, trainer.lr_scheduler
    try:
        for extra, want_opt, want_sched in (
                ({"optimizer": {"type": "AdamW", "params": {"lr": "auto"}}}, DummyOptim, DummyScheduler),
                ({"scheduler": {"type": "WarmupLR", "params": {}}}, torch.optim.AdamW, DummyScheduler),
                ({}, torch.optim.AdamW, type(None))):
            mine = torch.optim.SGD(trainer.model.parameters(), lr=0.1)
            trainer.optimizer, trainer.lr_scheduler = mine, torch.optim.lr_scheduler.LambdaLR(mine, lambda _: 1.0)
            ds = _ds_config(**extra)
            ds.trainer_config_process(trainer.args)
            plugin = types.SimpleNamespace(hf_ds_config=ds)
            monkeypatch.setattr(trainer, "accelerator", types.SimpleNamespace(
                state=types.SimpleNamespace(deepspeed_plugin=plugin)))
            opt, sched = hf_ds.deepspeed_init(trainer, num_training_steps=10)
            assert type(opt) is want_opt and opt is not mine, extra
            assert type(sched) is want_sched, extra
            if "optimizer" not in extra:
                assert ds.config["zero_allow_untested_optimizer"] is True
            else:
                assert sched.lr_scheduler_callable is not None  # HF scheduler built inside initialize
    finally:
        trainer.optimizer, trainer.lr_scheduler = saved


# ------------------------------------------------------------------ set-5 fixes (s5-tl-05)

def test_zero3_init_flag_does_not_turn_off_transformers_zero_init(monkeypatch):
    """s5-tl-05: in accelerate 1.15.0 set_deepspeed_weakref registers a stage-3 HfDeepSpeedConfig
    whatever zero3_init_flag is, so zero3_init_context_manager(enable=False) leaves
    is_deepspeed_zero3_enabled() true and from_pretrained still builds under deepspeed.zero.Init.
    What does turn it off: no selected plugin yet, or unset_hf_deepspeed_config() around the load
    (restored with set_hf_deepspeed_config(plugin.dschf)). deepspeed is replaced by a recorder so
    transformers' own get_init_context decides without a process group."""
    import sys
    import types
    from accelerate.utils import DeepSpeedPlugin
    from transformers import LlamaForCausalLM
    inits = []

    class RecordingInit:
        def __init__(self, **kwargs):
            inits.append(kwargs)

    fake = types.ModuleType("deepspeed")
    fake.zero = types.SimpleNamespace(Init=RecordingInit)
    monkeypatch.setitem(sys.modules, "deepspeed", fake)

    def builds_under_zero_init() -> bool:
        before = len(inits)
        LlamaForCausalLM.get_init_context(torch.float32, False, False, None)
        return len(inits) > before

    try:
        off = DeepSpeedPlugin(zero_stage=3, zero3_init_flag=False)
        assert hf_ds.is_deepspeed_zero3_enabled() is False  # constructing a plugin registers nothing
        off.set_deepspeed_weakref()  # what DeepSpeedPlugin.select (Accelerator(...)) runs
        assert off.zero3_init_flag is False and hf_ds.is_deepspeed_zero3_enabled() is True
        assert builds_under_zero_init()
        on = DeepSpeedPlugin(zero_stage=3)
        on.set_deepspeed_weakref()
        with on.zero3_init_context_manager(enable=False):
            assert on.zero3_init_flag is False
            assert hf_ds.is_deepspeed_zero3_enabled() is True and builds_under_zero_init()
        hf_ds.unset_hf_deepspeed_config()
        assert hf_ds.is_deepspeed_zero3_enabled() is False and not builds_under_zero_init()
        hf_ds.set_hf_deepspeed_config(on.dschf)
        assert hf_ds.is_deepspeed_zero3_enabled() is True
    finally:
        hf_ds.unset_hf_deepspeed_config()


# ------------------------------------------------------------------ set-5 fixes (s5-tr-05)

def test_trainer_builds_parallelism_config_from_model_tp_size(out_dir):
    """s5-tr-05: Trainer._build_accelerator_args (what create_accelerator_and_postprocess hands to
    Accelerator) reads model.tp_size and config.distributed_config.dp_size: with no
    parallelism_config it builds ParallelismConfig(tp_size, dp_shard_size); a passed one gets both
    fields overwritten. A stand-in for the TP-loaded model (tp_size 2, dp_size 1): no mesh needed."""
    from types import SimpleNamespace
    from accelerate import ParallelismConfig
    tp_model = SimpleNamespace(tp_size=2, config=SimpleNamespace(distributed_config=SimpleNamespace(dp_size=1)))
    built = Trainer._build_accelerator_args(SimpleNamespace(args=TrainingArguments(out_dir, use_cpu=True), model=tp_model))
    pc = built["parallelism_config"]
    assert isinstance(pc, ParallelismConfig) and (pc.tp_size, pc.dp_shard_size) == (2, 1)
    mine = ParallelismConfig(tp_size=4, dp_shard_size=2)
    args = TrainingArguments(out_dir, use_cpu=True, parallelism_config=mine)
    built = Trainer._build_accelerator_args(SimpleNamespace(args=args, model=tp_model))
    assert built["parallelism_config"] is mine and (mine.tp_size, mine.dp_shard_size) == (2, 1)
    plain = Trainer._build_accelerator_args(SimpleNamespace(args=TrainingArguments(out_dir, use_cpu=True), model=Tiny()))
    assert "parallelism_config" not in plain  # a model not sharded at load: nothing built


def test_device_map_auto_under_torchrun_is_no_tensor_parallelism(tmp_path, monkeypatch):
    """s5-acb-03: in transformers 5.25 from_pretrained(device_map="auto") with WORLD_SIZE set (a
    torchrun launch) only logs an info line; TP needs distributed_config / tp_plan / tp_size, so the
    weights stay plain tensors (no DTensor) and model.tp_size stays None (older releases turned TP
    on here). Tiny Llama saved locally; CPU, so "auto" places everything on cpu."""
    import transformers.modeling_utils as mu
    from transformers import LlamaConfig, LlamaForCausalLM
    from torch.distributed.tensor import DTensor
    cfg = LlamaConfig(vocab_size=32, hidden_size=8, intermediate_size=16, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=2)
    LlamaForCausalLM(cfg).save_pretrained(tmp_path / "tiny")
    said = []
    monkeypatch.setattr(hf_ds, "_hf_deepspeed_config_weak_ref", None)  # no ZeRO-3 left by another test
    monkeypatch.setattr(mu.logger, "info", lambda msg, *a, **k: said.append(str(msg)))
    monkeypatch.setenv("WORLD_SIZE", "2")
    model = LlamaForCausalLM.from_pretrained(tmp_path / "tiny", device_map="auto")
    assert any("device_map=`auto` while triggering a distributed run with torchrun" in m for m in said)
    assert model.tp_size is None and getattr(model.config, "distributed_config", None) is None
    assert not any(isinstance(p, DTensor) for p in model.parameters())

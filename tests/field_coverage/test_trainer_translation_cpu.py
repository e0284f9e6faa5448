"""How transformers 5.25.0's Trainer translates its arguments for Accelerate, run on CPU.

Companion of test_transformers_trainer_cpu.py (same pinned packages, same clean-up rule): one
process, tiny models, no distributed launch. What runs here:

- `TrainingArguments._process_fsdp_args`: the whole `fsdp` / `fsdp_config` -> plugin-argument
  table (FSDP2 and FSDP1 defaults, the `fsdp_` prefix, keys that are silently dropped, the three
  refusals), then accelerate's `FullyShardedDataParallelPlugin.set_auto_wrap_policy` for a
  misspelled key (falls back to `_no_split_modules`) and a misspelled class name (raises);
- `create_accelerator_and_postprocess`: `accelerator_config` -> `DataLoaderConfiguration` and the
  gradient-accumulation plugin, an unknown `accelerator_config` key;
- `HfTrainerDeepSpeedConfig.trainer_config_process` / `trainer_config_finalize`: the conditions of
  the "auto" fill (missing sections and keys, fill-only keys, when the mismatch error is raised);
- a real `train()`: the logged `loss` at several accumulation counts, with a plain mean loss and
  with a loss normalised by `num_items_in_batch`;
- `activation_checkpointing_enable` defaults (`use_reentrant`) on a one-layer GPT-2;
- checkpoint folders and resuming (`save_only_model`, `resume_from_checkpoint=True`).
"""
from __future__ import annotations

import functools
import os

import pytest
import torch
from torch import nn

from _tiny_trainer_model import Tiny, global_state_restored  # noqa: E402
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback, TrainingArguments
from transformers.integrations import deepspeed as hf_ds
from transformers.trainer_utils import get_last_checkpoint


@pytest.fixture(scope="module", autouse=True)
def _leave_no_global_state():
    with global_state_restored():
        yield


class TinyTokens(nn.Module):
    """Accepts loss kwargs: per-token squared error summed and divided by `num_items_in_batch`
    (labels -100 are ignored), the way transformers' causal-LM losses normalise."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 1)
        self.seen = []

    def forward(self, x, labels=None, num_items_in_batch=None, **kwargs):
        out = self.lin(x).squeeze(-1)
        mask = labels.ne(-100)
        err = ((out - labels.float()) ** 2) * mask
        self.seen.append(num_items_in_batch)
        denom = num_items_in_batch if num_items_in_batch is not None else mask.sum()
        return {"loss": err.sum() / denom, "logits": out}


def dataset(n=8):
    g = torch.Generator().manual_seed(0)
    return [{"x": torch.randn(4, generator=g), "labels": torch.randn((), generator=g)} for _ in range(n)]


def token_dataset():
    """8 samples of 3 tokens; the number of real labels per sample differs (1 to 3)."""
    g = torch.Generator().manual_seed(1)
    rows = []
    for i in range(8):
        labels = torch.randint(0, 3, (3,), generator=g).float()
        labels[(i % 3) + 1:] = -100
        rows.append({"x": torch.randn(3, 4, generator=g), "labels": labels})
    return rows


class Logs(TrainerCallback):
    def __init__(self):
        self.logs = []

    def on_log(self, args, state, control, logs=None, **kwargs):
        self.logs.append(dict(logs))


def args_for(tmp, **kw):
    base = dict(use_cpu=True, report_to="none", save_strategy="no", disable_tqdm=True)
    base.update(kw)
    return TrainingArguments(str(tmp), **base)


# ------------------------------------------------------------------ fsdp / fsdp_config -> plugin

def fsdp_args(tmp, cfg=None, fsdp=True):
    return args_for(tmp, fsdp=fsdp, fsdp_config=cfg).fsdp_plugin_args


FSDP2_DEFAULT = {"fsdp_version": 2, "auto_wrap_policy": "TRANSFORMER_BASED_WRAP", "cpu_ram_efficient_loading": False,
                 "state_dict_type": "FULL_STATE_DICT", "reshard_after_forward": True}


def test_fsdp_config_translation_table(tmp_path, monkeypatch):
    """Every key _process_fsdp_args reads, what it becomes, and the keys it drops without a word."""
    # cpu_ram_efficient_loading exports a variable: start without it and let monkeypatch remove it after,
    # so later tests in this worker (and the children they start) do not inherit it
    monkeypatch.delenv("FSDP_CPU_RAM_EFFICIENT_LOADING", raising=False)
    assert fsdp_args(tmp_path, {}) == FSDP2_DEFAULT
    assert fsdp_args(tmp_path, {"min_num_params": 5}, fsdp=False) is None  # fsdp_config alone: no FSDP
    # the `fsdp_` prefix is stripped; a string layer class becomes a one-element list, then comma-joined
    assert fsdp_args(tmp_path, {"fsdp_transformer_layer_cls_to_wrap": "MistralDecoderLayer"}) == {
        **FSDP2_DEFAULT, "transformer_cls_names_to_wrap": "MistralDecoderLayer"}
    assert fsdp_args(tmp_path, {"transformer_layer_cls_to_wrap": ["A", "B"]})["transformer_cls_names_to_wrap"] == "A,B"
    # unknown or misspelled keys (accelerate-config names included) are dropped: no error, no warning
    dropped = {"transformer_layer_cls_to_warp": ["X"], "sharding_strategy": "SHARD_GRAD_OP",
               "fsdp_offload_params": True, "backward_prefetch": "BACKWARD_PRE", "mixed_precision_policy": "bf16",
               "use_orig_params": False, "sync_module_states": False, "limit_all_gathers": True}
    assert fsdp_args(tmp_path, dropped) == FSDP2_DEFAULT
    # min_num_params only with SIZE_BASED_WRAP (ignored under the default TRANSFORMER_BASED_WRAP)
    assert fsdp_args(tmp_path, {"min_num_params": 1000}) == FSDP2_DEFAULT
    assert fsdp_args(tmp_path, {"min_num_params": 1000, "auto_wrap_policy": "SIZE_BASED_WRAP"}) == {
        **FSDP2_DEFAULT, "auto_wrap_policy": "SIZE_BASED_WRAP", "min_num_params": 1000}
    # strings are parsed as booleans; cpu_ram_efficient_loading is also exported to the environment
    got = fsdp_args(tmp_path, {"activation_checkpointing": "true", "cpu_ram_efficient_loading": True,
                               "cpu_offload": True, "reshard_after_forward": "false",
                               "state_dict_type": "SHARDED_STATE_DICT"})
    assert got == {**FSDP2_DEFAULT, "cpu_offload": True, "activation_checkpointing": True,
                   "cpu_ram_efficient_loading": True, "reshard_after_forward": False,
                   "state_dict_type": "SHARDED_STATE_DICT"}
    assert os.environ["FSDP_CPU_RAM_EFFICIENT_LOADING"] == "true"
    # FSDP1: the extra keys it reads and their defaults (sharding strategy travels as reshard_after_forward)
    v1 = fsdp_args(tmp_path, {"version": 1, "sharding_strategy": "SHARD_GRAD_OP"})
    assert v1 == {"fsdp_version": 1, "auto_wrap_policy": "TRANSFORMER_BASED_WRAP", "cpu_ram_efficient_loading": False,
                  "state_dict_type": "FULL_STATE_DICT", "reshard_after_forward": "full_shard",
                  "forward_prefetch": False, "backward_prefetch": "NO_PREFETCH", "use_orig_params": True,
                  "sync_module_states": True}
    assert fsdp_args(tmp_path, {"version": 1, "limit_all_gathers": "false"})["limit_all_gathers"] is False


def test_legacy_fsdp_strings_and_the_refusals(tmp_path):
    """The deprecated string form: strategies -> reshard_after_forward, offload -> cpu_offload;
    FSDP1-only strategies, unknown options and unknown wrap policies raise at TrainingArguments."""
    assert fsdp_args(tmp_path, {}, fsdp="shard_grad_op offload auto_wrap") == {
        **FSDP2_DEFAULT, "cpu_offload": True, "reshard_after_forward": False}
    assert fsdp_args(tmp_path, {"version": 1}, fsdp="hybrid_shard")["reshard_after_forward"] == "hybrid_shard"
    with pytest.raises(ValueError, match=r"`fsdp=hybrid_shard` is only available with FSDP1"):
        fsdp_args(tmp_path, {}, fsdp="hybrid_shard")
    with pytest.raises(ValueError, match=r"Unknown `fsdp` option: full_shrd"):
        fsdp_args(tmp_path, {}, fsdp="full_shrd")
    with pytest.raises(ValueError, match=r"`auto_wrap_policy` must be one of"):
        fsdp_args(tmp_path, {"auto_wrap_policy": "TRANSFORMER_WRAP"})
    # the explicit fsdp_config key wins over the legacy string (setdefault)
    assert fsdp_args(tmp_path, {"reshard_after_forward": True}, fsdp="shard_grad_op")["reshard_after_forward"] is True


def test_misspelled_key_falls_back_to_no_split_modules_misspelled_class_raises(tmp_path):
    """At prepare, accelerate's set_auto_wrap_policy: no class names -> the model's
    _no_split_modules; a class name not in the model -> ValueError."""
    from accelerate.utils import FullyShardedDataParallelPlugin

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(2, 2)

    class Model(nn.Module):
        _no_split_modules = ["Block"]

        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList([Block(), Block()])

    plugin = FullyShardedDataParallelPlugin(**fsdp_args(tmp_path, {"transformer_layer_cls_to_warp": ["Nope"]}))
    plugin.set_auto_wrap_policy(Model())
    assert plugin.transformer_cls_names_to_wrap == ["Block"]
    assert plugin.auto_wrap_policy.keywords["transformer_layer_cls"] == {Block}
    plugin = FullyShardedDataParallelPlugin(**fsdp_args(tmp_path, {"transformer_layer_cls_to_wrap": "Blok"}))
    with pytest.raises(ValueError, match="Could not find the transformer layer class Blok in the model"):
        plugin.set_auto_wrap_policy(Model())


# ------------------------------------------------------------------ accelerator_config -> Accelerator

def test_accelerator_config_becomes_dataloader_config_and_ga_plugin(tmp_path):
    args = args_for(tmp_path, data_seed=7, accelerator_config={
        "split_batches": True, "even_batches": False, "use_seedable_sampler": False, "non_blocking": True,
        "gradient_accumulation_kwargs": {"sync_each_batch": True}})
    trainer = Trainer(model=Tiny(), args=args, train_dataset=dataset())
    dc = trainer.accelerator.dataloader_config
    assert (dc.split_batches, dc.dispatch_batches, dc.even_batches, dc.use_seedable_sampler, dc.data_seed,
            dc.non_blocking) == (True, None, False, False, 7, True)
    assert trainer.accelerator.gradient_state.plugin_kwargs == {"num_steps": 1, "sync_each_batch": True}
    defaults = Trainer(model=Tiny(), args=args_for(tmp_path), train_dataset=dataset()).accelerator.dataloader_config
    assert (defaults.split_batches, defaults.dispatch_batches, defaults.even_batches,
            defaults.use_seedable_sampler, defaults.data_seed, defaults.non_blocking) == (
        False, None, True, True, None, False)
    with pytest.raises(TypeError, match="unexpected keyword argument 'split_batch'"):
        args_for(tmp_path, accelerator_config={"split_batch": True})


# ------------------------------------------------------------------ DeepSpeed "auto" fill conditions

def test_deepspeed_fill_conditions(tmp_path):
    """What trainer_config_process fills, what it leaves alone, and when mismatches are raised."""
    args = args_for(tmp_path, per_device_train_batch_size=4, gradient_accumulation_steps=2, learning_rate=3e-4,
                    weight_decay=0.1, max_grad_norm=0.5, save_on_each_node=True, warmup_steps=0)
    cfg = {
        "train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto", "train_batch_size": "auto",
        "gradient_clipping": "auto",
        # a section whose params omit lr: nothing is added, DeepSpeed's optimizer default applies
        "optimizer": {"type": "AdamW", "params": {"betas": [0.9, 0.95], "eps": "auto"}},
        "scheduler": {"type": "WarmupDecayLR", "params": {"warmup_min_lr": 1e-5, "warmup_max_lr": "auto",
                                                          "warmup_num_steps": "auto", "total_num_steps": "auto"}},
        "zero_optimization": {"stage": 2, "stage3_prefetch_bucket_size": "auto", "reduce_bucket_size": 5},
    }
    ds = hf_ds.HfTrainerDeepSpeedConfig(cfg)
    ds.trainer_config_process(args)  # never raises: mismatches are only collected
    c = ds.config
    assert (c["train_micro_batch_size_per_gpu"], c["gradient_accumulation_steps"], c["train_batch_size"],
            c["gradient_clipping"]) == (4, 2, 8, 0.5)
    assert c["optimizer"]["params"] == {"betas": [0.9, 0.95], "eps": 1e-8}  # no lr / weight_decay added
    assert c["scheduler"]["params"]["warmup_min_lr"] == 1e-5  # fill-only key: a set value is kept, unchecked
    assert c["scheduler"]["params"]["warmup_max_lr"] == 3e-4
    assert c["checkpoint"] == {"use_node_local_storage": True}  # from save_on_each_node
    assert "fp16" not in c and "bf16" not in c and ds.dtype() == torch.float32  # absent sections stay absent
    assert ds.mismatches == ["- ds optimizer.params.betas=[0.9, 0.95] vs hf adam_beta1+adam_beta2=[0.9, 0.999]"]
    # at ZeRO-2 a leftover stage3_* "auto" still makes finalize look for a hidden size
    with pytest.raises(ValueError, match="neither `hidden_size` nor `hidden_sizes`"):
        ds.trainer_config_finalize(args, nn.Linear(1, 1), 10)
    model = nn.Linear(1, 1)
    model.config = GPT2Config(n_embd=16)  # hidden_size 16
    with pytest.raises(ValueError) as info:
        ds.trainer_config_finalize(args, model, 10)
    msg = str(info.value)
    assert "optimizer.params.betas" in msg and "set these DeepSpeed config values to 'auto'" in msg
    # finalize filled the step counts before raising; ZeRO-2 leaves the stage3_* "auto" for Accelerate
    assert c["scheduler"]["params"]["total_num_steps"] == 10 and c["scheduler"]["params"]["warmup_num_steps"] == 1
    assert c["zero_optimization"]["stage3_prefetch_bucket_size"] == "auto"
    assert c["zero_optimization"]["reduce_bucket_size"] == 5

    # without a scheduler or optimizer section nothing is added or checked; precision "auto" -> dtype
    bf = hf_ds.HfTrainerDeepSpeedConfig({"train_batch_size": 99, "fp16": {"enabled": "auto"},
                                         "bf16": {"enabled": True}})
    bf.trainer_config_process(args)
    assert "optimizer" not in bf.config and "scheduler" not in bf.config
    assert bf.config["fp16"]["enabled"] is False and bf.dtype() == torch.bfloat16
    assert bf.mismatches == ["- ds train_batch_size=99 vs hf train_batch_size (calculated)=8",
                             "- ds bf16.enabled=True vs hf bf16|bf16_full_eval=False"]
    # auto_find_batch_size: the two batch-size keys are filled but never compared
    afb = hf_ds.HfTrainerDeepSpeedConfig({"train_micro_batch_size_per_gpu": 16, "train_batch_size": 99})
    afb.trainer_config_process(args, auto_find_batch_size=True)
    assert afb.mismatches == []


# ------------------------------------------------------------------ the logged loss

def _train(tmp, model, data, ga, bs=2, loss_kwargs=None, **kw):
    torch.manual_seed(0)
    logs = Logs()
    args = args_for(tmp, per_device_train_batch_size=bs, gradient_accumulation_steps=ga, learning_rate=0.0,
                    num_train_epochs=1, logging_steps=1, **kw)
    trainer = Trainer(model=model, args=args, train_dataset=data, callbacks=[logs])
    if loss_kwargs is not None:
        trainer.model_accepts_loss_kwargs = loss_kwargs
    out = trainer.train()
    return [entry["loss"] for entry in logs.logs if "loss" in entry], out.training_loss



def test_deepspeed_hidden_size_fill_per_stage(tmp_path):
    """set-5 s5-ds-07: the Trainer fills reduce_bucket_size "auto" (hidden_size^2) at every ZeRO stage;
    the two stage3_* keys only at ZeRO-3 (0.9 h^2 and 10 h)."""
    args = args_for(tmp_path)
    model = nn.Linear(1, 1)
    model.config = GPT2Config(n_embd=16)  # hidden_size 16
    got = {}
    for stage in (1, 2, 3):
        ds = hf_ds.HfTrainerDeepSpeedConfig({"zero_optimization": {
            "stage": stage, "reduce_bucket_size": "auto", "stage3_prefetch_bucket_size": "auto",
            "stage3_param_persistence_threshold": "auto"}})
        ds.trainer_config_process(args)
        ds.trainer_config_finalize(args, model, 10)
        z = ds.config["zero_optimization"]
        got[stage] = (z["reduce_bucket_size"], z["stage3_prefetch_bucket_size"], z["stage3_param_persistence_threshold"])
    assert got == {1: (256, "auto", "auto"), 2: (256, "auto", "auto"), 3: (256, 230, 160)}


def test_plain_deepspeed_config_with_auto(monkeypatch):
    """set-5 s5-ds-07: the same JSON straight to DeepSpeed: the zero block's "auto" silently becomes
    DeepSpeed's default (5e8), a batch key "auto" fails in the batch arithmetic with TypeError."""
    monkeypatch.setenv("DS_ACCELERATOR", os.environ.get("DS_ACCELERATOR", "cpu"))
    from deepspeed.runtime.config import DeepSpeedConfig

    cfg = DeepSpeedConfig({"train_micro_batch_size_per_gpu": 2,
                           "zero_optimization": {"stage": 2, "reduce_bucket_size": "auto"}})
    assert cfg.zero_config.reduce_bucket_size == 500_000_000
    for key in ("train_batch_size", "train_micro_batch_size_per_gpu"):
        with pytest.raises(TypeError):
            DeepSpeedConfig({key: "auto", "zero_optimization": {"stage": 2}})

def test_logged_loss_is_the_mean_micro_batch_loss_at_any_accumulation(tmp_path):
    """lr 0 keeps the model fixed: with a plain mean loss every GA value logs the same mean (each
    logged value = mean of that step's micro-batch losses), never GA times smaller or larger."""
    model = Tiny()
    with torch.no_grad():  # equal micro-batches: the mean of their means is the per-sample mean
        x = torch.stack([r["x"] for r in dataset()])
        y = torch.stack([r["labels"] for r in dataset()])
        mean = ((model.lin(x).squeeze(-1) - y) ** 2).mean().item()
    l1, t1 = _train(tmp_path, model, dataset(), ga=1)
    l2, t2 = _train(tmp_path, model, dataset(), ga=2)
    l4, t4 = _train(tmp_path, model, dataset(), ga=4)
    assert len(l1) == 4 and len(l2) == 2 and len(l4) == 1
    assert sum(l1) / 4 == pytest.approx(mean, rel=1e-4) and len(set(l1)) == 4  # one micro-batch per step
    assert l4[0] == pytest.approx(mean, rel=1e-4) and sum(l2) / 2 == pytest.approx(mean, rel=1e-4)
    assert t1 == pytest.approx(mean, rel=1e-4) and t2 == pytest.approx(mean, rel=1e-4) and t4 == pytest.approx(mean, rel=1e-4)


def test_logged_loss_with_num_items_in_batch_is_token_weighted(tmp_path):
    """A model that accepts loss kwargs gets num_items_in_batch = the real labels of the whole
    accumulation step; the Trainer does not divide again, and the logged loss is the token-weighted
    mean over the step, which differs from the mean of per-micro-batch means."""
    data = token_dataset()
    model = TinyTokens()
    with torch.no_grad():
        x = torch.stack([r["x"] for r in data])
        labels = torch.stack([r["labels"] for r in data])
        out = model.lin(x).squeeze(-1)
        mask = labels.ne(-100)
        err = ((out - labels) ** 2) * mask
    token_mean = (err.sum() / mask.sum()).item()
    logged, _ = _train(tmp_path, model, data, ga=4)
    assert len(logged) == 1 and logged[0] == pytest.approx(token_mean, rel=1e-4)
    assert model.seen[-1] is not None and int(model.seen[-1]) == int(mask.sum())  # the step's label count
    # the same model treated as not accepting loss kwargs: no num_items_in_batch, each micro-batch
    # normalised by its own labels, divided by GA: the mean of per-micro-batch means, another number
    model.seen.clear()
    plain, _ = _train(tmp_path, model, data, ga=4, loss_kwargs=False)
    assert set(model.seen) == {None} and abs(plain[0] - token_mean) > 1e-3 * token_mean


# ------------------------------------------------------------------ activation checkpointing defaults

def _gc_keywords(model):
    funcs = {m._gradient_checkpointing_func for m in model.modules() if hasattr(m, "_gradient_checkpointing_func")}
    assert len(funcs) == 1
    func = funcs.pop()
    assert isinstance(func, functools.partial) and func.func is torch.utils.checkpoint.checkpoint
    return func.keywords


def test_activation_checkpointing_is_non_reentrant_by_default(tmp_path):
    """transformers 5.25.0: no kwargs -> use_reentrant False; kwargs without the key reach torch
    without it (torch 2.13 then runs reentrant); the Trainer turns an empty dict into None."""
    cfg = GPT2Config(n_layer=1, n_embd=8, n_head=2, vocab_size=16, n_positions=8)
    model = GPT2LMHeadModel(cfg)
    model.activation_checkpointing_enable()
    assert _gc_keywords(model) == {"use_reentrant": False}
    model.activation_checkpointing_enable(activation_checkpointing_kwargs={"preserve_rng_state": True})
    assert _gc_keywords(model) == {"preserve_rng_state": True}
    import inspect
    src = inspect.getsource(torch.utils.checkpoint.checkpoint)
    assert "if use_reentrant is None:" in src and "use_reentrant = True" in src
    # through the Trainer: activation_checkpointing_kwargs={} -> None -> the non-reentrant default
    model = GPT2LMHeadModel(cfg)
    rows = [{"input_ids": torch.tensor([1, 2, 3, 4]), "labels": torch.tensor([1, 2, 3, 4])} for _ in range(2)]
    args = args_for(tmp_path, per_device_train_batch_size=2, max_steps=1, gradient_checkpointing=True,
                    gradient_checkpointing_kwargs={})
    Trainer(model=model, args=args, train_dataset=rows).train()
    assert _gc_keywords(model) == {"use_reentrant": False}
    assert args.activation_checkpointing is True  # the deprecated name was copied to the new one


# ------------------------------------------------------------------ checkpoint folders and resuming

def test_checkpoint_files_save_only_model_and_resume(tmp_path):
    """Plain (DDP/one process) checkpoint contents; a save_only_model folder resumes without error
    with a fresh optimizer; resume_from_checkpoint=True takes the highest checkpoint-N number."""
    full = tmp_path / "full"
    args = args_for(full, max_steps=2, save_strategy="steps", save_steps=1, per_device_train_batch_size=2)
    Trainer(model=Tiny(), args=args, train_dataset=dataset()).train()
    assert sorted(os.listdir(full / "checkpoint-2")) == [
        "model.safetensors", "optimizer.pt", "rng_state.pth", "scheduler.pt", "trainer_state.json",
        "training_args.bin"]

    light = tmp_path / "light"
    args = args_for(light, max_steps=2, save_strategy="steps", save_steps=1, per_device_train_batch_size=2,
                    save_only_model=True)
    Trainer(model=Tiny(), args=args, train_dataset=dataset()).train()
    assert sorted(os.listdir(light / "checkpoint-2")) == ["model.safetensors", "trainer_state.json",
                                                          "training_args.bin"]
    (light / "checkpoint-10").mkdir()  # an empty (interrupted) folder with the highest number
    assert get_last_checkpoint(str(light)) == str(light / "checkpoint-10")
    os.rmdir(light / "checkpoint-10")
    args = args_for(light, max_steps=3, save_strategy="no", per_device_train_batch_size=2, save_only_model=True)
    trainer = Trainer(model=Tiny(), args=args, train_dataset=dataset())
    trainer.train(resume_from_checkpoint=True)  # checkpoint-2: weights + state, no optimizer: no error
    assert trainer.state.global_step == 3
    assert trainer.lr_scheduler.last_epoch == 1  # a fresh schedule: one step since the resume, not 3
    resumed = Trainer(model=Tiny(), args=args_for(full, max_steps=3, per_device_train_batch_size=2),
                      train_dataset=dataset())
    resumed.train(resume_from_checkpoint=str(full / "checkpoint-2"))
    assert resumed.lr_scheduler.last_epoch == 3  # a full checkpoint restores the schedule
    with pytest.raises(FileNotFoundError, match="trainer_state.json"):
        os.remove(full / "checkpoint-1" / "trainer_state.json")
        Trainer(model=Tiny(), args=args_for(full, max_steps=3), train_dataset=dataset()).train(
            resume_from_checkpoint=str(full / "checkpoint-1"))
    with pytest.raises(ValueError, match=r"No valid checkpoint found in output directory"):
        Trainer(model=Tiny(), args=args_for(tmp_path / "empty", max_steps=1),
                train_dataset=dataset()).train(resume_from_checkpoint=True)


def test_deepspeed_plugin_side_of_the_fill(tmp_path, monkeypatch):
    """`--deepspeed` JSON without zero_optimization is refused by accelerate's DeepSpeedPlugin (built
    inside TrainingArguments); on the accelerate-config route the plugin's own config carries
    gradient_clipping "auto", which propagate_args_to_deepspeed fills from max_grad_norm, while a
    JSON without the key keeps it absent (DeepSpeed's own 1.0 applies, max_grad_norm unused)."""
    from types import SimpleNamespace

    from accelerate.utils import DeepSpeedPlugin

    with pytest.raises(ValueError, match="Please specify the ZeRO optimization config"):
        DeepSpeedPlugin(hf_ds_config={"train_batch_size": 8})
    for var in ("ACCELERATE_GRADIENT_CLIPPING", "ACCELERATE_GRADIENT_ACCUMULATION_STEPS",
                "ACCELERATE_DEEPSPEED_CONFIG_FILE"):
        monkeypatch.delenv(var, raising=False)
    args = args_for(tmp_path, max_grad_norm=0.3, gradient_accumulation_steps=2, per_device_train_batch_size=3)
    plugin = DeepSpeedPlugin(zero_stage=2)
    assert plugin.deepspeed_config["gradient_clipping"] == "auto"
    hf_ds.propagate_args_to_deepspeed(SimpleNamespace(state=SimpleNamespace(deepspeed_plugin=plugin)), args)
    cfg = plugin.deepspeed_config
    assert (cfg["gradient_clipping"], cfg["gradient_accumulation_steps"], cfg["train_micro_batch_size_per_gpu"],
            cfg["train_batch_size"]) == (0.3, 2, 3, 6)
    json_plugin = DeepSpeedPlugin(hf_ds_config={"zero_optimization": {"stage": 2}})
    assert "gradient_clipping" not in json_plugin.deepspeed_config
    assert json_plugin.deepspeed_config["gradient_accumulation_steps"] == 1  # absent key: accelerate writes 1


def test_removed_4x_fsdp_fields_are_refused(tmp_path):
    """transformers 4.x's separate `fsdp_transformer_layer_cls_to_wrap` / `fsdp_min_num_params`
    arguments no longer exist in 5.25.0: the constructor raises TypeError, HfArgumentParser refuses
    the flag; the same names inside fsdp_config work (prefix stripped)."""
    from transformers import HfArgumentParser

    with pytest.raises(TypeError, match="fsdp_transformer_layer_cls_to_wrap"):
        TrainingArguments(str(tmp_path), fsdp_transformer_layer_cls_to_wrap="LlamaDecoderLayer")
    parser = HfArgumentParser(TrainingArguments)
    with pytest.raises(ValueError, match="Some specified arguments are not used by the HfArgumentParser"):
        parser.parse_args_into_dataclasses(["--output_dir", str(tmp_path), "--fsdp_min_num_params", "1000"])


def test_full_eval_precision_turns_on_deepspeed_training_precision(tmp_path):
    """The precision fill reads `fp16 or fp16_full_eval` / `bf16 or bf16_full_eval`: an eval-only
    flag with "auto" in the JSON enables that precision for DeepSpeed training too (use_cpu lets
    bf16_full_eval pass the bf16-support check on any machine)."""
    args = args_for(tmp_path, bf16_full_eval=True)
    assert args.bf16 is False and args.mixed_precision == os.environ.get("ACCELERATE_MIXED_PRECISION", "no")
    ds = hf_ds.HfTrainerDeepSpeedConfig({"bf16": {"enabled": "auto"}, "fp16": {"enabled": "auto"}})
    ds.trainer_config_process(args)
    assert ds.config["bf16"]["enabled"] is True and ds.config["fp16"]["enabled"] is False
    assert ds.dtype() == torch.bfloat16


class MeanWithKwargs(Tiny):
    """forward takes **kwargs (so the Trainer thinks it normalises by num_items_in_batch) but
    returns a plain per-micro-batch mean."""

    def forward(self, x, labels=None, **kwargs):
        return super().forward(x, labels)


def test_kwargs_model_with_a_mean_loss_is_not_divided(tmp_path):
    """The trap: **kwargs in forward means "already normalised", so the mean is summed over the
    micro-batches: the logged loss (and the gradient) is GA times the mean; accepts_loss_kwargs =
    False on the model restores the division."""
    model = MeanWithKwargs()
    with torch.no_grad():
        x = torch.stack([r["x"] for r in dataset()])
        y = torch.stack([r["labels"] for r in dataset()])
        mean = ((model.lin(x).squeeze(-1) - y) ** 2).mean().item()
    logged, _ = _train(tmp_path, model, dataset(), ga=4)
    assert logged[0] == pytest.approx(4 * mean, rel=1e-4)
    model.accepts_loss_kwargs = False
    logged, _ = _train(tmp_path, model, dataset(), ga=4)
    assert logged[0] == pytest.approx(mean, rel=1e-4)


def test_fsdp1_strategy_names_and_sync_module_states_needs_a_device(tmp_path):
    """FSDP1: the strategy travels as reshard_after_forward and accelerate maps the name to a
    ShardingStrategy; the Trainer's sync_module_states default (true) makes the plugin look up the
    current accelerator device at construction, which raises where there is none (CPU/gloo).
    Both branches: the error is asserted only on a machine without CUDA/XPU."""
    from accelerate.utils import FullyShardedDataParallelPlugin
    from torch.distributed.fsdp import ShardingStrategy

    v1 = fsdp_args(tmp_path, {"version": 1, "reshard_after_forward": "shard_grad_op", "sync_module_states": "false"})
    assert FullyShardedDataParallelPlugin(**v1).reshard_after_forward == ShardingStrategy.SHARD_GRAD_OP
    default_v1 = fsdp_args(tmp_path, {"version": 1})
    assert default_v1["sync_module_states"] is True
    has_device = torch.cuda.is_available() or (hasattr(torch, "xpu") and torch.xpu.is_available())
    if has_device:
        FullyShardedDataParallelPlugin(**default_v1)
    else:
        with pytest.raises(RuntimeError, match="There are currently no available devices found"):
            FullyShardedDataParallelPlugin(**default_v1)


def test_leftover_auto_in_zero_section_becomes_deepspeeds_default(monkeypatch):
    """An "auto" nobody fills (the Trainer and Accelerate fill only their listed keys) reaches
    DeepSpeed; its pydantic config models drop "auto" values (non-strict), so the key takes
    DeepSpeed's default, silently."""
    monkeypatch.setenv("DS_ACCELERATOR", os.environ.get("DS_ACCELERATOR", "cpu"))
    from deepspeed.runtime.zero.config import DeepSpeedZeroConfig

    default = DeepSpeedZeroConfig(stage=3)
    auto = DeepSpeedZeroConfig(stage=3, sub_group_size="auto", reduce_bucket_size="auto",
                               stage3_max_live_parameters="auto")
    assert auto.sub_group_size == default.sub_group_size == 1_000_000_000
    assert auto.reduce_bucket_size == default.reduce_bucket_size
    assert auto.max_live_parameters == default.max_live_parameters


def test_zero3_save_model_peft_branch_does_not_read_the_gather_flag(tmp_path, monkeypatch):
    """Trainer.save_model's DeepSpeed branch (s9-ck-b11), run with a stand-in engine whose
    get_state_dict raises as it does with stage3_gather_16bit_weights_on_model_save false: a PeftModel
    takes _zero3_consolidated_16bit_state_dict(exclude_frozen_parameters=True) and never reaches the
    flag; any other model falls back to the engine checkpoint."""
    from types import SimpleNamespace

    import transformers.trainer as trm

    def run(peft: bool):
        calls = []

        class Engine:
            config = {"zero_optimization": {"stage": 3}}

            def save_checkpoint(self, save_dir, tag=None, client_state={}, save_latest=True,
                                exclude_frozen_parameters=False):
                calls.append("engine save_checkpoint")

            def _zero3_consolidated_16bit_state_dict(self, exclude_frozen_parameters=False):
                calls.append(("consolidated", exclude_frozen_parameters))
                return {"lora_A.weight": torch.zeros(1)}

        class Acc:
            def get_state_dict(self, model):
                calls.append("accelerator.get_state_dict")
                raise ValueError("Cannot get 16bit model weights because `stage3_gather_16bit_weights_on_model_save` is False")

        eng = Engine()
        stub = SimpleNamespace(
            is_fsdp_enabled=False, is_deepspeed_enabled=True, model_wrapped=eng, deepspeed=eng, model=object(),
            accelerator=Acc(), args=SimpleNamespace(output_dir=str(tmp_path), push_to_hub=False, should_save=True),
            _save=lambda d, state_dict=None: calls.append(("_save", sorted(state_dict or {}))))
        monkeypatch.setattr(trm, "_is_peft_model", lambda m: peft)
        Trainer.save_model(stub, str(tmp_path))
        return calls

    assert run(True) == [("consolidated", True), ("_save", ["lora_A.weight"])]
    assert run(False) == ["accelerator.get_state_dict", ("_save", []), "engine save_checkpoint"]

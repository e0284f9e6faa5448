"""What accelerate 1.15.0 accepts, refuses, ignores and fills per backend, run in-process.

Backs `sub-skills/distributed-training-backends/references/backend-checks.md`. Every check here
constructs the real dataclass or calls the real method: `ParallelismConfig` (construction and
`_validate_accelerator` against a stand-in accelerator), `DeepSpeedPlugin` (inline and file style,
`set_mixed_precision`, `deepspeed_config_process`), `FullyShardedDataParallelPlugin` per version,
`MegatronLMPlugin` (defaults, model parsers, optimizer and scheduler hand-off) and the FP8 recipe
kwargs. None of them needs a process group, a GPU or an optional package (megatron-core,
transformer-engine, torchao and MS-AMP are not installed: what needs them is cited in the
reference, not run). Cheap: no child process, no launch.
"""
from __future__ import annotations

import os
import warnings
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")  # the pinned .venv always has it; the import keeps collection cheap
from accelerate import DeepSpeedPlugin, FullyShardedDataParallelPlugin, ParallelismConfig  # noqa: E402
from accelerate.utils import (  # noqa: E402
    DeepSpeedSequenceParallelConfig,
    DistributedType,
    MegatronLMPlugin,
    MSAMPRecipeKwargs,
    TorchContextParallelConfig,
    TorchTensorParallelConfig,
)

PREFIXES = ("ACCELERATE_", "FSDP_", "PARALLELISM_CONFIG_", "MEGATRON_LM_")


@pytest.fixture(autouse=True)
def clean_env():
    """Each check starts with no launcher variables; whatever a plugin writes is undone."""
    saved = dict(os.environ)
    for k in list(os.environ):
        if k.startswith(PREFIXES):
            del os.environ[k]
    yield
    os.environ.clear()
    os.environ.update(saved)


def _err(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the type and message are what is asserted
        return f"{type(e).__name__}: {e}"
    return "accepted"


# ======================================================================== ParallelismConfig
def test_parallelism_config_construction_refusals():
    # TP or CP over pure replication is refused; over sharding (2-D) or HSDP (3-D) it is accepted
    assert "pure data parallelism" in _err(lambda: ParallelismConfig(dp_replicate_size=2, tp_size=4))
    assert "pure data parallelism" in _err(lambda: ParallelismConfig(dp_replicate_size=2, cp_size=2))
    assert _err(lambda: ParallelismConfig(dp_shard_size=2, tp_size=4)) == "accepted"
    assert _err(lambda: ParallelismConfig(dp_replicate_size=2, dp_shard_size=2, tp_size=2)) == "accepted"
    assert _err(lambda: ParallelismConfig(dp_replicate_size=4)) == "accepted"  # plain DDP replicas
    assert _err(lambda: ParallelismConfig(tp_size=8)) == "accepted"  # TP alone (no dp) is accepted here
    assert "mutually exclusive" in _err(lambda: ParallelismConfig(cp_size=2, sp_size=2))
    assert "at least 1" in _err(lambda: ParallelismConfig(tp_size=0))
    assert "cp_backend must be one of ['torch']" in _err(lambda: ParallelismConfig(cp_backend="ring"))
    assert "sp_backend must be one of ['deepspeed']" in _err(lambda: ParallelismConfig(sp_backend="torch"))
    # a handler of the wrong class for cp is refused; handlers are built automatically when the size > 1
    assert "requires" in _err(lambda: ParallelismConfig(dp_shard_size=2, cp_size=2, cp_handler=object()))
    pc = ParallelismConfig(dp_shard_size=2, tp_size=2, cp_size=2)
    assert isinstance(pc.tp_handler, TorchTensorParallelConfig) and isinstance(pc.cp_handler, TorchContextParallelConfig)
    assert pc.cp_handler.cp_comm_strategy == "allgather"
    assert ParallelismConfig(sp_size=2).sp_handler.sp_seq_length_is_variable is True


def test_parallelism_config_env_and_mesh_order():
    os.environ.update(PARALLELISM_CONFIG_DP_SHARD_SIZE="2", PARALLELISM_CONFIG_TP_SIZE="2",
                      PARALLELISM_CONFIG_DP_REPLICATE_SIZE="2", PARALLELISM_CONFIG_CP_COMM_STRATEGY="alltoall")
    pc = ParallelismConfig(cp_size=2)  # argument wins for cp; the rest from the environment
    assert (pc.dp_replicate_size, pc.dp_shard_size, pc.tp_size, pc.cp_size) == (2, 2, 2, 2)
    assert pc.cp_handler.cp_comm_strategy == "alltoall"
    # canonical order whatever the argument order; size-1 dimensions are left out of the mesh
    assert pc._get_mesh() == (("dp_replicate", "dp_shard", "cp", "tp"), (2, 2, 2, 2))
    for k in [k for k in os.environ if k.startswith("PARALLELISM_CONFIG_")]:
        del os.environ[k]
    assert ParallelismConfig(tp_size=2, dp_shard_size=4)._get_mesh() == (("dp_shard", "tp"), (4, 2))
    assert ParallelismConfig()._get_mesh() == ()
    # joint dimensions flattened on top of the mesh
    assert (pc.dp_dim_names, pc.dp_shard_cp_dim_names, pc.dp_cp_dim_names, pc.fsdp_dim_names) == (
        ["dp_replicate", "dp_shard"], ["dp_shard", "cp"], ["dp_replicate", "dp_shard", "cp"],
        ["dp_replicate", "dp_shard_cp"])
    assert (pc.data_parallel_size, pc.non_data_parallel_size, pc.total_size) == (4, 4, 16)
    # DeepSpeed sequence parallelism builds no torch mesh (DeepSpeed makes its own groups)
    assert ParallelismConfig(sp_size=2).build_device_mesh("cpu") is None
    assert "alltoall" in _err(lambda: TorchContextParallelConfig(cp_comm_strategy="ring"))


def _acc(n, dt, fsdp2=False, multi=None):
    multi = dt in (DistributedType.MULTI_GPU,) if multi is None else multi
    return SimpleNamespace(num_processes=n, distributed_type=dt, is_fsdp2=fsdp2, multi_device=multi,
                           is_main_process=True)


def test_parallelism_config_validate_against_accelerator():
    fsdp, gpu, cpu, ds = (DistributedType.FSDP, DistributedType.MULTI_GPU, DistributedType.MULTI_CPU,
                          DistributedType.DEEPSPEED)
    v = lambda pc, acc: _err(lambda: pc._validate_accelerator(acc))  # noqa: E731
    # product of sizes must equal the process count
    assert "does not match num_processes (8)" in v(ParallelismConfig(dp_shard_size=2, tp_size=2), _acc(8, fsdp, True))
    assert v(ParallelismConfig(dp_shard_size=4, tp_size=2), _acc(8, fsdp, True)) == "accepted"
    # all sizes 1 on several devices: dp_replicate becomes the process count (plain DDP)
    pc = ParallelismConfig()
    assert v(pc, _acc(4, gpu)) == "accepted" and pc.dp_replicate_size == 4
    # ... and under FSDP2 or DeepSpeed all-ones returns before any check: no product or nothing-to-shard error
    for acc in (_acc(4, fsdp, True), _acc(4, ds)):
        pc = ParallelismConfig()
        assert v(pc, acc) == "accepted" and pc.dp_replicate_size == 1
    # FSDP2 needs dp_shard or cp > 1: TP over the whole world under an FSDP config is refused
    assert "no dimension for FSDP to shard across" in v(ParallelismConfig(tp_size=4), _acc(4, fsdp, True))
    assert v(ParallelismConfig(tp_size=4), _acc(4, gpu)) == "accepted"  # DDP type + TP
    assert v(ParallelismConfig(dp_replicate_size=2, dp_shard_size=2), _acc(4, ds)) == "accepted"
    # FSDP1 and CPU data parallel are refused as soon as the product is > 1
    assert "only compatible" in v(ParallelismConfig(dp_shard_size=4), _acc(4, fsdp, False))
    assert "only compatible" in v(ParallelismConfig(dp_replicate_size=4), _acc(4, cpu, False, multi=False))
    # DeepSpeed SP skips the product check
    assert v(ParallelismConfig(sp_size=2), _acc(8, ds)) == "accepted"
    # a handler whose size is 1 is ignored with a warning
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        ParallelismConfig(dp_shard_size=4, tp_handler=TorchTensorParallelConfig())._validate_accelerator(
            _acc(4, fsdp, True))
    assert any("tp_handler is set, but tp_size is set to 1" in str(x.message) for x in w)


def test_sequence_parallel_config_refusals():
    assert "must be provided" in _err(lambda: DeepSpeedSequenceParallelConfig(sp_seq_length_is_variable=False))
    os.environ["PARALLELISM_CONFIG_SP_SEQ_LENGTH"] = "4096"
    assert DeepSpeedSequenceParallelConfig(sp_seq_length_is_variable=False).sp_seq_length == 4096
    assert "not supported with sequence parallelism" in _err(
        lambda: DeepSpeedSequenceParallelConfig(sp_attn_implementation="eager"))
    assert "hub-hosted" in _err(lambda: DeepSpeedSequenceParallelConfig(sp_attn_implementation="org/my-attn"))
    assert _err(lambda: DeepSpeedSequenceParallelConfig(
        sp_attn_implementation="kernels-community/flash-attn2")) == "accepted"
    assert DeepSpeedSequenceParallelConfig().sp_attn_implementation is None  # only the launcher writes sdpa


# ======================================================================== DeepSpeedPlugin
def _zero(stage, **extra):
    return {"zero_optimization": {"stage": stage, **extra}}


def test_deepspeed_plugin_inline_defaults_and_env():
    p = DeepSpeedPlugin()
    c = p.deepspeed_config
    assert (p.zero_stage, p.gradient_accumulation_steps, p.gradient_clipping) == (2, "auto", "auto")
    assert (c["train_batch_size"], c["train_micro_batch_size_per_gpu"], c["gradient_accumulation_steps"]) == (
        "auto", "auto", "auto")
    assert c["gradient_clipping"] == "auto" and c["zero_optimization"]["offload_optimizer"]["device"] == "none"
    assert p.zero3_init_flag is False and DeepSpeedPlugin(zero_stage=3).zero3_init_flag is True
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert DeepSpeedPlugin(zero_stage=2, zero3_init_flag=True).zero3_init_flag is False
    assert any("only applicable for ZeRO Stage 3" in str(x.message) for x in w)
    os.environ.update(ACCELERATE_GRADIENT_ACCUMULATION_STEPS="4", ACCELERATE_DEEPSPEED_ZERO_STAGE="3")
    p = DeepSpeedPlugin()
    assert (p.gradient_accumulation_steps, p.zero_stage, p.deepspeed_config["gradient_accumulation_steps"]) == (4, 3, 4)
    # nvme_path is written only for device nvme
    p = DeepSpeedPlugin(zero_stage=3, offload_param_device="cpu", offload_param_nvme_path="/nvme")
    assert p.deepspeed_config["zero_optimization"]["offload_param"]["nvme_path"] is None


def test_deepspeed_plugin_file_versus_plugin_values():
    # a concrete value in the file beats the plugin's (no error, no warning); the plugin only fills "auto"
    p = DeepSpeedPlugin(hf_ds_config=_zero(3), zero_stage=2, gradient_clipping=0.5)
    assert p.zero_stage == 3 and p.deepspeed_config["zero_optimization"]["stage"] == 3
    assert "gradient_clipping" not in p.deepspeed_config  # an absent key is not added from the plugin
    p = DeepSpeedPlugin(hf_ds_config={**_zero("auto"), "gradient_clipping": "auto"}, zero_stage=3, gradient_clipping=0.5)
    assert p.deepspeed_config["zero_optimization"]["stage"] == 3 and p.deepspeed_config["gradient_clipping"] == 0.5
    # "auto" stage with nothing set: the plugin default 2
    assert DeepSpeedPlugin(hf_ds_config=_zero("auto")).deepspeed_config["zero_optimization"]["stage"] == 2
    off = DeepSpeedPlugin(hf_ds_config=_zero(3, offload_optimizer={"device": "auto"})).deepspeed_config
    assert off["zero_optimization"]["offload_optimizer"]["device"] == "none"
    # accumulation key absent -> 1 written into the file's config
    assert DeepSpeedPlugin(hf_ds_config=_zero(2)).deepspeed_config["gradient_accumulation_steps"] == 1
    assert "ZeRO optimization config" in _err(lambda: DeepSpeedPlugin(hf_ds_config={"train_batch_size": 8}))
    # zero3_init_flag defaults to the file's stage
    assert DeepSpeedPlugin(hf_ds_config=_zero(3)).zero3_init_flag is True
    # the conflict check reads the launcher's list of config-file fields
    os.environ["ACCELERATE_CONFIG_DS_FIELDS"] = "zero3_init_flag,deepspeed_config_file"
    assert _err(lambda: DeepSpeedPlugin(hf_ds_config=_zero(2))) == "accepted"
    os.environ["ACCELERATE_CONFIG_DS_FIELDS"] = "gradient_clipping,deepspeed_config_file"
    assert "will be ignored" in _err(lambda: DeepSpeedPlugin(hf_ds_config=_zero(2)))


def test_deepspeed_plugin_mixed_precision_fill():
    p = DeepSpeedPlugin(hf_ds_config=_zero(2))
    p.set_mixed_precision("bf16")
    assert p.deepspeed_config["bf16"] == {"enabled": True} and p.deepspeed_config["fp16"] == {"enabled": False}
    p = DeepSpeedPlugin(hf_ds_config=_zero(2))
    p.set_mixed_precision("fp8")  # fp8 runs on bf16 autocast under DeepSpeed
    assert p.deepspeed_config["bf16"]["enabled"] is True
    p = DeepSpeedPlugin(hf_ds_config=_zero(2))
    p.set_mixed_precision("fp16")
    assert p.deepspeed_config["fp16"] == {"enabled": True, "auto_cast": True}
    # a concrete value in the file wins over the run precision unless it is the other 16-bit type
    p = DeepSpeedPlugin(hf_ds_config={**_zero(2), "bf16": {"enabled": False}})
    p.set_mixed_precision("bf16")
    assert p.deepspeed_config["bf16"]["enabled"] is False
    p = DeepSpeedPlugin(hf_ds_config={**_zero(2), "bf16": {"enabled": True}})
    assert "cannot be set to `fp16`" in _err(lambda: p.set_mixed_precision("fp16"))
    p = DeepSpeedPlugin(hf_ds_config={**_zero(2), "bf16": {"enabled": True}})
    p.set_mixed_precision("no")  # 'no' never raises and leaves a concrete true alone
    assert p.deepspeed_config["bf16"]["enabled"] is True
    p = DeepSpeedPlugin(hf_ds_config=_zero(2))
    p.set_mixed_precision("no")
    assert p.deepspeed_config["bf16"] == {"enabled": False} and p.deepspeed_config["fp16"] == {"enabled": False}


def test_deepspeed_prepare_fill_raises_on_unknown_auto_and_never_on_mismatch():
    # the same call `_prepare_deepspeed` makes: deepspeed_config_process(must_match=False, **config_kwargs)
    kw = {"gradient_clipping": 1.0, "train_micro_batch_size_per_gpu": 4, "train_batch_size": 32}
    p = DeepSpeedPlugin(hf_ds_config={**_zero(2), "optimizer": {"type": "AdamW", "params": {"betas": "auto"}}})
    assert "`optimizer.params.betas` not found in kwargs" in _err(lambda: p.deepspeed_config_process(
        must_match=False, **kw))
    p = DeepSpeedPlugin(hf_ds_config={**_zero(2), "train_batch_size": 64, "gradient_clipping": "auto"})
    assert _err(lambda: p.deepspeed_config_process(must_match=False, **kw)) == "accepted"
    assert p.deepspeed_config["train_batch_size"] == 64 and p.deepspeed_config["gradient_clipping"] == 1.0


def test_deepspeed_plugin_msamp_rules():
    os.environ["ACCELERATE_FP8_BACKEND"] = "MSAMP"
    p = DeepSpeedPlugin(zero_stage=2)
    assert p.enable_msamp is True and p.deepspeed_config["msamp"] == {"enabled": True, "opt_level": "O1"}
    assert _err(lambda: DeepSpeedPlugin(zero_stage=3)).startswith("NotImplementedError")
    assert "Invalid optimization level" in _err(lambda: DeepSpeedPlugin(zero_stage=2, msamp_opt_level="O3"))
    os.environ["ACCELERATE_FP8_BACKEND"] = "msamp"  # lower case: not recognised, MS-AMP stays off
    assert DeepSpeedPlugin(zero_stage=2).enable_msamp is False
    # outside DeepSpeed the recipe's default level differs
    assert MSAMPRecipeKwargs().opt_level == "O2"
    assert "must be one of" in _err(lambda: MSAMPRecipeKwargs(opt_level="O3"))


def test_fp8_recipes_need_their_package_at_construction():
    from accelerate.utils import AORecipeKwargs, TERecipeKwargs, is_torchao_available, is_transformer_engine_available

    ao, te = _err(AORecipeKwargs), _err(TERecipeKwargs)
    # the pinned .venv has neither package; where one is installed its recipe builds
    assert ao == "accepted" if is_torchao_available() else ao.startswith("ImportError: TorchAO is not available")
    assert te == "accepted" if is_transformer_engine_available() else te.startswith(
        "ImportError: TransformerEngine is not available")


# ======================================================================== FSDP plugin per version
def test_fsdp_plugin_version_differences():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p = FullyShardedDataParallelPlugin(fsdp_version=2, reshard_after_forward=True, use_orig_params=False,
                                           sync_module_states=False, backward_prefetch="BACKWARD_PRE")
    assert (p.use_orig_params, p.sync_module_states, p.backward_prefetch) == (None, None, None)
    assert "not supported with FSDP1" in _err(lambda: FullyShardedDataParallelPlugin(
        fsdp_version=1, reshard_after_forward=True))
    # FSDP1 accepts the strategy as name or number; the env var is read only at version 1
    os.environ["FSDP_SHARDING_STRATEGY"] = "2"
    assert FullyShardedDataParallelPlugin().sharding_strategy.name == "SHARD_GRAD_OP"
    p = FullyShardedDataParallelPlugin(fsdp_version=2)
    assert p.sharding_strategy is None and p.reshard_after_forward is True
    # plugin defaults without the launcher
    p = FullyShardedDataParallelPlugin()
    assert (p.fsdp_version, p.use_orig_params, p.sync_module_states, p.cpu_ram_efficient_loading,
            p.auto_wrap_policy, p.activation_checkpointing) == (1, False, False, False, None, False)
    # FSDP1: a strategy name in reshard_after_forward is accepted but sharding_strategy (default FULL_SHARD) is set too
    del os.environ["FSDP_SHARDING_STRATEGY"]
    p = FullyShardedDataParallelPlugin(fsdp_version=1, reshard_after_forward="SHARD_GRAD_OP")
    assert (p.sharding_strategy.name, p.reshard_after_forward.name) == ("FULL_SHARD", "SHARD_GRAD_OP")
    from torch.distributed.fsdp import CPUOffloadPolicy
    assert "instance of `torch.distributed.fsdp.CPUOffload` in FSDP1" in _err(
        lambda: FullyShardedDataParallelPlugin(fsdp_version=1, cpu_offload=CPUOffloadPolicy()))
    # SIZE_BASED_WRAP with min_num_params 0 (the plugin default) wraps nothing
    p = FullyShardedDataParallelPlugin(fsdp_version=2, auto_wrap_policy="SIZE_BASED_WRAP")
    p.set_auto_wrap_policy(torch.nn.Linear(2, 2))
    assert p.min_num_params == 0 and p.auto_wrap_policy is None
    # a value given in code is written back to the environment (read later by transformers' loading)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        FullyShardedDataParallelPlugin(fsdp_version=2, cpu_ram_efficient_loading=True)
    assert os.environ["FSDP_CPU_RAM_EFFICIENT_LOADING"] == "True"


# ======================================================================== Megatron-LM
class _Cfg(SimpleNamespace):
    return_dict = True


def _model(model_type, **cfg):
    base = dict(num_hidden_layers=2, hidden_size=8, num_attention_heads=2, max_position_embeddings=64, vocab_size=10,
                num_labels=2, n_layer=2, n_embd=8, n_head=2, n_positions=64, num_layers=2, d_model=8, num_heads=2)
    base.update(cfg)
    return SimpleNamespace(config=_Cfg(model_type=model_type, **base))


def test_megatron_plugin_defaults():
    p = MegatronLMPlugin()
    assert (p.tp_degree, p.pp_degree, p.num_micro_batches, p.gradient_clipping) == (1, 1, 1, 1.0)
    assert p.context_parallel_size == 2 and p.megatron_lm_default_args["context_parallel_size"] == 2
    assert p.DDP_impl == "torch" and MegatronLMPlugin(pp_degree=2).DDP_impl == "local"
    assert MegatronLMPlugin(use_distributed_optimizer=True).DDP_impl == "local"
    # other_megatron_args go in last and override the mapped ones
    assert MegatronLMPlugin(other_megatron_args={"clip_grad": 0.3}).megatron_lm_default_args["clip_grad"] == 0.3
    p = MegatronLMPlugin()
    p.set_mixed_precision("bf16")
    assert p.megatron_lm_default_args["bf16"] is True and p.DDP_impl == "local"
    p = MegatronLMPlugin()
    p.set_mixed_precision("fp8")  # nothing is set for fp8
    assert not {"fp8", "bf16", "fp16"} & set(p.megatron_lm_default_args)
    os.environ["MEGATRON_LM_CONTEXT_PARALLEL_SIZE"] = "1"
    assert MegatronLMPlugin().context_parallel_size == 1


def test_megatron_model_parsers():
    def parsed(model_type, **kw):
        p = MegatronLMPlugin(**kw)
        try:
            p.set_network_size_args(_model(model_type))
        except ValueError as e:
            return f"ValueError: {e}"
        return p.megatron_lm_default_args["model_type_name"], p.megatron_lm_default_args.get("seq_length")

    # substring match on model_type: plain "bert" is not "megatron-bert"
    assert parsed("bert").startswith("ValueError: Accelerate Megatron-LM integration not supports bert model")
    assert parsed("megatron-bert") == ("bert", 64)
    assert parsed("mixtral").startswith("ValueError") and parsed("qwen2").startswith("ValueError")
    assert parsed("mt5") == ("t5", None) and parsed("llama4_text") == ("gpt", 64)
    assert parsed("gpt_neox").startswith("ValueError")
    # gpt2: a seq_length set without decoder_seq_length is replaced by decoder_seq_length (None)
    assert parsed("gpt2", seq_length=128) == ("gpt", None)
    assert parsed("gpt2", decoder_seq_length=128) == ("gpt", 128)
    assert parsed("llama", seq_length=128) == ("gpt", 128)


def test_megatron_optimizer_and_scheduler_handoff():
    from accelerate.utils import MegatronLMDummyScheduler

    w = [torch.nn.Parameter(torch.zeros(2))]
    p = MegatronLMPlugin()
    p.set_optimizer_type(torch.optim.AdamW(w, lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1))
    a = p.megatron_lm_default_args
    assert (a["optimizer"], a["adam_beta2"], a["lr"], a["weight_decay"]) == ("adam", 0.95, 1e-3, 0.1)
    assert "not supported by Megatron-LM" in _err(lambda: p.set_optimizer_type(torch.optim.Adagrad(w)))
    p.set_training_args(micro_batch_size=4, dp_degree=2)
    assert p.megatron_lm_default_args["global_batch_size"] == 8  # dp x micro x num_micro_batches (1)
    s = MegatronLMDummyScheduler(torch.optim.SGD(w, lr=0.1), total_num_steps=1000, warmup_num_steps=100)
    p.set_scheduler_args(s)
    assert (p.megatron_lm_default_args["train_iters"], p.megatron_lm_default_args["lr_warmup_iters"]) == (500, 50)


def test_deepspeed_launch_flags_next_to_a_json_file(tmp_path):
    """Flags typed on `accelerate launch` are exported but not listed as config-file fields: no error, and the
    JSON's concrete values still win inside the plugin; the same keys in the YAML raise."""
    import json

    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils import launch as L

    ds = tmp_path / "ds.json"
    ds.write_text(json.dumps({**_zero(2), "gradient_clipping": 1.0, "train_micro_batch_size_per_gpu": "auto"}))

    def plugin_under(yaml_ds_keys, flags):
        cfg = tmp_path / "acc.yaml"
        lines = ["compute_environment: LOCAL_MACHINE", "distributed_type: DEEPSPEED", "num_machines: 1",
                 "num_processes: 2", "deepspeed_config:", f"  deepspeed_config_file: {ds}"]
        lines += [f"  {k}: {v}" for k, v in yaml_ds_keys.items()]
        cfg.write_text("\n".join(lines) + "\n")
        args = launch_command_parser().parse_args(
            ["--config_file", str(cfg), "--mixed_precision", "no", "--dynamo_backend", "no", *flags, "train.py"])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            args, defaults, mp_from_config = _validate_launch_command(args)
        fields = list(defaults.deepspeed_config.keys()) + (["mixed_precision"] if mp_from_config else [])
        args.deepspeed_fields_from_accelerate_config = ",".join(fields)
        saved = dict(os.environ)
        try:
            _, env = L.prepare_deepspeed_cmd_env(args)
        finally:
            os.environ.clear()
            os.environ.update(saved)
        os.environ.update({k: v for k, v in env.items() if k.startswith("ACCELERATE_")})
        try:
            return DeepSpeedPlugin(), env
        except ValueError as e:
            return f"ValueError: {e}", env

    p, env = plugin_under({}, ["--zero_stage", "3", "--gradient_clipping", "0.5"])
    assert env["ACCELERATE_DEEPSPEED_ZERO_STAGE"] == "3" and env["ACCELERATE_GRADIENT_CLIPPING"] == "0.5"
    assert not isinstance(p, str), p
    assert p.deepspeed_config["zero_optimization"]["stage"] == 2 and p.zero_stage == 2
    assert p.deepspeed_config["gradient_clipping"] == 1.0
    for k in [k for k in os.environ if k.startswith("ACCELERATE_")]:
        del os.environ[k]
    p, _ = plugin_under({"zero_stage": 3}, [])
    assert isinstance(p, str) and "will be ignored" in p


def test_dataloader_split_follows_the_data_parallel_dimensions_only():
    """prepare_data_loader with a device mesh: TP and CP ranks get the same batches, the data is split
    dp_replicate x dp_shard ways (the stand-in mesh offers only what the function reads: names and sizes)."""
    from accelerate.data_loader import prepare_data_loader
    from accelerate.state import PartialState

    class Mesh:
        def __init__(self, dims):
            self.dims, self.mesh_dim_names = dims, tuple(dims)

        def __getitem__(self, key):
            return SimpleNamespace(size=lambda: self.dims[key])

    def first_batches(rank, dims):
        dl = torch.utils.data.DataLoader(list(range(32)), batch_size=2)
        p = prepare_data_loader(dl, torch.device("cpu"), num_processes=4, process_index=rank, put_on_device=False,
                                torch_device_mesh=Mesh(dims))
        return [b.tolist() for b in p][:2]

    try:
        for dims in ({"dp_shard": 2, "tp": 2}, {"dp_shard": 2, "cp": 2}):
            got = [first_batches(r, dims) for r in range(4)]
            assert got[0] == got[1] == [[0, 1], [4, 5]] and got[2] == got[3] == [[2, 3], [6, 7]], (dims, got)
        got = [first_batches(r, {"dp_shard": 4}) for r in range(4)]
        assert [g[0] for g in got] == [[0, 1], [2, 3], [4, 5], [6, 7]]
        # the DeepSpeed branch (state forced to DEEPSPEED): only a tp dimension is divided out
        PartialState()
        PartialState._shared_state["distributed_type"] = DistributedType.DEEPSPEED
        got = [first_batches(r, {"dp_replicate": 2, "tp": 2}) for r in range(4)]
        assert got[0] == got[1] and got[2] == got[3] and got[0] != got[2]
        got = [first_batches(r, {"dp_replicate": 4}) for r in range(4)]
        assert len({str(g) for g in got}) == 4
    finally:
        PartialState._reset_state()


def test_fp8_refusals_in_accelerator():
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState
    from accelerate.utils import is_fp8_available

    try:
        r = _err(lambda: Accelerator(mixed_precision="fp8", cpu=True))
        AcceleratorState._reset_state(True)
        # no FP8 package (the pinned .venv): AcceleratorState refuses before any backend is picked
        assert (r == "accepted") if is_fp8_available() else r.startswith(
            "ValueError: Using `fp8` precision requires `transformer_engine` or `MS-AMP` to be installed")
        # a recipe handler without fp8 precision, on a plain (non FSDP/DeepSpeed) run
        r = _err(lambda: Accelerator(kwargs_handlers=[MSAMPRecipeKwargs()], cpu=True))
        assert "requires setting `mixed_precision='fp8'`" in r
    finally:
        AcceleratorState._reset_state(True)


def test_rank_helpers():
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState

    try:
        acc = Accelerator(cpu=True)
        assert _err(lambda: acc.tensor_parallel_rank).startswith("RuntimeError: Tensor parallelism is not configured")
        assert _err(lambda: acc.data_parallel_rank).startswith("RuntimeError")
        # no helper for these two, even though context parallelism itself is supported
        assert _err(lambda: acc.context_parallel_rank) == (
            "NotImplementedError: Context parallelism is currently not supported in Accelerate.")
        assert _err(lambda: acc.pipeline_parallel_rank).startswith("NotImplementedError")
        AcceleratorState._reset_state(True)
        acc = Accelerator(cpu=True, parallelism_config=ParallelismConfig())
        # a disabled dimension reads 0; a single process builds no mesh at all
        assert (acc.tensor_parallel_rank, acc.data_parallel_rank, acc.data_parallel_shard_rank) == (0, 0, 0)
        assert acc.torch_device_mesh is None
    finally:
        AcceleratorState._reset_state(True)


def test_init_process_group_kwargs_drop_values_equal_to_the_class_default():
    """s5-fd-01: to_kwargs() keeps only fields that differ from InitProcessGroupKwargs(), whose
    backend is "nccl" and whose timeout is 600 s for nccl and 1800 s otherwise; what it returns is
    what PartialState passes to init_process_group. torch's gloo default is 30 min."""
    from datetime import timedelta
    from accelerate.utils import InitProcessGroupKwargs as K
    from torch.distributed.constants import default_pg_timeout
    s = timedelta(seconds=1)
    assert (K().backend, K().timeout, K(backend="gloo").timeout) == ("nccl", 600 * s, 1800 * s)
    assert K(timeout=1800 * s).to_kwargs() == {"timeout": 1800 * s}
    assert K(timeout=600 * s).to_kwargs() == {}
    assert K(backend="gloo", timeout=600 * s).to_kwargs() == {"backend": "gloo"}
    assert K(backend="gloo").to_kwargs() == {"backend": "gloo", "timeout": 1800 * s}
    assert default_pg_timeout == 1800 * s

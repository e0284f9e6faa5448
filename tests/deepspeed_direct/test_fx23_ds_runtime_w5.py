"""deepspeed 0.19.8 / transformers 5.25.0 runtime behaviour behind set-23 misses s23-K4-04, K4-06, K5-02, K5-04,
K5-05, K8-01, K8-03 (probe _fx23_w5_probe.py on DeepSpeed's CPU accelerator, gloo; the five runs start in
parallel, ~20 s). Backs deepspeed-grad-accum-dtype.md ("Which dtype gradients are reduced in"),
memory-planning.md ("ZeRO-1/2 init: the flat 16-bit buffer"), zero3-parameters.md (quantized loads, nested
zero.Init, hooks on wrapper modules) and deepspeed-checkpoint-loading.md (bf16 at stage 0).
"""
from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

import pytest
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import _ds_matrix as m  # noqa: E402

PROBE = HERE / "_fx23_w5_probe.py"


def _start(work, mode, ranks):
    work.mkdir()
    port = m._port()
    return [subprocess.Popen([sys.executable, str(PROBE), mode, str(work / "ckpt")], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=m._env(m.EXT, rk, ranks, port), cwd=work)
            for rk in range(ranks)]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fx23w5")
    procs = {"comm": _start(tmp / "comm", "comm", 2),
             **{k: _start(tmp / k, k, 1) for k in ("flatten", "nested", "stage0", "wrapper")}}
    return {k: [m._result(o, e) for o, e, _ in m.communicate_all(ps)] for k, ps in procs.items()}


# ---------------------------------------------------------------- s23-K4-04 communication_data_type

def test_gradients_reduce_in_bf16_by_default_when_bf16_is_enabled(runs):
    for r in runs["comm"]:
        assert r["bf16"] == {"engine": "torch.bfloat16", "optimizer": "torch.bfloat16",
                             "param": "torch.bfloat16", "reduced": ["all_reduce:torch.bfloat16"]}
        assert r["none"]["engine"] == r["none"]["optimizer"] == "torch.float32"


def test_top_level_fp32_casts_bf16_gradients_for_the_collective(runs):
    for r in runs["comm"]:
        assert r["bf16_fp32"] == {"engine": "torch.float32", "optimizer": "torch.float32",
                                  "param": "torch.bfloat16", "reduced": ["all_reduce:torch.float32"]}
        assert r["bad_value"].startswith("ValueError: Invalid communication_data_type. Supported data types: "
                                         "['fp16', 'bf16', 'fp32']. Got: float32")


def test_engine_default_follows_the_enabled_precision():
    from deepspeed.runtime.engine import DeepSpeedEngine
    from deepspeed.runtime.zero.stage_1_and_2 import DeepSpeedZeroOptimizer
    src = inspect.getsource(DeepSpeedEngine.communication_data_type.fget)
    assert src.index("self.fp16_enabled()") < src.index("self.bfloat16_enabled()") < src.index("torch.float32")
    red = inspect.getsource(DeepSpeedZeroOptimizer.gradient_reduction_w_predivide)
    assert "tensor_to_allreduce = tensor.to(communication_data_type)" in red
    assert "tensor.copy_(tensor_to_allreduce)" in red


def test_communication_data_type_is_read_only_at_top_level():
    import pydantic
    from deepspeed.runtime.config import get_communication_data_type
    from deepspeed.runtime.zero.config import DeepSpeedZeroConfig
    assert get_communication_data_type({"bf16": {"enabled": True, "communication_data_type": "fp32"}}) is None
    assert get_communication_data_type({"communication_data_type": "fp32"}) == torch.float32
    with pytest.raises(pydantic.ValidationError, match="Extra inputs are not permitted"):
        DeepSpeedZeroConfig(stage=2, communication_data_type="fp32")


# ---------------------------------------------------------------- s23-K4-06 stream ordering

def test_average_tensor_orders_streams_without_device_synchronize():
    from deepspeed.runtime.zero.stage_1_and_2 import DeepSpeedZeroOptimizer as Z
    avg = inspect.getsource(Z.average_tensor)
    assert "stream.wait_stream(producer_stream)" in avg
    assert "get_accelerator().current_stream().wait_stream(stream)" in avg
    assert "synchronize()" not in avg
    assert "get_accelerator().synchronize()" in inspect.getsource(Z.independent_gradient_partition_epilogue)
    assert "get_accelerator().synchronize()" in inspect.getsource(Z.allreduce_and_copy)
    from deepspeed.runtime.zero.config import DeepSpeedZeroConfig
    assert DeepSpeedZeroConfig(stage=2).overlap_comm is False
    assert DeepSpeedZeroConfig(stage=3).overlap_comm is True


# ---------------------------------------------------------------- s23-K8-03 flat buffer at init

def test_zero2_init_frees_cache_then_flattens_on_device_or_via_cpu(runs):
    (r,) = runs["flatten"]
    assert r["room"]["calls"] == ["empty_cache", "available_memory"]
    assert r["no_room"]["calls"] == ["empty_cache", "available_memory", "empty_cache"]
    for case in r.values():
        assert case["flat_numel"] == 4160 and case["flat_dtype"] == "torch.bfloat16"
        assert case["views_of_flat"] and case["values_kept"] and not case["cpu_data_left"]


# ---------------------------------------------------------------- s23-K5-02 nested zero.Init

def test_nested_zero_init_counts_depth_and_unpatches_once(runs):
    (r,) = runs["nested"]
    assert (r["depth_outer"], r["depth_inner"], r["depth_after_inner"], r["depth_after_outer"]) == (1, 2, 1, 0)
    assert r["patched_after_inner"] and r["restored_after_outer"]
    assert r["m1_local_numel"] == 0 and r["m1_ds_shape"] == [64, 64]
    assert r["engine"] == "DeepSpeedEngine" and r["loss"] > 0


# ---------------------------------------------------------------- s23-K5-04 bf16 at stage 0

def test_bf16_stage0_checkpoint_round_trip(runs):
    (r,) = runs["stage0"]
    assert r["wrapper"] == "FP16_UnfusedOptimizer" and r["has_restore_from_bit16"] is False
    assert r["files"] == ["mp_rank_00_model_states.pt"]
    assert r["load_path_returned"] and r["weights_equal"]
    assert r["optimizer_state_steps"] == r["saved_steps"] and r["saved_steps"][0] > 0
    from deepspeed.runtime.engine import DeepSpeedEngine
    src = inspect.getsource(DeepSpeedEngine.load_checkpoint)
    assert "load_zero_checkpoint = load_path is not None and self.zero_optimization()\n" in src


# ---------------------------------------------------------------- s23-K5-05 hooks on delegating wrappers

def test_delegating_wrapper_gets_its_own_backward_hook_state(runs):
    (r,) = runs["wrapper"]
    assert r["own"]["pre_bwd_fn"] and r["own"]["post_bwd_fn"] and r["distinct_classes"]
    assert r["child_own"]["pre_bwd_fn"] and r["child_own"]["post_bwd_fn"]
    assert r["own_counter_after_steps"] and r["loss"] > 0
    from deepspeed.runtime.zero.parameter_offload import DeepSpeedZeRoOffload
    src = inspect.getsource(DeepSpeedZeRoOffload._register_deepspeed_module)
    assert 'if "pre_bwd_fn" not in module.__dict__:' in src
    assert 'if "post_bwd_fn" not in module.__dict__:' in src


# ---------------------------------------------------------------- s23-K8-01 quantized loads skip zero.Init

def test_dequantize_true_still_attaches_a_quantizer():
    from transformers import LlamaConfig, Mxfp4Config
    from transformers.quantizers.auto import get_hf_quantizer
    kw = dict(num_hidden_layers=1, hidden_size=16, intermediate_size=32, num_attention_heads=2, vocab_size=64)
    pre = LlamaConfig(**kw)
    pre.quantization_config = {"quant_method": "mxfp4"}  # what a pre-quantized checkpoint's config.json carries
    q = get_hf_quantizer(pre, Mxfp4Config(dequantize=True), None, True, {})[0]
    assert type(q).__name__ == "Mxfp4HfQuantizer" and q.pre_quantized and q.quantization_config.dequantize
    assert get_hf_quantizer(LlamaConfig(**kw), None, None, True, {})[0] is None


def test_quantized_load_is_not_built_under_zero_init(monkeypatch):
    import types
    from transformers import LlamaForCausalLM
    from transformers.integrations import deepspeed as hf_ds
    keep = hf_ds.HfDeepSpeedConfig({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3}})
    inits = []
    fake = types.ModuleType("deepspeed")
    fake.zero = types.SimpleNamespace(Init=lambda **kw: inits.append(kw))
    monkeypatch.setitem(sys.modules, "deepspeed", fake)
    try:
        assert hf_ds.is_deepspeed_zero3_enabled() and keep is not None
        LlamaForCausalLM.get_init_context(torch.float32, True, False, None)   # is_quantized=True
        assert inits == []
        LlamaForCausalLM.get_init_context(torch.float32, False, False, None)
        assert len(inits) == 1
    finally:
        hf_ds.unset_hf_deepspeed_config()

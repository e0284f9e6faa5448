"""The validator's copy of accelerate facts (rules/accelerate_schema.py) equals what the installed
accelerate 1.15.0 / torch / deepspeed define (read by the oracle subprocess)."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def S(bv):
    from backend_validator.rules import accelerate_schema
    return accelerate_schema


@pytest.fixture(scope="module")
def F(oracle):
    return oracle["__facts__"]


def test_config_dataclass_fields(S, F):
    assert list(S.CLUSTER_FIELDS) == F["cluster_fields"]
    assert list(S.SAGEMAKER_FIELDS) == F["sagemaker_fields"]
    assert list(S.SAGEMAKER_REQUIRED) == F["sagemaker_required"]


@pytest.mark.parametrize("name,key", [
    ("DISTRIBUTED_TYPES", "distributed_types"), ("SAGEMAKER_DISTRIBUTED_TYPES", "sagemaker_distributed_types"),
    ("COMPUTE_ENVIRONMENTS", "compute_environments"), ("DYNAMO_BACKENDS", "dynamo_backends"),
    ("FP8_FORMATS", "fp8_formats"), ("FP8_AMAX_ALGOS", "fp8_amax_algos"), ("FP8_OPT_LEVELS", "fp8_opt_levels"),
    ("FSDP_SHARDING_STRATEGY", "fsdp_sharding_strategy"), ("FSDP_AUTO_WRAP_POLICY", "fsdp_auto_wrap_policy"),
    ("FSDP_BACKWARD_PREFETCH", "fsdp_backward_prefetch"), ("FSDP_STATE_DICT_TYPE", "fsdp_state_dict_type"),
    ("DS_MULTINODE_LAUNCHERS", "ds_multinode_launchers"), ("DS_FILE_EXCLUSIVE", "ds_file_exclusive"),
])
def test_enumerations(S, F, name, key):
    assert list(getattr(S, name)) == F[key]


def test_sets_compared_unordered(S, F):
    assert set(S.PRECISIONS) == set(F["precisions"])
    assert set(S.FP8_BACKENDS) == set(F["fp8_backends"])
    assert set(S.DS_OFFLOAD_DEVICES) == set(F["ds_offload_devices"])
    assert set(S.DYNAMO_MODES) == set(F["inductor_modes"])
    words = F["truth_words"]
    assert {w for w, v in words.items() if v == 1} == set(S.TRUE_WORDS)
    assert {w for w, v in words.items() if v == 0} == set(S.FALSE_WORDS)


def test_launch_parser_knows_every_nested_key(S, F):
    dests = set(F["parser_defaults"])
    for group in (S.FSDP_KEYS, S.DEEPSPEED_KEYS, S.PARALLELISM_KEYS, S.FP8_KEYS, S.DYNAMO_KEYS, S.MEGATRON_KEYS,
                  S.MPIRUN_KEYS):
        missing = [k for k in group if k not in dests and k not in F["multi_gpu_env_getattr"]
                   and k not in F["fp8_env_read"]]
        assert not missing, missing
    assert "fsdp_ignored_modules" in F["multi_gpu_env_getattr"]
    assert "fp8_use_mxfp8_block_scaling" in F["fp8_env_read"]
    # and the parser has no FSDP/parallelism/megatron/fp8 key the schema lacks
    for prefix, group in (("fsdp_", S.FSDP_KEYS), ("parallelism_config_", S.PARALLELISM_KEYS),
                          ("megatron_lm_", S.MEGATRON_KEYS), ("fp8_", S.FP8_KEYS)):
        extra = sorted(d for d in dests if d.startswith(prefix) and d not in group)
        assert not extra, extra


def test_launch_defaults(S, F):
    d = F["parser_defaults"]
    for k, v in S.FSDP_LAUNCH_DEFAULTS.items():
        assert d[k] == v, k
    for k, v in S.LAUNCH_IGNORED_TOP_LEVEL.items():
        assert d[k] == v and d[k] is not None, k  # non-None default => the file's value is never copied


def test_fp8_questionnaire_names_are_not_read(S, F):
    dests = set(F["parser_defaults"])
    for bad, good in S.FP8_QUESTIONNAIRE_NAMES.items():
        assert bad not in dests and good in dests

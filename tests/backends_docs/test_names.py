"""Every name the backend documents state (inline code spans) resolves against the installed
accelerate / deepspeed / torch, and the resolver really catches misspellings."""
from __future__ import annotations

import pytest


def test_every_code_span_resolves(docs, resolver, docs_mod):
    bad = []
    total = 0
    for path, text in docs.items():
        for line, span in docs_mod.code_spans(text):
            total += 1
            if not resolver.resolve(span, path):
                bad.append(f"{path.relative_to(docs_mod.REPO)}:{line}: `{span}`")
    assert total > 500, f"only {total} code spans found: extraction broken?"
    assert not bad, "names not found in the installed packages:\n" + "\n".join(bad)


MISSPELLINGS = [
    "fsdp_reshard_after_foward", "fsdp_cpu_ram_eficient_loading", "parallelism_config_dp_shard",
    "ACCELERATE_DEEPSPEED_ZERO_STAGES", "FSDP_STATE_DICT_TYP", "--fsdp_versions", "--mixed-precison",
    "accelerate.utils.DeepSpeedPlugins", "FullyShardedDataParallelPlugin.reshard_after_foward",
    "DeepSpeedPlugin.zero3_init", "deepspeed_config_files", "zero3_save_16bit_models",
    "accelerate/utils/launch.py::prepare_multi_gpu_envs", "accelerate/utils/lunch.py::prepare_multi_gpu_env",
    "FP8BackendTyp", "offload_optimizer_devices", "TERecipeKwarg", "megatron_lm_tp_degrees",
    "zero_optimization.offload_optimizr.device", "PARALLELISM_CONFIG_CP_SIZ", "`fsdp_version: 2`x",
    "accelerate to-fsdp3 --config_file a.yaml", "Ampere_only_flag",
]


@pytest.mark.parametrize("bad", MISSPELLINGS)
def test_resolver_rejects_misspellings(bad, resolver, docs_mod):
    assert not resolver.resolve(bad, docs_mod.SUB / "SKILL.md")


def test_resolver_accepts_known_names(resolver, docs_mod):
    # the positive twins of some misspellings above, so that the rejection is not vacuous
    good = ["fsdp_reshard_after_forward", "ACCELERATE_DEEPSPEED_ZERO_STAGE", "--fsdp_version",
            "accelerate.utils.DeepSpeedPlugin", "FullyShardedDataParallelPlugin.reshard_after_forward",
            "accelerate/utils/launch.py::prepare_multi_gpu_env", "zero_optimization.offload_optimizer.device",
            "accelerate to-fsdp2 --config_file a.yaml"]
    missing = [g for g in good if not resolver.resolve(g, docs_mod.SUB / "SKILL.md")]
    # names never asked of the oracle (imports/fields) resolve only if the docs use them
    assert not missing, missing

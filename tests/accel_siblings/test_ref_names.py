"""Bare names in the Accelerate sub-skills' pages (configuration-and-cli, training-loop-integration,
checkpointing-and-tracking): every flag, env var and snake_case name in an inline code span occurs in
the installed accelerate 1.15.0 / deepspeed 0.19.8 / transformers 5.25.0 / torch 2.13.0 sources, is
an env variable accelerate builds from a prefix and a field name, or is listed below with where it
comes from. The backends and torch-distributed pages have their own checks
(tests/backends_docs/test_deepspeed_ref_names.py, tests/torch_distributed/test_names.py).

It found `save_pretrained(..., save_function=...)`, a transformers 4.x argument that 5.25.0 drops
silently (tests/audit/test_save_pretrained_kwargs.py)."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _code_spans import source_words, span_names  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
SKILLS = ("configuration-and-cli", "training-loop-integration", "checkpointing-and-tracking")
PAGES = [p for s in SKILLS for p in [REPO / "sub-skills" / s / "SKILL.md",
                                     *sorted((REPO / "sub-skills" / s / "references").glob("*.md"))]]
# prefixes accelerate joins to a dataclass field name (utils/launch.py, utils/dataclasses.py env_prefix)
BUILT_PREFIXES = ("ACCELERATE_FP8_", "MEGATRON_LM_", "ACCELERATE_")
NOT_PACKAGE_NAMES = {
    # this bundle's own tools (checked against their --help by tests/bundle and tests/validator_cli)
    "--cwd": "validator flag", "--explain": "validator flag", "--job-spec": "validator flag",
    "--launch-command": "validator flag", "--changes": "lookup.py flag", "--lib": "lookup.py flag",
    "--since": "lookup.py flag", "WORDS": "placeholder of lookup.py --changes", "--node-set": "validator flag", "validate_backend_config": "the validator",
    "--phase": "examples/resume_checks.py flag", "--out": "examples/resume_checks.py / loop_checks flag",
    "loop_checks": "this bundle's example script", "accel_siblings": "this bundle's test folder",
    "acc_methods_capture": "this bundle's committed capture",
    # the user's own script and its flags, in the examples of a wrong launch line
    "--config-path": "the user's train.py flag in the example", "--main-process-port": "hyphen form accelerate's parser maps to --main_process_port (commands.md)",
    # other tools' variables
    "SLURM_NODEID": "SLURM", "NCCL_MULTI_RANK_GPU_ENABLE": "NCCL >= 2.30 (src/init.cc; ledger cc-lc-nccl-multi-rank-wording-new)",
    "CCL_WORKER_COUNT": "oneCCL", "CCL_": "oneCCL prefix", "I_MPI_": "Intel MPI prefix",
    "KMP_": "Intel OpenMP prefix", "TORCHELASTIC_": "prefix of torchrun's worker variables", "ROLE_": "prefix of ROLE_RANK/ROLE_NAME",
    "HF_HUB_OFFLINE": "huggingface_hub (not pinned)", "split_dataset_by_node": "datasets (not pinned)",
    # datasets internals named in iterable-datasets.md, read from fetched huggingface/datasets tags (ledger tli-split-by-node-*)
    "_iter_pytorch": "datasets (not pinned)", "_prepare_ex_iterable_for_iteration": "datasets (not pinned)",
    "_split_by_node_iterable_dataset": "datasets (not pinned)", "shard_data_sources": "datasets (not pinned)",
    "to_iterable_dataset": "datasets (not pinned)",
    "save_model_hook": "diffusers' hook name, as the user wrote it", "load_model_hook": "diffusers' hook name",
    "ACCELERATE_DEEPSPEED_": "prefix of the ACCELERATE_DEEPSPEED_* variables", "ACCELERATE_USE_": "prefix of ACCELERATE_USE_*",
    "clip_grad_": "prefix of clip_grad_norm_ / clip_grad_value_",
    # named as NOT existing in the pinned versions
    "save_function": "not an argument of transformers 5.25.0 save_pretrained (tests/audit/test_save_pretrained_kwargs.py)",
    "mpirun_ccl": "named as not a config key of accelerate 1.15.0 (cpu-multiprocess.md)",
    # placeholders and names of the examples
    "CHECKPOINT_DIRECTORY": "placeholder", "OUTPUT_PATH": "placeholder", "ZONE": "placeholder", "HOST": "placeholder",
    "__0_0": "DCP shard file tail", "__1_0": "DCP shard file tail", "_mp_rank_00_model_states": "ZeRO file name tail",
    "batches_done": "user variable", "grad_accum_steps": "user variable", "log_every": "user variable",
    "eval_dl": "user variable", "unprepared_dataloader": "user variable", "obj_rank": "user variable",
    "obj_rank0": "user variable", "my_dir": "placeholder folder", "random_states_": "prefix of random_states_<rank>.pkl",
    "pytorch_model_fsdp_rank": "prefix of pytorch_model_fsdp_rank<N>.bin",
    **{f"checkpoint_{i}": "automatic checkpoint folder name" for i in range(4)},
    "custom_checkpoint_0": "register_for_checkpointing file name", "optimizer_1": "second optimizer's file name",
    "pytorch_model_1": "second model's file name", "random_states_0": "rank 0's RNG file", "random_states_1": "rank 1's RNG file",
}


def _names(text: str) -> list[str]:
    return span_names(text.split("\n## Provenance", 1)[0])


def _words(root: Path) -> set[str]:
    return source_words(root)


ACCELERATE_WORDS = _words(Path(importlib.util.find_spec("accelerate").origin).parent)


@pytest.fixture(scope="module")
def corpus() -> set[str]:
    roots = [Path(importlib.util.find_spec(t).origin).parent for t in ("accelerate", "deepspeed", "transformers", "torch")]
    return source_words(*roots)


def _known(tok: str, corpus: set[str]) -> bool:
    if tok in corpus or tok in NOT_PACKAGE_NAMES:
        return True
    for p in BUILT_PREFIXES:
        rest = tok[len(p):]
        # the field the variable is built from, in accelerate itself (not any word of torch)
        if tok.startswith(p) and rest and (rest.lower() in ACCELERATE_WORDS or rest in ACCELERATE_WORDS or
                                           f"{p.lower()}{rest.lower()}" in ACCELERATE_WORDS):
            return True
    return False


def test_names_occur_in_the_installed_sources(corpus):
    unknown = sorted({(p.name, t) for p in PAGES for t in _names(p.read_text(encoding="utf-8")) if not _known(t, corpus)})
    assert not unknown, unknown
    assert sum(len(_names(p.read_text(encoding="utf-8"))) for p in PAGES) > 2000


@pytest.mark.parametrize("bad", ["save_functions", "--main_proces_port", "ACCELERATE_MIXED_PRECISON",
                                 "automatic_checkpoint_nameing", "ACCELERATE_FP8_MARGINS"])
def test_a_misspelt_or_dropped_name_is_caught(corpus, bad):
    assert _names(f"`{bad}`") == [bad] and not _known(bad, corpus)

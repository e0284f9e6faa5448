"""Names in the DeepSpeed references that test_names.py does not read (its resolver covers the four
owned references): every flag, env var and snake_case name in their inline code spans occurs in the
installed accelerate 1.15.0 / deepspeed 0.19.8 / torch 2.13.0 / transformers 5.25.0 sources, unless it is a placeholder or a
name of another tool listed below with where it comes from."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import re
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _code_spans import source_words, span_names  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
REFS = REPO / "sub-skills" / "distributed-training-backends" / "references"
CHECKED = ["deepspeed-initialize.md", "deepspeed-launcher-nodes.md", "deepspeed-grad-accum-dtype.md",
           "deepspeed-checkpoint-loading.md", "deepspeed-warmup-lr.md", "deepspeed-multinode-runners.md",
           "deepspeed-initialize-matrix.md", "deepspeed-checkpoint-matrix.md", "deepspeed-engine-methods.md",
           "deepspeed-checkpoint-tools.md", "deepspeed-zero-to-fp32.md", "zero3-leaf-modules.md",
           "zero3-leaf-module-config.md", "deepspeed-defaults-history.md", "accelerate-handoff.md",
           "accelerate-prepare-model.md", "peft-frozen-parameters.md", "transformers-trainer-backends.md",
           "transformers-trainer-checkpoint-files.md", "transformers-trainer-args-checks.md",
           "transformers-trainer-sharded-load.md", "mixed-precision-sources.md", "deepspeed-backward-protocol.md",
           "deepspeed-moe-groups.md", "deepspeed-op-loading.md", "deepspeed-optimizer-classes.md",
           "deepspeed-autotp.md", "memory-planning.md", "transformers-trainer-runtime.md",
           "transformers-trainer-saving-eval.md", "transformers-trainer-handoff.md", "transformers-trainer.md",
           "transformers-trainer-ddp-args.md"]
# placeholders and values of the examples, and names of other tools, with their source
NOT_PACKAGE_NAMES = {
    "env_report": "the module deepspeed/env_report.py, run as python -m deepspeed.env_report (a file name, not a source token)",
    "dpo_config": "a TRL file name, trl/trainer/dpo_config.py (TRL is not installed; cited in the Provenance)",
    "grpo_config": "a TRL file name, trl/trainer/grpo_config.py (TRL is not installed; cited in the Provenance)",
    "sharded_ddp": "removed from TrainingArguments in 4.35, named as gone (tests/backends_docs/test_sharded_ddp_removed.py)",
    "--sharded_ddp": "removed from TrainingArguments in 4.35, named as gone (tests/backends_docs/test_sharded_ddp_removed.py)",
    "_ddp_params_and_buffers_to_ignore": "DDP's ignore-list attribute, torch/nn/parallel/distributed.py (outside this corpus; checked in tests/torch_distributed/test_names.py)",
    "optimize_ddp": "torch._dynamo.config field, torch/_dynamo/config.py (outside this corpus; checked in tests/torch_distributed/test_names.py)",
    "modules_to_save": "a PEFT name (PEFT is not installed; huggingface/peft#899)",
    "original_module": "a PEFT ModulesToSaveWrapper attribute (PEFT is not installed; huggingface/peft#899)",
    "ATEN_CPU_CAPABILITY": "torch's CPU-kernel dispatch variable, read by libtorch (C++), not the Python sources",
    "per_device": "shorthand for per_device_train_batch_size inside a formula cell",
    "run_qa": "a transformers example script, named as the user's script",
    "warmup_ratio": "not an argument of transformers 5.25.0 (args-checks page: its TypeError row)",
    "global_step2": "a tag of the examples", "global_step100": "a tag of the examples",
    "global_step100_universal": "a converted tag of the examples", "global_stepN": "tag placeholder",
    "pytorch_model_1": "a file of the examples", "FIRST_HOST": "placeholder", "HOST": "placeholder",
    "HOST0": "placeholder", "NCCL_": "prefix of the forwarded NCCL variables",
    "--explain-rule": "this bundle's validator flag",
    "pdsh_rank_log": "a case of this bundle's test probe (Provenance)",
    "slurm_rank_log": "a case of this bundle's test probe (Provenance)",
    "test_pdsh_forwards_each_rank_log_but_not_core_binding": "this bundle's test (Provenance)",
    "test_each_rank_log_one_file_per_rank_with_both_streams": "this bundle's test (Provenance)",
    "_ds_launcher_probe": "this bundle's test probe (Provenance)",
    "trainer_backend_capture": "this bundle's test capture (Provenance)", "sharded_at_load": "a key of this bundle's trainer_state_capture (Provenance)", "_zero3_probe": "this bundle's test probe (Provenance)",
    "--markdown": "this bundle's _ds_multinode_probe.py option (Provenance)",
    "--elastic_training": "named as NOT a runner flag (argparse exit 2, test_ds_multinode_runners.py)",
    "CORES0": "the probe's numactl stand-in", "CORES1": "the probe's numactl stand-in",
    "DIR_OR_PATH": "placeholder", "HOSTS": "placeholder", "HOME": "the shell's home variable",
    "LAUNCHER_DIR": "placeholder (the installed deepspeed/launcher folder)", "PORT": "placeholder",
    "LD_LIBRARY_PATH": "named as not exported (the loader's variable)", "OMP_": "prefix, named as not exported",
    "TORCH_": "prefix, named as not exported", "YYYYmmddHHMMSS_rank": "launch.py's log name pattern (strftime)",
    "--check": "this bundle's _ds_matrix.py option (Provenance)", "_ds_matrix": "this bundle's generator (Provenance)",
    "ckpt_case": "this bundle's _ds_probe.py function (Provenance)",
    "_ds_methods": "this bundle's generator (Provenance)", "_ds_methods_probe": "this bundle's test probe (Provenance)",
    "ckpt_cases": "this bundle's _ds_matrix.py function (Provenance)",
    "_ds_tools_matrix": "this bundle's generator (Provenance)", "_ds_tools_probe": "this bundle's test probe (Provenance)",
    "ds_tools_capture": "this bundle's committed capture (Provenance)", "_leaf_matrix": "this bundle's generator (Provenance)",
    "leaf_matrix_capture": "this bundle's committed capture (Provenance)", "test_leaf_matrix": "this bundle's test (Provenance)",
    "global_step2_universal": "a converted tag of the examples", "global_stepN_universal": "tag placeholder",
    "ckpt_universal": "a folder of the examples", "other_dir": "a folder of the examples",
    "random_states_": "prefix of random_states_<rank>.pkl (accelerate's RNG file, with a placeholder)",
    "zero_pp_rank_0_mp_rank_": "prefix of a ZeRO-3 model-states file name (the rest is a wildcard)",
    "_by_suffix": "short for set_z3_leaf_modules_by_suffix, named in full beside it",
    "cls_or_name": "placeholder argument", "KEY_DEFAULT": "placeholder for DeepSpeed's *_DEFAULT constants",
    "render_ckpt": "this bundle's _ds_matrix.py function (Provenance)", "deepspeed_direct": "this bundle's test folder",
    "_mp_rank_00_model_states": "tail of the ZeRO-3 model file name pattern zero_pp_rank_<r>_mp_rank_00_model_states.pt",
    "_mp_rank_00_optim_states": "tail of the ZeRO optimizer file name pattern zero_pp_rank_<r>_mp_rank_00_optim_states.pt",
    "zero_pp_rank_1_": "head of rank 1's file name (generated table)",
    "_ds_protocol_probe": "this bundle's test probe (Provenance)",
    "ds_protocol_capture": "this bundle's committed capture (Provenance)",
    "ep_size_1": "MoE group name f'ep_size_{ep_size}' (generated table)",
    "ep_size_2": "MoE group name f'ep_size_{ep_size}' (generated table)",
    "DS_BUILD_": "prefix of the DS_BUILD_<OP> install variables",
    "--amp": "DALLE-pytorch's train_dalle.py flag (linked to its page)",
    "--enable_elastic_training": "named as NOT a runner flag (argparse exit 2, test_ds_tables.py)",
    "_ds_tables": "this bundle's generator (Provenance)", "ds_tables_capture": "this bundle's committed capture (Provenance)",
    "test_ds_tables": "this bundle's test (Provenance)", "_autotp_probe": "this bundle's test probe (Provenance)",
    "ACCELERATE_DEEPSPEED_": "prefix of the ACCELERATE_DEEPSPEED_* variables the launcher exports",
    "_peft_has_been_casted_to_bf16": "trl DPOTrainer attribute (trl not pinned; v0.19.0 dpo_trainer.py)",
    "AVX2": "CPU instruction set named in DeepSpeedCPUAdam's load message", "AVX512": "CPU instruction set",
}

# Trainer command-line flags (HfArgumentParser makes one per TrainingArguments field), checked in the
# installed transformers 5.25.0 training_args.py (test_trainer_flags_are_training_arguments_fields)
TRAINER_FLAGS = {"--learning_rate": "learning_rate: float = field(", "--bf16": "bf16: bool = field(",
                 "--fp16": "fp16: bool = field("}
TRAINING_ARGS = Path(importlib.util.find_spec("transformers").origin).parent / "training_args.py"
PLANNER_DIR = REFS.parent / "scripts"


def _training_args_flag(tok: str) -> bool:
    """`--ddp_timeout` / `--ddp-backend`: a TrainingArguments field written as the command-line flag
    HfArgumentParser makes of it."""
    name = tok[2:].replace("-", "_")
    return tok.startswith("--") and re.search(rf"^    {re.escape(name)}: .*= field\(", TRAINING_ARGS.read_text(
        encoding="utf-8"), re.M) is not None


def _planner_names() -> set:
    """memory-planning.md names the bundle's own planner: its flags (from its parser) and the keys of its
    JSON report (from a run), and the validator's flags, so those are checked against the bundle's scripts
    instead of the packages."""
    sys.path.insert(0, str(PLANNER_DIR))
    from backend_planner import cli  # noqa: E402
    names = {o for a in cli.build_parser()._actions for o in a.option_strings}
    out = subprocess.run([sys.executable, str(PLANNER_DIR / "plan_backend.py"), "--params", "7B", "--nodes", "2",
                          "--intra-node-bandwidth", "3e11", "--output", "json"], capture_output=True, text=True,
                         timeout=120)
    keys: set = set()

    def walk(v):
        if isinstance(v, dict):
            keys.update(v)
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)
    walk(json.loads(out.stdout))
    # the validator the emitted configs are checked with (its flags, from its own --help)
    vhelp = subprocess.run([sys.executable, str(PLANNER_DIR / "validate_backend_config.py"), "--help"],
                           capture_output=True, text=True, timeout=60).stdout
    return names | keys | set(re.findall(r"--[a-z][a-z-]+", vhelp)) | {"validate_backend_config"}


def test_trainer_flags_are_training_arguments_fields():
    text = TRAINING_ARGS.read_text(encoding="utf-8")
    assert [f for f, field in TRAINER_FLAGS.items() if field not in text or not field.startswith(f[2:] + ":")] == []


def _names(text: str) -> list[str]:
    return span_names(text)


@pytest.fixture(scope="module")
def corpus() -> set[str]:
    # transformers (pinned in requirements-test.txt): the Trainer hand-off and the MoE model families
    roots = [Path(importlib.util.find_spec(t).origin).parent for t in ("accelerate", "deepspeed", "transformers")]
    torch_root = Path(importlib.util.find_spec("torch").origin).parent
    roots += [torch_root / "distributed", torch_root / "optim", torch_root / "utils" / "cpp_extension.py"]
    return source_words(*roots)


def test_names_occur_in_the_installed_sources(corpus):
    planner = _planner_names()
    unknown = sorted({(n, tok) for n in CHECKED for tok in _names((REFS / n).read_text())
                      if tok not in corpus and tok not in NOT_PACKAGE_NAMES and tok not in TRAINER_FLAGS
                      and not _training_args_flag(tok) and not (n == "memory-planning.md" and tok in planner)})
    assert not unknown, unknown
    assert sum(len(_names((REFS / n).read_text())) for n in CHECKED) > 150


@pytest.mark.parametrize("bad", ["--hostfiles", "stage3_gather_16bit_weights_on_model_saves", "DS_ACCELERATR",
                                 "train_micro_batch_size_per_gpus"])
def test_a_misspelt_name_is_caught(corpus, bad):
    assert _names(f"`{bad}`") == [bad] and bad not in corpus and bad not in NOT_PACKAGE_NAMES

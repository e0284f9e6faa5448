"""The shipped name tables (references/facts/names.json) are a run, not a claim: one child process
regenerates them from the installed pinned packages and must reproduce the shipped file byte for
byte, then drives the real code paths behind sample entries (tests/facts/_probe.py).

The transformers 4.57.1 -> 5 diff is the one part the child cannot regenerate without the 4.57.1
wheel, which CI does not have (a bare clone installs only requirements-test.txt, and fetching a
second transformers at test time would put the package index inside the test). The generator keeps
that section as shipped; here its 5.x side is checked against the installed source (every field it
calls removed is gone, every added or changed field exists with the stated new default), and the
4.57.1 side is reproduced by `generate_facts.py --tf4-wheel` (references/versions.md says how).
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
DATA = REPO / "references" / "facts" / "names.json"


@pytest.fixture(scope="module")
def probe():
    proc = subprocess.run([sys.executable, str(HERE / "_probe.py"), str(DATA)], capture_output=True, text=True,
                          timeout=600, cwd=REPO, env={**__import__("os").environ, "DS_ACCELERATOR": "cpu"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_generator_reproduces_the_shipped_file(probe):
    assert probe["regenerate"] == {"identical": True}, probe["regenerate"]


def test_accelerate_launch_defaults_are_what_the_parser_delivers(probe):
    assert probe["launch_flags_checked"] > 100
    assert probe["launch_defaults_mismatch"] == []


def test_every_listed_top_level_config_key_loads_and_flag_only_names_are_rejected(probe):
    assert probe["config_top_keys_accepted"] >= 25 and probe["config_top_keys_rejected"] == {}
    assert probe["flag_only_checked"] >= 10 and probe["flag_only_not_rejected"] == []


def test_variables_the_table_says_accelerate_launch_sets_are_set(probe):
    assert len(probe["simple_env_expected"]) >= 5 and "ACCELERATE_MIXED_PRECISION" in probe["simple_env_expected"]
    assert probe["simple_env_missing"] == []
    # the flag-only --num_cpu_threads_per_process reaches the children as OMP_NUM_THREADS (table link)
    assert probe["simple_env_omp"] == "2"


def test_nested_tables_called_free_accept_unknown_keys(probe):
    free = probe["free_tables_accepting_unknown"]
    assert len(free) >= 6 and all(free.values()), free


def test_questionnaire_fp8_keys_reach_only_an_unread_variable(probe):
    """accelerate config writes fp8_config keys (amax_history_length, ...) whose names no flag has: the
    real merge + export puts each value in the variable the table names, which the table says nothing
    reads, while the variable of the nearest flag, which is read, does not get it."""
    assert probe["fp8_stray_keys"] >= 3 and probe["fp8_stray_wrong"] == []


def test_torchrun_defaults_and_pet_variable(probe):
    assert probe["torchrun_checked"] >= 25 and probe["torchrun_defaults_mismatch"] == []
    assert probe["pet_env_name"] == "PET_NNODES" and probe["pet_nnodes_default"] == "2:4"


def test_worker_variables_the_table_says_torchrun_sets_are_in_a_real_worker(probe):
    assert probe["torchrun_rc"] == 0
    assert len(probe["agent_sets_expected"]) >= 10 and "TORCHELASTIC_RESTART_COUNT" in probe["agent_sets_expected"]
    assert probe["agent_sets_missing_in_worker"] == []


def test_deepspeed_launcher_and_zero_config(probe):
    assert probe["ds_launcher_checked"] >= 20 and probe["ds_launcher_defaults_mismatch"] == []
    assert probe["zero_offload_device"] in probe["zero_offload_choices"]
    assert probe["zero_reduce_bucket_default"] == probe["zero_reduce_bucket_table"]
    # a flattened accelerate-style name inside zero_optimization: deepspeed refuses it, the table lacks it
    assert probe["zero_rejects_unknown"] is True and probe["zero_unknown_in_table"] is False


def test_trainer_defaults_and_choices(probe):
    assert probe["trainer_checked"] == 10 and probe["trainer_mismatch"] == {}
    assert probe["eval_strategy_choices"] == ["no", "steps", "epoch"] and probe["eval_strategy_refused"] == []
    assert probe["fsdp_prefix_note"] is True and probe["fsdp_prefix_stripped"] is True
    assert probe["fsdp_string_deprecated"] is True  # the note on the fsdp field says so


def test_transformers_4_to_5_diff_matches_the_installed_side(probe):
    assert probe["diff_count"] > 20
    assert probe["diff_removed_still_present"] == [] and probe["diff_new_side_wrong"] == []
    assert probe["diff_removed_sample"], "the diff lists no removed field"
    assert probe["diff_removed_not_type_error"] == []  # the note on removed fields says TypeError


def test_dynamo_config_and_init_inference_tables_match_the_live_objects(probe):
    assert probe["dynamo_checked"] > 100 and probe["dynamo_default_mismatch"] == []
    assert probe["dynamo_set_optimize_ddp"] == "python_reducer" and probe["dynamo_unknown_refused"] is True
    assert probe["inference_checked"] > 20 and probe["inference_alias_reaches_field"] is True


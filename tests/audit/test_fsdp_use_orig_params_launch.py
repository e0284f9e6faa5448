"""generation-under-sharding.md: `accelerate launch` with FSDP exports FSDP_USE_ORIG_PARAMS=true unless
--fsdp_use_orig_params false, while a FullyShardedDataParallelPlugin built with the variable unset gets
use_orig_params=False (accelerate 1.15.0; parsing and the env builder only, nothing launched)."""
from __future__ import annotations

import os

from accelerate.commands.launch import launch_command_parser
from accelerate.utils.launch import prepare_multi_gpu_env


def _env(tmp_path, monkeypatch, *extra):
    from accelerate.commands.launch import _validate_launch_command
    monkeypatch.setenv("HF_HOME", str(tmp_path))             # no default config file: the launcher's own defaults
    args = launch_command_parser().parse_args(["--use_fsdp", "--num_processes", "2", *extra, "train.py"])
    args = _validate_launch_command(args)[0]
    return prepare_multi_gpu_env(args)


def test_launch_exports_true_by_default_and_false_on_request(tmp_path, monkeypatch):
    assert _env(tmp_path, monkeypatch)["FSDP_USE_ORIG_PARAMS"] == "true"
    assert _env(tmp_path, monkeypatch, "--fsdp_use_orig_params", "false")["FSDP_USE_ORIG_PARAMS"] == "false"


def test_a_plugin_built_with_the_variable_unset_gets_false(monkeypatch):
    from accelerate.utils import FullyShardedDataParallelPlugin
    monkeypatch.delenv("FSDP_USE_ORIG_PARAMS", raising=False)
    monkeypatch.setenv("ACCELERATE_USE_FSDP", "true")
    assert FullyShardedDataParallelPlugin(fsdp_version=1).use_orig_params is False
    assert "FSDP_USE_ORIG_PARAMS" not in os.environ

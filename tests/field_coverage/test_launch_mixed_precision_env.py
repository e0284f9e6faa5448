"""An exported ACCELERATE_MIXED_PRECISION does not survive `accelerate launch` (accelerate 1.15.0): the
launcher writes the variable itself from args.mixed_precision, which _validate_launch_command fills from
the config file or "no". Real launch_command_parser -> launch_command, Popen recorded
(_accelerate_launch_env.run_case). Backs configuration-and-cli/references/launch-child-environment.md."""
from __future__ import annotations

import pytest

import _accelerate_launch_env as gen


@pytest.fixture()
def tmp(tmp_path):
    return tmp_path


def test_exported_variable_is_overwritten_with_no(tmp):
    kind, _, added, _, err, kept = gen.run_case(["--cpu", gen.SCRIPT], None, tmp,
                                               shell={"ACCELERATE_MIXED_PRECISION": "bf16"})
    assert err is None
    assert added["ACCELERATE_MIXED_PRECISION"] == "no" and "ACCELERATE_MIXED_PRECISION" not in kept


def test_exported_variable_is_overwritten_with_config_value(tmp):
    cfg = gen._cfg("NO", use_cpu=True, mixed_precision="fp16")
    _, _, added, _, err, kept = gen.run_case(["--config_file", "cfg.yaml", gen.SCRIPT], cfg, tmp,
                                             shell={"ACCELERATE_MIXED_PRECISION": "bf16"})
    assert err is None
    assert added["ACCELERATE_MIXED_PRECISION"] == "fp16" and not kept


def test_flag_wins_over_exported_variable(tmp):
    _, _, added, _, err, _ = gen.run_case(["--cpu", "--mixed_precision", "bf16", gen.SCRIPT], None, tmp,
                                          shell={"ACCELERATE_MIXED_PRECISION": "no"})
    assert err is None and added["ACCELERATE_MIXED_PRECISION"] == "bf16"


def test_fp8_is_a_flag_choice():
    from accelerate.commands.launch import launch_command_parser
    assert launch_command_parser().parse_args(["--mixed_precision", "fp8", gen.SCRIPT]).mixed_precision == "fp8"

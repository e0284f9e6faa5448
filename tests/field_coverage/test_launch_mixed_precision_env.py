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


def test_fp8_flag_without_a_backend_is_refused(tmp):
    from accelerate.utils import is_fp8_available
    if is_fp8_available():
        pytest.skip("an FP8 backend is installed here")
    # a real `accelerate launch` (run_case stubs is_fp8_available to True); the script never starts
    import subprocess
    import sys
    (tmp / "train.py").write_text("raise SystemExit('script ran')\n", encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "accelerate.commands.launch", "--cpu", "--num_processes", "1",
                           "--mixed_precision", "fp8", "train.py"], cwd=tmp, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode != 0 and "script ran" not in proc.stderr
    assert "RuntimeError: FP8 is not available on this machine" in proc.stderr


def test_tpu_launcher_keeps_the_exported_variable(tmp_path, monkeypatch):
    """prepare_tpu writes no ACCELERATE_MIXED_PRECISION: xmp.spawn's children see the shell's value, even
    against --mixed_precision no. torch_xla is absent here, so xla_multiprocessing is a recording stub."""
    import sys
    import types

    from accelerate.commands.launch import launch_command_parser, tpu_launcher
    seen = {}
    xmp = types.ModuleType("torch_xla.distributed.xla_multiprocessing")
    xmp.spawn = lambda fn, args=(): seen.setdefault("env", __import__("os").environ.get("ACCELERATE_MIXED_PRECISION"))
    for name in ("torch_xla", "torch_xla.distributed"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, "torch_xla.distributed.xla_multiprocessing", xmp)
    (tmp_path / "train.py").write_text("def main():\n    pass\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ACCELERATE_MIXED_PRECISION", "bf16")
    args = launch_command_parser().parse_args(["--tpu", "--mixed_precision", "no", "train.py"])
    args.main_training_function = "main"
    tpu_launcher(args)
    assert seen["env"] == "bf16"

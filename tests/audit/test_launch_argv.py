"""How `accelerate launch` splits its command line (set-5 s5-acl-01), run in-process through the
real console entry point `accelerate.commands.accelerate_cli.main` with `launch_command` replaced
by a recorder, so nothing is launched. accelerate 1.15.0, this interpreter's argparse."""
from __future__ import annotations

import contextlib
import io
import sys

import pytest

import accelerate.commands.launch as launch_mod  # noqa: E402
from accelerate.commands import accelerate_cli  # noqa: E402
from accelerate.commands.config.config_args import load_config_from_file  # noqa: E402


def cli(monkeypatch, *argv):
    """('ok', parsed args) or ('exit', last stderr line) for `accelerate launch *argv`."""
    seen = []
    monkeypatch.setattr(launch_mod, "launch_command", seen.append)
    monkeypatch.setattr(sys, "argv", ["accelerate", "launch", *argv])
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            accelerate_cli.main()
    except SystemExit as e:
        assert e.code == 2
        return "exit", err.getvalue().strip().splitlines()[-1]
    return "ok", seen[-1]


def test_everything_after_the_script_goes_to_the_script(monkeypatch):
    kind, args = cli(monkeypatch, "--config_file", "cfg.yaml", "train.py", "--config-path", "x.yaml", "--num_processes", "3")
    assert kind == "ok" and args.config_file == "cfg.yaml" and args.training_script == "train.py"
    assert args.training_script_args == ["--config-path", "x.yaml", "--num_processes", "3"]
    assert args.num_processes is None  # the launcher flag after SCRIPT was not read by accelerate


def test_which_parser_complains(monkeypatch):
    # a script flag before SCRIPT: accelerate's own top-level parser rejects it
    assert cli(monkeypatch, "--config_file", "cfg.yaml", "--config-path", "x.yaml", "train.py") == (
        "exit", "Accelerate CLI tool: error: unrecognized arguments: --config-path")
    # an unquoted empty variable: --config_file takes the script path, so SCRIPT is missing
    assert cli(monkeypatch, "--config_file", "/p/train.py", "--config-path") == (
        "exit", "accelerate <command> [<args>] launch: error: the following arguments are required: "
                "training_script, training_script_args")
    # abbreviations are refused (allow_abbrev=False)
    assert cli(monkeypatch, "--num_proc", "2", "train.py") == (
        "exit", "Accelerate CLI tool: error: unrecognized arguments: --num_proc")


def test_a_quoted_empty_config_file_is_a_missing_file(monkeypatch):
    kind, args = cli(monkeypatch, "--config_file", "", "train.py", "--config-path")
    assert kind == "ok" and args.config_file == "" and args.training_script_args == ["--config-path"]
    with pytest.raises(FileNotFoundError, match="The passed configuration file `` does not exist"):
        load_config_from_file(args.config_file)  # what launch_command does with a non-None value

"""Run deepspeed.launcher.runner.main (local path: no hostfile) with the launched child's return code
replaced, and print what `deepspeed` itself does with it: EXIT <code> or RETURNED (exit status 0).
Usage: python _ds_runner_exit_probe.py CODE [CODE ...]  (run with DS_ACCELERATOR=cpu)."""
import os
import subprocess
import sys

os.environ.setdefault("DS_ACCELERATOR", "cpu")
from deepspeed.launcher import runner  # noqa: E402

REAL = subprocess.Popen


class _Child:
    """Stands in for the local `deepspeed.launcher.launch` process; wait() returns the given code."""

    def __init__(self, code):
        self.code, self.returncode = code, None

    def wait(self):
        self.returncode = self.code
        return self.code


for code in map(int, sys.argv[1:]):
    def popen(cmd, *a, _code=code, **kw):
        if any("deepspeed.launcher.launch" in str(c) for c in cmd):
            return _Child(_code)
        return REAL(cmd, *a, **kw)
    runner.subprocess.Popen = popen
    try:
        runner.main(["--num_gpus", "1", "--hostfile", "/nonexistent-hostfile", "train.py"])
        print(f"CODE {code} RETURNED", flush=True)
    except SystemExit as exc:
        print(f"CODE {code} EXIT {exc.code}", flush=True)

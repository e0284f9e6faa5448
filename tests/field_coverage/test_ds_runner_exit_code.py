"""The `deepspeed` command's exit status (deepspeed-multinode-runners.md, "Exit status"): runner.main waits
on the runner it started and exits with that child's code only when it is > 0; a child killed by a signal
(negative code) or a clean one leaves `deepspeed` exiting 0. Runs the real runner.main on its local path
with the child's return code replaced (tests/field_coverage/_ds_runner_exit_probe.py)."""
import os
import subprocess
import sys
from pathlib import Path

PROBE = Path(__file__).with_name("_ds_runner_exit_probe.py")


def test_runner_passes_on_positive_codes_only():
    env = dict(os.environ, DS_ACCELERATOR="cpu")
    p = subprocess.run([sys.executable, str(PROBE), "3", "1", "0", "-9", "-15"], capture_output=True,
                       text=True, timeout=240, env=env)
    assert p.returncode == 0, p.stderr[-2000:]
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("CODE ")]
    assert lines == ["CODE 3 EXIT 3", "CODE 1 EXIT 1", "CODE 0 RETURNED", "CODE -9 RETURNED",
                     "CODE -15 RETURNED"], p.stdout[-2000:]

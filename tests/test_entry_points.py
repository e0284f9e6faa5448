"""Every helper script survives a reader that closes the pipe early (`| head`)."""
import subprocess
import sys

import pytest

SCRIPTS = [
    ["sub-skills/distributed-training-backends/scripts/validate_backend_config.py", "--list-rules"],
    ["sub-skills/distributed-training-backends/scripts/validate_backend_config.py", "--help"],
    ["sub-skills/distributed-and-backends/scripts/check_backend_availability.py"],
    ["sub-skills/distributed-and-backends/scripts/check_backend_availability.py", "--help"],
    ["scripts/check_bundle.py", "--sizes"],
]


@pytest.mark.parametrize("argv", SCRIPTS, ids=lambda a: " ".join(a))
def test_closed_pipe_gives_no_traceback(argv, repo_root):
    proc = subprocess.Popen([sys.executable, *argv], cwd=repo_root, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    proc.stdout.read(1)  # a reader that wants one byte, then goes away
    proc.stdout.close()
    err = proc.stderr.read().decode()
    proc.wait(timeout=60)
    assert "Traceback" not in err, err

"""trackers.md: `logging_dir` is not an `Accelerator(...)` keyword in accelerate 1.15.0, nothing is logged
before `init_trackers`, and TensorBoardTracker.log flushes its writer on every call (cited line, the
tensorboard package is not installed here). Runs accelerate in a child process (the state singleton).
"""
from __future__ import annotations

import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

CHILD = textwrap.dedent("""
    from accelerate import Accelerator
    try:
        Accelerator(logging_dir="unused")
        print("logging_dir accepted")
    except TypeError as e:
        print("logging_dir TypeError", "logging_dir" in str(e))
    a = Accelerator(cpu=True)
    a.log({"x": 1.0}, step=0)
    print("trackers", len(a.trackers))
""")


def test_logging_dir_is_not_an_accelerator_keyword_and_log_needs_init_trackers():
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split("\n")[:2] == ["logging_dir TypeError True", "trackers 0"], out.stdout


def test_tensorboard_log_flushes_after_every_call():
    src = (Path(sysconfig.get_paths()["purelib"]) / "accelerate" / "tracking.py").read_text()
    body = src[src.index("class TensorBoardTracker"):src.index("def finish", src.index("class TensorBoardTracker"))]
    log = body[body.index("def log("):]
    assert "self.writer.flush()" in log

"""Worker for test_elastic_rendezvous_closed.py. Modes: `fail` exits 1 at once; `ok` exits 0; `sleep`
writes MARKER and sleeps until its agent stops it; `fail_after` waits until MARKER exists, then exits 1
(on its second start, after a restart, it exits 0). No process group: only the agents are under test."""
import os
import sys
import time
from pathlib import Path

mode, marker = sys.argv[1], Path(sys.argv[2])
if mode == "fail":
    sys.exit(1)
if mode == "ok":
    sys.exit(0)
if mode == "sleep":
    marker.write_text("started")
    time.sleep(120)
if mode == "fail_after":
    if os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") != "0":
        sys.exit(0)
    deadline = time.monotonic() + 60
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    sys.exit(1)

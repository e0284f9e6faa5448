"""Worker for test_torch_audit.py's SIGTERM-to-torchrun run; standard library only, so workers start at once.

Every rank installs a SIGTERM handler that leaves sigterm_rankR_attemptA in the working directory and exits 0,
then leaves ready_rankR_attemptA and sleeps at most 60 s; the test sends SIGTERM to torchrun itself.
"""
import os
import signal
import sys
import time

rank, attempt = os.environ["RANK"], os.environ["TORCHELASTIC_RESTART_COUNT"]


def on_term(signum, frame):
    open(f"sigterm_rank{rank}_attempt{attempt}", "w").close()
    sys.exit(0)


signal.signal(signal.SIGTERM, on_term)
open(f"ready_rank{rank}_attempt{attempt}", "w").close()
time.sleep(60)

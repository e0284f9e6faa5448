"""Worker for the real torchrun runs of tests/audit_torch/test_launch_audit.py (no process group).

python -m torch.distributed.run --standalone --nproc-per-node 2 _torchrun_audit_worker.py MODE
MODE record:  rank 0 prints a traceback of its own at once and keeps running; rank 1 raises
              ValueError after that (a marker file in the working directory) inside a function decorated with @record.
MODE sigkill: rank 1 kills itself with SIGKILL (what the host OOM killer does); rank 0 keeps running.
Rank 0 sleeps at most 60 s, so a launcher that never stops it still ends.
"""
import os
import signal
import sys
import time
import traceback

from torch.distributed.elastic.multiprocessing.errors import record


@record
def main():
    mode, rank = sys.argv[1], int(os.environ["RANK"])
    if rank == 0:
        if mode == "record":
            try:
                raise RuntimeError("rank 0 printed this error first")
            except RuntimeError:
                traceback.print_exc()
                sys.stderr.flush()
            open("rank0_printed", "w").close()         # cwd is the test's own folder
        time.sleep(60)
        return
    if mode == "record":                               # fail only after rank 0's error is out
        end = time.monotonic() + 60
        while not os.path.exists("rank0_printed") and time.monotonic() < end:
            time.sleep(0.05)
    time.sleep(1)
    if mode == "record":
        raise ValueError("rank 1 failed under record")
    os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    if sys.argv[1] == "sigkill":
        main.__wrapped__()                      # no @record: the summary has no error file
    else:
        main()

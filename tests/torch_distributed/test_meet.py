"""_meet.meet: why the FileStore jobs meet before a short-timeout init_process_group (torch 2.13.0 CPU).

Two spawned gloo ranks, rank 1 reaching init 4 s after rank 0 under a 2-s group timeout: without the
meeting rank 0 fails with "Wait timeout" (the setup error of the 1b39949 CI run); with it both ranks
init and all_reduce. The meeting itself is checked in-process with two threads on one FileStore.
"""
from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch.distributed as dist

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _meet import meet  # noqa: E402

JOB = r"""
import datetime, os, sys, time
import torch, torch.distributed as dist, torch.multiprocessing as mp
sys.path.insert(0, sys.argv[3])
from _meet import meet

def worker(rank, path, use_meet):
    store = dist.FileStore(path, 2)
    if rank == 1:
        time.sleep(4)
    if use_meet == "1":
        meet(store, 2, seconds=60)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=2, timeout=datetime.timedelta(seconds=2))
    t = torch.ones(1)
    dist.all_reduce(t)
    os.write(1, f"rank{rank}:sum={t.item():.0f}\n".encode())   # one write: the ranks' lines never interleave
    dist.destroy_process_group()

if __name__ == "__main__":
    mp.spawn(worker, args=(sys.argv[1], sys.argv[2]), nprocs=2)
"""


@pytest.mark.parametrize("use_meet", ["0", "1"])
def test_a_late_rank_fails_a_short_init_unless_the_ranks_meet_first(tmp_path, use_meet):
    (tmp_path / "job.py").write_text(JOB)           # a file: spawned ranks re-import the main module
    r = subprocess.run([sys.executable, str(tmp_path / "job.py"), str(tmp_path / "store"), use_meet, str(HERE)],
                       capture_output=True, text=True, timeout=120)
    if use_meet == "0":
        assert r.returncode == 1
        assert "RuntimeError: Wait timeout" in r.stderr
    else:
        assert r.returncode == 0, r.stderr[-3000:]
        assert sorted(r.stdout.split()) == ["rank0:sum=2", "rank1:sum=2"]


def test_meet_returns_once_every_rank_arrived_and_bounds_the_wait(tmp_path):
    path = str(tmp_path / "s")
    stores = [dist.FileStore(path, 2) for _ in range(2)]
    done = []

    def rank(i, delay):
        time.sleep(delay)
        meet(stores[i], 2, seconds=30)
        done.append((i, time.monotonic()))
    t0 = time.monotonic()
    threads = [threading.Thread(target=rank, args=(0, 0.0)), threading.Thread(target=rank, args=(1, 0.5))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(i for i, _ in done) == [0, 1]
    assert min(t for _, t in done) - t0 >= 0.5            # rank 0 waited for the late rank
    alone = dist.FileStore(str(tmp_path / "alone"), 2)
    with pytest.raises(RuntimeError, match=r"meet: 1 of 2 ranks arrived within 0 s"):
        meet(alone, 2, seconds=0.3)

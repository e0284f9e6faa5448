"""One rank of a small gloo job that desynchronises on purpose, then dumps its flight recorder.

Run under torchrun (2 ranks, gloo, CPU). argv: SCENARIO [PG_TIMEOUT_SECONDS]
  healthy  every rank runs the same collectives
  skip     rank 1 skips the last all_reduce (seq 4 of the default group) and waits elsewhere
  order    rank 0 runs all_reduce then broadcast, rank 1 broadcast then all_reduce (seq 3)
  size     rank 1 all_reduces 8 elements where rank 0 all_reduces 4 (seq 3): gloo aborts the process
  subgroup as healthy, then rank 1 skips an all_reduce on a second group (new_group, desc "side")
  sigterm  as skip, but rank 0 exits 1 after its dump, so torchrun stops rank 1 with SIGTERM;
           every rank dumps from a SIGTERM handler (rank 1 only dumps there)
  serve    as skip, and every rank first starts torch's per-rank debug worker server
           (torch._C._distributed_c10d._WorkerServer, what torch.distributed.debug.start_debug_server
           starts) and writes its port to <prefix>port<rank>; rank 1 waits for <prefix>release

Each rank writes what torch 2.13.0 gives it, to the prefix in FR_TEST_PREFIX, named the way
ProcessGroupNCCL's automatic dump names its file (<prefix><rank>):
  <prefix><rank>        torch._C._distributed_c10d._dump_fr_trace()       (pickle bytes)
  <prefix><rank>.json   torch._C._distributed_c10d._dump_fr_trace_json()  (JSON bytes)
gloo has no automatic dump: the program dumps when a collective raises, or at the end. The rank
prints "DUMPED <rank> <error or ok>" and exits 0 so torchrun never tears the other rank down
before it has dumped.
"""
import datetime
import os
import signal
import sys
import time

import torch
import torch.distributed as dist
from torch._C import _distributed_c10d as c10d


def dump(rank: int, note: str) -> None:
    prefix = os.environ["FR_TEST_PREFIX"]
    with open(f"{prefix}{rank}", "wb") as fh:
        fh.write(c10d._dump_fr_trace())
    with open(f"{prefix}{rank}.json", "wb") as fh:
        fh.write(c10d._dump_fr_trace_json())
    print(f"DUMPED {rank} {note}", flush=True)


def wait_for_peer_dump(peer: int, seconds: float) -> None:
    """Stay alive (the hang) until the peer has dumped, so its collective times out instead of
    seeing this process go away."""
    path = f"{os.environ['FR_TEST_PREFIX']}{peer}.json"
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not os.path.exists(path):
        time.sleep(0.1)


def main() -> None:
    scenario = sys.argv[1]
    timeout = float(sys.argv[2]) if len(sys.argv) > 2 else 3.0
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=timeout))
    rank = dist.get_rank()
    prefix = os.environ["FR_TEST_PREFIX"]
    if scenario == "serve":
        server = c10d._WorkerServer("::", 0)
        with open(f"{prefix}port{rank}.tmp", "w") as fh:
            fh.write(str(server.port))
        os.replace(f"{prefix}port{rank}.tmp", f"{prefix}port{rank}")
    if scenario == "sigterm":
        def on_sigterm(signum, frame):
            dump(rank, "SIGTERM")
            os._exit(143)
        signal.signal(signal.SIGTERM, on_sigterm)
    t = torch.ones(4)
    try:
        dist.all_reduce(t)                       # seq 1
        dist.broadcast(t, src=0)                 # seq 2
        if scenario == "order":
            if rank == 0:
                dist.all_reduce(t)               # seq 3 on rank 0
                dist.broadcast(t, src=0)
            else:
                dist.broadcast(t, src=0)         # seq 3 on rank 1
                dist.all_reduce(t)
        elif scenario == "size":
            dist.all_reduce(torch.ones(4 if rank == 0 else 8))   # seq 3
        else:
            dist.all_reduce(t)                   # seq 3
        if scenario in ("skip", "serve", "sigterm"):
            if rank == 1 and scenario == "serve":   # skips seq 4 and waits to be released
                deadline = time.monotonic() + timeout * 2
                while time.monotonic() < deadline and not os.path.exists(f"{prefix}release"):
                    time.sleep(0.1)
                return
            if rank == 1 and scenario == "sigterm":  # skips seq 4, busy elsewhere until stopped
                deadline = time.monotonic() + timeout * 10
                while time.monotonic() < deadline:
                    time.sleep(0.1)
                return
            if rank == 1:                        # skips seq 4 and "hangs" elsewhere
                dump(rank, "ok")
                wait_for_peer_dump(0, timeout * 4)
                return
            dist.all_reduce(t)                   # seq 4: rank 0 waits here for rank 1
        if scenario == "subgroup":
            side = dist.new_group([0, 1], timeout=datetime.timedelta(seconds=timeout), group_desc="side")
            dist.all_reduce(t, group=side)       # seq 1 of "side"
            if rank == 0:
                dist.all_reduce(t, group=side)   # seq 2 of "side": rank 1 never joins
            else:
                dump(rank, "ok")
                wait_for_peer_dump(0, timeout * 4)
                return
        dist.barrier()
    except Exception as exc:  # the timeout (or gloo's own error) of the desynchronised collective
        dump(rank, type(exc).__name__ + ": " + str(exc).splitlines()[0][:200])
        if scenario == "sigterm":
            sys.stdout.flush()
            os._exit(1)
        return
    dump(rank, "ok")


if __name__ == "__main__":
    main()
    sys.stdout.flush()
    os._exit(0)

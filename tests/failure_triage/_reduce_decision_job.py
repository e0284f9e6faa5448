"""2-rank gloo job for test_reduce_decision_diverges.py (torch 2.13.0 CPU): a "save on best" decision taken
from a `dist.reduce` result (valid on dst only) sends the ranks down different code paths, so the rank
that decided to save waits in a collective the other never calls, until the group timeout. The same
decision from `all_reduce` is the same on every rank.

Usage: python _reduce_decision_job.py OUTDIR RANK -> OUTDIR/rankN.json. Ranks meet through a FileStore in
OUTDIR (no port). Rank 0's accuracy is 1.0, rank 1's 10.0: the mean 5.5 beats best=5.2 (higher is better).
Rank 1's buffer after the reduce is undefined; gloo here left it at its own 10.0 (mean 5.0: no save).
Ends with os._exit.
"""
from __future__ import annotations

import datetime
import json
import os
import sys
import time


def main(outdir: str, rank: int) -> dict:
    import torch
    import torch.distributed as dist

    store = dist.FileStore(os.path.join(outdir, "store"), 2)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=2,
                            timeout=datetime.timedelta(seconds=3))
    res: dict = {}
    best = 5.2
    acc = torch.tensor([1.0 if rank == 0 else 10.0])

    t = acc.clone()
    dist.all_reduce(t)
    res["all_reduce_save"] = bool(t.item() / 2 > best)

    t = acc.clone()
    dist.reduce(t, dst=0)
    res["reduce_value"] = t.item()
    save = bool(t.item() / 2 > best)
    res["reduce_save"] = save
    dist.barrier()  # both ranks reach this line; only the branch below differs

    t0 = time.monotonic()
    if save:  # the save path gathers something (a full state dict, a metric): a collective
        try:
            out = [torch.zeros(1), torch.zeros(1)]
            dist.all_gather(out, acc)
            res["branch"] = "all_gather returned"
        except Exception as e:  # noqa: BLE001 - the error is the result
            res["branch"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
    else:
        time.sleep(5)  # goes on with its epoch; never calls the all_gather
        res["branch"] = "skipped the save"
    res["seconds"] = round(time.monotonic() - t0, 1)
    return res


if __name__ == "__main__":
    code = 1
    try:
        outdir, rank = sys.argv[1], int(sys.argv[2])
        r = main(outdir, rank)
        with open(os.path.join(outdir, f"rank{rank}.json"), "w") as f:
            json.dump(r, f)
        code = 0
    except BaseException:
        import traceback
        traceback.print_exc()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)

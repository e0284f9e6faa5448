"""Worker for test_port_in_use.py, run by a real torchrun: gloo env:// init, one all_reduce, then
writes OUT_DIR/ready-<tag>-<rank>.json (pid, MASTER_PORT) and sleeps HOLD_S seconds (a run that is
still alive, like a hung or leftover job)."""
import datetime
import json
import os
import time

import torch
import torch.distributed as dist

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=20))
t = torch.tensor([dist.get_rank() + 1.0])
dist.all_reduce(t)
rank = dist.get_rank()
out = os.path.join(os.environ["OUT_DIR"], f"ready-{os.environ['TAG']}-{rank}.json")
with open(out + ".tmp", "w") as f:
    json.dump({"pid": os.getpid(), "master_port": os.environ["MASTER_PORT"], "sum": t.item()}, f)
os.replace(out + ".tmp", out)
time.sleep(float(os.environ.get("HOLD_S", "0")))
dist.destroy_process_group()
os._exit(0)  # result written, group destroyed: skip interpreter teardown (exit-time gloo aborts seen elsewhere)

"""A worker for deepspeed.launcher.launch: writes the variables the launcher gave it to
<last argument>/env_<LOCAL_RANK>.json, one file per worker so that concurrent output cannot
interleave (the launcher inserts --local_rank=N before the script's own arguments)."""
import json
import os
import sys

names = ["CUDA_VISIBLE_DEVICES", "LOCAL_RANK", "RANK", "WORLD_SIZE"]
with open(os.path.join(sys.argv[-1], f"env_{os.environ['LOCAL_RANK']}.json"), "w") as f:
    json.dump({k: os.environ.get(k) for k in names}, f)
print(f"out of rank {os.environ['RANK']}")  # with --enable_each_rank_log these land in the rank's file
print(f"err of rank {os.environ['RANK']}", file=sys.stderr)

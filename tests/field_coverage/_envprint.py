"""A worker for deepspeed.launcher.launch: prints the variables the launcher gave it."""
import json
import os

print("ENV " + json.dumps({k: os.environ.get(k) for k in ["CUDA_VISIBLE_DEVICES", "LOCAL_RANK", "RANK", "WORLD_SIZE"]}), flush=True)

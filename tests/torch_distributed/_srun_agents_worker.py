"""Worker for test_srun_tasks_per_node_torchrun.py: records the environment its torchrun agent gave it
(file named by the agent's pid and LOCAL_RANK), then ends without joining a process group."""
import json
import os
import sys

KEYS = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "GROUP_RANK", "LOCAL_WORLD_SIZE", "TORCHELASTIC_RESTART_COUNT"]
out = sys.argv[1]
path = os.path.join(out, f"agent{os.getppid()}.local{os.environ['LOCAL_RANK']}.json")
with open(path + ".tmp", "w") as f:
    json.dump({k: os.environ.get(k) for k in KEYS}, f)
os.replace(path + ".tmp", path)
sys.stdout.flush()
os._exit(0)

"""Worker script for the real `torchrun` / `torch.distributed.launch` runs in test_behaviour.py.

python -m torch.distributed.run ... _torchrun_worker.py MODE OUTDIR
MODE restart: rank 1 exits with code 3 in the first attempt; a later attempt succeeds.
MODE fail:    rank 1 exits with code 7 every time.
MODE legacy:  records sys.argv (torch.distributed.launch passes --local-rank unless --use-env).
Each attempt records the environment torchrun gave it, then joins the process group through env://.
"""
import datetime
import json
import os
import sys

TIMEOUT = datetime.timedelta(seconds=30)   # turns a stale-address connect into an error, not a hang
WATCHDOG_S = 40                            # ... and this bounds the hangs that ignore it

KEYS = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "ROLE_RANK", "ROLE_NAME",
        "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS",
        "TORCHELASTIC_RUN_ID", "OMP_NUM_THREADS", "TORCH_NCCL_ASYNC_ERROR_HANDLING", "TORCHELASTIC_ERROR_FILE"]


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--local")]   # legacy launch adds --local-rank=N
    mode, outdir = args[0], args[1]
    env = {k: os.environ.get(k) for k in KEYS}
    rank, attempt = env["RANK"], env["TORCHELASTIC_RESTART_COUNT"]
    with open(os.path.join(outdir, f"{mode}.started{attempt}.rank{rank}.json"), "w") as f:
        json.dump({"env": env, "pid": os.getpid()}, f)       # written before joining the group
    import threading

    import torch
    import torch.distributed as dist

    def watchdog():                                      # a hang in joining the group becomes exit code 5
        with open(os.path.join(outdir, f"{mode}.hung{attempt}.rank{rank}.json"), "w") as f:
            json.dump({"hung_after_s": WATCHDOG_S}, f)
        os._exit(5)
    timer = threading.Timer(WATCHDOG_S, watchdog)
    timer.daemon = True
    timer.start()
    if mode == "restart_prefixed":
        # one store namespace per attempt: the agent hosts the TCPStore, workers are clients
        store = dist.TCPStore(env["MASTER_ADDR"], int(env["MASTER_PORT"]), int(env["WORLD_SIZE"]), is_master=False)
        dist.init_process_group("gloo", store=dist.PrefixStore(f"attempt{attempt}", store),
                                rank=int(rank), world_size=int(env["WORLD_SIZE"]), timeout=TIMEOUT)
    else:
        dist.init_process_group("gloo", timeout=TIMEOUT)   # env:// from torchrun's variables
    t = torch.ones(1)
    dist.all_reduce(t)
    record = {"env": env, "argv": sys.argv[1:], "all_reduce": t.item(), "pid": os.getpid()}
    with open(os.path.join(outdir, f"{mode}.attempt{attempt}.rank{rank}.json"), "w") as f:
        json.dump(record, f)
    dist.barrier()
    dist.destroy_process_group()
    timer.cancel()
    if rank == "1" and (mode == "fail" or (mode.startswith("restart") and attempt == "0")):
        sys.exit(7 if mode == "fail" else 3)


if __name__ == "__main__":
    main()

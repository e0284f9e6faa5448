"""One rank of a 2-rank gloo all_to_all_single whose split sizes disagree across ranks.

usage: python _a2a_mismatch_worker.py RANK STORE_FILE MODE   (MODE: expects_more | expects_less | agree)
Rank 0 sends S elements to rank 1 and rank 1 expects E from rank 0: expects_more S=1 E=2, expects_less
S=2 E=1, agree S=E=1. Every other pair agrees on 1 element. Prints one JSON line: what the call
returned (the output list, -7.0 marks an element nothing wrote) or raised. A gloo abort kills the
process (SIGABRT) before it prints.
"""
import datetime
import json
import sys

import torch
import torch.distributed as dist

rank, store_file, mode = int(sys.argv[1]), sys.argv[2], sys.argv[3]
dist.init_process_group("gloo", init_method=f"file://{store_file}", rank=rank, world_size=2,
                        timeout=datetime.timedelta(seconds=20))
s01 = {"expects_more": 1, "expects_less": 2, "agree": 1}[mode]
e10 = {"expects_more": 2, "expects_less": 1, "agree": 1}[mode]
send = [[1, s01], [1, 1]][rank]
recv = [[1, 1], [e10, 1]][rank]
inp = torch.arange(sum(send), dtype=torch.float32) + 100 * rank + 1
out = torch.full((sum(recv),), -7.0)
try:
    dist.all_to_all_single(out, inp, recv, send)
    res = {"returned": out.tolist()}
except Exception as e:  # noqa: BLE001 - the error is the recorded result
    res = {"raised": type(e).__name__, "msg": str(e).splitlines()[0][:300]}
print(json.dumps(res), flush=True)
dist.destroy_process_group()

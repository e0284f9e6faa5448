"""`srun --ntasks-per-node=K torchrun --nnodes=2 ...`: K torchrun agents per node, but the c10d
rendezvous admits only --nnodes of them (sub-skills/torch-distributed/references/torchrun-multinode-slurm.md,
"srun with several tasks per node, each running torchrun").

Three real torchrun agents (torch 2.13.0, CPU) start together on this one host, as srun would start
three tasks on one node, each with --nnodes=2 --nproc-per-node=2 --rdzv-backend=c10d and the
SLURM-style RANK=99 LOCAL_RANK=7 WORLD_SIZE=16 exported. Workers only record their environment.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

_TESTS = str(Path(__file__).resolve().parents[1])
if _TESTS not in sys.path:
    sys.path.append(_TESTS)
import _ports  # noqa: E402

HERE = Path(__file__).resolve().parent
DOC = HERE.parents[1] / "sub-skills" / "torch-distributed" / "references" / "torchrun-multinode-slurm.md"


def _run_three_agents(tmp_path):
    port = _ports.free_port()
    env = dict(os.environ, RANK="99", LOCAL_RANK="7", WORLD_SIZE="16", OMP_NUM_THREADS="1",
               PYTHONDONTWRITEBYTECODE="1")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes=2", "--nproc-per-node=2",
           "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}", "--rdzv-id=job",
           "--rdzv-conf=join_timeout=20,read_timeout=10", "--max-restarts=0", "--monitor-interval=0.1",
           str(HERE / "_srun_agents_worker.py"), str(tmp_path)]
    agents = [subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
              for _ in range(3)]
    deadline, settled = time.monotonic() + 60, None
    try:
        while time.monotonic() < deadline:           # four workers written, then 2 s more for any late one
            if len(list(tmp_path.glob("agent*.json"))) >= 4:
                settled = settled or time.monotonic()
                if time.monotonic() - settled > 2:
                    break
            time.sleep(0.2)
    finally:
        for p in agents:                     # the parked agent may still wait; end it by its own pid
            if p.poll() is None:
                p.kill()
            p.communicate(timeout=30)
    by_agent: dict[int, list[dict]] = {}
    for f in tmp_path.glob("agent*.json"):
        by_agent.setdefault(int(f.name[5:].split(".")[0]), []).append(json.loads(f.read_text()))
    return {p.pid for p in agents}, by_agent


def test_only_nnodes_agents_get_workers_and_ranks_are_torchruns(tmp_path):
    pids, by_agent = _run_three_agents(tmp_path)
    assert len(by_agent) == 2 and set(by_agent) <= pids          # a third agent on the same host got no workers
    rows = sorted((int(e["GROUP_RANK"]), int(e["LOCAL_RANK"]), int(e["RANK"]), int(e["WORLD_SIZE"]))
                  for ws in by_agent.values() for e in ws)
    # RANK = GROUP_RANK * nproc + LOCAL_RANK; the exported RANK=99 LOCAL_RANK=7 WORLD_SIZE=16 are gone
    assert rows == [(0, 0, 0, 4), (0, 1, 1, 4), (1, 0, 2, 4), (1, 1, 3, 4)]
    # both admitted agents run on one host, so their workers repeat LOCAL_RANK 0,1 (same GPUs under CUDA)
    for ws in by_agent.values():
        assert sorted(int(e["LOCAL_RANK"]) for e in ws) == [0, 1]


def test_reference_states_what_the_run_shows():
    text = " ".join(DOC.read_text(encoding="utf-8").split())
    for phrase in ["srun with several tasks per node, each running torchrun",
                   "`RANK` = `GROUP_RANK` × `--nproc-per-node` + `LOCAL_RANK`",
                   "redundancy list", "**(run: three agents on one host"]:
        assert phrase in text, phrase

"""Test side of _rank_main.py: run one named job of a multi-job script (JOB job world outdir) in a
subprocess and return each rank's `ok` result. Shared by the FSDP1 NO_SHARD test modules."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def run_rank_job(script: Path, job: str, world: int, outdir: Path) -> list:
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore", CUDA_VISIBLE_DEVICES="")
    log = ""
    for _ in range(2):   # one retry: a loaded machine occasionally refuses gloo's loopback connect
        for p in outdir.glob(f"{job}.w{world}.*"):
            p.unlink()   # results and the FileStore of an earlier attempt: a stale store file misleads the rendezvous
        p = subprocess.run([sys.executable, str(script), job, str(world), str(outdir)], env=env,
                           capture_output=True, text=True, timeout=280)
        log += p.stdout + p.stderr
        files = [outdir / f"{job}.w{world}.rank{r}.json" for r in range(world)]
        if all(f.exists() for f in files):
            break
    ranks = [json.loads(f.read_text()) for f in files if f.exists()]
    assert len(ranks) == world, log[-4000:]
    for r in ranks:
        assert "ok" in r, r
    return [r["ok"] for r in ranks]

"""Run a multi-rank job script and read what each rank wrote (OUTDIR/rank<N>.json).

The job scripts here start their own ranks (torch.multiprocessing, gloo, a FileStore in OUTDIR) and end
each rank with os._exit after writing its JSON; a rank that wrote nothing fails the calling test with the
job's output.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def run_rank_job(job: Path, outdir: Path, world: int, timeout: int = 180) -> list:
    """Run `python JOB OUTDIR` on CPU and return the ranks' JSON results in rank order."""
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore", CUDA_VISIBLE_DEVICES="")
    p = subprocess.run([sys.executable, str(job), str(outdir)], env=env, capture_output=True, text=True,
                       timeout=timeout)
    out = [json.loads((outdir / f"rank{r}.json").read_text()) for r in range(world)
           if (outdir / f"rank{r}.json").exists()]
    assert len(out) == world, p.stdout[-2000:] + p.stderr[-4000:]
    return out


def ok(res):
    """The value a job's cap() recorded for one call; fails the test with the recorded error otherwise."""
    assert "ok" in res, res
    return res["ok"]

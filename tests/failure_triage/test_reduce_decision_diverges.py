"""hangs-and-timeouts.md 'Patterns that hang', the dist.reduce row (set 21, s21-K1-04): a save-on-best decision
taken from a `dist.reduce` result sends the two gloo ranks down different paths; the rank that saves waits in
an all_gather the other never calls until the 3 s group timeout, while the all_reduce decision agrees on every
rank. Two child processes meeting through a FileStore; about 6 s."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

JOB = Path(__file__).resolve().parent / "_reduce_decision_job.py"


def test_reduce_decision_diverges_and_all_reduce_agrees(tmp_path):
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", OMP_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1")
    procs = [subprocess.Popen([sys.executable, str(JOB), str(tmp_path), str(r)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for r in range(2)]
    outs = []
    try:
        for p in procs:
            outs.append(p.communicate(timeout=90)[0])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)
    assert [p.returncode for p in procs] == [0, 0], "\n".join(o[-2000:] for o in outs)
    r0, r1 = (json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2))
    assert r0["all_reduce_save"] is True and r1["all_reduce_save"] is True
    assert r0["reduce_value"] == 11.0 and r0["reduce_save"] is True
    assert r1["reduce_save"] is False and r1["branch"] == "skipped the save"
    assert r0["branch"].startswith("RuntimeError") and "Timed out" in r0["branch"], r0

"""tests/jobspec: the validator's --job-spec mode (SLURM batch scripts, Kubeflow manifests)."""
from __future__ import annotations

import sys
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[2] / "sub-skills" / "distributed-training-backends" / "scripts"
if str(SCRIPTS) not in sys.path:
    sys.path.insert(0, str(SCRIPTS))
HERE = Path(__file__).resolve().parent  # for _procs (shared launcher helpers); --import-mode=importlib adds nothing
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

"""Shared set-up of the single-process probes (_single_probe.py and the modules it imports):
the environment cleaned before accelerate is imported, transformers hidden, and the `case` recorder."""
from __future__ import annotations

import json
import os
import sys
import traceback
import warnings
from pathlib import Path

WORK = Path(sys.argv[1])
for k in [k for k in os.environ if k.startswith(("ACCELERATE_", "FSDP_", "PARALLELISM_CONFIG_"))]:
    del os.environ[k]
os.environ["HF_HOME"] = str(WORK / "hf")
os.environ.setdefault("DS_ACCELERATOR", "cpu")
# transformers 5.25.0 is installed (requirements-test.txt): hide it before anything imports it, so
# the cases show Accelerate without transformers, then with the stand-in (stub_transformers).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _transformers_stub import hidden, hide  # noqa: E402

hide()

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

from accelerate import Accelerator, DeepSpeedPlugin, FullyShardedDataParallelPlugin  # noqa: E402
from accelerate.state import AcceleratorState, GradientState  # noqa: E402
from accelerate.utils import (  # noqa: E402
    AutocastKwargs, GradientAccumulationPlugin, ProjectConfiguration, TorchDynamoPlugin, set_seed,
)

out: dict = {}


def reset():
    AcceleratorState._reset_state(reset_partial_state=True)
    GradientState._reset_state()


def err(exc):
    return f"{type(exc).__name__}: {exc}"[:400]


def case(name):
    def deco(fn):
        reset()
        try:
            out[name] = fn()
        except Exception as exc:  # recorded; the test names the case
            out[name] = {"probe_error": err(exc), "trace": traceback.format_exc()[-1200:]}
        finally:
            for k in [k for k in os.environ if k.startswith(("ACCELERATE_", "FSDP_", "PARALLELISM_CONFIG_"))]:
                del os.environ[k]
        return fn
    return deco


def raises(fn):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fn()
        return "accepted"
    except Exception as exc:
        return err(exc)

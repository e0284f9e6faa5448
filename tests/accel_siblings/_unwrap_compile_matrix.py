"""Generator for the "unwrap_model and compiled submodules" table of
sub-skills/checkpointing-and-tracking/references/compiled-models.md (accelerate 1.15.0, torch 2.13.0; set 7, s7-acb-06).

One child process (this file with `probe`), CPU, one process, no forward pass (torch.compile wraps lazily, so
backend="eager" costs nothing): a model `Net` with children `enc` and `head` (Linear layers) compiled in four
places, prepared by `Accelerator(cpu=True)` (one CPU process: no DDP wrapper; the DDP
columns are not run here) and passed to `accelerator.unwrap_model` with keep_torch_compile True and False. Recorded per cell: the returned
type, the type of `enc`, and the state_dict key prefixes; plus whether accelerate's `has_compiled_regions` is
True and whether `"_orig_mod"` is in the top-level `__dict__` (the guard of PR 3881).

usage: python tests/accel_siblings/_unwrap_compile_matrix.py render | write | capture | probe
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import _generated_blocks as gb  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CAPTURE = HERE / "unwrap_compile_capture.json"
REF = ROOT / "sub-skills" / "checkpointing-and-tracking" / "references" / "compiled-models.md"
PLACES = ["nothing compiled", "top level: torch.compile(model)", "submodule: model.enc = torch.compile(model.enc)",
          "submodule in place: model.enc.compile()", "both: compiled submodule, then torch.compile(model)",
          "accelerate compile_regions(model) (Net has no repeated block: the whole model is wrapped)"]


def probe() -> dict:
    import torch
    from torch import nn
    import accelerate
    from accelerate import Accelerator
    from accelerate.utils import compile_regions
    from accelerate.utils.other import has_compiled_regions

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = nn.Linear(2, 2)
            self.head = nn.Linear(2, 1)

    def build(place):
        m = Net()
        if place == PLACES[1]:
            m = torch.compile(m, backend="eager")
        elif place == PLACES[2]:
            m.enc = torch.compile(m.enc, backend="eager")
        elif place == PLACES[3]:
            m.enc.compile(backend="eager")
        elif place == PLACES[4]:
            m.enc = torch.compile(m.enc, backend="eager")
            m = torch.compile(m, backend="eager")
        elif place == PLACES[5]:
            m = compile_regions(m, backend="eager")
        return m

    def tname(o):
        return type(o).__name__

    def prefixes(m):
        return sorted({k.rsplit(".", 1)[0] + "." for k in m.state_dict()})

    acc = Accelerator(cpu=True)
    out = {"versions": {"accelerate": accelerate.__version__, "torch": torch.__version__.split("+")[0]}, "cells": {}}
    for place in PLACES:
        m = acc.prepare(build(place))
        row = {"prepared": tname(m), "has_compiled_regions": has_compiled_regions(m),
               "orig_mod_in_dict": "_orig_mod" in m.__dict__}
        for keep in (True, False):
            try:
                u = acc.unwrap_model(m, keep_torch_compile=keep)
                inner = getattr(u, "_orig_mod", u)
                row[f"keep_torch_compile={keep}"] = {"type": tname(u), "enc": tname(inner.enc if hasattr(inner, "enc") else u.enc),
                                                     "keys": prefixes(u)}
            except Exception as e:  # noqa: BLE001 (recorded)
                row[f"keep_torch_compile={keep}"] = {"error": f"{type(e).__name__}: {e}"}
        out["cells"][place] = row
    return out


def run_probe() -> dict:
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", ACCELERATE_USE_CPU="1")
    proc = subprocess.run([sys.executable, __file__, "probe"], capture_output=True, text=True, timeout=120,
                          env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


if __name__ == "__main__" and sys.argv[1:2] == ["probe"]:
    print(json.dumps(probe(), sort_keys=True))


def cell(r):
    if "error" in r:
        return r["error"]
    keys = ", ".join(f"`{k}`" for k in r["keys"])
    return f"`{r['type']}`; `enc` is `{r['enc']}`; keys {keys}"


def render(data) -> dict:
    lines = ["| How it was compiled | `has_compiled_regions` / `\"_orig_mod\" in model.__dict__` | `unwrap_model(model)` (keep_torch_compile=True, the default) | `unwrap_model(model, keep_torch_compile=False)` |",
             "| --- | --- | --- | --- |"]
    for place in PLACES:
        r = data["cells"][place]
        lines.append(f"| {place} | {r['has_compiled_regions']} / {r['orig_mod_in_dict']} | "
                     f"{cell(r['keep_torch_compile=True'])} | {cell(r['keep_torch_compile=False'])} |")
    return {"unwrap compile placement": "\n".join(lines) + "\n"}


def load_capture():
    return gb.load_json(CAPTURE)


if __name__ == "__main__" and sys.argv[1:2] != ["probe"]:
    gb.cli(sys.argv[1] if len(sys.argv) > 1 else "", page=REF, capture=CAPTURE, collect=run_probe, render=render,
           usage=__doc__)

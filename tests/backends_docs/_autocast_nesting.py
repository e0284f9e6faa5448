"""Generator for the "outer torch.autocast around the engine" table of
sub-skills/distributed-training-backends/references/mixed-precision-sources.md (deepspeed 0.19.8,
torch 2.13.0; set 12, s12-fd-a05: "torch.autocast is enabled outside DeepSpeed, but not in the DeepSpeed config").

One child process (this file with `probe`), DS_ACCELERATOR=cpu, one gloo rank, ZeRO-3, a Linear(4, 4) model.
For each DeepSpeed config (the `torch_autocast` section absent, disabled, enabled with a dtype, enabled without
one; a `bf16` block without the section) the engine is called once without and once inside an outer
`torch.autocast("cpu", dtype=torch.float16)`. Recorded per call: whether it raised, the autocast state and
dtype seen inside the module's forward, the output dtype, and the DeepSpeed log line about nested autocast.

Stand-in: `autocast_if_enabled` calls `torch.is_autocast_enabled()` without a device, which on torch 2.13.0
reports the CUDA autocast state; on this CPU host the probe points that call at the CPU state, the same
thing the engine sees on a GPU host where the user's autocast is `device_type="cuda"`.
`_WARNED_NESTED_AUTOCAST` is reset before each config so every row shows its message; a second nested call
in the same process is recorded too (the message is logged once per process).

usage: python tests/backends_docs/_autocast_nesting.py render | write | capture | probe | --check
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import _generated_blocks as gb  # noqa: E402
import _ports  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CAPTURE = HERE / "autocast_nesting_capture.json"
REF = ROOT / "sub-skills" / "distributed-training-backends" / "references" / "mixed-precision-sources.md"
CONFIGS = {
    "no `torch_autocast` section": {},
    '`"torch_autocast": {"enabled": false}`': {"torch_autocast": {"enabled": False}},
    '`"torch_autocast": {"enabled": true, "dtype": "bfloat16"}`': {"torch_autocast": {"enabled": True, "dtype": "bfloat16"}},
    '`"torch_autocast": {"enabled": true}` (no dtype)': {"torch_autocast": {"enabled": True}},
    '`"bf16": {"enabled": true}`, no `torch_autocast`': {"bf16": {"enabled": True}},
}


def probe() -> dict:
    import importlib
    import logging

    import torch
    importlib.import_module("deepspeed.comm.torch").build_shm_op = lambda: None
    import deepspeed
    import deepspeed.runtime.torch_autocast as ta
    from deepspeed.utils import logger

    orig = torch.is_autocast_enabled
    torch.is_autocast_enabled = lambda *a: orig("cpu") if not a else orig(*a)  # stand-in, see the docstring

    logged = []

    class Keep(logging.Handler):
        def emit(self, record):
            if "autocast" in record.getMessage():
                logged.append(f"{record.levelname}: {record.getMessage()}")

    logger.addHandler(Keep())
    logger.setLevel(logging.INFO)  # the enabled-section message is logged at INFO

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, x):
            seen.append((orig("cpu"), str(torch.get_autocast_dtype("cpu")).replace("torch.", "")))
            return self.lin(x)

    out = {"versions": {"deepspeed": deepspeed.__version__, "torch": torch.__version__.split("+")[0]}, "rows": {}}
    for label, extra in CONFIGS.items():
        row = {}
        cfg = {"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3},
               "optimizer": {"type": "AdamW", "params": {"lr": 0.1, "torch_adam": True}}, **extra}
        try:
            model = M()
            eng, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=cfg)
        except Exception as e:  # noqa: BLE001 (recorded)
            out["rows"][label] = {"init_error": f"{type(e).__name__}: {str(e)[:120]}"}
            continue
        ta._WARNED_NESTED_AUTOCAST = False
        x = torch.randn(1, 4)
        for name in ("plain", "outer", "outer again"):
            seen, logged[:] = [], []
            try:
                xin = x.to(next(eng.module.parameters()).dtype)  # the input in the engine's parameter dtype
                if name == "plain":
                    y = eng(xin)
                else:
                    with torch.autocast(device_type="cpu", dtype=torch.float16):
                        y = eng(xin)
                row[name] = {"inside": f"autocast {'on, ' + seen[0][1] if seen[0][0] else 'off'}",
                             "out": str(y.dtype).replace("torch.", ""), "log": logged[0] if logged else "-"}
            except Exception as e:  # noqa: BLE001 (recorded)
                row[name] = {"error": f"{type(e).__name__}: {str(e)[:120]}"}
        out["rows"][label] = row
        if not extra:                       # the same engine, the stand-in removed: a real CPU autocast outside
            torch.is_autocast_enabled = orig
            ta._WARNED_NESTED_AUTOCAST = False
            seen, logged[:] = [], []
            with torch.autocast(device_type="cpu", dtype=torch.float16):
                y = eng(x.to(next(eng.module.parameters()).dtype))
            out["cpu_outer_as_is"] = {"inside": f"autocast {'on, ' + seen[0][1] if seen[0][0] else 'off'}",
                                      "out": str(y.dtype).replace("torch.", ""), "log": logged[0] if logged else "-"}
            torch.is_autocast_enabled = lambda *a: orig("cpu") if not a else orig(*a)
    return out


def run_probe() -> dict:
    port = _ports.free_port()
    env = gb.child_env(ROOT, DS_ACCELERATOR="cpu", CUDA_VISIBLE_DEVICES="", RANK="0", LOCAL_RANK="0",
                       WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                       TORCH_EXTENSIONS_DIR=str(ROOT / ".torch_ext"))
    proc = subprocess.run([sys.executable, __file__, "probe"], capture_output=True, text=True, timeout=180,
                          env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


if __name__ == "__main__" and sys.argv[1:2] == ["probe"]:
    print(json.dumps(probe(), sort_keys=True), flush=True)
    os._exit(0)


def _cell(c: dict) -> str:
    if "error" in c:
        return c["error"].replace("|", "\\|")
    return f"{c['inside']}; output {c['out']}"


def _log(c: dict) -> str:
    if "error" in c or c["log"] == "-":
        return "-"
    level, _, msg = c["log"].partition(": ")
    return f"{level}: \"{msg.split('. ')[0]}.\""


def render(data) -> dict:
    lines = ["| DeepSpeed config | engine call alone | inside an outer fp16 autocast (CUDA's, stood in for on CPU) | logged (first nested call only) |",
             "| --- | --- | --- | --- |"]
    for label in CONFIGS:
        r = data["rows"][label]
        if "init_error" in r:
            lines.append(f"| {label} | {r['init_error']} | - | - |")
            continue
        lines.append(f"| {label} | {_cell(r['plain'])} | {_cell(r['outer'])} | {_log(r['outer'])} |")
    c = data["cpu_outer_as_is"]
    first = next(iter(CONFIGS))
    lines.append(f"| {first}, the outer autocast on **CPU** (not seen by the check) | {_cell(data['rows'][first]['plain'])} | "
                 f"{_cell(c)} | {_log(c)} |")
    return {"autocast nesting": "\n".join(lines) + "\n"}


def load_capture():
    return gb.load_json(CAPTURE)


if __name__ == "__main__" and sys.argv[1:2] != ["probe"]:
    gb.cli(sys.argv[1] if len(sys.argv) > 1 else "", page=REF, capture=CAPTURE, collect=run_probe, render=render,
           usage=__doc__)

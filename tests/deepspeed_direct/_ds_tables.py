"""Generator for three small tables read from deepspeed 0.19.8 itself (torch 2.13.0, accelerate 1.15.0,
transformers 5.25.0, DS_ACCELERATOR=cpu):

- `ds removed keys` (deepspeed-defaults-history.md): every config key 0.19.8 removed, each put into a real
  `DeepSpeedConfig` (disabled: `{"enabled": false}`) and the exception it raised;
- `pg timeouts` (failure-triage hangs-and-timeouts.md): the process-group timeout each layer passes when the
  user passes none, read from the imported modules with DEEPSPEED_TIMEOUT unset and set to 45;
- `ds optimizer defaults` (deepspeed-optimizer-classes.md): the constructor defaults of DeepSpeed's optimizer
  classes and of torch's Adam/AdamW, from `inspect.signature` of the installed classes (import only: no op is
  built);
- `autotp zero` (deepspeed-autotp.md): a tiny Llama through deepspeed.initialize with
  `tensor_parallel.autotp_size` 2 and each ZeRO stage, one training step, on 2 gloo ranks (_autotp_probe.py,
  about 7 s).

The probe runs in a child process per environment; the raw results are committed in ds_tables_capture.json and
render() turns them into the pages' generated blocks (test_ds_tables.py compares them word for word).

usage: python tests/deepspeed_direct/_ds_tables.py capture    rerun the probes, rewrite the capture (~10 s)
       python tests/deepspeed_direct/_ds_tables.py render     print the blocks from the capture
       python tests/deepspeed_direct/_ds_tables.py write      rewrite the pages' blocks from the capture
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CAPTURE = HERE / "ds_tables_capture.json"
DTB = ROOT / "sub-skills" / "distributed-training-backends" / "references"
PAGES = {
    "ds removed keys": DTB / "deepspeed-defaults-history.md",
    "pg timeouts": ROOT / "sub-skills" / "failure-triage" / "references" / "hangs-and-timeouts.md",
    "ds optimizer defaults": DTB / "deepspeed-optimizer-classes.md",
    "autotp zero": DTB / "deepspeed-autotp.md",
}
AUTOTP_PROBE = HERE / "_autotp_probe.py"
# AutoTP with each ZeRO stage, 2 gloo ranks, autotp_size 2; the last case feeds the two ranks different batches
AUTOTP_CASES = [{"id": f"z{st} same batch", "stage": st, "same_batch": True} for st in (0, 1, 2, 3)] + [
    {"id": "z1 train_batch_size micro x dp", "stage": 1, "same_batch": True, "train_batch_size": 2,
     "before_collectives": True},
    {"id": "z3 different batches", "stage": 3, "same_batch": False}]
sys.path.insert(0, str(HERE.parent))
import _generated_blocks as gb  # noqa: E402

# (import path, class) of the optimizer table, in the order shown
OPTIMIZERS = [
    ("deepspeed.ops.adam", "DeepSpeedCPUAdam"),
    ("deepspeed.ops.adam", "FusedAdam"),
    ("deepspeed.ops.lamb", "FusedLamb"),
    ("deepspeed.ops.adagrad", "DeepSpeedCPUAdagrad"),
    ("deepspeed.ops.lion", "DeepSpeedCPULion"),
    ("deepspeed.ops.lion", "FusedLion"),
    ("torch.optim", "Adam"),
    ("torch.optim", "AdamW"),
]
ENVS = {"unset": None, "45": "45"}
# what to use instead of a removed key (bundle advice, not read from deepspeed); keys not named: delete the key
# or pin a release before the removal
INSTEAD = {
    "elasticity": "fixed `train_micro_batch_size_per_gpu` + `gradient_accumulation_steps`; torchrun `--nnodes MIN:MAX` "
                  "([launch-torchrun.md](../../torch-distributed/references/launch-torchrun.md)); other DP size: "
                  "[universal checkpoint](deepspeed-checkpoint-tools.md)",
    "amp": "`fp16` / `bf16` blocks; DALLE-pytorch writes this block on every run: "
           "[what breaks](../../distributed-and-backends/references/distributed-backends.md#break-amp)",
    "curriculum_learning": "`data_efficiency.data_sampling.curriculum_learning`",
    "sparse_gradients": "`torch.nn.Embedding(..., sparse=True)`",
    "zeropp_loco_param": "delete it (ZeRO++ without LoCo)",
}

PROBE = r'''
import importlib, inspect, json, os, sys
out = {}
import deepspeed.runtime.config as dsc
from deepspeed.runtime.config import DeepSpeedConfig
def attempt(cfg):
    try:
        DeepSpeedConfig(cfg)
        return {"raised": None, "message": ""}
    except Exception as e:
        return {"raised": type(e).__name__, "message": str(e)}
rows = []
for key in dsc._REMOVED_TOP_LEVEL_CONFIG_KEYS:
    rows.append(dict(key=key, where="top level", **attempt({"train_batch_size": 1, key: {"enabled": False}})))
for key in dsc._REMOVED_ZERO_CONFIG_KEYS:
    rows.append(dict(key=key, where="zero_optimization", **attempt(
        {"train_batch_size": 1, "zero_optimization": {"stage": 3, key: False}})))
out["removed"] = rows
import contextlib, io
from deepspeed.launcher import runner
flags = {}
for flag in ("--elastic_training", "--enable_elastic_training"):
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            runner.parse_args([flag, "train.py"])
        flags[flag] = "accepted"
    except SystemExit as e:
        flags[flag] = f"SystemExit {e.code}: " + err.getvalue().strip().splitlines()[-1].split(": error: ", 1)[-1]
out["launcher_flags"] = flags
import deepspeed.constants as dc
import deepspeed.comm.comm as dcomm
import torch.distributed as tdist
from accelerate.utils import InitProcessGroupKwargs
from transformers import TrainingArguments
out["timeouts"] = {
    "DEEPSPEED_TIMEOUT": os.environ.get("DEEPSPEED_TIMEOUT"),
    "deepspeed.constants.default_pg_timeout": dc.default_pg_timeout.total_seconds(),
    "deepspeed.init_distributed(timeout=)": inspect.signature(dcomm.init_distributed).parameters["timeout"].default.total_seconds(),
    "torch default_pg_timeout": tdist.constants.default_pg_timeout.total_seconds(),
    "InitProcessGroupKwargs(backend=nccl)": InitProcessGroupKwargs(backend="nccl").timeout.total_seconds(),
    "InitProcessGroupKwargs(backend=gloo)": InitProcessGroupKwargs(backend="gloo").timeout.total_seconds(),
    "TrainingArguments.ddp_timeout": TrainingArguments.__dataclass_fields__["ddp_timeout"].default,
}
opts = []
for mod, name in json.loads(sys.argv[1]):
    cls = getattr(importlib.import_module(mod), name)
    params = [(p.name, repr(p.default)) for p in inspect.signature(cls.__init__).parameters.values()
              if p.default is not inspect.Parameter.empty]
    opts.append({"class": f"{mod}.{name}", "module": cls.__module__, "defaults": params})
out["optimizers"] = opts
import torch
ams = {}
for mod, name in (("deepspeed.ops.adam", "DeepSpeedCPUAdam"), ("deepspeed.ops.adam", "FusedAdam")):
    cls = getattr(importlib.import_module(mod), name)
    try:
        cls([torch.nn.Parameter(torch.zeros(2))], amsgrad=True)
        ams[name] = "accepted"
    except Exception as e:
        ams[name] = f"{type(e).__name__}: {e}"
out["amsgrad"] = ams
print("JSON" + json.dumps(out))
sys.stdout.flush()
os._exit(0)
'''


def run_probe(value, probe=PROBE, timeout=120):
    env = dict(os.environ, DS_ACCELERATOR="cpu", TORCH_EXTENSIONS_DIR=str(ROOT / ".torch_ext"),
               TRANSFORMERS_VERBOSITY="error", PYTHONWARNINGS="ignore")
    env.pop("DEEPSPEED_TIMEOUT", None)
    if value is not None:
        env["DEEPSPEED_TIMEOUT"] = value
    r = subprocess.run([sys.executable, "-c", probe, json.dumps(OPTIMIZERS)], env=env, capture_output=True,
                       text=True, timeout=timeout)
    line = [ln for ln in r.stdout.splitlines() if ln.startswith("JSON")]
    if not line:
        raise RuntimeError(f"probe failed (rc {r.returncode}): {r.stderr[-2000:]}")
    return json.loads(line[-1][4:])


def run_autotp(timeout=300):
    sys.path.insert(0, str(HERE))
    import _ds_matrix as m
    port = m._port()
    procs = [subprocess.Popen([sys.executable, str(AUTOTP_PROBE), json.dumps(AUTOTP_CASES)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=m._env(m.EXT, r, 2, port)) for r in range(2)]
    outs = []
    for p in procs:
        try:
            outs.append(p.communicate(timeout=timeout))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise
    return m._result(*outs[0])


def capture():
    data = {k: run_probe(v) for k, v in ENVS.items()}
    data["autotp"] = run_autotp()
    CAPTURE.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return data


def load_capture():
    return json.loads(CAPTURE.read_text(encoding="utf-8"))


def _short(msg):
    """The message without the trailing issue link (the same link on every row)."""
    msg = msg.split(" See https://", 1)[0].strip()
    return msg.replace("|", "\\|")


def _min(seconds):
    s = float(seconds)
    return f"{int(s)} s ({s / 60:g} min)"


def render(data):
    base = data["unset"]
    lines = ["Run: `DeepSpeedConfig({..., KEY: {\"enabled\": false}})` (a ZeRO key: inside "
             "`zero_optimization`, stage 3), deepspeed 0.19.8. Every removed key is refused on its presence, "
             "whatever its value; each message ends with a link to DeepSpeed issue 8489 (left out here).", "",
             "| key | where | raises | message | use instead |", "|---|---|---|---|---|"]
    for r in base["removed"]:
        lines.append(f"| `{r['key']}` | {r['where']} | `{r['raised']}` | {_short(r['message'])} | "
                     f"{INSTEAD.get(r['key'], 'delete the key (no replacement in 0.19.8)')} |")
    removed = "\n".join(lines) + "\n"

    t0, t45 = base["timeouts"], data["45"]["timeouts"]
    tl = ["Read from the imported modules (torch 2.13.0, deepspeed 0.19.8, accelerate 1.15.0, transformers "
          "5.25.0) in a child process with `DEEPSPEED_TIMEOUT` unset, then set to `45`:", "",
          "| layer, when you pass no timeout | unset | `DEEPSPEED_TIMEOUT=45` |", "|---|---|---|"]
    rows = [
        ("`torch.distributed.init_process_group`, gloo and other non-NCCL (`torch.distributed.constants.default_pg_timeout`)",
         "torch default_pg_timeout"),
        ("`deepspeed.constants.default_pg_timeout` (`DEEPSPEED_TIMEOUT` in **minutes**, read once at import)",
         "deepspeed.constants.default_pg_timeout"),
        ("`deepspeed.init_distributed` / `deepspeed.initialize` (the `timeout` default)",
         "deepspeed.init_distributed(timeout=)"),
        ("Accelerate handler built without `timeout`: `InitProcessGroupKwargs(backend=\"nccl\").timeout` (no handler: Accelerate passes none, torch's default applies)", "InitProcessGroupKwargs(backend=nccl)"),
        ("Accelerate handler built without `timeout`: `InitProcessGroupKwargs(backend=\"gloo\").timeout` (no handler: Accelerate passes none, torch's default applies)", "InitProcessGroupKwargs(backend=gloo)"),
        ("Trainer `TrainingArguments.ddp_timeout` (seconds)", "TrainingArguments.ddp_timeout"),
    ]
    for label, key in rows:
        tl.append(f"| {label} | {_min(t0[key])} | {_min(t45[key])} |")
    timeouts = "\n".join(tl) + "\n"

    ol = ["From `inspect.signature` of the installed classes (deepspeed 0.19.8, torch 2.13.0); keyword "
          "defaults in signature order, `model_params`/`params` has none.", "",
          "| class | defined in | defaults |", "|---|---|---|"]
    for o in base["optimizers"]:
        d = ", ".join(f"`{n}={v}`" for n, v in o["defaults"])
        ol.append(f"| `{o['class']}` | `{o['module']}` | {d} |")
    optim = "\n".join(ol) + "\n"
    al = ["Run: 2 gloo ranks (`DS_ACCELERATOR=cpu`), a tiny Llama (`q_proj` 32 x 32, 2 key-value heads), "
          "`\"tensor_parallel\": {\"autotp_size\": 2}`, a client `torch.optim.AdamW`, one "
          "forward/`engine.backward`/`engine.step`:", "",
          "| case (micro-batch 2, accumulation 1) | `q_proj` after initialize | TP ranks | DP ranks "
          "(`engine.dp_world_size`) | `engine.train_batch_size()` | result |",
          "|---|---|---|---|---|---|"]
    for c in AUTOTP_CASES:
        r = data["autotp"][c["id"]]
        res = (f"step ok, loss finite" if r.get("step") == "ok" and r.get("loss_finite")
               else f"`{r.get('error')}: {r.get('message')}`")
        what = "same batch" if c["same_batch"] else "a different batch per rank"
        if "train_batch_size" in c:
            what += f", `\"train_batch_size\": {c['train_batch_size']}`"
        if "q_proj_type" in r:
            cells = (f"`{r['q_proj_type']}` {r['q_proj_local'][0]} x {r['q_proj_local'][1]} (of "
                     f"{r['full_q_proj'][0]} x {r['full_q_proj'][1]}) | {r['tp_world']} | {r['dp_world']} | "
                     f"{r['train_batch_size']}")
        else:
            cells = "- | - | - | -"
        al.append(f"| ZeRO-{c['stage']}, {what} | {cells} | {res} |")
    autotp = "\n".join(al) + "\n"
    return {"ds removed keys": removed, "pg timeouts": timeouts, "ds optimizer defaults": optim, "autotp zero": autotp}


if __name__ == "__main__":
    cmd = sys.argv[1] if len(sys.argv) > 1 else "render"
    if cmd == "capture":
        gb.write(PAGES, render(capture()))
    elif cmd == "write":
        gb.write(PAGES, render(load_capture()))
    else:
        gb.show(render(load_capture()))

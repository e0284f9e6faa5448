"""Generator for sub-skills/distributed-training-backends/references/accelerate-handoff.md (who initialises
torch.distributed and deepspeed.comm: launcher, user, PartialState, Accelerator, TrainingArguments) and
accelerate-prepare-model.md (what Accelerator.prepare_model does per model state; FSDP1 loading) (accelerate 1.15.0, deepspeed 0.19.8, transformers 5.25.0,
torch 2.13.0; CPU, gloo, DS_ACCELERATOR=cpu).

Each case runs for real in child processes (_handoff_probe.py): two ranks with torchrun's variables, one
without. The raw results are committed in handoff_capture.json; render() turns them into the page's
generated blocks, which test_handoff_matrix.py compares word for word.

usage: python tests/accel_siblings/_handoff_matrix.py capture   rerun every case, rewrite the capture (~2 min)
       python tests/accel_siblings/_handoff_matrix.py render    print the blocks from the capture
       python tests/accel_siblings/_handoff_matrix.py write     rewrite the pages' blocks from the capture
"""
from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE.parent))
import _ports  # noqa: E402  (tests/ is on sys.path)
import _generated_blocks as gb  # noqa: E402

CAPTURE = HERE / "handoff_capture.json"
PROBE = HERE / "_handoff_probe.py"
REFS = ROOT / "sub-skills" / "distributed-training-backends" / "references"
# block name -> the page that holds it (split by topic so a question reads one page)
PAGE = {"handoff-init": REFS / "accelerate-handoff.md",
        "handoff-prepare": REFS / "accelerate-prepare-model.md",
        "handoff-fsdp1": REFS / "accelerate-prepare-model.md"}
EXT = ROOT / ".torch_extensions_handoff"   # private: a stale lock in a shared cache hangs deepspeed

# id: (launcher variables?, ACCELERATE_USE_DEEPSPEED=true?, "pre:constructor", row label)
INIT = {
    "py": (False, False, "none:partial", "`python train.py`, nothing initialised; `PartialState()`"),
    "py ds-env": (False, True, "none:partial", "same, `ACCELERATE_USE_DEEPSPEED=true`"),
    "py targs": (False, False, "none:targs_z3", "`python train.py`; `TrainingArguments(deepspeed=<ZeRO-3 dict>)`"),
    "tr": (True, False, "none:partial", "torchrun, nothing initialised; `PartialState()`"),
    "tr ds-env": (True, True, "none:partial", "torchrun; `ACCELERATE_USE_DEEPSPEED=true`; `PartialState()`"),
    "tr cpu ds-env": (True, True, "none:partial_cpu", "torchrun; `ACCELERATE_USE_DEEPSPEED=true`; `PartialState(cpu=True)`"),
    "tr pg": (True, False, "user_pg:partial", "torchrun; user `init_process_group` first; `PartialState()`"),
    "tr pg ds-env": (True, True, "user_pg:partial", "same, `ACCELERATE_USE_DEEPSPEED=true`"),
    "tr ds": (True, False, "user_ds:partial", "torchrun; user `deepspeed.init_distributed()` first; `PartialState()`"),
    "tr ds ds-env": (True, True, "user_ds:partial", "same, `ACCELERATE_USE_DEEPSPEED=true`"),
    "tr plugin": (True, False, "none:acc_ds", "torchrun; `Accelerator(deepspeed_plugin=DeepSpeedPlugin(zero_stage=3))`"),
    "tr plugin cpu": (True, False, "none:acc_ds_cpu", "same with `cpu=True`"),
    "tr pg plugin": (True, False, "user_pg:acc_ds", "torchrun; user `init_process_group` first; `Accelerator(deepspeed_plugin=...)`"),
    "tr targs": (True, False, "none:targs_z3", "torchrun; `TrainingArguments(deepspeed=<ZeRO-3 dict>)`"),
    "tr pg targs": (True, False, "user_pg:targs_z3", "torchrun (or Ray Train); user `init_process_group` first; `TrainingArguments(deepspeed=<ZeRO-3 dict>)`"),
}
PREPARE = {"single": (1, "1 process (`NO`)"), "multi_cpu": (2, "2 processes, `MULTI_CPU` (DDP)")}
STATE_LABELS = {
    "plain": "plain module on CPU",
    "plain dp=False": "plain module, `device_placement=False`",
    "plain eval": "plain module, `evaluation_mode=True`",
    "meta": "module on `meta` (`init_empty_weights`, `torch.device(\"meta\")`)",
    "meta eval": "module on `meta`, `evaluation_mode=True`",
    "dtensor": "DTensor parameters (`fully_shard` before prepare, as transformers' sharded loading leaves them)",
    "dtensor dp=True": "DTensor parameters, `device_placement=True` forced",
    "dtensor dp=False eval": "DTensor parameters, `device_placement=False, evaluation_mode=True` (the Trainer's call)",
    "device_map2": "`hf_device_map` with 2 entries (`device_map=\"auto\"`)",
    "8bit_cpu": "`is_loaded_in_8bit` + `hf_device_map={\"\": \"cpu\"}`, no multi-backend bitsandbytes",
}


def _port() -> int:
    """A free port, chosen and reserved by tests/_ports.py (outside the ephemeral range)."""
    return _ports.free_port()


def _env(rank: int, world: int, port: int, launcher: bool, ds_env: bool, ext: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACCELERATE_", "FSDP_", "PET_"))}
    for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "CI"):
        env.pop(k, None)
    env.update(PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1", DS_ACCELERATOR="cpu", TORCH_EXTENSIONS_DIR=str(ext),
               HF_HUB_OFFLINE="1", ACCELERATE_DISABLE_RICH="1", PYTHONWARNINGS="ignore")
    if ds_env:
        env["ACCELERATE_USE_DEEPSPEED"] = "true"
    if launcher:
        env.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world), LOCAL_WORLD_SIZE=str(world),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    elif world == 1:   # a world-1 group for fully_shard, no launcher's LOCAL_RANK
        env.update(RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    return env


def run(mode: str, name: str, world: int, launcher: bool, ds_env: bool, work: Path, ext: Path = EXT,
        timeout: int = 180) -> dict:
    out = Path(work) / f"{mode}-{name}".replace(" ", "_")
    out.mkdir(parents=True, exist_ok=True)
    port = _port()
    return gb.run_ranks([sys.executable, str(PROBE), mode, name, str(out)],
                        [_env(r, world, port, launcher, ds_env, ext) for r in range(world)], out, timeout, "crash", 400)


def run_init(case_id: str, work: Path, ext: Path = EXT) -> dict:
    launcher, ds_env, spec, _ = INIT[case_id]
    return run("init", spec, 2 if launcher else 1, launcher, ds_env, work, ext)


def collect() -> dict:
    with tempfile.TemporaryDirectory() as work:
        data = {"init": {cid: run_init(cid, Path(work)) for cid in INIT}}
        data["prepare"] = {s: run("prepare", s, n, s != "single", False, Path(work)) for s, (n, _) in PREPARE.items()}
        data["fsdp1"] = run("fsdp1", "x", 2, True, False, Path(work))
    return data


def _code(msg: str) -> str:
    """A message as a code span that may itself hold backticks; the probe keeps 240 characters."""
    return f"`` {msg}{' …' if len(msg) >= 240 else ''} ``"


def _dt(r: dict) -> str:
    if "error" in r:
        return f"{r['error']}: {_code(r['message'])}"
    dt = r["distributed_type"]
    if dt == "NO" and r["num_processes"] > 1:
        dt = "NO*"
    return f"`{dt}`, {r['num_processes']} process{'es' if r['num_processes'] > 1 else ''}"


def render_init(data: dict) -> str:
    lines = ["| Starting state and constructor | Init calls the constructor made | Accelerate state | "
             "torch.distributed after (backend) | deepspeed.comm initialised after | World size a DeepSpeedConfig "
             "sees then | Batch check of `train_batch_size` (tbs = micro x GA x world) |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for cid, (_, _, _, label) in INIT.items():
        r = data["init"][cid]["rank0"]
        calls = " → ".join(f"`{c}`" for c in r["calls"]) or "none"
        torch_after = f"yes ({r['torch_backend']})" if r["torch_initialized"] else "no"
        check = "passes" if r["ds_config_check"] == "ok" else f"fails: {_code(r['ds_config_check'])}"
        lines.append(f"| {label} | {calls} | {_dt(r)} | {torch_after} | {'yes' if r['ds_initialized'] else 'no'} | "
                     f"{r['ds_config_world_size']} | {r['ds_config_batch']}: {check} |")
    return "\n".join(lines) + "\n"


def _cell(r: dict) -> str:
    if "error" in r:
        moved = "`model.to` ran, then " if r["to_called"] else ""
        return f"{moved}refused: {r['error']}: {_code(r['message'])}"
    moved = "moved (`model.to`)" if r["to_called"] else "not moved"
    return f"{moved}; returns `{r['type']}`, parameters {r['param']}"


def render_prepare(data: dict) -> str:
    heads = [title for _, title in PREPARE.values()]
    lines = ["| Model state, `prepare_model` arguments | " + " | ".join(heads) + " |",
             "| --- | " + " | ".join("---" for _ in heads) + " |"]
    for sid, label in STATE_LABELS.items():
        lines.append(f"| {label} | " + " | ".join(_cell(data["prepare"][s]["rank0"][sid]) for s in PREPARE) + " |")
    return "\n".join(lines) + "\n"


def render_fsdp1(data: dict) -> str:
    lines = ["| torch FSDP1, `param_init_fn=lambda m: m.to_empty(device=cpu, recurse=False)` | rank 1 before | "
             "result on rank 1 |", "| --- | --- | --- |"]
    for key, row in data["fsdp1"]["rank1"].items():
        res = (f"{row['error']}: {_code(row['message'])}" if "error" in row else
               f"materialised on {row['param_after']}; full weights equal rank 0's: "
               f"{'yes' if row['full_weights_are_rank0s'] else 'no'}")
        lines.append(f"| `{key}` | {row['rank_param_before']} | {res} |")
    return "\n".join(lines) + "\n"


def render(data: dict) -> dict:
    return {"handoff-init": render_init(data), "handoff-prepare": render_prepare(data),
            "handoff-fsdp1": render_fsdp1(data)}


def load_capture() -> dict:
    return gb.load_json(CAPTURE)


if __name__ == "__main__":
    gb.cli(sys.argv[1] if len(sys.argv) > 1 else "render", page=PAGE, capture=CAPTURE, collect=collect,
           render=render, usage=__doc__)

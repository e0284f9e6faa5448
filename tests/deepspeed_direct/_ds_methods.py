"""Generator for sub-skills/distributed-training-backends/references/deepspeed-engine-methods.md
(deepspeed 0.19.8, torch 2.13.0, DS_ACCELERATOR=cpu, gloo, one process).

Every case builds a real engine on a 3-layer MLP and calls the public DeepSpeedEngine methods (and the
deepspeed.utils safe_get_full_* helpers) in a fixed order in one child process (_ds_methods_probe.py).
The raw results are committed in ds_methods_capture.json; render() turns them into the page's Markdown
blocks, which test_ds_methods.py compares word for word.

usage: python tests/deepspeed_direct/_ds_methods.py render | write | capture | --check
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _ds_matrix as m  # noqa: E402
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import _generated_blocks as gb  # noqa: E402

HERE = m.HERE
CAPTURE = HERE / "ds_methods_capture.json"
PROBE = HERE / "_ds_methods_probe.py"
PAGE = m.REFS / "deepspeed-engine-methods.md"

OPTS = {"client AdamW": ("client `torch.optim.AdamW`", "none"),
        "Adam": ("config `Adam` (`FusedAdam`)", "none"),
        "Adam cpu": ("config `Adam`, `offload_optimizer` cpu (`DeepSpeedCPUAdam`)", "cpu")}


def _case(stage, prec, opt, **more):
    o = {"Adam cpu": "Adam"}.get(opt, opt)
    c = {"id": f"z{stage}|{prec}|{opt}", "stage": stage, "prec": prec, "opt": o,
         "offload": OPTS.get(opt, ("", "none"))[1]}
    c.update(more)
    return c


GRID = [_case(s, p, o) for s in (0, 1, 2, 3) for o in OPTS for p in ("fp32", "bf16")]
EXTRA = [
    ("bf16, stage 1, `data_types.grad_accum_dtype: fp32` (selects `BF16_Optimizer`)",
     _case(1, "bf16", "Adam", id="bf16 z1 grad_accum fp32", top={"data_types": {"grad_accum_dtype": "fp32"}})),
    ("bf16, stage 1, `grad_accum_dtype: fp32` + `offload_optimizer` cpu",
     _case(1, "bf16", "Adam cpu", id="bf16 z1 grad_accum fp32 offload", top={"data_types": {"grad_accum_dtype": "fp32"}})),
    ("bf16, stage 2, `grad_accum_dtype: fp32`",
     _case(2, "bf16", "Adam", id="bf16 z2 grad_accum fp32", top={"data_types": {"grad_accum_dtype": "fp32"}})),
    ("stage 3, `offload_param` + `offload_optimizer` cpu",
     _case(3, "fp32", "Adam cpu", id="z3 offload_param", zero={"offload_param": {"device": "cpu"}})),
    ("stage 3, no optimizer (`DeepSpeedZeRoOffload`)", _case(3, "fp32", "none", id="z3 no optimizer", offload="none")),
    ("stage 3, `stage3_gather_16bit_weights_on_model_save: true`",
     _case(3, "bf16", "Adam", id="z3 gather16", zero={"stage3_gather_16bit_weights_on_model_save": True})),
]


def cases():
    return GRID + [c for _, c in EXTRA]


def run(cs, work, ext=m.EXT):
    p = subprocess.run([sys.executable, str(PROBE), json.dumps(cs), str(work)], capture_output=True, text=True,
                       timeout=600, env=m._env(ext, 0, 1, m._port()), cwd=work)
    return m._result(p.stdout.replace(str(work), "<dir>"), p.stderr)


def capture():
    work = tempfile.mkdtemp(prefix="ds_methods_")
    try:
        return run(cases(), work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


# ---------------------------------------------------------------------------------------- rendering

def _cell(r, notes, fmt=None):
    if r is None:
        return "–"
    if not r["ok"]:
        return f"**{r['error']}** {notes.ref(r['message'])}"
    return fmt(r["value"]) if fmt else "✓"


def _states(v):
    return "{" + ", ".join(f"`{x}`" for x in v) + "}" if v else "{} (nothing)"


def _reload(v):
    s = "✓" + ("" if not v["left"] else f" (left {v['left']})")
    if "weights_same" in v:
        s += ", weights same" if v["weights_same"] else ", weights **changed**"
    return s


def _save(v):
    if v["returned"] is False:
        return "returns `False`, no file"
    return f"`{', '.join(v['files'])}`"


def _rows():
    for c in GRID:
        s, p, o = c["id"].split("|")
        yield f"| {s[1]} | {p} | {OPTS[o][0]} ", c["id"]
    for what, c in EXTRA:
        yield f"| {what} ", c["id"]


def render(data):
    notes, on = m._Notes("M"), m._Notes("O")
    off = ["| Stage | Precision | Optimizer | `engine.optimizer` | `offload_states()` moved | `include=[optim_states]` "
           "| `reload_states()` | step after reload | `device=nvme` | `device=none` |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    oth = ["| Stage | Precision | Optimizer | `no_sync()` | `set_gradient_accumulation_boundary(False)` | "
           "`get_global_grad_norm()` | `get_lr()` | `safe_get_full_grad` / `safe_get_full_fp32_param` / "
           "`safe_get_full_optimizer_state` | "
           "`save_16bit_model` | `_zero3_consolidated_16bit_state_dict` | `empty_partition_cache` / `destroy` |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for head, cid in _rows():
        r = data[cid]
        if head.count("|") == 2:   # extra rows: one label spanning the three key columns
            head = head + "| | "
        if not r["init"]["ok"]:
            bad = f"initialize: **{r['init']['error']}** {notes.ref(r['init']['message'])}"
            off.append(head + f"| initialize: **{r['init']['error']}** {on.ref(r['init']['message'])} |" + " |" * 6)
            oth.append(head + f"| {bad} |" + " |" * 7)
            continue
        off.append(head + "| " + " | ".join([
            f"`{r['init']['optimizer']}`",
            _cell(r["offload_states()"], on, _states),
            _cell(r["offload_states(include=[optim_states])"], on, _states),
            _cell(r["reload_states()"], on, _reload),
            _cell(r["step after reload"], on),
            _cell(r["offload_states(device=nvme)"], on),
            _cell(r["offload_states(device=none)"], on,
                  lambda v: "returns, moves nothing" + "".join(f", warns {on.ref(w)}" for w in v["warns"]))]) + " |")
        sg = [r["safe_get_full_grad"], r["safe_get_full_fp32_param"], r["safe_get_full_optimizer_state"]]
        sgc = " / ".join(_cell(x, notes, lambda v: "`None`" if v is None else "full shape") for x in sg)
        oth.append(head + "| " + " | ".join([
            _cell(r["no_sync"], notes),
            _cell(r["set_gradient_accumulation_boundary(False)"], notes,
                  lambda v: f"then `is_gradient_accumulation_boundary()` = `{v}`"),
            _cell(r["get_global_grad_norm"], notes, lambda v: f"`{v}`"),
            _cell(r["get_lr"], notes, lambda v: f"`{v}`"),
            sgc,
            _cell(r["save_16bit_model"], notes, _save),
            _cell(r["_zero3_consolidated_16bit_state_dict"], notes, lambda v: f"{len(v)} keys"),
            _cell(r["empty_partition_cache"], notes) + " / " + _cell(r["destroy"], notes)]) + " |")
    return {"offload": "\n".join(off) + "\n" + on.block() + "\n", "methods": "\n".join(oth) + "\n" + notes.block() + "\n"}


def load_capture():
    return gb.load_json(CAPTURE)


if __name__ == "__main__":
    gb.cli(sys.argv[1] if len(sys.argv) > 1 else "", page=PAGE, capture=CAPTURE, collect=capture,
           render=render, usage=__doc__)

"""Generator for sub-skills/checkpointing-and-tracking/references/backend-checkpoints.md and
backend-exports.md: what
Accelerator.save_state writes, what load_state restores, loading at world size 1, and what
save_model / get_state_dict / unwrap_model give, per backend (DDP on 2 ranks, one process, DeepSpeed
ZeRO-2 and ZeRO-3, FSDP1 FULL_STATE_DICT and SHARDED_STATE_DICT, FSDP2), accelerate 1.15.0, torch 2.13.0,
deepspeed 0.19.8; CPU, gloo, DS_ACCELERATOR=cpu.

Each backend runs for real in child processes (_backend_ckpt_probe.py): `save` (2 ranks, 1 for
`single`), `load` (same world size, then every other backend's folder) and `load1` (world size 1). The raw
results are committed in backend_ckpt_capture.json; render() turns them into the page's generated blocks,
which test_backend_ckpt_matrix.py compares word for word.

usage: python tests/accel_siblings/_backend_ckpt_matrix.py capture   rerun every backend (~4 min, 2 cores)
       python tests/accel_siblings/_backend_ckpt_matrix.py render    print the blocks from the capture
       python tests/accel_siblings/_backend_ckpt_matrix.py write     rewrite the page's blocks from the capture
       python tests/accel_siblings/_backend_ckpt_matrix.py --check   rerun and compare with the capture
"""
from __future__ import annotations

import os
import re
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE.parent))
import _ports  # noqa: E402  (tests/ is on sys.path)
import _generated_blocks as gb  # noqa: E402

CAPTURE = HERE / "backend_ckpt_capture.json"
PROBE = HERE / "_backend_ckpt_probe.py"
_REFS = ROOT / "sub-skills" / "checkpointing-and-tracking" / "references"
PAGE = {name: _REFS / ("backend-exports.md" if name in ("backend ckpt exports", "backend ckpt cross") else
                       "backend-checkpoints.md")
        for name in ("backend ckpt optfirst", "backend ckpt files", "backend ckpt restore", "backend ckpt world1",
                     "backend ckpt naming",
                     "backend ckpt exports", "backend ckpt cross")}
EXT = ROOT / ".torch_extensions_backend_ckpt"   # private: a stale lock in a shared cache hangs deepspeed

# backend: (save world size, row label)
BACKENDS = {
    "ddp": (2, "DDP (`MULTI_CPU`), 2 ranks"),
    "single": (1, "one process (`NO`)"),
    "zero2": (2, "DeepSpeed ZeRO-2, 2 ranks"),
    "zero3": (2, "DeepSpeed ZeRO-3 (16-bit gather on), 2 ranks"),
    "fsdp1_full": (2, "FSDP1 `FULL_STATE_DICT`, 2 ranks"),
    "fsdp1_sharded": (2, "FSDP1 `SHARDED_STATE_DICT`, 2 ranks"),
    "fsdp2": (2, "FSDP2 (`SHARDED_STATE_DICT`, its default), 2 ranks"),
}


def _port() -> int:
    """A free port, chosen and reserved by tests/_ports.py (outside the ephemeral range)."""
    return _ports.free_port()


def _env(rank: int, world: int, port: int, launcher: bool) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACCELERATE_", "FSDP_", "PET_"))}
    for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "CI"):
        env.pop(k, None)
    env.update(PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1", DS_ACCELERATOR="cpu", TORCH_EXTENSIONS_DIR=str(EXT),
               HF_HUB_OFFLINE="1", ACCELERATE_DISABLE_RICH="1", PYTHONWARNINGS="ignore")
    if launcher:
        env.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world), LOCAL_WORLD_SIZE=str(world),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    return env


def run(mode: str, backend: str, work: Path, timeout: int = 240) -> dict:
    """One mode of one backend; {"rank<r>": that rank's JSON or {"crash": stderr tail}}."""
    world = 1 if mode.startswith("load1") else BACKENDS[backend.removesuffix("_optfirst")][0]
    # `single` and DDP reloaded at world size 1 run as `python train.py` (no launcher variables), the
    # others keep a world-1 launcher environment (FSDP and DeepSpeed need a process group)
    launcher = backend != "single" and not (mode.startswith("load1") and backend == "ddp")
    port = _port()
    (work / "out").mkdir(parents=True, exist_ok=True)
    got = gb.run_ranks([sys.executable, str(PROBE), mode, backend, str(work)],
                       [_env(r, world, port, launcher) for r in range(world)], work, timeout, "crash", 600)
    for r in range(world):   # the probe writes its JSON under work/out
        f = work / "out" / f"{mode.replace(':', '-')}-{backend}-rank{r}.json"
        if f.exists():
            got[f"rank{r}"] = gb.load_json(f)
    return got


def collect(backends=tuple(BACKENDS)) -> dict:
    with tempfile.TemporaryDirectory() as w:
        work = Path(w)
        data = {"save": {b: run("save", b, work) for b in backends}}
        data["load"] = {b: run("load", b, work) for b in backends}
        for b in (x for x in backends if x.startswith("fsdp")):   # a failed FSDP cross-load may kill the group
            for o in (*BACKENDS, "parent"):
                if o != b:
                    got = run(f"cross:{o}", b, work, timeout=120)
                    for rk, v in got.items():
                        died = "process died: " + (v.get("crash") or v.get("fatal") or "?")[-160:]
                        data["load"][b].setdefault(rk, {}).setdefault("cross", {})[o] = v.get("cross", {}).get(o, died)
        data["load1"] = {b: run("load1", b, work) for b in backends if b != "single"}
        data["load1_noopt"] = {b: run("load1_noopt", b, work) for b in backends if b.startswith("zero")}
        if "fsdp1_sharded" in backends:   # FSDP1 with the optimizer built before prepare (one prepare call)
            data["optfirst"] = {"fsdp1_sharded": run("save", "fsdp1_sharded_optfirst", work)}
            data["load_init"] = {"fsdp1_sharded": run("load_init", "fsdp1_sharded", work)}
    return data


def load_capture() -> dict:
    return gb.load_json(CAPTURE)


def _r(data: dict, mode: str, b: str, rank: int = 0) -> dict:
    return data.get(mode, {}).get(b, {}).get(f"rank{rank}", {})


def _short(msg: str, n: int = 150) -> str:
    msg = msg.replace("|", "/").replace("`", "'")
    for tmp in ("/tmp/",):   # the temporary root differs per run
        while tmp in msg:
            head, rest = msg.split(tmp, 1)
            tail = rest.split("/", 1)[1] if "/" in rest else ""
            msg = head + "<root>/" + tail
    return f"`{msg[:n]}{'…' if len(msg) > n else ''}`"


def _group(names) -> list:
    """Names that differ only in one rank number (0 and 1) shown once, e.g. `random_states_{0,1}.pkl`."""
    pat = re.compile(r"(?<=_)([01])(?=[_.])")
    keys: dict = {}
    for n in sorted(names):
        m = pat.search(n)
        key = (n[:m.start()] + "{r}" + n[m.end():]) if m else n
        keys.setdefault(key, []).append(n)
    out = []
    for key, group in keys.items():
        out.extend([key.replace("{r}", "{0,1}")] if len(group) == 2 else group)
    return sorted(out)


def _files(r: dict) -> str:
    return ", ".join(f"`{f}`" for f in _group(r.get("files", []))) or "-"


def _writes(r: dict) -> set:
    w = r.get("writes") or [[]]
    pre = "checkpoints/checkpoint_2/"
    return {x[len(pre):] for x in w[-1] if x.startswith(pre) and not x.endswith(".tmp")}


def render_files(data: dict) -> str:
    lines = ["| Backend (`distributed_type`) | Files in `checkpoint_2/` (`{0,1}`: one per rank) | Written by rank 1 "
             "(the rest: rank 0) |", "| --- | --- | --- |"]
    for b, (world, label) in BACKENDS.items():
        r0 = _r(data, "save", b)
        if "fatal" in r0 and not r0.get("files"):
            lines.append(f"| {SHORT[b]} (`FSDP`) | fails on CPU (Provenance) | - |")
            continue
        r1 = _writes(_r(data, "save", b, 1)) if world > 1 else set()
        both = r1 & _writes(r0)
        one = ", ".join(f"`{f}`" + (" (both ranks)" if f in both else "") for f in sorted(r1)) or "-"
        lines.append(f"| {SHORT[b]} (`{r0['setup']['distributed_type']}`) | {_files(r0)} | {one} |")
    return "\n".join(lines) + "\n"


def _same(a, b) -> str:
    return "yes" if a == b and a is not None else "**no**"


def _restore_row(data: dict, mode: str, b: str, label: str) -> str:
    s, l = _r(data, "save", b), _r(data, mode, b)
    if "continuation" not in s:
        return f"| {label} | fails on CPU | | | | | | |"
    if l.get("load") != "ok":
        return f"| {label} | raises {_short(l.get('load') or l.get('fatal', '?'), 95)} | | | | | | |"
    sc, lc = s["continuation"], l.get("continuation", {})
    batch = "saved next" if lc.get("next_batch_skip3") == sc["next_batch"] else "**other**"
    return (f"| {label} | ok | {_same(lc.get('weights'), sc['weights'])} | "
            f"{_same(lc.get('weights_after_fixed_step'), sc['weights_after_fixed_step'])} | "
            f"{_same(lc.get('lr'), sc['lr'])} | {_same(lc.get('rand'), sc['rand'])} | "
            f"{'yes' if l.get('counter') == 3 else '**no**'} | {batch} |")


HEAD = ("| Run | `load_state` | Weights | Optimizer | lr | RNG | Registered object | "
        "`skip_first_batches(dl, 3)` |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n")
SHORT = {"ddp": "DDP", "single": "one process", "zero2": "ZeRO-2", "zero3": "ZeRO-3", "fsdp1_full": "FSDP1 full",
         "fsdp1_sharded": "FSDP1 sharded", "fsdp2": "FSDP2"}


def render_restore(data: dict) -> str:
    rows = [_restore_row(data, "load", b, SHORT[b]) for b in BACKENDS]
    rows.append(_restore_row(data, "load_init", "fsdp1_sharded",
                             "FSDP1 sharded, `_init_optim_state(optimizer.optimizer)` before `load_state`"))
    return HEAD + "\n".join(rows) + "\n"


def render_world1(data: dict) -> str:
    rows = [_restore_row(data, "load1", b, f"{SHORT[b]}, 2 -> 1") for b in BACKENDS if b != "single"]
    rows += [_restore_row(data, "load1_noopt", b, f"{SHORT[b]}, 2 -> 1, `load_optimizer_states=False`")
             for b in BACKENDS if b.startswith("zero")]
    return HEAD + "\n".join(rows) + "\n"


def _sd(v) -> str:
    if isinstance(v, dict):
        return f"full, {v['n_keys']} keys"
    return f"`{v}`" if v in ("None", "{}", "OrderedDict()") else _short(str(v), 80)


def render_exports(data: dict) -> str:
    lines = ["| Backend | `unwrap_model(model)`: `emb.weight` | `get_state_dict` rank 0 | rank 1 | "
             "`save_model` files (writer) | keys in `model.safetensors` |", "| --- | --- | --- | --- | --- | --- |"]
    for b, (world, label) in BACKENDS.items():
        r0, r1 = _r(data, "save", b), _r(data, "save", b, 1)
        if "unwrap_param" not in r0:
            lines.append(f"| {SHORT[b]} | fails on CPU | | | | |")
            continue
        params = "; ".join(v if k == "emb.weight" else f"`{k}` {v}" for k, v in r0["unwrap_param"].items()
                           if k in ("emb.weight", "_flat_param"))
        writers = "rank 0" if r0.get("save_model_writes") and not r1.get("save_model_writes") else (
            "both ranks" if r1.get("save_model_writes") else "-")
        files = ", ".join(f"`{f}`" for f in r0.get("export_files", [])) or _short(r0.get("save_model", ""), 80)
        keys = ", ".join(f"`{k}`" for k in r0.get("export_keys", {})) or "-"
        g1 = _sd(r1.get("get_state_dict")) if world > 1 else "-"
        g0 = _sd(r0.get('get_state_dict'))
        lines.append(f"| {SHORT[b]} | {params} | {g0} | {g1} | {files} ({writers}) | {keys} |")
    return "\n".join(lines) + "\n"


def render_naming(data: dict) -> str:
    lines = ["| Backend | after saves 1, 2, 3 (`total_limit=2`) | `save_state(\"my_dir\")` wrote `my_dir`? | "
             "`save_iteration` after 3 saves / after `load_state()` | folders after one more save once resumed |",
             "| --- | --- | --- | --- | --- |"]
    rows: dict = {}
    for b, (_, label) in BACKENDS.items():
        s, l = _r(data, "save", b), _r(data, "load", b)
        if not s.get("checkpoints_after_each_save"):
            rows.setdefault("fails on CPU | | | |", []).append(SHORT[b])
            continue
        seq = " → ".join("[" + ", ".join(x) + "]" for x in s["checkpoints_after_each_save"])
        after = ", ".join(l.get("checkpoints_after_save", [])) or "-"
        if l.get("save_after_load", "ok") != "ok":
            after += f" ({_short(l['save_after_load'], 80)})"
        rows.setdefault(f"{seq} | {'yes' if s.get('my_dir_created') else 'no'} | "
                        f"{s.get('save_iteration')} / {l.get('save_iteration')} | {after} |", []).append(SHORT[b])
    for row, names in rows.items():   # identical outcomes share one row
        lines.append(f"| {', '.join(names)} | {row}")
    return "\n".join(lines) + "\n"


def _cross_cell(v) -> str:
    """One cross-load outcome, short: the exception and the file or function it names."""
    if v is None:
        return "not reached"
    if v == "no exception":
        return "loads"
    if "Tried to find" in v:
        return "-"
    if v.startswith("FileNotFoundError"):
        return f"`FileNotFoundError` `{v.rstrip(chr(39)).split('/')[-1]}`"
    if "(in " in v:
        return f"`{v.split(':')[0]}` in `{v.split('::')[-1].rstrip(')')}`"
    return f"`{v.split(':')[0]}`"


def render_cross(data: dict) -> str:
    names = list(BACKENDS)
    lines = ["| Loaded by ↓ / saved by → | " + " | ".join(SHORT[n] for n in names)
             + " | own `checkpoints/` (parent) |",
             "| --- | " + " | ".join("---" for _ in names) + " | --- |"]
    for b in names:
        cross = _r(data, "load", b).get("cross", {})
        cells = ["(own)" if o == b else _cross_cell(cross.get(o)) for o in (*names, "parent")]
        lines.append(f"| {SHORT[b]} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def render_optfirst(data: dict) -> str:
    r = _r(data, "optfirst", "fsdp1_sharded")
    moved = "changed" if r.get("weights_after_1_step") != r.get("weights_initial") else "**did not change**"
    return ("| FSDP1, one `prepare(model, optimizer, ...)` call | weights after one training step | "
            "first `save_state` |\n"
            "| --- | --- | --- |\n"
            f"| optimizer built before `prepare` | {moved} | {_short(r.get('fatal', 'ok'), 60)} |\n")


def render(data: dict) -> dict:
    return {"backend ckpt optfirst": render_optfirst(data), "backend ckpt files": render_files(data),
            "backend ckpt restore": render_restore(data),
            "backend ckpt world1": render_world1(data), "backend ckpt exports": render_exports(data),
            "backend ckpt naming": render_naming(data), "backend ckpt cross": render_cross(data)}


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "one":   # debugging: one backend, printed
        import json
        print(json.dumps(collect(tuple(sys.argv[2:])), indent=1))
        sys.exit(0)
    gb.cli(sys.argv[1] if len(sys.argv) > 1 else "", page=PAGE, capture=CAPTURE, collect=collect, render=render,
           usage=__doc__)

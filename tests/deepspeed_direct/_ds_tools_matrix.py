"""Generator for sub-skills/distributed-training-backends/references/deepspeed-checkpoint-tools.md (universal
checkpoints) and deepspeed-zero-to-fp32.md (zero_to_fp32, save_16bit_model) (deepspeed 0.19.8, torch 2.13.0, DS_ACCELERATOR=cpu, gloo): ds_to_universal per ZeRO stage, universal
loads into each stage and data-parallel size, zero_to_fp32 (in-process and the script's flags) and
save_16bit_model.

Every case runs for real in child processes (_ds_tools_probe.py; 2 gloo ranks save, loads run at 1 and 2
ranks). The raw results are committed in ds_tools_capture.json; render() turns them into the Markdown
blocks, which the test compares with the page word for word.

usage: python tests/deepspeed_direct/_ds_tools_matrix.py render     print the blocks from the capture
       python tests/deepspeed_direct/_ds_tools_matrix.py write      rewrite the pages' blocks from the capture
       python tests/deepspeed_direct/_ds_tools_matrix.py capture    rerun every case, rewrite the capture (~5 min)
       python tests/deepspeed_direct/_ds_tools_matrix.py --check    rerun every case, compare with the capture
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _ds_matrix as M  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import _generated_blocks as gb  # noqa: E402

HERE = Path(__file__).resolve().parent
CAPTURE = HERE / "ds_tools_capture.json"
PROBE = HERE / "_ds_tools_probe.py"
UNIVERSAL_PAGE = M.REFS / "deepspeed-checkpoint-tools.md"
FP32_PAGE = M.REFS / "deepspeed-zero-to-fp32.md"
# block name -> the page that holds it (split by topic so a question reads one page)
PAGE = {"universal convert": UNIVERSAL_PAGE, "universal loads": UNIVERSAL_PAGE, "universal tags": UNIVERSAL_PAGE,
        "zero_to_fp32 memory": FP32_PAGE, "zero_to_fp32 cli": FP32_PAGE, "save_16bit_model": FP32_PAGE}


def _eng(stage, **more):
    return {"stage": stage, "prec": "fp32", "opt": "client AdamW", "sched": True, **more}


GATHER = {"stage3_gather_16bit_weights_on_model_save": True}
# (id, what the row is, case) - saved by 2 processes
SAVES = [
    ("z0", "stage 0, fp32", {"dir": "z0", "save": _eng(0)}),
    ("z1", "stage 1, fp32", {"dir": "z1", "save": _eng(1)}),
    ("z2", "stage 2, fp32", {"dir": "z2", "save": _eng(2)}),
    ("z3", "stage 3, fp32", {"dir": "z3", "save": _eng(3)}),
    ("z3 gather", "stage 3, fp32, `stage3_gather_16bit_weights_on_model_save: true`",
     {"dir": "z3g", "save": _eng(3, zero=GATHER), "checkpoint": False}),
    ("z3 gather bf16", "stage 3, bf16, `stage3_gather_16bit_weights_on_model_save: true`",
     {"dir": "z3gb", "save": _eng(3, prec="bf16", zero=GATHER)}),
    ("z2 bf16", "stage 2, bf16", {"dir": "z2b", "save": _eng(2, prec="bf16")}),
]
CONVERT = ("z0", "z1", "z2", "z3", "z2b", "z3gb")
WHAT = {c["dir"]: w for _, w, c in SAVES}
FP32_SOURCES = ("z1", "z2", "z3", "z2b", "z3gb")
UNI_SOURCES = ("z1", "z2", "z3")
TARGETS = (1, 2, 3)
LOAD_KW = (("defaults", {}), ("load_optimizer_states=False", {"load_optimizer_states": False}))
CLI = [("(none)", []), ("--safe_serialization", ["--safe_serialization"]),
       ("--max_shard_size 100B", ["--max_shard_size", "100B"]),
       ("--safe_serialization --max_shard_size 100B", ["--safe_serialization", "--max_shard_size", "100B"]),
       ("--max_shard_size 0.0001MB", ["--max_shard_size", "0.0001MB"]),
       ("--safe_serialization --max_shard_size 0.0001MB", ["--safe_serialization", "--max_shard_size", "0.0001MB"]),
       ("--exclude_frozen_parameters", ["--exclude_frozen_parameters"]),
       ("-t nosuchtag", ["-t", "nosuchtag"])]


# (id, what the row is, case): load_checkpoint with an explicit tag under load_universal, world size 1
TAG_CASES = [
    ("tag universal", "`load_checkpoint(save_dir, tag=\"global_step2_universal\")`",
     {"dir": "z2", "load": _eng(2), "load_kw": {"tag": "global_step2_universal"}}),
    ("tag unconverted", "`load_checkpoint(save_dir, tag=\"global_step2\")` (the folder before conversion)",
     {"dir": "z2", "load": _eng(2), "load_kw": {"tag": "global_step2"}}),
    ("bf16 z2", "bf16 stage-2 engine loads the universal checkpoint of `z2b` (stage 2, bf16)",
     {"dir": "z2b", "load": _eng(2, prec="bf16")}),
    ("bf16 z3", "bf16 stage-3 engine loads the universal checkpoint of `z3gb` (stage 3, bf16)",
     {"dir": "z3gb", "load": _eng(3, prec="bf16", zero=GATHER)}),
    ("tag accelerate", "converted with `--output_folder other_dir/pytorch_model`, then "
     "`load_checkpoint(other_dir, \"pytorch_model\")` (the call `Accelerator.load_state(other_dir)` makes)",
     {"dir": "z2acc", "load": _eng(2), "load_kw": {"tag": "pytorch_model"}}),
]


def load_cases():
    """{world size: [cases]}: every universal source into every stage, both load options."""
    out = {1: [], 2: []}
    for ws in (1, 2):
        for src in UNI_SOURCES:
            for st in TARGETS:
                for lname, kw in LOAD_KW:
                    out[ws].append({"id": f"{src} -> z{st} ws{ws} {lname}", "dir": src, "load": _eng(st), "load_kw": kw})
    return out


# ---------------------------------------------------------------------------------------- running

def _err(text):
    """The exception line of a child's traceback (last line naming an Error/Exception), else the last line."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    exc = [ln for ln in lines if re.match(r"^[\w.]+(Error|Exception)\b", ln)]
    return (exc or lines or [""])[-1][:300]


def _env(rank, ws):
    return M._env(M.EXT, rank, ws, M._port())


def _run_probe(mode, cases, work, ws, timeout=600):
    if ws == 1:
        p = subprocess.run([sys.executable, str(PROBE), mode, json.dumps(cases), str(work)], capture_output=True,
                           text=True, timeout=timeout, env=_env(0, 1), cwd=work)
        return M._result(p.stdout.replace(str(work), "<dir>"), p.stderr)
    return M._pair(cases, work, timeout, mode=mode, probe=PROBE)


def _convert(work, name, inject):
    d = Path(work) / name
    before = set(M_layout(d))
    args = [sys.executable, "-m", "deepspeed.checkpoint.ds_to_universal", "--input_folder", str(d / "global_step2"),
            "--output_folder", str(d / "global_step2_universal"), "--num_extract_workers", "1",
            "--num_merge_workers", "1"] + (["--inject_missing_state"] if inject else [])
    p = subprocess.run(args, capture_output=True, text=True, timeout=300, env=_env(0, 1), cwd=work)
    new = sorted(set(M_layout(d)) - before)
    lu = d / "latest_universal"
    return {"rc": p.returncode, "error": _err(p.stderr).replace(str(work), "<dir>") if p.returncode else None,
            "new_files": new,
            "latest_universal": lu.read_text().strip() if lu.exists() else None}


def M_layout(d):
    return [str(p.relative_to(d)) for p in sorted(Path(d).rglob("*")) if p.is_file() and "__pycache__" not in str(p)]


def _cli(work, flags):
    d = Path(work) / "z3"
    out = Path(work) / ("fp32out_" + re.sub(r"\W+", "_", " ".join(flags) or "none"))
    p = subprocess.run([sys.executable, str(d / "zero_to_fp32.py"), str(d), str(out)] + flags, capture_output=True,
                       text=True, timeout=300, env=_env(0, 1), cwd=work)
    res = {"rc": p.returncode, "files": M_layout(out) if out.exists() else []}
    if p.returncode:
        res["error"] = _err(p.stderr).replace(str(work), "<dir>")
    idx = [f for f in res["files"] if f.endswith(".index.json")]
    if idx:
        res["weight_map"] = json.loads((out / idx[0]).read_text())["weight_map"]
    return res


def capture():
    work = tempfile.mkdtemp(prefix="ds_tools_")
    try:
        res = {"save": {}, "convert": {}, "load": {}, "fp32": {}, "cli": {}}
        per_rank, hung = _run_probe("save", [dict(c, id=i) for i, _, c in SAVES], work, 2)
        assert not hung and len(per_rank[0]) == len(SAVES), per_rank
        res["save"] = {i: r for (i, _, _), r in zip(SAVES, per_rank[0])}
        for name in CONVERT:
            for inject in (False, True):
                d = Path(work) / name
                shutil.rmtree(d / "global_step2_universal", ignore_errors=True)
                (d / "latest_universal").unlink(missing_ok=True)
                res["convert"][f"{name} inject={inject}"] = _convert(work, name, inject)
        acc = Path(work) / "z2acc"
        acc.mkdir()
        shutil.copy(Path(work) / "z2.weights.pt", Path(work) / "z2acc.weights.pt")
        p = subprocess.run([sys.executable, "-m", "deepspeed.checkpoint.ds_to_universal", "--input_folder",
                            str(Path(work) / "z2" / "global_step2"), "--output_folder", str(acc / "pytorch_model"),
                            "--num_extract_workers", "1", "--num_merge_workers", "1", "--inject_missing_state"],
                           capture_output=True, text=True, timeout=300, env=_env(0, 1), cwd=work)
        assert p.returncode == 0, p.stderr[-2000:]
        cases = load_cases()
        res["load"].update(_run_probe("load", cases[1] + [dict(c, id=i) for i, _, c in TAG_CASES], work, 1))
        for c in cases[2]:   # one pair per case, so that a hang costs one row only
            per_rank, hung = _run_probe("load", [c], work, 2, timeout=120)
            r0 = per_rank[0][0] if per_rank[0] else {"ok": False, "error": "hang", "message": "rank 0 never finished"}
            r1 = per_rank[1][0] if per_rank[1] else {"ok": False, "error": "hang", "message": "rank 1 never finished"}
            res["load"][c["id"]] = dict(r0, rank1_same=(r0 == r1), hung=hung, **({} if r0 == r1 else {"rank1": r1}))
        res["fp32"] = _run_probe("fp32", [{"id": n, "dir": n, "atol": 1e-2 if n in ("z2b", "z3gb") else 0}
                                          for n in FP32_SOURCES], work, 1)
        for label, flags in CLI:
            res["cli"][label] = _cli(work, flags)
        return res
    finally:
        shutil.rmtree(work, ignore_errors=True)


# ---------------------------------------------------------------------------------------- rendering

def _files(fs):
    return "<br>".join(f"`{f}`" for f in fs)


def render_convert(data, notes):
    rows = ["| Checkpoint (2 processes, `global_step2`) | without `--inject_missing_state` | with `--inject_missing_state` |",
            "| --- | --- | --- |"]
    for name in CONVERT:
        cells = []
        for inject in (False, True):
            r = data["convert"][f"{name} inject={inject}"]
            if r["rc"]:
                cells.append(f"exit {r['rc']}: **{r['error'].split(':')[0]}** {notes.ref(r['error'])}")
            else:
                model = [f for f in r["new_files"] if f.endswith("model_states.pt")]
                zero = sorted({f.split("/")[2] for f in r["new_files"] if f.startswith("global_step2_universal/zero/")
                               and f.count("/") >= 3})
                cells.append(f"exit 0; `latest_universal` = `{r['latest_universal']}`; {len(r['new_files'])} files: "
                             + _files(model) + f"<br>`zero/<param>/`: {len(zero)} params, "
                             + ", ".join(f"`{x}`" for x in sorted({f.rsplit('/', 1)[1] for f in r['new_files']
                                                                    if '/zero/' in f and f.count('/') >= 3})))
        rows.append(f"| {name} ({WHAT[name]}) | " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"


def _load_cell(r, notes):
    if not r["ok"]:
        s = f"**{r['error']}** {notes.ref(r['message'])}"
    else:
        s = ("weights ✓" if r["weights_restored"] else "weights **✗**") + f", Adam {r['opt_step']}, " \
            f"sched {r['sched_iter']}, steps {r['global_steps']}"
        if r.get("step_after") != "ok":
            s += f", next step: **{r['step_after'].split(':')[0]}** {notes.ref(r['step_after'])}"
    if r.get("rank1"):
        s = f"rank 0: {s}; rank 1: {_load_cell(dict(r['rank1'], rank1=None), notes)}"
    if r.get("hung"):
        s += " (hangs; killed after 120 s)"
    return s


def render_loads(data, notes):
    rows = ["| Universal checkpoint of | Loaded by | world size 1 (DP size changed) | world size 2 (same DP size) |",
            "| --- | --- | --- | --- |"]
    for src in UNI_SOURCES:
        for st in TARGETS:
            per = [(lname, [_load_cell(data["load"][f"{src} -> z{st} ws{ws} {lname}"], notes) for ws in (1, 2)])
                   for lname, _ in LOAD_KW]
            if all(cells == per[0][1] for _, cells in per):
                # the load options gave the same result: one row, both options named (shorter page)
                per = [(" or ".join(lname for lname, _ in per), per[0][1])]
            for lname, cells in per:
                rows.append(f"| {src} | stage {st}; {lname} | " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"


def render_tags(data, notes):
    rows = ["| World size 1, `load_universal: true` (stage-2 fp32 engine unless named) | Result |", "| --- | --- |"]
    for i, what, _ in TAG_CASES:
        rows.append(f"| {what} | {_load_cell(data['load'][i], notes)} |")
    return "\n".join(rows) + "\n"


def render_fp32(data):
    rows = ["| Checkpoint | fp32 master weights in | Adam moments in the file (key path: entries) | "
            "`parse_optim_states`: `torch.load` with | drops right after each load | Adam moments still held | "
            "optimizer files memory-mapped | eager result | `lazy_mode=True` values |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for n in FP32_SOURCES:
        r = data["fp32"][n]
        fp32 = [k for k in r["file_keys"] if k in ("fp32_flat_groups", "single_partition_of_fp32_groups")]
        same = "= saved weights" if n not in ("z2b", "z3gb") else "= the bf16 weights to 0.01"
        dropped = sorted(set(r["file_keys"]) - set(r["kept_keys"]))
        rows.append(f"| {n} ({WHAT[n].split(', `')[0]}, {r['world_size']} files) | `{fp32[0]}` | "
                    f"{'<br>'.join(f'`{x}`' for x in r['file_adam'])} | {', '.join(f'`{k}`' for k in r['load_kwargs'])} | "
                    f"{', '.join(f'`{k}`' for k in dropped) or 'nothing'} | "
                    f"{'<br>'.join(f'`{x}`' for x in r['kept_adam']) or 'none'} | "
                    f"{r['files_mapped']} of {r['world_size']} | "
                    f"{r['eager']['keys']} `{'`, `'.join(r['eager']['types'])}`, "
                    f"{same if r['eager']['equal'] else 'DIFFERENT'} | "
                    f"`{'`, `'.join(r['lazy']['types'])}`; `to_torch_tensor` "
                    f"{same if r['lazy']['to_torch_tensor_equal'] else 'DIFFERENT'} |")
    return "\n".join(rows) + "\n"


def render_cli(data, notes):
    rows = ["| Flags after `zero_to_fp32.py <ckpt_dir> <output_dir>` | Exit | Files in `<output_dir>` |", "| --- | --- | --- |"]
    for label, _ in CLI:
        r = data["cli"][label]
        cell = _files(r["files"]) or "(none)"
        if r.get("weight_map"):
            cell += f"; index maps {len(r['weight_map'])} tensors to {len(set(r['weight_map'].values()))} files"
        if r["rc"]:
            cell = f"**{r['error'].split(':')[0]}** {notes.ref(r['error'])}"
        rows.append(f"| `{label}` | {r['rc']} | {cell} |")
    return "\n".join(rows) + "\n"


def render_save16(data, notes):
    rows = ["| Engine (2 processes) | `save_16bit_model(dir)` returned | Files in dir | Saved tensors |", "| --- | --- | --- | --- |"]
    for i, what, _ in SAVES:
        r = data["save"][i]["save16"]
        if not r["ok"]:
            rows.append(f"| {what} | **{r['error']}** {notes.ref(r['message'])} | | |")
            continue
        t = (f"{r['keys']} keys, {', '.join(r['dtype'])}, " + ("= trained weights" if r["equal"] else "DIFFERENT")
             if r.get("keys") else "")
        rows.append(f"| {what} | `{r['returned']}` | {_files(r['files']) or '(none)'} | {t} |")
    return "\n".join(rows) + "\n"


def render(data):
    notes = M._Notes("U")
    conv, loads = render_convert(data, notes), render_loads(data, notes)
    tags = render_tags(data, notes)
    notes2 = M._Notes("Z")
    cli, s16 = render_cli(data, notes2), render_save16(data, notes2)
    return {"universal convert": conv, "universal loads": loads, "universal tags": tags + notes.block() + "\n",
            "zero_to_fp32 memory": render_fp32(data), "zero_to_fp32 cli": cli,
            "save_16bit_model": s16 + notes2.block() + "\n"}


def load_capture():
    return json.loads(CAPTURE.read_text(encoding="utf-8"))


if __name__ == "__main__":
    gb.cli(sys.argv[1] if len(sys.argv) > 1 else "", page=PAGE, capture=CAPTURE, collect=capture, render=render,
           usage=__doc__)

"""Generator for sub-skills/training-loop-integration/references/accelerator-methods.md (training step) and its
siblings accelerator-comm-methods.md, accelerator-model-access.md, fsdp2-forward-before-step.md (see PAGE)
(accelerate 1.15.0, torch 2.13.0, deepspeed 0.19.8; CPU, gloo).

Each setup runs _acc_methods_probe.py once per rank (one process, or two real gloo processes started
here with RANK/WORLD_SIZE/MASTER_* set, never more than two at a time) and the raw per-rank results are
committed in acc_methods_capture.json. render() turns them into the pages' Markdown blocks, which
test_acc_methods_matrix.py compares word for word (a single-process and a MULTI_CPU rerun are live).

usage: python tests/accel_siblings/_acc_methods_matrix.py render | write | capture [SETUP ...] | --check
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import _ports  # noqa: E402  (tests/ is on sys.path)
import _generated_blocks as gb  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
PROBE = HERE / "_acc_methods_probe.py"
CAPTURE = HERE / "acc_methods_capture.json"
REFS = ROOT / "sub-skills" / "training-loop-integration" / "references"
# block name -> the page that holds it (split by topic so a question reads one page)
PAGE = {"acc-methods-state": REFS / "accelerator-methods.md",
        "acc-methods-step": REFS / "accelerator-methods.md",
        "acc-methods-comm": REFS / "accelerator-comm-methods.md",
        "acc-methods-objects": REFS / "accelerator-comm-methods.md",
        "acc-methods-model": REFS / "accelerator-model-access.md",
        "acc-methods-fsdp2-root": REFS / "fsdp2-forward-before-step.md"}
EXT = ROOT / ".torch_extensions_acc_methods"   # private: a stale lock in a shared cache hangs deepspeed

SETUPS = {  # name: (processes, column title)
    "single": (1, "1 process (`NO`)"),
    "multi_cpu": (2, "MULTI_CPU (DDP, gloo)"),
    "ds_z2": (2, "DeepSpeed ZeRO-2"),
    "ds_z3": (2, "DeepSpeed ZeRO-3"),
    "fsdp2": (2, "FSDP2 (forced, see note)"),
}
EXTRA = {"torch_fsdp2_layers": 2}   # plain torch fully_shard per layer + root (no Accelerator)


def _port() -> int:
    """A free port, chosen and reserved by tests/_ports.py (outside the ephemeral range)."""
    return _ports.free_port()


def _env(rank: int, world: int, port: int, ext: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACCELERATE_", "FSDP_", "PET_"))}
    env.update(PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1", DS_ACCELERATOR="cpu", TORCH_EXTENSIONS_DIR=str(ext),
               HF_HUB_OFFLINE="1", ACCELERATE_DISABLE_RICH="1", PYTHONWARNINGS="ignore")
    env.pop("CI", None)
    if world > 1:
        env.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world), LOCAL_WORLD_SIZE=str(world),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    else:
        for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
            env.pop(k, None)
    return env


def run_setup(setup: str, work: Path, ext: Path = EXT, timeout: int = 300) -> dict:
    """{"rank0": {...}, "rank1": {...}} for SETUP; a rank that wrote nothing gets its stderr tail."""
    world = SETUPS[setup][0] if setup in SETUPS else EXTRA[setup]
    out = Path(work) / setup
    out.mkdir(parents=True, exist_ok=True)
    port = _port()
    got = gb.run_ranks([sys.executable, str(PROBE), setup, str(out)], [_env(r, world, port, ext) for r in range(world)],
                       out, timeout, "probe_error", 1500)
    return json.loads(json.dumps(got).replace(str(out), "<dir>"))


def capture(only=None) -> dict:
    """All setups, or only those named (the others kept from the committed capture)."""
    work = Path(tempfile.mkdtemp(prefix="acc_methods_"))
    try:
        got = load_capture() if only else {}
        got.update({s: run_setup(s, work) for s in (only or list(SETUPS) + list(EXTRA))})
        return got
    finally:
        shutil.rmtree(work, ignore_errors=True)


def load_capture():
    return gb.load_json(CAPTURE)


# ---------------------------------------------------------------------------------------- rendering
ORDER = ["multi_cpu", "ds_z2", "ds_z3", "fsdp2", "single"]

# (capture key, row label) per block; the label is what the page shows in its first column
COMM_ROWS = [
    ("gather(1-D tensor)", "`gather(t)`, `t` = `[10r, 10r+1]`"),
    ("gather(0-dim tensor)", "`gather(t)`, 0-dim `t` = `1+2r`"),
    ("gather(float)", "`gather(1.0 + r)` (Python float)"),
    ("gather(dict of tensors)", "`gather({\"a\": [r], \"b\": ones(1, 2)})`"),
    ("gather in eval loop", "`gather(batch)` over a prepared loader, 13 samples, batch 2"),
    ("gather_for_metrics in eval loop", "`gather_for_metrics(batch)`, same loop"),
    ("gather_for_metrics(list, use_gather_object=True) in eval loop",
     "`gather_for_metrics(batch.tolist(), use_gather_object=True)`, same loop"),
    ("gather_for_metrics(list of str) outside a loop", "`gather_for_metrics([f\"r{r}\"])` (no flag, outside a loop)"),
    ("gather_for_metrics(tensor) outside a loop", "`gather_for_metrics(tensor([r]))` outside a loop"),
    ("reduce(t)", "`reduce(t)`, `t` = `[1+2r]`"),
    ("reduce(t, 'mean')", "`reduce(t, reduction=\"mean\")`"),
    ("reduce(t, 'max')", "`reduce(t, reduction=\"max\")`"),
    ("reduce(float)", "`reduce(1.0 + r)` (Python float)"),
    ("pad_across_processes(len 2+rank)", "`pad_across_processes(ones(2+r))`"),
    ("pad_across_processes(pad_first=True)", "`pad_across_processes(ones(2+r), pad_first=True, pad_index=-1)`"),
    ("pad_across_processes(bool len 2+rank)", "`pad_across_processes(ones(2+r) > 0)` (bool)"),
    ("utils.broadcast(t, from_process=0)", "`accelerate.utils.broadcast(tensor([r]), from_process=0)`"),
    ("utils.broadcast_object_list([obj])", "`accelerate.utils.broadcast_object_list([f\"from rank {r}\"])`"),
    ("split_between_processes(list of 5)", "`split_between_processes(list(range(5)))`"),
    ("split_between_processes(list of 5, apply_padding=True)", "same, `apply_padding=True`"),
    ("split_between_processes(dict)", "`split_between_processes({\"a\": [0, 1, 2], \"b\": arange(3)})`"),
    ("split_between_processes(list of 1)", "`split_between_processes([\"only\"])`"),
    ("wait_for_everyone", "`wait_for_everyone()`"),
    ("print", "`accelerator.print(\"hello\")`: lines printed"),
    ("is_main_process", "`is_main_process`, `is_local_main_process`, `process_index`"),
    ("set_trigger on rank 1", "`set_trigger()` on rank 1 only"),
    ("check_trigger", "then `check_trigger()` on every rank"),
    ("check_trigger again", "`check_trigger()` once more"),
]
STEP_ROWS = [
    ("prepare", "`prepare(model, optimizer, train_dl, eval_dl)` returns"),
    ("backward", "`backward(loss)` outside `accumulate` (`sync_gradients` True)"),
    ("clip_grad_norm_", "then `clip_grad_norm_(model.parameters(), 1.0)`"),
    ("clip_grad_value_", "then `clip_grad_value_(model.parameters(), 0.5)`"),
    ("optimizer.step", "then `optimizer.step()`"),
    ("optimizer_step_was_skipped", "then `optimizer_step_was_skipped`"),
    ("@same after step", "weights identical on both ranks after that step"),
    ("no_sync + backward", "`with no_sync(model): backward(loss)` (outside `accumulate`)"),
    ("accumulate, micro-step 1 of 2", "`with accumulate(model):` backward, step, zero_grad: micro-step 1 of 2"),
    ("accumulate, micro-step 2 of 2", "same, micro-step 2 of 2"),
    ("@same after accumulate", "weights identical on both ranks after the accumulated step"),
    ("no_grad forward between backward and step",
     "`backward` (outside `accumulate`), a `torch.no_grad()` forward, `optimizer.step()`, another forward"),
    ("main_process_first", "`with main_process_first(): pass`"),
    ("join_uneven_inputs", "`with join_uneven_inputs([model], even_batches=False): pass`"),
    ("autocast", "`with autocast():` (`mixed_precision=\"no\"`): yields, fp32 matmul gives"),
    ("unwrap_model", "`unwrap_model(model)` type"),
    ("get_state_dict", "`get_state_dict(model)`"),
    ("get_state_dict(unwrap=False) keys", "`get_state_dict(model, unwrap=False)`: first keys"),
    ("unwrap_model(model).state_dict()", "`unwrap_model(model).state_dict()[\"0.weight\"]` (8×4 weight)"),
    ("get_state_dict, gather16", "same, `stage3_gather_16bit_weights_on_model_save` true"),
    ("save_model", "`save_model(model, dir)` on every rank: files"),
    ("save_model, gather16", "same, `stage3_gather_16bit_weights_on_model_save` true"),
    ("save(obj, path per rank)", "`save(obj, f\"obj_rank{r}.pt\")` on every rank: files"),
    ("free_memory(model, optimizer)", "`free_memory(model, optimizer)`"),
]


# Python objects and nested containers: run under 1 process and MULTI_CPU only (the object gather is
# torch.distributed.all_gather_object on every torch.distributed type, utils/operations.py::gather_object)
OBJ_ROWS = [
    ("obj: gather_object(list of str)", "`gather_object(strs)`, `strs` = `[f\"s{i}\" for i in batch]`"),
    ("obj: gather_for_metrics(list of str)", "`gather_for_metrics(strs)`"),
    ("obj: gather_object(tuple of lists)", "`gather_object((preds, refs))`, `preds`/`refs` = `p{i}`/`r{i}` lists"),
    ("obj: gather_for_metrics(tuple of lists)", "`gather_for_metrics((preds, refs))`"),
    ("obj: gather_for_metrics(dict of lists)", "`gather_for_metrics({\"p\": preds, \"r\": refs})`"),
    ("obj: gather_for_metrics(list of dicts)", "`gather_for_metrics([{\"id\": i} for i in batch])`"),
    ("obj: gather(list of tensors)", "`gather([batch, batch * 10])`"),
    ("obj: gather_for_metrics(list of tensors)", "`gather_for_metrics([batch, batch * 10])`"),
    ("obj: gather_for_metrics(tensor, use_gather_object=True)", "`gather_for_metrics(batch, use_gather_object=True)`"),
    ("obj: gather(list of str)", "`gather(strs)`"),
    ("obj: pad_across_processes(list of str)", "`pad_across_processes(strs)`"),
    ("obj: gather_object(str)", "`gather_object(f\"s{r}\")` (a bare string, outside the loop)"),
    ("obj: gather_object(int)", "`gather_object(r)` (an int, outside the loop)"),
]


def fmt_obj(v) -> str:
    """A gathered Python object: tuples named, lists of 0-dim tensors and of dicts shortened."""
    if isinstance(v, dict) and "tuple" in v:
        return "tuple (" + ", ".join(fmt_obj(x) for x in v["tuple"]) + ")"
    if isinstance(v, dict) and "list" in v and v["list"] and all(isinstance(x, dict) for x in v["list"]):
        xs = v["list"]
        if all("T" in x and x["T"] == [] for x in xs):
            return f"list of {len(xs)} 0-dim {xs[0]['dtype']} tensors `{[int(x['v'][0]) for x in xs]}`"
        if all("dict" in x for x in xs):
            return f"list of {len(xs)} dicts `" + json.dumps([x["dict"] for x in xs]) + "`"
        return "[" + ", ".join(fmt_obj(x) for x in xs) + "]"
    return fmt(v)


def _obj_cell(rank: dict, key: str, notes: Notes) -> str:
    c = rank[key]
    if not c["ok"]:
        return f"**{c['err']}** {notes.ref(c['msg'])} · {_coll(c['coll'])}"
    v = c["v"]
    if key.endswith("outside the loop)") or not isinstance(v, list):
        res = fmt_obj(v)
    elif len(v) == 1:
        res = fmt_obj(v[0])
    else:
        res = "; ".join(f"batch {i + 1}: {fmt_obj(x)}" for i, x in enumerate(v))
    return f"{res} · {_coll(c['coll'])}"


def _obj_table(data: dict, notes: Notes) -> str:
    head = ("| Call, on every batch of the loop | 2 processes (MULTI_CPU, gloo): the one batch | "
            "1 process: its two batches |\n| --- | --- | --- |\n")
    out = []
    for key, label in OBJ_ROWS:
        ranks = [data["multi_cpu"][r] for r in sorted(data["multi_cpu"])]
        texts = [_obj_cell(r, key, notes) for r in ranks]
        multi = texts[0] if len(set(texts)) == 1 else "; ".join(f"r{i}: {t}" for i, t in enumerate(texts))
        out.append(f"| {label} | {multi} | {_obj_cell(data['single']['rank0'], key, notes)} |\n")
    return head + "".join(out)


Notes = gb.Notes


def fmt(v) -> str:
    """One returned value, as the page shows it."""
    if isinstance(v, dict) and "local numel" in v:
        s = f"shape {'×'.join(str(d) for d in v['T'])}, {v['local numel']} elements held on this rank"
        return s + (" (DTensor)" if "local" in v else "") + (", all zero" if v["all zero"] else "")
    if isinstance(v, dict) and "T" in v:
        shape = "×".join(str(d) for d in v["T"]) or "0-dim"
        vals = v.get("v")
        s = f"tensor {shape} {v['dtype']}"
        if vals is not None:
            nums = [int(x) if float(x).is_integer() else x for x in vals]
            s += " `" + (str(nums) if v["T"] else str(nums[0])) + "`"
        if "local" in v:
            s += " (DTensor)"
        return s
    if isinstance(v, dict) and "list" in v:
        return "`" + json.dumps([x for x in v["list"]]) + "`" if all(not isinstance(x, dict) for x in v["list"]) \
            else "[" + ", ".join(fmt(x) for x in v["list"]) + "]"
    if isinstance(v, dict) and "dict" in v:
        return "{" + ", ".join(f"`{k}`: {fmt(x)}" for k, x in v["dict"].items()) + "}"
    if isinstance(v, dict) and "n" in v and "values" in v:
        return f"{v['n']} values `{v['values']}`"
    if isinstance(v, dict) and "returns" in v and "weights changed" in v:
        r = v["returns"]
        head = "" if r is None else (f"`sync_gradients` {r['sync_gradients']}; " if isinstance(r, dict) and
                                     "sync_gradients" in r else f"returns {fmt(r)}; ")
        return head + ("**weights updated**" if v["weights changed"] else "weights unchanged")
    if isinstance(v, dict) and "grads before" in v:
        s = f"`.grad` on {v['grads before']} → {v['grads after']} of {v['params']}"
        if "optimizer params stepped" in v:
            s += ("; `parameters()` still the optimizer's" if v["parameters() are the optimizer's"] else
                  "; `parameters()` now **not** the optimizer's tensors")
            s += "; step " + ("updated them" if v["optimizer params stepped"] else "**did not update** them")
            s += "; next forward " + ("used the stepped weights" if v["next forward uses stepped weights"] else
                                      "used the **pre-step** weights")
        return s
    if isinstance(v, dict) and "keys" in v:
        return f"{v['keys']} keys" + (", full shapes" if v["keys"] else " (empty dict)")
    if isinstance(v, dict) and "context" in v:
        return f"`{v['context'] if v['context'] != 'NoneType' else 'None'}`, {v['matmul dtype'].replace('torch.', '')}"
    if isinstance(v, dict) and "_models" in v:
        s = "returns `[None, None]`, `_models` emptied"
        if v["engine"] is not True and v["engine"] != "-":
            s += ", DeepSpeed engine destroyed"
        return s
    if v is None:
        return "`None`"
    if isinstance(v, float):
        return f"Python float `{v}`"
    if isinstance(v, list) and v and all(isinstance(x, bool) for x in v[:2]):
        return f"`{v[0]}`, `{v[1]}`, `{v[2]}`"
    if isinstance(v, list):
        return "`" + json.dumps(v) + "`" if v else "`[]`"
    return f"`{v}`"


def _coll(c: dict) -> str:
    if not c:
        return "local"
    return " + ".join(f"{k}×{n}" for k, n in sorted(c.items()))


def _one(r: dict, notes: Notes, key: str) -> tuple:
    """(result text, collectives text) of one rank."""
    if "probe_error" in r:
        return "probe failed", ""
    if key.startswith("@same"):
        which = "fingerprint after step" if key.endswith("step") else "fingerprint after accumulate"
        return r[which], ""
    c = r.get(key)
    if c is None:
        return None, None
    if key == "join_uneven_inputs" and c["ok"]:
        return ("warns " + " ".join(notes.ref(w) for w in c["v"]) if c["v"] else "no warning"), _coll(c["coll"])
    if key == "print":
        return f"{c['v']} line" + ("" if c["v"] == 1 else "s"), _coll(c["coll"])
    res = fmt(c["v"]) if c["ok"] else f"**{c['err']}** {notes.ref(c['msg'])}"
    return res, _coll(c["coll"])


def cell(data: dict, setup: str, key: str, notes: Notes) -> str:
    ranks = [data[setup][k] for k in sorted(data[setup])]
    got = [_one(r, notes, key) for r in ranks]
    if key.startswith("@same"):
        if len(got) == 1:
            return "–"
        return "yes" if got[0][0] == got[1][0] else "**no**"
    if got[0][0] is None:
        return "–"
    coll = got[0][1] if all(g[1] == got[0][1] for g in got) else "; ".join(f"r{i}: {g[1]}" for i, g in enumerate(got))
    if all(g[0] == got[0][0] for g in got):
        res = got[0][0]
    else:
        res = "; ".join(f"r{i}: {g[0]}" for i, g in enumerate(got))
    return f"{res} · {coll}"


def _table(data: dict, rows: list, notes: Notes) -> str:
    head = "| Call | " + " | ".join(SETUPS[s][1] for s in ORDER) + " |\n"
    head += "| --- |" + " --- |" * len(ORDER) + "\n"
    return head + "".join(f"| {label} | " + " | ".join(cell(data, s, key, notes) for s in ORDER) + " |\n"
                          for key, label in rows)


def _merged_table(data: dict, rows: list, notes: Notes) -> str:
    """Two result columns: the four 2-process setups (one text when they agree) and 1 process."""
    multi = [s for s in ORDER if SETUPS[s][0] > 1]
    head = "| Call | 2 processes: " + ", ".join(SETUPS[s][1].split(" (")[0] for s in multi) + " | 1 process |\n"
    head += "| --- | --- | --- |\n"
    out = []
    for key, label in rows:
        texts = [cell(data, s, key, notes) for s in multi]
        both = texts[0] if len(set(texts)) == 1 else "; ".join(
            f"{SETUPS[s][1].split(' (')[0]}: {t}" for s, t in zip(multi, texts))
        out.append(f"| {label} | {both} | {cell(data, 'single', key, notes)} |\n")
    return head + "".join(out)


# the step table's rows from here on (model access and saving) go to their own block and page
MODEL_FROM = "unwrap_model"


def _notes_block(notes: Notes, offset: int) -> str:
    return "".join(f"E{i + 1 + offset}: {t.replace('|', '&#124;')}<br>\n" for i, t in enumerate(notes.texts))


def render(data: dict) -> dict:
    n1, n2, n3 = Notes(), Notes(), Notes()
    comm = _merged_table(data, COMM_ROWS, n1)
    n0 = Notes()
    objects = _renumber(_obj_table(data, n0), n0, len(n1.texts))
    k = [key for key, _ in STEP_ROWS].index(MODEL_FROM)
    # one numbering across the tables: each table's notes continue the previous one's
    off2 = len(n1.texts)
    step = _renumber(_table(data, STEP_ROWS[:k], n2), n2, off2)
    off3 = off2 + len(n2.texts)
    model = _renumber(_table(data, STEP_ROWS[k:], n3), n3, off3)
    state = "| Setup | " + " | ".join(SETUPS[s][1] for s in ORDER) + " |\n| --- |" + " --- |" * len(ORDER) + "\n"
    for what, f in (("`distributed_type` after `prepare`", lambda r: r["distributed_type after prepare"]),
                    ("`num_processes`", lambda r: r["state"]["num_processes"]),
                    ("`device`", lambda r: r["state"]["device"])):
        state += f"| {what} | " + " | ".join(f"`{f(data[s]['rank0'])}`" for s in ORDER) + " |\n"
    t = data["torch_fsdp2_layers"]
    root = "| Parameter | wrapped by | still the optimizer's tensor after the `no_grad` forward |\n| --- | --- | --- |\n"
    for name, same in t["rank0"]["parameters() are the optimizer's"].items():
        agree = all(t[r]["parameters() are the optimizer's"][name] == same for r in t)
        who = "root `fully_shard(model)`" if name.startswith("4.") else f"`fully_shard(model[{name[0]}])`"
        root += f"| `{name}` | {who} | {'yes' if same else '**no**'}{'' if agree else ' (ranks differ)'} |\n"
    nxt = {t[r]["next forward uses stepped weights"] for r in t}
    root += "\nNext forward after `optimizer.step()`: " + (
        "used the stepped weights." if nxt == {True} else "**did not** use the stepped weights." if nxt == {False}
        else "ranks differ.") + "\n"
    return {"acc-methods-fsdp2-root": root,
            "acc-methods-state": state,
            "acc-methods-comm": comm + "\n" + n1.block(),
            "acc-methods-objects": objects + "\n" + _notes_block(n0, len(n1.texts)),
            "acc-methods-step": step + "\n" + _notes_block(n2, off2),
            "acc-methods-model": model + "\n" + _notes_block(n3, off3)}


def _renumber(text: str, notes: Notes, offset: int) -> str:
    for i in range(len(notes.texts), 0, -1):
        text = text.replace(f"[E{i}]", f"[E{i + offset}]")
    return text


if __name__ == "__main__":
    if sys.argv[1:2] == ["capture"] and sys.argv[2:]:
        gb.save_json(CAPTURE, capture(sys.argv[2:]))
        sys.exit(0)
    gb.cli(sys.argv[1] if len(sys.argv) > 1 else "", page=PAGE, capture=CAPTURE, collect=capture,
           render=render, usage=__doc__)

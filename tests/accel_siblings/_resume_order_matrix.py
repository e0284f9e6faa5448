"""Generator for sub-skills/checkpointing-and-tracking/references/mid-epoch-resume.md: the batch order a
mid-epoch resume replays under each DataLoaderConfiguration option and resume recipe, against an
uninterrupted run (accelerate 1.15.0, torch 2.13.0, one CPU process per run).

Each cell is a real child process (_resume_order_probe.py): `full` (epochs 0-2 uninterrupted), `save`
(epoch 0 + 2 batches of epoch 1, then save_state) and one fresh process per recipe (set_seed(0), prepare,
load_state, recipe). Raw results: resume_order_capture.json; render() gives the page's block, compared word
for word by test_resume_order_matrix.py.

usage: python tests/accel_siblings/_resume_order_matrix.py capture|render|write|--check   (~40 s)
"""
from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE.parent))
import _ports  # noqa: E402  (tests/ is on sys.path)
import _generated_blocks as gb  # noqa: E402

CAPTURE = HERE / "resume_order_capture.json"
PROBE = HERE / "_resume_order_probe.py"
PAGE = ROOT / "sub-skills" / "checkpointing-and-tracking" / "references" / "mid-epoch-resume.md"
SAMPLERS = {"default": "`use_seedable_sampler=False` (default)", "seedable": "`use_seedable_sampler=True`",
            "default2": "default sampler, 2 gloo ranks (rank 0's batches)"}
ONE_PROCESS = ("default", "seedable")
TWO_RANK_MODES = ("full", "save", "skip", "set_epoch+skip")
RECIPES = {
    "no_skip": "`load_state` only, iterate the prepared loader",
    "skip": "`skip_first_batches(dl, 2)`",
    "set_epoch+skip": "`dl.set_epoch(1)`, then `skip_first_batches(dl, 2)`",
    "set_epoch+skip+iteration0": "as above, new loader forced to `iteration=0` (accelerate before the fix)",
    "skip+set_epoch_new": "`new = skip_first_batches(dl, 2)`, then `new.set_epoch(1)` (the Trainer's order)",
}


def probe(sampler: str, mode: str, ckpt: Path, work: Path) -> dict:
    out = work / f"{sampler}-{mode}.json"
    cmd = [sys.executable, str(PROBE), sampler, mode, str(ckpt), str(out)]
    if sampler == "default2":   # 2 gloo ranks (MULTI_CPU): rank 0's result, rank 1's batches beside it
        port = _port()
        envs = [gb.child_env(work, PYTHONWARNINGS="ignore", ACCELERATE_DISABLE_RICH="1", RANK=str(r),
                             LOCAL_RANK=str(r), WORLD_SIZE="2", LOCAL_WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                             MASTER_PORT=str(port)) for r in range(2)]
        procs = [subprocess.Popen(cmd, env=e, cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                 for e in envs]
        errs = [p.communicate(timeout=180)[1] for p in procs]
        r1 = work / f"{sampler}-{mode}-rank1.json"
        if not (out.exists() and r1.exists()):
            return {"crash": errs[0][-400:] + errs[1][-400:]}
        got = gb.load_json(out)
        got["rank1"] = gb.load_json(r1)
        return got
    env = gb.child_env(work, PYTHONWARNINGS="ignore", ACCELERATE_DISABLE_RICH="1")
    p = subprocess.run(cmd, env=env, cwd=work, capture_output=True, text=True, timeout=180)
    return gb.load_json(out) if out.exists() else {"crash": p.stderr[-400:]}


def _port() -> int:
    """A free port, chosen and reserved by tests/_ports.py (outside the ephemeral range)."""
    return _ports.free_port()


def collect() -> dict:
    with tempfile.TemporaryDirectory() as w:
        work = Path(w)
        data = {}
        for s in ONE_PROCESS:
            ck = work / f"ckpt-{s}"
            data[s] = {m: probe(s, m, ck, work) for m in ("full", "save", *RECIPES)}
        data["stateful"] = {"full": probe("stateful", "full", work / "ckpt-stateful", work)}
        ck = work / "ckpt-default2"
        data["default2"] = {m: probe("default2", m, ck, work) for m in TWO_RANK_MODES}
    return data


def _b(batches) -> str:
    return " ".join(f"[{a},{b}]" for a, b in batches)


def render(data: dict) -> dict:
    rows = ["| Sampler | After `load_state` in a new process | Rest of epoch 1 | Same as uninterrupted? "
            "| Next pass of `dl`, no `set_epoch` | after `dl.set_epoch(2)` |",
            "| --- | --- | --- | --- | --- | --- |"]
    for s, label in SAMPLERS.items():
        full = data[s]["full"]["epochs"]
        sampler = data[s]["full"]["sampler_class"]
        rows.append(f"| {label}: `{sampler}` | uninterrupted run (epochs 0, 1, 2) | {_b(full[1][2:])} | - | "
                    f"{_b(full[2])} (epoch 2) | - |")
        for m, what in ((m, w) for m, w in RECIPES.items() if m in data[s]):
            r = data[s][m]
            got = r["batches"]
            if got == full[1][2:]:
                same = "**yes**"
            else:
                src = [e for e in range(3) if got == full[e][-len(got):]]
                part = "order" if len(got) == len(full[0]) else "tail"
                same = f"no: epoch {src[0]}'s {part}" if src else "no: another order"
            nxt, nxt2 = r["next_pass"], r["next_pass_set_epoch2"]
            tag = next((f" (epoch {e})" for e in range(3) if nxt == full[e]), " (another order)")
            tag2 = " (epoch 2)" if nxt2 == full[2] else " (another order)"
            rows.append(f"| {label} | {what} | {_b(got)} | {same} | {_b(nxt)}{tag} | {_b(nxt2)}{tag2} |")
    sv = data["default"]["save"]
    it = {s: (data[s]["skip"]["skipped_iteration"], data[s]["set_epoch+skip"]["skipped_iteration"]) for s in SAMPLERS}
    two = data["default2"]
    r1 = two["full"]["rank1"]["epochs"]
    disjoint = all(not {i for b in two["full"]["epochs"][e] for i in b} & {i for b in r1[e] for i in b}
                   for e in range(3))
    note = (f"\nRun: 12 items, batch 2, `shuffle=True`, `set_seed(0)`; the save ran epoch 0, then "
            f"{_b(sv['epoch1_head'])} of epoch 1 (`dl.iteration` {sv['iteration_at_save']}), then `save_state` "
            f"(files: {', '.join(sv['files'])}). `dl.iteration` after `load_state`: "
            f"{data['default']['skip']['iteration_after_load']}. The new loader's `iteration`: "
            f"{it['seedable'][0]} without `set_epoch`, {it['seedable'][1]} after `set_epoch(1)`. "
            f"`use_stateful_dataloader=True` here: `{data['stateful']['full']['error']}` "
            f"(raised by `{data['stateful']['full']['at']}`). 2 ranks: each rank gets "
            f"{len(two['full']['epochs'][0])} batches per epoch, the ranks' shares "
            f"{'are disjoint' if disjoint else 'overlap'} in every epoch, rank 1's resumed batches "
            f"{'follow the same rule' if two['skip']['rank1']['batches'] == r1[0][2:] else 'differ from the rule'}.\n")
    return {"resume order": "\n".join(rows) + "\n" + note}


if __name__ == "__main__":
    gb.cli(sys.argv[1] if len(sys.argv) > 1 else "", page=PAGE, capture=CAPTURE, collect=collect, render=render,
           usage=__doc__)

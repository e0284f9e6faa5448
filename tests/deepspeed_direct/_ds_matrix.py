"""Generator for sub-skills/distributed-training-backends/references/deepspeed-initialize-matrix.md and
deepspeed-checkpoint-matrix.md (deepspeed 0.19.8, torch 2.13.0, DS_ACCELERATOR=cpu, gloo).

Each case runs for real in a child process (_ds_probe.py): one process (world size 1), two only for the
world-size rows. The raw results are committed in ds_matrix_capture.json; render() turns them into the
Markdown blocks, which the test compares with the pages word for word.

usage: python tests/deepspeed_direct/_ds_matrix.py render          print both blocks from the capture
       python tests/deepspeed_direct/_ds_matrix.py write           rewrite the pages' blocks from the capture
       python tests/deepspeed_direct/_ds_matrix.py capture         rerun every case, rewrite the capture (~10 min)
       python tests/deepspeed_direct/_ds_matrix.py --check         rerun every case, compare with the capture
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CAPTURE = HERE / "ds_matrix_capture.json"
PROBE = HERE / "_ds_probe.py"
REFS = ROOT / "sub-skills" / "distributed-training-backends" / "references"
sys.path.insert(0, str(HERE.parent))
import _ports  # noqa: E402  (tests/ is on sys.path)
import _generated_blocks as gb  # noqa: E402

STAGES = (0, 1, 2, 3)
OPTS = ("Adam", "AdamW", "client AdamW", "none")
OFFLOADS = ("none", "cpu")
PRECS = ("fp32", "bf16", "fp16")


def _cid(stage, opt, off, prec):
    return f"z{stage}|{opt}|{off}|{prec}"


INIT_GRID = [{"id": _cid(s, o, f, p), "stage": s, "opt": o, "offload": f, "prec": p}
             for s in STAGES for o in OPTS for f in OFFLOADS for p in PRECS]

# (id, what it shows, case)
INIT_EXTRA = [
    ("force-false z1", "client AdamW + offload cpu, `zero_force_ds_cpu_optimizer: false`",
     {"stage": 1, "opt": "client AdamW", "offload": "cpu", "top": {"zero_force_ds_cpu_optimizer": False}}),
    ("force-false z3", "same at stage 3",
     {"stage": 3, "opt": "client AdamW", "offload": "cpu", "top": {"zero_force_ds_cpu_optimizer": False}}),
    ("sgd z0", "client `torch.optim.SGD`, stage 0 (no ZeRO: no list check)", {"stage": 0, "opt": "client SGD"}),
    ("sgd z2", "client `torch.optim.SGD`, stage 2", {"stage": 2, "opt": "client SGD"}),
    ("sgd z2 allow", "client SGD, stage 2, `zero_allow_untested_optimizer: true`",
     {"stage": 2, "opt": "client SGD", "top": {"zero_allow_untested_optimizer": True}}),
    ("subclass z2", "client subclass of `torch.optim.AdamW`, stage 2", {"stage": 2, "opt": "client AdamW subclass"}),
    ("subclass z3 allow", "AdamW subclass, stage 3, `zero_allow_untested_optimizer: true`",
     {"stage": 3, "opt": "client AdamW subclass", "top": {"zero_allow_untested_optimizer": True}}),
    ("config SGD z2", "config `\"optimizer\": {\"type\": \"SGD\"}`, stage 2", {"stage": 2, "opt": "SGD"}),
    ("torch_adam offload", "config Adam with `\"torch_adam\": true` + offload cpu, stage 2",
     {"stage": 2, "opt": "Adam", "offload": "cpu", "optparams": {"torch_adam": True}}),
    ("real cpu_adam z2", "config Adam + offload cpu, stage 2, with the real JIT-built `cpu_adam` op (not stubbed)",
     {"stage": 2, "opt": "Adam", "offload": "cpu", "real_ops": True}),
    ("auto rbs z2", "`reduce_bucket_size: \"auto\"`, stage 2",
     {"stage": 2, "opt": "client AdamW", "zero": {"reduce_bucket_size": "auto"},
      "show": ["engine._config.zero_config.reduce_bucket_size"]}),
    ("auto s3 keys", "`reduce_bucket_size`, `stage3_prefetch_bucket_size`, `stage3_param_persistence_threshold`"
     " all `\"auto\"`, stage 3",
     {"stage": 3, "opt": "client AdamW",
      "zero": {"stage3_prefetch_bucket_size": "auto", "stage3_param_persistence_threshold": "auto",
               "reduce_bucket_size": "auto"},
      "show": ["engine._config.zero_config.prefetch_bucket_size",
               "engine._config.zero_config.param_persistence_threshold",
               "engine._config.zero_config.reduce_bucket_size"]}),
    ("auto tbs", "`train_batch_size: \"auto\"`", {"stage": 0, "opt": "client AdamW", "train_batch_size": "auto"}),
    ("auto lr", "config Adam `\"lr\": \"auto\"` + `\"torch_adam\": true`, stage 0",
     {"stage": 0, "opt": "Adam", "optparams": {"lr": "auto", "torch_adam": True},
      "show": ["engine.basic_optimizer.param_groups[0]['lr']"]}),
    ("nvme param, cpu opt", "stage 3, `offload_param` nvme + `offload_optimizer` cpu (no libaio on the test machine)",
     {"stage": 3, "opt": "client AdamW", "offload": "cpu", "top": {"zero_force_ds_cpu_optimizer": False},
      "zero": {"offload_param": {"device": "nvme", "nvme_path": "<tmp>/nvme"}}}),
]

# ---------------------------------------------------------------------------------------- checkpoints
_SAVE = {"z0": {"stage": 0}, "z0-bf16": {"stage": 0, "prec": "bf16"}, "z1": {"stage": 1}, "z2": {"stage": 2},
         "z3": {"stage": 3},
         "z3-offload": {"stage": 3, "offload": "cpu", "top": {"zero_force_ds_cpu_optimizer": False},
                        "zero": {"offload_param": {"device": "cpu"}}}}
LOADS = [("default", {}), ("load_optimizer_states=False", {"load_optimizer_states": False}),
         ("load_module_only=True", {"load_module_only": True}),
         ("load_lr_scheduler_states=False", {"load_lr_scheduler_states": False})]


def _eng(stage, prec="fp32", opt="client AdamW", **more):
    return {"stage": stage, "prec": prec, "opt": opt, "sched": True, **more}


def ckpt_cases():
    """{world size of the run: [cases]} in run order: ws1 first, then ws2 (2 processes), then ws1 again."""
    a, b, c = [], [], []
    for name, s in _SAVE.items():
        save = _eng(**s)
        a.append({"id": f"{name} save", "dir": name, "save": save, "phase": "save", "fp32": True,
                  "show": ["engine.zero_nvme_offload_optimizer()"] if "offload" in s else []})
        for lname, kw in (LOADS if "offload" not in s else LOADS[:1]):
            a.append({"id": f"{name} load {lname}", "dir": name, "load": save, "load_kw": kw, "phase": "load"})
    a.append({"id": "z2 tag", "dir": "z2tag", "save": _eng(2), "tag": "mytag", "phase": None, "load": _eng(2),
              "client_state": False})
    a.append({"id": "z3 load, no optimizer", "dir": "z3", "load": {"stage": 3, "opt": "none"}, "phase": "load"})
    a.append({"id": "z3 load, no optimizer, load_optimizer_states=False", "dir": "z3",
              "load": {"stage": 3, "opt": "none"}, "load_kw": {"load_optimizer_states": False}, "phase": "load"})
    for src, dst in (("z1", 2), ("z2", 1), ("z2", 3), ("z3", 2), ("z0", 2), ("z2", 0)):
        a.append({"id": f"{src} -> stage {dst}", "dir": src, "load": _eng(dst), "phase": "load"})
        a.append({"id": f"{src} -> stage {dst}, load_optimizer_states=False", "dir": src, "load": _eng(dst),
                  "load_kw": {"load_optimizer_states": False}, "phase": "load"})
    for st in (2, 3):
        b.append({"id": f"ws1 z{st} -> ws2", "dir": f"z{st}", "load": _eng(st), "phase": "load"})
        b.append({"id": f"ws1 z{st} -> ws2, load_optimizer_states=False", "dir": f"z{st}", "load": _eng(st),
                  "load_kw": {"load_optimizer_states": False}, "phase": "load"})
        b.append({"id": f"ws2 z{st} save", "dir": f"ws2z{st}", "save": _eng(st), "phase": "save", "fp32": True})
        c.append({"id": f"ws2 z{st} -> ws1", "dir": f"ws2z{st}", "load": _eng(st), "phase": "load"})
        c.append({"id": f"ws2 z{st} -> ws1, load_optimizer_states=False", "dir": f"ws2z{st}", "load": _eng(st),
                  "load_kw": {"load_optimizer_states": False}, "phase": "load"})
    return [(1, a), (2, b), (1, c)]


# ---------------------------------------------------------------------------------------- running

def _port() -> int:
    """A free port, chosen and reserved by tests/_ports.py (outside the ephemeral range)."""
    return _ports.free_port()


# JIT-built ops (cpu_adam for the one real-op row: ~9 min to build once on 2 shared cores) live in a
# private, git-ignored folder so that a stale lock in a shared cache cannot hang the run.
EXT = Path(os.environ.get("DS_MATRIX_EXT", ROOT / ".ds_ext"))


def _env(ext_dir, rank, ws, port):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACCELERATE_", "DEEPSPEED_", "PET_"))}
    env.update(DS_ACCELERATOR="cpu", TORCH_EXTENSIONS_DIR=str(ext_dir), RANK=str(rank), LOCAL_RANK=str(rank),
               WORLD_SIZE=str(ws), LOCAL_WORLD_SIZE=str(ws), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
               OMP_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1")
    return env


def communicate_all(ps, timeout=240):
    """(stdout, stderr, returncode) of each started rank process; when one overruns TIMEOUT every rank of
    the job is killed (the others would wait for it forever)."""
    out = []
    for p in ps:
        try:
            o, e = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for q in ps:
                q.kill()
            o, e = p.communicate()
        out.append((o, e, p.returncode))
    return out


def _result(stdout, stderr):
    line = [ln for ln in stdout.splitlines() if ln.startswith("RESULT ")]
    if not line:
        raise RuntimeError("probe gave no result:\n" + stdout[-2000:] + stderr[-3000:])
    return json.loads(line[-1][len("RESULT "):])


def run_init(cases, work, ext=EXT):
    cases = json.loads(json.dumps(cases).replace("<tmp>", str(work)))
    p = subprocess.run([sys.executable, str(PROBE), "init", json.dumps(cases)], capture_output=True, text=True,
                       timeout=600, env=_env(ext, 0, 1, _port()), cwd=work)
    return _result(p.stdout, p.stderr)


def _pair(cases, work, timeout, mode="ckpt", probe=PROBE):
    """Run cases in 2 processes of PROBE (MODE); a rank that fails while the other waits in a collective
    hangs both: after `timeout` both are killed and each rank's finished cases are read from its CASE lines."""
    port = _port()
    procs = [subprocess.Popen([sys.executable, str(probe), mode, json.dumps(cases), str(work)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=_env(EXT, r, 2, port), cwd=work) for r in range(2)]
    outs, hung = [], False
    for p in procs:
        try:
            outs.append(p.communicate(timeout=timeout))
        except subprocess.TimeoutExpired:
            hung = True
            for q in procs:
                q.kill()
            outs.append(p.communicate())
    while len(outs) < 2:
        outs.append(procs[len(outs)].communicate())
    per_rank = [[json.loads(ln[5:].replace(str(work), "<dir>")) for ln in o[0].splitlines() if ln.startswith("CASE ")]
                for o in outs]
    return per_rank, hung


def run_ckpt(work):
    res = {}
    for ws, cases in ckpt_cases():
        if ws == 1:
            p = subprocess.run([sys.executable, str(PROBE), "ckpt", json.dumps(cases), str(work)], capture_output=True,
                               text=True, timeout=900, env=_env(EXT, 0, 1, _port()), cwd=work)
            res.update(_result(p.stdout.replace(str(work), "<dir>"), p.stderr))
            continue
        for c in cases:   # one pair of processes per case, so that a hang costs one row only
            per_rank, hung = _pair([c], work, 120)
            r0 = per_rank[0][0] if per_rank[0] else {}
            r1 = per_rank[1][0] if per_rank[1] else {}
            if "load" in c:
                ld = r0.get("load") or {"ok": False, "error": "hang", "message": "rank 0 never finished"}
                ld["rank1"] = (r1.get("load") or {"ok": False, "error": "hang", "message": "rank 1 never finished"})
                ld["hung"] = hung
                r0["load"] = ld
            res[c["id"]] = r0
    return res


def init_cases():
    grid = list(INIT_GRID)
    extra = [dict(c, id=i) for i, _, c in INIT_EXTRA]
    return grid + extra


def capture():
    work = tempfile.mkdtemp(prefix="ds_matrix_")
    try:
        return {"init": run_init(init_cases(), work), "ckpt": run_ckpt(work)}
    finally:
        shutil.rmtree(work, ignore_errors=True)


# ---------------------------------------------------------------------------------------- rendering

_SHORT = {"DeepSpeedZeroOptimizer": "ZeRO-1/2", "DeepSpeedZeroOptimizer_Stage3": "ZeRO-3",
          "DeepSpeedZeRoOffload": "ZeRoOffload (no optimizer)"}


def _msg(m, n=110):
    m = m.replace("|", "\\|").replace("`", "'")
    return m if len(m) <= n else m[:n] + "..."


class _Notes:
    """Long first lines become numbered notes under a table (E1, E2 ...), so cells stay short."""

    def __init__(self, prefix):
        self.prefix, self.items = prefix, []

    def ref(self, text):
        text = text.replace("|", "\\|").replace("`", "'")
        if text not in self.items:
            self.items.append(text)
        return f"[{self.prefix}{self.items.index(text) + 1}]"

    def block(self):
        return "".join(f"\n{self.prefix}{i + 1}: {t[:300]}" + ("..." if len(t) > 300 else "") + "<br>"
                       for i, t in enumerate(self.items)).removesuffix("<br>")


def init_cell(r, notes):
    if not r["ok"]:
        return f"**{r['error']}** {notes.ref(r['message'])}"
    eo, basic = r["engine_optimizer"], r["basic"]
    if eo == "None":
        s = "`engine.optimizer` None"
    elif eo == basic or basic == "None":
        s = f"`{eo}`"
    else:
        s = f"`{eo}`({basic})"
    if r.get("ops"):
        s += " *op*"
    elif r.get("step") and r["step"] != "ok":
        s += f"; `step()` {notes.ref(r['step'])}"
    for w in r.get("warnings", []):
        s += f"; warns {notes.ref(w)}"
    return s


def render_init(data):
    res = data["init"]
    notes = _Notes("E")
    lines = ["| Stage | Optimizer source | offload_optimizer | fp32 | bf16 | fp16 |", "| --- | --- | --- | --- | --- | --- |"]
    for s in STAGES:
        for o in OPTS:
            for f in OFFLOADS:
                src = {"Adam": "config `Adam`", "AdamW": "config `AdamW`", "client AdamW": "client `torch.optim.AdamW`",
                       "none": "none"}[o]
                cells = [init_cell(res[_cid(s, o, f, p)], notes) for p in PRECS]
                lines.append(f"| {s} | {src} | {f} | " + " | ".join(cells) + " |")
    notes2 = _Notes("F")
    extra = ["| Case | Result | Values the engine holds |", "| --- | --- | --- |"]
    for i, what, c in INIT_EXTRA:
        r = res[i]
        shown = "; ".join(f"`{k.replace('engine._config.zero_config.', 'zero_config.').replace('engine.', '')}` = `{v}`"
                          for k, v in r.get("shown", {}).items())
        extra.append(f"| {what} | {init_cell(r, notes2)} | {shown} |")
    return ("\n".join(lines) + "\n" + notes.block() + "\n",
            "\n".join(extra) + "\n" + notes2.block() + "\n")


def _files(files):
    return "<br>".join(f"`{f}`" for f in files)


def load_cell(r, notes):
    ld = r.get("load")
    if not ld:
        return ""
    if "rank1" in ld:   # two processes: show both ranks when they differ
        r1 = dict(ld["rank1"])
        r0 = {k: v for k, v in ld.items() if k not in ("rank1", "hung")}
        c0, c1 = load_cell({"load": r0}, notes), load_cell({"load": r1}, notes)
        text = c0 if c0 == c1 else f"rank 0: {c0}; rank 1: {c1}"
        return text + (" (the other rank then hangs in a collective; killed after 120 s)" if ld["hung"] else "")
    if not ld["ok"]:
        return f"**{ld['error']}** {notes.ref(ld['message'])}"
    bits = ["weights ✓" if ld["weights_restored"] else ("weights **✗**" + ("" if ld["weights_changed"] else " (unchanged)"))]
    bits.append(f"Adam {ld['opt_step']}")
    if ld.get("lr") is not None:
        bits.append(f"sched {ld.get('sched_iter')}, lr {ld['lr']:.4g}")
    bits.append(f"steps {ld['global_steps']}")
    bits.append("client ✓" if ld["client_state"] == {"epoch": 7} else f"client {json.dumps(ld['client_state'])}")
    if ld.get("step_after") != "ok":
        bits.append(f"next step: {notes.ref(ld.get('step_after', ''))}")
    return ", ".join(bits)


def render_ckpt(data):
    res = data["ckpt"]
    notes = _Notes("G")
    saves = ["| Saved by | Engine at save | Files under the save dir | zero_to_fp32 |", "| --- | --- | --- | --- |"]
    for name in list(_SAVE) + ["ws2 z2", "ws2 z3"]:
        r = res[f"{name} save"]
        sv = _SAVE.get(name, {})
        eng = (f"stage {sv['stage']}, {sv.get('prec', 'fp32')}" if sv else f"stage {name[-1]}, fp32, 2 processes")
        if "offload" in sv:
            eng += ", `offload_param` + `offload_optimizer` cpu (client AdamW, `zero_force_ds_cpu_optimizer: false`)"
        for k, v in r.get("shown", {}).items():
            eng += f"; `{k.replace('engine.', '')}` = `{v}`"
        eng += f"; Adam {r['saved_opt_step']}, sched {r.get('saved_sched_iter')}, lr {r['saved_lr']:.4g}"
        fp = r.get("fp32", {})
        fpc = (f"{len(fp['keys'])} keys, {fp['dtype']}, " + ("= saved weights" if fp["equal"] else "DIFFERENT")
               if fp.get("ok") else f"**{fp.get('error')}** {notes.ref(fp.get('message', ''))}")
        files = [f for f in r["files"] if f not in ("latest", "zero_to_fp32.py", "zero_to_torch.py")]
        extra = [f for f in ("zero_to_fp32.py", "zero_to_torch.py") if f in r["files"]]
        saves.append(f"| {name} | {eng} | {_files(files)}<br>`latest` = `{r['latest']}`"
                     + (" + " + ", ".join(f"`{f}`" for f in extra) if extra else "") + f" | {fpc} |")
    loads = ["| Checkpoint | Loaded by / with | Result |", "| --- | --- | --- |"]
    for ws, cases in ckpt_cases():
        for c in cases:
            if c.get("phase") == "save" or (c.get("phase") is None and "tag" not in c):
                continue
            r = res[c["id"]]
            kw = ", ".join(f"{k}={v}" for k, v in c.get("load_kw", {}).items()) or "defaults"
            lc = c["load"]
            who = (f"stage {lc['stage']}" + (", no optimizer" if lc.get("opt") == "none" else "")
                   + f", world size {ws}; {kw}")
            src = c["dir"].replace("ws2z", "ws2 z")
            if c.get("tag"):
                src = f"z2 saved with tag={c['tag']!r}: files {_files(r['files'])}, `latest` = `{r['latest']}`"
            loads.append(f"| {src} | {who} | {load_cell(r, notes)} |")
    return "\n".join(saves) + "\n", "\n".join(loads) + "\n" + notes.block() + "\n"


def render(data):
    i1, i2 = render_init(data)
    c1, c2 = render_ckpt(data)
    return {"initialize grid": i1, "initialize flags": i2, "checkpoint saves": c1, "checkpoint loads": c2}


def load_capture():
    return json.loads(CAPTURE.read_text(encoding="utf-8"))


if __name__ == "__main__":
    gb.cli(sys.argv[1] if len(sys.argv) > 1 else "", capture=CAPTURE, collect=capture, render=render, usage=__doc__,
           page={"initialize grid": REFS / "deepspeed-initialize-matrix.md",
                 "initialize flags": REFS / "deepspeed-initialize-matrix.md",
                 "checkpoint saves": REFS / "deepspeed-checkpoint-matrix.md",
                 "checkpoint loads": REFS / "deepspeed-checkpoint-matrix.md"})

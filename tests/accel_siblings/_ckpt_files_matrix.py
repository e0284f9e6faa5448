"""Generator for the "How load_state reads each file" tables of
sub-skills/checkpointing-and-tracking/references/load-state-files.md (accelerate 1.15.0, torch 2.13.0).

One child process (this file with `probe`), 1 CPU process, no launcher: a tiny Linear model, AdamW,
StepLR, a shuffled DataLoader, one object passed to register_for_checkpointing and a torch.amp GradScaler
attached by hand (fp16 on CPU raises in Accelerator.__init__, so this is the only CPU route into the
scaler.pt code path). It records, by wrapping the functions accelerate calls:
- writer: which function wrote each file (accelerate.utils.save -> safetensors / torch.save, or a bare torch.save);
- loader: which function read it (safetensors load_model, accelerate.utils.load, bare torch.load) and the
  weights_only torch.load received;
- restored: after one more training step, what load_state put back;
- failure: the file replaced by garbage, then deleted: does load_state raise (type) or log (level, text)?
- the RNG file under forced branches: numpy < 1.25 (np.dtypes.UInt32DType taken out of accelerate's
  TORCH_SAFE_GLOBALS, which is what `if is_numpy_available("1.25.0")` does on numpy 1.23.5), torch < 2.4
  (is_weights_only_available() -> False), and the user-side fixes.

usage: python tests/accel_siblings/_ckpt_files_matrix.py render    print the blocks from the capture
       python tests/accel_siblings/_ckpt_files_matrix.py write     rewrite the reference's blocks from the capture
       python tests/accel_siblings/_ckpt_files_matrix.py capture   rerun the probe, rewrite the capture (~4 s)
       python tests/accel_siblings/_ckpt_files_matrix.py probe     (child) print the raw JSON
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
CAPTURE = HERE / "ckpt_files_capture.json"
REF = ROOT / "sub-skills" / "checkpointing-and-tracking" / "references" / "load-state-files.md"


# --------------------------------------------------------------------------------------------- probe
def probe() -> dict:  # noqa: C901 (one linear scenario)
    import logging
    import random
    import shutil
    import tempfile

    import numpy as np
    import torch
    import accelerate.checkpointing as ck
    import accelerate.utils.other as other
    from accelerate import Accelerator
    from accelerate.utils import set_seed

    tmp = Path(tempfile.mkdtemp(prefix="ckfiles"))
    out: dict = {"versions": {"accelerate": __import__("accelerate").__version__,
                              "torch": torch.__version__.split("+")[0], "numpy": np.__version__}}

    # ---- recorders
    events: list = []
    real_torch_save, real_torch_load = torch.save, torch.load
    real_acc_save, real_acc_load, real_load_model = ck.save, ck.load, ck.load_model
    depth = {"acc": 0}

    def name(f):
        return Path(str(f)).name

    def rec_torch_save(obj, f, *a, **k):
        if depth["acc"] == 0:
            events.append(("write", name(f), "torch.save (every rank that reaches it)"))
        return real_torch_save(obj, f, *a, **k)

    def rec_acc_save(obj, f, save_on_each_node=False, safe_serialization=False):
        how = "safetensors" if safe_serialization else "torch.save"
        events.append(("write", name(f), f"accelerate.utils.save -> {how} (main process)"))
        depth["acc"] += 1
        try:
            return real_acc_save(obj, f, save_on_each_node=save_on_each_node, safe_serialization=safe_serialization)
        finally:
            depth["acc"] -= 1

    def rec_torch_load(f, *a, **k):
        wo = k.get("weights_only", "unset")
        via = "accelerate.utils.load" if depth["acc"] else "torch.load"
        events.append(("read", name(f), via, wo))
        return real_torch_load(f, *a, **k)

    def rec_acc_load(f, map_location=None, **k):
        depth["acc"] += 1
        try:
            return real_acc_load(f, map_location=map_location, **k)
        finally:
            depth["acc"] -= 1

    def rec_load_model(model, filename, *a, **k):
        events.append(("read", name(filename), "safetensors.torch.load_model", "n/a"))
        return real_load_model(model, filename, *a, **k)

    torch.save, torch.load = rec_torch_save, rec_torch_load
    ck.save, ck.load, ck.load_model = rec_acc_save, rec_acc_load, rec_load_model
    other_save = other.save
    # save_custom_state calls the name `save` of accelerate.checkpointing (patched above)

    logs: list = []

    class H(logging.Handler):
        def emit(self, r):
            logs.append((r.levelname, r.getMessage()))

    h = H(level=logging.DEBUG)
    for lname in ("accelerate.checkpointing", "accelerate.accelerator"):
        lg = logging.getLogger(lname)
        lg.addHandler(h)
        lg.setLevel(logging.DEBUG)

    # ---- the run
    set_seed(0)
    acc = Accelerator(cpu=True)
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.AdamW(model.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    ds = torch.utils.data.TensorDataset(torch.randn(16, 4), torch.randn(16, 2))
    dl = torch.utils.data.DataLoader(ds, batch_size=4, shuffle=True)
    model, opt, sched, dl = acc.prepare(model, opt, sched, dl)

    from _toy_models import Counter  # tests/ is on sys.path (above)

    counter = Counter()
    acc.register_for_checkpointing(counter)
    acc.scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)

    batches = {"it": iter(dl)}

    def train_step():
        try:
            x, y = next(batches["it"])
        except StopIteration:
            batches["it"] = iter(dl)
            x, y = next(batches["it"])
        loss = torch.nn.functional.mse_loss(model(x), y)
        acc.backward(loss)
        opt.step()
        sched.step()
        opt.zero_grad()
        random.random(), np.random.rand(), torch.rand(1)  # the run draws random numbers (dropout, augmentation)
        counter.n += 1
        acc.step += 1
        acc.scaler.update(new_scale=acc.scaler.get_scale() * 2)

    def snapshot():
        st = (random.getstate(), np.random.get_state(), torch.get_rng_state())
        draws = (random.random(), float(np.random.rand()), float(torch.rand(1)))
        random.setstate(st[0]), np.random.set_state(st[1]), torch.set_rng_state(st[2])
        return {
            "model weights": model.weight.detach().clone(),
            "optimizer state": opt.state_dict()["state"][0]["exp_avg"].clone(),
            "scheduler": sched.state_dict()["last_epoch"],
            "GradScaler scale": acc.scaler.get_scale(),
            "registered object": counter.n,
            "accelerator.step": acc.step,
            "RNG (random, numpy, torch)": draws,
        }

    def same(a, b):
        if isinstance(a, torch.Tensor):
            return bool(torch.equal(a, b))
        return a == b

    train_step()
    saved_dir = tmp / "ckpt"
    events.clear()
    acc.save_state(str(saved_dir))
    saved = snapshot()
    writes = [e for e in events if e[0] == "write"]
    acc.save_state(str(tmp / "ckpt_bin"), safe_serialization=False)
    writes_bin = [e for e in events if e[0] == "write" and e[1] not in {w[1] for w in writes}]
    out["files"] = sorted(os.listdir(saved_dir))
    out["files_unsafe"] = sorted(os.listdir(tmp / "ckpt_bin"))
    out["writers"] = {w[1]: w[2] for w in writes + writes_bin}

    def attempt(d, **kw):
        """one more training step, then load_state(d): reads, restored items, logs, exception."""
        train_step()
        events.clear(), logs.clear()
        err = None
        try:
            acc.load_state(str(d), **kw)
        except Exception as e:  # noqa: BLE001 (recorded)
            err = f"{type(e).__name__}"
        now = snapshot()
        restored = sorted(k for k in saved if same(saved[k], now[k]))
        reads = {}
        for e in events:
            if e[0] == "read":
                reads.setdefault(e[1], (e[2], e[3]))
        ck_logs = [f"{lvl} {msg}" for lvl, msg in logs if "loaded successfully" in msg
                   or "Could not load" in msg]
        # put the saved state back for the next attempt whatever happened
        return {"error": err, "restored": restored, "reads": {k: list(v) for k, v in reads.items()},
                "logs": ck_logs}

    out["baseline"] = attempt(saved_dir)
    out["baseline_bin"] = attempt(tmp / "ckpt_bin")
    out["items"] = sorted(saved)

    # ---- each file broken (garbage bytes) and missing
    out["broken"], out["missing"] = {}, {}
    for f in out["files"]:
        for mode in ("broken", "missing"):
            d = tmp / f"{mode}_{f}"
            shutil.copytree(saved_dir, d)
            if mode == "broken":
                (d / f).write_bytes(b"this is not a checkpoint\n")
            else:
                (d / f).unlink()
            r = attempt(d)
            out[mode][f] = {"error": r["error"], "restored": r["restored"], "logs": r["logs"]}
            acc.load_state(str(saved_dir))  # clean state for the next case

    # ---- the RNG file under forced branches
    rng = saved_dir / "random_states_0.pkl"
    uint32_cls = type(np.dtype(np.uint32))
    allow = other.TORCH_SAFE_GLOBALS
    branches = {}
    import accelerate.utils.imports as imports
    import importlib.metadata as md
    real_version = md.version
    md.version = lambda dist: "1.23.5" if dist == "numpy" else real_version(dist)
    try:
        branches["is_numpy_available('1.25.0') with numpy reported as 1.23.5"] = imports.is_numpy_available("1.25.0")
    finally:
        md.version = real_version
    out["allowlist"] = [f"{getattr(g, '__module__', '?')}.{getattr(g, '__qualname__', g.__name__)}" for g in allow]
    out["uint32_class_here"] = f"{uint32_cls.__module__}.{uint32_cls.__qualname__}"

    def direct_load():
        try:
            other.load(rng)
            return "loads"
        except Exception as e:  # noqa: BLE001
            line = [x.strip() for x in str(e).splitlines() if x.strip().startswith("Can only build")]
            return f"{type(e).__name__}: " + (line[0] if line else str(e).splitlines()[0][:120])

    rng_cases = {}
    rng_cases["numpy >= 1.25 (installed, UInt32DType allowlisted)"] = dict(attempt(saved_dir), direct=direct_load())
    acc.load_state(str(saved_dir))
    allow.remove(uint32_cls)
    try:
        rng_cases["numpy < 1.25 forced (UInt32DType not allowlisted)"] = dict(attempt(saved_dir), direct=direct_load())
        acc.load_state(str(saved_dir))
        r = attempt(saved_dir, load_kwargs={"weights_only": False})
        rng_cases["numpy < 1.25 forced + load_state(load_kwargs={'weights_only': False})"] = r
        acc.load_state(str(saved_dir))
        torch.serialization.add_safe_globals([uint32_cls])
        r = attempt(saved_dir)
        kept = uint32_cls in torch.serialization.get_safe_globals()
        rng_cases["numpy < 1.25 forced + torch.serialization.add_safe_globals([type(np.dtype(np.uint32))]) first"] = \
            dict(r, kept_after=kept)
        torch.serialization.clear_safe_globals()
        acc.load_state(str(saved_dir))
        real_wo = other.is_weights_only_available
        other.is_weights_only_available = lambda: False
        os.environ["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"] = "1"  # torch.load's pre-2.6 default, weights_only=False
        try:
            rng_cases["numpy < 1.25 forced, torch 2.3 emulated (is_weights_only_available() False, "
                      "torch.load default weights_only=False)"] = attempt(saved_dir)
        finally:
            other.is_weights_only_available = real_wo
            del os.environ["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"]
    finally:
        allow.append(uint32_cls)
    out["rng_cases"] = rng_cases
    out["branches"] = branches
    torch.save, torch.load = real_torch_save, real_torch_load
    ck.save, ck.load, ck.load_model = real_acc_save, real_acc_load, real_load_model
    assert other.save is other_save
    shutil.rmtree(tmp, ignore_errors=True)
    return out


def run_probe(timeout: float = 120) -> dict:
    env = dict(os.environ, ACCELERATE_USE_CPU="1", CUDA_VISIBLE_DEVICES="", PYTHONHASHSEED="0")
    for k in list(env):
        if k.startswith(("ACCELERATE_", "LOCAL_RANK", "WORLD_SIZE", "RANK", "MASTER_")) and k != "ACCELERATE_USE_CPU":
            env.pop(k)
    p = subprocess.run([sys.executable, str(Path(__file__).resolve()), "probe"], capture_output=True, text=True,
                       timeout=timeout, env=env, cwd=str(ROOT))
    if p.returncode != 0:
        raise RuntimeError(p.stderr[-3000:])
    return json.loads(p.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------------------------------- render
# what each file holds and the accelerate function around the read (from accelerate/checkpointing.py)
WHAT = {
    "model.safetensors": ("model weights", "load_accelerator_state"),
    "pytorch_model.bin": ("model weights (`safe_serialization=False`)", "load_accelerator_state"),
    "optimizer.bin": ("optimizer `state_dict`", "load_accelerator_state"),
    "scheduler.bin": ("scheduler `state_dict`", "load_accelerator_state"),
    "scaler.pt": ("GradScaler `state_dict`", "load_accelerator_state"),
    "random_states_0.pkl": ("step, Python/NumPy/torch RNG (+ device RNG)", "load_accelerator_state, inside try/except"),
    "custom_checkpoint_0.pkl": ("registered object's `state_dict`", "load_custom_state"),
}


def _wo(v):
    return {"unset": "torch default (True on torch >= 2.6)", True: "True", False: "False", "n/a": "n/a"}.get(v, str(v))


def _fail(r):
    if r["error"]:
        return f"raises `{r['error']}`"
    bad = [x for x in r["logs"] if "Could not load" in x]
    return f"no exception, logs `{bad[0]}`" if bad else "loads"


def render(data) -> dict:
    data = json.loads(json.dumps(data).replace("[RANK 0] ", ""))  # the adapter's prefix, not the message
    base, basebin = data["baseline"], data["baseline_bin"]
    reads = dict(base["reads"], **{k: v for k, v in basebin["reads"].items() if k not in base["reads"]})
    rows = ["| File | Written by | Read by (`weights_only`) | Holds | Garbage file | File missing |",
            "| --- | --- | --- | --- | --- | --- |"]
    for f in data["files"] + [x for x in data["files_unsafe"] if x not in data["files"]]:
        via, wo = reads.get(f, ("not read", "n/a"))
        holds, _fn = WHAT.get(f, ("?", "?"))
        br = data["broken"].get(f)
        mi = data["missing"].get(f)
        rows.append(f"| `{f}` | {data['writers'].get(f, '?')} | {via} ({_wo(wo)}) | {holds} | "
                    f"{_fail(br) if br else 'not run'} | {_fail(mi) if mi else 'not run'} |")
    rows[-1] = rows[-1].replace("not run | not run", "not run (same reader as `optimizer.bin`) | falls back to it when `model.safetensors` is missing")
    lost = {}
    for mode in ("broken", "missing"):
        for f, r in data[mode].items():
            if not r["error"]:
                lost[f"{f} {mode}"] = [i for i in data["items"] if i not in r["restored"]]
    v = data["versions"]
    files = "\n".join(rows) + "\n\n" + (
        f"Run: accelerate {v['accelerate']}, torch {v['torch']}, numpy {v['numpy']}, 1 CPU process; "
        f"baseline `load_state` restored: {', '.join(base['restored'])}.\n")
    silent = ["| Broken file (no exception) | Not restored |", "| --- | --- |"]
    for k, items in sorted(lost.items()):
        silent.append(f"| `{k.split()[0]}` {k.split()[1]} | {', '.join(items)} |")
    rng = ["| RNG file load | `accelerate.utils.load` alone | `load_state` outcome | Restored? |",
           "| --- | --- | --- | --- |"]
    for k, r in sorted(data["rng_cases"].items(), key=lambda kv: (not kv[0].startswith("numpy >="), kv[0])):
        ok = "RNG (random, numpy, torch)" in r["restored"] and "accelerator.step" in r["restored"]
        out_ = "; ".join(x for x in r["logs"] if "random" in x) or "-"
        extra = " (the allowlist entry is still registered afterwards)" if r.get("kept_after") else ""
        rng.append(f"| {k} | {r.get('direct', '-')} | `{out_}`{extra} | "
                   f"{'RNG and step restored' if ok else 'RNG and `accelerator.step` NOT restored'} |")
    b = next(iter(data["branches"].items()))
    rng_block = "\n".join(rng) + "\n\n" + (
        f"Allowlist `accelerate.utils.other.TORCH_SAFE_GLOBALS` here: {', '.join('`' + a + '`' for a in data['allowlist'])}; "
        f"the uint32 dtype class here is `{data['uint32_class_here']}`. "
        f"`{b[0]}` returned `{b[1]}`.\n")
    return {"load_state files": files, "load_state silent losses": "\n".join(silent) + "\n",
            "load_state rng": rng_block}


def load_capture():
    return gb.load_json(CAPTURE)


if __name__ == "__main__":
    if sys.argv[1:2] == ["probe"]:
        print(json.dumps(probe(), sort_keys=True, default=str))
    else:
        gb.cli(sys.argv[1] if len(sys.argv) > 1 else "", page=REF, capture=CAPTURE, collect=run_probe,
               render=render, usage=__doc__)

"""Generator for sub-skills/failure-triage/references/failure-matrix.md (torch 2.13.0, accelerate 1.15.0,
deepspeed 0.19.8, CPU).

Each case provokes one common distributed failure for real, in a 1-2 process gloo job on this host
(torchrun, `accelerate launch`, the deepspeed launcher with DS_ACCELERATOR=cpu, or a plain
interpreter), and stores everything it printed (stdout and stderr interleaved, as a user's log
file holds it) in failure_matrix/<case>.log with the launcher's exit code in failure_matrix/cases.json.
The table is rendered from those fixtures only (render()), so the test compares the committed page
with what the committed logs give, and runs the cheapest cases live to show the fixtures still
match the pinned packages.

python tests/failure_triage/generate_failure_matrix.py --run [CASE ...]   run cases, rewrite fixtures
python tests/failure_triage/generate_failure_matrix.py                   print the generated block
python tests/failure_triage/generate_failure_matrix.py --write           rewrite the page's block
"""
from __future__ import annotations

import json
import os
import re
import socket
import sys
import tempfile
import time
from pathlib import Path

_TESTS = str(Path(__file__).resolve().parents[1])  # tests/, for _ports
if _TESTS not in sys.path:
    sys.path.append(_TESTS)
import _ports  # noqa: E402

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
FIX = HERE / "failure_matrix"
DOC = REPO / "sub-skills" / "failure-triage" / "references" / "failure-matrix.md"
TRIAGE = REPO / "sub-skills" / "failure-triage" / "scripts" / "triage_log.py"
TMP = "/tmp/fm"          # every case's scratch folder is renamed to this in the fixtures

PRE = '''
import datetime, os, sys, time
import torch, torch.distributed as dist
T = datetime.timedelta
rank = int(os.environ.get("RANK", "0"))
'''


def _raise(init_comment=""):
    """Rank 1 raises while rank 0 waits in all_reduce (the same script under each launcher)."""
    return PRE + f'''
dist.init_process_group("gloo"){init_comment}
if rank == 1:
    raise ValueError("bad batch on rank 1")
dist.all_reduce(torch.ones(1))
'''


def _signal(name):
    """Rank 1 sends itself signal NAME while rank 0 waits in all_reduce."""
    return PRE + f'''
import signal
dist.init_process_group("gloo")
if rank == 1:
    os.kill(os.getpid(), signal.{name})
dist.all_reduce(torch.ones(1))
'''


# case id -> (launcher, what fails, worker code, env, extra launcher args, timeout s)
CASES = {
    "raise-torchrun": ("torchrun", "rank 1 raises ValueError while rank 0 waits in all_reduce", _raise(), {}, [], 60),
    "raise-accelerate": ("accelerate launch", "same, under `accelerate launch --multi_gpu --num_processes 2` (ACCELERATE_USE_CPU=1)", _raise(), {"ACCELERATE_USE_CPU": "1"}, [], 90),
    "raise-deepspeed": ("deepspeed", "same, under the deepspeed launcher (`--num_gpus 2`, DS_ACCELERATOR=cpu)", _raise("  # deepspeed.init_distributed on the CPU accelerator JIT-builds its shm op first"), {}, [], 120),
    "sigkill-torchrun": ("torchrun", "rank 1 killed by SIGKILL (the OOM killer's signal)", _signal("SIGKILL"), {}, [], 60),
    "sigsegv-torchrun": ("torchrun", "rank 1 dies of SIGSEGV (a native crash)", _signal("SIGSEGV"), {}, [], 60),
    "sigkill-deepspeed": ("deepspeed", "rank 1 killed by SIGKILL under the deepspeed launcher", _signal("SIGKILL"), {}, [], 120),
    "timeout-gloo": ("torchrun", "rank 1 skips an all_reduce (timeout=3 s); it sleeps 8 s, then exits", PRE + '''
dist.init_process_group("gloo", timeout=T(seconds=3))
if rank == 0:
    dist.all_reduce(torch.ones(1))
else:
    time.sleep(8)
''', {}, [], 60),
    "timeout-nccl-env": ("torchrun", "same with TORCH_NCCL_ASYNC_ERROR_HANDLING=1 TORCH_NCCL_BLOCKING_WAIT=1 (NCCL-only variables on gloo)", PRE + '''
dist.init_process_group("gloo", timeout=T(seconds=3))
if rank == 0:
    dist.all_reduce(torch.ones(1))
else:
    time.sleep(8)
''', {"TORCH_NCCL_ASYNC_ERROR_HANDLING": "1", "TORCH_NCCL_BLOCKING_WAIT": "1"}, [], 60),
    "timeout-monitored-barrier": ("torchrun", "rank 1 never reaches monitored_barrier(timeout=3 s)", PRE + '''
dist.init_process_group("gloo")
if rank == 0:
    dist.monitored_barrier(timeout=T(seconds=3))
else:
    time.sleep(8)
''', {}, [], 60),
    "shape-mismatch": ("torchrun", "all_reduce of 2 elements on rank 0, 3 on rank 1", PRE + '''
dist.init_process_group("gloo", timeout=T(seconds=5))
dist.all_reduce(torch.ones(2 + rank))
''', {}, [], 60),
    "shape-mismatch-detail": ("torchrun", "same with TORCH_DISTRIBUTED_DEBUG=DETAIL", PRE + '''
dist.init_process_group("gloo", timeout=T(seconds=5))
dist.all_reduce(torch.ones(2 + rank))
''', {"TORCH_DISTRIBUTED_DEBUG": "DETAIL"}, [], 60),
    "op-mismatch": ("torchrun", "rank 0 all_reduce, rank 1 broadcast (same shape)", PRE + '''
dist.init_process_group("gloo", timeout=T(seconds=5))
t = torch.ones(2)
dist.all_reduce(t) if rank == 0 else dist.broadcast(t, src=0)
''', {}, [], 60),
    "op-mismatch-detail": ("torchrun", "same with TORCH_DISTRIBUTED_DEBUG=DETAIL", PRE + '''
dist.init_process_group("gloo", timeout=T(seconds=5))
t = torch.ones(2)
dist.all_reduce(t) if rank == 0 else dist.broadcast(t, src=0)
''', {"TORCH_DISTRIBUTED_DEBUG": "DETAIL"}, [], 60),
    "master-unreachable": ("python", "rank 1 (env://, no launcher) connects to a MASTER_PORT nobody listens on, timeout=1 s", PRE + '''
dist.init_process_group("gloo", timeout=T(seconds=1))
''', {"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "<freeport>"}, [], 60),
    "master-no-peers": ("python", "rank 0 (env://, no launcher) waits for a rank 1 that never starts, timeout=3 s", PRE + '''
dist.init_process_group("gloo", timeout=T(seconds=3))
''', {"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "<freeport>"}, [], 60),
    "port-in-use": ("torchrun", "`--master-port` is a port another process listens on", PRE + '''
dist.init_process_group("gloo")
''', {}, ["--master-port", "<busyport>"], 60),
    "world-size-mismatch": ("torchrun", "2 workers, script passes world_size=3 (timeout=3 s)", PRE + '''
dist.init_process_group("gloo", world_size=3, rank=rank, timeout=T(seconds=3))
''', {}, [], 60),
    "init-twice": ("python", "init_process_group called a second time (1 process, env://)", PRE + '''
dist.init_process_group("gloo")
dist.init_process_group("gloo")
''', {"RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "<freeport>"}, [], 60),
    "no-destroy": ("torchrun", "script ends without destroy_process_group (gloo)", PRE + '''
dist.init_process_group("gloo")
dist.all_reduce(torch.ones(1))
print("done rank", rank, flush=True)
''', {}, [], 60),
    "ckpt-none-state-dict": ("torchrun", "dcp.save: rank 0 passes a state dict, rank 1 passes None", PRE + '''
import torch.distributed.checkpoint as dcp
dist.init_process_group("gloo", timeout=T(seconds=5))
sd = {"w": torch.ones(2)} if rank == 0 else None
dcp.save(sd, checkpoint_id="/tmp/fm/ckpt")
''', {}, [], 60),
    "ckpt-mismatched-keys": ("torchrun", "dcp.save: rank 0 saves key `a`, rank 1 key `b` (same tensor shape)", PRE + '''
import torch.distributed.checkpoint as dcp
dist.init_process_group("gloo", timeout=T(seconds=5))
dcp.save({"a" if rank == 0 else "b": torch.ones(2)}, checkpoint_id="/tmp/fm/ckpt")
print("saved", sorted(dcp.FileSystemReader("/tmp/fm/ckpt").read_metadata().state_dict_metadata), flush=True)
''', {}, [], 60),
    "ddp-unused": ("torchrun", "DDP model with a parameter the forward never uses, 2 steps", PRE + '''
import torch.nn as nn
dist.init_process_group("gloo", timeout=T(seconds=5))
class M(nn.Module):
    def __init__(self):
        super().__init__(); self.a = nn.Linear(2, 2); self.b = nn.Linear(2, 2)
    def forward(self, x):
        return self.a(x)
m = nn.parallel.DistributedDataParallel(M())
for _ in range(2):
    m(torch.randn(1, 2)).sum().backward()
''', {}, [], 60),
    "ddp-find-unused-none": ("torchrun", "DDP(find_unused_parameters=True), every parameter used, 2 steps", PRE + '''
import torch.nn as nn
dist.init_process_group("gloo", timeout=T(seconds=5))
m = nn.parallel.DistributedDataParallel(nn.Linear(2, 2), find_unused_parameters=True)
for _ in range(2):
    m(torch.randn(1, 2)).sum().backward()
dist.destroy_process_group()
''', {}, [], 60),
    "accelerate-bad-config": ("accelerate launch", "`--config_file` whose distributed_type is not a DistributedType", "print('never runs')\n",
                              {}, ["--config_file", "<cfg>"], 60),
    "accelerate-missing-config": ("accelerate launch", "`--config_file` names a file that does not exist", "print('never runs')\n",
                                  {}, ["--config_file", "<tmp>/missing.yaml"], 60),
}
# the cheapest cases, re-run by the test against the pinned packages
LIVE = ("init-twice", "master-unreachable")


def free_port() -> int:
    """A free port, chosen and reserved by tests/_ports.py (outside the ephemeral range)."""
    return _ports.free_port()


def _env(extra: dict) -> dict:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("TORCH_", "NCCL_", "ACCELERATE_", "PET_", "TORCHELASTIC_"))
           and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "LOCAL_WORLD_SIZE",
                         "PYTHONWARNINGS", "OMP_NUM_THREADS")}
    env.update(PYTHONUNBUFFERED="1", DS_ACCELERATOR="cpu", CUDA_VISIBLE_DEVICES="", LOCAL_SIZE="2",
               TORCH_EXTENSIONS_DIR=str(HERE / "failure_matrix" / ".torch_ext"),
               PATH=str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""))
    env.update(extra)
    return env


def command(case: str, tmp: str, busy_port: int | None = None) -> tuple[list[str], dict]:
    launcher, _, code, env, extra, _ = CASES[case]
    script = os.path.join(tmp, "train.py")
    Path(script).write_text(code)
    port = str(free_port())
    extra = [a.replace("<busyport>", str(busy_port)).replace("<cfg>", os.path.join(tmp, "cfg.yaml"))
             .replace("<tmp>", tmp) for a in extra]
    env = {k: v.replace("<freeport>", port) for k, v in env.items()}
    if launcher == "torchrun":
        args = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2"]
        if "--master-port" not in extra:
            args += ["--master-port", port]
        cmd = args + extra + [script]
    elif launcher == "accelerate launch":
        Path(tmp, "cfg.yaml").write_text("compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_CPUS\n"
                                         "num_processes: 2\nnum_machines: 1\nmixed_precision: 'no'\n")
        base = [sys.executable, "-m", "accelerate.commands.launch"]
        if extra:
            cmd = base + extra + [script]
        else:
            cmd = base + ["--multi_gpu", "--num_processes", "2", "--num_machines", "1", "--mixed_precision", "no",
                          "--dynamo_backend", "no", "--main_process_port", port, script]
    elif launcher == "deepspeed":
        cmd = [sys.executable, "-m", "deepspeed.launcher.runner", "--num_gpus", "2", "--master_port", port, script]
    else:
        cmd = [sys.executable, script]
    return cmd, _env(env)


def run_case(case: str) -> tuple[int, str]:
    """Run one case; return (launcher exit code, its combined output with the scratch folder named TMP)."""
    timeout = CASES[case][5]
    with tempfile.TemporaryDirectory() as tmp:
        busy = None
        if case == "port-in-use":
            busy = socket.socket()
            busy.bind(("127.0.0.1", 0))
            busy.listen()
        cmd, env = command(case, tmp, busy.getsockname()[1] if busy else None)
        code = Path(tmp, "train.py").read_text().replace("/tmp/fm", tmp)
        Path(tmp, "train.py").write_text(code)
        try:
            rc, out, timed_out = _repro_module().run_group(cmd, timeout, env, tmp)
        finally:
            if busy:
                busy.close()
        if timed_out:
            out += f"\n[generator: killed after {timeout} s]\n".encode()
        text = out.decode("utf-8", "replace").replace(os.path.realpath(tmp), TMP).replace(tmp, TMP)
        text = text.replace(str(Path(sys.executable).parent.parent), "<venv>")
        return rc, text


# --------------------------------------------------------------------------- reading a log

EXC = re.compile(r"^(?:\[(?:rank|default)(\d+)\]:\s?)?((?:[A-Za-z_][\w]*\.)*[A-Z]\w*(?:Error|Exception|Exit))(?::|$)")
LAUNCHER_FRAMES = ("torch/distributed/run.py", "torch/distributed/elastic/", "accelerate/commands/",
                   "deepspeed/launcher/", "subprocess.py")
SUMMARY = re.compile(r"(ChildFailedError|CalledProcessError|exits with return code|Root Cause \(first observed failure\))")
SIGNAL_LINE = re.compile(r"Signal (\d+) \((SIG\w+)\) received by PID|exitcode\s*:\s*(-?\d+)|exits with return code = (-?\d+)"
                         r"|returned non-zero exit status (-?\d+)|died with <Signals\.(SIG\w+)")
WARN = re.compile(r"(\w*Warning):|\bWARNING\b|\[W\d{4}")


def read_log(text: str) -> dict:
    """The facts the table shows, from one captured log."""
    lines = text.splitlines()
    excs, frames, in_tb = [], [], False
    for n, line in enumerate(lines, 1):
        body = re.sub(r"^\[(?:rank|default)\d+\]:\s?", "", line)
        if body.startswith("Traceback (most recent call last):"):
            in_tb, frames = True, []
            continue
        if in_tb and body.startswith("  File "):
            frames.append(body)
            continue
        m = EXC.match(line)
        if m and (in_tb or "." in m.group(2)):
            who = "launcher" if frames and any(f in frames[-1] or f in frames[0] for f in LAUNCHER_FRAMES) \
                else (f"rank {m.group(1)}" if m.group(1) else "worker")
            if frames and any("torch/distributed/run.py" in f or "accelerate/commands/launch.py" in f
                              or "deepspeed/launcher/runner.py" in f for f in frames[:3]):
                who = "launcher"
            excs.append((n, m.group(2), who))
            in_tb = False
        elif in_tb and not body.startswith("    ") and body.strip() and not body.startswith("^"):
            pass
    summary = next((n for n, l in enumerate(lines, 1) if SUMMARY.search(l)), None)
    codes = []
    for l in lines:
        m = SIGNAL_LINE.search(l)
        if m:
            g = [x for x in m.groups() if x]
            codes.append(g[1] if m.group(2) else g[0])
    warns = [(n, l.strip()) for n, l in enumerate(lines, 1) if WARN.search(l)]
    return {"excs": excs, "summary": summary, "codes": codes, "warns": warns, "n": len(lines)}


def _repro_module():
    here = str(Path(__file__).resolve().parent)
    if here not in sys.path:
        sys.path.insert(0, here)
    import _repro
    return _repro


def _triage_module():
    """triage_log.py, loaded once under the name _repro.py gives it (one loader for both)."""
    return _repro_module()._triage()


def triage(path: Path) -> dict:
    """What triage_log.py reports for the log (its engine, in this process)."""
    tl = _triage_module()
    result = tl.triage_inputs([str(path)], tl.load_catalog(None), tl.MAX_BYTES, tl.MAX_LINE, tl.MAX_SECONDS, [])
    root = result["root_cause"] or {}
    return {"class": root.get("class"), "line": root.get("line"), "signature": root.get("signature"),
            "text": root.get("text"), "rank": root.get("rank"), "rc": tl.exit_code(result)}


# --------------------------------------------------------------------------- the table

def _cell(s: str, n: int = 110) -> str:
    s = s.replace("|", "\\|").replace("`", "'").strip()
    return "`" + (s if len(s) <= n else s[: n - 1] + "…") + "`"


def render(fix: Path = FIX) -> str:
    meta = json.loads((fix / "cases.json").read_text())
    index = ["| case | launcher | what fails | launcher exit | first exception (who) | triage class |",
             "| --- | --- | --- | --- | --- | --- |"]
    rows = []
    for case in CASES:
        launcher, what = CASES[case][:2]
        log = fix / f"{case}.log"
        text = log.read_text(encoding="utf-8")
        info, tri, rc = read_log(text), triage(log), meta[case]
        first = info["excs"][0] if info["excs"] else None
        classes = []
        for _, cls, who in info["excs"]:
            item = f"`{cls}` ({who})"
            if item not in classes:
                classes.append(item)
        index.append(f"| [{case}](#{case}) | {launcher} | {what} | {rc} | "
                     + (f"`{first[1]}` ({first[2]})" if first else "none") + f" | {tri['class'] or 'none'} |")
        if info["summary"] and first:
            pos = (f"first exception at line {first[0]}, {'before' if first[0] < info['summary'] else 'after'} "
                   f"the launcher summary (line {info['summary']})")
        elif info["summary"]:
            pos = f"no exception line; launcher summary at line {info['summary']}"
        else:
            pos = "no launcher summary"
        lines = text.splitlines()
        first_line = lines[first[0] - 1] if first else (info["warns"][0][1] if info["warns"] else "(no error line)")
        rows += [f"### {case}", "",
                 f"- exit: launcher {rc}; worker codes in the log: "
                 + (", ".join(f"`{c}`" for c in dict.fromkeys(info["codes"])) or "none") + f"; {info['n']} lines",
                 f"- exceptions (who): " + (", ".join(classes) or "none"),
                 f"- first line: {_cell(first_line, 100)}; {pos}"]
        if info["warns"]:
            rows.append(f"- first warning: line {info['warns'][0][0]}: {_cell(info['warns'][0][1], 90)}")
        rows += [f"- triage_log.py: `{tri['class']}`, signature `{tri['signature']}`, exit {tri['rc']}, line "
                 f"{tri['line']}" + (f" (rank {tri['rank']})" if tri["rank"] is not None else "")
                 + (f": {_cell(tri['text'], 100)}" if tri["text"] else ""),
                 ""]
    return "\n".join(index) + "\n\n" + "\n".join(rows).rstrip() + "\n"


def write_doc(block: str) -> None:
    doc = DOC.read_text(encoding="utf-8")
    start, end = "<!-- generated: failure matrix -->\n", "\n<!-- end generated -->"
    head, rest = doc.split(start, 1)
    DOC.write_text(head + start + block + end + rest.split(end, 1)[1], encoding="utf-8")


def main(argv: list[str]) -> int:
    if argv and argv[0] == "--run":
        cases = argv[1:] or list(CASES)
        meta = json.loads((FIX / "cases.json").read_text()) if (FIX / "cases.json").exists() else {}
        for case in cases:
            t = time.monotonic()
            rc, text = run_case(case)
            (FIX / f"{case}.log").write_text(text, encoding="utf-8")
            meta[case] = rc
            print(f"{case}: rc {rc}, {len(text.splitlines())} lines, {time.monotonic() - t:.1f} s", file=sys.stderr)
        (FIX / "cases.json").write_text(json.dumps({k: meta[k] for k in CASES if k in meta}, indent=1) + "\n")
        return 0
    block = render()
    if argv and argv[0] == "--write":
        write_doc(block)
    else:
        sys.stdout.write(block)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

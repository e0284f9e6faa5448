"""Generator for sub-skills/torch-distributed/references/init-method-matrix.md (torch 2.13.0, gloo, CPU).

Each case starts two gloo workers with one launcher (torchrun static, torchrun c10d, two plain
`python` processes with the env:// variables exported, or `mp.spawn`) and one `init_method`
(none, env://, tcp://MASTER_ADDR:MASTER_PORT, tcp:// to another port, file://). The worker wraps the
`TCPStore` / `FileStore` names that torch/distributed/rendezvous.py calls, so the capture records
which store each rank really created (server = `is_master=True`, client otherwise) and on which port,
then all-reduces its rank. The `held` cases first bind and listen on the port with a plain socket
(another job on the host), so what fails and where is captured. The `phase-*` cases are the
multi-node start ladder on one host: which log line marks each phase, and where a peer that never
arrives makes the others wait (init_process_group, the DDP constructor).

python tests/torch_distributed/_init_method_matrix.py capture      run every case, write the capture (~2 min)
python tests/torch_distributed/_init_method_matrix.py capture ID.. rerun the named cases only
python tests/torch_distributed/_init_method_matrix.py render       print the generated block from the capture
"""
from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_TESTS = str(Path(__file__).resolve().parents[1])  # tests/, for _ports
if _TESTS not in sys.path:
    sys.path.append(_TESTS)
import _ports  # noqa: E402

HERE = Path(__file__).resolve().parent
CAPTURE = HERE / "data" / "init_method_capture.json"
CASE_LIMIT_S = 25
PG_TIMEOUT_S = 5

WORKER = r'''
import datetime, json, os, re, sys, time, traceback
import torch, torch.distributed as dist
import importlib
rz = importlib.import_module("torch.distributed.rendezvous")

MODE, OTHER, FILE, PHASE = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
stores = []
_tcp, _file = rz.TCPStore, rz.FileStore
def tcp(*a, **k):
    port = str(k.get("port"))
    where = "MASTER_PORT" if port == os.environ.get("MASTER_PORT") else "the tcp:// port" if port == str(OTHER) else port
    stores.append(("TCPStore server" if k.get("is_master") else "TCPStore client") + " on " + where)
    return _tcp(*a, **k)
def filestore(*a, **k):
    stores.append("FileStore")
    return _file(*a, **k)
rz.TCPStore, rz.FileStore = tcp, filestore

def run(spawn_rank=None):
    if spawn_rank is not None and MODE in ("none", "env"):
        os.environ["RANK"], os.environ["WORLD_SIZE"] = str(spawn_rank), "2"
    rank = int(os.environ.get("RANK", spawn_rank if spawn_rank is not None else -1))
    out = {"rank": rank, "USE_AGENT_STORE": os.environ.get("TORCHELASTIC_USE_AGENT_STORE"),
           "MASTER_PORT": os.environ.get("MASTER_PORT")}
    kw = {"timeout": datetime.timedelta(seconds=%(pg_timeout)d)}
    port = os.environ.get("MASTER_PORT")
    if MODE == "env":
        kw["init_method"] = "env://"
    elif MODE == "tcp":
        kw.update(init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    elif MODE == "tcp-other":
        kw.update(init_method=f"tcp://127.0.0.1:{OTHER}", rank=rank, world_size=2)
    elif MODE == "file":
        kw.update(init_method="file://" + FILE, rank=rank, world_size=2)
    t0 = time.time()
    try:
        if PHASE == "late-init" and rank == 1:
            time.sleep(%(pg_timeout)d + 4)
        dist.init_process_group("gloo", **kw)
        out["phase"] = "init_process_group returned"
        if PHASE == "late-ddp" and rank == 1:
            time.sleep(%(pg_timeout)d + 4)
        if PHASE != "-":
            torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(2, 2))
            out["phase"] = "DDP constructed"
        t = torch.tensor([float(dist.get_rank())])
        dist.all_reduce(t)
        out["result"] = f"all_reduce ok ({int(t.item())})"
    except BaseException as e:
        names = [f.name for f in traceback.extract_tb(e.__traceback__)]
        out["in"] = [n for n in names if n in ("init_process_group", "_verify_param_shape_across_processes",
                     "_sync_module_states", "_create_c10d_store", "_store_based_barrier")]
        msg = re.sub(r"\[/__w/[^\]]*\] ", "", str(e).strip().splitlines()[0])
        msg = re.sub(r"\]:\d+", "]:<peer port>", msg)
        out["result"] = type(e).__name__ + ": " + msg[:140]
    out["seconds"] = round(time.time() - t0)
    out["stores"] = stores
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), f"row{rank}.json"), "w") as f:
        f.write(json.dumps(out))
    sys.stdout.flush(); sys.stderr.flush()
    os._exit(0)

if __name__ == "__main__":
    if os.environ.get("SPAWN") == "1":
        import torch.multiprocessing as mp
        mp.spawn(run, nprocs=2, join=True)
        sys.stdout.flush(); os._exit(0)
    run()
'''

# id, launcher, init mode, held port?, phase probe, note
CASES = [
    ("tr-static-none", "torchrun static", "none", False, "", ""),
    ("tr-static-env", "torchrun static", "env", False, "", ""),
    ("tr-static-tcp", "torchrun static", "tcp", False, "", ""),
    ("tr-static-tcp-other", "torchrun static", "tcp-other", False, "", ""),
    ("tr-static-file", "torchrun static", "file", False, "", ""),
    ("tr-c10d-none", "torchrun c10d", "none", False, "", ""),
    ("tr-c10d-tcp", "torchrun c10d", "tcp", False, "", ""),
    ("legacy-launch-tcp", "torch.distributed.launch", "tcp", False, "", ""),
    ("py-none", "python + env vars", "none", False, "", ""),
    ("py-tcp", "python + env vars", "tcp", False, "", ""),
    ("py-file", "python + env vars", "file", False, "", ""),
    ("spawn-env", "mp.spawn", "env", False, "", ""),
    ("spawn-tcp", "mp.spawn", "tcp", False, "", ""),
    ("spawn-file", "mp.spawn", "file", False, "", ""),
    ("held-tr-static", "torchrun static", "none", True, "", ""),
    ("held-tr-c10d", "torchrun c10d", "none", True, "", ""),
    ("held-py-none", "python + env vars", "none", True, "", ""),
    ("held-py-tcp", "python + env vars", "tcp", True, "", ""),
    ("held-spawn-tcp", "mp.spawn", "tcp", True, "", ""),
    ("phase-ok", "torchrun static", "none", False, "ok", "both ranks construct DDP(Linear) at once"),
    ("phase-late-init", "torchrun static", "none", False, "late-init", "rank 1 sleeps before init_process_group"),
    ("phase-late-ddp", "torchrun static", "none", False, "late-ddp", "rank 1 sleeps between init_process_group and DDP(...)"),
]
INIT_LABEL = {"none": "none (env://)", "env": "`env://`", "tcp": "`tcp://MASTER_ADDR:MASTER_PORT`",
              "tcp-other": "`tcp://` another free port", "file": "`file://`"}
# agent / launcher log lines that mark the phases (LOGLEVEL=INFO, TORCH_CPP_LOG_LEVEL=INFO)
MARKERS = [
    ("rendezvous start", r"Rendezvous'ing worker group"),
    ("rendezvous done", r"Rendezvous complete for workers"),
    ("workers started", r"Starting worker group"),
    ("store connect", r"\[c10d\] The client socket has connected"),
    ("store bind failed", r"EADDRINUSE|address already in use"),
    ("DDP reducer built", r"Reducer: comm-optimized memory allocator"),
    ("worker failed", r"failed \(exitcode"),
]


def free_port() -> int:
    """A free port, chosen and reserved by tests/_ports.py (outside the ephemeral range)."""
    return _ports.free_port()


def run_case(case, py=sys.executable):
    cid, launcher, mode, held, phase, _ = case
    port, other = free_port(), free_port()
    tmp = Path(tempfile.mkdtemp(prefix="initm_"))
    script = tmp / "probe.py"
    script.write_text(WORKER % {"pg_timeout": PG_TIMEOUT_S}, encoding="utf-8")
    args = [mode, str(other), str(tmp / "store"), phase or "-"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHELASTIC", "MASTER_", "PET_"))}
    env.update(LOGLEVEL="INFO", TORCH_CPP_LOG_LEVEL="INFO", OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    env.pop("RANK", None), env.pop("WORLD_SIZE", None)
    torchrun = [py, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc-per-node", "2"]
    if launcher == "torchrun static":
        cmds = [torchrun + ["--master-addr", "127.0.0.1", "--master-port", str(port), str(script)] + args]
    elif launcher == "torchrun c10d":
        cmds = [torchrun + ["--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}",
                            "--rdzv-conf", "join_timeout=10", str(script)] + args]
    elif launcher == "torch.distributed.launch":      # the legacy module: the same elastic agent, static rendezvous
        cmds = [[py, "-m", "torch.distributed.launch", "--nproc-per-node", "2", "--master-addr", "127.0.0.1",
                 "--master-port", str(port), "--use-env", str(script)] + args]
    elif launcher == "mp.spawn":
        env.update(SPAWN="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        cmds = [[py, str(script)] + args]
    else:
        env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE="2")
        cmds = [[py, str(script)] + args, [py, str(script)] + args]
    blocker = None
    if held:
        blocker = socket.socket()
        blocker.bind(("127.0.0.1", port))
        blocker.listen(8)
    t0 = time.time()
    procs = []
    for i, cmd in enumerate(cmds):
        e = dict(env)
        if len(cmds) == 2:
            e["RANK"] = str(i)
        procs.append(subprocess.Popen(cmd, env=e, cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True, start_new_session=True))
    outs, codes = [], []
    for p in procs:
        try:
            out, _ = p.communicate(timeout=CASE_LIMIT_S)
            codes.append(p.returncode)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)      # the launcher and every worker it started
            out, _ = p.communicate()
            codes.append("killed")
        outs.append(out)
    if blocker:
        blocker.close()
    text = "\n".join(outs)
    text = text.replace(str(port), "<port>").replace(str(other), "<other port>")
    rows = sorted((json.loads(f.read_text(encoding="utf-8").replace(str(port), "<port>").replace(str(other), "<other port>"))
                   for f in tmp.glob("row*.json")), key=lambda r: r["rank"])
    for r in rows:
        if r["MASTER_PORT"] not in (None, "<port>"):
            r["MASTER_PORT"] = "<agent's free port>"
    markers = []
    for line in text.splitlines():
        for name, rx in MARKERS:
            if re.search(rx, line) and name not in markers:
                markers.append(name)
    launcher_error = ""
    for line in text.splitlines():
        m = re.search(r"\b(\w*Error: .*)", line)
        if m and not line.startswith("[rank"):
            launcher_error = m.group(1)[:200]
    return {"exit": codes, "ranks": rows, "markers": markers, "launcher_error": launcher_error,
            "seconds": round(time.time() - t0)}


def _grouped(pairs):
    """[(rank, text)] -> 'r0, r1: text' when the ranks agree, one line per rank otherwise."""
    order, by = [], {}
    for rank, text in pairs:
        if text not in by:
            order.append(text)
        by.setdefault(text, []).append(f"r{rank}")
    return ["{}: {}".format(", ".join(by[t]), t) for t in order]


def store_cell(rows):
    return "<br>".join(_grouped((r["rank"], ", ".join(r["stores"]) or "none") for r in rows)) or "no worker ran"


def result_cell(res, launcher):
    cells = _grouped((r["rank"], r["result"] + (f" (in {' > '.join(r['in'])})" if r.get("in") else "")
                      + f", {r['seconds']} s") for r in res["ranks"])
    if res["launcher_error"] and launcher.startswith(("torchrun", "torch.distributed.launch")):
        cells.append("launcher: " + res["launcher_error"])
    cells.append("exit " + ", ".join(str(c) for c in res["exit"]))
    return "<br>".join(cells)


LONG = re.compile(r"The server socket has failed to listen on any local network address\. port: <port>, useIpv6: \w+, "
                  r"code: -98, name: EADDRINUSE, message: address already in use")


def render(cap):
    out = ["| id | launcher | init_method | port | `TORCHELASTIC_USE_AGENT_STORE` | store each rank created | result |",
           "| --- | --- | --- | --- | --- | --- | --- |"]
    for cid, launcher, mode, held, phase, _ in CASES:
        if phase:
            continue
        res = cap[cid]
        agent = sorted({str(r["USE_AGENT_STORE"]) for r in res["ranks"]}) or ["-"]
        out.append(f"| {cid} | {launcher} | {INIT_LABEL[mode]} | {'held by another process' if held else 'free'} "
                   f"| {', '.join(agent).replace('None', 'unset')} | {store_cell(res['ranks'])} | {result_cell(res, launcher)} |")
    out += ["", "| id | what the run did | log lines seen, in order | result |", "| --- | --- | --- | --- |"]
    for cid, launcher, mode, held, phase, note in CASES:
        res = cap[cid]
        if phase:
            out.append(f"| {cid} | {note} | {' → '.join(res['markers'])} | {result_cell(res, launcher)} |")
    return LONG.sub("The server socket has failed to listen ... EADDRINUSE ...", "\n".join(out)) + "\n"


def main(argv):
    if not argv or argv[0] not in ("capture", "render"):
        print(__doc__)
        return 2
    if argv[0] == "render":
        print(render(json.loads(CAPTURE.read_text(encoding="utf-8"))), end="")
        return 0
    cap = json.loads(CAPTURE.read_text(encoding="utf-8")) if CAPTURE.exists() and argv[1:] else {}
    for case in CASES:
        if argv[1:] and case[0] not in argv[1:]:
            continue
        cap[case[0]] = run_case(case)
        print(case[0], json.dumps(cap[case[0]])[:300], file=sys.stderr, flush=True)
        CAPTURE.write_text(json.dumps(cap, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

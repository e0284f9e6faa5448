"""Generator for sub-skills/torch-distributed/references/torchrun-worker-matrix.md (torch 2.13.0).

Each configuration runs torch's real launcher (torch.distributed.run.parse_args -> run) in this
process, on this host, with a free port; the workers are tiny Python processes (no torch import)
that dump sys.orig_argv and os.environ and exit 0. A row shows the argv each worker ran and every
variable that differs from the environment torchrun itself was started with. Static two-node rows
run as two processes of this module (one agent each) beside the single-node rows.

python tests/torch_distributed/_torchrun_matrix.py            print the generated block
python tests/torch_distributed/_torchrun_matrix.py node ARGS PORT DIR  (internal) run one static node, dump JSON
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

_TESTS = str(Path(__file__).resolve().parents[1])  # tests/, for _ports
if _TESTS not in sys.path:
    sys.path.append(_TESTS)
import _ports  # noqa: E402

WORKER = r'''#!{exe}
import json, os, sys
out = os.environ["TRM_OUT"]
with open(os.path.join(out, "w%s.%s.json" % (os.environ.get("TORCHELASTIC_RESTART_COUNT"), os.environ.get("RANK"))), "w") as f:
    json.dump({{"argv": sys.orig_argv, "env": dict(os.environ)}}, f)
if "fail_once=1" in sys.argv and os.environ["RANK"] == "1" and os.environ["TORCHELASTIC_RESTART_COUNT"] == "0":
    sys.exit(3)
'''

# (case, torchrun arguments before the script, shell variables, entry: script | module | binary)
CASES = [
    ("single node, 2 workers", "--nproc-per-node 2", {}, "script"),
    ("single node, --master-port given (static)", "--nproc-per-node 2 --master-port <port>", {}, "script"),
    ("1 worker (OMP_NUM_THREADS unset)", "--nproc-per-node 1", {}, "script"),
    ("shell has OMP_NUM_THREADS=4", "--nproc-per-node 2", {"OMP_NUM_THREADS": "4"}, "script"),
    ("--standalone", "--standalone --nproc-per-node 2", {}, "script"),
    ("static 2 nodes, node 0", "--nnodes 2 --node-rank 0 --master-addr 127.0.0.1 --master-port <port> --nproc-per-node 2", {}, "script"),
    ("static 2 nodes, node 1", "--nnodes 2 --node-rank 1 --master-addr 127.0.0.1 --master-port <port> --nproc-per-node 2", {}, "script"),
    ("c10d rendezvous", "--nnodes 1 --nproc-per-node 2 --rdzv-backend c10d --rdzv-endpoint 127.0.0.1:<port> --rdzv-id job7", {}, "script"),
    ("--max-restarts 2", "--nproc-per-node 2 --max-restarts 2", {}, "script"),
    ("--max-restarts 2, rank 1 exits 3 once: attempt 1", "--nproc-per-node 2 --max-restarts 2", {}, "fail"),
    ("logs: filter, tee, log dir", "--nproc-per-node 2 --local-ranks-filter 1 --tee 3 --log-dir <logs>", {}, "script"),
    ("-m (module)", "--nproc-per-node 2 -m", {}, "module"),
    ("--no-python", "--nproc-per-node 2 --no-python", {}, "binary"),
    ("PET_NPROC_PER_NODE=2, no flag", "", {"PET_NPROC_PER_NODE": "2"}, "script"),
    ("--virtual-local-rank", "--nproc-per-node 2 --virtual-local-rank", {}, "script"),
    ("--virtual-local-rank, shell has CUDA_VISIBLE_DEVICES=4,5", "--nproc-per-node 2 --virtual-local-rank",
     {"CUDA_VISIBLE_DEVICES": "4,5"}, "script"),
    # s11-td-i02: what an exported MASTER_* / RANK / WORLD_SIZE does (nothing: overwritten), and the PET_* form that is read
    ("shell exports MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK", "--nproc-per-node 2",
     {"MASTER_ADDR": "10.0.0.9", "MASTER_PORT": "<port>", "RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "3"}, "script"),
    ("shell has PET_MASTER_ADDR, PET_MASTER_PORT, no flag", "--nproc-per-node 2",
     {"PET_MASTER_ADDR": "127.0.0.1", "PET_MASTER_PORT": "<port>"}, "script"),
    ("shell has CUDA_VISIBLE_DEVICES=4,5 (second job on one machine)", "--nproc-per-node 2",
     {"CUDA_VISIBLE_DEVICES": "4,5"}, "script"),
]
SCRUB = {"OMP_NUM_THREADS", "CUDA_VISIBLE_DEVICES", "TORCH_NCCL_ASYNC_ERROR_HANDLING", "MASTER_ADDR", "MASTER_PORT", "RANK", "LOCAL_RANK",
         "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_NAME", "ROLE_WORLD_SIZE"}
NODE_TIMEOUT_S = 120      # a static node whose peer never comes would otherwise wait 600 s
ENTRY = {"script": "train.py lr=0.1", "module": "train lr=0.1", "binary": "./train.py lr=0.1", "fail": "train.py fail_once=1"}


def free_port() -> int:
    """A free port, chosen and reserved by tests/_ports.py (outside the ephemeral range)."""
    return _ports.free_port()


@contextlib.contextmanager
def saved_environ():
    before = dict(os.environ)
    try:
        yield before
    finally:
        os.environ.clear()
        os.environ.update(before)


def run_one(argstr, shell, entry, port, work, every_attempt=False):
    """Run torchrun's code path in this process; return (parent env, [worker dumps]): the last
    attempt's workers, or with every_attempt every attempt's, in (attempt, rank) order."""
    import logging
    import signal
    import threading
    from torch.distributed.run import parse_args, run
    out = tempfile.mkdtemp(dir=work)
    Path(work, "train.py").write_text(WORKER.format(exe=sys.executable), encoding="utf-8")
    os.chmod(Path(work, "train.py"), 0o755)
    argv = argstr.replace("<port>", str(port)).replace("<logs>", os.path.join(out, "logs")).split()
    argv += ["--monitor-interval", "0.05", *ENTRY[entry].split()]
    cwd = os.getcwd()
    with saved_environ():
        for k in list(os.environ):      # a clean start: what the rows show must not depend on the caller's shell
            if k in SCRUB or k.startswith(("PET_", "TORCHELASTIC_")):
                del os.environ[k]
        os.environ.update({k: v.replace("<port>", str(port)) for k, v in shell.items()})
        os.environ["TRM_OUT"] = out
        parent = dict(os.environ)
        os.chdir(work)
        handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)}
        thread_name = threading.current_thread().name
        logging.disable(logging.CRITICAL)
        try:
            with open(os.devnull, "w") as null, contextlib.redirect_stderr(null), contextlib.redirect_stdout(null):
                run(parse_args(argv))
        finally:      # leave the caller (a pytest session) as it was: cwd, logging, signal handlers
            os.chdir(cwd)
            logging.disable(logging.NOTSET)
            for sig, h in handlers.items():
                signal.signal(sig, h)
            threading.current_thread().name = thread_name
    if every_attempt:
        return parent, [json.loads(p.read_text()) for p in sorted(Path(out).glob("w*.json"))]
    last = max(p.name.split(".")[0] for p in Path(out).glob("w*.json"))   # the last attempt's workers
    dumps = [json.loads(p.read_text()) for p in sorted(Path(out).glob(f"{last}.*.json"))]
    return parent, dumps


# Re-rendezvous after a worker failure: what MASTER_ADDR / MASTER_PORT each attempt's workers get.
# (case, torchrun arguments before the script, shell variables); rank 1 exits 3 in attempt 0 only.
RESTART_CASES = [
    ("c10d, shared store (default)",
     "--nnodes 1 --nproc-per-node 2 --rdzv-backend c10d --rdzv-endpoint 127.0.0.1:<port> --rdzv-id job7 --max-restarts 1", {}),
    ("c10d, TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1",
     "--nnodes 1 --nproc-per-node 2 --rdzv-backend c10d --rdzv-endpoint 127.0.0.1:<port> --rdzv-id job7 --max-restarts 1",
     {"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}),
    ("static, --master-port given", "--nnodes 1 --nproc-per-node 2 --master-addr 127.0.0.1 --master-port <port> --max-restarts 1", {}),
]


def restart_rows(work):
    """One table row per RESTART_CASES entry: per attempt, the MASTER_ADDR / MASTER_PORT /
    TORCHELASTIC_RESTART_COUNT rank 0 and rank 1 saw; free ports are named <port A>, <port B> in
    order of appearance, so "the same port again" and "a new port" read apart."""
    rows = []
    for case, argstr, shell in RESTART_CASES:
        port = free_port()
        _, dumps = run_one(argstr, shell, "fail", port, work, every_attempt=True)
        names = {}
        cells = []
        for attempt in sorted({d["env"]["TORCHELASTIC_RESTART_COUNT"] for d in dumps}):
            seen = set()
            for d in dumps:
                e = d["env"]
                if e["TORCHELASTIC_RESTART_COUNT"] != attempt:
                    continue
                p = e["MASTER_PORT"]
                if p == str(port):
                    shown = "<port>"
                else:
                    shown = names.setdefault(p, f"<port {'ABCDEFGH'[len(names)]}>")
                seen.add(f"`MASTER_ADDR={mask(e['MASTER_ADDR'], work, port)}` `MASTER_PORT={shown}` "
                         f"`TORCHELASTIC_USE_AGENT_STORE={e['TORCHELASTIC_USE_AGENT_STORE']}`")
            assert len(seen) == 1, (case, attempt, seen)    # both ranks of one attempt see the same store
            cells.append(f"`TORCHELASTIC_RESTART_COUNT={attempt}`: " + seen.pop())
        shown_env = " ".join(f"{k}={v}" for k, v in shell.items())
        cmd = "torchrun " + argstr + " " + ENTRY["fail"]
        rows.append(f"| {len(rows) + 1} | {case} | `{cmd}`" + (f"<br>shell: `{shown_env}`" if shown_env else "")
                    + " | " + "<br>".join(cells) + " |")
    head = ("| # | Case | Command (rank 1 exits 3 in attempt 0, so the agent restarts both workers once) "
            "| What the workers of each attempt get (both ranks the same) |\n| --- | --- | --- | --- |")
    return head + "\n" + "\n".join(rows) + "\n"


def mask(value, work, port, key=""):
    if key == "MASTER_PORT" and value.isdigit() and value != str(port):
        return "<free port>"
    value = value.replace(work, "<cwd>").replace(sys.executable, "python")
    value = re.sub(r"/[^ ]*/torchelastic_[^/]+/[^/]+/", "<tmp>/torchelastic_<id>/<run>/", value)
    value = re.sub(r"<cwd>/[^/]+/logs/[^/]+/", "<logs>/<run>/", value)
    value = re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "<uuid>", value)
    value = value.replace(str(port), "<port>")
    host = socket.gethostname()
    for h in {socket.getfqdn(), host}:
        if h and value == h:
            value = "<hostname>"
    return value


def row_cells(parent, dumps, work, port, entry):
    per_rank = []
    argvs = set()
    for d in dumps:
        argv = d["argv"]
        if entry == "binary":
            argv = argv[1:]          # the interpreter named by train.py's shebang, not torchrun's
        elif argv and argv[0] == sys.executable:
            argv = ["python"] + argv[1:]
        argvs.add(" ".join(mask(a, work, port) for a in argv))
        env = {k: mask(v, work, port, k) for k, v in d["env"].items()
               if k != "TRM_OUT" and parent.get(k) != v}
        per_rank.append(env)
    return sorted(argvs), per_rank


def fmt_env(per_rank):
    keys = sorted(set().union(*per_rank))
    lines = []
    for k in keys:
        vals = [r.get(k) for r in per_rank]
        if len(set(vals)) == 1:
            lines.append(f"`{k}={vals[0]}`")
        else:
            lines.append(f"`{k}`: " + ", ".join(f"`{v}`" if v is not None else "unset" for v in vals))
    return lines


def _start_node(argstr, port, work):
    os.makedirs(work, exist_ok=True)
    return subprocess.Popen([sys.executable, __file__, "node", argstr, str(port), work],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})


def _finish_node(proc, work, into):
    try:
        out, _ = proc.communicate(timeout=NODE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise RuntimeError("a static-node torchrun did not finish") from None
    if proc.returncode:
        raise RuntimeError(f"a static-node torchrun exited with {proc.returncode}")
    r = json.loads(out)
    return r["parent"], [json.loads(json.dumps(d).replace(work, into)) for d in r["dumps"]]


def generate():
    rows = []
    with tempfile.TemporaryDirectory() as work:
        work = os.path.realpath(work)
        # the two static nodes are separate processes (each its own agent), started first, run beside the rest
        port2 = free_port()
        static = {c[0]: (c, _start_node(c[1], port2, os.path.join(work, c[0][-1]))) for c in CASES
                  if c[0].startswith("static 2 nodes")}
        results = []
        for case, argstr, shell, entry in CASES:
            if case in static:
                continue
            port = free_port()
            results.append((case, argstr, shell, entry, port, *run_one(argstr, shell, entry, port, work)))
        for (case, argstr, shell, entry), proc in static.values():
            results.append((case, argstr, shell, entry, port2,
                            *_finish_node(proc, os.path.join(work, case[-1]), work)))
        order = [c[0] for c in CASES]
        results.sort(key=lambda r: order.index(r[0]))
        for c, a, sh, e, port, parent, dumps in results:
            argvs, per_rank = row_cells(parent, dumps, work, port, e)
            shown = " ".join(f"{k}={v}" for k, v in sh.items())
            cmd = ("torchrun " + a.replace("<logs>", "logs") + (" " if a else "") + ENTRY[e])
            rows.append((f"| {len(rows) + 1} | {c} | `{cmd}`" + (f"<br>shell: `{shown}`" if shown else "")
                         + f" | {len(per_rank)} | " + "<br>".join(f"`{x}`" for x in argvs) + " | ",
                         fmt_env(per_rank)))
    common = [x for x in rows[0][1] if all(x in r[1] for r in rows)]   # same line in every row
    body = [f"{start}**C**<br>" + "<br>".join(x for x in env if x not in common) + " |" for start, env in rows]
    head = ("| # | Case | Command | Workers | Worker argv | Variables each worker gets that torchrun's own environment lacks (one value, or per local rank 0, 1) |\n"
            "| --- | --- | --- | --- | --- | --- |")
    legend = "**C** in a cell = the variables every row below shares: " + ", ".join(common) + "."
    with tempfile.TemporaryDirectory() as work:
        restarts = restart_rows(os.path.realpath(work))
    return {"matrix": legend + "\n\n" + head + "\n" + "\n".join(body) + "\n", "restarts": restarts}


if __name__ == "__main__":
    if sys.argv[1:2] == ["node"]:
        argstr, port, work = sys.argv[2], int(sys.argv[3]), sys.argv[4]
        os.makedirs(work, exist_ok=True)
        parent, dumps = run_one(argstr, {}, "script", port, work)
        print(json.dumps({"parent": parent, "dumps": dumps}))
    elif sys.argv[1:2] == ["restarts"]:
        with tempfile.TemporaryDirectory() as tmp:
            print(restart_rows(os.path.realpath(tmp)))
    else:
        out = generate()
        print(out["matrix"])
        print(out["restarts"])

"""Generator for sub-skills/torch-distributed/references/multinode-rank-matrix.md (torch 2.13.0, accelerate 1.15.0).

Two "nodes" on this one machine: each case starts two launcher invocations (torchrun, accelerate
launch, or a bare `python` for the env:// rows) as separate processes with their own node rank /
machine rank / SLURM_* / PET_* variables, one worker per node, the same store on 127.0.0.1, and
short rendezvous timeouts. Never more than two processes of a case run at once (plus their one
worker each). Workers record the variables below (and, in the env:// rows, join a gloo group and
all-reduce their rank). Failing cases record each launcher's exit code, the last exception line
it printed and how long it ran.

python tests/torch_distributed/_multinode_matrix.py capture      run every case, write the capture JSON (~2-4 min)
python tests/torch_distributed/_multinode_matrix.py capture ID.. rerun the named cases only, update them in the capture
python tests/torch_distributed/_multinode_matrix.py render       print the generated block from the capture
"""
from __future__ import annotations

import json
import os
import re
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
CAPTURE = HERE / "data" / "multinode_capture.json"
KEYS = ["RANK", "LOCAL_RANK", "GROUP_RANK", "ROLE_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_WORLD_SIZE",
        "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID", "LOCAL_SIZE", "CROSS_RANK", "CROSS_SIZE"]
NODE_LIMIT_S = 60          # a launcher still running after this is killed (recorded as "killed")

WORKER = r'''
import json, os, sys
env = {k: os.environ.get(k) for k in %(keys)r}
mode = [a for a in sys.argv[1:] if not a.startswith("--local_rank")][0]
if len(sys.argv) > 2:
    env["argv"] = " ".join(sys.argv[1:])     # what the launcher added (deepspeed: --local_rank=N)
if mode == "slurm":      # what a hand-rolled SLURM script does before init_process_group("env://")
    os.environ["RANK"] = os.environ["SLURM_PROCID"]
    os.environ["WORLD_SIZE"] = os.environ["SLURM_NTASKS"]
    os.environ["LOCAL_RANK"] = os.environ["SLURM_LOCALID"]
    env = {k: os.environ.get(k) for k in %(keys)r}
if mode in ("slurm", "env"):
    import datetime, torch, torch.distributed as dist
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=20))
    t = torch.tensor([float(dist.get_rank())])
    dist.all_reduce(t)
    env["all_reduce(rank)"] = str(int(t.item()))
    env["get_rank()"] = str(dist.get_rank())
    dist.destroy_process_group()
if mode.startswith("save"):      # Accelerate save_state into this node's own folder (node-local disk)
    import torch
    from accelerate import Accelerator
    from accelerate.utils import ProjectConfiguration
    acc = Accelerator(cpu=True, project_config=ProjectConfiguration(project_dir=".", save_on_each_node=mode == "save_each"))
    model, opt = acc.prepare(torch.nn.Linear(2, 2), torch.optim.SGD(torch.nn.Linear(2, 2).parameters(), lr=0.1))
    acc.save_state("ckpt")
    acc.wait_for_everyone()
    env["files in ckpt/"] = ",".join(sorted(os.listdir("ckpt")))
    acc.end_training()
with open(os.path.join(os.environ["MNM_OUT"], "%%s.%%s.json" %% (os.environ["MNM_NODE"], os.getpid())), "w") as f:
    json.dump(env, f)
''' % {"keys": KEYS}

TR = "torchrun"      # shown in the table; run as `python -m torch.distributed.run`
AL = "accelerate launch"
DS = "deepspeed"     # run as `python -m deepspeed.launcher.runner`, DS_ACCELERATOR=cpu
PY = "python"
STATIC = "--nnodes 2 --nproc-per-node 1 --master-addr 127.0.0.1 --master-port <port>"
C10D = "--nproc-per-node 1 --rdzv-backend c10d --rdzv-endpoint 127.0.0.1:<port>"
ACC = "--multi_gpu --num_processes 2 --num_machines 2 --main_process_ip 127.0.0.1"
SLURM = {"SLURM_NTASKS": "2", "SLURM_LOCALID": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "<port>"}
# Kubeflow training-operator v1 PyTorchJob, Master + 1 Worker, nprocPerNode 1 (pkg/controller.v1/pytorch/envvar.go)
KF = {"MASTER_ADDR": "127.0.0.1", "PET_MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "<port>", "PET_MASTER_PORT": "<port>",
      "WORLD_SIZE": "2", "PET_NPROC_PER_NODE": "1", "PET_NNODES": "2", "PYTHONUNBUFFERED": "1"}
DSA = "--hostfile hostfile --no_ssh --master_addr 127.0.0.1 --master_port <port>"
ACC_FILE = ("distributed_type: MULTI_GPU\nnum_machines: 2\nnum_processes: 2\nmachine_rank: {rank}\n"
            "main_process_ip: 127.0.0.1\nmain_process_port: <port>\nmixed_precision: 'no'\n")

# (id, group, case, [(launcher, args, env, start delay s, worker mode) for node A, node B])
CASES = [
    ("static", "torchrun", "static: --node-rank 0 and 1",
     [(TR, STATIC + " --node-rank 0", {}, 0, "dump"), (TR, STATIC + " --node-rank 1", {}, 0, "dump")]),
    ("static-rank1-first", "torchrun", "static: node-rank 1 started 3 s before node-rank 0",
     [(TR, STATIC + " --node-rank 0", {}, 3, "dump"), (TR, STATIC + " --node-rank 1", {}, 0, "dump")]),
    ("c10d-id", "torchrun", "c10d, --rdzv-id job7 on both",
     [(TR, C10D + " --nnodes 2 --rdzv-id job7", {}, 0, "dump"), (TR, C10D + " --nnodes 2 --rdzv-id job7", {}, 2, "dump")]),
    ("c10d-noid", "torchrun", "c10d, no --rdzv-id",
     [(TR, C10D + " --nnodes 2", {}, 0, "dump"), (TR, C10D + " --nnodes 2", {}, 2, "dump")]),
    ("c10d-minmax", "torchrun", "c10d, --nnodes 1:2 on both",
     [(TR, C10D + " --nnodes 1:2 --rdzv-id job7", {}, 0, "dump"), (TR, C10D + " --nnodes 1:2 --rdzv-id job7", {}, 2, "dump")]),
    ("pet", "Kubeflow", "PyTorchJob env (PET_*), plain `torchrun train.py`",
     [(TR, "", {**KF, "RANK": "0", "PET_NODE_RANK": "0"}, 0, "dump"),
      (TR, "", {**KF, "RANK": "1", "PET_NODE_RANK": "1"}, 0, "dump")]),
    ("kf-python", "Kubeflow", "PyTorchJob env, no launcher: `python train.py` (env://)",
     [(PY, "", {**KF, "RANK": "0", "PET_NODE_RANK": "0"}, 0, "env"),
      (PY, "", {**KF, "RANK": "1", "PET_NODE_RANK": "1"}, 0, "env")]),
    ("slurm-env", "SLURM", "srun task per node, RANK/WORLD_SIZE/LOCAL_RANK from SLURM_PROCID/NTASKS/LOCALID (env://)",
     [(PY, "", {**SLURM, "SLURM_PROCID": "0", "SLURM_NODEID": "0"}, 0, "slurm"),
      (PY, "", {**SLURM, "SLURM_PROCID": "1", "SLURM_NODEID": "1"}, 0, "slurm")]),
    ("acc", "accelerate", "--machine_rank 0 / 1, --main_process_port given",
     [(AL, ACC + " --machine_rank 0 --main_process_port <port>", {}, 0, "dump"),
      (AL, ACC + " --machine_rank 1 --main_process_port <port>", {}, 0, "dump")]),
    ("acc-file", "accelerate", "the same from a config file (machine_rank 0 / 1)",
     [(AL, "--config_file cfg0.yaml", {}, 0, "dump"), (AL, "--config_file cfg1.yaml", {}, 0, "dump")]),
    ("acc-noport", "accelerate", "--main_process_port left unset",
     [(AL, ACC + " --machine_rank 0", {}, 0, "dump"), (AL, ACC + " --machine_rank 1", {}, 0, "dump")]),
    ("ds", "deepspeed", "`--no_ssh --node_rank 0 / 1` (hostfile `node-a slots=1`, `node-b slots=1`), worker joins gloo (env://)",
     [(DS, DSA + " --node_rank 0", {}, 0, "env"), (DS, DSA + " --node_rank 1", {}, 0, "env")]),
    ("acc-port0", "accelerate", "--main_process_port 0 on both",
     [(AL, ACC + " --machine_rank 0 --main_process_port 0 --rdzv_conf timeout=8", {}, 0, "dump"),
      (AL, ACC + " --machine_rank 1 --main_process_port 0 --rdzv_conf timeout=8", {}, 0, "dump")]),
    ("acc-same-rank", "accelerate", "mistake: --machine_rank 0 on both",
     [(AL, ACC + " --machine_rank 0 --main_process_port <port> --rdzv_conf timeout=8", {}, 0, "dump"),
      (AL, ACC + " --machine_rank 0 --main_process_port <port> --rdzv_conf timeout=8", {}, 1, "dump")]),
    ("static-same-rank", "torchrun", "mistake: --node-rank 0 on both",
     [(TR, STATIC + " --node-rank 0 --rdzv-conf timeout=8", {}, 0, "dump"),
      (TR, STATIC + " --node-rank 0 --rdzv-conf timeout=8", {}, 1, "dump")]),
    ("static-nnodes", "torchrun", "mistake: --nnodes 2 on node 0, --nnodes 3 on node 1",
     [(TR, STATIC + " --node-rank 0 --rdzv-conf timeout=8", {}, 0, "dump"),
      (TR, STATIC.replace("--nnodes 2", "--nnodes 3") + " --node-rank 1 --rdzv-conf timeout=8", {}, 0, "dump")]),
    ("static-missing", "torchrun", "mistake: node 1 never starts (static, --rdzv-conf timeout=8)",
     [(TR, STATIC + " --node-rank 0 --rdzv-conf timeout=8", {}, 0, "dump")]),
    ("c10d-missing", "torchrun", "mistake: second node never starts (c10d, --rdzv-conf join_timeout=8)",
     [(TR, C10D + " --nnodes 2 --rdzv-id job7 --rdzv-conf join_timeout=8", {}, 0, "dump")]),
    ("c10d-id-mismatch", "torchrun", "mistake: --rdzv-id job7 and job8",
     [(TR, C10D + " --nnodes 2 --rdzv-id job7 --rdzv-conf join_timeout=8", {}, 0, "dump"),
      (TR, C10D + " --nnodes 2 --rdzv-id job8 --rdzv-conf join_timeout=8", {}, 0, "dump")]),
    ("c10d-nnodes-small-first", "torchrun", "mistake: c10d --nnodes 2 joins first, --nnodes 3 joins 4 s later",
     [(TR, C10D + " --nnodes 2 --rdzv-id job7 --rdzv-conf join_timeout=15", {}, 0, "dump"),
      (TR, C10D + " --nnodes 3 --rdzv-id job7 --rdzv-conf join_timeout=15", {}, 4, "dump")]),
    ("c10d-nnodes-small-last", "torchrun", "mistake: c10d --nnodes 3 joins first, --nnodes 2 joins 4 s later",
     [(TR, C10D + " --nnodes 3 --rdzv-id job7 --rdzv-conf join_timeout=30", {}, 0, "dump"),
      (TR, C10D + " --nnodes 2 --rdzv-id job7 --rdzv-conf join_timeout=30", {}, 4, "dump")]),
    ("ds-same-rank", "deepspeed", "mistake: `--no_ssh --node_rank 0` on both (init_process_group timeout=20 s)",
     [(DS, DSA + " --node_rank 0", {}, 0, "env"), (DS, DSA + " --node_rank 0", {}, 1, "env")]),
    ("slurm-missing", "SLURM", "mistake: env://, task 1 never starts (init_process_group timeout=20 s)",
     [(PY, "", {**SLURM, "SLURM_PROCID": "0", "SLURM_NODEID": "0"}, 0, "slurm")]),
    ("save-default", "torchrun + Accelerator", "`save_state` on node-local disks, `save_on_each_node` off (DDP path, `Accelerator(cpu=True)`, each node its own folder)",
     [(TR, STATIC + " --node-rank 0", {}, 0, "save"), (TR, STATIC + " --node-rank 1", {}, 0, "save")]),
    ("save-each", "torchrun + Accelerator", "the same with `ProjectConfiguration(save_on_each_node=True)`",
     [(TR, STATIC + " --node-rank 0", {}, 0, "save_each"), (TR, STATIC + " --node-rank 1", {}, 0, "save_each")]),
]
LIVE = ("slurm-env",)      # the rows the test reruns (no launcher: two bare processes)


def free_port() -> int:
    """A free port, chosen and reserved by tests/_ports.py (outside the ephemeral range)."""
    return _ports.free_port()


def _argv(launcher, args, mode):
    entry = ["train.py", mode]
    if launcher == TR:
        return [sys.executable, "-m", "torch.distributed.run", "--monitor-interval", "0.1", *args.split(), *entry]
    if launcher == AL:
        return [sys.executable, "-m", "accelerate.commands.launch", *args.split(), *entry]
    if launcher == DS:
        return [sys.executable, "-m", "deepspeed.launcher.runner", *args.split(), *entry]
    return [sys.executable, *entry]


def _last_exception(text):
    found = None
    for line in text.splitlines():
        m = re.match(r"^\s*((?:[A-Za-z_][\w]*\.)*[A-Z]\w*(?:Error|Exception|Timeout\w*))(?::\s*(.*))?$", line)
        if m and not line.startswith(" "):
            found = (m.group(1).rsplit(".", 1)[-1], (m.group(2) or "").strip())
    return found


def run_case(case, work):
    cid, _, _, nodes = case
    port = free_port()
    out = Path(work, cid)
    for node in "AB":       # each node runs in its own folder (its "local disk")
        (out / node).mkdir(parents=True)
        (out / node / "train.py").write_text(WORKER, encoding="utf-8")
        (out / node / "hostfile").write_text("node-a slots=1\nnode-b slots=1\n", encoding="utf-8")
        for r in (0, 1):
            (out / node / f"cfg{r}.yaml").write_text(ACC_FILE.format(rank=r).replace("<port>", str(port)), encoding="utf-8")
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("PET_", "SLURM_", "TORCHELASTIC_")) and k not in KEYS and k != "OMP_NUM_THREADS"}
    base.update({"MNM_OUT": str(out), "HF_HUB_OFFLINE": "1", "ACCELERATE_CONFIG_FILE": str(out / "none.yaml"),
                 "HF_HOME": str(out / "hf"), "DS_ACCELERATOR": "cpu",
                 "TORCH_EXTENSIONS_DIR": str(out / "torch_extensions")})   # never the shared cache (stale locks)
    t0 = time.monotonic()
    procs = []
    order = sorted(range(len(nodes)), key=lambda i: nodes[i][3])
    for i in order:
        launcher, args, env, delay, mode = nodes[i]
        while time.monotonic() - t0 < delay:
            time.sleep(0.05)
        e = {**base, **{k: v.replace("<port>", str(port)) for k, v in env.items()}, "MNM_NODE": "AB"[i]}
        p = subprocess.Popen(_argv(launcher, args.replace("<port>", str(port)), mode), cwd=out / "AB"[i], env=e,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        procs.append((i, p, time.monotonic()))
    result = {"nodes": {}}
    for i, p, started in procs:
        try:
            text, _ = p.communicate(timeout=max(1, NODE_LIMIT_S - (time.monotonic() - started)))
            rc = p.returncode
        except subprocess.TimeoutExpired:
            p.kill()
            text, _ = p.communicate()
            rc = "killed"
        took = time.monotonic() - started
        exc = _last_exception(text)
        dumps = [json.loads(f.read_text()) for f in sorted(out.glob(f"{'AB'[i]}.*.json"))]
        result["nodes"]["AB"[i]] = {
            "rc": rc, "seconds": round(took), "workers": [_mask(d, port) for d in dumps],
            "exception": [exc[0], _mask_text(exc[1], port, out)] if exc else None}
    return result


def _mask_text(s, port, out):
    s = s.replace(str(out), "<cwd>").replace(str(port), "<port>")
    s = re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "<uuid>", s)
    s = re.sub(r"(?<![\w<])\d{4,5}(?![\w>])", "<n>", s)
    return s[:300]


def _mask(d, port):
    r = {}
    for k, v in d.items():
        if v is not None and k == "MASTER_PORT" and v != str(port):
            v = "<other port>" if v != "29500" else v
        elif v is not None:
            v = v.replace(str(port), "<port>")
            v = re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "<uuid>", v)
            if v in (socket.gethostname(), socket.getfqdn()):
                v = "<hostname>"
        r[k] = v
    return r


def capture(ids=None):
    res = {}
    with tempfile.TemporaryDirectory() as work:
        for case in CASES:
            if ids and case[0] not in ids:
                continue
            res[case[0]] = run_case(case, os.path.realpath(work))
            print(case[0], json.dumps(res[case[0]]), file=sys.stderr)
    return res


def _node_cmd(launcher, args, env, mode):
    shown = {k: v for k, v in env.items() if not k.startswith(("PYTHONUNBUFFERED",))}
    envs = " ".join(f"{k}={v}" for k, v in shown.items())
    cmd = f"{launcher} {args} train.py".replace("  ", " ")
    if "--config_file" in args:
        cmd += "<br>file: `num_machines: 2`, `num_processes: 2`, `machine_rank: " + args[-6] + \
               "`, `main_process_ip: 127.0.0.1`, `main_process_port: <port>`, `distributed_type: MULTI_GPU`"
        cmd = cmd.replace("<br>file:", "`<br>file:", 1)
        return ("`" + cmd) if not envs else f"`{envs}`<br>`{cmd}"
    return f"`{cmd}`" + (f"<br>env: `{envs}`" if envs else "")


def _worker_cell(w):
    order = KEYS + ["argv", "get_rank()", "all_reduce(rank)", "files in ckpt/"]
    return " ".join(f"{k}={w[k]}" for k in order if w.get(k) is not None) or "(all unset)"


def _outcome(node, want_workers):
    if node["workers"] and node["rc"] == 0:
        return "ran"
    exc = node["exception"]
    what = f"exit {node['rc']}" + (f", `{exc[0]}`" if exc else "") + f" after {node['seconds']} s"
    if exc and exc[1]:
        what += f": {exc[1][:200]}"
    return what


def render(cap):
    lines = ["| # | Launcher | Case | Node A command | Node B command | Node A worker sees | Node B worker sees |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for n, (cid, group, title, nodes) in enumerate(CASES, 1):
        r = cap[cid]["nodes"]
        cells = []
        for i in range(2):
            if i >= len(nodes):
                cells.append("(never started)")
                continue
            cells.append(_node_cmd(*[nodes[i][j] for j in (0, 1, 2, 4)]).replace("|", "\\|"))
        seen = []
        for key in "AB":
            if key not in r:
                seen.append("—")
                continue
            node = r[key]
            ws = "<br>".join(f"`{_worker_cell(w)}`" for w in node["workers"])
            o = _outcome(node, True)
            seen.append("<br>".join(x for x in (ws, "" if o == "ran" else o.replace("|", "\\|")) if x))
        lines.append(f"| {n} | {group} | {title} | {cells[0]} | {cells[1]} | {seen[0]} | {seen[1]} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    if sys.argv[1:2] == ["capture"]:
        ids = sys.argv[2:]
        cap = capture(ids)
        if ids:       # refresh only these cases in the committed capture
            cap = {**json.loads(CAPTURE.read_text(encoding="utf-8")), **cap}
        CAPTURE.parent.mkdir(exist_ok=True)
        CAPTURE.write_text(json.dumps(cap, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    elif sys.argv[1:2] == ["render"]:
        print(render(json.loads(CAPTURE.read_text(encoding="utf-8"))))
    else:
        print(__doc__)
        sys.exit(2)

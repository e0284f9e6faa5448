"""Check one job spec: read it (slurm.py or k8s.py), hand every simulated launch to the launch checks
(launch/check.py::check_command) and compare what the nodes and tasks get (the jobspec rules).

Entry point: :func:`check_job_spec`. Findings carry the spec's FILE:LINE:COL; findings of the launch
checks are moved from the command text back to the word of the file they came from.
"""
from __future__ import annotations

import dataclasses
import os
import shlex
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from .. import core
from ..core import Context, Doc, Finding, InputError, Options
from . import shell as sh
from .model import JobSpec, Step, TaskLaunch

UNKNOWN_INT = "987654"  # stands for a value set at run time that the checker cannot know
# launch rules whose verdict depends on the config file accelerate reads
DEFAULT_CONFIG_RULES = ("launch-flag-ignored", "launch-paradigm-flag-overrides-file", "launch-num-processes-missing",
                        "launch-machine-rank-default", "launch-gpu-ids-too-few", "launch-multinode-endpoint-missing",
                        "launch-flag-loses-to-deepspeed-json", "launch-machine-rank-missing")
LOCAL_HOSTS = ("localhost", "127.0.0.1", "0.0.0.0", "::1", "")


@dataclass
class Issue:
    rule: str
    message: str
    hint: str = ""
    offset: int = -1


@dataclass
class JobResult:
    kind: str = ""
    findings: List[Finding] = field(default_factory=list)
    input_errors: List[Dict[str, str]] = field(default_factory=list)
    steps: List[Dict[str, Any]] = field(default_factory=list)
    notes: List[Tuple[str, str, int]] = field(default_factory=list)


def detect(text: str, name: str = "") -> str:
    """'k8s' for a manifest, else 'slurm'. A .json/.yaml/.yml file, or text opening with { or [, is a
    manifest whatever it holds: read as a batch script it would only yield 'no launch command found'
    (an info, exit 0) where the user needs an input error."""
    head = text.lstrip()[:4000]
    if name.lower().endswith((".json", ".yaml", ".yml")) or head.startswith(("{", "[")):
        return "k8s"
    if "#SBATCH" in text or head.startswith("#!") or "srun " in text:
        return "slurm"
    if "apiVersion" in head or "kind:" in head:
        return "k8s"
    return "slurm"


def _word_text(t: str) -> str:
    if not sh.has_unknown(t):
        return t
    if sh.UNKNOWN_RE.fullmatch(t):
        return UNKNOWN_INT
    return sh.UNKNOWN_RE.sub("UNKNOWN", t)


def command_text(la: TaskLaunch) -> Tuple[str, Dict[int, int]]:
    """The launch as one command line for check_command, and column -> file offset of each word."""
    parts: List[str] = []
    cols: Dict[int, int] = {}
    col = 1
    words = list(la.words)
    legacy = la.launcher == "torchrun" and any(w.text in ("torch.distributed.launch", "-mtorch.distributed.launch")
                                               for w in words[:4])
    for k, w in enumerate(words):
        t = _word_text(w.text)
        if legacy and t in ("torch.distributed.launch", "-mtorch.distributed.launch"):
            t = t.replace("launch", "run")  # torch/distributed/launch.py: torchrun's parser plus --use-env
        if legacy and t in ("--use-env", "--use_env"):
            continue
        q = shlex.quote(t)
        cols[col] = w.first_pos()
        parts.append(q)
        col += len(q) + 1
    return " ".join(parts), cols


@dataclass
class View:
    """What one launch gets: the numbers the rules compare."""
    la: TaskLaunch
    nnodes: Optional[Tuple[int, int]] = None  # (min, max)
    nproc: Any = None  # int, "auto"/"gpu"/..., or None (unknown)
    node_rank: Optional[str] = None  # as text; None unknown
    rank_word: Optional[sh.PStr] = None
    static: bool = True
    host: Optional[str] = None  # rendezvous host; None unknown
    host_word: Optional[sh.PStr] = None
    host_from: str = ""
    num_processes: Optional[int] = None
    effective: Dict[str, Any] = field(default_factory=dict)
    flags: Dict[str, sh.PStr] = field(default_factory=dict)  # dest -> value word as given


def _known(v: Any) -> bool:
    return v is not None and UNKNOWN_INT not in str(v) and "UNKNOWN" not in str(v)


def _flag_words(la: TaskLaunch, names: Tuple[str, ...]) -> Optional[Tuple[sh.PStr, sh.PStr]]:
    """(option word, value word) for the last of the option spellings given."""
    found = None
    for i, w in enumerate(la.words):
        t = w.text
        for n in names:
            if t == n and i + 1 < len(la.words):
                found = (w, la.words[i + 1])
            elif t.startswith(n + "="):
                found = (w, w.sub(len(n) + 1))
    return found


RANK_FLAGS = {"torchrun": ("--node-rank", "--node_rank"), "accelerate": ("--machine_rank", "--machine-rank"),
              "deepspeed": ("--node_rank", "--node-rank")}
HOST_FLAGS = {"torchrun": ("--master-addr", "--master_addr"), "accelerate": ("--main_process_ip", "--main-process-ip"),
              "deepspeed": ("--master_addr", "--master-addr")}


def _view(la: TaskLaunch, r: Any) -> View:
    v = View(la)
    e = dict(r.effective) if r is not None else {}
    v.effective = e
    if la.launcher == "torchrun":
        from ..launch.runners import parse_nnodes
        try:
            if _known(e.get("nnodes")):
                v.nnodes = parse_nnodes(str(e.get("nnodes")))
        except ValueError:
            pass
        np_ = e.get("nproc_per_node")
        if _known(np_):
            try:
                v.nproc = int(np_)
            except (TypeError, ValueError):
                v.nproc = str(np_)
        v.static = e.get("rdzv_backend") == "static"
        if v.static:
            nr = e.get("node_rank")
            v.node_rank = str(nr) if _known(nr) else None
            ep = e.get("rdzv_endpoint") or ""
            v.host = str(ep).rsplit(":", 1)[0] if _known(ep) else None
            v.host_from = "--master-addr" if not _flag_words(la, ("--rdzv-endpoint", "--rdzv_endpoint")) else \
                "--rdzv-endpoint"
            fw = _flag_words(la, ("--rdzv-endpoint", "--rdzv_endpoint")) or _flag_words(la, HOST_FLAGS["torchrun"])
        else:
            ep = e.get("rdzv_endpoint") or ""
            v.host = str(ep).rsplit(":", 1)[0] if _known(ep) and ep != "localhost:0" or ep == "" else None
            if e.get("rdzv_endpoint") == "localhost:0":
                v.host = "localhost"
            v.host_from = "--rdzv-endpoint"
            fw = _flag_words(la, ("--rdzv-endpoint", "--rdzv_endpoint"))
        v.host_word = fw[1] if fw else None
        rw = _flag_words(la, RANK_FLAGS["torchrun"])
        v.rank_word = rw[0] if rw else None
    elif la.launcher == "accelerate":
        nm, npr = e.get("num_machines"), e.get("num_processes")
        if _known(nm) and isinstance(nm, int):
            v.nnodes = (nm, nm)
        if _known(npr) and isinstance(npr, int):
            v.num_processes = npr
            if v.nnodes:
                v.nproc = npr // max(1, v.nnodes[0])
        elif npr is None and e.get("launcher"):
            v.nproc = None
        v.static = str(e.get("rdzv_backend") or "static") == "static"
        mr = e.get("machine_rank")
        v.node_rank = str(mr) if _known(mr) else None
        ip = e.get("main_process_ip")
        v.host = str(ip) if _known(ip) else None
        if ip is None:  # without a config file the cluster user's default config may name it
            v.host = "" if v.nnodes and v.nnodes[0] > 1 and _flag_words(la, ("--config_file", "--config-file")) \
                else None
        v.host_from = "main_process_ip"
        hw = _flag_words(la, HOST_FLAGS["accelerate"])
        v.host_word = hw[1] if hw else None
        rw = _flag_words(la, RANK_FLAGS["accelerate"])
        v.rank_word = rw[0] if rw else None
    elif la.launcher == "deepspeed":
        ng = e.get("num_gpus")
        if isinstance(ng, int) and ng > 0 and _known(ng):
            v.nproc = ng
        elif ng == -1:
            v.nproc = "gpu"
        v.static = False  # the runner starts the other nodes itself (ssh/pdsh/slurm launcher)
        if _flag_words(la, ("--no_ssh", "--no-ssh")):  # one runner per node: each passes its own rank
            v.static = True
            rw = _flag_words(la, RANK_FLAGS["deepspeed"])
            v.rank_word = rw[0] if rw else None
            v.node_rank = (rw[1].text if rw else "-1") if not (rw and sh.has_unknown(rw[1].text)) else None
            hw = _flag_words(la, HOST_FLAGS["deepspeed"])
            v.host_word = hw[1] if hw else None
            v.host = (hw[1].text if hw else "127.0.0.1") if not (hw and sh.has_unknown(hw[1].text)) else None
            v.host_from = "--master_addr"
            nn = _flag_words(la, ("--num_nodes", "--num-nodes"))
            if nn and nn[1].text.isdigit():
                v.nnodes = (int(nn[1].text), int(nn[1].text))
    else:  # a bare python process per task: the environment it reads
        env = la.env
        v.nproc = 1
        if "RANK" in env or "NODE_RANK" in env:
            v.node_rank = env.get("RANK", env.get("NODE_RANK"))
            if sh.has_unknown(v.node_rank or ""):
                v.node_rank = None
        ws = env.get("WORLD_SIZE")
        if ws and ws.isdigit():
            v.nnodes = None
        if "MASTER_ADDR" in env and not sh.has_unknown(env["MASTER_ADDR"]):
            v.host, v.host_from = env["MASTER_ADDR"], "MASTER_ADDR"
    for dest, names in (("nnodes", ("--nnodes",)), ("nproc_per_node", ("--nproc-per-node", "--nproc_per_node")),
                        ("node_rank", ("--node-rank", "--node_rank")),
                        ("master_addr", ("--master-addr", "--master_addr")),
                        ("master_port", ("--master-port", "--master_port")),
                        ("rdzv_endpoint", ("--rdzv-endpoint", "--rdzv_endpoint")),
                        ("rdzv_backend", ("--rdzv-backend", "--rdzv_backend"))):
        fw = _flag_words(la, names)
        if fw:
            v.flags[dest] = fw[1]
    return v


def _run_launch_checks(spec: JobSpec, la: TaskLaunch, cwd: str, options: Options, res: JobResult,
                       seen: set) -> Any:
    if la.launcher == "python":
        return None
    from ..launch.argv import CommandError
    from ..launch.check import COMMAND_NAME, check_command
    text, cols = command_text(la)
    env = {k: _word_text(v) for k, v in la.env.items()}
    try:
        r = check_command(text, env, cwd, options)
    except CommandError:
        return None
    except RecursionError:
        return None
    no_cfg = la.launcher == "accelerate" and not _flag_words(la, ("--config_file", "--config-file"))
    if no_cfg and r.findings and ("acc-default-config", la.words[0].first_pos()) not in seen:
        seen.add(("acc-default-config", la.words[0].first_pos()))
        res.notes.append(("jobspec-not-checked", "accelerate launch without --config_file reads the default config "
                          "of the user on the cluster, which is not visible here: only the flags are checked",
                          la.words[0].first_pos()))
    # deepspeed's hostfile is often written by the job itself: when it is not here, verdicts that need it wait
    hf = _flag_words(la, ("--hostfile",))
    hf_path = hf[1].text if hf else "/job/hostfile"  # deepspeed/launcher/runner.py DLTS_HOSTFILE
    no_hostfile = la.launcher == "deepspeed" and not os.path.isfile(os.path.join(cwd, hf_path))
    for f in r.findings:
        msg = f.message
        if no_hostfile and f.rule.startswith("launch-ds-") and "hostfile" in msg:
            if ("ds-hostfile", la.words[0].first_pos()) not in seen:
                seen.add(("ds-hostfile", la.words[0].first_pos()))
                res.notes.append(("jobspec-not-checked", f"deepspeed's hostfile {hf_path} is not found from {cwd}: "
                                  "what needs it is not checked (pass --cwd where the job runs)",
                                  la.words[0].first_pos()))
            continue
        if no_cfg and (f.rule.split("-")[0] in ("acc", "xf", "ds", "yaml", "input") or f.rule in DEFAULT_CONFIG_RULES):
            continue
        if UNKNOWN_INT in msg or "UNKNOWN" in msg:
            continue  # about a value known only at run time
        if f.rule in ("launch-config-file-missing", "launch-ds-hostfile-missing"):
            f = f.replace(rule="jobspec-not-checked", severity="info",
                                    message=f"{msg} - not checked (the file is looked up from {cwd}; pass --cwd)",
                                    hint="")
        if f.file == COMMAND_NAME:
            off = cols.get(f.col or -1, la.words[0].first_pos() if la.words else -1) if f.line == 1 else \
                (la.words[0].first_pos() if la.words else -1)
            line, col = spec.line_col(off)
            f = f.replace(file=spec.name, line=line, col=col)
        key = (f.rule, f.file, f.line, f.col)
        if key in seen:
            continue
        seen.add(key)
        res.findings.append(f)
    for ie in r.input_errors:
        if ie not in res.input_errors and UNKNOWN_INT not in ie.get("file", ""):
            res.input_errors.append(ie)
    return r


def _pos(spec: JobSpec, w: Optional[sh.PStr], default: int) -> int:
    if w is not None and w.first_pos() >= 0:
        return w.first_pos()
    return default


def _where(spec: JobSpec, off: int) -> str:
    line, col = spec.line_col(off)
    return f"{line}:{col}" if line else "?"


def analyse(spec: JobSpec, step: Step, views: List[View]) -> List[Issue]:
    out: List[Issue] = []
    if not views:
        return out
    v0 = views[0]
    la0 = v0.la
    lw = la0.words[0].first_pos() if la0.words else step.offset
    firsts = {}
    for v in views:
        firsts.setdefault(v.la.node, v)
    per_node = [firsts[k] for k in sorted(firsts)]
    launcher = la0.launcher
    nnodes = v0.nnodes[1] if v0.nnodes else None
    multi = (nnodes or 0) > 1 or (launcher == "python" and (step.nodes or 0) > 1)
    # (a) a launcher in the batch body runs on the first node only
    if step.kind == "batch" and launcher in ("torchrun", "accelerate") and ((step.nodes or 0) > 1 or multi):
        out.append(Issue("jobspec-launcher-outside-srun", f"{launcher} runs in the batch script itself, which runs "
                         f"once, on the first node of {'the ' + str(step.nodes) + '-node' if step.nodes else 'the'} "
                         "allocation: the other nodes never start a launcher", "start it with srun (one task per "
                         "node: srun --ntasks-per-node=1 ...)", lw))
    # (b) several tasks per node, each with a launcher
    tasks0 = [v for v in views if v.la.node == 0]
    if step.tasks_per_node > 1 and launcher in ("torchrun", "accelerate", "deepspeed") and len(tasks0) > 1:
        ranks = [v.node_rank for v in tasks0]
        if launcher == "deepspeed" or not all(r is not None for r in ranks) or len(set(ranks)) < len(ranks):
            out.append(Issue("jobspec-launcher-per-task", f"{step.tasks_per_node} tasks per node each start "
                             f"{launcher}: {step.tasks_per_node} launchers per node, each starting its own workers "
                             "with the same node rank and port", "one task per node for a launcher "
                             "(--ntasks-per-node=1), or one task per GPU running python without a launcher",
                             step.tasks_where if step.tasks_where >= 0 else lw))
    # (c) processes per node vs GPUs
    per_task = v0.nproc
    if per_task in ("gpu", "auto"):
        per_task = step.gpus_per_task or step.gpus_per_node
    if isinstance(per_task, int) and not isinstance(per_task, bool):
        total = per_task * step.tasks_per_node
        where = step.gpus_where if step.gpus_where >= 0 else lw
        unit = "pod" if step.kind == "pod" else "node"
        if step.gpus_per_task is not None and per_task > step.gpus_per_task and launcher != "python":
            out.append(Issue("jobspec-processes-exceed-gpus", f"each task starts {per_task} processes but sees "
                             f"{step.gpus_per_task} GPU(s) (--gpus-per-task binds GPUs to tasks)",
                             "match the launcher's processes per node to the GPUs each task sees", where))
        elif step.gpus_per_node is not None and total > step.gpus_per_node:
            how = f"{step.tasks_per_node} task(s) x {per_task} process(es)" if step.tasks_per_node > 1 else \
                f"{per_task} process(es)"
            out.append(Issue("jobspec-processes-exceed-gpus", f"{how} per {unit} = {total}, but {step.gpus_per_node} "
                             f"GPU(s) per {unit} are requested: processes share a GPU or fail with 'invalid device "
                             "ordinal'", f"request {total} GPUs per {unit} or start {step.gpus_per_node} processes",
                             where))
        elif launcher == "python" and step.gpus_per_task is not None and _local_rank_beyond(views, step.gpus_per_task):
            lr = _local_rank_beyond(views, step.gpus_per_task)
            out.append(Issue("jobspec-processes-exceed-gpus", f"a task gets LOCAL_RANK={lr} but sees "
                             f"{step.gpus_per_task} GPU(s) (--gpus-per-task binds GPUs to tasks): cuda:LOCAL_RANK "
                             "is out of range ('invalid device ordinal')", "request the GPUs per node "
                             "(--gres=gpu:N or --gpus-per-node=N) so every task sees them all", where))
        elif step.gpus_per_node is not None and total < step.gpus_per_node and _explicit_nproc(v0):
            out.append(Issue("jobspec-gpus-idle", f"{total} process(es) per {unit} on {step.gpus_per_node} requested "
                             f"GPU(s): {step.gpus_per_node - total} GPU(s) per {unit} stay idle",
                             "start one process per GPU or request fewer GPUs", where))
    # (d) launcher node count vs allocation
    if v0.nnodes and step.nodes and step.tasks_per_node == 1 and launcher in ("torchrun", "accelerate"):
        mn, mx = v0.nnodes
        if not mn <= step.nodes <= mx:
            what = f"{mn}" if mn == mx else f"{mn}:{mx}"
            unit = "pods (replicas)" if step.kind == "pod" else "nodes"
            flag = "--nnodes" if launcher == "torchrun" else "num_machines"
            out.append(Issue("jobspec-nodes-mismatch", f"{launcher} {flag} {what} but the job runs on {step.nodes} "
                             f"{unit} ({step.nodes_hint or 'allocation'} at {_where(spec, step.nodes_where)}): "
                             + ("the rendezvous waits for nodes that never come" if mn > step.nodes else
                                "the extra nodes' ranks are out of range"),
                             "derive it from the scheduler "
                             f"({'$SLURM_NNODES' if step.kind != 'pod' else 'PET_NNODES'})",
                             _pos(spec, (_flag_words(la0, ("--nnodes", "--num_machines", "--num-machines")) or
                                         (None, None))[0], lw)))
    # (e) one node rank per node
    if multi and len(per_node) > 1 and (v0.static or launcher == "python"):
        ranks = [v.node_rank for v in per_node]
        if all(r is not None for r in ranks) and len(set(ranks)) < len(ranks):
            w = v0.rank_word
            why = ""
            early = [e for v in per_node for e in v.la.early if e[0] in ("SLURM_NODEID", "SLURM_PROCID",
                                                                          "SLURM_LOCALID", "$(hostname)")]
            if early:
                why = f": ${early[0][0].lstrip('$')} at {_where(spec, early[0][1])} is expanded by the batch shell " \
                      "on the first node (double quotes), not by each task"
            elif w is None:
                why = ": no node rank is passed, so it defaults to 0" if launcher != "python" else ""
            elif not any(sh.has_unknown(x.text) for x in v0.la.words):
                why = " (written as a constant)"
            name = {"torchrun": "--node-rank", "accelerate": "--machine_rank", "deepspeed": "--node_rank"}.get(
                launcher, "RANK")
            out.append(Issue("jobspec-node-rank-same", f"every node gets {name} {ranks[0]}{why}; each node needs its "
                             "own rank (the rendezvous waits, or two nodes claim one rank)",
                             "use the per-task variable in the task's shell: single quotes or \\$SLURM_NODEID "
                             "(SLURM), $(PET_NODE_RANK)/$RANK (PyTorchJob)", _pos(spec, w, lw)))
    # (f) rendezvous endpoint
    if multi and len(per_node) > 1:
        hosts = [v.host for v in per_node]
        if all(h is not None for h in hosts):
            w = v0.host_word
            if hosts[0] in LOCAL_HOSTS or str(hosts[0]).startswith("127."):
                what = f"{v0.host_from} is empty (the variable behind it is unset)" if hosts[0] == "" else \
                    f"{v0.host_from} is {hosts[0]}"
                if launcher == "torchrun" and hosts[0] == "127.0.0.1" and w is None:
                    what = "no --master-addr (or MASTER_ADDR/PET_MASTER_ADDR): torchrun uses 127.0.0.1"
                out.append(Issue("jobspec-rendezvous-local", f"{what} on a {nnodes or step.nodes}-node job: every "
                                 "node looks for the rendezvous on itself", "use the first node's host name: "
                                 "MASTER_ADDR=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1) "
                                 "(exported), or the operator's MASTER_ADDR", _pos(spec, w, lw)))
            elif len(set(hosts)) > 1:
                out.append(Issue("jobspec-rendezvous-differs", f"the rendezvous host differs per node "
                                 f"({', '.join(map(str, hosts[:3]))}): it is computed in each task's shell, so each "
                                 "node waits on its own", "compute it once in the batch script (first node) and "
                                 "export it", _pos(spec, w, lw)))
    # (g) operator environment overridden by written flags
    if step.kind == "pod" and launcher == "torchrun":
        # (a written --node-rank is the same on every pod: jobspec-node-rank-same says so)
        for dest, pet in (("nnodes", "PET_NNODES"), ("nproc_per_node", "PET_NPROC_PER_NODE"),
                          ("master_addr", "PET_MASTER_ADDR"),
                          ("master_port", "PET_MASTER_PORT"), ("rdzv_endpoint", "PET_RDZV_ENDPOINT")):
            w = v0.flags.get(dest)
            if w is None or pet not in step.operator_env:
                continue
            off = w.first_pos()
            if off >= 0 and spec.text.startswith(w.text, off) and w.text != "":
                out.append(Issue("jobspec-operator-env-overridden", f"--{dest.replace('_', '-')} {w.text} is written "
                                 f"into the command: it wins over {pet}={step.operator_env[pet]} that the operator "
                                 "sets for each pod, and goes stale when replicas or nprocPerNode change",
                                 f"drop the flag (torchrun reads {pet}) or use $({pet}); only on training-operator "
                                 ">= v1.7.0: older operators set no PET_* sizes and need the flag (check the pod's env)",
                                 off))
    # (h) accelerate num_processes is the total
    if launcher == "accelerate" and v0.nnodes and v0.nnodes[0] > 1 and v0.num_processes is not None:
        gpn = step.gpus_per_node
        if gpn and v0.num_processes == gpn and step.tasks_per_node == 1:
            fw = _flag_words(la0, ("--num_processes", "--num-processes"))
            out.append(Issue("jobspec-accelerate-num-processes-per-node", f"num_processes {v0.num_processes} equals "
                             f"the GPUs of one node, but accelerate reads it as the total over {v0.nnodes[0]} "
                             f"machines: {v0.num_processes // v0.nnodes[0]} process(es) per node",
                             f"num_processes = {gpn * v0.nnodes[0]} (GPUs per node x machines)",
                             _pos(spec, fw[0] if fw else None, lw)))
    # (i) /dev/shm in a multi-GPU pod
    if step.kind == "pod" and step.shm_memory is False:
        n = step.gpus_per_node or 0
        if n > 1:
            out.append(Issue("jobspec-shm-default", f"{n} GPUs per pod and no memory-backed /dev/shm: "
                             "the container runtime's default is 64 MB, which NCCL's shared-memory transport and "
                             "DataLoader workers exceed", "mount an emptyDir with medium: Memory at /dev/shm",
                             step.container_where))
    return out


def _local_rank_beyond(views, visible: int) -> str:
    """The first per-task LOCAL_RANK value (a plain number) at or past the GPUs a task sees, else ''."""
    for v in views:
        lr = str(v.la.env.get("LOCAL_RANK", ""))
        if lr.isdigit() and int(lr) >= visible:
            return lr
    return ""


def _explicit_nproc(v: View) -> bool:
    la = v.la
    if la.launcher == "torchrun":
        w = v.flags.get("nproc_per_node")
        if w is None:  # a PyTorchJob's nprocPerNode reaches torchrun as PET_NPROC_PER_NODE
            return la.env.get("PET_NPROC_PER_NODE", "").isdigit()
        return w.text.isdigit()
    return la.launcher == "accelerate" and v.num_processes is not None


def check_job_spec(path: str, name: str, text: Optional[str] = None, cwd: Optional[str] = None,
                   options: Optional[Options] = None) -> JobResult:
    """Check one job spec file. InputError for unreadable/unparseable input."""
    res = JobResult()
    if text is None:
        text = core.read_input_file(path)
    cwd = cwd or os.path.dirname(os.path.abspath(path)) or "."
    options = options or Options(cwd=cwd)
    spec = JobSpec("", name, text)
    kind = detect(text, path or name)
    if kind == "k8s":
        from . import k8s
        try:
            k8s.load(spec, cwd)
        except k8s.ManifestError as e:
            raise InputError(str(e)) from None
    else:
        from . import slurm
        spec.kind = "slurm"
        try:
            slurm.load(spec, cwd)
        except ValueError as e:
            raise InputError(str(e)) from None
    res.kind = spec.kind
    issues: List[Issue] = [Issue(n.rule, n.message, n.hint, n.offset) for n in spec.notes]
    seen: set = set()
    launched = False
    for st in spec.steps:
        views = []
        for la in st.launches:
            r = _run_launch_checks(spec, la, cwd, options, res, seen)
            views.append(_view(la, r))
        if st.launches:
            launched = True
        issues.extend(analyse(spec, st, views))
        res.steps.append({"kind": st.kind, "line": spec.line_col(st.offset)[0], "nodes": st.nodes,
                          "tasks_per_node": st.tasks_per_node, "gpus_per_node": st.gpus_per_node,
                          "gpus_per_task": st.gpus_per_task, "operator_env": st.operator_env,
                          "launches": [{"node": v.la.node, "task": v.la.local, "launcher": v.la.launcher,
                                        "argv": [sh.show(w.text) for w in v.la.words],
                                        "node_rank": v.node_rank, "rendezvous_host": v.host,
                                        "processes": v.nproc} for v in views]})
    issues.extend(Issue(rid, msg, "", off) for rid, msg, off in res.notes)
    if not launched:
        issues.append(Issue("jobspec-not-checked", "no launch command found (torchrun, python -m "
                            "torch.distributed.run, accelerate launch, deepspeed, or python SCRIPT under srun)", "", 0))
    res.findings.extend(_run_rules(spec, issues, options))
    res.findings.sort(key=lambda f: (f.file != spec.name, f.line or 0, f.col or 0, f.rule))
    return res


def _run_rules(spec: JobSpec, issues: List[Issue], options: Options) -> List[Finding]:
    from .. import rules  # noqa: F401  (installs the loader that imports the jobspec rule module)
    doc = Doc({}, kind="text", name=spec.name, text=spec.text)
    ctx = Context(doc=doc, options=options)
    ctx.jobspec = (spec, issues)  # type: ignore[attr-defined]
    core.run_rules(ctx, "jobspec")
    return ctx.findings

"""torchrun (torch 2.13.0) and deepspeed (DeepSpeed 0.19.8) command lines: what their own code makes
of the flags, before any process starts.

torchrun: ``torch/distributed/run.py::run`` (``--standalone`` and the single-node c10d switch) and
``config_from_args`` (nnodes MIN:MAX, nproc_per_node, rendezvous endpoint, rank filter).
deepspeed: ``deepspeed/launcher/runner.py::main`` up to the launcher choice (hostfile, include/exclude,
num_nodes/num_gpus), with ``_parse_hostfile``'s format.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from .argv import Parsed, Word

NPROC_WORDS = ("auto", "cpu", "gpu", "xpu")  # determine_local_world_size (privateuse1 aside)
DS_LAUNCHERS = ("pdsh", "openmpi", "mpich", "impi", "mvapich", "slurm")  # deepspeed/launcher/constants.py


@dataclass
class RunnerIssue:
    rule: str
    message: str
    hint: str = ""
    word: Optional[Word] = None
    file: str = ""  # another file the finding points into (hostfile)
    line: Optional[int] = None


@dataclass
class RunnerLaunch:
    kind: str  # torchrun | deepspeed
    parsed: Parsed
    values: Dict[str, Any] = field(default_factory=dict)  # final values
    origin: Dict[str, str] = field(default_factory=dict)
    issues: List[RunnerIssue] = field(default_factory=list)
    ds_config: Optional[Tuple[str, Word]] = None  # --deepspeed_config path in the script's arguments
    hostfile: Optional[Dict[str, int]] = None
    world_size: Optional[int] = None


def parse_nnodes(text: str) -> Tuple[int, int]:
    parts = str(text).split(":")
    if len(parts) == 1:
        return int(parts[0]), int(parts[0])
    if len(parts) == 2:
        return int(parts[0]), int(parts[1])
    raise ValueError(f'nnodes={text} is not in "MIN:MAX" format')


def analyse_torchrun(parsed: Parsed, env: Dict[str, str]) -> RunnerLaunch:
    R = RunnerLaunch("torchrun", parsed, dict(parsed.values))
    v = R.values
    for dest in v:
        g = parsed.last(dest)
        R.origin[dest] = f"flag {g.option}" if g else (f"env PET_{dest.upper()}" if f"PET_{dest.upper()}" in env
                                                        else "default")

    def w(dest: str) -> Optional[Word]:
        g = parsed.last(dest)
        return g.word if g else None

    if v.get("standalone"):
        lost = [d for d in ("rdzv_backend", "rdzv_endpoint", "rdzv_id") if parsed.last(d)]
        if lost:
            R.issues.append(RunnerIssue(
                "launch-torchrun-standalone-overrides",
                f"--standalone replaces {', '.join('--' + d.replace('_', '-') for d in lost)} with a local c10d "
                "rendezvous on localhost:0", "drop --standalone for a multi-node rendezvous", w(lost[0])))
        v["rdzv_backend"], v["rdzv_endpoint"] = "c10d", "localhost:0"
        R.origin["rdzv_backend"] = R.origin["rdzv_endpoint"] = "derived: --standalone"
    try:
        mn, mx = parse_nnodes(v.get("nnodes"))
    except ValueError as e:
        R.issues.append(RunnerIssue("launch-torchrun-bad-value", f"--nnodes {v.get('nnodes')!r}: {e}",
                                    "use N or MIN:MAX with integers", w("nnodes")))
        return R
    if not 0 < mn <= mx:
        R.issues.append(RunnerIssue("launch-torchrun-bad-value",
                                    f"--nnodes {v.get('nnodes')!r}: torchrun needs 0 < MIN <= MAX",
                                    "use N >= 1 or MIN:MAX with 1 <= MIN <= MAX", w("nnodes")))
        return R
    if v.get("standalone") and mx > 1:
        R.issues.append(RunnerIssue(
            "launch-torchrun-standalone-overrides", f"--standalone with --nnodes {v['nnodes']}: the rendezvous is "
            "local to this machine, other nodes cannot join", "drop --standalone and give --rdzv-endpoint",
            w("standalone")))
    if not v.get("standalone") and v.get("rdzv_backend") == "static" and not v.get("rdzv_endpoint") \
            and v.get("master_port") is None and mx == 1:
        v["rdzv_backend"], v["rdzv_endpoint"] = "c10d", "localhost:0"
        R.origin["rdzv_backend"] = R.origin["rdzv_endpoint"] = "derived: single node without --master-port"
    if v.get("master_port") is None:
        v["master_port"] = 29500
        R.origin["master_port"] = "default 29500 (run)"
    if not isinstance(v.get("max_restarts"), int) or v["max_restarts"] < 0:
        R.issues.append(RunnerIssue("launch-torchrun-bad-value", "--max-restarts must be >= 0", "",
                                    w("max_restarts")))
    nproc = v.get("nproc_per_node")
    local = None
    try:
        local = int(nproc)
    except (TypeError, ValueError):
        if nproc not in NPROC_WORDS:
            R.issues.append(RunnerIssue(
                "launch-torchrun-bad-value", f"--nproc-per-node {nproc!r}: torchrun accepts an integer or one of "
                f"{', '.join(NPROC_WORDS)}", "", w("nproc_per_node")))
    if local is not None and local <= 0:
        R.issues.append(RunnerIssue("launch-torchrun-bad-value",
                                    f"--nproc-per-node {nproc}: no worker would start (WorkerSpec needs >= 1)", "",
                                    w("nproc_per_node")))
    if local is not None and mn == mx:
        R.world_size = local * mx
    static = v.get("rdzv_backend") == "static"
    if static and not v.get("rdzv_endpoint"):
        v["rdzv_endpoint"] = f"{v.get('master_addr')}:{v.get('master_port')}"
        R.origin["rdzv_endpoint"] = "derived: master_addr:master_port (static)"
    if v.get("local_ranks_filter"):
        try:
            ranks = set(map(int, v["local_ranks_filter"].split(",")))
            if not ranks:
                raise ValueError
        except ValueError:
            R.issues.append(RunnerIssue("launch-torchrun-bad-value", "--local-ranks-filter must be "
                                        "comma-separated integers", "", w("local_ranks_filter")))
    if v.get("no_python") and v.get("module"):
        R.issues.append(RunnerIssue("launch-module-and-no-python", "--no-python and --module cannot be used "
                                    "together", "keep one of them", w("module")))
    # values written that torchrun ignores
    if static and parsed.last("rdzv_endpoint"):
        for d in ("master_addr", "master_port"):
            if parsed.last(d):
                R.issues.append(RunnerIssue(
                    "launch-torchrun-ignored-flag", f"--{d.replace('_', '-')} is ignored: with --rdzv-endpoint the "
                    "static rendezvous uses that endpoint", "give the address once, in --rdzv-endpoint", w(d)))
    if not static and not v.get("standalone"):
        for d in ("master_addr", "master_port", "node_rank"):
            if parsed.last(d):
                R.issues.append(RunnerIssue(
                    "launch-torchrun-ignored-flag", f"--{d.replace('_', '-')} is used only by the static rendezvous; "
                    f"with --rdzv-backend {v.get('rdzv_backend')} it is ignored",
                    "use --rdzv-endpoint (and let the rendezvous assign ranks)", w(d)))
    if mx > 1 and static and not parsed.last("rdzv_endpoint"):
        if not parsed.last("master_addr") and f"PET_MASTER_ADDR" not in env:
            R.issues.append(RunnerIssue(
                "launch-torchrun-multinode-rendezvous", f"--nnodes {v['nnodes']} with the static rendezvous but no "
                "--master-addr: every node connects to 127.0.0.1 (itself)", "pass --master-addr of node 0 "
                "(or --rdzv-backend c10d --rdzv-endpoint HOST:PORT)", w("nnodes")))
        if not parsed.last("node_rank") and "PET_NODE_RANK" not in env:
            R.issues.append(RunnerIssue(
                "launch-torchrun-multinode-rendezvous", f"--nnodes {v['nnodes']} with the static rendezvous but no "
                "--node-rank: this node is rank 0; each machine needs its own --node-rank", "pass --node-rank",
                w("nnodes")))
    if mx > 1 and not static and not v.get("standalone") and not v.get("rdzv_endpoint"):
        R.issues.append(RunnerIssue(
            "launch-torchrun-multinode-rendezvous", f"--nnodes {v['nnodes']} with --rdzv-backend "
            f"{v.get('rdzv_backend')} but no --rdzv-endpoint", "pass --rdzv-endpoint HOST:PORT of the rendezvous "
            "host, the same on every node", w("rdzv_backend")))
    return R


# ---------------------------------------------------------------------------------------------
_HOST_RE = re.compile(r"^(\S+)\s+slots=(\d+)")


def parse_hostfile(text: str) -> Tuple[Dict[str, int], Optional[Tuple[int, str]]]:
    """deepspeed/launcher/runner.py::_parse_hostfile: ({host: slots}, (line, error) or None)."""
    pool: Dict[str, int] = {}
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        m = _HOST_RE.search(line)
        if line.startswith("#") or line == "":
            continue
        if m:
            host = m.group(1)
            if host in pool:
                return pool, (n, f"hostfile names {host} twice (deepspeed refuses duplicate entries)")
            pool[host] = int(m.group(2))
        else:
            return pool, (n, f"hostfile line {line!r} is not 'HOST slots=N' (deepspeed refuses it)")
    if not pool:
        return pool, (1, "hostfile has no 'HOST slots=N' entry (deepspeed refuses an empty hostfile)")
    return pool, None


def _parse_filter(text: str) -> Dict[str, List[int]]:
    """deepspeed/launcher/runner.py::parse_node_config_list: NAME[:SLOT[,SLOT]][@NAME...]."""
    out: Dict[str, List[int]] = {}
    for node in text.split("@"):
        if ":" in node:
            host, slots = node.split(":")  # more than one ':' fails in deepspeed too (ValueError)
            out.setdefault(host, []).extend(int(x) for x in slots.split(","))
        else:
            out.setdefault(node, [])
    return {k: sorted(set(v)) for k, v in out.items()}


def analyse_deepspeed(parsed: Parsed, env: Dict[str, str], cwd: str) -> RunnerLaunch:
    R = RunnerLaunch("deepspeed", parsed, dict(parsed.values))
    v = R.values
    for dest in v:
        g = parsed.last(dest)
        R.origin[dest] = f"flag {g.option}" if g else "default"

    def w(dest: str) -> Optional[Word]:
        g = parsed.last(dest)
        return g.word if g else None

    # the DeepSpeed JSON the script is told to use (--deepspeed_config X / --deepspeed X)
    sa = parsed.script_args
    for i, word in enumerate(sa):
        t = word.text
        for opt in ("--deepspeed_config", "--deepspeed-config", "--deepspeed"):
            if t == opt and i + 1 < len(sa):
                R.ds_config = (sa[i + 1].text, sa[i + 1])
            elif t.startswith(opt + "="):
                R.ds_config = (t.split("=", 1)[1], word)
        if R.ds_config:
            break
    hostfile = v.get("hostfile")
    hpath = hostfile if os.path.isabs(hostfile) else os.path.join(cwd, hostfile)
    pool: Dict[str, int] = {}
    if os.path.isfile(hpath):
        try:
            from ..core import read_input_file
            text = read_input_file(hpath)
        except Exception as e:  # noqa: BLE001 - InputError
            R.issues.append(RunnerIssue("launch-ds-hostfile-invalid", f"hostfile {hostfile}: {e}", "", w("hostfile")))
            return R
        pool, err = parse_hostfile(text)
        if err:
            R.issues.append(RunnerIssue("launch-ds-hostfile-invalid", err[1], "one line per host: 'HOST slots=N'",
                                        None, file=hostfile, line=err[0]))
            return R
        R.hostfile = pool
    elif parsed.last("hostfile"):
        R.issues.append(RunnerIssue(
            "launch-ds-hostfile-missing", f"--hostfile {hostfile} does not exist (from {cwd}): deepspeed only warns "
            "and trains on this machine alone", "give the path of an existing hostfile", w("hostfile")))
    if (v.get("num_nodes", -1) >= 0 or v.get("num_gpus", -1) >= 0) and (v.get("include") or v.get("exclude")):
        R.issues.append(RunnerIssue(
            "launch-ds-filter-conflict", "--num_nodes/--num_gpus cannot be combined with --include/--exclude "
            "(deepspeed runner: 'Cannot specify num_nodes/gpus with include/exclude')",
            "select machines either by count or by filter", w("include") or w("exclude")))
    elif v.get("include") and v.get("exclude"):
        R.issues.append(RunnerIssue("launch-ds-filter-conflict", "--include and --exclude are mutually exclusive",
                                    "keep one filter", w("exclude")))
    if not pool and v.get("num_nodes", -1) > 1:
        R.issues.append(RunnerIssue(
            "launch-ds-filter-conflict", f"--num_nodes {v['num_nodes']} but no hostfile lists other machines: "
            "deepspeed stops ('Num nodes is >1 but no extra nodes available via hostfile')",
            "write a hostfile (HOST slots=N per line) and pass --hostfile", w("num_nodes")))
    multi = len(pool) > 1 or v.get("force_multi")
    if multi and not v.get("no_ssh") and str(v.get("launcher", "")).lower() not in DS_LAUNCHERS:
        R.issues.append(RunnerIssue(
            "launch-ds-unknown-launcher", f"--launcher {v.get('launcher')!r} is not one of "
            f"{', '.join(DS_LAUNCHERS)}: the multi-node runner stops ('Unknown launcher')", "", w("launcher")))
    if any(i.rule == "launch-ds-filter-conflict" for i in R.issues):
        return R
    active: Optional[Dict[str, List[int]]] = None
    if pool:
        active = {h: list(range(n)) for h, n in pool.items()}
    flt = v.get("include") or v.get("exclude")
    if flt:
        dest = "include" if v.get("include") else "exclude"
        try:
            spec = _parse_filter(flt)
        except ValueError:
            R.issues.append(RunnerIssue("launch-ds-filter-invalid", f"--{dest} {flt!r} is not HOST[:SLOT,...][@HOST...] "
                                        "(slots must be integers)", "", w(dest)))
            return R
        known = active if active is not None else None
        for host, slots in spec.items():
            if known is None:
                if host != "localhost":
                    R.issues.append(RunnerIssue(
                        "launch-ds-filter-invalid", f"--{dest} names {host!r} but there is no hostfile: deepspeed only "
                        "knows 'localhost'", "pass --hostfile, or use localhost", w(dest)))
                continue
            if host not in known:
                R.issues.append(RunnerIssue("launch-ds-filter-invalid", f"--{dest} names {host!r}, which the hostfile "
                                            "does not list (deepspeed: 'Hostname ... not found in hostfile')", "",
                                            w(dest)))
            else:
                bad = [x for x in slots if x not in known[host]]
                if bad:
                    R.issues.append(RunnerIssue("launch-ds-filter-invalid", f"--{dest} asks for slot(s) "
                                                f"{', '.join(map(str, bad))} on {host}, which has slots 0.."
                                                f"{len(known[host]) - 1}", "", w(dest)))
        if any(i.rule == "launch-ds-filter-invalid" for i in R.issues) or active is None:
            return R
        if dest == "include":
            active = {h: (spec[h] or active[h]) for h in active if h in spec}
        else:
            active = {h: ([] if not spec[h] else [x for x in sl if x not in spec[h]]) if h in spec else sl
                      for h, sl in active.items()}
            active = {h: sl for h, sl in active.items() if sl}
    if active is not None:
        # apply_num_nodes_and_gpus: the first num_nodes hosts, then range(num_gpus) on each (slots= not consulted)
        nn, ng = v.get("num_nodes", -1), v.get("num_gpus", -1)
        if nn > 0:
            active = dict(list(active.items())[:nn])
        if ng > 0:
            over = [h for h in active if ng > pool.get(h, 0)]
            if over:
                R.issues.append(RunnerIssue(
                    "launch-ds-gpus-exceed-slots", f"--num_gpus {ng} is more than the slots of {', '.join(over)} in the "
                    f"hostfile: deepspeed starts {ng} processes per host anyway", "lower --num_gpus or fix slots=",
                    w("num_gpus")))
            active = {h: list(range(ng)) for h in active}
        R.world_size = sum(len(x) for x in active.values())
        if v.get("no_ssh") and not 0 <= v.get("node_rank", -1) < len(active):
            R.issues.append(RunnerIssue(
                "launch-ds-filter-conflict", f"--no_ssh needs --node_rank in 0..{len(active) - 1} (got "
                f"{v.get('node_rank')}): deepspeed asserts it", "pass this machine's --node_rank",
                w("node_rank") or w("no_ssh")))
    elif v.get("num_gpus", -1) > 0 and not flt:
        R.world_size = v["num_gpus"]
    return R

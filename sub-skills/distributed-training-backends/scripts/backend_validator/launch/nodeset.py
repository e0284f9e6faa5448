"""Cross-node agreement of a multi-machine job (`--node-set FILE [FILE ...]`).

Each member is one node's effective launch: a per-node Accelerate config file, or one
`--launch-command` per node (its merged view). The nodes must build the same job: one node per
machine_rank in 0..num_machines-1, and the same world size, rendezvous endpoint, backend, mixed
precision, DeepSpeed JSON content and multinode launcher. With a DeepSpeed hostfile, its hosts
and slots are compared with num_machines and num_processes // num_machines.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from ..core import Doc
from .runners import parse_hostfile

SHARED = ("num_machines", "num_processes", "main_process_ip", "main_process_port", "distributed_type",
          "mixed_precision", "rdzv_backend", "same_network")
SHARED_DS = ("deepspeed_multinode_launcher",)


@dataclass
class Node:
    name: str
    values: Dict[str, Any]  # effective top-level values (+ deepspeed_multinode_launcher, ds_json, hostfile)
    doc: Optional[Doc] = None  # where to point (a file), else the command
    word: Any = None  # the command word to point at (for command members)
    origin: Dict[str, Any] = field(default_factory=dict)  # key -> (file doc path) or Word


@dataclass
class NodeIssue:
    rule: str
    message: str
    hint: str = ""
    node: Optional[Node] = None
    key: str = ""


def node_from_config(name: str, doc: Doc, cwd: str) -> Node:
    d = doc.data if isinstance(doc.data, dict) else {}
    vals: Dict[str, Any] = {
        "num_machines": d.get("num_machines", 1), "num_processes": d.get("num_processes", -1),
        "machine_rank": d.get("machine_rank", 0), "main_process_ip": d.get("main_process_ip"),
        "main_process_port": d.get("main_process_port"), "distributed_type": d.get("distributed_type"),
        "mixed_precision": d.get("mixed_precision", "no"), "rdzv_backend": d.get("rdzv_backend", "static"),
        "same_network": d.get("same_network", False)}
    ds = d.get("deepspeed_config") if isinstance(d.get("deepspeed_config"), dict) else {}
    if vals["distributed_type"] == "DEEPSPEED":
        vals["deepspeed_multinode_launcher"] = ds.get("deepspeed_multinode_launcher", "pdsh")
        vals["ds_json"] = _json_content(ds.get("deepspeed_config_file"), cwd)
        vals["deepspeed_hostfile"] = ds.get("deepspeed_hostfile")
    return Node(name, vals, doc=doc)


def _json_content(path: Any, cwd: str) -> Any:
    if not isinstance(path, str) or path in ("", "none"):
        return None
    full = path if os.path.isabs(path) else os.path.join(cwd, path)
    try:
        from ..core import read_input_file
        return json.dumps(json.loads(read_input_file(full)), sort_keys=True)
    except Exception:  # noqa: BLE001 - unreadable: the single-file rules report it
        return ("unreadable", path)


# accelerate launch starts num_processes // num_machines per node from each node's own values, so
# nodes with different GPU counts need different num_processes (checked in tests/audit/test_run_claims.py)
UNEQUAL_NODES_HINT = ("every node must use the same value, unless the nodes have different GPU counts: then each "
                      "node's num_processes is its GPU count x num_machines (torch-distributed "
                      "launch-torchrun.md, nodes with different GPU counts)")


def check_nodes(nodes: List[Node], cwd: str) -> List[NodeIssue]:
    out: List[NodeIssue] = []
    if not nodes:
        return out
    ref = nodes[0]
    for key in SHARED + SHARED_DS + ("ds_json",):
        seen: Dict[str, List[Node]] = {}
        for n in nodes:
            if key in SHARED_DS + ("ds_json",) and key not in n.values:
                continue
            seen.setdefault(repr(n.values.get(key)), []).append(n)
        if len(seen) > 1:
            # point at every node that differs from the first node
            first = repr(ref.values.get(key))
            what = "the content of the DeepSpeed JSON" if key == "ds_json" else key
            for val, ns in seen.items():
                if val == first:
                    continue
                for n in ns:
                    shown = "different content" if key == "ds_json" else f"{n.values.get(key)!r}"
                    out.append(NodeIssue("nodeset-mismatch", f"{what} differs between nodes: {n.name} has {shown}, "
                                         f"{ref.name} has " + ("another" if key == "ds_json" else
                                                                f"{ref.values.get(key)!r}"),
                                         UNEQUAL_NODES_HINT if key == "num_processes" else
                                         "every node must use the same value", n, key))
    nm = ref.values.get("num_machines")
    if isinstance(nm, int) and not isinstance(nm, bool):
        ranks: Dict[Any, List[Node]] = {}
        for n in nodes:
            r = n.values.get("machine_rank")
            ranks.setdefault(r if isinstance(r, (int, str, float, type(None))) else repr(r), []).append(n)
        for r, ns in ranks.items():
            if len(ns) > 1:
                for n in ns[1:]:
                    out.append(NodeIssue("nodeset-machine-rank", f"machine_rank {r!r} is used by "
                                         f"{', '.join(x.name for x in ns)}", "give each node its own machine_rank",
                                         n, "machine_rank"))
            if not (isinstance(r, int) and not isinstance(r, bool) and 0 <= r < nm):
                if isinstance(r, str) and r.strip().lstrip("-").isdigit() and 0 <= int(r) < nm:
                    continue  # a numeric string: the single-file rules report its type
                for n in ns:
                    out.append(NodeIssue("nodeset-machine-rank", f"machine_rank {r!r} of {n.name} is outside "
                                         f"0..{nm - 1} (num_machines {nm})", "", n, "machine_rank"))
        if len(nodes) == nm:
            missing = [r for r in range(nm) if r not in ranks]
            if missing:
                out.append(NodeIssue("nodeset-machine-rank", f"no node has machine_rank {', '.join(map(str, missing))}",
                                     "", ref, "machine_rank"))
    # DeepSpeed hostfile versus machines and processes
    for n in nodes:
        hf = n.values.get("deepspeed_hostfile")
        if not isinstance(hf, str) or n.values.get("deepspeed_multinode_launcher") == "standard":
            continue
        full = hf if os.path.isabs(hf) else os.path.join(cwd, hf)
        try:
            from ..core import read_input_file
            pool, err = parse_hostfile(read_input_file(full))
        except Exception:  # noqa: BLE001
            continue
        if err:
            continue
        nm_, npr = n.values.get("num_machines"), n.values.get("num_processes")
        if isinstance(nm_, int) and isinstance(npr, int) and nm_ > 0:
            per = npr // nm_
            if len(pool) != nm_:
                out.append(NodeIssue("nodeset-hostfile-slots", f"hostfile {hf} lists {len(pool)} host(s) but "
                                     f"num_machines is {nm_}", "list one line per machine", n, "deepspeed_hostfile"))
            short = [h for h, s in pool.items() if s < per]
            if short:
                out.append(NodeIssue("nodeset-hostfile-slots", f"hostfile {hf}: {', '.join(short)} offer(s) fewer "
                                     f"slots than the {per} GPUs per machine accelerate asks for "
                                     f"(num_processes {npr} // num_machines {nm_})",
                                     "raise slots= or lower num_processes", n, "deepspeed_hostfile"))
        break
    return out


def key_path(key: str) -> Tuple[str, ...]:
    if key in ("deepspeed_multinode_launcher", "deepspeed_hostfile"):
        return ("deepspeed_config", key)
    if key == "ds_json":
        return ("deepspeed_config", "deepspeed_config_file")
    return (key,)

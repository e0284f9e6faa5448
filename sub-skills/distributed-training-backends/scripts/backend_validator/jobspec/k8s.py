"""Kubernetes manifests: a Kubeflow ``PyTorchJob`` (kubeflow.org/v1) or ``TrainJob``
(trainer.kubeflow.org/v1alpha1), each pod with the environment the operator injects.

PyTorchJob — kubeflow/training-operator v1.9.0 (commit 6f74c7f6b2ed6c27aabd82d0a316b23f0646059c):

* ``pkg/controller.v1/pytorch/envvar.go::setPodEnv`` (every container of every replica):
  PYTHONUNBUFFERED=1; when a ``Master`` replica exists: MASTER_ADDR / PET_MASTER_ADDR =
  ``<job>-master-0`` and MASTER_PORT / PET_MASTER_PORT = the Master container's port
  (``master.go::Generate``), WORLD_SIZE = replicas x nprocPerNode (1 when not an integer,
  ``getNprocPerNodeInt``), RANK = PET_NODE_RANK = the replica index (+1 for workers);
  PET_NPROC_PER_NODE = ``spec.nprocPerNode`` when set; PET_NNODES = total replicas unless
  ``elasticPolicy`` is set. Without a Master replica none of the MASTER_*/RANK variables is set.
* ``elastic.go::Generate`` (``elasticPolicy`` set): PET_RDZV_ENDPOINT = ``<job>-worker-0:<port>``
  (or rdzvHost/rdzvPort), PET_RDZV_BACKEND (default c10d), PET_NNODES = ``MIN:MAX``,
  PET_NPROC_PER_NODE from ``elasticPolicy.nProcPerNode``, PET_MAX_RESTARTS, PET_RDZV_ID.
* ``pkg/apis/kubeflow.org/v1/pytorch_defaults.go``: replicas default 1; the container named
  ``pytorch`` gets port ``pytorchjob-port`` 23456 (``pytorch_types.go``); nprocPerNode defaults to
  "auto" when no elastic nProcPerNode is given.

TrainJob — kubeflow/trainer (commit a55f03a8ccb7798a741ff3c4af502d367ed0f6d2),
``pkg/runtime/framework/plugins/torch/torch.go::EnforceMLPolicy``: PET_NNODES = numNodes,
PET_NPROC_PER_NODE = numProcPerNode (default "auto"), PET_NODE_RANK = the Job completion index,
PET_MASTER_ADDR = ``<job>-trainer-node-0-0.<job>``, PET_MASTER_PORT = 29500
(``pkg/constants/constants.go``); these win over ``spec.trainer.env`` of the same name.

Kubernetes expands ``$(VAR)`` in ``command``/``args`` from the container's environment; a
``sh -c`` / ``bash -c`` script is read with the shell subset of shell.py.
"""
from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Tuple

from . import shell as sh
from .model import JobSpec, Note, Step
from .shell import PStr, Shell

OPERATOR_V1 = "kubeflow/training-operator v1.9.0 (6f74c7f6b2ed6c27aabd82d0a316b23f0646059c)"
TRAINER = "kubeflow/trainer a55f03a8ccb7798a741ff3c4af502d367ed0f6d2"
GPU_KEYS = ("nvidia.com/gpu", "amd.com/gpu", "habana.ai/gaudi", "gpu.intel.com/i915")


class ManifestError(Exception):
    pass


def load_docs(text: str) -> List[Tuple[Any, Dict[Tuple, int]]]:
    """Every YAML document as plain data with the file offset of each key path."""
    from ..pyyaml import real
    yaml = real()
    Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    out = []
    try:
        nodes = list(yaml.compose_all(text, Loader=Loader))
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        raise ManifestError(f"not valid YAML{where}: {getattr(e, 'problem', None) or e}") from None
    budget = [MAX_NODES]
    for root in nodes:
        pos: Dict[Tuple, int] = {}
        out.append((_plain(root, (), pos, 0, budget), pos))
    return out


MAX_NODES = 200_000  # YAML nodes visited (aliases count each time: an alias bomb stops here)


def _plain(node: Any, path: Tuple, pos: Dict[Tuple, int], depth: int, budget: List[int]) -> Any:
    import yaml
    if depth > 60:
        raise ManifestError("nesting too deep to check")
    budget[0] -= 1
    if budget[0] < 0:
        raise ManifestError(f"more than {MAX_NODES} YAML nodes (aliases expanded): not a job manifest")
    pos.setdefault(path, node.start_mark.index)
    if isinstance(node, yaml.MappingNode):
        d: Dict[Any, Any] = {}
        for k, v in node.value:
            key = k.value if isinstance(k, yaml.ScalarNode) else str(len(d))
            pos[path + (key,)] = k.start_mark.index
            d[key] = _plain(v, path + (key,), pos, depth + 1, budget)
            pos[path + (key, "=")] = v.start_mark.index
        return d
    if isinstance(node, yaml.SequenceNode):
        return [_plain(v, path + (i,), pos, depth + 1, budget) for i, v in enumerate(node.value)]
    return node.value if node.tag != "tag:yaml.org,2002:int" else _int(node.value)


def _d(x: Any) -> Dict[str, Any]:
    """A mapping field, or {} when the manifest has something else there."""
    return x if isinstance(x, dict) else {}


def _l(x: Any) -> List[Any]:
    return x if isinstance(x, list) else []


def _int(v: Any) -> Any:
    try:
        return int(str(v))
    except ValueError:
        return v


def _gpus(resources: Any) -> Optional[int]:
    if not isinstance(resources, dict):
        return None
    for part in ("limits", "requests"):
        r = resources.get(part)
        if isinstance(r, dict):
            for k in GPU_KEYS:
                if k in r:
                    v = _int(r[k])
                    return v if isinstance(v, int) else None
    return None


def _shm(pod_spec: Dict[str, Any], container: Dict[str, Any]) -> bool:
    vols = {v.get("name"): v for v in _l(_d(pod_spec).get("volumes")) if isinstance(v, dict)}
    for m in _l(_d(container).get("volumeMounts")):
        if isinstance(m, dict) and str(m.get("mountPath", "")).rstrip("/") == "/dev/shm":
            v = _d(vols.get(m.get("name")))
            ed = v.get("emptyDir")
            if isinstance(ed, dict) and str(ed.get("medium", "")) == "Memory":
                return True
            if "hostPath" in v:
                return True
    return False


def _k8s_expand(s: str, env: Dict[str, str]) -> str:
    """$(VAR) -> value for a variable in the container's environment; $$ -> $ (Kubernetes rules)."""
    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
                  lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0)), s)


def _container(tmpl: Dict[str, Any], name: str) -> Tuple[Optional[Dict[str, Any]], int]:
    cs = _l(_d(_d(tmpl).get("spec")).get("containers"))
    for i, c in enumerate(cs):
        if isinstance(c, dict) and c.get("name") == name:
            return c, i
    for i, c in enumerate(cs):
        if isinstance(c, dict):
            return c, i
    return None, -1


def _port(c: Optional[Dict[str, Any]]) -> int:
    for p in _l(_d(c).get("ports")):
        if isinstance(p, dict) and p.get("name") == "pytorchjob-port" and isinstance(_int(p.get("containerPort")), int):
            return _int(p.get("containerPort"))
    return 23456


def pytorchjob_env(job: Dict[str, Any]) -> List[Tuple[str, int, Dict[str, str]]]:
    """[(pod name, replica type, index-in-type... ) as (pod, node index, env)] per envvar.go::setPodEnv."""
    name = str(_d(job.get("metadata")).get("name") or "job")
    spec = _d(job.get("spec"))
    reps = _d(spec.get("pytorchReplicaSpecs"))
    norm = {str(k).capitalize(): v for k, v in reps.items() if isinstance(v, dict)}
    counts = {k: (_int(v.get("replicas")) if isinstance(_int(v.get("replicas")), int) else 1) for k, v in norm.items()}
    counts = {k: max(0, min(n, 100000)) for k, n in counts.items()}
    total = sum(counts.values())
    elastic = spec.get("elasticPolicy") if isinstance(spec.get("elasticPolicy"), dict) else None
    nproc = spec.get("nprocPerNode")
    if nproc is None and not (elastic and elastic.get("nProcPerNode") is not None):
        nproc = "auto"  # pytorch_defaults.go::setDefaultNprocPerNode
    nproc_int = _int(nproc) if isinstance(_int(nproc), int) else 1
    pods = []
    order = [("Master", "master"), ("Worker", "worker")]
    node = 0
    for typ, low in order:
        for idx in range(counts.get(typ, 0)):
            env: Dict[str, str] = {"PYTHONUNBUFFERED": "1"}
            if "Master" in norm:
                mc, _ = _container(_d(norm["Master"].get("template")), "pytorch")
                port = str(_port(mc))
                env.update({"MASTER_PORT": port, "PET_MASTER_PORT": port, "MASTER_ADDR": f"{name}-master-0",
                            "PET_MASTER_ADDR": f"{name}-master-0"})
                rank = idx + (1 if typ == "Worker" else 0)
                env.update({"WORLD_SIZE": str(total * nproc_int), "RANK": str(rank), "PET_NODE_RANK": str(rank)})
            if nproc is not None:
                env["PET_NPROC_PER_NODE"] = str(nproc)
            if elastic is not None:
                wc, _ = _container(_d(_d(norm.get("Worker")).get("template")), "pytorch")
                host = elastic.get("rdzvHost") or f"{name}-worker-0"
                port = elastic.get("rdzvPort") or _port(wc)
                env["PET_RDZV_ENDPOINT"] = f"{host}:{port}"
                env["PET_RDZV_BACKEND"] = str(elastic.get("rdzvBackend") or "c10d")
                mn, mx = elastic.get("minReplicas"), elastic.get("maxReplicas")
                w = counts.get("Worker", 0)
                mn = mn if mn is not None else (mx if mx is not None else w)
                mx = mx if mx is not None else mn
                env["PET_NNODES"] = f"{mn}:{mx}"
                if elastic.get("maxRestarts") is not None:
                    env["PET_MAX_RESTARTS"] = str(elastic["maxRestarts"])
                if elastic.get("nProcPerNode") is not None:
                    env["PET_NPROC_PER_NODE"] = str(elastic["nProcPerNode"])
                if elastic.get("rdzvId") is not None:
                    env["PET_RDZV_ID"] = str(elastic["rdzvId"])
            else:
                env["PET_NNODES"] = str(total)
            pods.append((f"{name}-{low}-{idx}", typ, idx, node, env))
            node += 1
    return pods


def _user_env(c: Dict[str, Any]) -> Dict[str, str]:
    out: Dict[str, str] = {}
    for e in _l(c.get("env")):
        if isinstance(e, dict) and e.get("name"):
            if "value" in e:
                out[str(e["name"])] = str(e.get("value") if e.get("value") is not None else "")
            else:
                out[str(e["name"])] = sh.unknown(str(e["name"]))
    return out


def _argv_of(c: Dict[str, Any], env: Dict[str, str], base: Tuple, pos: Dict[Tuple, int]) -> List[PStr]:
    out: List[PStr] = []
    for key in ("command", "args"):
        items = c.get(key)
        if isinstance(items, str):
            items = [items]
        for i, item in enumerate(_l(items)):
            s = _k8s_expand(str(item), env)
            off = pos.get(base + (key, i), -1)
            out.append(PStr(s, [off] * len(s)) if s != str(item) else PStr(s, _scalar_offsets(s, off)))
    return out


_TEXT = {"": ""}


def _scalar_offsets(s: str, off: int) -> List[int]:
    """Offsets for a scalar's characters: exact for a one-line plain/quoted scalar, the scalar's start otherwise."""
    src = _TEXT[""]
    if off >= 0:
        if src.startswith(s, off):
            return list(range(off, off + len(s)))
        if src[off:off + 1] in "\"'" and src.startswith(s, off + 1):
            return list(range(off + 1, off + 1 + len(s)))
        if src[off:off + 1] in "|>":  # block scalar: map line by line
            lines = s.split("\n")
            out: List[int] = []
            cur = src.find("\n", off) + 1
            for ln in lines:
                if not ln:
                    nl = src.find("\n", cur)
                    out.extend([cur] if True else [])
                    cur = nl + 1 if nl >= 0 else len(src)
                    continue
                k = src.find(ln, cur)
                if k < 0:
                    out.extend([off] * (len(ln) + 1))
                    continue
                out.extend(range(k, k + len(ln)))
                out.append(k + len(ln))
                cur = k + len(ln) + 1
            return (out + [off] * len(s))[:len(s)]
    return [off] * len(s)


def load(spec: JobSpec, submit_dir: str) -> None:
    _TEXT[""] = spec.text
    docs = load_docs(spec.text)
    found = False
    for data, pos in docs:
        if not isinstance(data, dict):
            continue
        kind = data.get("kind")
        if kind == "PyTorchJob":
            found = True
            spec.kind = "pytorchjob"
            _pytorchjob(spec, data, pos, submit_dir)
        elif kind == "TrainJob":
            found = True
            spec.kind = "trainjob"
            _trainjob(spec, data, pos, submit_dir)
    if not found:
        raise ManifestError("no PyTorchJob (kubeflow.org/v1) or TrainJob (trainer.kubeflow.org) in the manifest")


def _run_container(spec: JobSpec, step: Step, argv: List[PStr], env: Dict[str, str], node: int, host: str) -> None:
    from .slurm import _Run, Allocation
    r = _Run(spec, Allocation(), 1, 1, "/")
    s = Shell(name=f"pod{node}")
    for k, v in env.items():
        s.set(k, PStr(v, [-1] * len(v)), export=True)
    s.subst = lambda body, _s, h=host: h if re.fullmatch(r"\s*hostname( -s)?\s*", body) else None
    r.argv(argv, s, (step, node, 0, node), 0, {})
    for la in step.launches:
        if la.node == node and not la.host:
            la.host = host


def _pytorchjob(spec: JobSpec, job: Dict[str, Any], pos: Dict[Tuple, int], submit_dir: str) -> None:
    reps = _d(_d(job.get("spec")).get("pytorchReplicaSpecs"))
    keys = {str(k).capitalize(): k for k in reps}
    pods = pytorchjob_env(job)
    base = ("spec", "pytorchReplicaSpecs")
    first = None
    step = Step("pod", pos.get(base, 0), len(pods))
    step.nodes_hint = "replicas"
    step.replicas_where = pos.get(base, -1)
    step.pod_names = [p[0] for p in pods]
    for pod, typ, idx, node, openv in pods:
        rs = _d(reps.get(keys[typ]))
        tmpl = _d(rs.get("template"))
        c, ci = _container(tmpl, "pytorch")
        if c is None:
            continue
        cpath = base + (keys[typ], "template", "spec", "containers", ci)
        env = dict(_user_env(c))
        env.update(openv)  # the operator appends its variables after the user's: its values win
        if first is None:
            first = (c, cpath, tmpl)
            step.operator_env = dict(openv)
            step.gpus_per_node = _gpus(c.get("resources"))
            step.gpus_where = pos.get(cpath + ("resources",), pos.get(cpath, -1))
            step.shm_memory = _shm(_d(tmpl.get("spec")), c)
            step.container_where = pos.get(cpath, -1)
        argv = _argv_of(c, env, cpath, pos)
        if pos.get(base + (keys[typ], "replicas"), -1) >= 0 and step.nodes_where < 0:
            step.nodes_where = pos.get(base + (keys[typ], "replicas"))
        _run_container(spec, step, argv, env, node, pod)
        if node >= 1 and len({la.node for la in step.launches}) >= 2:
            break
    if step.nodes_where < 0:
        step.nodes_where = step.replicas_where
    spec.steps.append(step)
    spec.alloc = {"replicas": len(pods), "operator": OPERATOR_V1}


def _trainjob(spec: JobSpec, job: Dict[str, Any], pos: Dict[Tuple, int], submit_dir: str) -> None:
    name = str(_d(job.get("metadata")).get("name") or "job")
    tr = _d(_d(job.get("spec")).get("trainer"))
    nn = _int(tr.get("numNodes"))
    nn = nn if isinstance(nn, int) and not isinstance(nn, bool) and nn >= 1 else None
    npp = tr.get("numProcPerNode", "auto")
    base = ("spec", "trainer")
    step = Step("pod", pos.get(base, 0), nn if isinstance(nn, int) else None)
    step.nodes_hint = "spec.trainer.numNodes"
    step.nodes_where = pos.get(base + ("numNodes",), pos.get(base, -1))
    step.gpus_per_node = _gpus(tr.get("resourcesPerNode"))
    step.gpus_where = pos.get(base + ("resourcesPerNode",), -1)
    step.container_where = pos.get(base, -1)
    if not isinstance(nn, int):
        spec.notes.append(Note("jobspec-not-checked", "TrainJob without spec.trainer.numNodes: the node count comes "
                               "from the referenced runtime, which is not in this file", "", pos.get(base, 0)))
    n = nn if isinstance(nn, int) else 1
    for node in range(min(n, 2)):
        env = _user_env(tr)
        env.update({"PET_NNODES": str(n), "PET_NPROC_PER_NODE": str(npp), "PET_NODE_RANK": str(node),
                    "PET_MASTER_ADDR": f"{name}-trainer-node-0-0.{name}", "PET_MASTER_PORT": "29500"})
        if node == 0:
            step.operator_env = {k: v for k, v in env.items() if k.startswith("PET_")}
        argv = _argv_of(tr, env, base, pos)
        _run_container(spec, step, argv, env, node, f"{name}-trainer-node-0-{node}")
    spec.steps.append(step)
    spec.alloc = {"numNodes": nn, "operator": TRAINER}

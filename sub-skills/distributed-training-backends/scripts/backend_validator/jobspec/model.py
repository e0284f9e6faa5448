"""What a job spec runs where: the data both front ends (SLURM, Kubernetes) produce for the checks.

A :class:`Step` is one place a launch happens: an ``srun`` step, a launcher in the batch body (runs
once, on the first node), or a pod's container. It holds the allocation it runs on and the
simulated launches: one :class:`TaskLaunch` per simulated node and task, with the launcher's argv
(each character remembering its file offset) and the environment that task's launcher sees.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from .shell import PStr

LAUNCHERS = ("torchrun", "accelerate", "deepspeed", "python")


@dataclass
class TaskLaunch:
    node: int  # simulated node index (pod index for Kubernetes)
    local: int  # task index on that node
    procid: int  # global task index
    launcher: str  # torchrun | accelerate | deepspeed | python (a bare script per task)
    words: List[PStr]  # from the launcher name on (python -m X included)
    env: Dict[str, str]  # the launcher process's environment (values may hold unknown markers)
    host: str = ""
    early: List[Tuple[str, int]] = field(default_factory=list)  # (per-task name, offset) the batch shell expanded


@dataclass
class Step:
    kind: str  # srun | batch | pod
    offset: int  # file offset of the command (srun word, launcher word, or the container)
    nodes: Optional[int]  # nodes (or pods) this step runs on; None: unknown
    tasks_per_node: int = 1
    gpus_per_node: Optional[int] = None  # GPUs allocated per node (per pod)
    gpus_per_task: Optional[int] = None  # GPUs each task sees, when bound per task
    gpus_where: int = -1  # file offset of the GPU request
    nodes_where: int = -1
    tasks_where: int = -1
    launches: List[TaskLaunch] = field(default_factory=list)
    pod_names: List[str] = field(default_factory=list)
    operator_env: Dict[str, str] = field(default_factory=dict)  # env the operator injects (node 0)
    shm_memory: Optional[bool] = None  # Kubernetes: /dev/shm backed by an emptyDir medium Memory
    container_where: int = -1
    replicas_where: int = -1
    nodes_hint: str = ""  # how the node count was found (for messages)


@dataclass
class Note:
    """Something the front end could not follow or found on its own (becomes a finding)."""
    rule: str
    message: str
    hint: str
    offset: int


@dataclass
class JobSpec:
    kind: str  # slurm | pytorchjob | trainjob
    name: str
    text: str
    steps: List[Step] = field(default_factory=list)
    notes: List[Note] = field(default_factory=list)
    alloc: Dict[str, object] = field(default_factory=dict)  # what the directives / manifest ask for
    doc_offsets: Dict[Tuple, int] = field(default_factory=dict)

    def line_col(self, offset: int) -> Tuple[Optional[int], Optional[int]]:
        if offset is None or offset < 0:
            return None, None
        line = self.text.count("\n", 0, offset) + 1
        col = offset - (self.text.rfind("\n", 0, offset) + 1) + 1
        return line, col

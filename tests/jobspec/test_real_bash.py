"""The expansion model against real bash: each batch script runs under bash with the batch step's
SLURM variables, a stand-in `srun` that starts every simulated task with the variables SLURM
documents for it (SLURM_NODEID, SLURM_PROCID, SLURM_LOCALID, SLURM_NTASKS, SLURM_JOB_NODELIST, ...;
the values come from jobspec/slurm.py::slurm_env, the same as the checker uses), a stand-in
`scontrol show hostnames`, and launchers that record their argv. The argv every task's launcher
gets must equal what the checker computed for that task."""
from __future__ import annotations

import json
import stat
import subprocess

import pytest

from backend_validator import core, docs
from backend_validator.jobspec import slurm
from backend_validator.jobspec.model import JobSpec
from backend_validator.jobspec.shell import has_unknown
from backend_validator.rules import load_family

load_family("jobspec")

EXTRA = {
    "escaped-dq": """#!/bin/bash
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
export GPUS=2
export MASTER_ADDR=$(scontrol show hostnames $SLURM_JOB_NODELIST | head -n 1)
export LAUNCHER="python -u -m torch.distributed.run --nproc_per_node $GPUS --nnodes $SLURM_NNODES --master_addr $MASTER_ADDR --master_port 6000"
srun --jobid $SLURM_JOBID bash -c "$LAUNCHER --node_rank \\$SLURM_PROCID train.py --lr 1e-4"
""",
    "defaults-arith": """#!/bin/bash
#SBATCH -N 2
#SBATCH --gpus-per-node=4
NPROC=${NPROC:-4}
export WORLD=$(( SLURM_NNODES * NPROC ))
export HEAD=`hostname`
srun -l --kill-on-bad-exit=1 bash -c 'echo start; torchrun --nnodes=$SLURM_NNODES --nproc-per-node='"$NPROC"' --rdzv-backend=c10d --rdzv-endpoint=$HEAD:29500 --rdzv-id=$SLURM_JOB_ID train.py --world $WORLD'
""",
    "subshell-in-substitution": """#!/bin/bash
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --gres=gpu:2
srun bash -c "torchrun --nnodes=$SLURM_NNODES --nproc_per_node=2 --rdzv_backend=c10d \
  --rdzv_endpoint=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1):29500 \
  --rdzv_conf=is_host=\\$(((SLURM_NODEID)) && echo 0 || echo 1) --max-restarts=$(( 2 + 1 )) train.py"
""",
    "task-per-gpu": """#!/bin/bash
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=2
#SBATCH --gpus-per-task=1
export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
export MASTER_PORT=29500
srun bash -c 'RANK=$SLURM_PROCID LOCAL_RANK=$SLURM_LOCALID WORLD_SIZE=$SLURM_NTASKS python train.py'
""",
    "accelerate-env": """#!/bin/bash
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --gres=gpu:4
export HEAD_NODE=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
srun env NCCL_DEBUG=INFO accelerate launch --multi_gpu --num_machines $SLURM_NNODES --num_processes $((SLURM_NNODES * 4)) --machine_rank '$SLURM_NODEID' --main_process_ip $HEAD_NODE train.py
""",
}


def _scripts():
    out = dict(EXTRA)
    for r in sorted((r for r in core.REGISTRY.values() if r.family == "jobspec"), key=lambda r: r.id):
        _, ex = docs.parse_doc(r.doc)
        for label, (lang, text) in ex.items():
            if lang == "bash":
                out[f"{r.id}:{label}"] = text
    return out


SRUN = r'''#!/usr/bin/env python3
import json, os, subprocess, sys
plan = json.loads(os.environ["SIM_PLAN"])
args = sys.argv[1:]
val = set(plan["value_opts"])
i = 0
while i < len(args) and args[i].startswith("-"):
    a = args[i]
    if a == "--":
        i += 1
        break
    if a.startswith("--") and "=" not in a and a not in plan["novalue"]:
        i += 2
    elif not a.startswith("--") and len(a) == 2 and a[1] in val:
        i += 2
    else:
        i += 1
cmd = args[i:]
for t in plan["tasks"]:
    env = dict(os.environ)
    env.update(t["env"])
    env["SIM_TASK"] = f"{t['node']}.{t['local']}"
    subprocess.run(cmd, env=env, check=False)
'''
RECORD = r'''#!/usr/bin/env python3
import json, os, sys
with open(os.environ["SIM_LOG"], "a") as f:
    f.write(json.dumps({"task": os.environ.get("SIM_TASK", "batch"), "argv": [os.path.basename(sys.argv[0])] + sys.argv[1:]}) + "\n")
'''
SCONTROL = r'''#!/usr/bin/env python3
import re, sys
a = sys.argv[1:]
if len(a) >= 3 and a[0] == "show" and a[1] in ("hostnames", "hostname"):
    m = re.fullmatch(r"node\[0-(\d+)\]", a[2])
    print("\n".join(f"node{i}" for i in range(int(m.group(1)) + 1)) if m else a[2])
'''


def _exe(path, text):
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


@pytest.mark.parametrize("name", sorted(_scripts()))
def test_expansion_matches_bash(name, tmp_path):
    text = _scripts()[name]
    p = tmp_path / "job.sbatch"
    p.write_text(text)
    spec = JobSpec("slurm", "job", text)
    slurm.load(spec, str(tmp_path))
    srun_steps = [s for s in spec.steps if s.kind in ("srun", "batch")]
    assert srun_steps, name
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    for tool in ("torchrun", "accelerate", "deepspeed", "python", "python3"):
        _exe(bin_ / tool, RECORD.replace("#!/usr/bin/env python3", "#!" + __import__("sys").executable))
    _exe(bin_ / "srun", SRUN.replace("#!/usr/bin/env python3", "#!" + __import__("sys").executable))
    _exe(bin_ / "scontrol", SCONTROL.replace("#!/usr/bin/env python3", "#!" + __import__("sys").executable))
    _exe(bin_ / "hostname", "#!/bin/sh\necho node${SIM_NODE:-0}\n")
    alloc = slurm.directives(text, [])
    nodes = alloc.nodes[0] or 2
    st = next(s for s in spec.steps if s.kind == "srun") if any(s.kind == "srun" for s in spec.steps) else None
    tasks = []
    if st is not None:
        r = slurm._Run(spec, alloc, nodes, alloc.nodes[0], str(tmp_path))
        _, tpn, gpn, gpt, *_ = r.numbers({})
        tpn = st.tasks_per_node
        for node in range(min(nodes, slurm.MAX_SIM_NODES)):
            for local in range(min(tpn, slurm.MAX_SIM_TASKS)):
                env = slurm.slurm_env(nodes, node, local, node * tpn + local, tpn * nodes, tpn, st.gpus_per_node,
                                      st.gpus_per_task, None, str(tmp_path), batch=False)
                env["SIM_NODE"] = str(node)
                tasks.append({"node": node, "local": local, "env": env})
    r = slurm._Run(spec, alloc, nodes, alloc.nodes[0], str(tmp_path))
    benv = slurm.slurm_env(nodes, 0, 0, 0, None, None, None, None, None, str(tmp_path), batch=True)
    env = {"PATH": f"{bin_}:/usr/bin:/bin", "HOME": str(tmp_path), "SIM_LOG": str(tmp_path / "log"),
           "SIM_PLAN": json.dumps({"tasks": tasks, "value_opts": sorted(slurm._VALUE_SHORT),
                                   "novalue": sorted(slurm._NOVALUE_LONG)})}
    # the batch step's variables, as the checker's batch shell has them
    bsh = r.batch_shell()
    env.update({k: v.text for k, v in bsh.vars.items()})
    env["SIM_NODE"] = "0"
    proc = subprocess.run(["bash", str(p)], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode in (0, 1), proc.stderr
    got = {}
    for line in (tmp_path / "log").read_text().splitlines() if (tmp_path / "log").exists() else []:
        rec = json.loads(line)
        got.setdefault(rec["task"], []).append(rec["argv"])
    compared = 0
    for s in spec.steps:
        for la in s.launches:
            key = f"{la.node}.{la.local}" if s.kind == "srun" else "batch"
            mine = [w.text for w in la.words]
            if any(has_unknown(t) for t in mine):
                continue
            real = got.get(key, [])
            assert real, (name, key, got)
            real_argv = real[0]
            if real_argv[0] in ("python", "python3") and mine[0].startswith("python"):
                real_argv = [mine[0]] + real_argv[1:]
            assert real_argv == mine, (name, key)
            compared += 1
    # a launch with a value only the submitting environment knows is not compared
    assert compared >= 1 or all(any(has_unknown(w.text) for w in la.words) for s in spec.steps for la in s.launches), name

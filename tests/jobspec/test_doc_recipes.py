"""The recipes the references give are checked: the Accelerate-on-SLURM script (configuration-and-cli) and the
SLURM recipe table of torch-distributed's schedulers page get no error and no warning from --job-spec, and
their expansion is the one real bash gives (test_real_bash machinery)."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from backend_validator.jobspec.check import check_job_spec

REPO = Path(__file__).resolve().parents[2]
ACC = REPO / "sub-skills" / "configuration-and-cli" / "references" / "accelerate-on-slurm.md"
SCHED = REPO / "sub-skills" / "torch-distributed" / "references" / "schedulers-slurm-kubernetes.md"


def recipes():
    out = {}
    for i, m in enumerate(re.finditer(r"```sbatch\n(.*?)```", ACC.read_text(), re.S)):
        out[f"accelerate-on-slurm#{i}"] = m.group(1)
    text = SCHED.read_text()
    sec = text.split("## SLURM recipes\n", 1)[1].split("\n## ", 1)[0]
    export = re.search(r"`(export MASTER_ADDR=[^`]+)`", sec).group(1)
    for line in sec.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or not cells[2].startswith("`srun"):
            continue
        directives = [d for d in re.findall(r"`(--[^`]+)`", cells[1])]
        script = "#!/bin/bash\n#SBATCH --nodes=2\n" + "".join(f"#SBATCH {d.replace('=G', '=4').replace(':G', ':4')}\n"
                                                              for d in directives)
        command = re.match(r"`([^`]+)`", cells[2]).group(1)
        script += export + "\nexport MASTER_PORT=29500\n" + command.replace(" G ", " 4 ") + "\n"
        out[f"schedulers:{cells[0]}"] = script
    return out


def test_recipes_found():
    r = recipes()
    assert len(r) >= 4, sorted(r)


@pytest.mark.parametrize("name", sorted(recipes()))
def test_recipe_is_clean(name, tmp_path):
    text = recipes()[name]
    p = tmp_path / "job.sbatch"
    p.write_text(text)
    res = check_job_spec(str(p), "job", cwd=str(tmp_path))
    bad = [(f.rule, f.message) for f in res.findings if f.severity in ("error", "warning")]
    assert not bad, (text, bad)
    launches = [l for s in res.steps for l in s["launches"]]
    assert launches and {l["node"] for l in launches} == {0, 1}, res.steps
    ranks = {l["node_rank"] for l in launches if l["task"] == 0}
    assert None in ranks or len(ranks) == 2 or launches[0]["launcher"] == "torchrun", ranks


@pytest.mark.parametrize("name", sorted(recipes()))
def test_recipe_expansion_matches_bash(name, tmp_path, monkeypatch):
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import test_real_bash as trb
    monkeypatch.setitem(trb.EXTRA, "recipe", recipes()[name])
    trb.test_expansion_matches_bash("recipe", tmp_path)


TASK_PER_GPU = """#!/bin/bash
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=4
#SBATCH {gpus}
export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
export MASTER_PORT=29500
srun bash -c 'RANK=$SLURM_PROCID LOCAL_RANK=$SLURM_LOCALID WORLD_SIZE=$SLURM_NTASKS python train.py'
"""


@pytest.mark.parametrize("gpus,flagged", [("--gpus-per-task=1", True), ("--gres=gpu:4", False)])
def test_task_per_gpu_local_rank_needs_every_gpu_visible(gpus, flagged, tmp_path):
    """The schedulers page's note under the recipes: LOCAL_RANK=$SLURM_LOCALID with one GPU bound per task."""
    p = tmp_path / "job.sbatch"
    p.write_text(TASK_PER_GPU.format(gpus=gpus))
    res = check_job_spec(str(p), "job", cwd=str(tmp_path))
    hits = [f.message for f in res.findings if f.rule == "jobspec-processes-exceed-gpus"]
    assert bool(hits) is flagged, hits
    if flagged:
        assert "LOCAL_RANK=1 but sees 1 GPU(s)" in hits[0]
    assert "`--job-spec` reports it as `jobspec-processes-exceed-gpus`" in " ".join(SCHED.read_text().split())

"""Accelerate's refusal of DTensor parameters on the DDP path needs more than one process.

accelerate-prepare-model.md said `prepare` raises "Your model contains `DTensor` parameters, which is
incompatible with DDP" under `MULTI_GPU` (and the other `MULTI_*` types) without TP. A run on an H100
(tests/device/records/2026-12-06-h100-probes.json, probe accel_dtensor_ddp: one torchrun process,
`MULTI_GPU`) prepared such a model without the error: `multi_device` is `use_distributed` (distributed
type not NO **and** `num_processes > 1`) and a `MULTI_*` type. Here the AcceleratorState singleton is
forced to `MULTI_GPU` with 1 and with 2 processes in one child (a 1-rank gloo mesh makes the DTensor
parameter; nothing is wrapped because the check comes first or `multi_device` is false).
"""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import _generated_blocks as gb  # noqa: E402

CHILD = textwrap.dedent("""
    import json, os, torch, torch.distributed as dist
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=os.environ["PORT"], RANK="0", WORLD_SIZE="1")
    dist.init_process_group("gloo")
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, distribute_tensor
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState, PartialState
    from accelerate.utils import DistributedType
    acc = Accelerator(cpu=True)
    mesh = init_device_mesh("cpu", (1,))
    out = {}
    for n in (1, 2):
        AcceleratorState._shared_state["distributed_type"] = DistributedType.MULTI_GPU
        PartialState._shared_state["distributed_type"] = DistributedType.MULTI_GPU
        PartialState._shared_state["num_processes"] = n
        m = torch.nn.Linear(4, 4)
        m.weight = torch.nn.Parameter(distribute_tensor(m.weight.detach(), mesh, [Replicate()]))
        try:
            r = acc.prepare(m)
            out[str(n)] = "prepared " + type(r).__name__
        except ValueError as e:
            out[str(n)] = "ValueError: " + str(e)[:70]
    print("R " + json.dumps(out), flush=True)
    os._exit(0)
""")


def test_dtensor_refusal_needs_more_than_one_process(tmp_path):
    env = gb.child_env(tmp_path, PORT="29671", CUDA_VISIBLE_DEVICES="")
    p = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=180, env=env,
                       cwd=str(tmp_path))
    lines = [ln[2:] for ln in p.stdout.splitlines() if ln.startswith("R ")]
    assert lines, p.stderr[-1500:]
    out = json.loads(lines[-1])
    assert out["1"] == "prepared Linear", out                        # one process: no check, no wrap
    assert out["2"].startswith("ValueError: Your model contains `DTensor` parameters, which is incompatible"), out
    doc = Path(__file__).resolve().parents[2] / "sub-skills/distributed-training-backends/references/accelerate-prepare-model.md"
    assert "Only with more than one process: `multi_device` also needs" in " ".join(doc.read_text().split())

"""quantized-models.md: the multi-entry `hf_device_map` check sits in `Accelerator.prepare` itself, before
the dispatch to any backend, so DeepSpeed and FSDP raise it too (the set-3 answer eval caught the
reference saying FSDP2 and DeepSpeed never check the device map).

Runs accelerate 1.15.0 in a child process (the AcceleratorState singleton is forced to each distributed
type there, which is what `prepare` reads before dispatching; no launcher is needed for the check).
"""
from __future__ import annotations

import subprocess
import sys
import textwrap

CHILD = textwrap.dedent("""
    import torch
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState
    from accelerate.utils import DistributedType
    acc = Accelerator(cpu=True)
    for name in ("DEEPSPEED", "FSDP", "MULTI_GPU", "MEGATRON_LM", "NO"):
        m = torch.nn.Linear(2, 2)
        m.hf_device_map = {"a": 0, "b": 1}
        AcceleratorState._shared_state["distributed_type"] = getattr(DistributedType, name)
        try:
            acc.prepare(m)
            print(name, "accepted")
        except ValueError as e:
            print(name, "raises" if "loaded with `device_map='auto'`" in str(e) else "other: " + str(e)[:80])
""")


def test_multi_entry_device_map_raises_in_prepare_for_every_distributed_type():
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    got = dict(line.split(" ", 1) for line in out.stdout.splitlines() if line.strip())
    assert got == {"DEEPSPEED": "raises", "FSDP": "raises", "MULTI_GPU": "raises", "MEGATRON_LM": "raises",
                   "NO": "accepted"}, got

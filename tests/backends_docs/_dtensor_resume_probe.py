"""One gloo process (world size 1): what `Trainer._load_from_checkpoint`'s plain `model.load_state_dict(
state_dict, False)` does when the model's parameters are DTensors (a model sharded at load time) and the
checkpoint holds plain tensors (what `save_pretrained` writes after `full_tensor()`). Prints one line:
`loaded` or the exception type and the distinctive part of its message. Ends with os._exit(0)."""
import os
import sys

import torch
import torch.distributed as dist

os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=sys.argv[1], RANK="0", WORLD_SIZE="1")
dist.init_process_group("gloo")
from torch.distributed.device_mesh import init_device_mesh  # noqa: E402
from torch.distributed.tensor import Shard, distribute_module, distribute_tensor  # noqa: E402

mesh = init_device_mesh("cpu", (1,))
model = torch.nn.Linear(4, 4)


def shard(_name, mod, mesh):
    for n, p in list(mod.named_parameters(recurse=False)):
        mod.register_parameter(n, torch.nn.Parameter(distribute_tensor(p.data, mesh, [Shard(0)])))


distribute_module(model, mesh, shard)
plain = {k: torch.zeros_like(v.full_tensor()) for k, v in model.state_dict().items()}
try:
    model.load_state_dict(plain, False)
    out = "loaded"
except Exception as e:  # noqa: BLE001 - the probe reports whatever load_state_dict raises
    msg = str(e)
    key = "got mixed torch.Tensor and DTensor"
    out = f"{type(e).__name__}: {key}" if key in msg else f"{type(e).__name__}: {msg.splitlines()[0]}"
print(out, flush=True)
dist.destroy_process_group()
os._exit(0)

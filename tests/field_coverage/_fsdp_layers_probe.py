"""Runs under torchrun with 2 gloo ranks (CPU): a 4-layer model whose `_no_split_modules` is
["Block"], prepared by Accelerate with TRANSFORMER_BASED_WRAP and no class list, FSDP1 or FSDP2
(argv[2] = "1" | "2"). Each rank writes <argv[1]>.rank<r>.json: whether the model repr shows FSDP
before and after prepare, and for every layer's weight its full and local element counts (read by
test_fsdp_layers.py)."""
import json
import os
import sys

import torch
from torch import nn

from accelerate import Accelerator, FullyShardedDataParallelPlugin

OUT, VERSION = sys.argv[1], int(sys.argv[2])
from accelerate.state import PartialState  # noqa: E402
from accelerate.utils import DistributedType  # noqa: E402

# Stand-in, as tests/backends_docs/_trainer_backend_matrix.py::_fsdp_stand_in: Accelerate enables an FSDP
# plugin only on a GPU-like distributed type; here MULTI_GPU with gloo whose device is the CPU, so
# prepare takes its GPU FSDP path on CPU tensors.
_real_prep, _real_set = PartialState._prepare_backend, PartialState.set_device


def _prep(self, cpu=False, sagemaker_dp=False, backend=None):
    got, dt = _real_prep(self, cpu, sagemaker_dp, backend)
    return ("gloo", DistributedType.MULTI_GPU) if got is None and not cpu else (got, dt)


def _set_device(self):
    if self.device is None and not torch.cuda.is_available():
        self.device = torch.device("cpu")
        return
    _real_set(self)


PartialState._prepare_backend, PartialState.set_device = _prep, _set_device


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x):
        return torch.relu(self.lin(x))


class Net(nn.Module):
    _no_split_modules = ["Block"]

    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(Block() for _ in range(4))

    def forward(self, x):
        for b in self.layers:
            x = b(x)
        return x


os.environ["ACCELERATE_USE_FSDP"] = "true"  # what `accelerate launch` exports for distributed_type: FSDP
plugin = FullyShardedDataParallelPlugin(fsdp_version=VERSION, auto_wrap_policy="transformer_based_wrap")
acc = Accelerator(fsdp_plugin=plugin)  # no GPU here: the device is the CPU
rec0 = {"distributed_type": str(acc.distributed_type)}
model = Net()
rec = {**rec0, "before": "FullyShardedDataParallel" in repr(model) or "FSDP" in repr(model)}
prepared, _ = acc.prepare(model, torch.optim.SGD(model.parameters(), lr=0.1))  # FSDP2 wants both
text = repr(prepared)
rec["after_repr"] = "FullyShardedDataParallel" in text or "FSDP" in text
layers = prepared.module.layers if VERSION == 1 else prepared.layers
rec["after_layer_classes"] = [type(b).__name__ for b in layers]
if VERSION == 1:  # each wrapped layer's FlatParameter: this rank's shard of all its parameters
    rec["layers"] = [[b._flat_param._unpadded_unsharded_size.numel(), b._flat_param.numel()] for b in layers]
else:  # each weight a DTensor sharded on dim 0 over both ranks
    rec["layers"] = [[b.lin.weight.numel(), b.lin.weight.to_local().numel()] for b in layers]
with open(f"{OUT}.rank{acc.process_index}.json", "w") as f:
    json.dump(rec, f)

# End every rank together and skip interpreter teardown (an exit with live gloo threads can abort with
# SIGABRT after the result is written; see _trainer_gpu_count_probe.py).
if torch.distributed.is_initialized():
    torch.distributed.barrier()
sys.stdout.flush()
os._exit(0)

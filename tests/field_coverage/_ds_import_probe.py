"""Which torch.cuda availability calls `import deepspeed` makes, and from where (deepspeed 0.19.8).
Plain python, no launcher. The CPU build of torch has no CUDA, so the probe pretends a GPU host:
torch.cuda.device_count is patched to return 1 and torch.cuda.is_available to record its caller and
return False (the real one would run cudaGetDeviceCount -> cuInit). Prints RESULT <json>."""
import json
import os
import traceback

import torch

calls = []


def _caller():
    """The deepspeed frames on the stack, outermost first (file::function)."""
    return [f"{fr.filename.split('site-packages/')[-1]}::{fr.name}" for fr in traceback.extract_stack()[:-2]
            if "site-packages/deepspeed/" in fr.filename]


def _lazy_init():
    calls.append(["_lazy_init", _caller()])
    raise RuntimeError("probe: torch.cuda._lazy_init called")


def _device_count():
    calls.append(["device_count", _caller()])
    return 1


def _is_available():
    calls.append(["is_available", _caller()])
    return False


torch.cuda.device_count = _device_count
torch.cuda.is_available = _is_available
torch.cuda._lazy_init = _lazy_init

import deepspeed  # noqa: E402
from deepspeed.accelerator import get_accelerator  # noqa: E402

print("RESULT " + json.dumps({"ds_accelerator": os.environ.get("DS_ACCELERATOR"), "calls": calls,
                              "accelerator": get_accelerator().device_name(),
                              "torch_cuda_is_initialized": torch.cuda.is_initialized()}))

"""Trigger DALLE-pytorch 1.6.6 failures for real on a CPU and print each traceback.

DALLE-pytorch is installed without its dependencies, so the third-party modules it imports at
the top of its files (axial_positional_embedding, rotary_embedding_torch, omegaconf, taming,
requests, PIL) are replaced by empty stand-ins; the code that raises is the package's own.
Run by test_repro_dalle.py as ``python scenarios_dalle.py``.
"""
from __future__ import annotations

import argparse
import importlib.abc
import importlib.machinery
import importlib.metadata
import sys
import traceback
import types
import warnings

STUBBED = ("axial_positional_embedding", "rotary_embedding_torch", "omegaconf", "taming", "requests", "PIL",
           "youtokentome", "ftfy", "regex", "tokenizers")


class _Stub(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return type(name, (), {"__init__": lambda self, *a, **k: None})


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path, target=None):
        if fullname.split(".")[0] in STUBBED:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        mod = _Stub(spec.name)
        mod.__path__ = []
        return mod

    def exec_module(self, module):
        pass


def _pkg_resources_stand_in():
    """What setuptools < 82 provides, for the scenarios after the first one."""
    mod = types.ModuleType("pkg_resources")

    class _Dist:
        def __init__(self, name):
            self.version = importlib.metadata.version(name)

    mod.get_distribution = _Dist
    sys.modules["pkg_resources"] = mod


def _forget_dalle():
    for name in list(sys.modules):
        if name == "dalle_pytorch" or name.startswith("dalle_pytorch."):
            del sys.modules[name]


SCENARIOS = []


def scenario(fn):
    SCENARIOS.append(fn)
    return fn


@scenario
def dalle_import_without_pkg_resources():
    _forget_dalle()
    import dalle_pytorch  # noqa: F401


@scenario
def dalle_unknown_backend():
    from dalle_pytorch import distributed_utils
    distributed_utils.set_backend_from_args(argparse.Namespace(deepspeed=False, distributed_backend="nccl"))


@scenario
def dalle_horovod_not_installed():
    from dalle_pytorch import distributed_utils
    distributed_utils.set_backend_from_args(argparse.Namespace(deepspeed=False, distributed_backend="horovod"))


@scenario
def dalle_backend_not_set():
    from dalle_pytorch import distributed_utils
    distributed_utils.backend = None
    distributed_utils.require_set_backend()


@scenario
def dalle_backend_require_init():
    from dalle_pytorch.distributed_backends import DeepSpeedBackend
    DeepSpeedBackend().require_init()


@scenario
def dalle_torch_distributed_not_initialized():
    from dalle_pytorch.distributed_backends import DeepSpeedBackend
    DeepSpeedBackend._require_torch_distributed_init()


@scenario
def dalle_image_size_not_power_of_2():
    from dalle_pytorch import DiscreteVAE
    DiscreteVAE(image_size=200)


@scenario
def dalle_openai_vae_needs_old_torch():
    from dalle_pytorch import OpenAIDiscreteVAE
    OpenAIDiscreteVAE()


@scenario
def dalle_reduce_lr_on_plateau_verbose():
    # train_dalle.py --lr_decay builds the scheduler with verbose=True (repository line 456 at 58c1e1a)
    import torch
    opt = torch.optim.Adam(torch.nn.Linear(2, 2).parameters())
    torch.optim.lr_scheduler.ReduceLROnPlateau(opt, mode="min", factor=0.5, patience=10, cooldown=10,
                                               min_lr=1e-6, verbose=True)


@scenario
def dalle_sparse_attention_removed():
    import deepspeed.ops.sparse_attention  # noqa: F401 - what --attn_types sparse imports


@scenario
def dalle_deepspeed_amp_key():
    # the config dict train_dalle.py builds always carries 'amp' (repository lines 488-491 at 58c1e1a)
    from deepspeed.runtime.config import DeepSpeedConfig
    DeepSpeedConfig({"train_batch_size": 4, "gradient_clipping": 0.5,
                     "fp16": {"enabled": False}, "amp": {"enabled": False, "opt_level": "O1"}})


def main():
    warnings.simplefilter("ignore")
    sys.meta_path.insert(0, _StubFinder())
    sys.modules.pop("pkg_resources", None)
    for fn in SCENARIOS:
        print(f"=== SCENARIO {fn.__name__}", flush=True)
        try:
            fn()
            print("NO EXCEPTION", flush=True)
        except BaseException:  # noqa: BLE001
            sys.stdout.write(traceback.format_exc())
        print("=== END", flush=True)
        if fn is dalle_import_without_pkg_resources:
            _pkg_resources_stand_in()
            _forget_dalle()


if __name__ == "__main__":
    main()

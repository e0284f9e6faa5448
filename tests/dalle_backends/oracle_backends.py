"""Oracle for the distributed-and-backends tests (run as a subprocess, prints one JSON document).

Loads ``dalle_pytorch/distributed_utils.py`` and ``dalle_pytorch/distributed_backends/*`` from the
installed dalle-pytorch wheel without running the package ``__init__`` (which needs the heavy model
dependencies): a stub parent package whose ``__path__`` is the wheel's folder is put in
``sys.modules`` first. Everything the references state about the backends is recorded here.

    python oracle_backends.py            # deepspeed importable
    python oracle_backends.py --hide-deepspeed   # deepspeed made unimportable by a meta-path blocker
"""
from __future__ import annotations

import argparse
import contextlib
import importlib.util
import inspect
import io
import json
import os
import sys
import tempfile
import types

HIDE = "--hide-deepspeed" in sys.argv


class _Blocker:
    """Meta-path finder that makes ``deepspeed`` (and its submodules) look uninstalled."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name == "deepspeed" or name.startswith("deepspeed."):
            raise ModuleNotFoundError(f"No module named '{name}'", name=name)
        return None


if HIDE:
    sys.meta_path.insert(0, _Blocker)

OUT: dict = {"hide_deepspeed": HIDE}


def err(exc: BaseException) -> dict:
    return {"type": type(exc).__name__, "module": type(exc).__module__, "message": str(exc)}


def capture(fn):
    """Run fn; return (result or error, stdout text)."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        try:
            res = {"ok": fn()}
        except BaseException as exc:  # noqa: BLE001 - SystemExit from argparse too
            res = {"error": err(exc)}
    return res, buf.getvalue()


# --------------------------------------------------------------------------- load from the wheel
spec = importlib.util.find_spec("dalle_pytorch")
PKG_DIR = list(spec.submodule_search_locations)[0]
OUT["wheel_dir_name"] = os.path.basename(PKG_DIR)
stub = types.ModuleType("dalle_pytorch")
stub.__path__ = [PKG_DIR]
sys.modules["dalle_pytorch"] = stub
import dalle_pytorch.distributed_utils as du  # noqa: E402
from dalle_pytorch.distributed_backends import (  # noqa: E402
    DeepSpeedBackend, DistributedBackend, DummyBackend, HorovodBackend)

OUT["deepspeed_imported_by_loading"] = "deepspeed" in sys.modules and sys.modules["deepspeed"] is not None
OUT["backends"] = [{"class": type(b).__name__, "name": b.BACKEND_NAME, "module": b.BACKEND_MODULE_NAME}
                   for b in du.BACKENDS]
OUT["default_backend"] = type(du._DEFAULT_BACKEND).__name__
OUT["globals_initial"] = {"is_distributed": du.is_distributed, "backend": du.backend}
OUT["root_rank"] = DistributedBackend.ROOT_RANK
OUT["exports"] = sorted(n for n in ("DeepSpeedBackend", "DummyBackend", "HorovodBackend") if hasattr(du, n))
OUT["functions"] = sorted(n for n in ("wrap_arg_parser", "set_backend_from_args", "require_set_backend",
                                      "using_backend") if callable(getattr(du, n, None)))
OUT["base_methods"] = sorted(n for n in vars(DistributedBackend) if not n.startswith("__"))

# --------------------------------------------------------------------------- parser
def new_parser():
    return du.wrap_arg_parser(argparse.ArgumentParser(prog="train_dalle.py"))


parser = new_parser()
OUT["deepspeed_imported_by_wrap"] = "deepspeed" in sys.modules and sys.modules["deepspeed"] is not None
OUT["parser_actions"] = [
    {"flags": a.option_strings, "dest": a.dest, "default": a.default, "kind": type(a).__name__,
     "nargs": a.nargs}
    for a in parser._actions if a.option_strings and a.dest != "help"]


def parse(argv):
    err_buf = io.StringIO()
    with contextlib.redirect_stderr(err_buf):
        try:
            return {"ok": vars(new_parser().parse_args(argv))}
        except SystemExit as exc:
            return {"exit": exc.code, "stderr": err_buf.getvalue().strip().splitlines()[-1]}


PARSE_CASES = [[], ["--deepspeed"], ["--deepspeed", "1"], ["--deepspeed", "yes"], ["--distr_backend", "horovod"],
               ["--local_rank", "3"]]
OUT["parse"] = {" ".join(a) or "(none)": parse(a) for a in PARSE_CASES}
OUT["parse_local_rank_hyphen"] = parse(["--local-rank=0"])   # what torch.distributed.launch appends in torch 2.x


# --------------------------------------------------------------------------- set_backend_from_args
def select(argv):
    du.backend = None
    du.is_distributed = None
    args = parse(argv)
    if "ok" not in args:
        return {"parse": args}
    ns = argparse.Namespace(**args["ok"])
    res, printed = capture(lambda: du.set_backend_from_args(ns).BACKEND_NAME)
    return {**res, "printed": printed.strip(), "is_distributed": du.is_distributed,
            "distributed_backend_after": ns.distributed_backend}


SELECT_CASES = [[], ["--deepspeed"], ["--distributed_backend", "deepspeed"], ["--distr_backend", "DeepSpeed"],
                ["--distr_backend", "DEEPSPEED"], ["--distr_backend", "horovod"], ["--distr_backend", "dummy"],
                ["--distr_backend", "Dummy"], ["--distr_backend", "nccl"], ["--distr_backend", "ddp"],
                ["--distr_backend", "horovod", "--deepspeed"], ["--deepspeed", "1"],
                ["--deepspeed", "1", "--distr_backend", "horovod"]]
OUT["select"] = {" ".join(a) or "(none)": select(a) for a in SELECT_CASES}


# a user-written torch.distributed backend: a subclass appended to BACKENDS before the parser is
# built is selected by its name (what references/launching.md tells users to do)
class _TorchDDPBackend(DistributedBackend):
    BACKEND_MODULE_NAME = "torch.distributed"
    BACKEND_NAME = "TorchDDP"

    def wrap_arg_parser(self, parser):
        return parser


du.BACKENDS.append(_TorchDDPBackend())
try:
    OUT["custom_backend"] = {"torchddp": select(["--distributed_backend", "torchddp"]),
                             "unregistered_method": capture(lambda: _TorchDDPBackend()._initialize())[0]}
finally:
    du.BACKENDS.pop()

# using_backend / require_set_backend
du.backend = None
OUT["using_backend_unset"] = capture(lambda: du.using_backend("Dummy"))[0]
du.backend = du.BACKENDS[0]
OUT["using_backend_dummy"] = {"Dummy": du.using_backend("Dummy"), "dummy": du.using_backend("dummy"),
                              "DummyBackend": du.using_backend(DummyBackend),
                              "DeepSpeedBackend": du.using_backend(DeepSpeedBackend)}
du.backend = du.BACKENDS[1]
OUT["using_backend_deepspeed"] = {"DeepSpeed": du.using_backend("DeepSpeed"),
                                  "deepspeed": du.using_backend("deepspeed"),
                                  "DeepSpeedBackend": du.using_backend(DeepSpeedBackend),
                                  "DistributedBackend": du.using_backend(DistributedBackend)}

# --------------------------------------------------------------------------- Dummy behaviour
dummy = DummyBackend()
OUT["dummy_before_init"] = capture(dummy.get_world_size)[0]
dummy.initialize()
model, opt, data, sched = object(), object(), object(), object()
tensor = object()
dist = dummy.distribute(args=None, model=model, optimizer=opt, model_parameters=None, training_data=data,
                        lr_scheduler=sched, config_params={"x": 1})
OUT["dummy"] = {
    "has_backend": dummy.has_backend(), "world_size": dummy.get_world_size(), "rank": dummy.get_rank(),
    "local_rank": dummy.get_local_rank(), "is_root": dummy.is_root_worker(),
    "is_local_root": dummy.is_local_root_worker(), "barrier": dummy.local_barrier(),
    "distribute_identity": [a is b for a, b in zip(dist, (model, opt, data, sched))],
    "average_identity": dummy.average_all(tensor) is tensor,
    "check_batch_size_1": capture(lambda: dummy.check_batch_size(1))[0],
    "check_batch_size_0": capture(lambda: dummy.check_batch_size(0))[0],
}

# require_init NameError on the other backends before initialize()
OUT["require_init_before_initialize"] = {
    "DeepSpeed.get_rank": capture(lambda: DeepSpeedBackend().get_rank())[0],
    "Horovod.get_world_size": capture(lambda: HorovodBackend().get_world_size())[0],
}

# --------------------------------------------------------------------------- Horovod with a fake module
calls = []


class _FakeHvd(types.ModuleType):
    def init(self):
        calls.append(("init",))

    def size(self):
        return 4

    def rank(self):
        return 2

    def local_rank(self):
        return 1

    def join(self):
        calls.append(("join",))

    def DistributedOptimizer(self, optimizer, *a, **kw):  # noqa: N802 - Horovod's name
        calls.append(("DistributedOptimizer", len(a), sorted(kw)))
        return ("wrapped", optimizer)

    def broadcast_parameters(self, params, root_rank):
        calls.append(("broadcast_parameters", type(params).__name__, root_rank))

    def broadcast_optimizer_state(self, optimizer, root_rank):
        calls.append(("broadcast_optimizer_state", optimizer[0], root_rank))

    def allreduce(self, tensor):
        calls.append(("allreduce",))
        return ("avg", tensor)


class _Model:
    def state_dict(self):
        return {"w": 1}


saved = {k: sys.modules.get(k) for k in ("horovod", "horovod.torch")}
sys.modules["horovod"] = types.ModuleType("horovod")
sys.modules["horovod.torch"] = _FakeHvd("horovod.torch")
try:
    sel = select(["--distr_backend", "horovod"])
    hb = du.backend
    hb.initialize()
    m = _Model()
    res = hb.distribute(args=None, model=m, optimizer="OPT", model_parameters=None, training_data="DATA",
                        lr_scheduler="SCHED")
    OUT["horovod_fake"] = {
        "select": sel, "world_size": hb.get_world_size(), "rank": hb.get_rank(), "local_rank": hb.get_local_rank(),
        "is_root": hb.is_root_worker(), "model_unwrapped": res[0] is m, "optimizer": list(res[1]),
        "data": res[2], "scheduler": res[3], "check_batch_size_0": capture(lambda: hb.check_batch_size(0))[0],
        "average": list(hb.average_all("T")), "barrier": hb.local_barrier(), "calls": calls,
    }
finally:
    for k, v in saved.items():
        if v is None:
            sys.modules.pop(k, None)
        else:
            sys.modules[k] = v

# --------------------------------------------------------------------------- DeepSpeed backend arg checks
dsb = DeepSpeedBackend()


def check_args(ns, opt_, sched_, kwargs):
    res, printed = capture(lambda: dsb._check_args(ns, opt_, sched_, kwargs))
    out = {"deepspeed_after": ns.deepspeed, "printed": printed.strip()}
    if "ok" in res:
        out.update(optimizer=res["ok"][0], scheduler=res["ok"][1])
    else:
        out["error"] = res["error"]
    return out


with tempfile.TemporaryDirectory() as tmp:
    jpath = os.path.join(tmp, "ds.json")
    with open(jpath, "w") as fh:
        json.dump({"train_batch_size": 4, "optimizer": {"type": "Adam"}}, fh)
    OUT["deepspeed_check_args"] = {
        "dict_without_flag": check_args(argparse.Namespace(deepspeed=False, deepspeed_config=None), "OPT", "SCHED",
                                        {"config_params": {"train_batch_size": 4}}),
        "dict_with_optimizer_and_scheduler": check_args(
            argparse.Namespace(deepspeed=True, deepspeed_config=None), "OPT", "SCHED",
            {"config_params": {"train_batch_size": 4, "optimizer": {}, "scheduler": {}}}),
        "json_and_dict": check_args(argparse.Namespace(deepspeed=True, deepspeed_config=jpath), "OPT", None,
                                    {"config_params": {"train_batch_size": 4}}),
        "json_only_with_optimizer": check_args(argparse.Namespace(deepspeed=True, deepspeed_config=jpath), "OPT",
                                               None, {}),
        "no_config_at_all": check_args(argparse.Namespace(deepspeed=False, deepspeed_config=None), "OPT", "SCHED",
                                       {}),
        "missing_json_no_dict": check_args(argparse.Namespace(deepspeed=False,
                                                              deepspeed_config=os.path.join(tmp, "nope.json")),
                                           "OPT", "SCHED", {}),
    }

# --------------------------------------------------------------------------- attention type 'sparse'
rot = types.ModuleType("rotary_embedding_torch")
rot.apply_rotary_emb = lambda *a, **k: None
sys.modules.setdefault("rotary_embedding_torch", rot)
try:
    from dalle_pytorch.attention import SparseAttention  # noqa: E402

    OUT["sparse_attention_build"] = capture(lambda: type(SparseAttention(dim=32, seq_len=64, heads=2,
                                                                         dim_head=16)).__name__)[0]
except Exception as exc:  # noqa: BLE001
    OUT["sparse_attention_build"] = {"import_error": err(exc)}

# --------------------------------------------------------------------------- torch facts
import torch  # noqa: E402

OUT["torch_version"] = torch.__version__
OUT["torch_cuda_build"] = torch.version.cuda
# what the scripts' unconditional .cuda() does on this machine
OUT["module_cuda_call"] = capture(lambda: type(torch.nn.Linear(1, 1).cuda()).__name__)[0]
_p = [torch.nn.Parameter(torch.zeros(1))]
OUT["reduce_lr_on_plateau_verbose"] = capture(lambda: type(torch.optim.lr_scheduler.ReduceLROnPlateau(
    torch.optim.Adam(_p), mode="min", factor=0.5, patience=10, cooldown=10, min_lr=1e-6, verbose=True)).__name__)[0]

# --------------------------------------------------------------------------- pkg_resources / setuptools
from importlib import metadata  # noqa: E402

try:
    OUT["setuptools_version"] = metadata.version("setuptools")
except metadata.PackageNotFoundError:
    OUT["setuptools_version"] = None
for name, attrs in (("dalle_pytorch.dalle_pytorch", ("DALLE", "CLIP", "DiscreteVAE")),
                    ("dalle_pytorch.vae", ("OpenAIDiscreteVAE", "VQGanVAE"))):
    mod = types.ModuleType(name)
    for a in attrs:
        setattr(mod, a, object)
    sys.modules[name] = mod
init_path = os.path.join(PKG_DIR, "__init__.py")
with open(init_path, encoding="utf-8") as fh:
    init_src = fh.read()
OUT["init_pkg_resources_line"] = [i for i, line in enumerate(init_src.splitlines(), 1) if "pkg_resources" in line]


def run_init():
    ns: dict = {"__name__": "dalle_pytorch", "__package__": "dalle_pytorch"}
    exec(compile(init_src, init_path, "exec"), ns)  # noqa: S102 - the wheel's own __init__, deps stubbed
    return ns["__version__"]


import warnings  # noqa: E402

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    OUT["import_dalle_pytorch_init"] = capture(run_init)[0]


class _NoPkgResources:
    """What setuptools >= 82 looks like to an importer: no pkg_resources module."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name == "pkg_resources":
            raise ModuleNotFoundError("No module named 'pkg_resources'", name=name)
        return None


_saved_pr = sys.modules.pop("pkg_resources", None)
sys.meta_path.insert(0, _NoPkgResources)
try:
    OUT["import_dalle_pytorch_init_without_pkg_resources"] = capture(run_init)[0]
finally:
    sys.meta_path.remove(_NoPkgResources)
    if _saved_pr is not None:
        sys.modules["pkg_resources"] = _saved_pr

# --------------------------------------------------------------------------- deepspeed facts
if not HIDE:
    import deepspeed  # noqa: E402
    from deepspeed.runtime.config import DeepSpeedConfig  # noqa: E402

    OUT["deepspeed_version"] = deepspeed.__version__
    p2 = deepspeed.add_config_arguments(argparse.ArgumentParser())
    OUT["deepspeed_add_config_arguments"] = [a.option_strings for a in p2._actions if a.dest != "help"]
    OUT["register_external_parameter"] = hasattr(deepspeed.zero, "register_external_parameter")

    def dalle_cfg(bs=4, ga=1, fp16=False, amp=False):
        return {"train_batch_size": bs, "gradient_accumulation_steps": ga, "gradient_clipping": 0.5,
                "fp16": {"enabled": fp16}, "amp": {"enabled": amp, "opt_level": "O1"},
                "flops_profiler": {"enabled": False, "profile_step": 200, "module_depth": -1, "top_modules": 1,
                                   "detailed": True, "output_file": None}}

    def no_amp(**kw):
        c = dalle_cfg(**kw)
        c.pop("amp")
        return c

    def ds_config(cfg):
        def go():
            c = DeepSpeedConfig(cfg)
            return {"train_batch_size": c.train_batch_size, "micro": c.train_micro_batch_size_per_gpu,
                    "ga": c.gradient_accumulation_steps, "fp16": c.float16_config.enabled,
                    "bf16": c.bfloat16_config.enabled, "zero_stage": int(c.zero_optimization_stage),
                    "clip": c.gradient_clipping}
        return capture(go)[0]

    OUT["ds_config"] = {
        "train_dalle_as_built": ds_config(dalle_cfg()),
        "train_dalle_as_built_amp": ds_config(dalle_cfg(amp=True)),
        "train_dalle_as_built_fp16": ds_config(dalle_cfg(fp16=True)),
        "without_amp": ds_config(no_amp()),
        "without_amp_fp16": ds_config(no_amp(fp16=True)),
        "without_amp_bs4_ga3": ds_config(no_amp(ga=3)),
        "without_amp_zero2": ds_config({**no_amp(), "zero_optimization": {"stage": 2}}),
        "without_amp_bf16": ds_config({**no_amp(), "bf16": {"enabled": True}}),
        "without_amp_torch_autocast": ds_config({**no_amp(), "torch_autocast": {"enabled": True,
                                                                                "dtype": "bfloat16"}}),
        "train_vae": ds_config({"train_batch_size": 8}),
        "sparse_attention_block": ds_config({"train_batch_size": 8, "sparse_attention": {"mode": "fixed"}}),
    }
    OUT["sparse_attention_import"] = capture(lambda: importlib.import_module("deepspeed.ops.sparse_attention"))[0]

    # deepspeed.initialize with --deepspeed_config AND the in-script dict (process group init stubbed out)
    import deepspeed.comm as ds_comm  # noqa: E402

    orig = ds_comm.init_distributed
    ds_comm.init_distributed = lambda *a, **k: None
    try:
        with tempfile.TemporaryDirectory() as tmp:
            jpath = os.path.join(tmp, "ds.json")
            with open(jpath, "w") as fh:
                json.dump(no_amp(), fh)
            b = DeepSpeedBackend()
            b.has_backend()
            b.is_initialized = True
            ns = argparse.Namespace(deepspeed=True, deepspeed_config=jpath, local_rank=-1)
            OUT["json_plus_dict"] = dict(zip(("result", "printed"), capture(lambda: b.distribute(
                args=ns, model=torch.nn.Linear(2, 2), optimizer=None, model_parameters=None,
                config_params=no_amp()))))
    finally:
        ds_comm.init_distributed = orig

    # fp16 on the CPU accelerator (the engine's sanity check, without building an engine)
    from deepspeed.accelerator import get_accelerator  # noqa: E402
    from deepspeed.runtime.engine import DeepSpeedEngine  # noqa: E402

    fake = types.SimpleNamespace(fp16_enabled=lambda: True, bfloat16_enabled=lambda: False,
                                 _assert_valid_mixed_precision_config=lambda: None)
    acc = get_accelerator()
    OUT["accelerator"] = acc._name
    # The CPU accelerator accepts fp16 where oneDNN has fp16 kernels (AVX512-FP16 / AMX-FP16 CPUs):
    # record what this CPU says, then run the check as a CPU without them answers.
    OUT["fp16_supported_here"] = bool(acc.is_fp16_supported())
    real_check = acc.is_fp16_supported
    acc.is_fp16_supported = lambda: False
    try:
        OUT["fp16_sanity_check"] = capture(lambda: DeepSpeedEngine._do_sanity_check(fake))[0]
    finally:
        acc.is_fp16_supported = real_check
    OUT["fp16_check_source"] = inspect.getsource(type(acc).is_fp16_supported) if acc._name == "cpu" else ""

    # plain `python` start: no launcher variables -> MPI discovery
    saved_env = {k: os.environ.pop(k) for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT",
                                                 "OMPI_COMM_WORLD_SIZE", "PMI_SIZE") if k in os.environ}
    try:
        has_mpi4py = importlib.util.find_spec("mpi4py") is not None
        OUT["init_without_launcher"] = {"mpi4py_installed": has_mpi4py}
        if not has_mpi4py:
            OUT["init_without_launcher"].update(capture(lambda: deepspeed.init_distributed())[0])
    finally:
        os.environ.update(saved_env)

if HIDE:
    # #416: with a stand-in for DeepSpeed's sparse-attention API (entries in sys.modules win over the
    # blocker), a transformer with attn_types=('sparse',) fails before any sparse kernel would run.
    for name in ("deepspeed", "deepspeed.ops", "deepspeed.ops.sparse_attention"):
        sys.modules[name] = types.ModuleType(name)
    sa = sys.modules["deepspeed.ops.sparse_attention"]

    class _Cfg:
        def __init__(self, **kw):
            self.kw = kw

    class _SSA(torch.nn.Module):
        def __init__(self, **kw):
            super().__init__()

    sa.VariableSparsityConfig, sa.SparseSelfAttention = _Cfg, _SSA
    rot.RotaryEmbedding = object
    rot.broadcat = lambda *a, **k: None
    sys.modules["rotary_embedding_torch"] = rot
    try:
        from dalle_pytorch.transformer import Transformer  # noqa: E402

        def sparse_forward():
            t = Transformer(dim=32, depth=1, seq_len=64, heads=2, dim_head=16, attn_types=("sparse",),
                            image_fmap_size=4, rotary_emb=False)
            return list(t(torch.zeros(1, 64, 32)).shape)

        OUT["sparse_forward_with_stub"] = capture(sparse_forward)[0]
    except Exception as exc:  # noqa: BLE001
        OUT["sparse_forward_with_stub"] = {"import_error": err(exc)}

print("ORACLE_JSON " + json.dumps(OUT, default=repr, sort_keys=True))

"""Probe for test_fx23w4_op_builds_and_fp16.py: deepspeed 0.19.8 on DS_ACCELERATOR=cpu, nothing compiled
except a stub libaio in a temp folder. Mode `units`: op builder arch list / SIMD width / async_io link
test, DynamicLossScaler. Mode `fp16`: one-rank gloo engine with fp16 (accelerator's fp16 check patched,
shm comm op stubbed) with and without fp16.auto_cast. Prints one JSON line, then os._exit(0)."""
import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile

os.environ["DS_ACCELERATOR"] = "cpu"
os.environ["TORCH_EXTENSIONS_DIR"] = tempfile.mkdtemp(prefix="fx23w4_ext_")


def units():
    import torch
    import torch.utils.cpp_extension as cpp_ext
    import deepspeed.ops.op_builder.builder as B
    from deepspeed.ops.op_builder.fused_adam import FusedAdamBuilder
    res = {}
    saved = os.environ.get("TORCH_CUDA_ARCH_LIST")

    def arch(jit, env, caps=None):
        b = FusedAdamBuilder()
        b.jit_mode = jit
        os.environ.pop("TORCH_CUDA_ARCH_LIST", None)
        if env is not None:
            os.environ["TORCH_CUDA_ARCH_LIST"] = env
        real = torch.cuda.device_count, torch.cuda.get_device_capability
        if caps is not None:
            torch.cuda.device_count = lambda: len(caps)
            torch.cuda.get_device_capability = lambda i: caps[i]
        try:
            args = b.compute_capability_args()
        finally:
            torch.cuda.device_count, torch.cuda.get_device_capability = real
        return {"args": args, "env": os.environ.get("TORCH_CUDA_ARCH_LIST")}

    res["jit_env_86"] = arch(True, "8.6")
    res["jit_probe_89"] = arch(True, None, caps=[(8, 9), (8, 9)])
    res["jit_probe_mixed"] = arch(True, None, caps=[(8, 0), (8, 9)])
    res["aot_env_86_89"] = arch(False, "8.6;8.9")
    defaults = {}
    real_home, real_ver = cpp_ext.CUDA_HOME, B.installed_cuda_version
    cpp_ext.CUDA_HOME = "/usr/local/cuda"
    try:
        for ver in [(11, 0), (11, 7), (11, 8), (12, 1), (12, 8)]:
            B.installed_cuda_version = lambda name="", v=ver: v
            defaults[f"{ver[0]}.{ver[1]}"] = B.get_default_compute_capabilities()
            os.environ.pop("TORCH_CUDA_ARCH_LIST", None)
            b = FusedAdamBuilder()
            b.jit_mode = False
            defaults[f"{ver[0]}.{ver[1]} args"] = b.compute_capability_args()
    finally:
        cpp_ext.CUDA_HOME, B.installed_cuda_version = real_home, real_ver
    res["default_caps"] = defaults
    if saved is None:
        os.environ.pop("TORCH_CUDA_ARCH_LIST", None)
    else:
        os.environ["TORCH_CUDA_ARCH_LIST"] = saved

    # SIMD width: py-cpuinfo's flags are a list of names; AVX-512 Foundation is 'avx512f'
    import cpuinfo
    from deepspeed.ops.op_builder.cpu.cpu_adam import CPUAdamBuilder
    real_info = cpuinfo.get_cpu_info
    simd = {"host_flags_type": type(real_info()["flags"]).__name__}
    for name, flags in {"avx512f": ["sse4_2", "avx", "avx2", "avx512f", "avx512dq", "avx512cd", "avx512bw", "avx512vl"],
                        "avx2_only": ["sse4_2", "avx", "avx2"], "none": ["sse4_2"]}.items():
        cpuinfo.get_cpu_info = lambda f=flags: {"arch": "X86_64", "flags": f}
        try:
            simd[name] = {"width": CPUAdamBuilder().simd_width(), "cxx": CPUAdamBuilder().cxx_args(),
                          "bare_avx512_in_flags": "avx512" in flags}
        finally:
            cpuinfo.get_cpu_info = real_info
    res["simd"] = simd

    # async_io: compatible == a C program calling io_submit links with -laio (header not used)
    from deepspeed.ops.op_builder.async_io import AsyncIOBuilder
    d = tempfile.mkdtemp(prefix="fx23w4_aio_")
    src = os.path.join(d, "stub.c")
    with open(src, "w") as f:
        f.write("int io_submit(void){return 0;}\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-Wl,-soname,libaio.so.1", "-o", os.path.join(d, "libaio.so.1.0.1"), src],
                   check=True)
    os.symlink("libaio.so.1.0.1", os.path.join(d, "libaio.so.1"))
    aio = {"system_header": os.path.exists("/usr/include/libaio.h")}
    saved_ld = os.environ.get("LDFLAGS")
    os.environ["LDFLAGS"] = f"-L{d}"
    b = AsyncIOBuilder()
    aio["versioned_only"] = b.has_function("io_submit", ("aio", ))
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        aio["versioned_only_compatible"] = b.is_compatible(verbose=True)
    aio["versioned_only_warnings"] = buf.getvalue()
    os.symlink("libaio.so.1", os.path.join(d, "libaio.so"))
    aio["with_unversioned_so"] = b.has_function("io_submit", ("aio", ))
    os.environ.pop("LDFLAGS")
    aio["with_so_but_no_ldflags"] = b.has_function("io_submit", ("aio", ))
    if saved_ld is not None:
        os.environ["LDFLAGS"] = saved_ld
    res["aio"] = aio

    # Dynamic loss scaler: start 2**initial_scale_power, hysteresis, halving, doubling after the window
    import deepspeed.runtime.fp16.loss_scaler as LS
    LS.dist.get_rank = lambda *a, **k: 0
    s = LS.DynamicLossScaler(init_scale=2**32, scale_window=1000, min_scale=1, delayed_shift=2,
                             consecutive_hysteresis=False)
    seq = [s.cur_scale]
    for _ in range(8):
        s.update_scale(True)
        seq.append(s.cur_scale)
    for _ in range(1001):
        s.update_scale(False)
    seq_after_window = s.cur_scale
    m = LS.DynamicLossScaler(init_scale=2, scale_window=1000, min_scale=1, delayed_shift=1,
                             consecutive_hysteresis=False)
    errs = []
    for _ in range(3):
        try:
            m.update_scale(True)
        except Exception as e:  # noqa: BLE001
            errs.append(str(e))
    from deepspeed.runtime.precision_config import DeepSpeedFP16Config
    res["scaler"] = {"seq": seq, "after_window": seq_after_window, "min_errors": errs,
                     "default_initial": DeepSpeedFP16Config().initial_dynamic_scale() if hasattr(
                         DeepSpeedFP16Config(), "initial_dynamic_scale") else 2**DeepSpeedFP16Config().initial_scale_power}
    return res


def fp16():
    import importlib
    import torch
    import deepspeed
    from deepspeed.accelerator import get_accelerator
    importlib.import_module("deepspeed.comm.torch").build_shm_op = lambda: None
    get_accelerator().is_fp16_supported = lambda: True
    res = {}

    class M(torch.nn.Module):

        def __init__(self):
            super().__init__()
            self.l = torch.nn.Linear(4, 2)
            self.seen = {}

        def forward(self, x, extra=None, y=None):
            self.seen = {"x": str(x.dtype), "extra_float": str(extra["f"].dtype), "extra_int": str(extra["i"].dtype),
                         "kwarg_y": str(y.dtype), "weight": str(self.l.weight.dtype)}
            return self.l(x).float().sum()

    for auto in (False, True):
        m = M()
        cfg = {"train_micro_batch_size_per_gpu": 1, "fp16": {"enabled": True, "auto_cast": auto},
               "zero_optimization": {"stage": 0}}
        eng, *_ = deepspeed.initialize(model=m, model_parameters=m.parameters(),
                                       optimizer=torch.optim.SGD(m.parameters(), lr=0.1), config=cfg)
        out = {}
        try:
            eng(torch.randn(1, 4), {"f": torch.randn(1), "i": torch.ones(1, dtype=torch.long)}, y=torch.randn(1))
            out["ok"] = True
        except RuntimeError as e:
            out["error"] = str(e)[:200]
        out.update(m.seen)
        res[f"auto_cast_{str(auto).lower()}"] = out
    return res


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "fp16":
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=sys.argv[2], RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
    out = units() if mode == "units" else fp16()
    sys.stdout.flush()
    print("FX23W4_RESULT " + json.dumps(out), flush=True)
    os._exit(0)

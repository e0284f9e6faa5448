"""Set-23 fix round (W4): DeepSpeed 0.19.8 op builds (CUDA arch list, CPU SIMD width, the async_io link
test), the `deepspeed` launcher script, fp16 input casting (fp16.auto_cast) and the dynamic loss scaler.
All on CPU (DS_ACCELERATOR=cpu); nothing CUDA is compiled, JIT builds go to a temp TORCH_EXTENSIONS_DIR.
Probe: _fx23w4_probe.py (one child per mode, JSON on stdout)."""
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _ports import free_port  # noqa: E402

HERE = Path(__file__).resolve().parent
PROBE = HERE / "_fx23w4_probe.py"


def _env():
    env = dict(os.environ, DS_ACCELERATOR="cpu", TORCH_EXTENSIONS_DIR=tempfile.mkdtemp(prefix="fx23w4_ext_"))
    env.pop("TORCH_CUDA_ARCH_LIST", None)
    env.pop("LDFLAGS", None)
    return env


def _run(*args):
    p = subprocess.run([sys.executable, str(PROBE), *args], capture_output=True, text=True, timeout=240, env=_env())
    for line in p.stdout.splitlines():
        if line.startswith("FX23W4_RESULT "):
            return json.loads(line[len("FX23W4_RESULT "):])
    raise AssertionError(f"no result (rc={p.returncode}):\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")


@pytest.fixture(scope="module")
def units():
    return _run("units")


@pytest.fixture(scope="module")
def fp16():
    return _run("fp16", str(free_port()))


def test_jit_arch_list_from_env_or_visible_gpus(units):
    # JIT: TORCH_CUDA_ARCH_LIST if set, else each visible GPU's capability; +PTX on the highest; torch emits -gencode
    assert units["jit_env_86"] == {"args": [], "env": "8.6+PTX"}
    assert units["jit_probe_89"] == {"args": [], "env": "8.9+PTX"}
    assert units["jit_probe_mixed"] == {"args": [], "env": "8.0;8.9+PTX"}
    # prebuild (AOT): explicit flags, no +PTX added
    assert units["aot_env_86_89"]["args"] == ["-gencode=arch=compute_86,code=sm_86",
                                              "-gencode=arch=compute_89,code=sm_89"]


def test_aot_default_arch_list_depends_on_toolkit_version(units):
    d = units["default_caps"]
    assert d["11.0"] == "6.0;6.1;7.0;8.0"
    assert d["11.7"] == "6.0;6.1;7.0;8.0;8.6"
    assert d["11.8"] == "6.0;6.1;7.0;8.0;8.6;9.0"
    assert d["12.1"] == "6.0;6.1;7.0;8.0;8.6;9.0"
    assert d["12.8"] == "6.0;6.1;7.0;8.0;8.6;9.0;10.0;12.0"
    assert all("8.9" not in v for k, v in d.items() if " args" not in k)
    assert "-gencode=arch=compute_120,code=sm_120" in d["12.8 args"]


def test_simd_width_reads_cpuinfo_flag_list(units):
    s = units["simd"]
    assert s["host_flags_type"] == "list"
    assert s["avx512f"]["width"] == "-D__AVX512__" and s["avx512f"]["bare_avx512_in_flags"] is False
    assert s["avx2_only"]["width"] == "-D__AVX256__"
    assert s["none"]["width"] == "-D__SCALAR__"
    assert s["avx512f"]["cxx"][-3:] == ["-march=native", "-fopenmp", "-D__AVX512__"]


def test_async_io_compatible_is_a_link_test_against_libaio_so(units):
    a = units["aio"]
    assert a["system_header"] is False  # the link test compiles without libaio.h
    assert a["versioned_only"] is False and a["versioned_only_compatible"] is False
    assert "requires the dev libaio .so object and headers but these were not found" in a["versioned_only_warnings"]
    assert "try setting the CFLAGS and LDFLAGS environment variables" in a["versioned_only_warnings"]
    assert a["with_unversioned_so"] is True  # shared libaio.so found through LDFLAGS=-L; no libaio.a
    assert a["with_so_but_no_ldflags"] is False


def test_dynamic_loss_scaler_sequence(units):
    s = units["scaler"]
    assert s["default_initial"] == 2**16
    # hysteresis 2: first overflow keeps the scale, then each overflow halves it
    assert s["seq"][:3] == [2**32, 2**32, 2**31]
    assert s["seq"][-2:] == [2**26, 2**25]
    assert s["after_window"] == 2**26  # doubled after scale_window clean steps
    assert s["min_errors"][0].startswith("Current loss scale already at minimum")


def test_fp16_casts_params_not_inputs_unless_auto_cast(fp16):
    off, on = fp16["auto_cast_false"], fp16["auto_cast_true"]
    assert off["weight"] == "torch.float16" and off["x"] == "torch.float32"
    assert "must have the same dtype" in off["error"]
    assert on["ok"] is True
    assert on["x"] == "torch.float16" and on["extra_float"] == "torch.float16"  # positional, nested dict too
    assert on["extra_int"] == "torch.int64"  # integer tensors untouched
    assert on["kwarg_y"] == "torch.float32"  # keyword-argument tensors are not cast


def _script_dir():
    return Path(sys.executable).parent


def test_deepspeed_command_is_a_python_script_that_needs_the_exec_bit(tmp_path):
    src = _script_dir() / "deepspeed"
    assert "from deepspeed.launcher.runner import main" in src.read_text()
    noexec = tmp_path / "deepspeed"
    shutil.copyfile(src, noexec)
    noexec.chmod(stat.S_IRUSR | stat.S_IWUSR)
    p = subprocess.run(["bash", "-c", f"{noexec} --help"], capture_output=True, text=True, timeout=60, env=_env())
    assert p.returncode == 126 and "Permission denied" in p.stderr
    # the same launcher without the script file
    q = subprocess.run([sys.executable, "-m", "deepspeed.launcher.runner", "--help"], capture_output=True, text=True,
                       timeout=120, env=_env())
    assert q.returncode == 0 and "usage: runner.py" in q.stdout and "--hostfile" in q.stdout

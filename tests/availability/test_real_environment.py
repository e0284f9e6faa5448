"""Verdicts and facts on the pinned test environment: torch 2.13.0 CPU build,
accelerate 1.15.0, deepspeed 0.19.8, dalle-pytorch 1.6.6 (--no-deps);
horovod and apex absent."""
from __future__ import annotations

import json
import subprocess
import sys

from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "sub-skills" / "distributed-and-backends" / "scripts" / "check_backend_availability.py"

WORKFLOWS = [
    "dalle-deepspeed", "dalle-horovod", "dalle-dummy", "deepspeed-sparse-attention", "apex-amp",
    "accelerate-deepspeed", "accelerate-fsdp", "accelerate-fsdp2", "accelerate-megatron-lm",
    "accelerate-fp8-te", "accelerate-fp8-msamp", "accelerate-fp8-torchao", "accelerate-tpu",
]


def test_packages_static(real_static):
    p = real_static.json["packages"]
    assert p["torch"]["state"] == "installed"
    assert p["torch"]["version"].startswith("2.13.0")
    assert p["torch"]["facts"]["flavour"] == "cpu"
    assert p["torch"]["facts"]["cuda"] is None and p["torch"]["facts"]["hip"] is None
    assert (p["accelerate"]["state"], p["accelerate"]["version"]) == ("installed", "1.15.0")
    assert (p["deepspeed"]["state"], p["deepspeed"]["version"]) == ("installed", "0.19.8")
    assert (p["dalle-pytorch"]["state"], p["dalle-pytorch"]["version"]) == ("installed", "1.6.6")
    for absent in ("horovod", "apex", "transformer-engine", "ms-amp", "torchao", "torch-xla",
                   "megatron-core", "habana"):
        assert p[absent]["state"] == "not_installed", absent
    assert real_static.json["conflicts"] == []
    assert real_static.json["nccl_wheels"]["wheels"] == []


def test_build_facts_read_from_files(real_static):
    p = real_static.json["packages"]
    ds = p["deepspeed"]["facts"]
    assert ds["sparse_attention_shipped"] is False
    assert {"amp", "sparse_attention"} <= set(ds["removed_config_keys"])
    assert ds["build_info"]["version"] == "0.19.8"
    assert ds["build_info"]["accelerator_name"] == "cpu"
    acc = p["accelerate"]["facts"]
    assert acc["FSDP2_PYTORCH_VERSION"] == "2.6.0"
    assert acc["sources"]["FSDP2_PYTORCH_VERSION"] == "accelerate/utils/constants.py"
    assert acc["torchao_min"] == "0.6.1" and "torchao_min" in acc["sources"]
    assert acc["megatron_core_min"] == "0.8.0" and "megatron_core_min" in acc["sources"]
    dalle = p["dalle-pytorch"]["facts"]
    assert dalle["backends"] == {"DeepSpeed": "deepspeed", "Horovod": "horovod.torch", "Dummy": "NO MODULE"}
    # dalle_pytorch/__init__.py imports pkg_resources; setuptools >= 82 no longer ships it
    assert "pkg_resources" in dalle["import_needs"]
    setuptools_v = p["setuptools"]["version"]
    if int(setuptools_v.split(".")[0]) >= 82:
        assert dalle["import_missing"]["pkg_resources"] == "dalle_pytorch/__init__.py"
    else:
        assert "pkg_resources" not in dalle["import_missing"], setuptools_v
    assert {"torch", "einops", "numpy"} <= set(dalle["import_needs"])
    assert not {"torch", "einops", "numpy", "deepspeed", "horovod"} & set(dalle["import_missing"])


def test_verdicts(real_static):
    v = real_static.json["verdicts"]
    assert list(v) == WORKFLOWS
    assert all(x["verdict"] in ("yes", "no", "unknown") for x in v.values())
    # no GPU seen here, so nothing may be claimed as working
    assert not [k for k, x in v.items() if x["verdict"] == "yes"]
    r = {k: x["reason"] for k, x in v.items()}
    assert v["deepspeed-sparse-attention"]["verdict"] == "no"
    assert "deepspeed 0.19.8 no longer ships sparse attention" in r["deepspeed-sparse-attention"]
    assert v["apex-amp"]["verdict"] == "no"
    assert "deepspeed 0.19.8 rejects the 'amp' config key" in r["apex-amp"]
    assert "apex is not installed" in r["apex-amp"]
    assert v["dalle-horovod"]["verdict"] == "no" and "horovod is not installed" in r["dalle-horovod"]
    assert v["dalle-deepspeed"]["verdict"] == "no"
    assert "import dalle_pytorch would fail" in r["dalle-deepspeed"] and "'amp'" in r["dalle-deepspeed"]
    if int(real_static.json["packages"]["setuptools"]["version"].split(".")[0]) >= 82:
        assert "pkg_resources was removed in setuptools 82.0.0" in r["dalle-deepspeed"]
    assert v["dalle-dummy"]["verdict"] == "no" and "import dalle_pytorch would fail" in r["dalle-dummy"]
    for k in ("accelerate-deepspeed", "accelerate-fsdp", "accelerate-fsdp2"):
        assert v[k]["verdict"] == "no"
        assert r[k].startswith("CPU build of torch 2.13.0"), r[k]
    # torch 2.13 satisfies accelerate's FSDP2 floor: the only blocker is the CPU build
    assert "needs torch >=" not in r["accelerate-fsdp2"]
    assert "megatron-core >= 0.8.0 is not installed" in r["accelerate-megatron-lm"]
    assert "transformer-engine is not installed" in r["accelerate-fp8-te"]
    assert "ms-amp is not installed" in r["accelerate-fp8-msamp"]
    assert "torchao is not installed" in r["accelerate-fp8-torchao"]
    assert "torch-xla is not installed" in r["accelerate-tpu"]


def test_default_tier_is_fast_and_import_free(checker):
    r = checker("--json")
    assert r.rc == 0
    # in-process time of the static tier; the wall budget is measured by benchmarks/
    assert r.json["checker"]["static_seconds"] < 0.5
    code = (
        "import runpy, sys\n"
        "sys.argv = [sys.argv[1], '--json']\n"
        "try:\n    runpy.run_path(sys.argv[0], run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        "mods = {'torch', 'accelerate', 'deepspeed', 'dalle_pytorch', 'horovod', 'apex', 'triton',\n"
        "        'transformers', 'numpy', 'yaml', 'importlib.metadata', 'pkg_resources'}\n"
        "sys.stderr.write('LOADED=' + repr(sorted(m for m in mods if m in sys.modules)))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code, str(SCRIPT)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    loaded = proc.stderr.rsplit("LOADED=", 1)[1]
    assert loaded == "[]", loaded
    assert json.loads(proc.stdout)["exit_code"] == 0


def test_probe_parent_imports_nothing():
    """With --probe the imports happen in children only."""
    code = (
        "import runpy, sys\n"
        "sys.argv = [sys.argv[1], '--probe', '--only', 'torch,setuptools', '--json']\n"
        "try:\n    runpy.run_path(sys.argv[0], run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        "sys.stderr.write('LOADED=' + repr(sorted(m for m in ('torch', 'setuptools') if m in sys.modules)))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code, str(SCRIPT)], capture_output=True, text=True, timeout=200)
    assert proc.stderr.rsplit("LOADED=", 1)[1] == "[]"
    rep = json.loads(proc.stdout)
    assert rep["probes"]["torch"]["status"] == "ok" and rep["probes"]["setuptools"]["status"] == "ok"
    assert set(rep["probes"]) == {"torch", "setuptools"}


def test_probe_real(real_probe):
    pr = real_probe.json["probes"]
    assert pr["torch"]["status"] == "ok"
    assert pr["torch"]["torch"]["gloo_available"] is True
    assert pr["torch"]["torch"]["nccl_available"] is False
    assert pr["accelerate"]["status"] == "ok"
    assert pr["deepspeed"]["status"] == "ok"
    # the --no-deps install: the first missing dependency the static scan also lists
    d = pr["dalle-pytorch"]
    assert d["status"] == "import_error" and d["exception"] == "ModuleNotFoundError"
    static_missing = real_probe.json["packages"]["dalle-pytorch"]["facts"]["import_missing"]
    assert d["missing_module"] in static_missing
    assert pr["horovod"]["status"] == "not_installed"
    assert real_probe.json["crashed"] == []
    assert real_probe.json["exit_code"] == 0


def test_include_cuda_without_cuda(real_probe):
    cu = real_probe.json["cuda"]
    assert cu["status"] == "no_cuda"
    assert cu["reason"].startswith("CPU build of torch 2.13.0")
    assert cu["devices"] == []
    v = real_probe.json["verdicts"]
    assert v["accelerate-fsdp2"]["verdict"] == "no"


def test_require_exit_codes(checker):
    r = checker("--require", "torch,accelerate,deepspeed", "--json")
    assert r.rc == 0, r.stdout
    assert all(q["met"] for q in r.json["requirements"])
    r = checker("--require", "horovod", "--json")
    assert r.rc == 1
    assert r.json["requirements"] == [{"name": "horovod", "met": False,
                                       "detail": "horovod is not installed"}]
    r = checker("--require", "accelerate-fsdp2", "--json")
    assert r.rc == 1 and r.json["requirements"][0]["detail"].startswith("no: CPU build of torch")
    r = checker("--require", "apex")
    assert r.rc == 1 and "UNMET" in r.stdout


def test_require_capability_runs_cuda_child(checker):
    r = checker("--require", "gpu", "--json", "--timeout", "90", timeout=200)
    assert r.rc == 1
    assert r.json["cuda"]["status"] == "no_cuda"
    assert r.json["requirements"][0]["detail"].startswith("no CUDA: CPU build of torch")


@pytest.mark.parametrize("args", [["--require", "nonsense"], ["--bogus"], ["--only", "torch"],
                                  ["--timeout", "0"], ["--format", "xml"], ["--only", "nope", "--probe"]])
def test_usage_errors(checker, args):
    r = checker(*args)
    assert r.rc == 2
    assert r.stdout == ""
    assert r.stderr.startswith("check_backend_availability: error:") and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_help_is_complete(checker):
    r = checker("--help")
    assert r.rc == 0
    for flag in ("--probe", "--include-cuda", "--json", "--format", "--require", "--timeout", "--only", "--jobs"):
        assert flag in r.stdout
    for wid in WORKFLOWS:
        assert wid in r.stdout
    for cap in ("gpu", "bf16", "fp8", "nccl"):
        assert f"  {cap} " in r.stdout
    for code in ("0  ran", "1  at least one", "2  usage", "3  a probe", "4  internal"):
        assert code in r.stdout
    assert "examples:" in r.stdout


def test_text_and_json_formats_agree(checker, real_static):
    text = checker()
    assert text.rc == 0
    for wid, v in real_static.json["verdicts"].items():
        line = next(ln for ln in text.stdout.splitlines() if ln.strip().startswith(wid + " "))
        assert v["verdict"] in line.split()
    fmt = checker("--format", "json")
    assert json.loads(fmt.stdout)["verdicts"] == real_static.json["verdicts"]


def test_hardcoded_facts_match_installed_sources():
    """The fallbacks in targets.py and the facts read statically agree with the imported packages."""
    code = r"""
import inspect, json
import torch, accelerate.utils.constants as C, accelerate.utils.imports as I
import deepspeed.runtime.config as DC, deepspeed.git_version_info as G
out = {
  "torch_cuda": torch.version.cuda, "torch_hip": torch.version.hip,
  "FSDP_PYTORCH_VERSION": C.FSDP_PYTORCH_VERSION, "FSDP2_PYTORCH_VERSION": C.FSDP2_PYTORCH_VERSION,
  "torchao_src": inspect.getsource(I.is_torchao_available),
  "megatron_src": inspect.getsource(I.is_megatron_lm_available),
  "removed": sorted(DC._REMOVED_TOP_LEVEL_CONFIG_KEYS),
  "installed_ops": G.installed_ops, "accelerator_name": G.accelerator_name,
  "msamp_src": inspect.getsource(I.is_msamp_available),
  "te_src": inspect.getsource(I.is_transformer_engine_available),
  "fp8_backends": sorted(m.value for m in __import__("accelerate.utils.dataclasses", fromlist=["x"]).FP8BackendType),
}
try:
    import deepspeed.ops.sparse_attention
    out["sparse"] = "importable"
except ImportError as e:
    out["sparse"] = type(e).__name__
print(json.dumps(out))
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=200)
    assert proc.returncode == 0, proc.stderr[-2000:]
    oracle = json.loads(proc.stdout.strip().splitlines()[-1])
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[2]
                           / "sub-skills" / "distributed-and-backends" / "scripts"))
    try:
        from availability import targets  # noqa: WPS433
    finally:
        sys.path.pop(0)
    assert targets.ACCELERATE_FALLBACK["FSDP_PYTORCH_VERSION"] == oracle["FSDP_PYTORCH_VERSION"]
    assert targets.ACCELERATE_FALLBACK["FSDP2_PYTORCH_VERSION"] == oracle["FSDP2_PYTORCH_VERSION"] == "2.6.0"
    assert '"0.6.1"' in oracle["torchao_src"] and targets.ACCELERATE_FALLBACK["torchao_min"] == "0.6.1"
    assert '"0.8.0"' in oracle["megatron_src"] and targets.ACCELERATE_FALLBACK["megatron_core_min"] == "0.8.0"
    assert {"amp", "sparse_attention"} <= set(oracle["removed"])
    assert oracle["sparse"] == "ModuleNotFoundError"
    assert oracle["torch_cuda"] is None and oracle["torch_hip"] is None
    assert oracle["accelerator_name"] == "cpu"
    # import / distribution names the checker uses for accelerate's FP8 backends
    assert '"msamp", "ms-amp"' in oracle["msamp_src"]
    assert targets.TARGETS["ms-amp"][:2] == (("ms-amp",), "msamp")
    assert '"transformer_engine", "transformer-engine"' in oracle["te_src"]
    assert targets.TARGETS["transformer-engine"][0][0] == "transformer-engine"
    assert targets.TARGETS["transformer-engine"][1] == "transformer_engine"
    assert oracle["fp8_backends"] == ["AO", "MSAMP", "NO", "TE"]
    assert {k for k in targets.WORKFLOWS if k.startswith("accelerate-fp8-")} == {
        "accelerate-fp8-te", "accelerate-fp8-msamp", "accelerate-fp8-torchao"}

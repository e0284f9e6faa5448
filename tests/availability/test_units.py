"""Unit tests of the checker's helpers (imported in-process; they import nothing heavy),
including the GPU ("yes") path of the verdicts, fed with a CUDA record taken on an
NVIDIA H200 (tests/availability/data/h200_record.json) since CI has no GPU."""
from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
SCRIPTS = HERE.parents[1] / "sub-skills" / "distributed-and-backends" / "scripts"


@pytest.fixture(scope="module")
def av():
    sys.path.insert(0, str(SCRIPTS))
    try:
        import availability.scan as scan
        import availability.verdicts as verdicts
        import availability.targets as targets
    finally:
        sys.path.remove(str(SCRIPTS))
    return scan, verdicts, targets


@pytest.mark.parametrize("low,high", [
    ("2.6.0a0+git1234", "2.6.0"), ("2.1.0.a0+32f93b1", "2.1.0"), ("2.0.1", "2.1.0.a0+32f93b1"),
    ("0.9.9", "0.10.0"), ("2.6.0", "2.6.0.post1"), ("2.5.1+cu124", "2.6.0"), ("0.8.0rc1", "0.8.0"),
    ("1.0.dev3", "1.0a1"),
])
def test_version_order(av, low, high):
    _, verdicts, _ = av
    assert verdicts.version_key(low) < verdicts.version_key(high)
    assert verdicts.vge(high, low) and not verdicts.vge(low, high)


def test_version_equal_ignores_local_and_trailing_zeros(av):
    _, verdicts, _ = av
    assert verdicts.version_key("2.13.0+cpu") == verdicts.version_key("2.13")
    assert verdicts.vge("2.13.0+cpu", "2.6.0")


def test_import_closure(av, tmp_path):
    scan, _, _ = av
    pkg = tmp_path / "demo"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from demo.core import X\nfrom .sub import helper\nimport json, os\n")
    (pkg / "core.py").write_text(
        "import numpy as np\nfrom torch import nn\nfrom demo import \\\n    extra\n"
        "try:\n    import optional_dep\nexcept ImportError:\n    pass\n"
        "def f():\n    import lazy_dep\n")
    (pkg / "extra.py").write_text("from PIL import Image\n")
    (pkg / "sub" / "__init__.py").write_text("from . import helper\n")
    (pkg / "sub" / "helper.py").write_text("from ..core import X\nimport yaml\n")
    (pkg / "unused.py").write_text("import never_imported\n")
    needed = scan.import_closure(str(pkg), "demo")
    assert needed == {"numpy": "demo/core.py", "torch": "demo/core.py", "PIL": "demo/extra.py",
                      "yaml": "demo/sub/helper.py"}


def test_dist_dir_names(av, tmp_path):
    scan, _, _ = av
    for name in ("torch-2.13.0+cpu.dist-info", "apex-0.1-py3.11.egg-info", "nvidia_nccl_cu12-2.21.5.dist-info",
                 "typing_extensions-4.16.0.dist-info"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "METADATA").write_text("Name: x\n\n")
    env = scan.Environment([str(tmp_path)])
    got = sorted((d.key, d.version) for d in env.dists)
    assert got == [("apex", "0.1"), ("nvidia-nccl-cu12", "2.21.5"), ("torch", "2.13.0+cpu"),
                   ("typing-extensions", "4.16.0")]


@pytest.fixture(scope="module")
def h200():
    return json.loads((HERE / "data" / "h200_record.json").read_text())


def _gpu_packages(real_static, h200):
    p = copy.deepcopy(real_static.json["packages"])
    p["torch"]["version"] = h200["torch"]["version"]
    p["torch"]["facts"].update(h200["torch"]["facts"])
    return p


def test_recorded_h200_cuda_section(h200):
    cu = h200["cuda"]
    assert cu["status"] == "ok" and cu["allocation"]["ok"] is True
    assert cu["devices"][0]["capability"] == [9, 0]
    assert cu["devices"][0]["bf16_native"] is True and cu["devices"][0]["fp8"] is True
    # the NCCL torch loaded is the one the nvidia-nccl-cu13 wheel (pinned by torch) provides
    assert cu["nccl_version"] == h200["nccl_wheels"]["wheels"][0]["version"]
    assert h200["verdicts"]["accelerate-fsdp2"] == "yes"


def test_gpu_verdicts(av, real_static, h200):
    _, verdicts, _ = av
    p = _gpu_packages(real_static, h200)
    v = verdicts.Verdicts(p, cuda=h200["cuda"]).all()
    assert v["accelerate-fsdp2"]["verdict"] == "yes"
    assert v["accelerate-fsdp"]["verdict"] == "yes"
    assert v["accelerate-deepspeed"]["verdict"] == "yes"
    # still blocked by deepspeed 0.19.8 / missing packages, GPU or not
    assert v["apex-amp"]["verdict"] == "no" and v["deepspeed-sparse-attention"]["verdict"] == "no"
    assert v["dalle-deepspeed"]["verdict"] == "no"
    assert v["accelerate-fp8-te"]["verdict"] == "no"
    # without --include-cuda the same software is only "unknown"
    v = verdicts.Verdicts(p, cuda=None).all()
    assert v["accelerate-fsdp2"]["verdict"] == "unknown"
    assert "no GPU checked" in v["accelerate-fsdp2"]["reason"]


def test_fp8_and_bf16_thresholds(av, real_static, h200):
    _, verdicts, _ = av
    p = _gpu_packages(real_static, h200)
    p["torchao"].update(state="installed", version="0.13.0", dist="torchao")
    cuda = copy.deepcopy(h200["cuda"])
    assert verdicts.Verdicts(p, cuda=cuda).all()["accelerate-fp8-torchao"]["verdict"] == "yes"
    cuda["devices"][0].update(name="NVIDIA A100", capability=[8, 0], bf16_native=True, fp8=False)
    v = verdicts.Verdicts(p, cuda=cuda)
    res = v.all()["accelerate-fp8-torchao"]
    assert res == {"verdict": "no", "reason": "FP8 needs compute capability >= 8.9; GPU 0 NVIDIA A100 is 8.0",
                   "question": res["question"]}
    assert v.capability("bf16")[0] is True and v.capability("fp8")[0] is False
    cuda["devices"][0].update(name="Tesla V100", capability=[7, 0], bf16_native=False)
    assert verdicts.Verdicts(p, cuda=cuda).capability("bf16")[0] is False
    p["torchao"]["version"] = "0.5.0"
    res = verdicts.Verdicts(p, cuda=h200["cuda"]).all()["accelerate-fp8-torchao"]
    assert res["verdict"] == "no" and "torchao 0.5.0 is older than 0.6.1" in res["reason"]


def test_fsdp2_floor(av, real_static, h200):
    _, verdicts, _ = av
    p = _gpu_packages(real_static, h200)
    p["torch"]["version"] = "2.5.1+cu124"
    res = verdicts.Verdicts(p, cuda=h200["cuda"]).all()
    assert res["accelerate-fsdp2"]["verdict"] == "no"
    assert res["accelerate-fsdp2"]["reason"].startswith(
        "FSDP2 needs torch >= 2.6.0 (accelerate 1.15.0, accelerate/utils/constants.py); torch is 2.5.1+cu124")
    assert res["accelerate-fsdp"]["verdict"] == "yes"


def test_vocabulary_is_documented(av):
    _, _, targets = av
    names = set(targets.TARGETS) | set(targets.WORKFLOWS) | set(targets.CAPABILITIES)
    assert len(names) == len(targets.TARGETS) + len(targets.WORKFLOWS) + len(targets.CAPABILITIES)


def test_te_needs_the_transformer_engine_distribution(av, real_static, h200):
    """accelerate looks up importlib.metadata.metadata('transformer-engine'), not the -cu12 wheel."""
    _, verdicts, _ = av
    p = _gpu_packages(real_static, h200)
    p["transformer-engine"].update(state="installed", version="2.5.0", dist="transformer-engine-cu12",
                                   dists_found=["transformer-engine-cu12", "transformer-engine-torch"])
    res = verdicts.Verdicts(p, cuda=h200["cuda"]).all()["accelerate-fp8-te"]
    assert res["verdict"] == "no" and "'transformer-engine' distribution, which is not installed" in res["reason"]
    p["transformer-engine"]["dists_found"] = ["transformer-engine", "transformer-engine-cu12"]
    assert verdicts.Verdicts(p, cuda=h200["cuda"]).all()["accelerate-fp8-te"]["verdict"] == "yes"

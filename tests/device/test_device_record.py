"""The GPU runs the references cite, checked on any machine.

tests/device/gpu_probes.py and benchmarks/bench_planner_gpu_memory.py ran once on an H100 (2026-12-06,
torch 2.11.0+cu130, NCCL 2.28.9, accelerate 1.15.0, transformers 5.17.0); their output is kept under
tests/device/records/. CI has no GPU, so these tests do not re-run the probes: they check that each
recorded observation is what the reference sentence built on it says (a reference edited away from
its record, or a record replaced by a run that saw something else, fails here), and they run on CPU
what has a CPU path (the TF32 legacy-flag error, the scripts' no-GPU exits).
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
import _generated_blocks as gb  # noqa: E402
RECORDS = ROOT / "tests" / "device" / "records"
PROBES = json.loads((RECORDS / "2026-12-06-h100-probes.json").read_text(encoding="utf-8"))
MEMORY = json.loads((RECORDS / "2026-12-06-h100-planner-memory.json").read_text(encoding="utf-8"))
AVAIL = json.loads((RECORDS / "2026-12-06-h100-availability.json").read_text(encoding="utf-8"))
BY_NAME = {p["probe"]: p for p in PROBES["probes"]}
TD = ROOT / "sub-skills" / "torch-distributed" / "references"
DTB = ROOT / "sub-skills" / "distributed-training-backends" / "references"


def _ref(path: Path) -> str:
    return " ".join(path.read_text(encoding="utf-8").split())


def _has(path: Path, fragment: str) -> None:
    assert " ".join(fragment.split()) in _ref(path), f"{path.name} no longer says: {fragment!r}"


def _env_without_gpu(tmp: Path, **extra):
    """The shared probe-child environment with every GPU hidden: the no-GPU branch, forced on any machine."""
    return gb.child_env(tmp, CUDA_VISIBLE_DEVICES="", PYTHONDONTWRITEBYTECODE="1", **extra)


def test_record_header_names_the_gpu_and_versions():
    h = PROBES["header"]
    assert "H100" in h["device"] and h["capability"] == [9, 0]
    assert h["versions"]["torch"].startswith("2.11") and h["versions"]["accelerate"] == "1.15.0"
    assert h["nccl"].startswith("2.28")
    assert set(BY_NAME) >= {"backend_none", "nccl_watch_default", "tf32_torch_compile", "accel_fp16_scaler"}
    # every probe of the recorded runs came back with a result or a signal, none timed out
    for p in PROBES["probes"]:
        assert p["rc"] != "timeout", p["probe"]
        assert p["result"] is not None or p.get("signal"), p["probe"]


def test_backend_none_on_cuda_is_nccl_alone():
    r = BY_NAME["backend_none"]["result"]
    assert r["get_backend"] == "undefined" and r["all_reduce_cuda"] == "ok"
    assert "No backend type associated with device type cpu" in r["all_reduce_cpu"]
    both = BY_NAME["backend_both"]["result"]
    assert both["all_reduce_cpu"] == both["all_reduce_cuda"] == "ok"
    _has(TD / "process-groups.md", "a CPU `all_reduce` raised `RuntimeError: No backend type associated with "
         "device type cpu`, a CUDA one worked; with `\"cpu:gloo,cuda:nccl\"` both worked")


def test_nccl_defaults_and_log_lines():
    p = BY_NAME["default_timeouts"]
    assert p["result"]["nccl_timeout_s"] == 600.0 and p["result"]["gloo_timeout_s"] == 1800.0
    assert p["stderr_has"]["ProcessGroupNCCL initialization options"]
    assert p["stderr_has"]["TORCH_NCCL_ASYNC_ERROR_HANDLING"]
    _has(TD / "debugging-and-env.md", "read back 600 s for NCCL, 1800 s for a gloo side group")
    _has(TD / "group-timeouts.md", "NCCL** (GPU; seen on an H100 with torch 2.11.0")


@pytest.mark.parametrize("name", ["nccl_watch_default", "nccl_watch_dump_off", "nccl_watch_mode1"])
def test_timed_out_collective_kills_the_process_about_a_minute_later(name):
    p = BY_NAME[name]
    assert p["rc"] == -6 and p["signal"] == 6 and p["result"] is None     # SIGABRT, never printed "survived"
    assert p["stderr_has"]["Watchdog caught collective operation timeout"]
    lived = p["ended_at"] - p["enqueued_at"]
    assert 55 < lived < 90, lived          # 4 s timeout + about 60 s before the teardown
    assert any("taking the entire process down" in ln for ln in p["timeline"])
    _has(TD / "debugging-and-env.md", "**about 60 s after the timeout**")


def test_mode0_lives_on_and_waits_raise_in_the_caller():
    m0 = BY_NAME["nccl_timeout_mode0"]
    assert m0["rc"] == 0 and m0["result"]["survived_s"] >= 12 and m0["result"]["completed"] is False
    assert m0["stderr_has"]["Watchdog caught collective operation timeout"]
    for name, ms in (("nccl_blocking_wait", "4000"), ("nccl_wait_timeout_arg", "2000")):
        wait = BY_NAME[name]["result"]["wait"]
        assert wait.startswith("torch.distributed.DistBackendError:") and f"ran for {ms} milliseconds" in wait
    _has(TD / "debugging-and-env.md", "| `TORCH_NCCL_ASYNC_ERROR_HANDLING=0` | the timeout was logged; the process lived on |")


def test_device_id_makes_nccl_connect_inside_init_process_group():
    with_id = BY_NAME["nccl_eager_with_device_id"]["line_index"]
    without = BY_NAME["nccl_eager_without_device_id"]["line_index"]
    assert with_id["Init COMPLETE"] < with_id["MARK_AFTER_INIT"]                 # connected during init
    assert without["MARK_AFTER_INIT"] < without["Init COMPLETE"] < without["MARK_AFTER_COLLECTIVE"]   # at first use
    _has(TD / "init-method-matrix.md", "NCCL: returns without connecting unless `device_id=` was passed")


def test_accelerate_fp16_scaler_torchrun_state_and_dtensor():
    s = BY_NAME["accel_fp16_scaler"]["result"]
    assert s["scaler"] == "torch.amp.grad_scaler.GradScaler"
    assert s["stage_before_clip"] == "OptState.READY" and s["stage_after_clip"] == "OptState.UNSCALED"
    t = BY_NAME["accel_torchrun_state"]["result"]
    assert t["distributed_type"] == "DistributedType.MULTI_GPU" and t["backend"] == "nccl"
    d = BY_NAME["accel_dtensor_ddp"]["result"]
    assert d["distributed_type"] == "DistributedType.MULTI_GPU" and d["prepare"] == "ok"
    _has(DTB / "accelerate-prepare-model.md", "Only with more than one process: `multi_device` also needs "
         "`use_distributed` (`num_processes > 1`)")


def test_ddp_output_device_syncbn_dcp_and_fsdp2_generate():
    r = BY_NAME["ddp_output_device"]["result"]
    assert r["output_device"] == 0 and r["syncbn_cuda"] == "ok"
    assert "SyncBatchNorm expected input tensor to be on GPU" in r["syncbn_cpu"]
    nccl_only = BY_NAME["dcp_async_nccl_only"]["result"]["async_save"]
    assert nccl_only.startswith("builtins.AssertionError: A CPU backend must be enabled for async save")
    assert BY_NAME["dcp_async_with_gloo"]["result"]["async_save"] == "ok"
    assert BY_NAME["fsdp2_generate"]["result"]["root_generate"] == "same as unsharded"
    _has(TD / "fsdp2-and-dcp.md", "raised with `\"nccl\"`, saved with `\"cpu:gloo,cuda:nccl\"`")


def test_trainer_torch_compile_switches_tf32_on_through_the_new_api():
    on = BY_NAME["tf32_torch_compile"]["result"]
    assert on["fresh"]["tf32_in_effect"] is False
    after = on["after_training_arguments"]
    assert after["tf32_in_effect"] is True and after["backends_fp32_precision"] == "tf32"
    assert "mix of the legacy and new APIs" in after["allow_tf32"]
    off = BY_NAME["tf32_torch_compile_tf32_false"]["result"]["after_training_arguments"]
    assert off["tf32_in_effect"] is False and off["backends_fp32_precision"] == "ieee"
    assert BY_NAME["tf32_bf16_no_compile"]["result"]["after_training_arguments"]["tf32_in_effect"] is False
    _has(DTB / "transformers-trainer-ddp-args.md", "reading the legacy `torch.backends.cuda.matmul.allow_tf32` "
         "raises `RuntimeError`")


def test_legacy_tf32_read_raises_after_transformers_enable_tf32_on_cpu(tmp_path):
    """The CPU half of the TF32 claim, run here: transformers' enable_tf32 (torch >= 2.9 path) sets the
    new flag, after which torch refuses the legacy read. In a child: the flag is process-global."""
    code = (
        "import torch\n"
        "from transformers.utils.import_utils import enable_tf32\n"
        "before = torch.backends.cuda.matmul.allow_tf32\n"
        "enable_tf32(True)\n"
        "print('NEW', torch.backends.fp32_precision, torch.backends.cuda.matmul.fp32_precision)\n"
        "try:\n"
        "    torch.backends.cuda.matmul.allow_tf32\n"
        "    print('LEGACY read ok')\n"
        "except RuntimeError as e:\n"
        "    print('LEGACY raised', 'mix of the legacy and new APIs' in str(e))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240,
                         env=_env_without_gpu(tmp_path, TRANSFORMERS_VERBOSITY="error"), cwd=str(ROOT))
    assert out.returncode == 0, out.stderr[-800:]
    assert "NEW tf32 tf32" in out.stdout
    assert "LEGACY raised True" in out.stdout


def test_probe_script_lists_its_probes_and_refuses_without_a_gpu(tmp_path):
    script = ROOT / "tests" / "device" / "gpu_probes.py"
    names = subprocess.run([sys.executable, str(script), "list"], capture_output=True, text=True, timeout=60)
    assert names.returncode == 0 and set(names.stdout.split()) >= set(BY_NAME)
    bad = subprocess.run([sys.executable, str(script), "one", "no_such_probe"], capture_output=True, text=True,
                         timeout=60)
    assert bad.returncode == 2 and "gpu_probes.py" in bad.stderr
    for argv in (["all", "--only", "nccl_watch_default,no_such_probe"], ["all", "--out"], []):
        r = subprocess.run([sys.executable, str(script), *argv], capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and "Traceback" not in r.stderr and not r.stdout, (argv, r.stderr)
    unknown = subprocess.run([sys.executable, str(script), "all", "--only", "no_such_probe"], capture_output=True,
                             text=True, timeout=60)
    assert unknown.stderr.strip().splitlines() == [
        "gpu_probes.py: unknown probe(s) no_such_probe; see `gpu_probes.py list`"]
    # the no-GPU branch, forced: CUDA hidden on any machine
    none = subprocess.run([sys.executable, str(script), "all", "--out", "/nonexistent-unused"],
                          capture_output=True, text=True, timeout=120, env=_env_without_gpu(tmp_path))
    assert none.returncode == 2 and "no CUDA device here" in none.stderr and not none.stdout
    bench = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_planner_gpu_memory.py")],
                           capture_output=True, text=True, timeout=120, env=_env_without_gpu(tmp_path))
    assert bench.returncode == 2 and "needs a CUDA device" in bench.stderr


def _replan(case, tmp_path):
    cfg = tmp_path / f"{case['family']}.json"
    cfg.write_text(json.dumps(MEMORY["configs"][case["family"]]), encoding="utf-8")
    out = subprocess.run(
        [sys.executable, str(ROOT / "sub-skills/distributed-training-backends/scripts/plan_backend.py"),
         "--model-config", str(cfg), "--gpus-per-node", "1", "--seq-len", str(case["seq"]), "--micro-batch",
         str(case["mb"]), "--precision", "bf16", "--gpu-memory", "80GiB", "--output", "json"],
        capture_output=True, text=True, timeout=120)
    assert out.returncode in (0, 1), out.stderr
    doc = json.loads(out.stdout)
    return {c["strategy"]: c["per_gpu_bytes"] for c in doc["candidates"] if c["offload"] == "none"}, doc


def test_planner_memory_record_and_the_current_planner_against_it(tmp_path):
    cases = [m for m in MEMORY["measured"] if "error" not in m]
    assert len(cases) == 10 and "H100" in MEMORY["device"]
    MiB = 2 ** 20
    for m in cases:
        old = MEMORY["planner"][f"{m['family']}-{m['seq']}x{m['mb']}"][m["strategy"]]
        # model states, as recorded: within 5 %
        assert abs(old["optimizer_states"] / m["optimizer_states"] - 1) < 0.05
        assert abs(old["parameters"] / m["parameters"] - 1) < 0.05
        # the planner at the time under-planned every activation figure
        assert m["end_of_forward"] > old["activations"]
        now, doc = _replan(m, tmp_path)
        saved = now[m["strategy"]]["activations"]
        if m["family"] == "llama" and m["strategy"] == "ddp":
            assert abs(saved / m["end_of_forward"] - 1) < 0.03, (m["seq"], saved, m["end_of_forward"])
        elif m["family"] == "llama":          # FSDP2: same slope, plus the root's gathered bf16 embedding and head
            assert 110 * MiB < m["end_of_forward"] - saved < 160 * MiB, (m["seq"], (m["end_of_forward"] - saved) / MiB)
        elif m["strategy"] == "fsdp2":         # GPT-2 (gelu_new, dropout 0.1 from its config): root's wte+wpe only
            assert 80 * MiB < m["end_of_forward"] - saved < 120 * MiB, (m["seq"], (m["end_of_forward"] - saved) / MiB)
        else:                                 # GPT-2 under DDP autocast: gelu_new's pow runs fp32 on CUDA, not planned
            assert 1.15 < m["end_of_forward"] / saved < 1.35, (m["seq"], m["end_of_forward"] / saved)
    assert any("leave headroom there" in a for a in doc["assumptions"])
    _has(DTB / "memory-planning.md", "re-planned against the same GPU figures the DDP `activations` row is "
         "0.98-0.99 of the real saved bytes for the Llama shape")


def test_availability_checker_saw_the_gpu():
    cuda = AVAIL["cuda"]
    assert cuda["status"] == "ok" and cuda["devices"][0]["bf16_native"] and cuda["devices"][0]["fp8"]
    assert cuda["allocation"]["ok"] and cuda["nccl_available"]
    verdicts = AVAIL["verdicts"]
    assert verdicts["accelerate-fsdp2"]["verdict"] == "yes"
    assert verdicts["accelerate-deepspeed"]["verdict"] == "no"     # not installed on that machine

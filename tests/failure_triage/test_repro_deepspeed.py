"""Reproduce DeepSpeed 0.19.8 failures on CPU and check the catalog recognises the exact text.

Three kinds of runs, all real:
- one interpreter builds DeepSpeedConfig objects from broken configs (and calls a few
  other raise sites: zero_to_fp32, the hostfile parser, the op builder without ninja);
- one interpreter runs deepspeed.initialize (DS_ACCELERATOR=cpu, world size 1, gloo) on a
  tiny model with broken arguments, and loads a ZeRO checkpoint written by 2 ranks;
- the `deepspeed` launcher starts 2 CPU ranks of a script that rejects --local_rank.
Each case prints a `=== CASE name` marker, so an entry is only credited with the text
of the case that was meant to provoke it.

fp16 depends on the processor: DeepSpeed's CPU accelerator accepts it only where oneDNN has fp16
kernels (AVX512-FP16 / AMX-FP16). The fp16 cases force the accelerator's probe (R.FP16_PROBE) to the
answer they need, so they reproduce on every x86 CPU; `fp16_here` runs fp16 as this CPU answers and
the test asserts what applies here (PDT_FORCE_CPU_FP16=0|1 switches that answer for the whole suite).
"""
from __future__ import annotations

import re
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest




import _repro as R  # noqa: E402  (tests/failure_triage is on sys.path: conftest.py)

# The CPU accelerator JIT-builds a shared-memory comm op on first use (minutes on a busy
# machine); it is irrelevant to the messages checked here, so the children skip it.
_NO_SHM_OP = """
import os, sys
os.environ["DS_ACCELERATOR"] = "cpu"
import deepspeed.comm.torch
# not `import deepspeed.comm.torch as x`: that binds the package attribute "torch", the torch module
_dct = sys.modules["deepspeed.comm.torch"]
_dct.build_shm_op = lambda: None
"""

CONFIG_CASES = R.CASE_PRELUDE + _NO_SHM_OP + r'''
import json, tempfile
from deepspeed.runtime.config import DeepSpeedConfig
B = {"train_batch_size": 1}
cases = {
    "batch_mismatch": {"train_batch_size": 10, "train_micro_batch_size_per_gpu": 3, "gradient_accumulation_steps": 2},
    "batch_missing": {"gradient_accumulation_steps": 2},
    "batch_zero": {"train_batch_size": 0, "train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1},
    "auto_values": {"train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto"},
    "fp16_bf16": {**B, "fp16": {"enabled": True}, "bf16": {"enabled": True}},
    "zero_extra_key": {**B, "zero_optimization": {"stage": 2, "offload_optimizer_device": "cpu"}},
    "comm_dtype": {**B, "communication_data_type": "int8"},
    "allreduce_sum_z3": {**B, "gradient_allreduce_op": "sum", "zero_optimization": {"stage": 3}},
    "allreduce_bad": {**B, "gradient_allreduce_op": "max"},
    "tag_validation": {**B, "checkpoint": {"tag_validation": "maybe"}},
    "parallel_write": {**B, "checkpoint": {"parallel_write": {"pipeline_stage": "yes"}}},
    "bf16_master_nozero": {**B, "bf16": {"enabled": True, "bf16_master_weights_and_grads": True}},
    "bf16_opt_states": {**B, "bf16": {"enabled": True, "bf16_optimizer_states": True}, "zero_optimization": {"stage": 1}},
    "removed_mics": {**B, "zero_optimization": {"stage": 3, "mics_shard_size": 8}},
    "autocast_dtype": {**B, "torch_autocast": {"enabled": True, "dtype": "float8"}},
    "apex_amp": {**B, "amp": {"enabled": False, "opt_level": "O1"}},
}
for name, cfg in cases.items():
    case(name, lambda cfg=cfg: DeepSpeedConfig(cfg))
tmp = tempfile.mkdtemp()
dup = os.path.join(tmp, "dup.json"); open(dup, "w").write('{"train_batch_size": 1, "train_batch_size": 2}')
case("duplicate_keys", lambda: DeepSpeedConfig(dup))
bad = os.path.join(tmp, "bad.json"); open(bad, "w").write('{"train_batch_size": 1,, }')
case("hjson_syntax", lambda: DeepSpeedConfig(bad))
case("missing_path", lambda: DeepSpeedConfig(os.path.join(tmp, "nope", "ds_config.json")))

def zero_to_fp32_empty():
    from deepspeed.utils.zero_to_fp32 import get_fp32_state_dict_from_zero_checkpoint
    get_fp32_state_dict_from_zero_checkpoint(tempfile.mkdtemp())
case("zero_to_fp32_empty", zero_to_fp32_empty)

def bad_hostfile():
    from deepspeed.launcher.runner import _parse_hostfile
    _parse_hostfile(["node1 gpus=8"])
case("bad_hostfile", bad_hostfile)

def no_ninja():
    os.environ["PATH"] = "/nonexistent"
    from deepspeed.ops.op_builder.fused_adam import FusedAdamBuilder
    FusedAdamBuilder().load()
case("no_ninja", no_ninja)
'''

CONFIG_PARAMS = [
    pytest.param("config", "batch_mismatch", marks=pytest.mark.reproduces("deepspeed-batch-size-mismatch"), id="batch_mismatch"),
    pytest.param("config", "batch_missing", marks=pytest.mark.reproduces("deepspeed-batch-size-missing"), id="batch_missing"),
    pytest.param("config", "batch_zero", marks=pytest.mark.reproduces("deepspeed-batch-size-not-positive"), id="batch_zero"),
    pytest.param("config", "auto_values", marks=pytest.mark.reproduces("deepspeed-config-auto-unresolved"), id="auto_values"),
    pytest.param("config", "fp16_bf16", marks=pytest.mark.reproduces("deepspeed-fp16-and-bf16-enabled"), id="fp16_bf16"),
    pytest.param("config", "zero_extra_key", marks=pytest.mark.reproduces("deepspeed-config-validation-error"), id="zero_extra_key"),
    pytest.param("config", "comm_dtype", marks=pytest.mark.reproduces("deepspeed-communication-data-type-invalid"), id="comm_dtype"),
    pytest.param("config", "allreduce_sum_z3", marks=pytest.mark.reproduces("deepspeed-allreduce-sum-unsupported"), id="allreduce_sum_z3"),
    pytest.param("config", "allreduce_bad", marks=pytest.mark.reproduces("deepspeed-allreduce-op-invalid"), id="allreduce_bad"),
    pytest.param("config", "tag_validation", marks=pytest.mark.reproduces("deepspeed-checkpoint-tag-validation-invalid"), id="tag_validation"),
    pytest.param("config", "parallel_write", marks=pytest.mark.reproduces("deepspeed-checkpoint-parallel-write-invalid"), id="parallel_write"),
    pytest.param("config", "bf16_master_nozero", marks=pytest.mark.reproduces("deepspeed-master-weights-need-zero"), id="bf16_master_nozero"),
    pytest.param("config", "bf16_opt_states", marks=pytest.mark.reproduces("deepspeed-bf16-optimizer-states-need-master"), id="bf16_opt_states"),
    pytest.param("config", "removed_mics", marks=pytest.mark.reproduces("deepspeed-removed-config-block"), id="removed_mics"),
    pytest.param("config", "autocast_dtype", marks=pytest.mark.reproduces("deepspeed-autocast-dtype-invalid"), id="autocast_dtype"),
    pytest.param("config", "apex_amp", marks=pytest.mark.reproduces("deepspeed-amp-section-removed"), id="apex_amp"),
    pytest.param("config", "duplicate_keys", marks=pytest.mark.reproduces("deepspeed-config-duplicate-keys"), id="duplicate_keys"),
    pytest.param("config", "hjson_syntax", marks=pytest.mark.reproduces("deepspeed-config-hjson-syntax"), id="hjson_syntax"),
    pytest.param("config", "missing_path", marks=pytest.mark.reproduces("deepspeed-config-path-incorrect-padding"), id="missing_path"),
    pytest.param("config", "zero_to_fp32_empty", marks=pytest.mark.reproduces("deepspeed-zero-to-fp32-no-checkpoint"), id="zero_to_fp32_empty"),
    pytest.param("config", "bad_hostfile", marks=pytest.mark.reproduces("deepspeed-launcher-bad-hostfile"), id="bad_hostfile"),
    pytest.param("config", "no_ninja", marks=pytest.mark.reproduces("torch-cpp-extension-ninja-missing", "deepspeed-op-ninja-missing"), id="no_ninja"),
]

# Written by 2 ranks, loaded by 1 (world size change with ZeRO optimizer state).
SAVE_2_RANKS = _NO_SHM_OP + R.FP16_PROBE + r'''
import sys, torch, deepspeed
os.write(1, f"FP16_HERE {fp16_here()}\n".encode())  # one write: the 2 ranks share the pipe
m = torch.nn.Linear(4, 4)
cfg = {"train_batch_size": 2, "zero_optimization": {"stage": 1}, "zero_allow_untested_optimizer": True}
e, *_ = deepspeed.initialize(model=m, optimizer=torch.optim.SGD(m.parameters(), lr=0.1), config=cfg)
e.save_checkpoint(sys.argv[1], tag="step1")
print("SAVED", flush=True)
'''

ENGINE_CASES = R.CASE_PRELUDE + _NO_SHM_OP + R.FP16_PROBE + r'''
import argparse, tempfile, torch, deepspeed
from deepspeed.utils.logging import set_log_level_from_string
set_log_level_from_string("info")
for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
    os.environ.pop(var, None)
case("no_launcher_env", lambda: deepspeed.initialize(model=torch.nn.Linear(4, 4), config={"train_batch_size": 1}))
def _zero3_build():   # what from_pretrained does under a ZeRO-3 config (s11-fd-f04): zero.Init around the model build
    with deepspeed.zero.Init(config_dict_or_path={"train_batch_size": 1, "zero_optimization": {"stage": 3}}):
        torch.nn.Embedding(8, 4)
case("zero_init_no_launcher_env", _zero3_build)
os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1")
os.environ["MASTER_PORT"] = sys.argv[1]
B = {"train_batch_size": 1}
def model():
    return torch.nn.Linear(4, 4)
def sgd(m):
    return torch.optim.SGD(m.parameters(), lr=0.1)
def init(cfg, optimizer=None, **kw):
    m = model()
    return deepspeed.initialize(model=m, optimizer=optimizer(m) if optimizer else None, config=cfg, **kw)[0]

case("local_rank_mismatch", lambda: init(B, args=argparse.Namespace(local_rank=3)))
case("no_config", lambda: deepspeed.initialize(model=model()))
case("no_model", lambda: deepspeed.initialize(model=None, config=B))
case("bad_optimizer", lambda: init({**B, "optimizer": {"type": "Adamz", "params": {"lr": 1e-3}}}))
case("zero_no_optimizer", lambda: init({**B, "zero_optimization": {"stage": 2}}))
case("zero_untested", lambda: init({**B, "zero_optimization": {"stage": 1}}, sgd))
case("zero_untested_allowed", lambda: init({**B, "zero_optimization": {"stage": 1}, "zero_allow_untested_optimizer": True}, sgd))
case("config_path", lambda: init(os.path.join(tempfile.mkdtemp(), "ds_config.json")))

def no_local_rank():  # after the process group exists, so no MPI discovery is attempted
    saved = os.environ.pop("LOCAL_RANK")
    try:
        init(B)
    finally:
        os.environ["LOCAL_RANK"] = saved
case("no_local_rank", no_local_rank)

def backward_without_optimizer():
    e = init(B)
    e.backward(e(torch.randn(1, 4)).sum())
case("backward_without_optimizer", backward_without_optimizer)

def consolidated_on_stage1():
    e = init({**B, "zero_optimization": {"stage": 1}, "zero_allow_untested_optimizer": True}, sgd)
    e._zero3_consolidated_16bit_state_dict()
case("consolidated_on_stage1", consolidated_on_stage1)

def load_without_latest():
    e = init(B, sgd)
    print("LOAD RESULT", e.load_checkpoint(tempfile.mkdtemp()), flush=True)
case("load_without_latest", load_without_latest)

def load_other_world_size():
    e = init({**B, "zero_optimization": {"stage": 1}, "zero_allow_untested_optimizer": True}, sgd)
    e.load_checkpoint(sys.argv[2], tag="step1")
case("load_other_world_size", load_other_world_size)

Z1 = {**B, "zero_optimization": {"stage": 1}, "zero_allow_untested_optimizer": True}
def duplicate_param():
    m = model()
    opt = sgd(m)
    opt.param_groups.append({**opt.param_groups[0], "params": [m.weight]})
    deepspeed.initialize(model=m, optimizer=opt, config=Z1)
case("duplicate_param", duplicate_param)
case("universal_without_latest", lambda: init({**B, "checkpoint": {"load_universal": True}}, sgd).load_checkpoint(tempfile.mkdtemp()))
def save_16bit_zero3():
    e = init({**B, "zero_optimization": {"stage": 3}, "zero_allow_untested_optimizer": True}, sgd)
    print("SAVE RESULT", e.save_16bit_model(tempfile.mkdtemp()), flush=True)
case("save_16bit_zero3", save_16bit_zero3)
def resume_other_precision():
    d = tempfile.mkdtemp()
    init({**Z1, "bf16": {"enabled": True}}, sgd).save_checkpoint(d, tag="t")
    with fp16_probe(True):  # as on a CPU with oneDNN fp16 kernels
        init({**Z1, "fp16": {"enabled": True}}, sgd).load_checkpoint(d, tag="t")
case("resume_other_precision", resume_other_precision)

def no_sync_zero2():
    e = init({**B, "zero_optimization": {"stage": 2}, "zero_allow_untested_optimizer": True}, sgd)
    with e.no_sync():
        pass
case("no_sync_zero2", no_sync_zero2)
def backward_vector_loss():
    e = init(B, sgd)
    e.backward(e(torch.randn(1, 4)).squeeze(0))
case("backward_vector_loss", backward_vector_loss)

def overflow_steps(engine, steps):
    for _ in range(steps):
        engine.backward(engine(torch.randn(1, 4).half()).float().sum() * float("inf"))
        engine.step()

def fp16_unfused_overflow():
    with fp16_probe(True):  # as on a CPU with oneDNN fp16 kernels
        overflow_steps(init({**B, "fp16": {"enabled": True, "initial_scale_power": 4}}, sgd), 1)
case("fp16_unfused_overflow", fp16_unfused_overflow)
def fp16_zero_overflow_to_min():
    with fp16_probe(True):
        overflow_steps(init({**B, "zero_optimization": {"stage": 1}, "zero_allow_untested_optimizer": True,
                             "fp16": {"enabled": True, "initial_scale_power": 1, "min_loss_scale": 1,
                                      "hysteresis": 1}}, sgd), 4)
case("fp16_zero_overflow_to_min", fp16_zero_overflow_to_min)
def fp16_refused():
    with fp16_probe(False):  # as on a CPU without them (AMD EPYC and most x86 CPUs: no AVX512-FP16)
        init({**B, "fp16": {"enabled": True}}, sgd)
case("fp16_refused", fp16_refused)
def fp16_as_this_cpu():
    print("FP16_HERE", fp16_here(), flush=True)
    init({**B, "fp16": {"enabled": True}}, sgd)
case("fp16_as_this_cpu", fp16_as_this_cpu)
'''

ENGINE_PARAMS = [
    pytest.param("engine", "no_sync_zero2", marks=pytest.mark.reproduces("deepspeed-no-sync-with-zero-partitioned-grads"), id="no_sync_zero2"),
    pytest.param("engine", "backward_vector_loss", marks=pytest.mark.reproduces("deepspeed-backward-loss-not-scalar"), id="backward_vector_loss"),
    pytest.param("engine", "no_local_rank", marks=pytest.mark.reproduces("deepspeed-local-rank-env-missing"), id="no_local_rank"),
    pytest.param("engine", "local_rank_mismatch", marks=pytest.mark.reproduces("deepspeed-local-rank-mismatch"), id="local_rank_mismatch"),
    pytest.param("engine", "no_config", marks=pytest.mark.reproduces("deepspeed-config-not-given"), id="no_config"),
    pytest.param("engine", "no_model", marks=pytest.mark.reproduces("deepspeed-initialize-no-model"), id="no_model"),
    pytest.param("engine", "bad_optimizer", marks=pytest.mark.reproduces("deepspeed-optimizer-unsupported"), id="bad_optimizer"),
    pytest.param("engine", "zero_no_optimizer", marks=pytest.mark.reproduces("deepspeed-zero-requires-optimizer"), id="zero_no_optimizer"),
    pytest.param("engine", "zero_untested", marks=pytest.mark.reproduces("deepspeed-zero-untested-optimizer"), id="zero_untested"),
    pytest.param("engine", "zero_untested_allowed", marks=pytest.mark.reproduces("deepspeed-zero-untested-optimizer-warning"), id="zero_untested_allowed"),
    pytest.param("engine", "config_path", marks=pytest.mark.reproduces("deepspeed-config-path-not-found"), id="config_path"),
    pytest.param("engine", "backward_without_optimizer", marks=pytest.mark.reproduces("deepspeed-no-optimizer-for-backward-or-step"), id="backward_without_optimizer"),
    pytest.param("engine", "consolidated_on_stage1", marks=pytest.mark.reproduces("deepspeed-consolidated-state-dict-needs-zero3"), id="consolidated_on_stage1"),
    pytest.param("engine", "load_without_latest", marks=pytest.mark.reproduces("deepspeed-load-checkpoint-latest-missing"), id="load_without_latest"),
    pytest.param("engine", "load_other_world_size", marks=pytest.mark.reproduces("deepspeed-load-dp-world-size-changed"), id="load_other_world_size"),
    pytest.param("engine", "fp16_unfused_overflow", marks=pytest.mark.reproduces("deepspeed-fp16-unfused-grad-overflow"), id="fp16_unfused_overflow"),
    pytest.param("engine", "fp16_zero_overflow_to_min", marks=pytest.mark.reproduces("deepspeed-fp16-overflow-skip", "deepspeed-loss-scale-at-minimum"), id="fp16_zero_overflow_to_min"),
    pytest.param("engine", "no_launcher_env", marks=pytest.mark.reproduces("deepspeed-mpi-discovery-no-mpi4py"), id="no_launcher_env"),
    pytest.param("engine", "zero_init_no_launcher_env", marks=pytest.mark.reproduces("deepspeed-mpi-discovery-no-mpi4py"), id="zero_init_no_launcher_env"),
    pytest.param("engine", "duplicate_param", marks=pytest.mark.reproduces("deepspeed-duplicate-param-in-groups"), id="duplicate_param"),
    pytest.param("engine", "universal_without_latest", marks=pytest.mark.reproduces("deepspeed-universal-latest-missing"), id="universal_without_latest"),
    pytest.param("engine", "save_16bit_zero3", marks=pytest.mark.reproduces("deepspeed-save-16bit-not-gathered"), id="save_16bit_zero3"),
    pytest.param("engine", "resume_other_precision", marks=pytest.mark.reproduces("deepspeed-optim-states-file-missing"), id="resume_other_precision"),
    pytest.param("engine", "fp16_refused", marks=pytest.mark.reproduces("deepspeed-fp16-unsupported-device"), id="fp16_refused"),
]

LAUNCHER_SCRIPT = r'''
import argparse
parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float, default=0.1)
parser.parse_args()
'''


def _launcher_run() -> tuple[int, str]:
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "train.py"
        script.write_text(LAUNCHER_SCRIPT)
        bindir = str(Path(sys.executable).parent)
        env = R.child_env(LOCAL_SIZE="2")
        env["PATH"] = bindir + ":" + env.get("PATH", "")
        cmd = [sys.executable, "-m", "deepspeed.launcher.runner", "--num_gpus", "2",
               "--master_port", str(R.free_port()), str(script)]
        return R._run(cmd, 240, env, tmp)


def _engine_run() -> tuple[str, str]:
    """(output of the 2 torchrun ranks that save, output of the engine cases)."""
    with tempfile.TemporaryDirectory() as ckpt:
        rc, save_out = R.run_torchrun(SAVE_2_RANKS.replace("sys.argv[1]", repr(ckpt)), nproc=2, timeout=300)
        assert "SAVED" in save_out, save_out[-3000:]
        rc, out = R.run_python(ENGINE_CASES, timeout=300, args=[str(R.free_port()), ckpt])
        return save_out, out


@pytest.fixture(scope="module")
def runs():
    with ThreadPoolExecutor(max_workers=3) as pool:
        config = pool.submit(R.run_python, CONFIG_CASES, 240)
        engine = pool.submit(_engine_run)
        launcher = pool.submit(_launcher_run)
        save_out, engine_out = engine.result()
        return {"config": R.split_cases(config.result()[1]),
                "engine": R.split_cases(engine_out),
                "save": save_out,
                "launcher": launcher.result()}


def _ids(request) -> tuple[str, ...]:
    """The catalog ids a test provokes: the arguments of its `reproduces` mark (one source of truth)."""
    return request.node.get_closest_marker("reproduces").args


@pytest.mark.parametrize("group,name", CONFIG_PARAMS + ENGINE_PARAMS)
def test_case_reproduces_entries(runs, group, name, request):
    ids = _ids(request)
    text = runs[group].get(name)
    assert text is not None, f"case {name} did not run; cases seen: {sorted(runs[group])}"
    if not any(R.entry(i)["role"] == "warning" for i in ids):
        assert "NOERROR" not in text.splitlines(), f"case {name} raised nothing:\n{text[-2000:]}"
    for entry_id in ids:
        R.assert_reproduced(text, entry_id)


_FP16_REFUSED = "ValueError: Type fp16 is not supported on your device."


def test_fp16_on_this_cpu(runs, cpu_fp16_supported):
    """deepspeed.initialize with fp16 on the CPU accelerator does what this CPU's oneDNN probe says
    (forced by PDT_FORCE_CPU_FP16 when set): accepted with fp16 kernels, refused without."""
    lines = runs["engine"]["fp16_as_this_cpu"].splitlines()
    assert f"FP16_HERE {cpu_fp16_supported}" in lines, lines[:5]
    if cpu_fp16_supported:
        assert "NOERROR" in lines and _FP16_REFUSED not in lines, lines[-20:]
    else:
        assert _FP16_REFUSED in lines and "NOERROR" not in lines, lines[-20:]


def test_fp16_both_kinds_of_cpu(runs):
    """Both branches, whatever this CPU: refused with the exact message when the probe says no
    (fp16_refused), accepted and trained into the overflow messages when it says yes."""
    assert _FP16_REFUSED in runs["engine"]["fp16_refused"].splitlines()
    for name in ("fp16_unfused_overflow", "fp16_zero_overflow_to_min", "resume_other_precision"):
        assert _FP16_REFUSED not in runs["engine"][name].splitlines(), name


def test_children_see_the_parents_fp16_answer(runs, cpu_fp16_supported):
    """The plain-python child and both torchrun ranks answer as the pytest process does, so the
    PDT_FORCE_CPU_FP16 switch reaches the processes that really run DeepSpeed."""
    ranks = re.findall(r"FP16_HERE (True|False)", runs["save"])
    assert ranks == [str(cpu_fp16_supported)] * 2, ranks
    assert f"FP16_HERE {cpu_fp16_supported}" in runs["engine"]["fp16_as_this_cpu"].splitlines()


def test_children_skip_the_shm_op(runs):
    """The patch in _NO_SHM_OP reaches DeepSpeed: no child JIT-builds the shared-memory comm op (a C++
    compile of minutes, irrelevant to the messages checked here)."""
    outputs = [runs["save"], runs["launcher"][1], *runs["engine"].values(), *runs["config"].values()]
    assert not [o for o in outputs if "deepspeed_shm_comm" in o]


def test_load_without_latest_starts_from_scratch(runs):
    """The warning matters because load_checkpoint then returns (None, None) and training restarts."""
    assert "LOAD RESULT (None, None)" in runs["engine"]["load_without_latest"]


@pytest.mark.reproduces("deepspeed-launcher-no-hostfile", "deepspeed-launcher-local-rank-arg-unrecognized", "deepspeed-launcher-killing-subprocess", "deepspeed-launcher-exits-with-return-code")
def test_deepspeed_launcher_cascade(runs, request):
    rc, out = runs["launcher"]
    assert rc != 0
    for entry_id in _ids(request):
        R.assert_reproduced(out, entry_id)

"""Claims about DeepSpeed's communication backend on CPU (deepspeed 0.19.8, torch 2.13.0), run for
real: which backend the CPU accelerator names, what init_distributed(dist_backend=...) changes when
the accelerator names 'ccl', a two-stage PipelineModule training on gloo (its send/recv path), and a
stale deepspeed_shm_comm build lock hanging init_distributed silently (set-15 miss s15-C3-01).

oneccl_bindings_for_pytorch is not installed here: the 'ccl' case sets the accelerator's name to
what CPU_Accelerator.__init__ gives when the bindings import, and replaces comm.CCLBackend by a
stand-in whose is_initialized() says whether the CCL comm op built (ccl.py::CCLBackend.__init__)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from _torchrun import free_port, result, torchrun  # noqa: E402

ENV = {k: v for k, v in os.environ.items()
       if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "OMP_NUM_THREADS")}
ENV |= {"DS_ACCELERATOR": "cpu", "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}

SELECT = textwrap.dedent('''
    import os, sys, json
    os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1")
    import torch, deepspeed
    import deepspeed.comm.comm as C
    from deepspeed.accelerator import get_accelerator
    from deepspeed.accelerator.cpu_accelerator import CPU_Accelerator
    ccl_op_builds = sys.argv[1] == "1"
    out = {"name_without_oneccl": CPU_Accelerator().communication_backend_name()}
    made = []
    class StandInCCL:   # CCLBackend: initialized only when build_ccl_op() returned the op
        def __init__(self, **kw):
            made.append(kw)
            self.initialized = ccl_op_builds
        def is_initialized(self):
            return self.initialized
    get_accelerator()._communication_backend_name = "ccl"   # CPU_Accelerator with oneccl_bindings_for_pytorch
    C.CCLBackend = StandInCCL
    deepspeed.init_distributed(dist_backend="gloo")
    out["ccl_backend_made"] = len(made)
    out["cdb"] = type(C.cdb).__name__
    out["torch_backend"] = torch.distributed.get_backend() if torch.distributed.is_initialized() else None
    print("RESULT", json.dumps(out), flush=True)
''')

PIPE = textwrap.dedent('''
    import json, torch, deepspeed
    from deepspeed.pipe import PipelineModule
    deepspeed.init_distributed(dist_backend="gloo")
    import deepspeed.comm.comm as C
    torch.manual_seed(0)
    layers = [torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 8), torch.nn.Linear(8, 1)]
    net = PipelineModule(layers=layers, num_stages=2, loss_fn=torch.nn.MSELoss(), partition_method="uniform")
    cfg = {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 2,
           "optimizer": {"type": "SGD", "params": {"lr": 0.01}}}
    eng, _, _, _ = deepspeed.initialize(model=net, model_parameters=[p for p in net.parameters()], config=cfg)
    def batches():
        while True:
            yield torch.randn(2, 8), torch.randn(2, 1)
    loss = eng.train_batch(data_iter=batches())
    print("RESULT", json.dumps({"stage": eng.stage_id, "backend": torch.distributed.get_backend(),
                                "cdb": type(C.cdb).__name__, "loss_finite": bool(torch.isfinite(loss))}), flush=True)
    # skip the exit-time destructors (as _ds_runtime_probe.py does): left to them, a rank aborted once in CI
    # after its RESULT line ("terminate called without an active exception", SIGABRT); the barrier keeps
    # either rank from leaving while the other still talks to it
    torch.distributed.barrier()
    import os
    os._exit(0)
''')

LOCKED = textwrap.dedent('''
    import faulthandler, os, sys
    # a stuck rank writes where it waits to its own file, then exits (faulthandler writes a frame line piece by
    # piece, so two ranks dumping into torchrun's shared stderr at the same moment interleave inside lines)
    dump = open(f"dump_rank{os.environ['RANK']}.txt", "w")
    faulthandler.dump_traceback_later(int(sys.argv[1]), exit=True, file=dump)
    import deepspeed
    deepspeed.init_distributed()
    print("RESULT {}", flush=True)
''')


def _select(tmp_path: Path, ccl_op_builds: bool) -> dict:
    probe = tmp_path / "ds_select.py"
    probe.write_text(SELECT)
    proc = subprocess.run([sys.executable, str(probe), "1" if ccl_op_builds else "0"], cwd=tmp_path,
                          env=ENV | {"MASTER_PORT": str(free_port())}, capture_output=True, text=True, timeout=600)
    return result(proc)


def test_cpu_accelerator_names_gloo_without_oneccl_bindings(tmp_path):
    assert _select(tmp_path, ccl_op_builds=False)["name_without_oneccl"] == "gloo"


def test_dist_backend_gloo_is_ignored_when_the_ccl_backend_initializes(tmp_path):
    out = _select(tmp_path, ccl_op_builds=True)
    # init_distributed builds the backend the accelerator names, not the one asked for
    assert out["ccl_backend_made"] == 1 and out["cdb"] == "StandInCCL"
    assert out["torch_backend"] is None   # no TorchBackend(gloo) was created by init_distributed


def test_dist_backend_gloo_is_used_when_the_ccl_backend_does_not_initialize(tmp_path):
    # The uninitialized CCLBackend is comm.py's path for an accelerator with no CCLCommBuilder; on
    # CPU_Accelerator a failed CCL op raises instead (test_real_ccl_backend_raises_instead_...).
    out = _select(tmp_path, ccl_op_builds=False)
    assert out["ccl_backend_made"] == 1 and out["cdb"] == "TorchBackend" and out["torch_backend"] == "gloo"


def test_two_stage_pipeline_trains_on_gloo(tmp_path):
    probe = tmp_path / "ds_pipe.py"
    probe.write_text(PIPE)
    proc = torchrun(probe, nproc=2, cwd=tmp_path, env=ENV)
    result(proc)   # exit 0 and a RESULT line
    outs = sorted((json.loads(ln[len("RESULT "):]) for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")),
                  key=lambda o: o["stage"])
    assert outs == [{"stage": s, "backend": "gloo", "cdb": "TorchBackend", "loss_finite": True} for s in (0, 1)]


def test_stale_shm_comm_lock_hangs_init_distributed_silently(tmp_path):
    ext = tmp_path / "ext"
    (ext / "deepspeed_shm_comm").mkdir(parents=True)
    (ext / "deepspeed_shm_comm" / "lock").write_text("")   # left by a build that was killed
    probe = tmp_path / "ds_locked.py"
    probe.write_text(LOCKED)
    proc = torchrun(probe, "30", nproc=2, cwd=tmp_path, env=ENV | {"TORCH_EXTENSIONS_DIR": str(ext)})
    text = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "RESULT" not in text
    # nothing at all from the ranks: no warning, no log line, no timeout error (torchrun's own lines only)
    before = text.split("Traceback (most recent call last)")[0]   # torchrun's own failure report starts there
    assert all(re.match(r"[WIE]\d{4} \d\d:\d\d:", ln) for ln in before.splitlines() if ln.strip()), before[-2000:]
    # every dump shows the rank waiting on the build lock. The first rank whose watchdog fires exits, and
    # torchrun then stops the other one, which can happen before that rank's own dump (a CI rehearsal saw
    # one dump): so at least one dump, each in the lock wait; neither rank got past it (no RESULT above)
    dumps = [p.read_text() for p in sorted(tmp_path.glob("dump_rank*.txt"))]
    dumps = [d for d in dumps if "Timeout (0:00:30)!" in d]
    assert 1 <= len(dumps) <= 2, text[-2000:]
    for d in dumps:
        assert "file_baton.py" in d and "in build_shm_op" in d and "in init_distributed" in d, d
        assert "cpp_extension.py" in d, d


REAL_CCL = textwrap.dedent('''
    import os, json
    os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1")
    import torch, deepspeed
    import deepspeed.comm.comm as C
    from deepspeed.accelerator import get_accelerator
    get_accelerator()._communication_backend_name = "ccl"   # CPU_Accelerator with oneccl_bindings_for_pytorch
    builder = get_accelerator().create_op_builder("CCLCommBuilder")
    out = {"builder": type(builder).__name__}
    try:
        deepspeed.init_distributed(dist_backend="gloo")
        out["raised"] = None
    except Exception as e:
        out["raised"] = f"{type(e).__name__}: {e}"
    out["cdb"] = None if C.cdb is None else type(C.cdb).__name__
    out["pg"] = torch.distributed.is_initialized()
    print("RESULT", json.dumps(out), flush=True)
''')


def test_real_ccl_backend_raises_instead_of_falling_back_to_dist_backend(tmp_path):
    # Post-fix audit: on the CPU accelerator build_ccl_op never returns None (get_op_builder always
    # gives CCLCommBuilder), so a CCL op that cannot be built raises out of init_distributed; the
    # uninitialized-CCLBackend fallback to dist_backend is not reachable with DS_ACCELERATOR=cpu.
    probe = tmp_path / "ds_real_ccl.py"
    probe.write_text(REAL_CCL)
    env = {k: v for k, v in ENV.items() if k != "CCL_ROOT"} | {"MASTER_PORT": str(free_port()),
                                                              "TORCH_EXTENSIONS_DIR": str(tmp_path / "ext")}
    proc = subprocess.run([sys.executable, str(probe)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600)
    out = result(proc)
    assert out["builder"] == "CCLCommBuilder"
    assert out["raised"].startswith("ValueError: Didn't find CCL_ROOT")
    assert out["cdb"] is None and out["pg"] is False   # no TorchBackend(gloo), no process group

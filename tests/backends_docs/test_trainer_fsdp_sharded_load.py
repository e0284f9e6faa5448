"""A model sharded at load time with FSDP2 only (from_pretrained(..., distributed_config=DistributedConfig(fsdp_size=2)))
under the transformers 5.25.0 Trainer, 2 gloo ranks on CPU (set 21, s21-K9-04): the Trainer does not hand it to
DDP (no "incompatible with DDP" refusal), it calls prepare_model(device_placement=False, evaluation_mode=True),
defers the FSDP2 gradient reduction itself between accumulation steps, trains, and refuses the default
save_strategy. The tiny random Llama is built and saved by a child (torch/transformers stay out of pytest).
About 15 s."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import _ports  # noqa: E402

WORKER = HERE / "_sharded_load_fsdp_worker.py"
REFUSAL = ("Resuming is not supported for models sharded at load time (`DistributedConfig`), so their optimizer "
           "state cannot be checkpointed. Pass `save_only_model=True` or `save_strategy='no'`.")


def _env(**extra):
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", OMP_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1",
               TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    env.update(extra)
    return env


def test_trainer_trains_fsdp_sharded_at_load_model(tmp_path):
    folder = tmp_path / "model"
    subprocess.run([sys.executable, str(WORKER), "--build", str(folder)], env=_env(), check=True, timeout=120,
                   capture_output=True)
    port = _ports.free_port()
    procs = []
    for rank in range(2):
        env = _env(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2", LOCAL_WORLD_SIZE="2",
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        procs.append(subprocess.Popen([sys.executable, str(WORKER), str(folder), str(tmp_path)], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outs = []
    try:
        for p in procs:
            outs.append(p.communicate(timeout=180)[0])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)
    assert [p.returncode for p in procs] == [0, 0], "\n".join(o[-3000:] for o in outs)
    for rank in range(2):
        res = json.loads((tmp_path / f"rank{rank}.json").read_text())
        assert res["flag"] and res["fsdp_root"], res
        assert res["default_save_error"] == REFUSAL, res
        assert res["calls"]["prepare_model"] == [{"device_placement": False, "evaluation_mode": True}], res
        # 2 optimizer steps x 2 micro-batches: the first micro-batch of each step runs under the deferral
        assert res["calls"]["defer"] == 2, res
        assert res["global_step"] == 2 and res["loss_finite"] and res["still_fsdp_no_ddp"], res

"""Child process for test_fx23_inference_and_pipe_zero.py (deepspeed 0.19.8, DS_ACCELERATOR=cpu, gloo, 2 ranks).
Prints one line "RESULT <json>".

usage: python _fx23_ds_probe.py inference WORKDIR
           init_inference(model, config={"zero": {"stage": 3, "offload_param": {"device": "cpu"}}}): the config
           parses the zero section; the parameters stay whole (numel, no ds_id). Then deepspeed.initialize with
           ZeRO-3 and no optimizer on a normally built model: DeepSpeedZeRoOffload, parameters partitioned.
       python _fx23_ds_probe.py pipe WORKDIR STAGE
           PipelineModule, 2 stages, AdamW, zero_optimization.stage STAGE: initialize and one train_batch, or the
           exception text.

The caller sets DS_ACCELERATOR=cpu, a private TORCH_EXTENSIONS_DIR, RANK / WORLD_SIZE / MASTER_*.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _ds_probe as base  # noqa: E402


def _model(torch):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Linear(32, 4))


def inference(torch, deepspeed):
    res = {}
    eng = deepspeed.init_inference(_model(torch), config={
        "dtype": torch.float32, "zero": {"stage": 3, "offload_param": {"device": "cpu"}}})
    res["inference_config_zero_stage"] = int(eng._config.zero.stage)
    res["inference_numel"] = [p.numel() for p in eng.module.parameters()]
    res["inference_ds_id"] = any(hasattr(p, "ds_id") for p in eng.module.parameters())
    x = torch.randn(2, 16)
    res["inference_forward_shape"] = list(eng(x).shape)
    e2, *_ = deepspeed.initialize(model=_model(torch), config={"train_micro_batch_size_per_gpu": 1,
                                                               "zero_optimization": {"stage": 3}})
    res["initialize_optimizer"] = type(e2.optimizer).__name__
    res["initialize_numel"] = [p.numel() for p in e2.module.parameters()]
    res["initialize_ds_numel"] = [p.ds_numel for p in e2.module.parameters()]
    return res


def pipe(torch, deepspeed, stage):
    from deepspeed.pipe import PipelineModule
    nn = torch.nn
    torch.manual_seed(0)
    model = PipelineModule(layers=[nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 1)], num_stages=2,
                           loss_fn=nn.MSELoss(), partition_method="uniform")
    cfg = {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 2, "steps_per_print": 1000,
           "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}, "zero_optimization": {"stage": stage}}
    res = {"stage": stage}
    try:
        engine, *_ = deepspeed.initialize(model=model, model_parameters=list(model.parameters()), config=cfg)
        g = torch.Generator().manual_seed(0)

        def it():
            while True:
                yield torch.randn(2, 4, generator=g), torch.randn(2, 1, generator=g)
        engine.train_batch(it())
        res["train_batch"] = "ok"
        res["engine"] = type(engine).__name__
    except Exception as e:  # noqa: BLE001 - the exception is the result
        res["error"] = f"{type(e).__name__}: {e}"
    return res


def main():
    mode = sys.argv[1]
    torch, deepspeed = base._setup()
    r = inference(torch, deepspeed) if mode == "inference" else pipe(torch, deepspeed, int(sys.argv[3]))
    sys.stdout.write("RESULT " + json.dumps(r) + "\n")
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()

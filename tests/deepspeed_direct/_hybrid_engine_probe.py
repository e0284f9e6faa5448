"""Child process for test_hybrid_engine_no_policy.py: DeepSpeedHybridEngine (hybrid_engine.enabled) around a
model that matches no DeepSpeed inference policy, on DeepSpeed's CPU accelerator (gloo, 1 rank).
Prints one line "RESULT <json>".

usage: python _hybrid_engine_probe.py WORKDIR

The caller sets DS_ACCELERATOR=cpu, a private TORCH_EXTENSIONS_DIR, RANK / WORLD_SIZE / MASTER_*.
"""
from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _ds_probe as base  # noqa: E402


def main():
    torch, deepspeed = base._setup()
    catch = base._Catch()
    from deepspeed.utils import logger as dslogger
    dslogger.addHandler(catch)

    class Tiny(torch.nn.Module):                      # no layer class any DeepSpeed inference policy knows
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(4, 4)

        def forward(self, x):
            return self.proj(x)

        def generate(self, x):                        # the model's own generate(), as a HF model has
            return self.proj(x).argmax(-1)

    torch.manual_seed(0)
    model = Tiny()
    own_generate = model.generate
    cfg = {"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 0},
           "hybrid_engine": {"enabled": True}, "steps_per_print": 10 ** 9}
    engine, *_ = deepspeed.initialize(model=model, optimizer=torch.optim.AdamW(model.parameters(), lr=1e-3),
                                      config=cfg)
    r = {"engine": type(engine).__name__,
         "inference_containers": len(engine._inference_containers),
         "generate_replaced": engine.module.generate != own_generate,
         "warnings": [m for m in catch.msgs if "inference policy" in m]}
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            for _ in range(2):                        # the DeepSpeed-Chat step-3 loop: eval, generate, train, step
                engine.eval()
                engine.module.generate(torch.randn(2, 4))
                engine.train()
                loss = engine(torch.randn(2, 4)).pow(2).mean()
                engine.backward(loss)
                engine.step()
            engine.eval()                             # the call that raised before PR 4789
        r["eval"] = "ok"
    except Exception as e:  # noqa: BLE001 - the exception is the result
        r["eval"] = f"{type(e).__name__}: {e}"
    r["total_batch_size"] = engine._total_batch_size
    r["metrics_lines"] = [ln for ln in out.getvalue().splitlines() if ln.startswith("|E2E latency=")]
    # the pre-fix expression (deepspeed <= 0.12.4, hybrid_engine.py eval) on the same state
    try:
        f"{(1 / 0.5 * engine._total_batch_size):.2f}"
        r["unguarded"] = "ok"
    except TypeError as e:
        r["unguarded"] = f"TypeError: {e}"
    sys.stdout.write("RESULT " + json.dumps(r) + "\n")
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()

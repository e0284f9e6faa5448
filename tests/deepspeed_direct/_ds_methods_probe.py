"""Child process for _ds_methods.py: builds one tiny engine per case on DeepSpeed's CPU accelerator and
calls the public DeepSpeedEngine methods users reach for (and the deepspeed.utils safe_get_full_* helpers)
in a fixed order, recording for each call its result or the exception class and first line. Prints one
line "RESULT <json>".

usage: python _ds_methods_probe.py CASES_JSON WORKDIR

deepspeed 0.19.8, torch 2.13.0. The caller sets DS_ACCELERATOR=cpu and a private TORCH_EXTENSIONS_DIR.
"""
from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _ds_probe as base  # noqa: E402


def _call(fn):
    try:
        return {"ok": True, "value": fn()}
    except Exception as e:  # noqa: BLE001 - the exception class is the result
        return {"ok": False, "error": type(e).__name__, "message": base._first(e)}


def _shape(t):
    return None if t is None else list(t.shape)


def _states(engine):
    s = getattr(engine.optimizer, "offloaded_states", None)
    return None if s is None else sorted(x.value for x in s)


def method_case(torch, deepspeed, c, work):
    from deepspeed.runtime.zero.offload_config import OffloadDeviceEnum, OffloadStateTypeEnum
    from deepspeed.utils import safe_get_full_fp32_param, safe_get_full_grad, safe_get_full_optimizer_state
    base.REAL_OPS = False
    catch = base._Catch()
    from deepspeed.utils import logger as dslogger
    dslogger.addHandler(catch)
    dslogger.setLevel(logging.WARNING)
    model = base._model(torch)
    opt = base._client(torch, c, model.parameters())
    try:
        engine, *_ = deepspeed.initialize(model=model, optimizer=opt, config=base._config(c))
    except Exception as e:  # noqa: BLE001
        return {"init": {"ok": False, "error": type(e).__name__, "message": base._first(e)}}
    out = {"init": {"ok": True, "optimizer": base._name(engine.optimizer)}}
    p0 = next(engine.module.parameters())
    dt = p0.dtype

    def fwd_bwd():
        x = torch.randn(1, 4, generator=torch.Generator().manual_seed(100)).to(dt)
        engine.backward(engine(x).float().pow(2).mean())

    def no_sync():
        with engine.no_sync():
            fwd_bwd()
        return "entered; forward/backward inside ran"
    out["no_sync"] = _call(no_sync)
    if engine.optimizer is not None and engine.inside_no_sync_ctxt is False:
        engine.optimizer.zero_grad() if hasattr(engine.optimizer, "zero_grad") else None
    out["is_gradient_accumulation_boundary"] = _call(engine.is_gradient_accumulation_boundary)
    out["fwd_bwd"] = _call(fwd_bwd)
    out["safe_get_full_grad"] = _call(lambda: _shape(safe_get_full_grad(p0)))
    out["step"] = _call(engine.step)
    out["get_global_grad_norm"] = _call(lambda: type(engine.get_global_grad_norm()).__name__)
    out["get_lr"] = _call(engine.get_lr)
    out["safe_get_full_fp32_param"] = _call(lambda: _shape(safe_get_full_fp32_param(p0)))
    out["safe_get_full_optimizer_state"] = _call(lambda: _shape(safe_get_full_optimizer_state(p0, "exp_avg")))

    def boundary():
        engine.set_gradient_accumulation_boundary(False)
        v = engine.is_gradient_accumulation_boundary()
        engine.set_gradient_accumulation_boundary(True)
        return v
    out["set_gradient_accumulation_boundary(False)"] = _call(boundary)

    w0 = [p.detach().float().clone() for p in engine.module.parameters()] if engine.zero_optimization_stage() < 3 else None

    def offload_all():
        engine.offload_states()
        return _states(engine)
    out["offload_states()"] = _call(offload_all)

    def reload():
        engine.reload_states()
        left = _states(engine)
        if w0 is not None:
            same = all(torch.equal(a, p.detach().float()) for a, p in zip(w0, engine.module.parameters()))
            return {"left": left, "weights_same": same}
        return {"left": left}
    out["reload_states()"] = _call(reload)

    def step_again():
        fwd_bwd()
        engine.step()
        return "ok"
    out["step after reload"] = _call(step_again)

    def offload_optim():
        engine.offload_states(include=[OffloadStateTypeEnum.optim_states])
        s = _states(engine)
        engine.reload_states()
        return s
    out["offload_states(include=[optim_states])"] = _call(offload_optim)
    out["offload_states(device=nvme)"] = _call(lambda: engine.offload_states(device=OffloadDeviceEnum.nvme))
    n = len(catch.msgs)

    def off_none():
        engine.offload_states(device=OffloadDeviceEnum.none)
        return {"states": _states(engine), "warns": catch.msgs[n:]}
    out["offload_states(device=none)"] = _call(off_none)

    d = Path(work) / f"m{abs(hash(c['id'])) % 10 ** 8}"

    def save16():
        k = len(catch.msgs)
        r = engine.save_16bit_model(str(d))
        return {"returned": r, "files": sorted(f.name for f in d.glob("*")) if d.exists() else [],
                "warns": catch.msgs[k:]}
    out["save_16bit_model"] = _call(save16)
    out["_zero3_consolidated_16bit_state_dict"] = _call(
        lambda: sorted(engine._zero3_consolidated_16bit_state_dict()))
    out["empty_partition_cache"] = _call(lambda: (engine.empty_partition_cache(), "ok")[1])
    out["destroy"] = _call(lambda: (engine.destroy(), "ok")[1])
    dslogger.removeHandler(catch)
    return out


def main():
    cases, work = json.loads(sys.argv[1]), sys.argv[2]
    torch, deepspeed = base._setup()
    res = {}
    for c in cases:
        res[c["id"]] = method_case(torch, deepspeed, c, work)
    print("RESULT " + json.dumps(res, sort_keys=True))


if __name__ == "__main__":
    main()

"""DeepSpeed JSON rules: gradient communication - allreduce averaging, pre/post division with ZeRO,
reduce-scatter for Muon (family ``deepspeed``, deepspeed 0.19.8; the docstring convention is in _ds.py).
"""
from __future__ import annotations

from .. import ds_values as D
from ..core import Context, rule
from ._ds import SRC_CFG, _num, _stage

# Every rule here reports only when one of these keys, or the optimizer type Muon, is in the JSON
# (rules/__init__.py: the module is not compiled for any other document).
NEEDS = ("gradient_allreduce_op", "gradient_predivide_factor", "prescale_gradients", "muon")


@rule(id="ds-allreduce-sum", severity="error", family="deepspeed",
      summary="gradient_allreduce_op sum with ZeRO-3, ZenFlow or DeepCompile",
      source=f"{SRC_CFG}::DeepSpeedConfig._do_error_check")
def allreduce_sum(ctx: Context):
    """Fails:

    ```json
    {"train_batch_size": 8, "gradient_allreduce_op": "sum", "zero_optimization": {"stage": 3}}
    ```

    Passes:

    ```json
    {"train_batch_size": 8, "gradient_allreduce_op": "sum", "zero_optimization": {"stage": 2}}
    ```
    """
    v = ctx.doc.get(("gradient_allreduce_op",))
    if not (isinstance(v, str) and v.lower() == "sum"):
        return
    if _stage(ctx) == 3:
        yield ctx.report(("gradient_allreduce_op",), "gradient_allreduce_op 'sum' is not supported with ZeRO stage 3 "
                         "(ValueError)", "use mean, or ZeRO stage 0-2")
    if isinstance(ctx.doc.get(("zero_optimization", "zenflow")), dict):
        yield ctx.report(("gradient_allreduce_op",), "gradient_allreduce_op 'sum' is not supported with ZenFlow",
                         "use mean")
    if D.as_bool(ctx.doc.get(("compile", "deepcompile"))):
        yield ctx.report(("gradient_allreduce_op",), "gradient_allreduce_op 'sum' is not supported with DeepCompile",
                         "use mean")


@rule(id="ds-predivide-prescale-zero", severity="error", family="deepspeed",
      summary="gradient_predivide_factor != 1 or prescale_gradients with ZeRO-2/3 reduce-scatter",
      source="deepspeed/runtime/zero/stage_1_and_2.py::DeepSpeedZeroOptimizer.__init__")
def predivide(ctx: Context):
    """Fails:

    ```json
    {"train_batch_size": 8, "gradient_predivide_factor": 2.0,
     "optimizer": {"type": "AdamW", "params": {"lr": 0.001, "torch_adam": true}}, "zero_optimization": {"stage": 2}}
    ```

    Passes:

    ```json
    {"train_batch_size": 8, "gradient_predivide_factor": 2.0,
     "optimizer": {"type": "AdamW", "params": {"lr": 0.001, "torch_adam": true}}, "zero_optimization": {"stage": 1}}
    ```
    """
    st = _stage(ctx)
    if st not in (2, 3):
        return
    rs = ctx.doc.get(("zero_optimization", "reduce_scatter"), True)
    if D.as_bool(rs) is False:
        return
    f = ctx.doc.get(("gradient_predivide_factor",))
    if f is not None and _num(f) and f != 1.0:
        yield ctx.report(("gradient_predivide_factor",), f"gradient_predivide_factor {f} is not supported with "
                         f"ZeRO-{st} with reduce_scatter (AssertionError)", "remove it, or set reduce_scatter false")
    if D.as_bool(ctx.doc.get(("prescale_gradients",))) is True:
        yield ctx.report(("prescale_gradients",), f"prescale_gradients is not supported with ZeRO-{st} with "
                         "reduce_scatter (AssertionError)", "remove it, or set reduce_scatter false")


@rule(id="ds-muon-reduce-scatter", severity="error", family="deepspeed",
      summary="Muon optimizer with ZeRO-3 and reduce_scatter (the default)",
      source="deepspeed/runtime/zero/stage3.py::DeepSpeedZeroOptimizer_Stage3.__init__")
def muon_reduce_scatter(ctx: Context):
    """Fails:

    ```json
    {"train_batch_size": 4, "optimizer": {"type": "Muon", "params": {"lr": 0.001}}, "zero_optimization": {"stage": 3}}
    ```

    Passes:

    ```json
    {"train_batch_size": 4, "optimizer": {"type": "Muon", "params": {"lr": 0.001}}, "zero_optimization": {"stage": 2}}
    ```
    """
    t = ctx.doc.get(("optimizer", "type"))
    if not (isinstance(t, str) and t.lower() == "muon") or _stage(ctx) != 3:
        return
    if D.as_bool(ctx.doc.get(("zero_optimization", "reduce_scatter"), True)) is not False:
        yield ctx.report(("optimizer", "type"), "the Muon optimizer cannot be used with ZeRO-3 reduce_scatter "
                         "(ValueError)", "set zero_optimization.reduce_scatter false, or use stage 1/2")

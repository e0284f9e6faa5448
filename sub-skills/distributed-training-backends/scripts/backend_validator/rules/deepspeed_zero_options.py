"""DeepSpeed JSON rules: rarer ZeRO options - NVMe paths, partial optimizer offload, compute_grad_norm,
legacy_stage1, managed_gradient_accumulation (family ``deepspeed``, deepspeed 0.19.8; the docstring
convention is in _ds.py). Split from deepspeed_zero.py so that a JSON without these keys does not
compile them (rules/__init__.py, NEEDS).
"""
from __future__ import annotations

from .. import ds_values as D
from ..core import Context, rule
from ._ds import SRC_ENGINE, _stage

# Every rule here reports only when one of these words is in the JSON (an "nvme" offload device,
# offload_optimizer.ratio, compute_grad_norm, legacy_stage1, managed_gradient_accumulation):
# rules/__init__.py does not compile the module for any other document.
NEEDS = ("nvme", "ratio", "compute_grad_norm", "legacy_stage1", "managed_gradient_accumulation")


@rule(id="ds-nvme-path-missing", severity="error", family="deepspeed",
      summary="NVMe offload without nvme_path",
      source="deepspeed/runtime/zero/stage3.py::DeepSpeedZeroOptimizer_Stage3._configure_tensor_swapping")
def nvme_path_missing(ctx: Context):
    """Fails:

    ```json
    {"train_batch_size": 8, "zero_optimization": {"stage": 3, "offload_param": {"device": "nvme"}}}
    ```

    Passes:

    ```json
    {"train_batch_size": 8, "zero_optimization": {"stage": 3,
     "offload_param": {"device": "nvme", "nvme_path": "/local_nvme"}}}
    ```
    """
    st = _stage(ctx)
    for which in ("offload_param", "offload_optimizer"):
        if D.offload_device(ctx.doc, which, ctx.consumer) != "nvme":
            continue
        blk = ctx.doc.get(("zero_optimization", which), {})
        p = blk.get("nvme_path") if isinstance(blk, dict) else None
        if p is None or (p == "auto" and ctx.consumer == "deepspeed"):
            if st == 3 or st is None or which == "offload_param":
                yield ctx.report(("zero_optimization", which, "device"), f"{which}.device is nvme but nvme_path is "
                                 "not set (TypeError / AssertionError when ZeRO-3 sets up swapping)",
                                 "add \"nvme_path\": \"/path/to/local/nvme\"")
        elif p == "auto" and ctx.consumer in ("accelerate", "transformers"):
            yield ctx.report(("zero_optimization", which, "nvme_path"), "nvme_path \"auto\" is filled by Accelerate "
                             "with offload_*_nvme_path, default the string \"none\" (a relative directory)",
                             "write the NVMe mount path", severity="warning")


@rule(id="ds-partial-offload-stage", severity="error", family="deepspeed",
      summary="offload_optimizer.ratio < 1 (partial offload) below ZeRO stage 3",
      source="deepspeed/runtime/zero/config.py::DeepSpeedZeroConfig.offload_ratio_check")
def partial_offload(ctx: Context):
    """Fails:

    ```json
    {"train_batch_size": 8, "zero_optimization": {"stage": 2,
     "offload_optimizer": {"device": "cpu", "ratio": 0.3}}}
    ```

    Passes:

    ```json
    {"train_batch_size": 8, "zero_optimization": {"stage": 3,
     "offload_optimizer": {"device": "cpu", "ratio": 0.3}}}
    ```
    """
    r = ctx.doc.get(("zero_optimization", "offload_optimizer", "ratio"))
    x = D.as_float(r) if r != "auto" else None
    st = _stage(ctx)
    if x is not None and x < 1 and st is not None and st != 3:
        yield ctx.report(("zero_optimization", "offload_optimizer", "ratio"), f"partial offload (ratio {r}) is only "
                         f"supported with ZeRO stage 3 (stage is {st}; ValidationError)",
                         "set stage 3 or ratio 1.0")


@rule(id="ds-compute-grad-norm", severity="error", family="deepspeed",
      summary="compute_grad_norm false outside ZeRO 1/2, or with gradient clipping / optimizer offload",
      source="deepspeed/runtime/zero/stage_1_and_2.py::DeepSpeedZeroOptimizer.__init__")
def compute_grad_norm(ctx: Context):
    """Fails:

    ```json
    {"train_batch_size": 8, "optimizer": {"type": "AdamW", "params": {"lr": 0.001, "torch_adam": true}},
     "zero_optimization": {"stage": 2, "compute_grad_norm": false}}
    ```

    Passes:

    ```json
    {"train_batch_size": 8, "gradient_clipping": 0, "optimizer": {"type": "AdamW",
     "params": {"lr": 0.001, "torch_adam": true}}, "zero_optimization": {"stage": 2, "compute_grad_norm": false}}
    ```
    """
    v = ctx.doc.get(("zero_optimization", "compute_grad_norm"))
    if D.as_bool(v) is not False:
        return
    p = ("zero_optimization", "compute_grad_norm")
    st = _stage(ctx)
    if st is None:
        return
    if st not in (1, 2):
        yield ctx.report(p, f"compute_grad_norm false is only supported with ZeRO stage 1 or 2 (stage {st}; "
                         "ValidationError)", "remove it or use stage 1/2")
        return
    gc = ctx.doc.get(("gradient_clipping",), 1.0)
    if gc != "auto" and (D.as_float(gc) or 0) > 0:
        yield ctx.report(p, f"compute_grad_norm false requires gradient_clipping 0 (it is {gc!r}; the default is "
                         "1.0) (ValueError)", "add \"gradient_clipping\": 0")
    if D.offload_device(ctx.doc, "offload_optimizer", ctx.consumer) in ("cpu", "nvme"):
        yield ctx.report(p, "compute_grad_norm false does not support optimizer offload (ValueError)",
                         "remove offload_optimizer or compute_grad_norm")
    if isinstance(ctx.doc.get(("zero_optimization", "zenflow")), dict):
        yield ctx.report(p, "compute_grad_norm false does not support ZenFlow (ValueError)", "remove one of them")


@rule(id="ds-legacy-stage1", severity="error", family="deepspeed",
      summary="zero_optimization.legacy_stage1 true (removed)",
      source=f"{SRC_ENGINE}::_configure_zero_optimizer")
def legacy_stage1(ctx: Context):
    """Fails:

    ```json
    {"train_batch_size": 8, "optimizer": {"type": "AdamW", "params": {"lr": 0.001, "torch_adam": true}},
     "zero_optimization": {"stage": 1, "legacy_stage1": true}}
    ```

    Passes:

    ```json
    {"train_batch_size": 8, "optimizer": {"type": "AdamW", "params": {"lr": 0.001, "torch_adam": true}},
     "zero_optimization": {"stage": 1}}
    ```
    """
    if D.as_bool(ctx.doc.get(("zero_optimization", "legacy_stage1"))) is True:
        yield ctx.report(("zero_optimization", "legacy_stage1"), "legacy_stage1 is not supported in deepspeed >= "
                         "0.5.9 (Exception at initialize)", "remove it")


@rule(id="ds-unmanaged-grad-acc-overlap", severity="error", family="deepspeed",
      summary="managed_gradient_accumulation false with overlap_comm below ZeRO stage 2 (or with DeepCompile)",
      source=f"{SRC_ENGINE}::_do_sanity_check")
def unmanaged_grad_acc(ctx: Context):
    """Fails:

    ```json
    {"train_batch_size": 4, "optimizer": {"type": "AdamW", "params": {"lr": 0.001}},
     "managed_gradient_accumulation": false, "zero_optimization": {"stage": 1, "overlap_comm": true}}
    ```

    Passes:

    ```json
    {"train_batch_size": 4, "optimizer": {"type": "AdamW", "params": {"lr": 0.001}},
     "managed_gradient_accumulation": false, "zero_optimization": {"stage": 2, "overlap_comm": true}}
    ```
    """
    if D.as_bool(ctx.doc.get(("managed_gradient_accumulation",))) is not False:
        return
    st = _stage(ctx)
    oc = ctx.doc.get(("zero_optimization", "overlap_comm"))
    overlap = (st == 3) if oc is None or oc == "auto" else D.as_bool(oc)
    if st is not None and st < 2 and overlap:
        yield ctx.report(("managed_gradient_accumulation",), "managed_gradient_accumulation false supports "
                         f"overlap_comm only with ZeRO stage 2 or 3 (stage {st}; AssertionError)",
                         "remove overlap_comm or use stage 2")
    if D.as_bool(ctx.doc.get(("compile", "deepcompile"))):
        yield ctx.report(("managed_gradient_accumulation",), "managed_gradient_accumulation false is not "
                         "supported with DeepCompile (AssertionError)", "remove one of them")

"""What Accelerate and plain DeepSpeed do with the script's own optimizer under CPU/NVMe optimizer
offload, and the legacy ``bfloat16`` block under Accelerate (family ``deepspeed``). Split from
consumer_rules.py (which has the background) so that a JSON naming neither a cpu/nvme offload nor a
bfloat16 block does not compile them (rules/__init__.py, NEEDS).
"""
from __future__ import annotations

from ..core import Context, rule
from .consumer_rules import _client_optimizer

# Every rule here reports only when the JSON mentions "cpu" (an offload device, the legacy cpu_offload
# key), "nvme" or "bfloat16": rules/__init__.py does not compile the module for any other document.
NEEDS = ("cpu", "nvme", "bfloat16")


@rule(id="ds-legacy-offload-client-optimizer", severity="error", family="deepspeed",
      consumers=("accelerate", "transformers"),
      summary="legacy cpu_offload with the script's optimizer: Accelerate does not swap it, DeepSpeed refuses it",
      source="deepspeed/runtime/engine.py::DeepSpeedEngine._configure_optimizer")
def legacy_offload_client_optimizer(ctx: Context):
    """Accelerate swaps a torch optimizer for DeepSpeedCPUAdam only when
    ``offload_optimizer.device`` asks for offload; the legacy ``cpu_offload: true`` turns the same
    offload on inside DeepSpeed without that swap, and DeepSpeed raises ZeRORuntimeException
    ("ZeRO-Offload with a client provided optimizer"). The Trainer, without an optimizer block,
    passes its own AdamW the same way.

    Oracle: consumer=accelerate

    Fails:

    ```json
    {"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 2, "cpu_offload": true}}
    ```

    Passes:

    ```json
    {"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}}}
    ```
    """
    if not _client_optimizer(ctx):
        return
    z = ctx.doc.get(("zero_optimization",))
    if not isinstance(z, dict) or not z.get("cpu_offload") or z.get("cpu_offload") == "auto":
        return
    from .. import consumer_model as M  # compiled only for a legacy cpu_offload (start time, bench_validator.py)
    if M.client_optimizer_refused(ctx.doc.data):
        yield ctx.report(("zero_optimization", "cpu_offload"), "legacy 'cpu_offload' turns on optimizer offload, but "
                         f"{ctx.consumer} swaps the script's torch optimizer for DeepSpeedCPUAdam only when "
                         "offload_optimizer.device is set, so DeepSpeed refuses the client optimizer "
                         "(ZeRORuntimeException)", "replace it with \"offload_optimizer\": {\"device\": \"cpu\"}")


@rule(id="ds-offload-client-optimizer", severity="warning", family="deepspeed", consumers=("deepspeed",),
      summary="optimizer offload without an 'optimizer' block: deepspeed.initialize refuses a torch optimizer "
              "from the script",
      source="deepspeed/runtime/engine.py::DeepSpeedEngine._configure_optimizer")
def offload_client_optimizer(ctx: Context):
    """With no ``optimizer`` block the script must hand its own optimizer to
    ``deepspeed.initialize``. When ``offload_optimizer.device`` is cpu or nvme (or the legacy
    ``cpu_offload: true``) the engine is on its CPU-optimizer path
    (``DeepSpeedEngine.zero_use_cpu_optimizer``, the device alone decides) and, unless
    ``zero_force_ds_cpu_optimizer`` is false, ``_configure_optimizer`` raises ZeRORuntimeException
    ("ZeRO-Offload with a client provided optimizer") for anything but ``DeepSpeedCPUAdam`` /
    ``DeepSpeedCPULion`` - a ``torch.optim.AdamW`` fails at every stage 1-3. A warning, since a
    static check cannot see which optimizer the script passes. Plain DeepSpeed only: Accelerate
    (and the Trainer through it) swaps torch Adam/AdamW for ``DeepSpeedCPUAdam`` first
    (``accelerator.py::Accelerator._prepare_deepspeed``); the legacy key there is
    ds-legacy-offload-client-optimizer, stage 0 is ds-offload-ignored.

    Fails:

    ```json
    {"train_batch_size": 8, "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}}}
    ```

    Passes:

    ```json
    {"train_batch_size": 8, "optimizer": {"type": "AdamW", "params": {"lr": 0.001}},
     "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}}}
    ```

    Effect: cfg.optimizer_name is None and cfg.zero_force_ds_cpu_optimizer and cfg.zero_config.offload_optimizer.device == "cpu"
    """
    from .. import ds_values as D
    if not _client_optimizer(ctx) or not ctx.doc.get(("zero_force_ds_cpu_optimizer",), True):
        return
    st = D.zero_stage(ctx.doc, ctx.consumer)
    dev = D.offload_device(ctx.doc, "offload_optimizer", ctx.consumer)
    if st not in (1, 2, 3) or dev not in ("cpu", "nvme"):
        return
    z = ctx.doc.get(("zero_optimization",))
    p = ("zero_optimization", "offload_optimizer", "device") if isinstance(z.get("offload_optimizer"), dict) \
        else ("zero_optimization", "cpu_offload")
    yield ctx.report(p, f"optimizer offload ({dev}) with no 'optimizer' block: the script's own optimizer goes "
                     "to deepspeed.initialize, which refuses anything but DeepSpeedCPUAdam/DeepSpeedCPULion "
                     "(ZeRORuntimeException: ZeRO-Offload with a client provided optimizer)",
                     "add an 'optimizer' block, pass deepspeed.ops.adam.DeepSpeedCPUAdam from the script, or set "
                     "\"zero_force_ds_cpu_optimizer\": false to keep a torch optimizer (it then steps on the CPU)")


@rule(id="ds-bfloat16-block-ignored", severity="warning", family="deepspeed",
      consumers=("accelerate", "transformers"),
      summary="legacy 'bfloat16' block: Accelerate adds a 'bf16' block, which DeepSpeed reads instead",
      source="accelerate/utils/dataclasses.py::DeepSpeedPlugin.set_mixed_precision")
def bfloat16_block_ignored(ctx: Context):
    """DeepSpeed still reads the old block name ``bfloat16`` when there is no ``bf16`` block
    (deepspeed/runtime/precision_config.py::get_bfloat16_config). Accelerate's
    ``set_mixed_precision`` always adds ``"bf16": {"enabled": ...}`` when ``bf16`` is absent -
    enabled only when the launch (or the Trainer's ``--bf16``) asks for bf16 - so the
    ``bfloat16`` block, and its ``enabled: true``, are ignored.

    Oracle: consumer=accelerate

    Fails:

    ```json
    {"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 2}, "bfloat16": {"enabled": true}}
    ```

    Passes:

    ```json
    {"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 2}, "bf16": {"enabled": true}}
    ```

    Effect: cfg.bfloat16_config.enabled is False
    """
    d = ctx.doc.data
    if isinstance(d, dict) and "bf16" not in d and isinstance(d.get("bfloat16"), dict):
        yield ctx.report(("bfloat16",), f"the legacy 'bfloat16' block is ignored under {ctx.consumer}: it adds "
                         "a 'bf16' block (enabled only when launched with mixed precision bf16), which DeepSpeed "
                         "reads first", "rename the block to \"bf16\"")

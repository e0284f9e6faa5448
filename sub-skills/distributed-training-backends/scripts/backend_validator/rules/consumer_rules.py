"""What Accelerate (and the Trainer, which uses Accelerate's plugin) does with the script's own
optimizer when the DeepSpeed JSON has no ``optimizer`` block (family ``deepspeed``).

``Accelerator._prepare_deepspeed`` looks only at the new-style key
``zero_optimization.offload_optimizer.device``: when it is not "none" (and
``zero_force_ds_cpu_optimizer`` is not false) it swaps the torch optimizer for
DeepSpeedCPUAdam. DeepSpeed itself also reads the legacy ``cpu_offload`` flag. The model
of both is backend_validator/consumer_model.py::client_optimizer_refused, checked against the
real objects in tests/validator_ds/test_consumer_model.py. Plain ``deepspeed.initialize`` gets the
script's optimizer unswapped (ds-offload-client-optimizer; tests/validator_ds/test_offload_client_optimizer.py).
The rules for CPU/NVMe offload and the legacy bfloat16 block are in consumer_offload_rules.py (compiled
only for a JSON that mentions cpu, nvme or bfloat16); offload_optimizer null stays here.
"""
from __future__ import annotations

from ..core import Context, rule

# consumer_model and the DeepSpeed tables are imported inside the rules that use them. The Accelerate
# config rule that runs ds-offload-ignored on the ZeRO block the plugin builds
# (acc-ds-offload-ignored-by-stage) is in accelerate_deepspeed.py.

SRC_PREPARE = "accelerate/accelerator.py::Accelerator._prepare_deepspeed"


def _client_optimizer(ctx: Context) -> bool:
    """The script hands over its own optimizer: the JSON has no optimizer block."""
    return isinstance(ctx.doc.data, dict) and "optimizer" not in ctx.doc.data


@rule(id="ds-offload-optimizer-null", severity="error", family="deepspeed",
      consumers=("accelerate", "transformers"),
      summary="offload_optimizer: null with the script's optimizer crashes Accelerate's prepare()",
      source=SRC_PREPARE)
def offload_optimizer_null(ctx: Context):
    """DeepSpeed treats ``"offload_optimizer": null`` as absent, but ``Accelerator._prepare_deepspeed``
    reads ``zero_optimization.get("offload_optimizer", {}).get("device", ...)`` when the script passes
    its own optimizer, and ``None.get`` raises AttributeError.

    Oracle: consumer=accelerate

    Fails:

    ```json
    {"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 2, "offload_optimizer": null}}
    ```

    Passes:

    ```json
    {"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "none"}}}
    ```
    """
    if not _client_optimizer(ctx):
        return
    z = ctx.doc.get(("zero_optimization",))
    if isinstance(z, dict) and "offload_optimizer" in z and z["offload_optimizer"] is None:
        yield ctx.report(("zero_optimization", "offload_optimizer"), "'offload_optimizer' is null: with the script's "
                         "own optimizer, accelerator.prepare() calls .get on it and raises AttributeError",
                         "remove the key or write {\"device\": \"none\"}")

"""DeepSpeed JSON rule: tensor_parallel.autotp_size against the world size (family ``deepspeed``,
deepspeed 0.19.8; the docstring convention is in _ds.py). Split from deepspeed_batch.py (and imported
right after it, so rules and skip notes keep their order) so that a JSON without a tensor_parallel block
does not compile it (rules/__init__.py, NEEDS).
"""
from __future__ import annotations

from .. import ds_values as D
from ..core import Context, rule

# The rule reports (or notes a skipped check) only when tensor_parallel.autotp_size is set.
NEEDS = ("tensor_parallel",)


@rule(id="ds-parallel-size-world", severity="error", family="deepspeed",
      summary="tensor_parallel.autotp_size does not divide --world-size",
      source="deepspeed/utils/groups.py::_ensure_divisibility")
def parallel_size_world(ctx: Context):
    """Checked only when ``--world-size`` is given.

    Oracle: world_size=1

    Fails:

    ```json
    {"train_batch_size": 8, "tensor_parallel": {"autotp_size": 2}}
    ```

    Passes:

    ```json
    {"train_batch_size": 8, "tensor_parallel": {"autotp_size": 1}}
    ```
    """
    W = ctx.options.world_size
    if not W:
        v = ctx.doc.get(("tensor_parallel", "autotp_size"))
        if v not in (None, "auto") and (D.as_int(v) or 0) > 1:
            ctx.skip("tensor_parallel.autotp_size not checked against the world size: the world size is unknown",
                     "--world-size N")
        return
    for path in (("tensor_parallel", "autotp_size"),):
        v = D.as_int(ctx.doc.get(path)) if ctx.doc.get(path) not in (None, "auto") else None
        if v is not None and v > 1 and W % v != 0:
            yield ctx.report(path, f"'{'.'.join(path)}' {v} does not divide the world size {W} (AssertionError "
                             "when deepspeed creates the process groups)", f"use a divisor of {W}")

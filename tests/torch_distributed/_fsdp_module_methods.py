"""Generator for the method table of sub-skills/torch-distributed/references/fsdp2-module-methods.md.

Every public method defined on torch.distributed.fsdp.FSDPModule in the installed torch (2.13.0),
with its signature read by inspect; the one-line description and the default state are ours, written
from the method bodies in torch/distributed/fsdp/_fully_shard/_fully_shard.py and the attributes they
set (_fsdp_param_group.py, _fsdp_state.py). A method that torch adds or removes makes generate() fail
until the description table below is brought in line.

python tests/torch_distributed/_fsdp_module_methods.py     print the generated block
"""
from __future__ import annotations

import inspect
import re

# name -> (group, state before any call, what it does). Groups order the rows.
DESCRIBE = {
    # gradients: when and what is reduced
    "set_requires_gradient_sync": ("gradients", "`True`",
        "`False` skips the reduce-scatter (and HSDP all-reduce) in post-backward and keeps unsharded gradients "
        "to accumulate: the FSDP2 `no_sync`; set `True` again before the last micro-batch"),
    "set_requires_all_reduce": ("gradients", "`True`",
        "HSDP only: `False` keeps the reduce-scatter but skips the all-reduce across replicas (accumulate, then "
        "all-reduce once)"),
    "set_reduce_scatter_unused_params": ("gradients", "`False`",
        "`True`: a parameter that requires grad but got no gradient on this rank joins the reduce-scatter as "
        "zeros, so every rank reduces the same tensors (conditional compute, MoE); the FSDP2 counterpart of "
        "DDP's `find_unused_parameters`, see [below](#parameters-used-on-some-ranks-only)"),
    "set_is_last_backward": ("gradients", "`True`",
        "root state: on the last backward FSDP waits for pending reductions and clears prefetch state; set "
        "`False` for micro-batches whose reduction may stay in flight"),
    "set_gradient_divide_factor": ("gradients", "unset (divide by the data-parallel size)",
        "divide the reduced gradient by this factor instead"),
    "set_reduce_scatter_divide_factor": ("gradients", "unset",
        "deprecated alias of `set_gradient_divide_factor`"),
    "set_force_sum_reduction_for_comms": ("gradients", "`False`",
        "`True`: collectives use only `SUM` and FSDP scales before or after (for zero-copy transports)"),
    "set_all_reduce_hook": ("gradients", "none",
        "a function called on the reduce-scatter output (FSDP) or the all-reduce output (HSDP), e.g. your own "
        "all-reduce over another mesh dimension"),
    # parameters: when they are gathered and freed
    "unshard": ("parameters", "—",
        "all-gather this module's parameters now (not recursive); `async_op=True` returns a handle whose "
        "`wait()` you may call, else the pre-forward waits"),
    "reshard": ("parameters", "—",
        "free this module's unsharded parameters and register the shards again (not recursive)"),
    "set_reshard_after_forward": ("parameters", "the `fully_shard(reshard_after_forward=...)` value",
        "change that argument at run time, e.g. `True` on the root (which defaults to `False`) or `False` for "
        "evaluation"),
    "set_reshard_after_backward": ("parameters", "`True`",
        "`False` keeps parameters gathered after backward (more memory, no re-gather before the next forward "
        "during accumulation)"),
    "set_unshard_in_backward": ("parameters", "`True`",
        "`False` when no parameter of the group is needed to compute gradients (an embedding): backward skips "
        "the all-gather"),
    "set_modules_to_forward_prefetch": ("parameters", "the next module in forward order",
        "FSDP modules whose all-gather this module issues right after its own in forward"),
    "set_modules_to_backward_prefetch": ("parameters", "the previous module (reverse post-forward order)",
        "FSDP modules whose all-gather this module issues in backward"),
    "set_post_optim_event": ("parameters", "the root waits on the current stream",
        "root: an event recorded after `optimizer.step()` for the next all-gather to wait on; give a new one "
        "every iteration"),
    # communication plumbing
    "set_custom_all_gather": ("communication", "the built-in all-gather",
        "replace the all-gather implementation (an `AllGather` object)"),
    "set_custom_reduce_scatter": ("communication", "the built-in reduce-scatter",
        "replace the reduce-scatter implementation (a `ReduceScatter` object)"),
    "set_allocate_memory_from_process_group_for_comm": ("communication", "`False`",
        "`True`: staging buffers come from the process group's allocator (NCCL zero-copy); not with the two "
        "custom setters"),
    "set_symm_mem_for_comm": ("communication", "off",
        "allocate all-gather staging buffers from symmetric memory (NCCL only)"),
    "set_reduce_scatter_max_input_buffers": ("communication", "`1`",
        "experimental: how many reduce-scatter input buffers may be in flight (more overlap, more memory)"),
    "set_separate_reduce_scatter_group": ("communication", "off (one group for both)",
        "experimental: reduce-scatter on its own process group so it overlaps with all-gather; call on every "
        "rank"),
    # recovery
    "reset_iter_state": ("recovery", "—",
        "root: after an exception in forward or backward, wait for in-flight collectives, reshard and clear "
        "the iteration state so the next step can run; that step's gradients are lost"),
}
GROUPS = ["gradients", "parameters", "communication", "recovery"]


def signature(fn) -> str:
    """The installed signature without `self`, annotations as written in the source, `|` escaped for
    the Markdown table; the return annotation only where it is not None."""
    sig = inspect.signature(fn)
    parts, star = [], False
    for p in list(sig.parameters.values())[1:]:
        if p.kind is p.KEYWORD_ONLY and not star:
            parts.append("*")
            star = True
        text = p.name
        if p.annotation is not p.empty:
            text += f": {p.annotation}"
        if p.default is not p.empty:
            text += f" = {p.default!r}"
        parts.append(text)
    out = "(" + ", ".join(parts) + ")"
    ret = sig.return_annotation
    if ret not in (sig.empty, "None", None):
        out += f" -> {ret}"
    return out.replace("|", "\\|")


def methods():
    from torch.distributed.fsdp import FSDPModule
    return {n: v for n, v in vars(FSDPModule).items() if not n.startswith("_") and callable(v)}


def generate() -> str:
    found = methods()
    missing, stale = sorted(set(found) - set(DESCRIBE)), sorted(set(DESCRIBE) - set(found))
    if missing or stale:
        raise SystemExit(f"FSDPModule methods not described: {missing}; described but gone: {stale}")
    rows = ["| Method | Arguments (torch 2.13.0) | Before any call | What it does |", "| --- | --- | --- | --- |"]
    for group in GROUPS:
        rows.append(f"| **{group}** | | | |")
        for name in sorted(n for n, d in DESCRIBE.items() if d[0] == group):
            _, state, text = DESCRIBE[name]
            rows.append(f"| `{name}` | `{signature(found[name])}` | {state} | {text} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    print(generate())

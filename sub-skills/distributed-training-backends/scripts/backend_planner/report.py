"""The text report: one table row per candidate, the recommendation, DeepSpeed's estimates and
the assumptions."""
from __future__ import annotations

from .common import GIB

def gib(x):
    return "{:.1f}".format(x / GIB)


def text_report(result) -> str:
    inp = result["inputs"]
    lines = ["model: {:,} parameters ({:,} trainable), largest layer {:,}; {} x {} GPUs; {} {}; seq {} x micro-batch {}{}"
             .format(inp["params"], inp["trainable_params"], inp["largest_layer_params"], inp["nodes"],
                     inp["gpus_per_node"], inp["precision"], inp["optimizer"], inp["seq_len"], inp["micro_batch"],
                     (", activation checkpointing" if inp["activation_checkpointing"] else "")
                     + (", gradient accumulation {} (grads: the peak over micro-steps)".format(
                         inp["gradient_accumulation"]) if inp["gradient_accumulation"] > 1 else "")),
             "GiB per GPU: params, grads, master, optim, gathered, activ(+work), buffers, overhead -> total "
             "(limit {}); host GiB/node; comm GB/step per GPU".format(gib(inp["gpu_memory"])), ""]
    head = "{:>2}  {:<19} {:<22} {:>6} {:>6} {:>6} {:>6} {:>6} {:>11} {:>6} {:>6} {:>7} {:>7} {:>6}  {}".format(
        "#", "strategy", "offload", "param", "grad", "mastr", "optim", "gathr", "activ(+wk)", "buf", "ovh",
        "TOTAL", "host", "comm", "fits")
    lines += [head, "-" * len(head)]
    for c in result["candidates"]:
        g = c["per_gpu_bytes"]
        off = c["offload"] if c["offload_device"] in ("none", "cpu") else c["offload"] + "@nvme"
        lines.append("{:>2}  {:<19} {:<22} {:>6} {:>6} {:>6} {:>6} {:>6} {:>11} {:>6} {:>6} {:>7} {:>7} {:>6}  {}".format(
            c["rank"], c["strategy"], off, gib(g["parameters"]), gib(g["gradients"]), gib(g["master_weights"]),
            gib(g["optimizer_states"]), gib(g["gathered_params"]),
            gib(g["activations"]) + "+" + gib(g["activation_workspace"]), gib(g["communication_buffers"]),
            gib(g["allocator_overhead"]), gib(g["total"]), gib(c["host_bytes_per_node"]),
            "{:.1f}".format(c["comm_bytes_per_gpu"] / 1e9), "yes" if c["fits"] else "no"))
    rec = result["recommended"]
    lines += ["", "recommended: {} (offload {}): {}".format(rec["strategy"], rec["offload"], rec["why"])]
    for c in result["candidates"]:
        if "deepspeed_estimate" in c and c["offload_device"] != "nvme":
            d = c["deepspeed_estimate"]
            lines.append("  deepspeed {} for {}/{}: GPU {} GiB, CPU {} GiB (model states only; ours above)".format(
                d["function"], c["strategy"], c["offload"], gib(d["gpu_bytes"]), gib(d["cpu_bytes"])))
    lines += ["assumptions:"] + ["  - " + a for a in result["assumptions"]]
    return "\n".join(lines) + "\n"

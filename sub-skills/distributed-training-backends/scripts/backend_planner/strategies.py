"""Strategies and ranking: the candidate list, the order of preference and plan(), which builds
every candidate for the inputs and ranks them (least sharding that fits first)."""
from __future__ import annotations

from .common import GIB, InputError, bundle_version
from .memory import ACT_SAVED, OPTIMIZERS, activation_bytes, autocast_extra_bytes, candidate
from .shapes import arch_from_config, infer_arch

# (strategy, offload, offload_device, sharding level for the ranking)
CANDIDATES = [
    ("ddp", "none", "none", 0),
    ("zero1", "none", "none", 1),
    ("zero2", "none", "none", 2),
    ("fsdp-shard-grad-op", "none", "none", 2),
    ("fsdp-hybrid-shard", "none", "none", 3),
    ("hsdp", "none", "none", 3),
    ("fsdp2", "none", "none", 4),
    ("fsdp-full-shard", "none", "none", 4),
    ("zero3", "none", "none", 4),
    ("zero1", "optimizer", "cpu", 5),
    ("zero2", "optimizer", "cpu", 5),
    ("zero3", "optimizer", "cpu", 6),
    ("fsdp2", "optimizer+params", "cpu", 7),
    ("zero3", "optimizer+params", "cpu", 7),
    ("zero3", "optimizer+params", "nvme", 8),
]
# Same sharding level: prefer the native / simpler backend (FSDP2 before DeepSpeed before FSDP1).
BACKEND_PREF = {"ddp": 0, "fsdp2": 0, "hsdp": 1, "zero1": 2, "zero2": 2, "zero3": 2,
                "fsdp-shard-grad-op": 3, "fsdp-hybrid-shard": 4, "fsdp-full-shard": 3}



def plan(args):
    # ---- model
    if args.model_config:
        arch = arch_from_config(args.model_config)
        params = arch.total_params() if args.params is None else args.params
    else:
        params = args.params
        arch = infer_arch(params, args)
    trainable = max(1, int(round(params * args.trainable_fraction)))
    largest = args.largest_layer_params or (arch.largest_layer_params() if (args.model_config or not arch.assumed)
                                            else None)
    assumed_largest = largest is None
    if largest is None:
        largest = arch.largest_layer_params()
    if largest > params:
        raise InputError(f"the largest layer ({largest} parameters, --largest-layer-params or the config) "
                         f"is larger than the model ({params} parameters)")
    unit = max(arch.block_params(), arch.root_params()) if (args.model_config or not arch.assumed) else largest
    unit = min(max(unit, largest), params)

    G, M = args.gpus_per_node, args.nodes
    N = G * M
    prec = args.precision
    w = 4 if prec == "fp32" else 2
    opt = args.optimizer
    if OPTIMIZERS[opt] is None:
        scale = params / max(1, arch.total_params())
        s_bytes = 4.0 * arch.adafactor_state_elems() * scale / params
    else:
        s_bytes = OPTIMIZERS[opt]
    opt_total = int(round(s_bytes * trainable))
    act_saved, act_work = activation_bytes(arch, args.seq_len, args.micro_batch, w, args.activation_checkpointing)
    ddp_autocast = (autocast_extra_bytes(arch, args.seq_len, args.micro_batch, args.activation_checkpointing)
                    if prec in ("bf16", "fp16", "fp8") else (0, 0))
    fp8_extra = params if prec == "fp8" else 0          # fp8 weight copies (assumption)

    assumptions = [
        "GPU allocator overhead: {:.0%} of the tensors plus {:.2f} GiB per GPU for the CUDA context and "
        "library workspaces (--overhead-fraction, --reserve); not measured here".format(
            args.overhead_fraction, args.reserve / GIB),
        "DDP: Accelerate's mixed precision is autocast, so weights, gradients and DDP's gradient buckets stay fp32; "
        "its activations add each linear's 16-bit weight copy and the fp32 residual stream's extra bytes",
        "activations: flash/memory-efficient attention (no seq x seq matrix saved), no tensor/sequence parallelism",
        "activations: measured on CPU, checked on one H100 (memory-planning.md, GPU run): within 2% for a "
        "Llama shape under DDP; Python activations under CUDA autocast (gelu_new's fp32 pow) keep more "
        "than planned (GPT-2 DDP 1.2-1.3x): leave headroom there",
    ]
    if arch.act not in ACT_SAVED:
        assumptions.append(f"activation {arch.act!r} not measured: planned like a fused kernel (keeps its input only)")
    if arch.assumed:
        assumptions.append("architecture inferred from the parameter count (Llama-shaped, hidden {}, {} layers); "
                           "pass --model-config or --hidden-size/--num-layers for exact activations".format(
                               arch.hidden, arch.layers))
    if assumed_largest:
        assumptions.append(f"largest layer assumed {largest} parameters (vocab x hidden of the inferred shape); "
                           "pass --largest-layer-params")
    if prec == "fp8":
        assumptions.append("fp8: planned as bf16 plus one byte per parameter for fp8 weight copies; "
                           "activations as bf16 (not measured: no GPU)")
    if opt == "adafactor":
        assumptions.append("adafactor: transformers defaults (no first moment, factored second moment)")

    cands = []
    for strategy, offload, device, level in CANDIDATES:
        if strategy in ("fsdp-hybrid-shard", "hsdp") and M == 1:
            level = 4                        # one node: the same as full sharding, no cheaper traffic
        c = candidate(strategy, offload, device, level, params=params, trainable=trainable, largest=largest,
                      unit=unit, G=G, M=M, N=N, w=w, opt_total=opt_total, s_bytes=s_bytes,
                      act_saved=act_saved, act_work=act_work, fp8_extra=fp8_extra, args=args,
                      autocast_extra=ddp_autocast)
        cands.append(c)

    order = sorted(cands, key=lambda c: (not c["fits"], c["_level"], BACKEND_PREF[c["strategy"]],
                                         c["per_gpu_bytes"]["total"]))
    for i, c in enumerate(order, 1):
        c["rank"] = i
    rec = order[0]
    if rec["fits"]:
        less = [c for c in cands if c["_level"] < rec["_level"]]
        rec["why"] += "; ranked first: the least sharding that fits" + (
            " (every less sharded option is over the limit)" if less else "") + \
            ", so the least communication and the simplest setup"
    else:
        best = min(cands, key=lambda c: c["per_gpu_bytes"]["total"])
        rec = best
        rec["why"] += ("; nothing fits: this needs the least GPU memory; lower --micro-batch, enable "
                       "--activation-checkpointing or add GPUs")
    for c in cands:
        c.pop("_level")
    cands.sort(key=lambda c: c["rank"])
    return {
        "planner_version": bundle_version(),
        "inputs": {"params": params, "trainable_params": trainable, "largest_layer_params": largest,
                   "fsdp_unit_params": unit, "seq_len": args.seq_len, "micro_batch": args.micro_batch,
                   "gradient_accumulation": args.gradient_accumulation,
                   "precision": prec, "optimizer": opt, "optimizer_state_bytes_per_param": s_bytes,
                   "activation_checkpointing": args.activation_checkpointing, "gpus_per_node": G,
                   "nodes": M, "gpu_memory": args.gpu_memory, "host_memory": args.host_memory},
        "model": arch.as_dict(),
        "candidates": cands,
        "recommended": rec,
        "assumptions": assumptions,
    }

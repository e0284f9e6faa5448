"""The memory model: optimizer-state bytes, activations, DeepSpeed's own estimators and the
per-GPU, host and communication bytes of one candidate (strategy + offload).
The arithmetic is explained in ../../references/memory-planning.md."""
from __future__ import annotations

import math

from .common import GIB, ceil_div
from .shapes import Arch

# Optimizer state bytes per trainable parameter (fp32 states unless named otherwise).
OPTIMIZERS = {
    "adamw": 8.0, "adam": 8.0,             # exp_avg + exp_avg_sq, fp32
    "adam8bit": 2.0 + 8.0 / 2048, "adamw8bit": 2.0 + 8.0 / 2048,  # two uint8 states + fp32 absmax per 2048-block
    "lion": 4.0,                           # one fp32 momentum
    "sgd": 0.0,                            # no momentum: no state
    "sgd-momentum": 4.0,                   # momentum_buffer, fp32
    "adagrad": 4.0,                        # sum, fp32
    "adafactor": None,                     # factored: computed from the matrix shapes
}

DS_REDUCE_BUCKET = 500_000_000          # deepspeed zero_optimization.reduce_bucket_size default (elements)
DS_NVME_BUFFERS = 5 * 100_000_000       # offload_param buffer_count 5 x buffer_size 1e8 (elements)


# ----------------------------------------------------------------------------- activations

# What a transformers activation (ACT2FN name) saves for backward, in elements of the working dtype per
# element of its input, input included (saved_tensors_hooks on transformers 5.25.0's classes): the
# fused kernels keep their input only; the Python formulas keep their intermediates too.
ACT_SAVED = {"gelu": 1, "gelu_pytorch_tanh": 1, "silu": 1, "swish": 1, "relu": 1, "gelu_new": 4,
             "gelu_fast": 7, "quick_gelu": 2, "gelu_python": 3}


def activation_bytes(arch: Arch, seq: int, mbs: int, w: int, checkpointing: bool):
    """(bytes autograd keeps at the end of forward, extra bytes during backward) for one micro-batch.

    Per token and layer (references/memory-planning.md, measured by tests/planner/test_activations.py):
    Llama family: each of 2 RMSNorms keeps its fp32 input (4h), fp32 rstd (4), normalised value
    and output in the working dtype (2wh); attention keeps q, k, v after RoPE, its output and an
    fp32 logsumexp per head (w*(2qd + 2kv) + 4a; flash/memory-efficient SDPA, no s x s matrix);
    SwiGLU keeps gate, up, silu(gate) and their product (4wf).
    GPT-2: each of 2 LayerNorms keeps input, output (2wh) and fp32 mean+rstd (8); fused qkv (3wh),
    attention output (wh), logsumexp (4a); GELU MLP keeps its input and output (2wf).
    """
    t = seq * mbs
    h, f, a = arch.hidden, arch.ffn, arch.heads
    kv = arch.kv_heads * arch.head_dim
    qd = arch.heads * arch.head_dim
    act_extra = (ACT_SAVED.get(arch.act, 1) - 1) * w * f     # a Python-formula activation's intermediates
    if arch.family == "gpt2":
        per_tok = 2 * (2 * w * h + 8) + w * (3 * h + h) + 4 * a + w * 2 * f + act_extra
        per_tok += 2 * h if arch.resid_dropout > 0 else 0   # two residual dropouts: a bool mask each
        final = t * (2 * w * h + 8) + seq * 8               # ln_f; position ids
        final += t * h if arch.embd_dropout > 0 else 0      # embedding dropout mask
    else:
        per_tok = 2 * (4 * h + 4 + 2 * w * h) + w * (2 * qd + 2 * kv + 4 * f) + 4 * a + act_extra
        final = t * (4 * h + 4 + 2 * w * h) + 2 * seq * arch.head_dim * w   # final norm; RoPE cos and sin
    per_layer = t * per_tok
    final += t * arch.vocab * 4 + 2 * t * 8 + 4             # fp32 log_softmax output, targets, input ids, loss
    if checkpointing:
        saved = arch.layers * t * w * h + final             # each checkpoint keeps only its layer input
        workspace = per_layer                               # one layer recomputed during backward
    else:
        saved = arch.layers * per_layer + final
        workspace = 0
    workspace += t * arch.vocab * 4                         # gradient of the fp32 logits
    return saved, workspace


# Under autocast with fp32 weights (Accelerate's DDP mixed precision) the residual stream stays fp32,
# so some tensors the bf16-weight formula counts at w bytes are saved in fp32: per token, per layer,
# and once for the final norm (h-bytes; measured by tests/planner/test_activations.py on the same
# decoders under CPU autocast, and checked against one H100 run: memory-planning.md).
AUTOCAST_FP32_EXTRA = {"gpt2": (4, 2), "llama": (10, 2)}


def autocast_extra_bytes(arch: Arch, seq: int, mbs: int, checkpointing: bool):
    """(saved, workspace) bytes that autocast over fp32 weights adds to activation_bytes(w=2).

    Every linear saves the 16-bit copy of its weight that autocast made (2 bytes per matmul
    parameter; embedding lookups are not cast, a tied head is). With per-layer checkpointing the
    layers keep only their fp32 input (2 more bytes per hidden unit than a 16-bit one), only the
    head's copy stays saved, and one recomputed layer's copies and fp32 extras are workspace."""
    t = seq * mbs
    h = arch.hidden
    per_layer_h, final_h = AUTOCAST_FP32_EXTRA["gpt2" if arch.family == "gpt2" else "llama"]
    matmul = {name: sum(math.prod(s) for s in shapes if len(s) == 2) * n
              for name, shapes, n in arch.modules() if name not in ("embed_tokens", "wpe")}
    head = arch.vocab * h                                # lm_head, or the tied wte used as the head
    matmul_params = sum(matmul.values())
    layer_params = sum(v for k, v in matmul.items() if k not in ("wte", "lm_head")) // max(arch.layers, 1)
    if checkpointing:
        saved = 2 * head + t * h * (2 * arch.layers + final_h)
        workspace = 2 * layer_params + t * h * per_layer_h
    else:
        saved = 2 * matmul_params + t * h * (per_layer_h * arch.layers + final_h)
        workspace = 0
    return saved, workspace


# ----------------------------------------------------------------------------- deepspeed estimators

def ds_zero2_estimate(total_params, num_gpus_per_node=1, num_nodes=1, cpu_offload=True, additional_buffer_factor=1.5):
    """Same arithmetic as deepspeed/runtime/zero/stage_1_and_2.py::estimate_zero2_model_states_mem_needs."""
    total_gpus = num_nodes * num_gpus_per_node
    if cpu_offload:
        gpu_mem = 2 * total_params
        cpu_mem = total_params * max(4 * total_gpus, 16) * additional_buffer_factor
    else:
        gpu_mem = 2 * total_params + int(18 * total_params / total_gpus)
        cpu_mem = total_params * 4 * num_gpus_per_node * additional_buffer_factor
    return int(cpu_mem), int(gpu_mem)


def ds_zero3_estimate(total_params, largest_layer_params, num_gpus_per_node=1, num_nodes=1, cpu_offload=True,
                      cpu_offload_params=True, zero_init=True, additional_buffer_factor=1.5):
    """Same arithmetic as deepspeed/runtime/zero/stage3.py::estimate_zero3_model_states_mem_needs."""
    total_gpus = num_nodes * num_gpus_per_node
    gpus_factor = 1 / num_nodes
    largest_layer_memory = 4 * largest_layer_params
    if cpu_offload:
        if cpu_offload_params:
            gpu_mem = largest_layer_memory
            if zero_init:
                cpu_mem = total_params * 18 * gpus_factor * additional_buffer_factor
            else:
                cpu_mem = total_params * max(4 * num_gpus_per_node, 18 * gpus_factor) * additional_buffer_factor
        else:
            gpu_mem = largest_layer_memory + int(2 * total_params / total_gpus)
            if zero_init:
                cpu_mem = total_params * 16 * gpus_factor * additional_buffer_factor
            else:
                cpu_mem = total_params * max(4 * num_gpus_per_node, 16 * gpus_factor) * additional_buffer_factor
    else:
        gpu_mem = largest_layer_memory + int(18 * total_params / total_gpus)
        if zero_init:
            cpu_mem = largest_layer_params * 4 * num_gpus_per_node * additional_buffer_factor
        else:
            cpu_mem = total_params * 4 * num_gpus_per_node * additional_buffer_factor
    return int(cpu_mem), int(gpu_mem), largest_layer_memory



# ----------------------------------------------------------------------------- gradient accumulation

def grads_between_boundaries(strategy, offload, *, T, N, w, largest, at_boundary):
    """Gradient bytes per GPU at the end of a micro-step that is not an accumulation boundary
    (measured by tests/planner/test_gradient_accumulation.py; references/memory-planning.md).

    DDP keeps its fp32 .grad (4T) with or without no_sync. ZeRO-1 reduces only at the boundary,
    so it holds the whole 16-bit gradient (w*T), offloaded or not. ZeRO-2 keeps the whole gradient
    of every parameter that overlaps its partition (the partition plus at most the two parameters
    straddling its edges: w*(T/N + 2K), K the largest module, at most w*T). ZeRO-3 keeps its
    partition (w*T/N). FSDP1 under no_sync and FSDP2 under set_requires_gradient_sync(False), with
    Accelerate's policy (reduce dtype = parameter dtype), accumulate unsharded gradients: w*T.
    Not measured, kept as at the boundary: ZeRO-2 with optimizer offload.
    """
    if strategy == "ddp":
        return 4 * T
    if strategy == "zero1":
        return w * T
    if strategy == "zero2":
        return at_boundary if offload != "none" else w * min(T, ceil_div(T, N) + 2 * min(largest, T))
    if strategy == "zero3":
        return ceil_div(w * T, N)
    return w * T                     # FSDP1 (full, grad-op, hybrid), FSDP2, HSDP; also with CPU offload


# ----------------------------------------------------------------------------- one candidate

def candidate(strategy, offload, device, level, *, params, trainable, largest, unit, G, M, N, w,
              opt_total, s_bytes, act_saved, act_work, fp8_extra, args, autocast_extra=(0, 0)):
    P, T = params, trainable
    gpu = dict(parameters=0, gradients=0, master_weights=0, optimizer_states=0, gathered_params=0)
    host = 0
    nvme = 0
    comm = 0.0
    internode = 0.0
    pcie = 0
    buffers = 0
    why = ""
    ring = lambda n: (n - 1) / n if n > 1 else 0.0  # noqa: E731
    shard = lambda x, n=N: ceil_div(x, n)  # noqa: E731
    opt_shard = ceil_div(opt_total, N)
    ga = args.gradient_accumulation
    load_peak = G * w * P                    # every process loads its own copy into CPU RAM
    if strategy == "ddp":
        gpu.update(parameters=4 * P, gradients=4 * T, optimizer_states=opt_total)
        buffers = 4 * T                      # DDP's gradient buckets (gradient_as_bucket_view=False)
        load_peak = G * 4 * P                # fp32 weights in every process (autocast keeps them fp32)
        comm = 2 * ring(N) * 4 * T
        why = "no sharding: every GPU holds the whole fp32 model, gradients and optimizer"
        act_saved += autocast_extra[0]       # autocast over fp32 weights: 16-bit weight copies, fp32 residual
        act_work += autocast_extra[1]
    elif strategy in ("zero1", "zero2", "zero3"):
        stage = int(strategy[-1])
        master = shard(4 * T)                # a separate fp32 copy, also when training in fp32
        g16 = shard(w * T)                   # at the step, stage 1 too (measured); between boundaries below
        g32 = shard(4 * T)
        p16 = w * P if stage < 3 else shard(w * P)
        gpu.update(parameters=p16, gradients=g16 + g32, master_weights=master, optimizer_states=opt_shard)
        buffers = w * min(T, DS_REDUCE_BUCKET)
        if stage < 3:
            comm = ring(N) * w * T + ring(N) * w * P
            if stage == 2 and ga > 1:        # stage 2 reduces every micro-step, stage 1 at the boundary
                comm += (ga - 1) * ring(N) * w * T
        else:
            gpu["gathered_params"] = 2 * w * unit + w * unit
            comm = 2 * ring(N) * w * P + ring(N) * w * T
            if ga > 1:                       # gathers and reduces every micro-step
                comm *= ga
            load_peak = w * P                # zero.Init (zero3_init_flag) materialises partitions only
        why = {1: "ZeRO-1 shards optimizer states and fp32 master weights",
               2: "ZeRO-2 also shards gradients",
               3: "ZeRO-3 also shards the 16-bit parameters and gathers one layer at a time"}[stage]
        if offload != "none":
            # fp32 master, fp32 gradient partition and optimizer states move to host RAM (DeepSpeed CPU Adam)
            off = gpu["master_weights"] + g32 + opt_shard
            gpu.update(master_weights=0, optimizer_states=0, gradients=0 if stage < 3 else g16)
            host_states = G * off
            pcie = shard(w * T) + shard(w * P)
            why += "; optimizer step on the CPU (slow, needs host RAM)"
            if offload == "optimizer+params":
                gpu["parameters"] = 0
                host_states += G * shard(w * P)
                pcie += 2 * w * P
                why += "; parameters streamed from host every forward and backward"
            if device == "nvme":
                nvme = host_states
                host_states = G * w * (DS_NVME_BUFFERS + 2 * min(T, DS_REDUCE_BUCKET))
                why += "; states on NVMe (needs libaio and fast local disks; slowest)"
            host = host_states
    else:  # FSDP family
        n = G if strategy in ("fsdp-hybrid-shard", "hsdp") else N
        sharded = ceil_div(4 * P, n)       # fp32 sharded parameters double as master weights
        gpu.update(parameters=sharded, gradients=ceil_div(4 * T, n), optimizer_states=ceil_div(opt_total, n))
        if strategy == "fsdp-shard-grad-op":
            gpu["gathered_params"] = w * P + w * unit
            comm = ring(n) * w * P + ring(n) * w * T
            why = "FSDP SHARD_GRAD_OP: parameters stay gathered between forward and backward (ZeRO-2-like)"
        else:
            gpu["gathered_params"] = 2 * w * unit + w * unit
            comm = 2 * ring(n) * w * P + ring(n) * w * T
            if ga > 1:                       # no_sync: gathers every micro-step, reduces at the boundary
                comm += (ga - 1) * 2 * ring(n) * w * P
            why = {"fsdp-full-shard": "FSDP1 FULL_SHARD: everything sharded, one wrapped unit gathered at a time",
                   "fsdp2": "FSDP2 (fully_shard): everything sharded, per-parameter DTensor shards",
                   "fsdp-hybrid-shard": "FSDP1 HYBRID_SHARD: shard inside a node, replicate across nodes",
                   "hsdp": "FSDP2 HSDP: shard inside a node, replicate across nodes"}[strategy]
        if n < N:
            internode = 2 * ring(M) * ceil_div(w * T, n)
            comm += internode
            if M == 1:
                why += "; on one node this is the same as full sharding"
        load_peak = w * P                    # one shared memory-mapped copy (load in the checkpoint dtype)
        if offload != "none":
            off = gpu["parameters"] + gpu["gradients"] + gpu["optimizer_states"]
            gpu.update(parameters=0, gradients=0, optimizer_states=0)
            host = G * off
            pcie = 2 * w * P + ceil_div(w * T, n)
            why += "; CPUOffloadPolicy: shards and the optimizer step live on the CPU"
    if M > 1 and internode == 0:
        internode = comm
    between = None
    if ga > 1:
        between = grads_between_boundaries(strategy, offload, T=T, N=N, w=w, largest=largest,
                                           at_boundary=gpu["gradients"])
        if between > gpu["gradients"]:
            why += "; gradient accumulation: {:.1f} GiB of gradients held between boundaries".format(between / GIB)
        gpu["gradients"] = max(gpu["gradients"], between)     # the peak over the micro-steps
    gpu["parameters"] += fp8_extra if strategy == "ddp" or strategy in ("zero1", "zero2") else 0
    model_states = sum(gpu.values())
    tensors = model_states + act_saved + act_work + buffers
    overhead = int(args.overhead_fraction * tensors) + args.reserve
    per_gpu = dict(gpu, model_states=model_states, activations=act_saved, activation_workspace=act_work,
                   communication_buffers=buffers, allocator_overhead=overhead, total=tensors + overhead)
    host_total = max(host, load_peak) if offload != "none" else load_peak
    fits_gpu = per_gpu["total"] <= args.gpu_memory
    fits_host = None if args.host_memory is None else host_total <= args.host_memory
    fits = fits_gpu and fits_host is not False
    if not fits_gpu:
        why += "; does not fit: {:.1f} GiB > {:.1f} GiB per GPU".format(per_gpu["total"] / GIB, args.gpu_memory / GIB)
    elif fits_host is False:
        why += "; does not fit host RAM: {:.1f} GiB > {:.1f} GiB per node".format(host_total / GIB,
                                                                                args.host_memory / GIB)
    c = {"strategy": strategy, "offload": offload, "offload_device": device, "per_gpu_bytes": per_gpu,
         "host_bytes_per_node": int(host_total), "nvme_bytes_per_node": int(nvme), "fits": fits,
         "fits_gpu": fits_gpu, "fits_host": fits_host, "comm_bytes_per_gpu": int(comm),
         "internode_bytes_per_gpu": int(internode), "pcie_bytes_per_gpu": int(pcie),
         "gradients_between_boundaries": between, "why": why, "_level": level}
    if args.intra_node_bandwidth or args.inter_node_bandwidth:
        secs = 0.0
        if args.inter_node_bandwidth and internode:
            secs += internode / args.inter_node_bandwidth
        if args.intra_node_bandwidth:
            secs += (comm - internode if args.inter_node_bandwidth else comm) / args.intra_node_bandwidth
        c["comm_seconds_per_step"] = round(secs, 4)
    if strategy == "zero2":
        cpu_b, gpu_b = ds_zero2_estimate(P, G, M, cpu_offload=offload != "none")
        c["deepspeed_estimate"] = {"function": "estimate_zero2_model_states_mem_needs",
                                   "args": {"total_params": P, "num_gpus_per_node": G, "num_nodes": M,
                                            "cpu_offload": offload != "none", "additional_buffer_factor": 1.5},
                                   "gpu_bytes": gpu_b, "cpu_bytes": cpu_b}
    elif strategy == "zero3":
        cpu_b, gpu_b, ll = ds_zero3_estimate(P, largest, G, M, cpu_offload=offload != "none",
                                             cpu_offload_params=offload == "optimizer+params", zero_init=True)
        c["deepspeed_estimate"] = {"function": "estimate_zero3_model_states_mem_needs",
                                   "args": {"total_params": P, "largest_layer_params": largest,
                                            "num_gpus_per_node": G, "num_nodes": M,
                                            "cpu_offload": offload != "none",
                                            "cpu_offload_params": offload == "optimizer+params",
                                            "zero_init": True, "additional_buffer_factor": 1.5},
                                   "gpu_bytes": gpu_b, "cpu_bytes": cpu_b, "largest_layer_memory": ll}
    return c

"""Command line of plan_backend.py: arguments, sizes and counts, --version, exit codes."""
from __future__ import annotations

import argparse
import json
import math
import re
import sys

from .common import MIRRORS, InputError, bundle_version
from .emit import emit
from .memory import OPTIMIZERS
from .report import text_report
from .shapes import SUPPORTED_TYPES
from .strategies import plan

EXAMPLES = """\
examples:
  plan_backend.py --params 7e9 --gpus-per-node 8 --gpu-memory 80GiB
  plan_backend.py --params 13B --largest-layer-params 164e6 --nodes 2 --host-memory 1TiB
  plan_backend.py --model-config path/to/config.json --seq-len 4096 --micro-batch 2 \\
      --activation-checkpointing --gpu-memory 40GiB --output json
  plan_backend.py --params 70e9 --optimizer adam8bit --precision bf16 --emit out/   # writes accelerate.yaml (+ ds_config.json)
  plan_backend.py --params 7e9 --trainable-fraction 0.01                            # LoRA: 1% trainable
  plan_backend.py --params 7e9 --gradient-accumulation 8                            # gradients held between steps

output: a table ranked best first (text) or, with --output json, one document:
  {"inputs", "model", "candidates": [{"strategy", "offload", "offload_device", "per_gpu_bytes":
  {"parameters", "gradients", "master_weights", "optimizer_states", "gathered_params",
  "model_states", "activations", "activation_workspace", "communication_buffers",
  "allocator_overhead", "total"}, "host_bytes_per_node", "fits", "comm_bytes_per_gpu",
  "gradients_between_boundaries" (null unless --gradient-accumulation > 1; "gradients" is then
  the larger of it and the boundary's), "rank", "why", "deepspeed_estimate" (ZeRO-2/3 only)}],
  "recommended", "assumptions"}.
  strategy: ddp zero1 zero2 zero3 fsdp-full-shard fsdp-shard-grad-op fsdp-hybrid-shard fsdp2 hsdp
  offload: none optimizer optimizer+params

sizes: a number with a unit, e.g. 80GiB, 2TiB, 512GB: B, KB, MB, GB, TB (powers of 1000) or
  KiB, MiB, GiB, TiB (powers of 1024). A bare number is refused.
parameter counts: 7e9, 7B, 1.3B, 125M, 350K, 7000000000.

exit codes:
  0  plan printed and at least one candidate fits
  1  plan printed but no candidate fits the GPU (and host) memory given
  2  bad input (one line on stderr): bad number or size, unknown optimizer, unreadable or
     unsupported config.json, unwritable --emit folder

Arithmetic and its evidence: references/memory-planning.md (verified against torch 2.13.0,
deepspeed 0.19.8, accelerate 1.15.0). GPU-side overheads are assumptions, not measurements.
"""

PRECISIONS = ("fp32", "fp16", "bf16", "fp8")

_SIZE_UNITS = {"b": 1, "kb": 10 ** 3, "mb": 10 ** 6, "gb": 10 ** 9, "tb": 10 ** 12,
               "kib": 2 ** 10, "mib": 2 ** 20, "gib": 2 ** 30, "tib": 2 ** 40}
_COUNT_SUFFIX = {"": 1, "k": 10 ** 3, "m": 10 ** 6, "b": 10 ** 9, "t": 10 ** 12}
_NUM = r"(\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)"


def parse_size(text: str, flag: str) -> int:
    m = re.fullmatch(_NUM + r"\s*([A-Za-z]+)", str(text).strip())
    if str(text).strip().startswith("-"):
        raise InputError(f"{flag}: {text!r} must be a positive size")
    if not m or m.group(2).lower() not in _SIZE_UNITS:
        raise InputError(f"{flag}: {text!r} is not a size; write a number and a unit, e.g. 80GiB, 512GB, 2TiB")
    value = float(m.group(1)) * _SIZE_UNITS[m.group(2).lower()]
    if not math.isfinite(value) or value <= 0:
        raise InputError(f"{flag}: {text!r} must be a positive size")
    return int(value)


def parse_count(text: str, flag: str) -> int:
    m = re.fullmatch(_NUM + r"\s*([kKmMbBtT]?)", str(text).strip())
    if str(text).strip().startswith("-"):
        raise InputError(f"{flag}: {text!r} must be positive")
    if not m:
        raise InputError(f"{flag}: {text!r} is not a count; e.g. 7e9, 7B, 125M")
    value = float(m.group(1)) * _COUNT_SUFFIX[m.group(2).lower()]
    if not math.isfinite(value) or value < 1 or value > 1e16:
        raise InputError(f"{flag}: {text!r} must be between 1 and 1e16")
    return int(round(value))


def positive_int(flag: str, lo: int = 1, hi: int = 10 ** 7):
    def conv(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if not lo <= v <= hi:
            raise argparse.ArgumentTypeError(f"{v} is outside {lo}..{hi}")
        return v
    return conv


def fraction(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not (0 < v <= 1):
        raise argparse.ArgumentTypeError(f"{text} must be in (0, 1]")
    return v


def nonneg_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not (math.isfinite(v) and v >= 0):
        raise argparse.ArgumentTypeError(f"{text} must be a finite number >= 0")
    return v


class _VersionAction(argparse.Action):
    """--version, resolved only when asked for (a plan does not pay for it)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        sys.stdout.write(f"{parser.prog} {bundle_version()} (pytorch-distributed-training bundle; "
                         f"plans mirror {MIRRORS})\n")
        parser.exit(0)


class Parser(argparse.ArgumentParser):
    def error(self, message):
        sys.stderr.write(f"{self.prog}: error: {message.splitlines()[0] if message else 'bad arguments'}\n")
        sys.exit(2)


def build_parser():
    p = Parser(prog="plan_backend.py", formatter_class=argparse.RawDescriptionHelpFormatter,
               description="Rank DDP, DeepSpeed ZeRO-1/2/3 (+offload), FSDP1, FSDP2 and HSDP by per-GPU memory for "
                           "a model and machine, say which fits, and optionally write the recommended Accelerate "
                           "config. Never imports torch/accelerate/deepspeed; never downloads anything.",
               epilog=EXAMPLES)
    p.add_argument("--version", action=_VersionAction, help="print the bundle version and the pinned libraries")
    m = p.add_argument_group("model (one of --params or --model-config)")
    m.add_argument("--params", help="total parameter count, e.g. 7e9 or 7B")
    m.add_argument("--largest-layer-params", help="parameters of the largest module (DeepSpeed's sense), e.g. 131e6")
    m.add_argument("--model-config", metavar="PATH", help="a local Transformers config.json (model_type: "
                   + ", ".join(SUPPORTED_TYPES) + ")")
    for flag, hlp in (("--hidden-size", "hidden size"), ("--num-layers", "decoder layers"),
                      ("--num-heads", "attention heads"), ("--num-kv-heads", "key/value heads (GQA)"),
                      ("--ffn-size", "MLP intermediate size"), ("--vocab-size", "vocabulary size")):
        m.add_argument(flag, type=positive_int(flag, 1, 10 ** 8), help=hlp + " (with --params; inferred if absent)")
    m.add_argument("--trainable-fraction", type=fraction, default=1.0,
                   help="share of parameters trained (LoRA/frozen layers); default 1")
    j = p.add_argument_group("job")
    j.add_argument("--seq-len", type=positive_int("--seq-len", 1, 10 ** 8), default=2048, help="default 2048")
    j.add_argument("--micro-batch", type=positive_int("--micro-batch", 1, 10 ** 6), default=1,
                   help="micro-batch per GPU; default 1")
    j.add_argument("--gradient-accumulation", type=positive_int("--gradient-accumulation", 1, 10 ** 6), default=1,
                   metavar="N", help="micro-steps per optimizer step; default 1. Above 1 the plan adds what each "
                   "strategy holds between boundaries (ZeRO-1: the whole 16-bit gradient; FSDP no_sync: unsharded)")
    j.add_argument("--precision", choices=PRECISIONS, default="bf16", help="default bf16")
    j.add_argument("--optimizer", default="adamw", help="one of: " + ", ".join(OPTIMIZERS) + " (default adamw)")
    j.add_argument("--activation-checkpointing", action="store_true", help="checkpoint every decoder layer")
    h = p.add_argument_group("hardware")
    h.add_argument("--gpus-per-node", type=positive_int("--gpus-per-node", 1, 4096), default=8, help="default 8")
    h.add_argument("--nodes", type=positive_int("--nodes", 1, 100000), default=1, help="default 1")
    h.add_argument("--gpu-memory", default="80GiB", help="memory per GPU; default 80GiB")
    h.add_argument("--host-memory", default=None, help="CPU RAM per node, e.g. 1TiB (unchecked if absent)")
    h.add_argument("--intra-node-bandwidth", type=nonneg_float, default=None,
                   help="bytes/s per GPU inside a node, e.g. 3e11 (adds comm_seconds_per_step)")
    h.add_argument("--inter-node-bandwidth", type=nonneg_float, default=None,
                   help="bytes/s per GPU between nodes, e.g. 2.5e10")
    h.add_argument("--overhead-fraction", type=nonneg_float, default=0.10,
                   help="allocator fragmentation as a share of the tensors; default 0.10")
    h.add_argument("--reserve", default="1GiB", help="per-GPU CUDA context and workspaces; default 1GiB")
    o = p.add_argument_group("output")
    o.add_argument("--output", choices=("text", "json"), default="text", help="default text")
    o.add_argument("--emit", metavar="DIR", help="write accelerate.yaml (+ ds_config.json) for the recommendation")
    o.add_argument("--emit-candidate", metavar="STRATEGY[:OFFLOAD[@nvme]]",
                   help="with --emit: write this candidate instead, e.g. zero3:optimizer, zero3:optimizer+params@nvme")
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if (args.params is None) == (args.model_config is None) and args.params is None:
            raise InputError("give the model as --params N or --model-config PATH")
        args.params = None if args.params is None else parse_count(args.params, "--params")
        args.largest_layer_params = (None if args.largest_layer_params is None
                                     else parse_count(args.largest_layer_params, "--largest-layer-params"))
        args.optimizer = args.optimizer.lower()
        if args.optimizer not in OPTIMIZERS:
            raise InputError(f"--optimizer {args.optimizer!r} is unknown; choose one of {', '.join(OPTIMIZERS)}")
        args.gpu_memory = parse_size(args.gpu_memory, "--gpu-memory")
        args.host_memory = None if args.host_memory is None else parse_size(args.host_memory, "--host-memory")
        args.reserve = parse_size(args.reserve, "--reserve")
        if args.emit_candidate and not args.emit:
            raise InputError("--emit-candidate needs --emit DIR")
        result = plan(args)
        if args.emit:
            result["emitted"] = emit(result, args, args.emit)
    except InputError as exc:
        sys.stderr.write(f"plan_backend.py: error: {exc}\n")
        return 2
    if args.output == "json":
        sys.stdout.write(json.dumps(result, indent=1) + "\n")
    else:
        sys.stdout.write(text_report(result))
        for path in result.get("emitted", []):
            sys.stdout.write(f"wrote {path}\n")
    return 0 if result["recommended"]["fits"] else 1

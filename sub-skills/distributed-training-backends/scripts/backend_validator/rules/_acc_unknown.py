"""Unknown keys in an Accelerate config: where a misplaced key belongs, what a misspelt one may mean,
and the keys other tools use (torchrun, the Trainer, DeepSpeed JSON). Split from _acc.py so that a
config without an unknown key never compiles it (benchmarks/bench_validator.py --start-only)."""
from __future__ import annotations

from ..core import Context, did_you_mean

if False:  # pragma: no cover - annotations only: importing typing costs start time (bench_validator.py)
    from typing import Any, Callable, Iterable, Optional, Tuple


def home_of(key: Any, block: Optional[str]) -> Optional[str]:
    """The block (or 'the top level') where a key placed in the wrong spot belongs."""
    from . import accelerate_schema as S
    if not isinstance(key, str):
        return None
    homes = [("fsdp_config", S.FSDP_KEYS, "fsdp_"), ("deepspeed_config", S.DEEPSPEED_KEYS, ""),
             ("parallelism_config", S.PARALLELISM_KEYS, ""), ("megatron_lm_config", S.MEGATRON_KEYS, ""),
             ("fp8_config", S.FP8_KEYS, "fp8_"), ("dynamo_config", S.DYNAMO_KEYS, "dynamo_"),
             ("mpirun_config", S.MPIRUN_KEYS, "")]
    for name, keys, prefix in homes:
        if name == block:
            continue
        if key in keys and key not in ("fp8_backend",) or (prefix and block is not None and prefix + key in keys
                                                            and len(key) > 8):
            return name
    if block is not None and key in S.CLUSTER_FIELDS:
        return "the top level"
    return None


def suggest(word: Any, candidates: Iterable[str], strip: Tuple[str, ...] = ()) -> Optional[str]:
    """did_you_mean, also trying the word with a known prefix added or removed, and case-insensitively."""
    cands = list(candidates)
    if not isinstance(word, str):
        return None
    # two swapped letters (parallelism_config_ps_size): the same letters beat a closer-looking key
    swapped = [c for c in cands if len(c) == len(word) and c != word and sorted(c) == sorted(word)
               and sum(a != b for a, b in zip(c, word)) == 2]
    if len(swapped) == 1:
        return swapped[0]
    m = did_you_mean(word, cands)
    if m:
        return m
    lower = {c.lower(): c for c in cands}
    if word.lower() in lower:
        return lower[word.lower()]
    m = did_you_mean(word.lower(), list(lower))
    if m:
        return lower[m]
    # a long shared prefix (fsdp_cpu_ram_efficiency_effort -> fsdp_cpu_ram_efficient_loading)
    best, blen, ties = None, 0, 0
    for c in cands:
        n = 0
        for a, b in zip(word, c):
            if a != b:
                break
            n += 1
        if n > blen:
            best, blen, ties = c, n, 1
        elif n == blen:
            ties += 1
    # unique only: a prefix all keys of a block share (parallelism_config_) suggests nothing
    if best is not None and ties == 1 and blen >= 12 and blen >= 0.6 * min(len(word), len(best)):
        return best
    for p in strip:
        if word.startswith(p):
            m = did_you_mean(word[len(p):], cands)
        elif p + word in cands:
            m = p + word
        else:
            m = did_you_mean(p + word, cands)
        if m:
            return m
    return None


_DS_JSON = "a DeepSpeed JSON key: put it in a DeepSpeed JSON named by deepspeed_config.deepspeed_config_file"
_SCRIPT = "a training-script / Trainer argument, not an accelerate launch setting: pass it to your script"
# top-level keys from other tools (torchrun flags, Trainer arguments, DeepSpeed JSON, launch flags)
# that people put into an Accelerate config, with the Accelerate spelling
FOREIGN_TOP_LEVEL = {
    "deepspeed": "set distributed_type: DEEPSPEED and deepspeed_config: {deepspeed_config_file: <path>}",
    "use_deepspeed": "set distributed_type: DEEPSPEED (use_deepspeed is a launch flag)",
    "use_fsdp": "set distributed_type: FSDP (use_fsdp is a launch flag)",
    "multi_gpu": "set distributed_type: MULTI_GPU (multi_gpu is a launch flag)",
    "fsdp": "set distributed_type: FSDP and put the settings in fsdp_config (fsdp is a Trainer argument)",
    "bf16": "write mixed_precision: bf16",
    "nproc_per_node": "use num_processes (the TOTAL over all machines: nproc_per_node x num_machines)",
    "num_gpus": "use num_processes (the TOTAL over all machines)",
    "world_size": "use num_processes (the TOTAL over all machines)",
    "nnodes": "use num_machines", "num_nodes": "use num_machines",
    "node_rank": "use machine_rank", "rank": "use machine_rank",
    "master_addr": "use main_process_ip", "main_process_address": "use main_process_ip",
    "master_port": "use main_process_port",
    "rdzv_endpoint": "use main_process_ip and main_process_port",
    "zero_optimization": _DS_JSON, "train_batch_size": _DS_JSON, "train_micro_batch_size_per_gpu": _DS_JSON,
    "optimizer": _DS_JSON, "scheduler": _DS_JSON, "zero_stage": None,
    "learning_rate": _SCRIPT, "per_device_train_batch_size": _SCRIPT, "num_train_epochs": _SCRIPT,
    "gradient_checkpointing": _SCRIPT, "seed": _SCRIPT, "output_dir": _SCRIPT,
}


def report_unknown(ctx: Context, block: Optional[str], keys: Iterable[Any], known: Iterable[str],
                   what: str, strip: Tuple[str, ...] = (), extra_hint: str = "",
                   also: Iterable[str] = (), *, fmt: Callable[[Any], str] = repr) -> None:
    """also: further names a typo may be aimed at (legacy keys), suggested but not listed as known;
    fmt: how a key is shown (_acc.fmt)."""
    known = list(known)
    also = list(also)
    for k in keys:
        path = (block, k) if block else (k,)
        m = suggest(k, known + also, strip)
        home = home_of(k, block)
        if block is None and isinstance(k, str) and FOREIGN_TOP_LEVEL.get(k):
            hint = FOREIGN_TOP_LEVEL[k]
        elif home and not (m and m != k and home == "the top level"):
            hint = f"'{k}' belongs in {home}" + (f" (here, did you mean '{m}'?)" if m else "")
        else:
            hint = f"did you mean '{m}'?" if m else f"remove it (known keys: {', '.join(known)})"
        if extra_hint:
            hint = f"{hint} {extra_hint}"
        ctx.report(path, f"unknown key {fmt(k)} in {block or 'the top level'}: {what}", hint)

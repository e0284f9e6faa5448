"""Accelerate config + DeepSpeed JSON (``deepspeed_config_file``) rules (family ``cross``).

``ctx.doc`` is the Accelerate config, ``ctx.related["deepspeed"]`` the JSON it names (absent
when the file cannot be found or parsed). Docstring convention (parsed by tests/validator_ds):
``Fails:`` / ``Passes:`` each followed by a ```yaml block (the Accelerate config; its
``deepspeed_config_file`` names ``ds_config.json``) and, when the JSON matters, a ```json block
written as that file in the launch directory. ``Layout: beside-yaml`` puts YAML and JSON in a
sub-directory while the launch directory is its parent. ``Effect:`` is a Python expression over
``res`` (the accelerate oracle's answer) that is true when the value was silently changed.

Keys that accelerate refuses next to ``deepspeed_config_file`` (``zero_stage``,
``gradient_accumulation_steps``, ``mixed_precision`` ...) are reported from the YAML alone by
``acc-ds-config-file-conflict`` (rules/accelerate_deepspeed.py); the rules here need the JSON.
"""
from __future__ import annotations

import os

from .. import ds_values as D
from ..core import Context, Doc, rule

if False:  # pragma: no cover - annotations only: importing typing costs start time (bench_validator.py)
    from typing import Optional

PLUGIN = "accelerate/utils/dataclasses.py::DeepSpeedPlugin.__post_init__"


def _ds_file(ctx: Context) -> Optional[str]:
    b = ctx.doc.get(("deepspeed_config",))
    f = b.get("deepspeed_config_file") if isinstance(b, dict) else None
    if isinstance(f, str) and f.strip() and f != "none":
        return f
    return None


def _uses_deepspeed(ctx: Context) -> bool:
    dt = ctx.doc.get(("distributed_type",))
    return dt == "DEEPSPEED" or (dt is None and isinstance(ctx.doc.get(("deepspeed_config",)), dict))


def _json(ctx: Context) -> Optional[Doc]:
    if not _uses_deepspeed(ctx) or _ds_file(ctx) is None:
        return None
    return ctx.related.get("deepspeed")


FILE_KEY = ("deepspeed_config", "deepspeed_config_file")


@rule(id="xf-config-file-missing", severity="error", family="cross",
      summary="deepspeed_config_file does not exist relative to the launch directory",
      source="accelerate/utils/deepspeed.py::HfDeepSpeedConfig.__init__")
def config_file_missing(ctx: Context):
    """Accelerate opens a relative ``deepspeed_config_file`` from the directory ``accelerate
    launch`` runs in, not from the config file's directory. A file that exists only next to
    the YAML is a warning (it works only when launched from there).

    Fails:

    ```yaml
    distributed_type: DEEPSPEED
    num_processes: 1
    deepspeed_config:
      deepspeed_config_file: no_such_ds_config.json
    ```

    Passes:

    ```yaml
    distributed_type: DEEPSPEED
    num_processes: 1
    deepspeed_config:
      deepspeed_config_file: ds_config.json
    ```

    ```json
    {"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 2}}
    ```
    """
    f = _ds_file(ctx)
    if f is None or not _uses_deepspeed(ctx) or "deepspeed" in ctx.related:
        return
    s = f.strip()
    if s.startswith("{"):
        return  # inline JSON text (the CLI parses it)
    cwd = ctx.options.cwd or "."
    at_cwd = f if os.path.isabs(f) else os.path.join(cwd, f)
    if os.path.isfile(at_cwd):
        return  # exists but could not be parsed: input-related-file-unreadable
    beside = None
    if ctx.doc.source_path and not os.path.isabs(f):
        cand = os.path.join(os.path.dirname(os.path.abspath(ctx.doc.source_path)), f)
        if os.path.isfile(cand):
            beside = cand
    if beside:
        yield ctx.report(FILE_KEY, f"deepspeed_config_file {f!r} is not found from the launch directory "
                         f"{os.path.abspath(cwd)!r}; it exists only relative to the config file, and accelerate "
                         "resolves it against the working directory", "launch from the config's directory or use "
                         f"an absolute path ({beside}); to check as if launched elsewhere, pass --cwd DIR",
                         severity="warning")
    else:
        import base64
        import binascii
        try:
            txt = base64.urlsafe_b64decode(s).decode("utf-8")
            if txt.lstrip().startswith("{"):
                return  # base64 JSON, accepted by HfDeepSpeedConfig
        except (binascii.Error, ValueError, UnicodeDecodeError):
            pass
        yield ctx.report(FILE_KEY, f"deepspeed_config_file {f!r} does not exist (resolved against the launch "
                         f"directory {os.path.abspath(cwd)!r}); accelerate raises ValueError",
                         "fix the path, or use an absolute path" + (
                             "; if you will launch from another directory, pass --cwd DIR (the launch directory) "
                             "to resolve it from there" if not os.path.isabs(f) else ""))


@rule(id="xf-precision-auto-off", severity="warning", family="cross",
      summary="fp16/bf16 \"enabled\": \"auto\" in the JSON with no mixed precision given: training runs in fp32",
      source="accelerate/utils/dataclasses.py::DeepSpeedPlugin.set_mixed_precision")
def precision_auto_off(ctx: Context):
    """With ``deepspeed_config_file`` the YAML cannot carry ``mixed_precision``; unless
    ``accelerate launch --mixed_precision bf16`` is used, Accelerate fills ``"auto"`` with false.

    Fails:

    ```yaml
    distributed_type: DEEPSPEED
    num_processes: 1
    deepspeed_config:
      deepspeed_config_file: ds_config.json
    ```

    ```json
    {"train_micro_batch_size_per_gpu": 2, "bf16": {"enabled": "auto"}, "zero_optimization": {"stage": 2}}
    ```

    Passes:

    ```yaml
    distributed_type: DEEPSPEED
    num_processes: 1
    deepspeed_config:
      deepspeed_config_file: ds_config.json
    ```

    ```json
    {"train_micro_batch_size_per_gpu": 2, "bf16": {"enabled": true}, "fp16": {"enabled": "auto"}, "zero_optimization": {"stage": 2}}
    ```

    Effect: res["plugins"]["deepspeed"]["config"]["bf16"]["enabled"] is False
    """
    j = _json(ctx)
    if j is None or ctx.doc.get(("mixed_precision",)) is not None:
        return
    explicit_on = [b for b in ("fp16", "bf16") if str(j.get((b, "enabled"))).lower() == "true"]
    if explicit_on:
        return  # the other precision is on explicitly: "auto" -> false is what the user wants
    for blk in ("fp16", "bf16"):
        if j.get((blk, "enabled")) == "auto":
            yield ctx.report((blk, "enabled"), f"{blk}.enabled is \"auto\" and the Accelerate config gives no "
                             "mixed precision: Accelerate fills it with false (fp32 training) unless launched with "
                             f"--mixed_precision {blk}", f"write {blk}.enabled true, or pass --mixed_precision {blk}",
                             doc=j)


@rule(id="xf-zero3-init-not-stage3", severity="warning", family="cross",
      summary="zero3_init_flag true while the JSON's ZeRO stage is not 3 (turned off)", source=PLUGIN)
def zero3_init(ctx: Context):
    """Fails:

    ```yaml
    distributed_type: DEEPSPEED
    num_processes: 1
    deepspeed_config:
      deepspeed_config_file: ds_config.json
      zero3_init_flag: true
    ```

    ```json
    {"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 2}}
    ```

    Passes:

    ```yaml
    distributed_type: DEEPSPEED
    num_processes: 1
    deepspeed_config:
      deepspeed_config_file: ds_config.json
      zero3_init_flag: true
    ```

    ```json
    {"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 3}}
    ```

    Effect: res["plugins"]["deepspeed"]["zero3_init_flag"] is False
    """
    j = _json(ctx)
    if j is None:
        return
    flag = ctx.doc.get(("deepspeed_config", "zero3_init_flag"))
    if D.as_bool(flag) is not True:
        return
    st = D.zero_stage(j, "accelerate")
    if j.get(("zero_optimization", "stage")) == "auto":
        st = 2  # filled from the plugin's default zero_stage
    if st is not None and st != 3:
        yield ctx.report(("deepspeed_config", "zero3_init_flag"), f"zero3_init_flag is true but the DeepSpeed JSON "
                         f"uses ZeRO stage {st}: accelerate turns the flag off", "remove zero3_init_flag or use "
                         "stage 3 in the JSON")


def _world_from_yaml(ctx: Context) -> Optional[int]:
    n = D.as_int(ctx.doc.get(("num_processes",), 1)) if ctx.doc.get(("num_processes",)) is not None else 1
    m = D.as_int(ctx.doc.get(("num_machines",), 1)) if ctx.doc.get(("num_machines",)) is not None else 1
    if not n or not m or n < 1 or m < 1:
        return None
    return n * m


@rule(id="xf-batch-size-world", severity="error", family="cross",
      summary="explicit batch sizes in the JSON do not fit the Accelerate config's num_processes x num_machines",
      source="deepspeed/runtime/config.py::DeepSpeedConfig._batch_assertion")
def batch_size_world(ctx: Context):
    """DeepSpeed checks train_batch_size = micro x grad_acc x world with the launched world size
    (num_processes x num_machines); a missing gradient_accumulation_steps is 1 under Accelerate.
    Used when ``--world-size`` is not given.

    Oracle: deepspeed-world=yaml

    Fails:

    ```yaml
    distributed_type: DEEPSPEED
    num_processes: 4
    deepspeed_config:
      deepspeed_config_file: ds_config.json
    ```

    ```json
    {"train_batch_size": 16, "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 4,
     "zero_optimization": {"stage": 2}}
    ```

    Passes:

    ```yaml
    distributed_type: DEEPSPEED
    num_processes: 2
    deepspeed_config:
      deepspeed_config_file: ds_config.json
    ```

    ```json
    {"train_batch_size": 16, "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 4,
     "zero_optimization": {"stage": 2}}
    ```
    """
    j = _json(ctx)
    if j is None or ctx.options.world_size:
        return
    W = _world_from_yaml(ctx)
    if W is None:
        return
    from ..core import Options, REGISTRY
    from . import load_rule
    load_rule("ds-batch-size-invalid")
    sub = Context(doc=j, options=Options(world_size=W, cwd=ctx.options.cwd), consumer="accelerate")
    sub._rule = REGISTRY["ds-batch-size-invalid"]
    for _ in REGISTRY["ds-batch-size-invalid"].func(sub) or ():
        pass
    for f in sub.findings:
        if "world size" in f.message:
            yield ctx.report(f.path, f.message.replace("with world size", "with the launched world size") +
                             f" (num_processes x num_machines in {ctx.doc.name})", f.hint, doc=j,
                             severity=f.severity)

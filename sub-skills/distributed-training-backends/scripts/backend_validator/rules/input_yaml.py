"""Parse-level rules: what the YAML text itself does before any Accelerate logic sees it.

Findings of the first group are produced by the loaders (``loader_yaml`` /
the CLI); they are registered here so that they are listed and documented.
The YAML 1.1 trap rules inspect ``Doc.scalars`` (how each scalar was written).
"""
from __future__ import annotations

import re

from ..core import rule
from . import accelerate_schema as S

YAML = "yaml/constructor.py::SafeConstructor (yaml.safe_load, used by accelerate)"


@rule(id="yaml-duplicate-key", severity="error", family="input",
      summary="a mapping key appears twice with different values (safe_load keeps the last)", source=YAML)
def duplicate_key(ctx):
    """PyYAML's ``safe_load`` does not complain about a repeated key; the later value silently
    replaces the earlier one. The finding names both lines.

    Fails:
    ```yaml
    distributed_type: MULTI_GPU
    num_processes: 2
    num_processes: 8
    ```
    Passes:
    ```yaml
    distributed_type: MULTI_GPU
    num_processes: 8
    ```
    """
    return ()


@rule(id="yaml-duplicate-key-same-value", severity="info", family="input",
      summary="a mapping key appears twice with the same value", source=YAML)
def duplicate_key_same(ctx):
    """Harmless today, but one edit away from a silent override.

    Fails:
    ```yaml
    distributed_type: 'NO'
    debug: false
    num_processes: 1
    debug: false
    ```
    Passes:
    ```yaml
    distributed_type: 'NO'
    debug: false
    num_processes: 1
    ```
    """
    return ()


@rule(id="yaml-unsafe-tag", severity="error", family="input",
      summary="a YAML tag safe_load cannot construct (e.g. !!python/object); never constructed here",
      source=YAML)
def unsafe_tag(ctx):
    """accelerate loads configs with ``yaml.safe_load``, which refuses any tag outside the YAML
    core schema; the validator reports the tag and never constructs anything.

    Fails:
    ```yaml
    distributed_type: 'NO'
    num_processes: !!python/object/apply:os.getpid []
    ```
    Passes:
    ```yaml
    distributed_type: 'NO'
    num_processes: 1
    ```
    """
    return ()


@rule(id="input-related-file-unreadable", severity="error", family="input",
      summary="the DeepSpeed JSON named by deepspeed_config_file cannot be read or parsed",
      source="accelerate/utils/deepspeed.py::HfDeepSpeedConfig.__init__")
def related_unreadable(ctx):
    """The file exists but is not valid JSON (accelerate opens it with ``json.load``), is not
    UTF-8, or is over the input limit. A *missing* file is reported by the cross-file rules.

    Fails:
    ```yaml
    distributed_type: DEEPSPEED
    num_processes: 2
    deepspeed_config:
      deepspeed_config_file: broken.json
    ```
    Passes:
    ```yaml
    distributed_type: DEEPSPEED
    num_processes: 2
    deepspeed_config:
      zero_stage: 2
    ```
    """
    return ()


@rule(id="input-too-complex", severity="error", family="input",
      summary="the document is too deeply nested for the checks to walk", source="(validator limit)")
def too_complex(ctx):
    """Reported instead of a crash when a rule cannot walk a structure (recursion limit).

    Fails:
    ```yaml
    # (only reachable with structures deeper than the loader already refuses)
    distributed_type: 'NO'
    num_processes: 1
    ```
    Passes:
    ```yaml
    distributed_type: 'NO'
    num_processes: 1
    ```
    """
    return ()


# Keys whose YAML 1.1 value problems an accelerate rule already reports as an error.
_HANDLED = {("distributed_type",), ("mixed_precision",), ("dynamo_backend",),
            ("dynamo_config", "dynamo_backend"), ("dynamo_config", "backend"), ("gpu_ids",)}
_BOOL_WORDS = {"yes", "no", "on", "off", "y", "n"}
_NUMBERISH = re.compile(r"^[-+]?(?:\d[\d_]*\.?[\d_]*|\.\d[\d_]*)[eE][-+]?\d+$|^[-+]?0\d+$")
_OCTAL = re.compile(r"^[-+]?0[0-7_]+$")
_SEXAGESIMAL = re.compile(r"^[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$")


def _plain(ctx):
    for path, info in ctx.doc.scalars.items():
        if info.style is None and info.tag is None and path:
            yield path, info


def _key(path):
    k = path[-1]
    return k if isinstance(k, str) else None


@rule(id="yaml-bool-word", severity="warning", family="input",
      summary="unquoted yes/no/on/off read as a boolean where a string is expected", source=YAML)
def bool_word(ctx):
    """YAML 1.1 (PyYAML) reads ``yes``, ``no``, ``on``, ``off`` (any case) as booleans. For keys
    that take a boolean that is fine; anywhere else the string is lost.

    Fails:
    ```yaml
    distributed_type: 'NO'
    num_processes: 1
    main_process_ip: on
    ```
    Passes:
    ```yaml
    distributed_type: 'NO'
    num_processes: 1
    main_process_ip: 'on'
    ```
    """
    for path, info in _plain(ctx):
        if info.raw.lower() in _BOOL_WORDS and isinstance(ctx.doc.get(path), bool):
            k = _key(path)
            if path in _HANDLED or (k is not None and (k in S.BOOL_KEYS or S.prefixed(
                    path[0] if len(path) > 1 else "", k) in S.BOOL_KEYS)):
                continue
            ctx.report(path, f"unquoted {info.raw!r} is read as the boolean {ctx.doc.get(path)} (YAML 1.1), "
                       "not as a string", f"quote it: '{info.raw}'")
    return ()


@rule(id="yaml-number-as-string", severity="warning", family="input",
      summary="a number PyYAML reads as a string (1e8, 5e-5 without a dot, 0-padded)", source=YAML)
def number_as_string(ctx):
    """PyYAML's YAML 1.1 float needs a dot and a signed exponent (``1.0e+8``), so ``1e8`` or
    ``5e-5`` stay strings and later ``int()``/``float()`` calls or comparisons fail.

    Fails:
    ```yaml
    distributed_type: FSDP
    num_processes: 2
    fsdp_config:
      fsdp_auto_wrap_policy: SIZE_BASED_WRAP
      fsdp_min_num_params: 1e8
    ```
    Passes:
    ```yaml
    distributed_type: FSDP
    num_processes: 2
    fsdp_config:
      fsdp_auto_wrap_policy: SIZE_BASED_WRAP
      fsdp_min_num_params: 100000000
    ```
    """
    for path, info in _plain(ctx):
        if isinstance(ctx.doc.get(path), str) and _NUMBERISH.match(info.raw) and path != ("gpu_ids",):
            raw = info.raw
            if re.match(r"^[-+]?0\d+$", raw):  # 08, 029500: not octal, so YAML 1.1 leaves a string
                hint = f"drop the leading zero: {raw[0] if raw[0] in '+-' else ''}{raw.lstrip('+-').lstrip('0') or '0'}"
            else:
                hint = "write the number in full (100000000) or with a dot and a signed exponent (1.0e+8)"
            ctx.report(path, f"{raw!r} is read as a string by PyYAML (YAML 1.1 number rules)", hint)
    return ()


@rule(id="yaml-1-1-integer", severity="warning", family="input",
      summary="an integer YAML 1.1 reads unexpectedly (leading-zero octal 010 -> 8, 1:30 -> 90)", source=YAML)
def yaml11_integer(ctx):
    """YAML 1.1 reads ``0``-prefixed digits as octal and ``a:b`` as base 60.

    Fails:
    ```yaml
    distributed_type: 'NO'
    num_processes: 1
    main_process_port: 010
    ```
    Passes:
    ```yaml
    distributed_type: 'NO'
    num_processes: 1
    main_process_port: 29500
    ```
    """
    for path, info in _plain(ctx):
        v = ctx.doc.get(path)
        if isinstance(v, int) and not isinstance(v, bool) and (
                _OCTAL.match(info.raw) or _SEXAGESIMAL.match(info.raw)) and info.raw.strip("+-") != "0":
            ctx.report(path, f"{info.raw!r} is read as the integer {v} (YAML 1.1 octal/base-60)",
                       f"write the intended number without a leading zero or colon, or quote it")
    return ()

"""The DeepSpeed JSON an Accelerate config names (deepspeed_config.deepspeed_config_file): reading it as
accelerate does (a path relative to the launch directory, inline JSON, or urlsafe base64) and which
of its skipped checks the cross-file rules make up for. Part of the engine (engine.py calls it), in a
module of its own so that a config without deepspeed_config_file never compiles it.
"""
from __future__ import annotations

import os

from . import core
from .core import Context, Doc, Finding, InputError, Options

if False:  # pragma: no cover - annotations only; importing typing costs start time (bench_validator.py)
    from typing import Any, Dict, List, Optional  # res: the engine's FileResult


def load_json(text: str, name: str, source_path: Optional[str]) -> Doc:
    from . import loader_json_strict  # loader_json.py only for HJSON or when positions are asked for
    return loader_json_strict.load_text(text, name, source_path=source_path)


def uncovered_skips(skipped: List[Dict[str, str]], xctx: Context) -> List[Dict[str, str]]:
    """Skips of the named JSON that the cross rules made up for: the batch equation is checked
    with the Accelerate config's num_processes x num_machines (xf-batch-size-world)."""
    from .rules.cross_file_rules import _world_from_yaml
    if _world_from_yaml(xctx) is None:
        return list(skipped)
    return [s for s in skipped if s["check"] != "ds-batch-size-invalid"]


def load_related(doc: Doc, ds_file: str, options: Options, res: Any) -> Optional[Doc]:
    """Load the DeepSpeed JSON an Accelerate config names. Accelerate (HfDeepSpeedConfig)
    accepts a path, inline JSON text, or base64-encoded JSON; paths are opened relative to
    the launch working directory."""
    pos = doc.pos(("deepspeed_config", "deepspeed_config_file"))
    stripped = ds_file.strip()
    if stripped.startswith("{"):
        name = f"{doc.name}#deepspeed_config_file"
        text, src = stripped, None
    else:
        path = ds_file if os.path.isabs(ds_file) else os.path.join(options.cwd, ds_file)
        if not os.path.isfile(path):
            decoded = _base64_json(stripped)
            if decoded is None:
                return None
            try:
                return load_json(decoded, f"{doc.name}#deepspeed_config_file(base64)", None)
            except InputError as e:
                _related_error(res, doc, ds_file, str(e), pos)
                return None
        try:
            text = core.read_input_file(path)
        except InputError as e:
            _related_error(res, doc, ds_file, str(e), pos)
            return None
        name = ds_file if not os.path.isabs(ds_file) else path
        src = os.path.abspath(path)
    try:
        return load_json(text, name, src)
    except InputError as e:
        _related_error(res, doc, ds_file, str(e), pos)
        return None


def _base64_json(s: str) -> Optional[str]:
    """accelerate's HfDeepSpeedConfig also accepts urlsafe-base64-encoded JSON text."""
    import base64
    import binascii
    if len(s) < 8 or len(s) > core.MAX_INPUT_BYTES:
        return None
    try:
        text = base64.urlsafe_b64decode(s).decode("utf-8")
    except (binascii.Error, ValueError, UnicodeDecodeError):
        return None
    return text if text.lstrip().startswith("{") else None


def _related_error(res: Any, doc: Doc, ds_file: str, message: str, pos) -> None:
    res.findings.append(Finding(
        rule="input-related-file-unreadable", severity="error",
        message=f"deepspeed_config_file {ds_file!r} cannot be used: {message}",
        hint="fix the DeepSpeed JSON (accelerate reads it with json.load)",
        path=("deepspeed_config", "deepspeed_config_file"), line=pos[0], col=pos[1], file=doc.name))

"""Accelerate config rule for a .json config that is not strict JSON (accelerate 1.15.0 reads it with
json.load). Split from accelerate_core so that a YAML or strict JSON config does not compile it
(rules/__init__.py, SILENT_WHEN).
"""
from __future__ import annotations

from ..core import rule
from ._acc import CFG

# The rule returns at once unless the document is JSON with a lenient (HJSON) feature other than
# NaN/Infinity: rules/__init__.py does not compile the module where _acc.yaml_or_strict_json is true.
SILENT_WHEN = "_acc.yaml_or_strict_json"


@rule(id="acc-json-not-strict", severity="error", family="accelerate",
      summary="a .json Accelerate config uses comments/trailing commas (accelerate uses json.load)",
      source=f"{CFG}::BaseConfig.from_json_file")
def json_not_strict(ctx):
    """Config files whose name ends in ``.json`` are read with strict ``json.load``.

    Fails:
    ```json
    {"distributed_type": "NO", "num_processes": 1,}
    ```
    Passes:
    ```json
    {"distributed_type": "NO", "num_processes": 1}
    ```
    """
    # json.load accepts NaN/Infinity; everything else the lenient loader tolerated (comments, trailing
    # commas, unquoted keys, single quotes, a UTF-8 BOM ...) makes it fail
    strict_fails = [f for f in ctx.doc.lenient_features if f[0] != "nan-infinity"] if ctx.doc.kind == "json" else []
    if strict_fails:
        kind, line, col = strict_fails[0]
        ctx.report((), f"not strict JSON ({kind}); accelerate reads .json configs with json.load and fails",
                   "remove comments / trailing commas, or write the config as YAML", line=line, col=col)
    return ()

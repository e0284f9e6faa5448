"""DeepSpeed JSON rule: HJSON syntax that a strict-JSON consumer rejects, NaN/Infinity for plain DeepSpeed
(family ``deepspeed``, deepspeed 0.19.8; the docstring convention is in _ds.py). Split from
deepspeed_consumers.py so that a strict JSON file does not compile it (rules/__init__.py, SILENT_WHEN).
"""
from __future__ import annotations

from ..core import Context, rule

# The rule reads only the document's lenient features (comments, trailing commas, NaN ...): it returns
# at once for a JSON that has none, where _ds.strict_json is true.
SILENT_WHEN = "_ds.strict_json"

_STRICT_REJECTS = ("comment", "trailing-comma", "missing-comma", "unquoted-key", "single-quoted-string",
                   "quoteless-string", "multiline-string", "root-braces-omitted", "bom")


@rule(id="ds-json-syntax", severity="error", family="deepspeed",
      summary="HJSON syntax (comments, trailing commas ...) that a strict-JSON consumer rejects",
      source="accelerate/utils/deepspeed.py::HfDeepSpeedConfig.__init__ (json.load)")
def json_syntax(ctx: Context):
    """Oracle: consumer=accelerate

    Fails:

    ```json
    {"train_micro_batch_size_per_gpu": 8, // per device
     "zero_optimization": {"stage": 2},}
    ```

    Passes:

    ```json
    {"train_micro_batch_size_per_gpu": 8, "zero_optimization": {"stage": 2}}
    ```
    """
    seen = set()
    for kind, line, col in ctx.doc.lenient_features:
        if ctx.consumer == "deepspeed":
            if kind != "nan-infinity":
                continue
            msg = "NaN/Infinity is not valid HJSON (deepspeed's hjson loader reads it as a string or fails)"
        else:
            if kind not in _STRICT_REJECTS or kind in seen:
                continue
            seen.add(kind)
            msg = (f"{kind.replace('-', ' ')} is HJSON, not JSON: {ctx.consumer} reads the file with json.load and "
                   "fails (plain deepspeed would accept it)")
        yield ctx.report((), msg, "remove it to make the file strict JSON", line=line, col=col)

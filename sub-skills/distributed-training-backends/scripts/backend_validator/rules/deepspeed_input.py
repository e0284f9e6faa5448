"""Parse-level JSON finding reported by loader_json (family ``input``); registered here so that
``--list-rules`` and the generated reference document it."""
from __future__ import annotations

from ..core import rule

# loader_json.DUPLICATE_RULE (the loader reports it); written out so that a YAML check, which loads
# this family, does not import the JSON loader (tests/validator_cli/test_lazy_rules.py checks the two agree)
DUPLICATE_RULE = "json-duplicate-key"


@rule(id=DUPLICATE_RULE, severity="error", family="input",
      summary="duplicate key in a JSON object (the finding names both lines)",
      source="deepspeed/runtime/config.py::DeepSpeedConfig.__init__ (dict_raise_error_on_duplicate_keys)")
def json_duplicate_key(ctx):
    """deepspeed reads a config file with a duplicate-key hook and raises; ``json.load``
    (Accelerate, the Trainer, Accelerate's own JSON configs) silently keeps the last value.
    Reported by the JSON loader, so this rule itself checks nothing. In a DeepSpeed JSON read by
    Accelerate or the Trainer (which hand deepspeed the json.load-ed dict) it is a warning.

    Fails:

    ```json
    {"train_batch_size": 8,
     "train_batch_size": 16}
    ```

    Passes:

    ```json
    {"train_batch_size": 16}
    ```
    """
    return ()

"""Keys accelerate's DeepSpeedPlugin overwrites before any "auto" is filled (issue 21).

accelerate 1.15.0, accelerate/utils/dataclasses.py, DeepSpeedPlugin.__post_init__: after loading
the file or dict (hf_ds_config) - or building the config itself - it runs
``self.deepspeed_config["steps_per_print"] = float("inf")``, unconditionally. Only later does
Accelerator._prepare_deepspeed call ``deepspeed_config_process(must_match=False, **config_kwargs)``,
whose fill_match raises ValueError on an "auto" leaf it has no value for. So "auto" in
steps_per_print never reaches that check.

The Trainer takes the same path (transformers, src/transformers/training_args.py,
TrainingArguments.__post_init__: ``self.hf_deepspeed_config = HfTrainerDeepSpeedConfig(self.deepspeed)``,
``trainer_config_process(self)``, then ``DeepSpeedPlugin(hf_ds_config=self.hf_deepspeed_config)``;
src/transformers/integrations/deepspeed.py: HfTrainerDeepSpeedConfig subclasses HfDeepSpeedConfig,
which subclasses accelerate's ``accelerate.utils.deepspeed.HfDeepSpeedConfig``; deepspeed_init later
finalizes that same object). The Trainer case runs the plugin with an accelerate HfDeepSpeedConfig
object, the branch the Trainer's subclass takes (transformers 5.25.0 is installed; that its class is
such a subclass is run in tests/field_coverage/test_transformers_trainer_cpu.py, and importing
transformers in every case's process would cost seconds each).

Each case runs in a fresh process with no ACCELERATE_* variables (the plugin reads them).
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys

from ds_support import validate_json

PROBE = r"""
import json, sys
from accelerate.utils import DeepSpeedPlugin
from accelerate.utils.deepspeed import HfDeepSpeedConfig
cfg = json.loads(sys.argv[1])
out = {}
for how in ("dict", "hf_config_object"):
    src = json.loads(json.dumps(cfg))
    hf = HfDeepSpeedConfig(src) if how == "hf_config_object" else src
    plugin = DeepSpeedPlugin(hf_ds_config=hf)
    spp = plugin.deepspeed_config.get("steps_per_print")
    same = (plugin.deepspeed_config is hf.config) if how == "hf_config_object" else None
    try:  # the fill step of Accelerator._prepare_deepspeed (its config_kwargs for a prepared dataloader)
        plugin.deepspeed_config_process(must_match=False, gradient_clipping=1.0, train_micro_batch_size_per_gpu=2,
                                        train_batch_size=4,
                                        **{"zero_optimization.stage3_gather_16bit_weights_on_model_save": False})
        err = None
    except ValueError as e:
        err = str(e).splitlines()[0]
    out[how] = {"steps_per_print": repr(spp), "fill_error": err, "same_object": same}
print(json.dumps(out))
"""


def run_plugin(cfg):
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACCELERATE_")}
    env["DS_ACCELERATOR"] = "cpu"
    r = subprocess.run([sys.executable, "-c", PROBE, json.dumps(cfg)], capture_output=True, text=True, env=env,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


CFG = {"train_micro_batch_size_per_gpu": "auto", "steps_per_print": "auto", "zero_optimization": {"stage": 2}}
# control: an "auto" the plugin does not overwrite and the fill step has no value for
CONTROL = dict(CFG, wall_clock_breakdown="auto")


def test_the_plugin_overwrites_steps_per_print_before_auto_is_filled():
    got = run_plugin(CFG)
    for how in ("dict", "hf_config_object"):
        assert got[how]["steps_per_print"] == repr(math.inf), got
        assert got[how]["fill_error"] is None, got
    assert got["hf_config_object"]["same_object"] is True  # the Trainer's object is the one changed
    control = run_plugin(CONTROL)
    assert all("wall_clock_breakdown" in (control[h]["fill_error"] or "") for h in control), control


def test_the_validator_agrees_for_each_consumer():
    text = json.dumps(CFG)
    for consumer in ("accelerate", "transformers"):
        fs, _ = validate_json(text, consumer=consumer)
        assert not [f for f in fs if f.path == ("steps_per_print",)], (consumer, fs)
        ctl, _ = validate_json(json.dumps(CONTROL), consumer=consumer)
        assert any(f.rule == "ds-auto-unfillable" and f.path == ("wall_clock_breakdown",) for f in ctl), ctl
    # plain deepspeed.initialize reads the value itself: still an error there
    fs, _ = validate_json(text, consumer="deepspeed")
    assert any(f.rule == "ds-auto-unsupported" and f.path == ("steps_per_print",) for f in fs), fs

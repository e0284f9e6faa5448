"""transformers-trainer-checkpoint-files.md#which-deepspeed-tag-a-resume-loads (set 9, s9-ck-h07): the
Trainer's DeepSpeed resume (transformers 5.25.0 integrations/deepspeed.py deepspeed_load_checkpoint) only
globs `global_step*` in the folder it is given and calls engine.load_checkpoint(folder) with no tag, so the
engine reads `<folder>/latest`; an engine answer of (None, None) (no `latest`: run by
tests/field_coverage/test_ds_checkpoint_loading.py::test_missing_latest_loads_nothing) becomes a ValueError.
Runs the real function against a recording engine (in-process, no DeepSpeed import)."""
from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "sub-skills" / "distributed-training-backends" / "references" / "transformers-trainer-checkpoint-files.md"


class Engine:
    def __init__(self, answer):
        self.answer, self.calls = answer, []

    def load_checkpoint(self, *args, **kwargs):
        self.calls.append((args, kwargs))
        return self.answer


def test_trainer_passes_no_tag_and_turns_a_missing_latest_into_value_error(tmp_path):
    from transformers.integrations.deepspeed import deepspeed_load_checkpoint

    ck = tmp_path / "checkpoint-4"
    (ck / "global_step4").mkdir(parents=True)
    ok = Engine((str(ck / "global_step4"), {}))
    deepspeed_load_checkpoint(ok, str(ck))
    (args, kwargs), = ok.calls
    assert args == (str(ck),) and "tag" not in kwargs  # the engine's default tag=None: it reads <folder>/latest
    assert kwargs == {"load_module_strict": True, "load_optimizer_states": True, "load_lr_scheduler_states": True}

    with pytest.raises(ValueError, match=r"^\[deepspeed\] failed to resume from checkpoint .*checkpoint-4$"):
        deepspeed_load_checkpoint(Engine((None, None)), str(ck))  # what a node without `latest` gets

    bare = tmp_path / "checkpoint-5"
    bare.mkdir()
    never = Engine(None)
    with pytest.raises(ValueError, match=r"^Can't find a valid checkpoint at .*checkpoint-5$"):
        deepspeed_load_checkpoint(never, str(bare))
    assert never.calls == []  # no global_step* folder: the engine is not asked at all

    text = " ".join(PAGE.read_text().split())
    for phrase in ("`[deepspeed] failed to resume from checkpoint <path>`", "no `tag`",
                   "Can't find a valid checkpoint at"):
        assert phrase in text, phrase

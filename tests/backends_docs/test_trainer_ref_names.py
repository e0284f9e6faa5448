"""Every snake_case or UPPER_CASE name the Transformers Trainer references write in backticks
(sub-skills/distributed-training-backends/references/transformers-trainer*.md, reading text above
Provenance) exists in the installed sources: transformers 5.25.0 (top level, integrations, generation,
utils), accelerate 1.15.0, deepspeed 0.19.8 runtime, torch 2.13.0 (torch, nn, distributed).

A name absent from all of them is an invented key, argument or variable, unless it is listed in
OURS with the reason (the bundle's own files and tests, placeholders, a misspelling the page warns
about). Names without an underscore are left to the claims ledger: too many are ordinary words.
"""
from __future__ import annotations

import re
import sysconfig
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SITE = Path(sysconfig.get_paths()["purelib"])
PAGES = sorted((REPO / "sub-skills/distributed-training-backends/references").glob("transformers-trainer*.md"))
SOURCES = ["transformers/*.py", "transformers/integrations/*.py", "transformers/generation/*.py",
           "transformers/utils/*.py", "accelerate/**/*.py", "deepspeed/*.py", "deepspeed/utils/*.py",
           "deepspeed/runtime/**/*.py", "torch/*.py", "torch/nn/**/*.py", "torch/distributed/**/*.py"]
OURS = {
    "ACCELERATE_DEEPSPEED_": "prefix of the ACCELERATE_DEEPSPEED_* variables, written with a star",
    "field_coverage": "tests/field_coverage, the bundle's evidence folder",
    "plan_backend": "the bundle's planner script",
    "test_trainer_translation_cpu": "a bundle test named as evidence",
    "test_transformers_trainer_cpu": "a bundle test named as evidence",
    "global_stepN": "placeholder for DeepSpeed's global_step<N> folder",
    "per_device": "short for the per_device_* batch-size arguments",
    "run_qa": "the transformers example script run_qa.py",
    "warmup_ratio": "not an argument of 5.25.0: the args-checks page shows its TypeError",
    "old_machine": "folder name in the run's captured warning",
    "transformer_layer_cls_to_warp": "the misspelling the page warns is accepted silently",
    "modules_to_save": "a PEFT option (PEFT is not installed); the DDP mechanism is run in ddp.md's tests",
    "original_module": "the PEFT wrapper's copy of a modules_to_save module (PEFT is not installed)",
    "sharded_ddp": "removed in transformers 4.35 (not an argument of 5.25.0): the runtime page shows its TypeError",
    "total_batched_samples": "4.27-4.46 Trainer counter, read from the 4.27.0 wheel (ledger trainer-427-total-batched-samples)",
}


def _source_words() -> set[str]:
    words: set[str] = set()
    for pattern in SOURCES:
        for path in SITE.glob(pattern):
            words.update(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", path.read_text(encoding="utf-8", errors="ignore")))
    return words


def test_pages_exist():
    assert len(PAGES) >= 6, [p.name for p in PAGES]


def test_backticked_names_exist_in_the_installed_sources():
    words = _source_words()
    assert {"per_device_train_batch_size", "deepspeed_init", "fsdp_config"} <= words  # the sources were read
    unknown = {}
    for page in PAGES:
        body = page.read_text(encoding="utf-8").split("\n## Provenance", 1)[0]
        for span in re.findall(r"`([^`\n]+)`", body):
            for tok in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", span):
                if "_" in tok.strip("_") and tok not in words and tok not in OURS:
                    unknown.setdefault(tok, set()).add(page.name)
    assert not unknown, f"names in no installed source: {unknown}"


def test_allowlist_entries_are_still_used():
    text = "\n".join(p.read_text(encoding="utf-8") for p in PAGES)
    assert not [name for name in OURS if name not in text]

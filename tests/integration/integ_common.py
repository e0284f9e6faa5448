"""Shared helpers for tests/integration (pre-commit, CI output formats, editor schemas, versions)."""
from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parent / "data"
SKILL = REPO / "sub-skills" / "distributed-training-backends"
VALIDATOR = SKILL / "scripts" / "validate_backend_config.py"
PLANNER = SKILL / "scripts" / "plan_backend.py"
TRIAGE = REPO / "sub-skills" / "failure-triage" / "scripts" / "triage_log.py"
AVAILABILITY = REPO / "sub-skills" / "distributed-and-backends" / "scripts" / "check_backend_availability.py"
EXAMPLES = SKILL / "examples"
SCHEMAS = SKILL / "schemas"
README = (REPO / "README.md").read_text(encoding="utf-8")
VERSION = (REPO / "VERSION").read_text(encoding="utf-8").strip()


def ci_section() -> str:
    return README.split("## Use in CI and editors\n", 1)[1].split("\n## ", 1)[0]


def ci_blocks(lang: str) -> list[str]:
    """Fenced blocks of one language in the README's 'Use in CI and editors' section."""
    return re.findall(rf"```{lang}\n(.*?)```", ci_section(), re.S)


def precommit_snippet() -> str:
    (block,) = [b for b in ci_blocks("yaml") if b.startswith("repos:")]
    return block


def workflow_snippet() -> str:
    (block,) = [b for b in ci_blocks("yaml") if "jobs:" in b]
    return block

"""references/validator-rules.md is generated from the rule registry and must be in sync."""
from __future__ import annotations

import re


def test_reference_in_sync(bv, repo_root):
    path = repo_root / "sub-skills" / "distributed-training-backends" / "references" / "validator-rules.md"
    assert path.is_file(), f"missing {path}; run: {bv.docs.REGEN}"
    assert path.read_text(encoding="utf-8") == bv.docs.render(), f"out of date; run: {bv.docs.REGEN}"


def test_reference_lists_every_rule_with_anchor_and_versions(bv):
    text = bv.docs.render()
    assert "accelerate 1.15.0" in text and "deepspeed 0.19.8" in text
    assert "## Contents" in text
    headings = set(re.findall(r"^### (\S+)$", text, re.M))
    assert headings == set(bv.core.REGISTRY)
    anchors = set(re.findall(r"\]\(#([a-z0-9-]+)\)", text))
    slugs = {bv.docs.slug(h) for h in re.findall(r"^#{2,3} (.+)$", text, re.M)}
    assert anchors <= slugs, anchors - slugs

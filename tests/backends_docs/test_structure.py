"""Shape of the backend sub-skill: front matter, links, contents tables, troubleshooting rows
citing upstream sources and validator rules that exist."""
from __future__ import annotations

import re
import sys

import yaml

D = sys.modules["backends_docs__docs"]


def slug(heading: str) -> str:
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def test_front_matter_as_the_seed():
    text = (D.SUB / "SKILL.md").read_text()
    fm = yaml.safe_load(text.split("---")[1])
    assert fm["name"] == "distributed-training-backends"
    assert fm["disable-model-invocation"] is True
    assert fm["metadata"] == {"disco-role": "operating"}
    assert fm["license"] == "Apache 2.0"
    assert 0 < len(fm["description"]) <= 1024 and "<" not in fm["description"] and ">" not in fm["description"]
    assert len(text.splitlines()) < 200


def test_skill_links_every_reference_and_the_example():
    text = (D.SUB / "SKILL.md").read_text()
    links = set(re.findall(r"\]\(([^)#]+)", text))
    for ref in sorted((D.SUB / "references").glob("*.md")):
        assert f"references/{ref.name}" in links, f"{ref.name} not linked from SKILL.md"
    assert "examples/fsdp2.yaml" in links
    for sib in ("configuration-and-cli", "training-loop-integration", "checkpointing-and-tracking"):
        assert f"`../{sib}/`" in text


def test_references_open_with_contents_and_anchors_exist(docs):
    for path, text in docs.items():
        if path.name == "SKILL.md" or len(text.splitlines()) <= 100:
            continue
        head = text.split("\n## ", 2)
        assert head[1].startswith("Contents"), f"{path.name}: no table of contents first"
        anchors = {slug(h) for h in re.findall(r"^#{2,6} (.+)$", D.strip_fences(text), re.M)}
        toc = re.findall(r"\]\(#([^)]+)\)", head[1])
        assert toc and set(toc) <= anchors, (path.name, set(toc) - anchors)
    # anchors used from SKILL.md into references
    skill = (D.SUB / "SKILL.md").read_text()
    for target, anchor in re.findall(r"\]\((references/[\w.-]+\.md)#([^)]+)\)", skill):
        t = (D.SUB / target).read_text()
        assert anchor in {slug(h) for h in re.findall(r"^#{2,6} (.+)$", t, re.M)}, (target, anchor)


def test_relative_links_exist(docs):
    for path, text in docs.items():
        for target in re.findall(r"\]\(([^)#\s]+)", text):
            if "://" in target:
                continue
            assert (path.parent / target).exists(), (path.name, target)


def test_references_are_lean(docs):
    for path, text in docs.items():
        body = text.split("\n## Provenance", 1)[0]  # the maintainers' evidence section at the end is not read
        assert len(body.splitlines()) <= 220, path.name


def test_troubleshooting_rows_cite_source_and_rule(oracle):
    text = (D.REFS / "troubleshooting.md").read_text()
    rows = D.table_rows(text, "Symptom")
    assert len(rows) >= 35
    rule_ids = set(oracle["facts"]["rule_ids"])
    assert rule_ids, "validator --list-rules returned nothing"
    named = 0
    for cells in rows:
        assert len(cells) == 5, cells
        assert any("::" in s for s in D.spans_in(cells[3])), f"no file::function source: {cells[0]}"
        ids = D.spans_in(cells[4])
        if cells[4] != "—":
            assert ids, cells
        for rid in ids:
            if rid.startswith("--"):
                continue
            assert rid in rule_ids, f"unknown validator rule {rid}"
            named += 1
    assert named >= 25


def test_validator_rules_reference_linked_if_present():
    rules_md = D.SUB / "references" / "validator-rules.md"
    if rules_md.exists():
        assert "references/validator-rules.md" in (D.SUB / "SKILL.md").read_text()
    else:
        assert "validator-rules.md" not in (D.SUB / "SKILL.md").read_text()


def test_skill_validator_commands(oracle):
    """The SKILL.md command lines use real validator flags; the first one (on the shipped FSDP2
    example) exits 0 when run from the repository root."""
    import shlex
    import subprocess

    text = (D.SUB / "SKILL.md").read_text()
    blocks = [b for info, b in D.fenced_blocks(text) if info == "bash"]
    assert blocks
    lines = [l for l in blocks[0].splitlines() if l.strip()]
    flags = set(oracle["facts"]["validator_flags"])
    for line in lines:
        for w in shlex.split(line):
            if w.startswith("--"):
                assert w in flags, w
    argv = shlex.split(lines[0])
    assert argv[1] == "sub-skills/distributed-training-backends/scripts/validate_backend_config.py"
    proc = subprocess.run([sys.executable, *argv[1:]], cwd=D.REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr

"""Names written in a page's inline code spans, for the name checks of the sub-skills
(tests/backends_docs/test_deepspeed_ref_names.py, tests/accel_siblings/test_ref_names.py): flags,
env variables and snake_case identifiers, outside fenced blocks and path-like spans, and the set of
words a package tree's sources contain."""
from __future__ import annotations

import re
from pathlib import Path

WORD = r"[A-Za-z_][A-Za-z0-9_]*|--[a-z][a-z0-9_-]*"


def span_names(text: str) -> list[str]:
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    out = []
    for span in re.findall(r"`([^`]+)`", text):
        if "/" in span and " " not in span:
            continue  # a path
        for tok in re.findall(r"--[a-z][a-z0-9_-]*|[A-Za-z_][A-Za-z0-9_]*", span):
            if tok.startswith("--") or "_" in tok.strip("_") or (tok.isupper() and len(tok) > 3):
                out.append(tok)
    return out


def source_words(*roots: Path) -> set[str]:
    words: set[str] = set()
    for root in roots:
        for f in ([root] if root.is_file() else root.rglob("*.py")):
            words |= set(re.findall(WORD, f.read_text(errors="replace")))
    return words

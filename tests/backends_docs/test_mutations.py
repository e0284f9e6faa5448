"""Mutation check of the name resolver on the documents' own names: every identifier-like code
span, with two inner characters swapped (a typical typo), must stop resolving."""
from __future__ import annotations

import re
import sys

D = sys.modules["backends_docs__docs"]


def typo(s: str) -> str:
    i = len(s) // 2
    while i < len(s) - 1 and s[i] == s[i + 1]:
        i += 1
    return s[:i] + s[i + 1] + s[i] + s[i + 2:]


def test_typos_of_documented_names_are_rejected(docs, resolver):
    names = set()
    for path, text in docs.items():
        for _, span in D.code_spans(text):
            if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{5,}", span) and span not in resolver.values:
                names.add(span)
    assert len(names) >= 200
    accepted = sorted(t for t in (typo(n) for n in names) if resolver.resolve(t, D.SUB / "SKILL.md"))
    # a swapped pair may by chance spell another real name; allow at most 2% of such collisions
    print(f"typo mutants: {len(names)}, still resolving: {accepted}")
    assert len(accepted) <= 0.02 * len(names), accepted

"""Engine of find_docs.py: split the bundle's Markdown into heading sections and rank them for a query.

Standard library only. A section is the text under one heading up to the next heading of any level
(fenced code blocks are not scanned for headings); a section longer than WINDOW lines or
WINDOW_CHARS characters is cut into windows so that a hit names a range an agent can read whole.
Ranking is BM25 over word tokens, with the heading trail counted HEADING_WEIGHT times and a bonus when the whole query occurs verbatim (an
error message pasted as the query).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

WINDOW = 60             # most lines in one hit; longer sections are cut at blank lines where possible
WINDOW_CHARS = 3000     # most characters in one hit (~750 tokens): a table of long rows is cut sooner
HEADING_WEIGHT = 3
K1, B = 1.2, 0.75
PHRASE_BONUS = 2.0      # score multiplier when the normalised query occurs in the section verbatim

HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")
WORD = re.compile(r"[a-z0-9_]+(?:[.\-/][a-z0-9_]+)*")
SKIP_TITLES = frozenset({"contents", "table of contents", "index", "sources", "evidence"})
STOP = frozenset("a an and are as at be by can do does for from how i if in is it its my of on or "
                 "the this to was what when where which why with you your".split())


@dataclass
class Section:
    path: str                 # relative to the bundle root, '/'-separated
    start: int                # first line (1-based, the heading line when there is one)
    end: int                  # last line, inclusive
    trail: list[str]          # headings from the file's title down to this section's
    text: str
    tf: dict[str, int] = field(default_factory=dict, repr=False)
    length: int = 0


def _stem(w: str) -> str:
    for suf in ("ing", "ed", "es", "s"):
        if len(w) > len(suf) + 3 and w.endswith(suf):
            return w[: -len(suf)]
    return w


SPLIT = re.compile(r"[._\-/]+")
_WORD_TOKENS: dict[str, tuple[str, ...]] = {}     # a word's tokens, computed once per distinct word


def _word_tokens(word: str) -> tuple[str, ...]:
    whole = word.strip("._-/")
    out: list[str] = []
    if whole:
        parts = [p for p in SPLIT.split(whole) if p]
        if len(parts) > 1:
            out.append(whole)
            if len(parts) == 2 and parts[1].isdigit():
                out.append(parts[0] + parts[1])        # ZeRO-3 -> zero3, stage-2 -> stage2
        out.extend(_stem(p) for p in parts if p not in STOP)
    return tuple(out)


def tokens(text: str) -> list[str]:
    """Lower-cased words; an identifier such as zero_optimization.stage or NCCL_SOCKET_IFNAME counts
    whole and by its parts, so either spelling in a query finds it."""
    out: list[str] = []
    cache = _WORD_TOKENS
    for w in WORD.findall(text.lower()):
        t = cache.get(w)
        if t is None:
            t = cache[w] = _word_tokens(w)
        out.extend(t)
    return out


def bundle_files(root: Path) -> list[Path]:
    """The Markdown an agent reads: the router, the cross-cutting references, each sub-skill's SKILL.md
    and references (not the benchmarks, tests or DALLE-pytorch licence texts)."""
    files = [root / "SKILL.md"] if (root / "SKILL.md").is_file() else []
    files += sorted((root / "references").rglob("*.md")) if (root / "references").is_dir() else []
    subs = root / "sub-skills"
    if subs.is_dir():
        for sk in sorted(p for p in subs.iterdir() if p.is_dir()):
            if (sk / "SKILL.md").is_file():
                files.append(sk / "SKILL.md")
            if (sk / "references").is_dir():
                files += sorted((sk / "references").rglob("*.md"))
    return files


def _windows(lines: list[str], start: int, end: int):
    """Cut lines start..end (1-based, inclusive) into runs of at most WINDOW lines and about WINDOW_CHARS
    characters (a single longer line stays whole), preferring to cut after a blank line in the run's
    second half."""
    a = start
    while a <= end:
        b, size = a, len(lines[a - 1]) + 1
        while b < end and b - a + 1 < WINDOW and size + len(lines[b]) + 1 <= WINDOW_CHARS:
            size += len(lines[b]) + 1
            b += 1
        if b < end:
            for cut in range(b, a + (b - a) // 2, -1):
                if not lines[cut - 1].strip():
                    b = cut
                    break
        yield a, b
        a = b + 1


def sections(path: Path, rel: str) -> list[Section]:
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    heads: list[tuple[int, int, str]] = []          # (line, level, title)
    fenced = False
    for i, line in enumerate(lines, 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        m = None if fenced else HEADING.match(line)
        if m:
            heads.append((i, len(m.group(1)), m.group(2).strip()))
    bounds = []
    if not heads or heads[0][0] > 1:
        bounds.append((1, (heads[0][0] - 1) if heads else len(lines), 0, ""))
    for k, (ln, lvl, title) in enumerate(heads):
        bounds.append((ln, (heads[k + 1][0] - 1) if k + 1 < len(heads) else len(lines), lvl, title))
    out, stack = [], []                              # stack of (level, title)
    for a, b, lvl, title in bounds:
        if lvl:
            while stack and stack[-1][0] >= lvl:
                stack.pop()
            stack.append((lvl, title))
        trail = [t for _, t in stack] or [Path(rel).name]
        if b < a or not any(x.strip() for x in lines[a - 1:b]):
            continue
        if title.lower() in SKIP_TITLES or title.lower().startswith("provenance"):
            continue    # a list of the file's headings, or the maintainers' evidence trail: not an answer
        for wa, wb in _windows(lines, a, b):
            out.append(Section(rel, wa, wb, list(trail), "\n".join(lines[wa - 1:wb])))
    return out


class Index:
    def __init__(self, root: Path, sub_skill: str | None = None):
        self.root = root
        self.sections: list[Section] = []
        for f in bundle_files(root):
            rel = f.relative_to(root).as_posix()
            if sub_skill and not rel.startswith(f"sub-skills/{sub_skill}/"):
                continue
            self.sections.extend(sections(f, rel))
        self.df: dict[str, int] = {}
        for s in self.sections:
            toks = tokens(s.text) + tokens(" ".join(s.trail)) * (HEADING_WEIGHT - 1) + tokens(Path(s.path).stem)
            for t in toks:
                s.tf[t] = s.tf.get(t, 0) + 1
            s.length = len(toks)
            for t in s.tf:
                self.df[t] = self.df.get(t, 0) + 1
        n = len(self.sections)
        self.avg = (sum(s.length for s in self.sections) / n) if n else 1.0

    def search(self, query: str, limit: int = 5) -> list[tuple[float, Section]]:
        q = list(dict.fromkeys(tokens(query)))
        if not q:
            return []
        n = len(self.sections)
        phrase = " ".join(query.lower().split())
        scored = []
        for s in self.sections:
            score = 0.0
            for t in q:
                f = s.tf.get(t)
                if not f:
                    continue
                idf = math.log(1 + (n - self.df[t] + 0.5) / (self.df[t] + 0.5))
                score += idf * f * (K1 + 1) / (f + K1 * (1 - B + B * s.length / self.avg))
            if score and len(phrase) >= 12 and phrase in " ".join(s.text.lower().split()):
                score *= PHRASE_BONUS
            if score > 0:
                scored.append((score, s))
        scored.sort(key=lambda x: (-x[0], x[1].path, x[1].start))
        return scored[:limit]


def snippet(s: Section, width: int = 160) -> str:
    """The first line of prose under the heading, shortened to width characters."""
    for line in s.text.splitlines()[1:] if HEADING.match(s.text.splitlines()[0]) else s.text.splitlines():
        t = line.strip().lstrip("-*>| ").strip()
        if t and not FENCE.match(t) and not set(t) <= set("-|: "):
            return t if len(t) <= width else t[: width - 1] + "…"
    return ""

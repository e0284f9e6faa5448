#!/usr/bin/env python3
"""Find the root cause in a failed distributed-training log and say what fixes it.

Standard library + PyYAML only; never imports torch, accelerate or deepspeed.
Run with --help for usage, examples and exit codes.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
import time
from pathlib import Path
from typing import Iterable, Iterator

HERE = Path(__file__).resolve().parent
CATALOG_DIR = HERE.parent / "catalog"

# Bounds (all overridable on the command line or through triage_lines keywords).
MAX_BYTES = 64 * 1024 * 1024     # bytes read per input; the rest is skipped with a notice
MAX_LINE = 8192                  # characters of one line that are kept and matched
_CHUNK = 1 << 20                 # bytes read at a time
MAX_FINDINGS = 200               # findings kept in the report
FOLLOW_LINES = 6                 # lines after an unmatched exception line searched for its message
MATCH_CHARS = 2048               # characters of a line the catalog patterns see
MAX_SECONDS = 120                # analysis time budget per run; the rest is skipped with a notice
MAX_TEXT = 500                   # characters of a line shown in the report

ROLES = ("root", "cascade", "warning")
REQUIRED = ("id", "library", "versions", "role", "pattern", "example", "source", "cause", "fix")
OPTIONAL = ("reference", "specializes")

EXIT_MATCHED, EXIT_UNMATCHED, EXIT_USAGE = 0, 1, 2

# The pinned library versions the catalog's signatures were reproduced against (references/versions.md).
MIRRORS = "accelerate 1.15.0, deepspeed 0.19.8, torch 2.13.0, DALLE-pytorch 1.6.6"


def bundle_version() -> str:
    """The bundle version from the one VERSION file at the bundle root (beside the router SKILL.md),
    found by walking up from this file; 'unknown' when the script was copied out of the bundle."""
    here = HERE
    for _ in range(6):
        if (here / "VERSION").is_file() and (here / "SKILL.md").is_file():
            try:
                return (here / "VERSION").read_text(encoding="utf-8").strip() or "unknown"
            except OSError:
                return "unknown"
        if here.parent == here:
            break
        here = here.parent
    return "unknown"


def version_line(prog: str) -> str:
    """What ``PROG --version`` prints."""
    return f"{prog} {bundle_version()} (pytorch-distributed-training bundle; signatures mirror {MIRRORS})"

HELP_EPILOG = """\
examples:
  triage_log.py train.log                      # text report: root cause, fix, secondary findings
  triage_log.py rank0.log rank1.log            # several files are read as one log, in order
  kubectl logs job/train | triage_log.py -     # read stdin
  triage_log.py --output json train.log        # one JSON document (contract below)
  triage_log.py --list-signatures              # the catalog: id, role, library, versions
  triage_log.py --list-signatures --output json

what it does:
  Cleans the log (ANSI colours, [rank3]: / [default0]: / "3: " / "host: " prefixes, Rich-boxed
  tracebacks, CR and CRLF, NUL bytes, invalid UTF-8), then takes the FIRST real failure in input
  order as the root cause: the exception line that ends the first traceback (not its frames), or
  the first line matching a catalog entry of role "root". Lines matching "cascade" entries
  (ChildFailedError summaries, SIGTERM/SIGKILL notices, other ranks' NCCL timeouts, launcher
  return codes) and "warning" entries (misleading warnings) are secondary findings; a root-role
  match after the root cause is reported as cascade. An exception nobody knows still becomes the
  root cause, with signature null.

json output:
  {"root_cause": {"line", "rank", "text", "signature", "cause", "fix", "reference"} or null,
   "findings": [ {same keys + "role": "root"|"cascade"|"warning"} ]}
  line is 1-based in the concatenated input; rank is an int or null.

bounds:
  At most --max-bytes per input are read (for a regular file larger than that, its tail is read
  and line numbers still count the skipped head); lines are cut at --max-line characters and
  patterns see their first 2048; the analysis stops after --max-seconds. A notice on stderr says
  when input was skipped or cut.

flight-recorder dumps:
  triage_log.py /tmp/fr/        # a folder of per-rank dumps, or the files, or fr_trace's output
  Inputs that are dumps (found by their first bytes; --fr-dump forces it) go to fr_dump.py, which
  names the rank and collective that diverged; exit 0 when it names one, 1 when the dumps agree.
  Pickled dumps are never unpickled (references/flight-recorder.md).

exit codes:
  0  a root cause was found and matched a catalog entry
  1  a failure was found but matched no catalog entry, or no failure was found
  2  usage error, unreadable input or unreadable catalog
"""


class CatalogError(Exception):
    """The catalog cannot be loaded (bad YAML, missing field, invalid regex)."""


# --------------------------------------------------------------------------- catalog


def _words_of_literal(lit: str) -> list[str]:
    """Whole words inside a literal run, those bounded by non-word characters inside it."""
    words = []
    for m in re.finditer(r"[A-Za-z0-9_]+", lit):
        if m.start() > 0 and m.end() < len(lit):
            words.append(m.group(0).lower())
    return words


def _trigger_words(pattern: str) -> set[str] | None:
    """Words one of which every line the pattern matches contains, or None when unknown.

    Only the top-level sequence is analysed: its literal runs must all occur in a match, so any
    whole word inside one of them is a valid trigger. Used as a prefilter; the regex decides.
    """
    try:
        import re._parser as sre_parse  # Python >= 3.11
    except ImportError:  # pragma: no cover - older Pythons
        try:
            import sre_parse  # type: ignore
        except ImportError:
            return None
    try:
        tree = sre_parse.parse(pattern)
    except Exception:
        return None
    if tree.state.flags & re.IGNORECASE:
        pass  # words are compared lower-cased anyway
    lits, cur = [], []
    literal = sre_parse.LITERAL
    for op, av in tree:
        if op is literal:
            cur.append(chr(av))
        else:
            if cur:
                lits.append("".join(cur))
            cur = []
            lits.append("\0")  # a non-word boundary between literal runs
    if cur:
        lits.append("".join(cur))
    # Words strictly inside a run; a run's edge might continue into a regex atom.
    best: list[str] = []
    for lit in "".join(lits).split("\0"):
        w = _words_of_literal(lit)
        best.extend(w)
    if not best:
        return None
    # One word is enough; prefer the longest (rarest in noise).
    return {max(best, key=len)}


class Entry:
    __slots__ = ("id", "role", "regex", "cause", "fix", "reference", "library", "versions", "raw",
                 "specializes", "file", "index")

    def __init__(self, raw: dict, where: str):
        missing = [k for k in REQUIRED if k not in raw]
        if missing:
            raise CatalogError(f"{where}: entry {raw.get('id', '?')!r} lacks {', '.join(missing)}")
        if raw["role"] not in ROLES:
            raise CatalogError(f"{where}: entry {raw['id']!r} has role {raw['role']!r} (not one of {ROLES})")
        try:
            self.regex = re.compile(str(raw["pattern"]))
        except re.error as exc:
            raise CatalogError(f"{where}: entry {raw['id']!r} pattern does not compile: {exc}") from None
        self.id = str(raw["id"])
        self.role = raw["role"]
        self.cause = str(raw["cause"]).strip()
        self.fix = str(raw["fix"]).strip()
        self.reference = raw.get("reference")
        self.library = str(raw["library"])
        self.versions = str(raw["versions"])
        self.raw = raw
        spec = raw.get("specializes", [])
        if isinstance(spec, str):
            spec = [spec]
        if not isinstance(spec, list) or not all(isinstance(x, str) for x in spec):
            raise CatalogError(f"{where}: entry {raw['id']!r}: specializes must be a list of ids")
        self.specializes = tuple(spec)
        self.file = ""
        self.index = 0


def match_order(entries: list[Entry]) -> list[Entry]:
    """The one order in which entries are tried; the first whose pattern matches a line wins.

    1. role: every root entry before every cascade entry before every warning entry;
    2. specificity: an entry that declares ``specializes: [ids]`` (a narrower pattern for a case
       of those entries' message) is tried before them, and before anything they specialize in
       turn (sort by depth of the specializes chain, deepest first);
    3. position: catalog file name (sorted), then the entry's place in its file.
    Raises CatalogError for an unknown id, a different role, or a cycle.
    """
    by_id = {e.id: e for e in entries}
    depth: dict[str, int] = {}

    def walk(e: Entry, stack: tuple) -> int:
        if e.id in depth:
            return depth[e.id]
        if e.id in stack:
            raise CatalogError(f"entry {e.id!r}: specializes forms a cycle ({' -> '.join(stack + (e.id,))})")
        d = 0
        for gid in e.specializes:
            g = by_id.get(gid)
            if g is None:
                raise CatalogError(f"entry {e.id!r} specializes unknown id {gid!r}")
            if g.role != e.role:
                raise CatalogError(f"entry {e.id!r} ({e.role}) specializes {gid!r} of another role ({g.role})")
            d = max(d, walk(g, stack + (e.id,)) + 1)
        depth[e.id] = d
        return d

    for e in entries:
        walk(e, ())
    role = {r: n for n, r in enumerate(ROLES)}
    return sorted(entries, key=lambda e: (role[e.role], -depth[e.id], e.file, e.index))


class Catalog:
    """All entries of catalog/*.yaml, with a word prefilter for fast matching."""

    def __init__(self, entries: list[Entry]):
        self.entries = entries
        self.ordered = match_order(entries)
        self.by_id = {e.id: e for e in entries}
        self.always: list[int] = []
        self.by_word: dict[str, list[int]] = {}
        self.triggers: set[str] = set()
        for i, e in enumerate(self.ordered):
            words = _trigger_words(e.regex.pattern)
            if words is None:
                self.always.append(i)
            else:
                for w in words:
                    self.by_word.setdefault(w, []).append(i)
                    self.triggers.add(w)

    def match(self, line: str) -> Entry | None:
        line = line[:MATCH_CHARS]
        if self.by_word:
            found = set(_WORD.findall(line.lower()))
            cand = [i for w in found.intersection(self.by_word) for i in self.by_word[w]]
            cand = sorted(set(cand).union(self.always))
        else:
            cand = self.always
        for i in cand:
            e = self.ordered[i]
            if e.regex.search(line):
                return e
        return None

    def matches(self, line: str) -> list[Entry]:
        """Every entry whose pattern matches the line, in match order (the first is what match returns)."""
        line = line[:MATCH_CHARS]
        return [e for e in self.ordered if e.regex.search(line)]


_WORD = re.compile(r"[a-z0-9_]+")


def load_catalog(directory: str | os.PathLike | None = None) -> Catalog:
    """Load every *.yaml under the catalog folder; raise CatalogError on any defect."""
    try:
        import yaml
    except ImportError:
        raise CatalogError("PyYAML is not installed (pip install PyYAML)") from None
    folder = Path(directory) if directory is not None else CATALOG_DIR
    if not folder.is_dir():
        raise CatalogError(f"catalog folder not found: {folder}")
    entries: list[Entry] = []
    seen: dict[str, str] = {}
    for path in sorted(folder.glob("*.yaml")):
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            raise CatalogError(f"{path.name}: cannot read: {str(exc).splitlines()[0]}") from None
        if data is None:
            continue
        if not isinstance(data, list):
            raise CatalogError(f"{path.name}: top level must be a list of entries")
        for n, raw in enumerate(data):
            where = f"{path.name}[{n}]"
            if not isinstance(raw, dict):
                raise CatalogError(f"{where}: entry must be a mapping")
            e = Entry(raw, where)
            e.file, e.index = path.name, n
            if e.id in seen:
                raise CatalogError(f"{where}: duplicate id {e.id!r} (also in {seen[e.id]})")
            seen[e.id] = path.name
            entries.append(e)
    return Catalog(entries)


# --------------------------------------------------------------------------- cleaning

_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])")
_CTRL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_PREFIXES = [
    (re.compile(r"^\[(?:rank|default)(\d{1,6})\]:[ \t]?"), True),        # torch [rank3]: / [default0]:
    (re.compile(r"^\[(?:\d+,)?(\d{1,6})\]<std(?:out|err)>:[ \t]?"), True),  # mpirun [1,3]<stderr>:, horovodrun [3]<stderr>:
    (re.compile(r"^(\d{1,5}):[ \t]"), True),                              # srun -l / "3: "
    (re.compile(r"^\([^()]{0,80}\bpid=\d+[^()]{0,80}\)[ \t]?"), False),       # Ray "(Worker pid=12, ip=...)"
    # pdsh / deepspeed multi-node "host: ": a name with a digit (node01, 10.0.0.1, ip-10-0-0-1.ec2),
    # localhost, or any host-like name followed by something only a log line starts with
    (re.compile(r"^(?:localhost|[A-Za-z0-9-]*\d[A-Za-z0-9-]*(?:\.[A-Za-z0-9-]+)*):[ \t]"), False),
    (re.compile(r"^[A-Za-z0-9][A-Za-z0-9.-]{0,62}:[ \t](?=\[(?:rank|default)\d|Traceback|\s+File \"|\[\d{4}-\d\d-\d\d)"),
     False),
]
_NOT_HOST = re.compile(r"^[\w.-]*(?:Error|Exception|Warning|Interrupt|Exit|Failure|Fault)\d*\s*:")
_BOX_EDGE = re.compile(r"^\s*[╭╰┏┗╔╚+][─━═\-]")
_BOX_SIDE = "│┃║"
_RANK_IN_TEXT = re.compile(r"\[[Rr]ank ?(\d{1,6})\]")


def clean(line: str) -> tuple[str, int | None, bool]:
    """Return (text without prefixes, rank from a prefix or None, came-from-a-Rich-box)."""
    line = _ANSI.sub("", line)
    if "\x00" in line or _CTRL.search(line):
        line = _CTRL.sub("", line)
    rank = None
    for _ in range(3):
        for rx, is_rank in _PREFIXES:
            m = rx.match(line)
            if not m:
                continue
            if not is_rank and _NOT_HOST.match(line):
                continue
            if is_rank and rank is None:
                rank = int(m.group(1))
            line = line[m.end():]
            break
        else:
            break
    boxed = False
    s = line.strip()
    if s and s[0] in _BOX_SIDE:
        boxed = True
        s = s[1:]
        if s and s[-1] in _BOX_SIDE:
            s = s[:-1]
        line = "  " + s.strip()
    else:
        line = line.rstrip()
    return line, rank, boxed


def _rank_in_text(text: str) -> int | None:
    m = _RANK_IN_TEXT.search(text)
    return int(m.group(1)) if m else None


# --------------------------------------------------------------------------- input

def _iter_binary(fh, max_bytes: int, max_line: int, notices: list, name: str,
                 start_line: int = 0) -> Iterator[tuple[int, str]]:
    """Yield (1-based line number, decoded physical line) from a binary stream, bounded.

    Reads chunks (read1 returns what a pipe has, so a live stream is processed as it comes),
    keeps at most 4 * max_line bytes of one line, stops after max_bytes.
    """
    read = 0
    n = start_line
    keep = max_line * 4
    carry = b""
    carry_cut = False
    cut_lines = 0
    reader = getattr(fh, "read1", fh.read)
    while read < max_bytes:
        buf = reader(min(_CHUNK, max_bytes - read))
        if not buf:
            break
        read += len(buf)
        last_nl = buf.rfind(b"\n")
        if last_nl < 0:
            if not carry_cut:
                carry += buf
                if len(carry) > keep:
                    carry, carry_cut = carry[:keep], True
            continue
        head, tail = buf[:last_nl], buf[last_nl + 1:]
        first_nl = head.find(b"\n")
        first = head if first_nl < 0 else head[:first_nl]
        if not carry_cut:
            carry += first[: keep + 1]
        line0 = carry
        if len(line0) > keep or carry_cut:
            cut_lines += 1
        n += 1
        yield n, line0[:keep].decode("utf-8", errors="replace")[:max_line]
        if first_nl >= 0:
            for text in head[first_nl + 1:].decode("utf-8", errors="replace").split("\n"):
                n += 1
                if len(text) > max_line:
                    cut_lines += 1
                    text = text[:max_line]
                yield n, text
        carry, carry_cut = tail[: keep + 1], False
        if len(carry) > keep:
            carry, carry_cut = carry[:keep], True
    if carry or carry_cut:
        n += 1
        yield n, carry[:keep].decode("utf-8", errors="replace")[:max_line]
    if read >= max_bytes:
        try:
            more = reader(1)
        except (OSError, ValueError):
            more = b""
        if more:
            notices.append(f"{name}: stopped after {max_bytes} bytes (--max-bytes); the rest was not read")
    if cut_lines:
        notices.append(f"{name}: {cut_lines} line(s) longer than {max_line} characters were cut")


def _iter_path(path: str, max_bytes: int, max_line: int, notices: list, start_line: int):
    with open(path, "rb") as fh:
        try:
            st = os.fstat(fh.fileno())
            size = st.st_size if os.path.isfile(path) else -1
        except OSError:
            size = -1
        skipped_lines = 0
        if size > max_bytes:
            # Errors sit at the end of a failed run's log: read the tail, count the head's lines.
            skip_to = size - max_bytes
            done = 0
            while done < skip_to:
                buf = fh.read(min(1 << 22, skip_to - done))
                if not buf:
                    break
                done += len(buf)
                skipped_lines += buf.count(b"\n")
            if done and not buf.endswith(b"\n"):
                fh.readline(max_bytes)  # finish the partial line
                skipped_lines += 1
            notices.append(f"{path}: {size} bytes; only the last {max_bytes} bytes were read "
                           f"(--max-bytes), line numbers still count from the top")
        yield from _iter_binary(fh, max_bytes, max_line, notices, path, start_line + skipped_lines)


# --------------------------------------------------------------------------- analysis

_TB_START = re.compile(r"^\s*(?:Traceback(?: \(|$)|[╭┏╔+][─━═\-]+ Traceback)")
_EXC_LINE = re.compile(r"^([A-Za-z_][\w.]*?(?:Error|Exception|Exit|Interrupt|Failure|Fault|Errno\]?))(?::|$)|"
                       r"^([A-Za-z_][\w.]*\.[A-Z]\w*):\s")
_EXC_OUT = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception)(?::\s|:?$)")
_STRUCT_KEYS = ("rror", "xception", "raceback", "Exit", "Interrupt", "Failure", "Fault", "Errno",
                "During handling", "The above exception", "│", "┃", "║", "╭", "╰")
_FRAME = re.compile(r'^File "[^"]*", line \d+')
# an exception line: a dotted name whose last part starts upper-case, then ": message" or nothing
_EXC_SHAPE = re.compile(r"^(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?::(?:\s|$)|$)")
_CHAIN = ("During handling of the above exception", "The above exception was the direct cause")


def _record(line_no, rank, text, entry: Entry | None, role: str) -> dict:
    return {
        "line": line_no,
        "rank": rank,
        "text": text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + "…",
        "signature": entry.id if entry else None,
        "cause": entry.cause if entry else None,
        "fix": entry.fix if entry else None,
        "reference": entry.reference if entry else None,
        "role": role,
    }


_UNKNOWN_CAUSE = ("No catalog entry matches this failure; it is the first error in the log, the lines "
                  "after it are probably its consequences.")
_UNKNOWN_FIX = ("Read the traceback ending at this line; look it up in the failure-triage references "
                "(sub-skills/failure-triage/SKILL.md routes by symptom).")
_CASCADE_ONLY_CAUSE = ("Only secondary failures were found (launcher summaries, signals, other ranks' "
                       "timeouts); the rank that failed first did not print its error into this log.")
_CASCADE_ONLY_FIX = ("Find the first failing rank's own output: rerun with per-rank logs (torchrun --tee 3 "
                     "or --log-dir) and triage that rank's log.")


class _Triage:
    """Streaming state: open tracebacks per prefix rank, candidates for the root cause, findings."""

    def __init__(self, catalog: Catalog):
        self.cat = catalog
        self.root: dict | None = None        # earliest root candidate so far (by input line)
        self.cands: dict = {}                # dedupe key -> candidate record (capped)
        self.secondary: dict = {}            # dedupe key -> cascade / warning record (capped)
        self.first_cascade: dict | None = None
        self.tb: dict = {}                   # rank key -> {"indent": int, "pending": (entry, record) | None}
        self.last_exc: dict = {}             # rank key -> record of the exception line that ended its last traceback
        self.chain: dict = {}                # rank key -> that record, while a chained traceback follows it
        self.follow: dict = {}               # rank key -> (unmatched exception record, lines left to look at)
        self.fast = not catalog.always

    @staticmethod
    def _key(rec: dict):
        return (rec["signature"], rec["signature"] is None and rec["text"])

    def _candidate(self, rec: dict):
        if self.root is None or rec["line"] < self.root["line"]:
            self.root = rec
        # keep the two earliest records per failure: the first may be the root, the second then
        # shows the repetition (the same error on another rank) as cascade
        k0, k1 = self._key(rec) + (0,), self._key(rec) + (1,)
        first, second = self.cands.get(k0), self.cands.get(k1)
        if first is None:
            if len(self.cands) < 2 * MAX_FINDINGS:
                self.cands[k0] = rec
        elif rec["line"] < first["line"]:
            self.cands[k0], self.cands[k1] = rec, first
        elif second is None or rec["line"] < second["line"]:
            self.cands[k1] = rec

    def _note_secondary(self, rec: dict):
        if rec["role"] == "cascade" and self.first_cascade is None:
            self.first_cascade = rec
        k = (rec["role"],) + self._key(rec)
        if k not in self.secondary and len(self.secondary) < MAX_FINDINGS:
            self.secondary[k] = rec

    def feed(self, line_no: int, raw: str):
        raw = raw.rstrip("\r\n")
        if self.fast and not self.tb and not self.follow and not self.chain:
            # most lines of a long log are progress and metrics: skip them unless they carry a
            # word some pattern needs or a traceback marker
            if not any(k in raw for k in _STRUCT_KEYS) and self.cat.triggers.isdisjoint(_WORD.findall(raw.lower())):
                return
        parts = raw.split("\r") if "\r" in raw else [raw]
        for part in parts:
            if part.strip():
                self._one(line_no, part)

    def _one(self, line_no: int, raw: str):
        text, rank, boxed = clean(raw)
        s = text.strip()
        if not s:
            return
        key = rank  # tracebacks are followed per prefix rank; "[Rank N]" in a message only labels it
        if rank is None and "ank" in s:
            rank = _rank_in_text(s)
        indent = len(text) - len(text.lstrip())
        if "Traceback (most recent call last)" in s or _TB_START.match(s):
            # also when glued to a progress bar ("0/800 [00:00<?]Traceback (most recent call last):")
            self._open(key, indent)
            return
        if s.startswith(_CHAIN):
            # "During handling ... another exception occurred": the next traceback of this rank is a
            # link of the same failure, not a new one
            if key in self.last_exc:
                self.chain[key] = self.last_exc[key]
            return
        state = self.tb.get(key)
        if state is None and _FRAME.match(s):
            # a paste that starts inside a traceback: its first frame opens it
            state = self._open(key, indent)
        entry = self.cat.match(s)
        follow = self.follow.get(key)
        if follow is not None:
            # the lines right after an unmatched exception line often carry the rest of its message
            rec, left = follow
            if entry is not None and entry.role == "root" and state is None:
                del self.follow[key]
                rec.update(signature=entry.id, cause=entry.cause, fix=entry.fix, reference=entry.reference)
                return
            if left <= 1 or state is not None:
                del self.follow[key]
            else:
                self.follow[key] = (rec, left - 1)
        if state is not None:
            if self._in_traceback(state, key, line_no, rank, text, s, indent, boxed, entry):
                return
        if entry is not None:
            if entry.role == "root":
                self._candidate(_record(line_no, rank, s, entry, "root"))
            else:
                self._note_secondary(_record(line_no, rank, s, entry, entry.role))
            return
        if _EXC_OUT.match(s):
            rec = _record(line_no, rank, s, None, "root")
            self._candidate(rec)
            self.follow[key] = (rec, FOLLOW_LINES)

    def _open(self, key, indent: int) -> dict:
        state = {"indent": indent, "pending": None}
        self.tb[key] = state
        return state

    def _in_traceback(self, state, key, line_no, rank, text, s, indent, boxed, entry) -> bool:
        """Handle a line while a traceback of this rank is open; False if it is not part of it."""
        if _BOX_EDGE.match(s) and s[0] in "╰┗╚+":
            return True  # the bottom edge of a Rich box: the exception line follows
        frame = boxed or indent > state["indent"] or s.startswith(('File "', "^", "~"))
        if frame:
            if entry is not None and entry.role == "root" and state["pending"] is None:
                # a frame (often the raise statement) names the failure: keep it for the exception line
                state["pending"] = (entry, _record(line_no, rank, s, entry, "root"))
            return True
        if not _EXC_SHAPE.match(s):
            # another process's line printed into the middle of the traceback: not its end
            return True
        # the exception line ends the traceback
        del self.tb[key]
        pending = state["pending"]
        if entry is not None and entry.role != "root":
            self._note_secondary(_record(line_no, rank, s, entry, entry.role))
            return True
        if entry is None and pending is not None:
            entry = pending[0]
        rec = _record(line_no, rank, s, entry, "root")
        prev = self.chain.pop(key, None)
        if prev is not None:
            # a later link of one chained failure: an unknown first link (a JSONDecodeError, a bare
            # ValueError) wrapped by a known library error takes the known link's line and entry;
            # otherwise the first link stays the failure
            if prev["signature"] is None and entry is not None:
                prev.update({k: v for k, v in rec.items() if k != "role"})
            self.last_exc[key] = prev
            return True
        self._candidate(rec)
        self.last_exc[key] = rec
        if entry is None:
            self.follow[key] = (rec, FOLLOW_LINES)
        return True

    def result(self) -> dict:
        # a traceback cut off before its exception line still names its failure by a frame
        for state in self.tb.values():
            if state["pending"] is not None:
                self._candidate(state["pending"][1])
        root = None
        findings = []
        if self.root is not None:
            root = {k: v for k, v in self.root.items() if k != "role"}
            if root["signature"] is None:
                root["cause"], root["fix"] = _UNKNOWN_CAUSE, _UNKNOWN_FIX
            for rec in self.cands.values():
                role = "root" if rec is self.root else "cascade"
                findings.append(dict(rec, role=role))
            if not any(f["role"] == "root" for f in findings):
                findings.append(dict(self.root, role="root"))
        elif self.first_cascade is not None:
            c = self.first_cascade
            root = {"line": c["line"], "rank": c["rank"], "text": c["text"], "signature": None,
                    "cause": _CASCADE_ONLY_CAUSE, "fix": _CASCADE_ONLY_FIX, "reference": None}
        findings += [dict(r) for r in self.secondary.values()]
        findings.sort(key=lambda r: r["line"])
        seen, out = set(), []
        for f in findings:
            k = (f["role"], f["signature"], f["signature"] is None and f["text"])
            if k not in seen and len(out) < MAX_FINDINGS:
                seen.add(k)
                out.append(f)
        return {"root_cause": root, "findings": out}


def triage_lines(lines: Iterable, catalog: Catalog | None = None, *, max_line: int = MAX_LINE,
                 max_lines: int | None = None) -> dict:
    """Triage an iterable of lines (str or bytes, with or without line ends).

    Returns {"root_cause": {...}|None, "findings": [...]}, the same dict --output json prints.
    Line numbers are 1-based positions in the iterable.
    """
    cat = catalog if catalog is not None else load_catalog()
    t = _Triage(cat)
    for n, line in enumerate(lines, 1):
        if max_lines is not None and n > max_lines:
            break
        if isinstance(line, (bytes, bytearray)):
            line = bytes(line[: max_line * 4]).decode("utf-8", errors="replace")
        elif not isinstance(line, str):
            line = str(line)
        if len(line) > max_line:
            line = line[:max_line]
        t.feed(n, line)
    return t.result()


def triage_text(text, catalog: Catalog | None = None) -> dict:
    """Triage a whole log given as str or bytes; same dict as --output json."""
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8", errors="replace")
    return triage_lines(iter(text.split("\n")), catalog)


def _triage_numbered(numbered: Iterable[tuple[int, str]], catalog: Catalog, max_seconds: float = MAX_SECONDS,
                     notices: list | None = None) -> dict:
    t = _Triage(catalog)
    deadline = time.monotonic() + max_seconds
    for n, line in numbered:
        t.feed(n, line)
        if n % 512 == 0 and time.monotonic() > deadline:
            if notices is not None:
                notices.append(f"analysis stopped at line {n} after {max_seconds:g} s (--max-seconds)")
            break
    return t.result()


# --------------------------------------------------------------------------- CLI

def exit_code(result: dict) -> int:
    root = result.get("root_cause")
    return EXIT_MATCHED if root and root.get("signature") else EXIT_UNMATCHED


def render_text(result: dict) -> str:
    out = []
    root = result["root_cause"]
    if root is None:
        out.append("No failure found in the log.")
    else:
        where = f"line {root['line']}" + (f", rank {root['rank']}" if root["rank"] is not None else "")
        out.append(f"ROOT CAUSE ({where}): {root['text']}")
        out.append(f"  signature: {root['signature'] or 'unknown (no catalog entry matches)'}")
        out.append(f"  cause:     {root['cause']}")
        out.append(f"  fix:       {root['fix']}")
        if root.get("reference"):
            out.append(f"  read:      {root['reference']}")
    others = [f for f in result["findings"] if not (root and f["line"] == root["line"] and f["role"] == "root")]
    if others:
        out.append("")
        out.append("SECONDARY FINDINGS (not the root cause):")
        for f in others:
            rank = f" rank {f['rank']}" if f["rank"] is not None else ""
            sig = f" [{f['signature']}]" if f["signature"] else ""
            out.append(f"  line {f['line']}{rank} {f['role']}{sig}: {f['text'][:200]}")
    return "\n".join(out) + "\n"


def list_signatures(cat: Catalog, fmt: str) -> str:
    rows = [{"id": e.id, "role": e.role, "library": e.library, "versions": e.versions,
             "reference": e.reference} for e in cat.entries]
    if fmt == "json":
        return json.dumps(rows, indent=2) + "\n"
    lines = [f"{r['id']}\t{r['role']}\t{r['library']}\t{r['versions']}" for r in rows]
    return "\n".join(lines) + f"\n{len(rows)} signatures\n"


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _positive(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {value!r}") from None
    if n < 1 or n > 1 << 40:
        raise argparse.ArgumentTypeError(f"out of range: {value}")
    return n


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="triage_log.py", description=__doc__.splitlines()[0],
                epilog=HELP_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("inputs", nargs="*", metavar="LOG", help="log files, or - for stdin")
    p.add_argument("--version", action="version", version=version_line("triage_log.py"))
    p.add_argument("--output", choices=("text", "json"), default="text", help="report format (default text)")
    p.add_argument("--list-signatures", action="store_true", help="print the catalog and exit")
    p.add_argument("--fr-dump", action="store_true",  # flight-recorder dumps (fr_dump.py)
                   help="read the inputs as flight-recorder dumps or fr_trace output (found without it too)")
    p.add_argument("--catalog", metavar="DIR", help="catalog folder (default: the sub-skill's catalog/)")
    p.add_argument("--max-bytes", type=_positive, default=MAX_BYTES,
                   help=f"bytes read per input (default {MAX_BYTES})")
    p.add_argument("--max-line", type=_positive, default=MAX_LINE,
                   help=f"characters kept per line (default {MAX_LINE})")
    p.add_argument("--max-seconds", type=_positive, default=MAX_SECONDS,
                   help=f"time budget for the analysis (default {MAX_SECONDS})")
    return p


def _write(stream, text: str):
    try:
        stream.write(text)
        stream.flush()
    except (BrokenPipeError, OSError, ValueError):
        pass
    except UnicodeEncodeError:
        try:
            stream.buffer.write(text.encode(getattr(stream, "encoding", None) or "utf-8", "backslashreplace"))
            stream.flush()
        except Exception:
            pass


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        cat = load_catalog(args.catalog)
    except CatalogError as exc:
        _write(sys.stderr, f"triage_log.py: error: {exc}\n")
        return EXIT_USAGE
    if args.list_signatures:
        _write(sys.stdout, list_signatures(cat, args.output))
        return 0
    if not args.inputs:
        _write(sys.stderr, "triage_log.py: error: give one or more log files, or - for stdin (see --help)\n")
        return EXIT_USAGE
    if args.inputs.count("-") > 1:
        _write(sys.stderr, "triage_log.py: error: stdin (-) can be given once\n")
        return EXIT_USAGE
    # flight-recorder dumps (fr_dump.py) -- begin
    if args.fr_dump and not (HERE / "fr_dump.py").is_file():
        _write(sys.stderr, "triage_log.py: error: --fr-dump needs fr_dump.py beside this script\n")
        return EXIT_USAGE
    if (HERE / "fr_dump.py").is_file() and (args.fr_dump or any(p != "-" and os.path.exists(p) for p in args.inputs)):
        import importlib.util
        spec = importlib.util.spec_from_file_location("fr_dump", HERE / "fr_dump.py")
        fr_dump = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(fr_dump)
        if args.fr_dump or any(p != "-" and fr_dump.is_dump_path(p) for p in args.inputs):
            try:
                report, fr_notices = fr_dump.triage_dumps(args.inputs, args.max_bytes)
            except fr_dump.FrDumpError as exc:
                _write(sys.stderr, f"triage_log.py: error: {exc}\n")
                return EXIT_USAGE
            for note in fr_notices:
                _write(sys.stderr, f"triage_log.py: notice: {note}\n")
            _write(sys.stdout, fr_dump.render(report, args.output))
            return fr_dump.exit_code(report)
    # flight-recorder dumps (fr_dump.py) -- end
    for path in args.inputs:
        if path != "-" and not os.path.exists(path):
            _write(sys.stderr, f"triage_log.py: error: {path}: no such file\n")
            return EXIT_USAGE
        if path != "-" and os.path.isdir(path):
            _write(sys.stderr, f"triage_log.py: error: {path}: is a directory\n")
            return EXIT_USAGE
    notices: list[str] = []
    state = {"line": 0}

    def numbered():
        for path in args.inputs:
            if path == "-":
                src = _iter_binary(sys.stdin.buffer, args.max_bytes, args.max_line, notices, "stdin",
                                   state["line"])
            else:
                src = _iter_path(path, args.max_bytes, args.max_line, notices, state["line"])
            for n, line in src:
                state["line"] = n
                yield n, line

    try:
        result = _triage_numbered(numbered(), cat, args.max_seconds, notices)
    except OSError as exc:
        _write(sys.stderr, f"triage_log.py: error: cannot read input: {exc.strerror or exc}\n")
        return EXIT_USAGE
    for note in notices:
        _write(sys.stderr, f"triage_log.py: notice: {note}\n")
    if args.output == "json":
        _write(sys.stdout, json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    else:
        _write(sys.stdout, render_text(result))
    return exit_code(result)


if __name__ == "__main__":
    try:
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    except (AttributeError, ValueError):
        pass
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
    except MemoryError:
        sys.stderr.write("triage_log.py: error: out of memory\n")
        sys.exit(EXIT_USAGE)

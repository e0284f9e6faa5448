"""The streaming analysis: one pass over the lines, tracebacks per rank, candidates, the report.

Every line passes one combined prefilter (grammar.ANCHORS plus the catalog's keys for entries no
anchor covers) unless a traceback, a multi-line message or torchrun's root-cause block is open;
the rest is skipped (read_blocks skips it in C, a block of lines at a time). A line that passes is
classified by the grammar and matched against the catalog: the catalog entry, when one matches,
gives the signature, cause and fix; the grammar class gives the role and a class-level cause and
fix otherwise.
"""
from __future__ import annotations

import os
import re
import time
from collections import deque

from . import grammar
from .catalog import Catalog, Entry, load_catalog as _load
from .clean import BOX_EDGE, clean, rank_in_text, split_glued, timestamp

# Bounds (all overridable on the command line or through triage_lines keywords).
MAX_BYTES = 64 * 1024 * 1024     # bytes read per input; the rest is skipped with a notice
MAX_LINE = 8192                  # characters of one line that are kept and matched
CHUNK = 1 << 20                  # bytes read at a time
MAX_FINDINGS = 200               # findings kept in the report
FOLLOW_LINES = 6                 # lines after an unmatched failure line searched for its message
MAX_SECONDS = 120                # analysis time budget per run; the rest is skipped with a notice
MAX_TEXT = 500                   # characters of a line shown in the report
MORE_LINES = 3                   # continuation lines kept with a finding ("more")
TB_IDLE = 400                    # lines without a frame after which an open traceback is given up
TS_BACK = 32                     # lines looked back for a timestamp when a failure line has none

_TB_START = re.compile(r"^\s*(?:Traceback(?: \(|$)|[╭┏╔+][─━═\-]+ Traceback)")
_FRAME = re.compile(r'^File "[^"]*", line \d+')
# an exception line: a dotted name whose last part starts upper-case, then ": message" or nothing
_EXC_SHAPE = re.compile(r"^(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?::(?:\s|$)|$)")
_CHAIN = ("During handling of the above exception", "The above exception was the direct cause")
_ELASTIC_FIELD = re.compile(r"^(time|host|rank|exitcode|error_file|traceback)\s*:\s*(.*)$")
_NOTE = re.compile(r"(?::\d+(?::\d+)?: |^)note: ")

_UNKNOWN_CAUSE = grammar.BY_ID["python-exception"].cause
_UNKNOWN_FIX = grammar.BY_ID["python-exception"].fix
_CASCADE_ONLY_CAUSE = ("Only secondary failures were found (launcher summaries, signals, other ranks' "
                       "timeouts); the rank that failed first did not print its error into this log.")
_CASCADE_ONLY_FIX = ("Find the first failing rank's own output: rerun with per-rank logs (torchrun --tee 3 "
                     "or --log-dir) and triage that rank's log.")
_PUBLIC = ("line", "rank", "text", "signature", "cause", "fix", "reference", "class", "file", "file_line")


def _trie(words: list[str]) -> str:
    """A regex alternation of the words as a prefix tree (a word that is a prefix of another wins)."""
    root: dict = {}
    for w in words:
        node = root
        for ch in w:
            node = node.setdefault(ch, {})
        node[""] = {}

    def emit(node) -> str:
        if "" in node:
            return ""
        alts = [re.escape(ch) + emit(sub) for ch, sub in sorted(node.items())]
        return alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"
    return emit(root)


def prefilter_pattern(extra: list[str] | tuple = ()) -> tuple[str, ...]:
    """The one combined prefilter: grammar anchors, glog error prefixes and the catalog's extra keys,
    as a few regexes: one for the words starting with a letter (sre scans for their first letters
    in C) and one per other first character (a literal prefix sre finds fast). A line passes when
    any matches "\\n" + line (anchors starting with a newline mean: at the line's start)."""
    words = sorted(set(grammar.ANCHORS) | set(extra))
    groups: dict[str, list[str]] = {}
    for w in words:
        groups.setdefault("" if w[0].isalnum() else w[0], []).append(w)
    out = []
    for first, ws in sorted(groups.items()):
        trie = _trie(ws)
        if trie.startswith("(?:") and trie.endswith(")"):
            trie = trie[3:-1]
        if first == "":
            trie += "|" + grammar._GLOG_E
        out.append(trie)
    return tuple(out)


def build_prefilter(extra: list[str] | tuple = ()):
    from .catalog import MultiRegex
    return MultiRegex(prefilter_pattern(extra))


_ANCHOR_RX: list = []


def _anchor_rx() -> re.Pattern:
    if not _ANCHOR_RX:
        _ANCHOR_RX.append(build_prefilter())
    return _ANCHOR_RX[0]


def annotate(cat: Catalog):
    """Give every entry its grammar class (of its example line) and collect literal keys for entries
    whose example or one of whose listed wordings no grammar anchor reaches (so the prefilter lets
    their lines through)."""
    from .catalog import literal_keys
    keys = set()
    for e in cat.entries:
        text = clean(str(e.raw.get("example", "")))[0].strip()
        fc, g = grammar.classify(text)
        if fc is not None and fc.id == "launcher-exit" and g.get("exit_class") in grammar.BY_ID:
            fc = grammar.BY_ID[g["exit_class"]]
        e.klass = fc.id if fc is not None else None
        # the example and every listed older/newer wording must get through the prefilter
        texts = [text] + [clean(str(w.get("text", "")))[0].strip() for w in e.wordings]
        if not all(_anchor_rx().search("\n" + t) for t in texts):
            ks = literal_keys(e.pattern)
            if ks:
                keys.update(ks)
    cat.keys = sorted(keys)
    cat.prefilter_source = prefilter_pattern(cat.keys)


def _source_key() -> bytes:
    out = []
    for name in ("grammar.py", "engine.py", "clean.py", "catalog.py"):
        try:
            st = os.stat(os.path.join(os.path.dirname(__file__), name))
            out.append(f"{name}:{st.st_size}:{st.st_mtime_ns}")
        except OSError:
            out.append(name)
    return ";".join(out).encode()


def load_catalog(directory=None, *, use_cache: bool = True) -> Catalog:
    cat = _load(directory, use_cache=use_cache, annotate=annotate, extra_key=_source_key())
    if not cat.prefilter_source:
        cat.prefilter_source = prefilter_pattern(cat.keys)
    return cat



    return cat


def _cut(text: str) -> str:
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + "…"


def _timeout_fallback(fc) -> bool:
    """A collective timeout the catalog calls cascade (gloo's 'Timed out waiting ...ms', a watchdog line
    after another rank's error) still becomes the root cause when no rank printed a real failure: it
    ties with the launcher's plain exit summary (and comes before it), while a rank killed by a signal
    (SIGKILL, SIGSEGV) outweighs it."""
    return fc is not None and fc.id == "watchdog-timeout"


def _stands_in(rec: dict, fc) -> dict:
    """Make a rank's cascade-labelled exception (a timeout, gloo's 'Connection closed by peer') a fallback
    as strong as the launcher's exit summary; promoted, it keeps its entry's cause and fix, which say
    what the line is a consequence of (a peer that left, one that never joined)."""
    rec["_w"] = max(rec["_w"], 2)
    rec["_keep"] = True
    return rec


class _Triage:
    """Streaming state: open tracebacks per prefix rank, candidates for the root cause, findings."""

    def __init__(self, catalog: Catalog):
        self.cat = catalog
        if not catalog.prefilter_source:
            catalog.prefilter_source = prefilter_pattern(catalog.keys)
        self.cands: dict = {}                # dedupe key -> candidate record (capped)
        self.fallbacks: list = []            # fallback-role records (launcher exits, signals, echoes)
        self.secondary: dict = {}            # dedupe key -> cascade / warning record (capped)
        self.first_cascade: dict | None = None
        self.tb: dict = {}                   # rank key -> {"indent", "pending", "last"}
        self.last_exc: dict = {}             # rank key -> record of the exception line that ended its last traceback
        self.chain: dict = {}                # rank key -> that record, while a chained traceback follows it
        self.follow: dict = {}               # rank key -> (record, lines left) for a message's next lines
        self.join: dict = {}                 # rank key -> record whose "Last error:" continues on the next line
        self.last_rec: dict = {}             # rank key -> the last failure record outside a traceback
        self.weak: dict = {}                 # rank key -> [W ...] errno candidates an [E ...] line may absorb
        self.elastic: dict | None = None     # torchrun's "Root Cause (first observed failure)" block
        self.filter = True                   # entries without trigger words are reached through the prefilter
        self.file: str | None = None
        self.file_start = 0
        self.recent: deque = deque(maxlen=TS_BACK)
        self.lookback = None                 # callable giving the lines before the current one

    # ---------------------------------------------------------------- files and time

    def begin_file(self, name: str | None, start_line: int):
        """Lines after this belong to file `name` (its line 1 is input line start_line + 1)."""
        self.file, self.file_start = name, start_line
        self.tb.clear(), self.follow.clear(), self.chain.clear(), self.join.clear(), self.weak.clear()
        self.elastic = None
        self.recent.clear()

    def _back(self, s: str):
        """The line's own timestamp, or the lines before it to take one from when it is needed."""
        t = timestamp(s)
        if t is not None:
            return t
        return self.lookback() if self.lookback is not None else list(self.recent)

    @staticmethod
    def _time(rec: dict):
        t = rec["_t"]
        if isinstance(t, list):
            found = None
            for raw in reversed(t):
                found = timestamp(clean(raw)[0].strip())
                if found is not None:
                    break
            rec["_t"] = t = found
        return t

    # ---------------------------------------------------------------- records

    def _record(self, line_no, rank, text, entry: Entry | None, fc, groups, kind: str) -> dict:
        if entry is not None:
            cause, fix, ref = entry.cause, entry.fix, entry.reference
        elif fc is not None:
            cause, fix, ref = fc.text("cause", groups), fc.text("fix", groups), fc.reference
        else:
            cause = fix = ref = None
        klass = fc.id if fc is not None else None
        if entry is not None and (klass is None or klass == "python-exception") and entry.klass:
            klass = entry.klass
        role = "root" if kind == "root" else "warning" if kind == "warning" else "cascade"
        return {"line": line_no, "rank": rank, "text": _cut(text), "signature": entry.id if entry else None,
                "cause": cause, "fix": fix, "reference": ref, "role": role, "class": klass,
                "file": self.file, "file_line": line_no - self.file_start,
                "_t": self._back(text), "_w": fc.weight if fc is not None else 0,
                "_after": fc.after if fc is not None else frozenset()}

    @staticmethod
    def _key(rec: dict):
        return (rec["signature"], rec["signature"] is None and rec["text"])

    def _candidate(self, rec: dict, key=None):
        text = rec["text"]
        if text.startswith("[W") and "errno" in text:
            self.weak.setdefault(key, []).append(rec)
        elif text.startswith(("[E", "[F")) and key in self.weak:
            # the c10d warnings with an errno ([W socket.cpp] ... errno: 98) right before the error
            # they explain are part of its finding
            for w in self.weak.pop(key):
                if rec["line"] - w["line"] > 6 or rec["file"] != w["file"]:
                    continue
                for k, v in list(self.cands.items()):
                    if v is w:
                        del self.cands[k]
                more = rec.setdefault("more", [])
                if len(more) < MORE_LINES:
                    more.append(w["text"])
                if rec["signature"] is None and w["signature"] is not None:
                    rec.update(signature=w["signature"], cause=w["cause"], fix=w["fix"], reference=w["reference"])
            k0, k1 = self._key(rec) + (0,), self._key(rec) + (1,)
            if self.cands.get(k1) is not None and self.cands.get(k0) is None:
                self.cands[k0] = self.cands.pop(k1)
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

    def _fallback(self, rec: dict):
        if len(self.fallbacks) < 2 * MAX_FINDINGS:
            self.fallbacks.append(rec)
        self._note_secondary(rec)

    def _classify(self, s: str):
        fc, g = grammar.classify(s)
        if fc is not None and fc.id == "launcher-exit":
            target = grammar.BY_ID.get(g.get("exit_class", ""))
            if target is not None:
                return target, g, "fallback"
        return fc, g, (fc.role if fc is not None else None)

    def _emit(self, line_no, rank, s, entry, fc, g, kind, key=None) -> dict | None:
        """Record a failure line outside a traceback according to its role."""
        if entry is not None and entry.role != "root":
            rec = self._record(line_no, rank, s, entry, fc, g, entry.role)
            if kind == "fallback" or (fc is not None and fc.role == "fallback"):
                self._fallback(rec)
            elif entry.role == "cascade" and _timeout_fallback(fc):
                self._fallback(_stands_in(rec, fc))
            else:
                self._note_secondary(rec)
            return rec
        if entry is not None or kind == "root":
            rec = self._record(line_no, rank, s, entry, fc, g, "root")
            self._candidate(rec, key)
            return rec
        if kind == "fallback":
            rec = self._record(line_no, rank, s, None, fc, g, "fallback")
            self._fallback(rec)
            return rec
        if kind in ("cascade", "warning"):
            rec = self._record(line_no, rank, s, None, fc, g, kind)
            self._note_secondary(rec)
            return rec
        return None

    # ---------------------------------------------------------------- feeding

    @property
    def pre(self) -> re.Pattern:
        return self.cat.prefilter

    def busy(self) -> bool:
        return bool(self.tb or self.follow or self.chain or self.join or self.elastic is not None)

    def feed(self, line_no: int, raw: str):
        raw = raw.rstrip("\r\n")
        if self.filter and not self.busy() and not self.pre.search("\n" + raw):
            self.recent.append(raw)
            return
        self.feed_line(line_no, raw)
        self.recent.append(raw)

    def feed_line(self, line_no: int, raw: str):
        """Analyse one physical line (no prefilter)."""
        for part in split_glued(raw):
            if part.strip():
                self._one(line_no, part)

    def _one(self, line_no: int, raw: str):
        text, rank, boxed = clean(raw)
        s = text.strip()
        if not s:
            return
        key = rank  # tracebacks are followed per prefix rank; "[Rank N]" in a message only labels it
        if rank is None and "ank" in s:
            rank = rank_in_text(s)
        j = self.join.pop(key, None)
        if j is not None:
            # NCCL's "Last error:" names the failing call on the next line: one finding
            j["text"] = _cut(j["text"] + " " + s)
            e2 = self.cat.match(j["text"])
            if e2 is not None and e2.role == "root" and j["signature"] is None:
                j.update(signature=e2.id, cause=e2.cause, fix=e2.fix, reference=e2.reference)
            return
        if self.elastic is not None and self._elastic_line(line_no, rank, s):
            return
        indent = len(text) - len(text.lstrip())
        if "Traceback (most recent call last)" in s or _TB_START.match(s):
            # also when glued to a progress bar ("0/800 [00:00<?]Traceback (most recent call last):")
            self._open(key, indent, line_no)
            return
        if s.startswith(_CHAIN):
            # "During handling ... another exception occurred": the next traceback of this rank is a
            # link of the same failure, not a new one
            if key in self.last_exc:
                self.chain[key] = self.last_exc[key]
            return
        if s.startswith("Root Cause (first observed failure)"):
            self.elastic = {"left": 12, "rank": None, "code": None, "line": line_no, "text": None, "fields": {}}
        state = self.tb.get(key)
        if state is None and _FRAME.match(s):
            # a paste that starts inside a traceback: its first frame opens it
            state = self._open(key, indent, line_no)
        elif state is not None and line_no - state["last"] > TB_IDLE:
            self._close_cut(key)
            state = None
        entry = self.cat.match(s)
        follow = self.follow.get(key)
        if follow is not None:
            # the lines right after an unmatched failure line often carry the rest of its message
            rec, left = follow
            own = grammar.classify(s)[0] if entry is not None else None
            if entry is not None and entry.role == "root" and state is None and \
                    (own is None or own.id in ("python-exception", "cpp-exception", rec["class"])
                     or s.startswith("what():")):
                # (a line that states its own failure, a launcher's -9 exit, is not a continuation)
                del self.follow[key]
                rec.update(signature=entry.id, cause=entry.cause, fix=entry.fix, reference=entry.reference)
                return
            if state is None and len(rec.setdefault("more", [])) < MORE_LINES and not self.pre.search("\n" + s):
                rec["more"].append(_cut(s))
            if left <= 1 or state is not None:
                del self.follow[key]
            else:
                self.follow[key] = (rec, left - 1)
        if state is not None:
            if self._in_traceback(state, key, line_no, rank, text, s, indent, boxed, entry):
                return
        if _NOTE.search(s) and not self.pre.search("\n" + s.split("note:", 1)[0]):
            return  # a compiler's note: belongs to the error before it
        fc, g, kind = self._classify(s)
        rec = self._emit(line_no, rank, s, entry, fc, g, kind, key)
        if s.endswith("Last error:"):
            # NCCL's "Last error:" continues the failure before it (or this line) on the next line
            target = rec if rec is not None else self.last_rec.get(key)
            if target is not None:
                if rec is None:
                    target["text"] = _cut(target["text"] + " " + s)
                self.join[key] = target
                self.follow.pop(key, None)
            return
        if rec is None:
            return
        self.last_rec[key] = rec
        if rec["signature"] is None and rec["role"] == "root":
            self.follow[key] = (rec, FOLLOW_LINES)

    def _elastic_line(self, line_no, rank, s) -> bool:
        """torchrun's root-cause block: rank, exitcode, error_file, traceback of the first failure."""
        el = self.elastic
        el["left"] -= 1
        m = _ELASTIC_FIELD.match(s)
        if m:
            name, value = m.groups()
            el["fields"][name] = value.strip()
            if name == "rank":
                r = re.match(r"-?\d+", value)
                el["rank"] = int(r.group(0)) if r else None
            elif name == "exitcode":
                el["code"], el["line"] = value.split()[0] if value.split() else value, line_no
            if name != "traceback" or "Traceback (most recent call last)" not in value:
                if name == "traceback":
                    self._elastic_done()
                return True
            self._elastic_done()
            return False  # the traceback field opens a real traceback: handle the line normally
        if s.startswith("[") and s.endswith("]:") or s.startswith("Root Cause"):
            return True
        if s.startswith("=") or el["left"] <= 0:
            self._elastic_done()
            return s.startswith("=")
        return True

    def _elastic_done(self):
        el, self.elastic = self.elastic, None
        if el is None or el["code"] is None:
            return
        f = el["fields"]
        code = el["code"]
        fc = grammar.BY_ID.get(grammar._exit_class(code, None)) or grammar.BY_ID["launcher-exit"]
        text = (f"Root Cause (first observed failure): rank {el['rank'] if el['rank'] is not None else '?'} "
                f"exitcode {code}" + (f", host {f['host']}" if f.get("host") else "")
                + (f", error_file {f['error_file']}" if f.get("error_file") not in (None, "", "<N/A>") else "")
                + (f", traceback: {f['traceback']}" if f.get("traceback") else ""))
        g = {"what": f"exit code {code}"}
        rec = self._record(el["line"], el["rank"], text, None, fc, g, "fallback")
        rec["_w"] += 1  # the block names the rank and how it ended: it beats the launcher's other lines
        self._fallback(rec)

    def _open(self, key, indent: int, line_no: int) -> dict:
        state = {"indent": indent, "pending": None, "last": line_no}
        self.tb[key] = state
        return state

    def _close_cut(self, key):
        state = self.tb.pop(key, None)
        if state is not None and state["pending"] is not None:
            self._candidate(state["pending"][1])

    def _in_traceback(self, state, key, line_no, rank, text, s, indent, boxed, entry) -> bool:
        """Handle a line while a traceback of this rank is open; False if it is not part of it."""
        if BOX_EDGE.match(s) and s[0] in "╰┗╚+":
            return True  # the bottom edge of a Rich box: the exception line follows
        frame = boxed or indent > state["indent"] or s.startswith(('File "', "^", "~"))
        if frame:
            state["last"] = line_no
            if entry is not None and entry.role == "root" and state["pending"] is None:
                # a frame (often the raise statement) names the failure: keep it for the exception line
                state["pending"] = (entry, self._record(line_no, rank, s, entry, None, None, "root"))
            return True
        fc, g, kind = self._classify(s)
        if not _EXC_SHAPE.match(s) and not (entry is not None and entry.role == "root") and \
                not (kind == "root" and fc.id != "python-exception"):
            # another process's line printed into the middle of the traceback: not its end (unless
            # it states a failure: an exception line two ranks wrote into at once)
            return True
        # the exception line ends the traceback
        del self.tb[key]
        pending = state["pending"]
        if entry is not None and entry.role != "root":
            rec = self._record(line_no, rank, s, entry, fc, g, entry.role)
            if kind != "fallback" and entry.role == "cascade" and (
                    _timeout_fallback(fc) or (fc is not None and fc.id == "python-exception")):
                self._fallback(_stands_in(rec, fc))
            elif kind == "fallback":
                self._fallback(rec)
            else:
                self._note_secondary(rec)
            return True
        if entry is None and pending is not None:
            entry = pending[0]
        if entry is None and kind in ("fallback", "cascade"):
            # a launcher's or a build's summary exception (ChildFailedError, CalledProcessError)
            rec = self._record(line_no, rank, s, None, fc, g, kind)
            if kind == "fallback":
                self._fallback(rec)
            else:
                self._note_secondary(rec)
            self.last_exc[key] = rec
            return True
        rec = self._record(line_no, rank, s, entry, fc, g, "root")
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

    # ---------------------------------------------------------------- result

    @staticmethod
    def _earliest(recs: list) -> dict | None:
        if not recs:
            return None
        if len({r["file"] for r in recs}) > 1 or len({r["rank"] for r in recs}) > 1:
            if all(_Triage._time(r) is not None for r in recs):
                return min(recs, key=lambda r: (r["_t"], r["line"]))
        return min(recs, key=lambda r: r["line"])

    def result(self) -> dict:
        # a traceback cut off before its exception line still names its failure by a frame
        for state in self.tb.values():
            if state["pending"] is not None:
                self._candidate(state["pending"][1])
        if self.elastic is not None:
            self._elastic_done()
        cands = sorted(self.cands.values(), key=lambda r: r["line"])
        # a build's summary after the compiler/linker line that failed is its cascade
        roots, demoted = [], []
        for r in cands:
            if r["_after"] and any(p["class"] in r["_after"] and p["file"] == r["file"] and p["line"] < r["line"]
                                   for p in roots):
                demoted.append(r)
            else:
                roots.append(r)
        root_rec = self._earliest(roots)
        root = None
        findings = []
        promoted = None
        if root_rec is not None:
            root = {k: root_rec.get(k) for k in _PUBLIC}
            if root_rec.get("more"):
                root["more"] = list(root_rec["more"])
            if root["signature"] is None and root["cause"] is None:
                root["cause"], root["fix"] = _UNKNOWN_CAUSE, _UNKNOWN_FIX
            for rec in roots:
                findings.append(dict(rec, role="root" if rec is root_rec else "cascade"))
            findings += [dict(rec, role="cascade") for rec in demoted]
        elif self.fallbacks:
            top = max(r["_w"] for r in self.fallbacks)
            promoted = self._earliest([r for r in self.fallbacks if r["_w"] == top])
            root = {k: promoted.get(k) for k in _PUBLIC}
            if promoted["class"] in grammar.BY_ID:
                fc = grammar.BY_ID[promoted["class"]]
                if promoted["signature"] is not None and self.cat.by_id[promoted["signature"]].role != "root":
                    root["signature"] = None
                if root["signature"] is None and not promoted.get("_keep"):
                    # a launcher's plain exit says only that the rank's own output is missing; a
                    # signal, a crash or a watchdog echo says what to do by its class
                    cause, fix = ((_CASCADE_ONLY_CAUSE, _CASCADE_ONLY_FIX) if fc.id == "launcher-exit"
                                  else (fc.cause, fc.fix))
                    root.update(cause=cause, fix=fix, reference=fc.reference)
        elif self.first_cascade is not None:
            c = self.first_cascade
            root = {k: c.get(k) for k in _PUBLIC}
            root.update(signature=None, cause=_CASCADE_ONLY_CAUSE, fix=_CASCADE_ONLY_FIX, reference=None)
        for r in self.secondary.values():
            findings.append(dict(r, role="root") if r is promoted else dict(r))
        findings.sort(key=lambda r: r["line"])
        seen, out = set(), []
        for f in findings:
            k = (f["role"], f["signature"], f["signature"] is None and f["text"])
            if k not in seen and len(out) < MAX_FINDINGS:
                seen.add(k)
                pub = {k2: f.get(k2) for k2 in _PUBLIC}
                pub["role"] = f["role"]
                out.append(pub)
        return {"root_cause": root, "findings": out}


# --------------------------------------------------------------------------- API

def triage_lines(lines, catalog: Catalog | None = None, *, max_line: int = MAX_LINE,
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

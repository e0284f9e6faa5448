"""The signature catalog: catalog/*.yaml entries, their match order, a compiled cache, --explain/--search.

Loading parses the YAML once and writes a compiled JSON cache beside it (catalog/.compiled.json,
keyed by a hash of the YAML files' names and bytes and of CACHE_FORMAT), so later runs read JSON
and compile only the regexes a line actually needs. Where the cache cannot be written the YAML
is parsed with yaml.CSafeLoader when PyYAML has it (the pure-Python loader otherwise).
"""
from __future__ import annotations

import json
import os
import re
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
CATALOG_DIR = os.path.join(os.path.dirname(os.path.dirname(HERE)), "catalog")
CACHE_NAME = ".compiled.json"
CACHE_FORMAT = 5

ROLES = ("root", "cascade", "warning")
REQUIRED = ("id", "library", "versions", "role", "pattern", "example", "source", "cause", "fix")
OPTIONAL = ("reference", "specializes", "wordings")
MATCH_CHARS = 2048               # characters of a line the catalog patterns see


class CatalogError(Exception):
    """The catalog cannot be loaded (bad YAML, missing field, invalid regex)."""


_WORD = re.compile(r"[a-z0-9_]+")


def _words_of_literal(lit: str) -> list[str]:
    """Whole words inside a literal run, those bounded by non-word characters inside it."""
    words = []
    for m in re.finditer(r"[A-Za-z0-9_]+", lit):
        if m.start() > 0 and m.end() < len(lit):
            words.append(m.group(0).lower())
    return words


def _parser():
    try:
        import re._parser as sre_parse  # Python >= 3.11
    except ImportError:  # pragma: no cover - older Pythons
        import sre_parse  # type: ignore
    return sre_parse


def _literal_runs(seq, sre_parse) -> list[str]:
    lits, cur = [], []
    for op, av in seq:
        if op is sre_parse.LITERAL:
            cur.append(chr(av))
        else:
            if cur:
                lits.append("".join(cur))
            cur = []
            lits.append("\0")
    if cur:
        lits.append("".join(cur))
    return "".join(lits).split("\0")


def _trigger_words(pattern: str) -> list[str] | None:
    """Words one of which every line the pattern matches contains, or None when unknown.

    Only the top-level sequence is analysed: its literal runs must all occur in a match, so any
    whole word inside one of them is a valid trigger. Used as a prefilter; the regex decides.
    """
    sre_parse = _parser()
    try:
        tree = sre_parse.parse(pattern)
    except Exception:
        return None
    best: list[str] = []
    for lit in _literal_runs(tree, sre_parse):
        best.extend(_words_of_literal(lit))
    if not best:
        return None
    # One word is enough; prefer the longest (rarest in noise).
    return [max(best, key=len)]


def literal_keys(pattern: str) -> list[str] | None:
    """Case-sensitive literal substrings one of which every match contains (one per top-level
    branch, the longest literal run of at least 5 characters), or None when unknown."""
    sre_parse = _parser()
    try:
        tree = sre_parse.parse(pattern)
    except Exception:
        return None
    seqs = [list(tree)]
    if len(tree) == 1 and tree[0][0] is sre_parse.BRANCH:
        seqs = [list(b) for b in tree[0][1][1]]
    keys = []
    for seq in seqs:
        runs = [r for r in _literal_runs(seq, sre_parse) if len(r) >= 5]
        if not runs:
            return None
        # start at a character rare in training noise (upper case, some punctuation) where a run
        # allows it, else at a word's start: the prefilter's scan stays fast
        rare, plain = [], []
        for run in runs:
            for i, ch in enumerate(run):
                if len(run) - i < 8:
                    break
                if ch.isupper() or ch in "`[(#<'\"!":
                    rare.append(run[i:])
                    break
            words = [i for i, ch in enumerate(run) if ch.isalnum() and (i == 0 or not run[i - 1].isalnum())]
            plain.append(run[words[0]:] if words else run)
        best = max(rare or plain, key=len)
        keys.append(best[:24])
    return keys


class Entry:
    __slots__ = ("id", "role", "pattern", "_rx", "cause", "fix", "reference", "library", "versions", "raw",
                 "specializes", "file", "index", "wordings", "klass")

    def __init__(self, raw: dict, where: str, check: bool = True):
        if check:
            missing = [k for k in REQUIRED if k not in raw]
            if missing:
                raise CatalogError(f"{where}: entry {raw.get('id', '?')!r} lacks {', '.join(missing)}")
            if raw["role"] not in ROLES:
                raise CatalogError(f"{where}: entry {raw['id']!r} has role {raw['role']!r} (not one of {ROLES})")
            try:
                self._rx = re.compile(str(raw["pattern"]))
            except re.error as exc:
                raise CatalogError(f"{where}: entry {raw['id']!r} pattern does not compile: {exc}") from None
        else:
            self._rx = None
        self.pattern = str(raw["pattern"])
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
        w = raw.get("wordings", [])
        if not isinstance(w, list) or not all(isinstance(x, dict) and "text" in x and "versions" in x for x in w):
            raise CatalogError(f"{where}: entry {raw['id']!r}: wordings must be a list of {{text, versions}}")
        self.wordings = w
        self.file = ""
        self.index = 0
        self.klass = None

    @property
    def regex(self) -> re.Pattern:
        """The compiled pattern, compiled on first use (most runs need few of them)."""
        if self._rx is None:
            self._rx = re.compile(self.pattern)
        return self._rx


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


class MultiRegex:
    """Several regexes searched as one: each has a literal prefix or a charset of rare first
    characters, which sre scans for in C; one alternation of them all would not be."""

    def __init__(self, patterns):
        self.regexes = [re.compile(p) for p in patterns]

    def search(self, text, pos: int = 0):
        """The earliest match of any of the regexes, or None."""
        best = None
        for rx in self.regexes:
            m = rx.search(text, pos)
            if m is not None and (best is None or m.start() < best.start()):
                best = m
        return best


class Catalog:
    """All entries of catalog/*.yaml, with a word prefilter for fast matching.

    prefilter_source is the engine's combined prefilter (set by engine.load_catalog, cached with
    the catalog); prefilter / prefilter_bytes compile it on first use."""

    prefilter_source: tuple = ()

    @property
    def prefilter(self) -> "MultiRegex":
        rx = self.__dict__.get("_pre")
        if rx is None:
            rx = self.__dict__["_pre"] = MultiRegex(self.prefilter_source)
        return rx

    @property
    def prefilter_bytes(self) -> "MultiRegex":
        rx = self.__dict__.get("_pre_b")
        if rx is None:
            rx = self.__dict__["_pre_b"] = MultiRegex([p.encode("utf-8") for p in self.prefilter_source])
        return rx

    def __init__(self, entries: list[Entry], triggers: dict | None = None, keys: list | None = None,
                 always_keys: dict | None = None):
        self.entries = entries
        self.ordered = match_order(entries)
        self.by_id = {e.id: e for e in entries}
        self.always: list[int] = []
        self.by_word: dict[str, list[int]] = {}
        self.triggers: set[str] = set()
        self.trigger_of: dict[str, list[str] | None] = {}
        for i, e in enumerate(self.ordered):
            words = triggers[e.id] if triggers is not None else _trigger_words(e.pattern)
            self.trigger_of[e.id] = words
            if words is None:
                self.always.append(i)
            else:
                for w in words:
                    self.by_word.setdefault(w, []).append(i)
                    self.triggers.add(w)
        # literal keys of entries whose example no grammar anchor covers (engine.PREFILTER adds them)
        self.keys: list[str] = keys if keys is not None else []
        # an entry without trigger words is still tried only on lines holding one of its literal keys
        self.always_keys = [always_keys.get(self.ordered[i].id) if always_keys is not None
                            else literal_keys(self.ordered[i].pattern) for i in self.always]

    def match(self, line: str) -> Entry | None:
        line = line[:MATCH_CHARS]
        if self.by_word:
            found = set(_WORD.findall(line.lower()))
            cand = [i for w in found.intersection(self.by_word) for i in self.by_word[w]]
            cand = sorted(set(cand).union(i for i, ks in zip(self.always, self.always_keys)
                                          if ks is None or any(k in line for k in ks)))
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

    # ---------------------------------------------------------------- queries (--explain, --search)

    def explain(self, ident: str) -> dict | None:
        e = self.by_id.get(ident)
        if e is None:
            return None
        return entry_doc(e)

    def search(self, text: str, limit: int = 10) -> list[tuple[float, Entry]]:
        """Entries whose pattern matches the text (score 100), then those sharing the most words with
        it (id, pattern, example, cause), best first."""
        text = text.strip()
        words = {w for w in _WORD.findall(text.lower()) if len(w) > 2}
        scored = []
        for e in self.ordered:
            if text and e.regex.search(text[:MATCH_CHARS]):
                scored.append((100.0, e))
                continue
            if not words:
                continue
            hay = " ".join([e.id.replace("-", " "), e.pattern, str(e.raw.get("example", "")), e.cause]).lower()
            have = set(_WORD.findall(hay))
            hit = words & have
            if hit:
                score = 90.0 * len(hit) / len(words)
                if text.lower() in hay:
                    score += 5
                scored.append((round(score, 1), e))
        scored.sort(key=lambda p: -p[0])
        return scored[:limit]


def entry_doc(e: Entry) -> dict:
    return {"id": e.id, "role": e.role, "library": e.library, "versions": e.versions, "class": e.klass,
            "cause": e.cause, "fix": e.fix, "reference": e.reference, "pattern": e.pattern,
            "example": str(e.raw.get("example", "")),
            "wordings": [{"text": str(w["text"]), "versions": str(w["versions"])} for w in e.wordings]}


# --------------------------------------------------------------------------- loading

def _yaml_load(text: str):
    import yaml
    loader = getattr(yaml, "CSafeLoader", None) or yaml.SafeLoader
    return yaml.load(text, Loader=loader)  # noqa: S506 - a safe loader


def _digest(files: list[tuple[str, bytes]]) -> str:
    """The cache key: format, and each file's name, size and CRC-32 (zlib loads faster than hashlib)."""
    parts = [f"format {CACHE_FORMAT}"]
    for name, data in files:
        parts.append(f"{name}:{len(data)}:{zlib.crc32(data):08x}")
    return ";".join(parts)


def _from_cache(folder: str, key: str) -> Catalog | None:
    try:
        with open(os.path.join(folder, CACHE_NAME), encoding="utf-8") as fh:
            doc = json.load(fh)
        if doc.get("key") != key or doc.get("format") != CACHE_FORMAT:
            return None
        entries = []
        for raw, fname, idx, klass in doc["entries"]:
            e = Entry(raw, f"{fname}[{idx}]", check=False)
            e.file, e.index, e.klass = fname, idx, klass
            entries.append(e)
        cat = Catalog(entries, doc["triggers"], doc["keys"], doc["always_keys"])
        cat.prefilter_source = tuple(doc["prefilter"])
        return cat
    except (OSError, ValueError, KeyError, TypeError, CatalogError):
        return None


def _cache_text(doc: dict) -> str:
    """The cache as JSON with one catalog entry (and one other top-level value) per line: agents grep
    the skill folder, and a single 350 KB line would print whole for any hit."""
    def dumps(v):
        return json.dumps(v, ensure_ascii=False, separators=(",", ":"), default=str)
    def value(v):
        if isinstance(v, dict) and v:  # trigger and key tables: one item per line
            return "{\n" + ",\n".join(f"{dumps(k)}:{dumps(x)}" for k, x in v.items()) + "\n}"
        return dumps(v)
    lines = [f"{dumps(k)}:{value(v)}" for k, v in doc.items() if k != "entries"]
    entries = ",\n".join(dumps(e) for e in doc["entries"])
    return "{" + ",\n".join(lines) + ',\n"entries":[\n' + entries + "\n]}\n"


def _write_cache(folder: str, key: str, cat: Catalog):
    doc = {"format": CACHE_FORMAT, "key": key,
           "entries": [[e.raw, e.file, e.index, e.klass] for e in cat.entries],
           "triggers": cat.trigger_of, "keys": cat.keys,
           "prefilter": list(cat.prefilter_source),
           "always_keys": {cat.ordered[i].id: ks for i, ks in zip(cat.always, cat.always_keys)}}
    tmp = os.path.join(folder, f"{CACHE_NAME}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(_cache_text(doc))
        os.replace(tmp, os.path.join(folder, CACHE_NAME))
    except (OSError, TypeError, ValueError):
        try:
            os.unlink(tmp)
        except OSError:
            pass


def load_catalog(directory: "str | os.PathLike | None" = None, *, use_cache: bool = True,
                 annotate=None, extra_key: bytes = b"") -> Catalog:
    """Load every *.yaml under the catalog folder; raise CatalogError on any defect.

    annotate(catalog) is called on a freshly parsed catalog before it is cached (the engine sets each
    entry's grammar class and the prefilter keys there)."""
    folder = os.fspath(directory) if directory is not None else CATALOG_DIR
    if not os.path.isdir(folder):
        raise CatalogError(f"catalog folder not found: {folder}")
    files = []
    for name in sorted(f for f in os.listdir(folder) if f.endswith(".yaml")):
        try:
            with open(os.path.join(folder, name), "rb") as fh:
                files.append((name, fh.read()))
        except OSError as exc:
            raise CatalogError(f"{name}: cannot read: {exc.strerror or exc}") from None
    key = _digest(files + [("", extra_key)])
    if use_cache and os.environ.get("TRIAGE_NO_CACHE") != "1":
        cat = _from_cache(folder, key)
        if cat is not None:
            return cat
    try:
        import yaml
    except ImportError:
        raise CatalogError("PyYAML is not installed (pip install PyYAML)") from None
    entries: list[Entry] = []
    seen: dict[str, str] = {}
    for name, data in files:
        try:
            doc = _yaml_load(data.decode("utf-8"))
        except (UnicodeDecodeError, yaml.YAMLError) as exc:
            raise CatalogError(f"{name}: cannot read: {str(exc).splitlines()[0]}") from None
        if doc is None:
            continue
        if not isinstance(doc, list):
            raise CatalogError(f"{name}: top level must be a list of entries")
        for n, raw in enumerate(doc):
            where = f"{name}[{n}]"
            if not isinstance(raw, dict):
                raise CatalogError(f"{where}: entry must be a mapping")
            e = Entry(raw, where)
            e.file, e.index = name, n
            if e.id in seen:
                raise CatalogError(f"{where}: duplicate id {e.id!r} (also in {seen[e.id]})")
            seen[e.id] = name
            entries.append(e)
    cat = Catalog(entries)
    if annotate is not None:
        annotate(cat)
    if use_cache and os.environ.get("TRIAGE_NO_CACHE") != "1":
        _write_cache(folder, key, cat)
    return cat

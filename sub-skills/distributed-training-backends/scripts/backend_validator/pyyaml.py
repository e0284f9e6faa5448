"""PyYAML for the validator, at a fraction of its usual start cost.

Two savings, both for a process that has not imported PyYAML yet (a fresh command-line run);
where ``yaml`` is already imported, its own modules are used and nothing changes:

* Importing PyYAML compiles ``yaml.reader.Reader.NON_PRINTABLE``, a negated character class whose
  ranges cover nearly all of Unicode. re's compiler (re/_compiler.py::_optimize_charset) fills a
  65,536-entry map one code point at a time in Python for it: about 57 million instructions, more
  than the rest of PyYAML's import together, on every run (a bytecode cache does not keep compiled
  patterns). The same set written as the few ranges it leaves out (:data:`EQUIVALENT`) compiles in
  about 4 million. Before PyYAML's reader is first imported, that pattern is put in re's cache under
  the key of PyYAML's own pattern, so ``Reader`` receives it from ``re.compile``; the entry is
  removed again right after. If re's cache is not a dict keyed (type, pattern, flags), as in
  CPython 3.7-3.13, nothing is primed.
* Every other pattern PyYAML's modules compile on import (the implicit resolvers' int, float, bool,
  null, timestamp, merge and value patterns, the constructor's timestamp pattern) is handed out as a
  :class:`LazyPattern` that compiles on first use: a config without dates never compiles the two
  timestamp patterns, about a tenth of a bare interpreter start. Where re's cache is not a plain dict
  read with ``_cache[key]`` (CPython 3.12+ reads ``_cache2`` first and pops from ``_cache``), patterns
  compile on import as before.
* ``yaml/__init__`` also imports the dumping half (emitter, serializer, representer, dumper) and the
  libyaml binding, which checking a config never uses below ``YAML_PURE_PYTHON_LIMIT``. :func:`loading`
  loads only the loading half (error, events, nodes, reader, scanner, parser, composer, constructor,
  resolver, loader) from PyYAML's own files, as a private package ``backend_validator._pyyaml``,
  about a fifth of a bare interpreter start less. Its classes are PyYAML's code, not PyYAML's class
  objects: a caller mixes them with :func:`real` (the ``yaml`` package, for libyaml) only per parse.

tests/validator/test_pyyaml_import.py checks both: the same code points, and the same documents,
positions and errors as the ``yaml`` package gives.
"""
import sys

# yaml/reader.py::Reader.NON_PRINTABLE (PyYAML 5.1-6.0.x), as the string re.compile receives
NON_PRINTABLE = '[^\x09\x0A\x0D\x20-\x7E\x85\xA0-\uD7FF\uE000-\uFFFD\U00010000-\U0010ffff]'
# the code points NON_PRINTABLE matches, written as themselves
EQUIVALENT = '[\x00-\x08\x0B\x0C\x0E-\x1F\x7F-\x84\x86-\x9F\uD800-\uDFFF\uFFFE\uFFFF]'
# the modules of PyYAML's loading half, in the order yaml/loader.py needs them
LOADING = ("error", "events", "nodes", "reader", "scanner", "parser", "composer", "constructor", "resolver",
           "loader")
PRIVATE = __name__.rsplit(".", 1)[0] + "._pyyaml"
_loading = None


class LazyPattern:
    """A compiled pattern (re.Pattern's methods and attributes) that compiles on first use."""

    __slots__ = ("_key", "_compiled")

    def __init__(self, key):
        self._key = key  # (type, pattern, flags) as re's cache keys it
        self._compiled = None

    def __getattr__(self, name):
        p = self._compiled
        if p is None:
            import re
            p = self._compiled = re.compile(self._key[1], self._key[2])
        return getattr(p, name)

    def __repr__(self):
        return f"LazyPattern({self._key[1]!r}, {self._key[2]!r})"


class _LazyCache(dict):
    """re's cache while PyYAML imports: a pattern it does not hold is handed out lazily (not stored)."""

    def __missing__(self, key):
        if type(key) is not tuple or len(key) != 3 or key[0] is not str:
            raise KeyError(key)
        return LazyPattern(key)


def _primed(load):
    """Run load() with the equivalent NON_PRINTABLE pattern in re's cache when PyYAML's reader is not
    imported yet, and every other pattern compiled on import made a :class:`LazyPattern`."""
    import re
    caches = [c for c in (getattr(re, "_cache", None), getattr(re, "_cache2", None)) if isinstance(c, dict)]
    key = (str, NON_PRINTABLE, 0)
    primed = bool(caches) and key not in caches[0]
    if primed:
        caches[0][key] = re.compile(EQUIVALENT)
    # CPython 3.7-3.11: re._compile reads `_cache[type(pattern), pattern, flags]`, which a dict subclass
    # with __missing__ answers; later versions read _cache2 first and pop from _cache (nothing lazy)
    lazy = primed and type(re.__dict__.get("_cache")) is dict and "_cache2" not in re.__dict__
    if lazy:
        plain = re._cache
        re._cache = _LazyCache(plain)
    try:
        return load()
    finally:
        if lazy:
            re._cache = plain
        if primed:
            for c in caches:
                c.pop(key, None)


def real():
    """The ``yaml`` package (imported with the equivalent pattern when it is not imported yet)."""
    if "yaml" not in sys.modules:
        _primed(lambda: __import__("yaml"))
    import yaml
    return yaml


def _namespace(mods):
    import types
    ns = types.SimpleNamespace()
    for m in mods:  # events.py and nodes.py have no __all__: their public names, as "from .events import *"
        names = getattr(m, "__all__", None) or [n for n in vars(m) if not n.startswith("_")]
        ns.__dict__.update((n, getattr(m, n)) for n in names)
    return ns


def _private():
    """PyYAML's loading half imported from its own files as PRIVATE, or None where that is not possible
    (PyYAML not found as a plain package folder)."""
    from importlib.machinery import PathFinder
    spec = PathFinder.find_spec("yaml")
    where = list(getattr(spec, "submodule_search_locations", None) or ())
    if not where:
        return None
    import types
    pkg = types.ModuleType(PRIVATE)
    pkg.__path__ = where
    pkg.__package__ = PRIVATE
    sys.modules[PRIVATE] = pkg
    try:
        return [__import__(f"{PRIVATE}.{m}", fromlist=["_"]) for m in LOADING]
    except Exception:
        for name in [n for n in sys.modules if n == PRIVATE or n.startswith(PRIVATE + ".")]:
            del sys.modules[name]
        return None


def loading():
    """A namespace of the names PyYAML's loading modules export (error, events, nodes, ..., loader:
    SafeLoader, ScalarEvent, YAMLError, SafeConstructor, Resolver, ...)."""
    global _loading
    if _loading is None:
        mods = None if "yaml" in sys.modules else _primed(_private)
        if mods is None:
            y = real()
            mods = [getattr(y, m) for m in LOADING]
        _loading = _namespace(mods)
    return _loading


def events_of(loader_cls):
    """What ``yaml.parse(text, Loader=loader_cls)`` is, for any loader class."""
    def parse(text):
        loader = loader_cls(text)
        try:
            while loader.check_event():
                yield loader.get_event()
        finally:
            loader.dispose()
    return parse

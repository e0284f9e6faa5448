"""PyYAML, imported at a fraction of its usual start cost (``from .pyyaml import yaml``).

Importing PyYAML compiles ``yaml.reader.Reader.NON_PRINTABLE``, a negated character class whose
ranges cover nearly all of Unicode. re's compiler (re/_compiler.py::_optimize_charset) fills a
65,536-entry map one code point at a time in Python for it: about 57 million instructions, more than
the rest of PyYAML's import together, on every run (a bytecode cache does not keep compiled
patterns). The same set written as the few ranges it leaves out (:data:`EQUIVALENT`) compiles in
about 4 million. Before PyYAML's first import, that pattern is put in re's cache under the key
of PyYAML's own pattern, so ``Reader`` receives it from ``re.compile``; the entry is removed again
right after. tests/validator/test_pyyaml_import.py checks that both match exactly the same code
points. If PyYAML is already imported, or re's cache is not a dict keyed (type, pattern, flags) as
in CPython 3.7-3.13, nothing is changed and PyYAML compiles its own pattern.
"""
import sys

# yaml/reader.py::Reader.NON_PRINTABLE (PyYAML 5.1-6.0.x), as the string re.compile receives
NON_PRINTABLE = '[^\x09\x0A\x0D\x20-\x7E\x85\xA0-\uD7FF\uE000-\uFFFD\U00010000-\U0010ffff]'
# the code points NON_PRINTABLE matches, written as themselves
EQUIVALENT = '[\x00-\x08\x0B\x0C\x0E-\x1F\x7F-\x84\x86-\x9F\uD800-\uDFFF\uFFFE\uFFFF]'


def _import_yaml():
    if "yaml" in sys.modules:
        import yaml
        return yaml
    import re
    caches = [c for c in (getattr(re, "_cache", None), getattr(re, "_cache2", None)) if isinstance(c, dict)]
    key = (str, NON_PRINTABLE, 0)
    primed = bool(caches) and key not in caches[0]
    if primed:
        caches[0][key] = re.compile(EQUIVALENT)
    try:
        import yaml
    finally:
        if primed:
            for c in caches:
                c.pop(key, None)
    return yaml


yaml = _import_yaml()

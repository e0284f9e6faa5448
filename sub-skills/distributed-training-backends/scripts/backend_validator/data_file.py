"""JSON data files shipped with the validator (deepspeed_tables.json, accelerate_tables.json), read with
json's C scanner (the ``_json`` module, without importing the ``json`` package; json.loads where there is
none): unlike a Python table, a data file costs no compiling (benchmarks/bench_validator.py).
"""
from __future__ import annotations

_WS = " \t\r\n"  # JSON whitespace
_scanner = None


class _Context:
    """The attributes json.scanner.c_make_scanner reads from a JSONDecoder."""
    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int

    @staticmethod
    def parse_constant(name):
        raise ValueError(f"{name} in a data file")


def read_data(path: str):
    """The JSON value in the file at path."""
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    global _scanner
    if _scanner is None:
        try:
            from _json import make_scanner
        except ImportError:  # pragma: no cover - an interpreter without the C scanner
            import json
            return json.loads(text)
        _scanner = make_scanner(_Context())
    return _scanner(text, len(text) - len(text.lstrip(_WS)))[0]

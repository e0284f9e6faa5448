"""loader_json: positions, lenient (HJSON) features, duplicates, limits, and a property test.

hjson (deepspeed's file parser) and json (accelerate's / the Trainer's) run in this process:
both are pure-Python libraries that the validator itself never imports.
"""
from __future__ import annotations

import json
import math

import hjson
import pytest
from hypothesis import example, HealthCheck, given, settings
from hypothesis import strategies as st

from ds_support import SCRIPTS  # noqa: F401 - puts the validator on sys.path
from backend_validator import loader_json as L
from backend_validator.core import InputError


def test_positions_of_keys_and_items():
    text = '{\n  "a": 1,\n  "zero_optimization": {\n    "stage": 3,\n    "x": [10,\n      20]\n  }\n}\n'
    d = L.load_text(text, "t.json")
    assert d.data == json.loads(text)
    assert d.positions[("a",)] == (2, 3)
    assert d.positions[("zero_optimization", "stage")] == (4, 5)
    assert d.positions[("zero_optimization", "x", 0)] == (5, 11)
    assert d.positions[("zero_optimization", "x", 1)] == (6, 7)
    assert d.lenient_features == [] and d.parse_findings == []
    assert d.scalars[("a",)].raw == "1"


@pytest.mark.parametrize("text,kinds", [
    ('{"a": 1, // c\n "b": 2}', {"comment"}),
    ('{"a": 1, # c\n "b": 2}', {"comment"}),
    ('{"a": /* c */ 1}', {"comment"}),
    ('{"a": [1, 2,], "b": 3,}', {"trailing-comma"}),
    ('{a: 1}', {"unquoted-key"}),
    ("{'a': 'x'}", {"single-quoted-string"}),
    ('{"a": 1\n "b": 2}', {"missing-comma"}),
    ('{"a": two words\n}', {"quoteless-string"}),
    ("{\"a\": '''x\n  y'''}", {"multiline-string"}),
    ('a: 1\nb: 2', {"root-braces-omitted", "unquoted-key", "missing-comma"}),
    ('{"a": NaN}', {"nan-infinity"}),
    ('\ufeff{"a": 1}', {"bom"}),
])
def test_lenient_features_match_hjson(text, kinds):
    d = L.load_text(text, "t.json")
    assert {k for k, _, _ in d.lenient_features} == kinds
    if kinds & {"nan-infinity", "bom"}:
        return
    with pytest.raises(ValueError):
        json.loads(text)
    h = hjson.loads(text)  # what deepspeed reads from a file
    assert json.loads(json.dumps(h)) == d.data


def test_duplicate_key_names_both_lines():
    d = L.load_text('{\n "a": 1,\n "b": {"c": 1},\n "a": 2\n}', "t.json")
    (f,) = d.parse_findings
    assert f.rule == "json-duplicate-key" and f.severity == "error"
    assert "line 4" in f.message and "line 2" in f.message and (f.line, f.col) == (4, 2)
    assert d.data["a"] == 2  # json.load semantics (last wins); deepspeed's hjson hook raises
    with pytest.raises(ValueError, match="Duplicate"):
        from collections import Counter

        def hook(pairs):
            c = Counter(k for k, _ in pairs)
            if any(v > 1 for v in c.values()):
                raise ValueError("Duplicate keys")
            return dict(pairs)
        hjson.loads('{"a": 1, "a": 2}', object_pairs_hook=hook)


@pytest.mark.parametrize("text,msg", [
    ("", "empty"), ("   \n", "empty"), ("[1, 2]", "list"), ("3", "int"), ('"x"', "str"), ("null", "null"),
    ('{"a": 1', "line 1"), ('{"a" 1}', "':'"), ('{"a": 1} x', "extra data"), ('{"a": "x\x01"}', "control"),
    ('{"a": 1,, "b": 2}', "','"), ('{"a": "\\q"}', "escape"), ("{/* x", "comment"), ('{"a": 01}', "line 1"),
])
def test_fatal_inputs_are_one_line_input_errors(text, msg):
    with pytest.raises(InputError) as e:
        L.load_text(text, "t.json")
    assert msg in str(e.value) and "\n" not in str(e.value)


def test_limits_depth_size_binary_encoding(tmp_path):
    for deep in ("[" * 10000 + "]" * 10000, '{"a":' * 10000 + "1" + "}" * 10000):
        with pytest.raises(InputError, match="nesting"):
            L.load_text('{"x": ' + deep + "}", "deep.json")
    with pytest.raises(InputError, match="NUL|binary"):
        L.load_text('{"a": "\x00"}', "b.json")
    p = tmp_path / "latin1.json"
    p.write_bytes('{"a": "\xe9"}'.encode("latin-1"))
    with pytest.raises(InputError, match="UTF-8"):
        L.load_path(str(p))
    big = tmp_path / "big.json"
    with open(big, "wb") as fh:
        fh.write(b'{"a": "')
        fh.seek(L.MAX_BYTES + 10)
        fh.write(b'"}')
    with pytest.raises(InputError, match="larger than"):
        L.load_path(str(big))
    with pytest.raises(InputError, match="no such file"):
        L.load_path(str(tmp_path / "missing.json"))
    with pytest.raises(InputError, match="directory"):
        L.load_path(str(tmp_path))


def test_numbers_keep_json_values_and_raw_text():
    d = L.load_text('{"a": 1e3, "b": 1000.0, "c": -0.5, "d": 12345678901234567890, "e": 1e400}', "n.json")
    assert d.data == json.loads('{"a": 1e3, "b": 1000.0, "c": -0.5, "d": 12345678901234567890, "e": 1e400}')
    assert d.scalars[("a",)].raw == "1e3" and isinstance(d.data["a"], float)
    assert math.isinf(d.data["e"])
    assert hjson.loads('{"a": 1e3}')["a"] == 1000 and isinstance(hjson.loads('{"a": 1e3}')["a"], int)


_scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**20, 10**20),
                     st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8))
_values = st.recursive(_scalars, lambda ch: st.one_of(st.lists(ch, max_size=4),
                                                       st.dictionaries(st.text(max_size=6), ch, max_size=4)),
                       max_leaves=20)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])  # recursive values: 500 took 6.8 s loaded
@given(st.dictionaries(st.text(max_size=6), _values, max_size=5), st.integers(0, 2))
def test_property_valid_json_round_trips(obj, indent):
    text = json.dumps(obj, indent=indent or None)
    d = L.load_text(text, "p.json")
    assert d.data == json.loads(text)
    assert d.lenient_features == [] and d.parse_findings == []
    for path in d.positions:
        line, col = d.positions[path]
        assert 1 <= line <= text.count("\n") + 1 and col >= 1


_alphabet = st.sampled_from(list('{}[],:"\'/#*\n \t\\aeu0123456789.-+eEtrufalsnNI\x00\xe9\ufeff'))


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.text(_alphabet, max_size=60), st.text(max_size=40)))
@example("'\\\n")  # an escape backslash followed by a newline was quoted raw: a two-line error
@example('{"a": "\\\x00"}')
def test_property_any_text_is_a_doc_or_an_input_error(text):
    try:
        d = L.load_text(text, "f.json")
    except InputError as e:
        assert "\n" not in str(e) and str(e)
        return
    assert isinstance(d.data, dict)
    try:
        ref = json.loads(text)
    except ValueError:
        return
    if isinstance(ref, dict) and not d.parse_findings:
        assert json.dumps(d.data, sort_keys=True) == json.dumps(ref, sort_keys=True)


def test_duplicate_key_rule_is_registered_and_its_examples_hold():
    import ds_examples
    from backend_validator import core
    ds_examples.load_rules()
    import backend_validator.rules.deepspeed_input  # noqa: F401
    r = core.REGISTRY["json-duplicate-key"]
    assert r.family == "input" and r.severity == "error"
    ex = ds_examples.parse(r.doc)
    fails = L.load_text(ex["fails"]["json"], "f.json")
    assert [f.rule for f in fails.parse_findings] == ["json-duplicate-key"]
    assert L.load_text(ex["passes"]["json"], "p.json").parse_findings == []


# -- loader_json_strict: the strict-JSON fast path the engine parses with --------------------------------

def _same_doc(text):
    """Both loaders on text: the same result (a Doc with the same data, positions, scalars, findings and
    lenient features, or the same exception); returns the fast path's Doc (or None)."""
    from backend_validator import loader_json_strict as S
    try:
        ref = L.load_text(text, "s.json", source_path="/x/s.json")
    except Exception as e:  # InputError; a ValueError for an integer too long for int() (the CLI reports it)
        with pytest.raises(type(e)) as got:
            S.load_text(text, "s.json", source_path="/x/s.json")
        assert str(got.value) == str(e)
        return None
    d = S.load_text(text, "s.json", source_path="/x/s.json")
    assert (d.kind, d.name, d.text, d.source_path) == ("json", "s.json", text, "/x/s.json")
    assert json.dumps(d.data) == json.dumps(ref.data) and repr(d.data) == repr(ref.data)
    assert [f.as_dict() for f in d.parse_findings] == [f.as_dict() for f in ref.parse_findings]
    assert d.lenient_features == ref.lenient_features
    assert d.positions == ref.positions and d.scalars == ref.scalars
    assert d.pos(("zero_optimization", "stage")) == ref.pos(("zero_optimization", "stage"))
    return d


@pytest.mark.parametrize("text,fast", [
    ('{\n  "zero_optimization": {"stage": 3, "x": [1, 2.5, 1e3, -0, true, null]},\n  "s": "a/b\\n"\n}\n', True),
    ('  {"a": 12345678901234567890, "e": 1e400, "k": {}}  \n', True),
    ('{"a": 1, "a": 2}', False),  # duplicate key: json-duplicate-key
    ('{"a": NaN}', False), ('{"a": -Infinity}', False),  # nan-infinity
    ('\ufeff{"a": 1}', False),  # bom
    ('{"a": "\\ud800"}', False), ('{"a": "\\u00e9"}', False),  # \u escapes: loader_json's own decoding
    ('{"a": 1,}', False), ('{a: 1}', False), ('{"a": 1} // c', False),  # HJSON
    ('[1]', False), ('"x"', False), ('', False), ('{"a": 1} x', False), ('{"a": "\x01"}', False),
    ('{"a": ' + "[" * 60 + "]" * 60 + '}', False),  # more than _MAX_BRACKETS
    ('{"a": 1' + "0" * 5000 + '}', False),  # longer than int() converts
])
def test_strict_fast_path_gives_the_full_parsers_doc(text, fast):
    from backend_validator import loader_json_strict as S
    d = _same_doc(text)
    assert isinstance(d, S.StrictJsonDoc) is fast, text


def test_strict_doc_parses_positions_only_when_asked_and_keeps_assignments():
    from backend_validator import loader_json_strict as S
    d = S.load_text('{"a": {"b": 1}}', "s.json")
    assert isinstance(d, S.StrictJsonDoc) and d._set == {}
    assert d.pos(("a", "b")) == (1, 8) and d.scalars[("a", "b")].raw == "1"
    d.positions = {(): (9, 9)}
    assert d.positions == {(): (9, 9)} and d.scalars[("a", "b")].raw == "1"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.text(max_size=6), _values, max_size=5), st.integers(0, 2))
def test_property_strict_fast_path_equals_the_full_parser(obj, indent):
    _same_doc(json.dumps(obj, indent=indent or None, ensure_ascii=bool(indent)))


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.text(_alphabet, max_size=60), st.text(max_size=40)))
def test_property_any_text_same_through_the_fast_path(text):
    _same_doc(text)


def test_integer_longer_than_python_converts_is_an_input_error():
    # int() refuses more than sys.get_int_max_str_digits() digits (4300 by default): before this was an
    # "internal error ... please report" from the command line, now a one-line input error (exit 2)
    with pytest.raises(InputError, match=r"integer of 5000 digits at line 2"):
        L.load_text('{\n"x": ' + "9" * 5000 + "}", "big.json")

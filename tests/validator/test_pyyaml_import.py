"""backend_validator/pyyaml.py imports PyYAML with an equivalent, cheaply compiled pattern for
yaml.reader.Reader.NON_PRINTABLE (its own costs about 57 million instructions on every start), and in
a fresh process only PyYAML's loading half, as a private package. The substitute must match exactly
what PyYAML's pattern matches, and the loader built on the private package must give the same
documents, positions, findings and errors as with the yaml package."""
from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

SCRIPTS = Path(__file__).resolve().parents[2] / "sub-skills" / "distributed-training-backends" / "scripts"
sys.path.insert(0, str(SCRIPTS))
from backend_validator import pyyaml  # noqa: E402


def test_the_pattern_is_pyyamls_own():
    """NON_PRINTABLE is the string the installed yaml/reader.py compiles (else the priming is unused)."""
    tree = ast.parse(Path(yaml.reader.__file__).read_text(encoding="utf-8"))
    found = [n.value.args[0].value for n in ast.walk(tree) if isinstance(n, ast.Assign)
             and any(getattr(t, "id", None) == "NON_PRINTABLE" for t in n.targets)]
    assert found == [pyyaml.NON_PRINTABLE]


def test_the_substitute_matches_exactly_the_same_code_points():
    every = "".join(map(chr, range(0x110000)))
    theirs = [m.start() for m in re.compile(pyyaml.NON_PRINTABLE).finditer(every)]
    ours = [m.start() for m in re.compile(pyyaml.EQUIVALENT).finditer(every)]
    assert ours == theirs
    assert len(ours) == 2111  # C0 controls but tab/LF/CR, DEL..0x9F but NEL, surrogates, U+FFFE/FFFF


PROBE = r"""
import json, re, sys
sys.path.insert(0, sys.argv[1])
if sys.argv[2] == "ours":
    from backend_validator.pyyaml import real
    yaml = real()
else:
    import yaml
errors = []
for text in ("a: 1\nb: \x07x\n", "k: caf\xe9\n", "k: \ud800\n", "k: \ufffe\n", "k: \U0001F600\n"):
    try:
        yaml.safe_load(text)
        errors.append(None)
    except yaml.YAMLError as e:
        errors.append(str(e))
from backend_validator.pyyaml import NON_PRINTABLE
print(json.dumps({"pattern": yaml.reader.Reader.NON_PRINTABLE.pattern, "errors": errors,
                  "cached": (str, NON_PRINTABLE, 0) in re._cache}))
"""


def _probe(mode):
    r = subprocess.run([sys.executable, "-c", PROBE, str(SCRIPTS), mode], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout)


def test_a_fresh_import_uses_the_substitute_and_reports_the_same_errors():
    ours, theirs = _probe("ours"), _probe("theirs")
    assert ours["pattern"] == pyyaml.EQUIVALENT and theirs["pattern"] == pyyaml.NON_PRINTABLE
    assert ours["errors"] == theirs["errors"]
    assert [e is None for e in ours["errors"]] == [False, True, False, False, True]
    assert ours["cached"] is False and theirs["cached"] is True  # the primed entry left re's cache again


LOADS = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from backend_validator import core, loader_yaml
texts = json.loads(sys.stdin.read())
out = []
for text in texts:
    try:
        d = loader_yaml.load_text(text, "x.yaml")
        out.append(repr((d.data, sorted(d.positions.items(), key=repr), sorted(d.scalars.items(), key=repr),
                         [f.as_dict() for f in d.parse_findings])))
    except core.InputError as e:
        out.append("InputError: " + str(e))
print(json.dumps({"out": out, "yaml_imported": "yaml" in sys.modules,
                  "private": "backend_validator._pyyaml.loader" in sys.modules}))
"""

TEXTS = [p.read_text(encoding="utf-8") for p in sorted((SCRIPTS.parent / "examples").glob("*.yaml"))] + [
    "a: yes\nb: 010\nc: 1:30\nd: '1e3'\ne: 2024-01-02\nf: !!binary aGk=\ng: ~\nh: 0x1F\ni: .inf\n",
    "a: 1\na: 2\nb: &x {k: 1}\nc: *x\nd:\n  <<: *x\n  j: 2\n",
    "a: !!python/object:os.system x\nb: !custom 1\n",
    "a: [1, 2\n", "a: b: c\n", "- 1\n- 2\n", "", "a: 1\n---\nb: 2\n", "a: \x07\n", "k: \ufeffv\n",
    "x: " + "y" * (300 * 1024) + "\n",  # above the pure-Python limit: libyaml from the yaml package
    "a: [1, 2\n" + "#" * (300 * 1024) + "\n",
]


def test_the_private_loading_half_gives_what_the_yaml_package_gives():
    def run(prime):
        code = ("import yaml\n" if prime else "") + LOADS
        r = subprocess.run([sys.executable, "-c", code, str(SCRIPTS)], input=json.dumps(TEXTS),
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr[-2000:]
        return json.loads(r.stdout)
    private, package = run(False), run(True)
    assert private["private"] is True and package["private"] is False
    assert private["yaml_imported"] is True  # the libyaml inputs import the package itself
    assert private["out"] == package["out"]
    assert sum(o.startswith("InputError") for o in private["out"]) >= 6


LAZY = r"""
import json, re, sys
sys.path.insert(0, sys.argv[1])
from backend_validator import pyyaml
ns = pyyaml.loading()
lazy = pyyaml.LazyPattern
ts = ns.SafeConstructor.timestamp_regexp
resolvers = [r for rs in ns.Resolver.yaml_implicit_resolvers.values() for _, r in rs]
before = {"timestamp_lazy": isinstance(ts, lazy) and ts._compiled is None,
          "resolvers_lazy": bool(resolvers) and all(isinstance(r, lazy) for r in resolvers),
          "any_compiled": any(r._compiled is not None for r in resolvers if isinstance(r, lazy)),
          "cache_plain": type(re._cache) is dict}
from backend_validator import loader_yaml
d = loader_yaml.load_text("a: 2024-01-02 10:00:00\nb: 1.5\nc: [no, ~]\n", "x.yaml")
tags = {r._key[1]: tag for rs in ns.Resolver.yaml_implicit_resolvers.values() for tag, r in rs}
compiled = sorted({tags[r._key[1]].rsplit(":", 1)[1] for r in resolvers
                   if isinstance(r, lazy) and r._compiled is not None})
print(json.dumps({**before, "data": repr(d.data), "compiled": compiled,
                  "types": sorted({type(r._compiled).__name__ for r in resolvers if isinstance(r, lazy)})}))
"""


def test_pyyamls_patterns_compile_on_first_use_and_match_the_same():
    """On CPython <= 3.11 (re's cache a dict read with _cache[key]) every pattern PyYAML compiles on import
    is a LazyPattern until used; a timestamp compiles the real pattern and parses as PyYAML parses it. On
    later versions nothing is lazy and the same holds."""
    r = subprocess.run([sys.executable, "-c", LAZY, str(SCRIPTS)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(r.stdout)
    assert got["cache_plain"] is True  # re's own cache is back
    # loader_yaml keeps a timestamp as its text (test_the_private_loading_half_... compares with the package)
    assert got["data"] == repr({"a": "2024-01-02 10:00:00", "b": 1.5, "c": [False, None]})
    if type(re.__dict__.get("_cache")) is dict and "_cache2" not in re.__dict__:
        assert got["timestamp_lazy"] and got["resolvers_lazy"] and not got["any_compiled"], got
        # only the resolvers the scalars' first characters reach compiled; the constructor's did not
        assert {"timestamp", "float", "bool", "null"} <= set(got["compiled"]) and "merge" not in got["compiled"]
        assert "Pattern" in got["types"]
    else:  # forced branch of the same test: nothing lazy, patterns compiled on import
        assert not got["timestamp_lazy"] and not got["resolvers_lazy"], got


def test_lazy_pattern_behaves_as_the_compiled_one():
    p = pyyaml.LazyPattern((str, r"^(?:a|b+)$", re.X))
    assert p._compiled is None
    assert p.match("bbb").group() == "bbb" and p.match("c") is None and p.pattern == r"^(?:a|b+)$"
    assert p._compiled is re.compile(r"^(?:a|b+)$", re.X)
    with pytest.raises(KeyError):
        pyyaml._LazyCache()[(bytes, b"x", 0)]

"""backend_validator/pyyaml.py imports PyYAML with an equivalent, cheaply compiled pattern for
yaml.reader.Reader.NON_PRINTABLE (its own costs about 57 million instructions on every start).
The substitute must match exactly what PyYAML's matches, and a reader error must read the same."""
from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

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
    from backend_validator.pyyaml import yaml
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

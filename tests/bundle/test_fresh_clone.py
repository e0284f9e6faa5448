"""A bare clone passes `make test`: nothing in the default run reads the out-of-tree corpus.

The corpus layer is opt-in (PDT_CORPUS / `make test-corpus`); these tests run pytest's own
collection in a subprocess to prove which tests each mode selects, and check the Makefile and
`.ci/run` wiring the README describes.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# the folder beside the clone that CI provides; spelled in parts so that this file, which checks that
# no test names it, does not name it either
SHARED_DIR = "." + "./" + "sh" + "ared"


def _collect(extra_env: dict, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PDT_CORPUS", "CI")}
    env.update(extra_env)
    return subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                           *args, "tests/validator/test_corpus_agreement.py",
                           "tests/validator_ds/test_ds_differential.py"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)


def test_corpus_tests_are_deselected_without_the_corpus():
    r = _collect({})
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    ids = [ln for ln in r.stdout.splitlines() if "::" in ln]
    assert "tests/validator_ds/test_ds_differential.py::test_edge_cases_agree" in ids
    assert not any("corpus" in i or "test_mutations" in i for i in ids), ids
    assert re.search(r"\d+ deselected", r.stdout), r.stdout[-500:]


def test_corpus_layer_selects_exactly_the_corpus_tests(tmp_path):
    r = _collect({"PDT_CORPUS": str(tmp_path)}, "-m", "corpus")
    ids = sorted(ln for ln in r.stdout.splitlines() if "::" in ln)
    assert ids == ["tests/validator/test_corpus_agreement.py::test_corpus_agreement",
                   "tests/validator_ds/test_ds_differential.py::test_mutations"], r.stdout[-2000:]


def test_corpus_layer_on_a_missing_folder_fails_not_skips(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["PDT_CORPUS"] = str(tmp_path / "nowhere")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "corpus",
                        "tests/validator/test_property.py"], cwd=REPO, env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 1, r.stdout[-2000:]
    assert "is not a config corpus" in r.stdout and "1 error" in r.stdout, r.stdout[-2000:]


def test_no_test_names_the_shared_folder():
    """Only PDT_CORPUS decides where the corpus is; no test hard-codes the folder beside the clone."""
    offenders = []
    for p in sorted((REPO / "tests").rglob("*.py")):
        text = p.read_text(encoding="utf-8", errors="replace")
        name = SHARED_DIR[3:]
        if re.search(re.escape(SHARED_DIR) + rf"""|["']{name}["']""", text) and p.name != "test_fresh_clone.py":
            offenders.append(str(p.relative_to(REPO)))
    assert not offenders, offenders


def test_make_and_ci_wire_both_layers():
    make = (REPO / "Makefile").read_text()
    assert re.search(r'^test-corpus: venv.*\n(\t.*\n)*\tPDT_CORPUS="\$\(abspath \$\(CORPUS\)\)" \$\(VPY\) -m pytest \$\(PYTEST_PARALLEL\) -m corpus$',
                     make, re.M), "make test-corpus must name the corpus through PDT_CORPUS"
    ci = (REPO / ".ci" / "run").read_text()
    lines = [ln.strip() for ln in ci.splitlines()]
    assert lines.index("make test") < lines.index('make test-corpus CORPUS="$corpus"')
    assert f'corpus="{SHARED_DIR}/corpus"' in lines and "exit 1" in lines


def test_make_help_lists_every_target():
    make = (REPO / "Makefile").read_text()
    phony = re.search(r"^\.PHONY: (.*)$", make, re.M).group(1).split()
    r = subprocess.run(["make", "-s", "help"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    listed = re.findall(r"^  make (\S+)", r.stdout, re.M)
    assert sorted(listed) == sorted(phony), (listed, phony)
    readme = (REPO / "README.md").read_text()
    for target in phony:
        assert f"`make {target}`" in readme, f"README does not name make {target}"

"""Fixtures for the bundle tests: the linter module, fixture bundles, in-process runs.

pytest runs with --import-mode=importlib, so helpers are handed out as fixtures.
"""
from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "check_bundle.py"

_spec = importlib.util.spec_from_file_location("check_bundle", SCRIPT)
check_bundle = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("check_bundle", check_bundle)   # dataclasses look the module up
_spec.loader.exec_module(check_bundle)

LONG_BODY = "\n".join(f"Line {i} of the long reference." for i in range(120))

# A clean two-sub-skill bundle that exercises every resolution form the linter supports.
CLEAN = {
    "SKILL.md": """\
        ---
        name: demo-bundle
        description: "Route demo requests: which backend, multi-GPU, multi-node."
        license: Apache-2.0
        ---

        # Demo router

        | Request | Sub-skill | Open first |
        | --- | --- | --- |
        | alpha things | [alpha](sub-skills/alpha/SKILL.md) | `sub-skills/alpha/SKILL.md` |
        | beta things | [beta](sub-skills/beta/SKILL.md) | `sub-skills/beta/SKILL.md` |

        Run `python3 scripts/tool.py --help`. Versions: [versions](references/top.md).

        ```bash
        python3 sub-skills/alpha/scripts/run.py config.yaml
        python3 scripts/not-checked-in-code-blocks.py
        ```
        """,
    "scripts/tool.py": "print('tool')\n",
    "references/top.md": "# Top reference\n\nShort.\n",
    "sub-skills/alpha/SKILL.md": """\
        ---
        name: alpha
        description: "Alpha sub-skill."
        disable-model-invocation: true
        metadata:
          disco-role: operating
        license: Apache 2.0
        ---

        # Alpha

        - [references/guide.md](references/guide.md) for the guide.
        - `references/long.md` when it is long ([jump](references/long.md#section-two)).
        - `scripts/run.py` checks things; see `../beta/SKILL.md` for beta.
        - Placeholders are skipped: `references/<topic>.md`, `sub-skills/*/SKILL.md`.
        - Upstream citations are not bundle paths: `deepspeed/runtime/config.py`.
        - A URL is skipped: [docs](https://example.org/x.md).
        - In-page: [back to top](#alpha).
        """,
    "sub-skills/alpha/references/guide.md": """\
        # Guide

        Uses `scripts/run.py` (skill folder) and `sub-skills/beta/SKILL.md` (bundle root).
        Sibling: [beta](../../beta/SKILL.md).
        """,
    "sub-skills/alpha/references/long.md": "# Long\n\n## Contents\n\n- [Section one](#section-one)\n"
                                           "- [Section `two`: more!](#section-two-more)\n- [Two](#section-two)\n\n"
                                           "## Section one\n\n" + LONG_BODY + "\n\n## Section `two`: more!\n\nx\n\n"
                                           "## Section two\n\ny\n",
    "sub-skills/alpha/scripts/run.py": "print('run')\n",
    "sub-skills/beta/SKILL.md": """\
        ---
        name: beta
        description: "Beta sub-skill."
        disable-model-invocation: true
        metadata:
          disco-role: operating
        license: MIT
        ---

        # Beta

        Nothing to link.
        """,
    "README.md": "# Demo\n\nStart at [SKILL.md](SKILL.md) or [alpha](sub-skills/alpha/SKILL.md#alpha).\n",
    # Excluded folders: these are broken on purpose and must be ignored.
    "tests/fixtures/broken.md": "[x](missing.md)\n",
    ".venv/lib/broken.md": "[x](missing.md)\n",
}


def write_bundle(root: Path, files: dict, base: dict | None = CLEAN) -> Path:
    merged = dict(base or {})
    merged.update(files)
    for rel, text in merged.items():
        if text is None:
            continue
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            p.write_bytes(text)
        else:
            p.write_text(textwrap.dedent(text), encoding="utf-8")
    return root


def run(*argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = check_bundle.main([str(a) for a in argv])
        except SystemExit as e:  # argparse --help / usage errors
            rc = e.code
    return rc, out.getvalue(), err.getvalue()


def findings(root: Path, *extra):
    rc, out, err = run("--root", root, "--format", "json", *extra)
    data = json.loads(out) if out.strip() else None
    return rc, data, err


class Lint:
    """What the tests use: build a bundle, run the linter, read findings."""
    module = check_bundle
    clean = CLEAN
    script = SCRIPT
    repo = REPO

    def __init__(self, tmp_path: Path):
        self.tmp_path = tmp_path

    def bundle(self, files: dict | None = None, base: dict | None = CLEAN, name: str = "demo-bundle") -> Path:
        return write_bundle(self.tmp_path / name, files or {}, base)

    run = staticmethod(run)
    findings = staticmethod(findings)

    def lines(self, root: Path, *extra):
        """(exit code, ['path:line: rule: message', ...]) in text format."""
        rc, out, _ = run("--root", root, *extra)
        return rc, out.splitlines()


@pytest.fixture
def lint(tmp_path) -> Lint:
    return Lint(tmp_path)

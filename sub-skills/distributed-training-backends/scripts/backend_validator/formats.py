"""Output formats for CI: SARIF 2.1.0 (code scanning) and GitHub Actions annotations.

``cli.main`` hands every finding and input error to :func:`write` when
``--output`` is one of :data:`CHOICES`; the text and JSON formats stay in cli.py.

* ``sarif``: one SARIF 2.1.0 log with one run. ``tool.driver.rules`` lists every
  registered rule (id, short and full description, default level, help text and a
  ``helpUri`` to the rule's section of ``references/validator-rules.md``);
  each finding is a result with ``ruleId``, ``level``, ``message`` and a physical
  location (start line/column, 1-based like the text output). Inputs that could
  not be read are tool execution notifications and make
  ``executionSuccessful`` false. GitHub code scanning accepts this file with
  ``github/codeql-action/upload-sarif``.
* ``github``: one workflow command per finding,
  ``::error file=PATH,line=L,col=C,title=RULE::MESSAGE`` (``::warning`` for
  warnings, ``::notice`` for info), which GitHub Actions shows as annotations
  on the pull request.

helpUri: the rules page of the bundle a user pinned is not at a fixed address,
so its base is ``$BACKEND_VALIDATOR_DOCS_URL`` when set (for example
``https://github.com/OWNER/pytorch-distributed-training/blob/v0.2.0``), else the
``file://`` address of the local copy of the bundle, else left out.
"""
from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Optional, TextIO
from urllib.parse import quote

from . import core
from .core import Finding
from .version import DISTRIBUTION, VERIFIED_AGAINST, bundle_version

CHOICES = ("sarif", "github")
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
RULES_DOC = "sub-skills/distributed-training-backends/references/validator-rules.md"
DOCS_URL_ENV = "BACKEND_VALIDATOR_DOCS_URL"
SARIF_LEVEL = {"error": "error", "warning": "warning", "info": "note"}
GITHUB_COMMAND = {"error": "error", "warning": "warning", "info": "notice"}
TOOL_NAME = "validate_backend_config"


def write(kind: str, out: TextIO, findings: List[Finding], input_errors: List[Dict[str, str]]) -> None:
    if kind == "sarif":
        json.dump(sarif_log(findings, input_errors), out, indent=2)
        out.write("\n")
    elif kind == "github":
        for line in github_lines(findings, input_errors):
            out.write(line + "\n")
    else:  # pragma: no cover - argparse restricts the choices
        raise ValueError(kind)


# ---------------------------------------------------------------- SARIF
def docs_base() -> Optional[str]:
    """Base address of the bundle for helpUri (see the module docstring)."""
    env = os.environ.get(DOCS_URL_ENV, "").strip()
    if env:
        return env.rstrip("/")
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.normpath(os.path.join(here, "..", "..", "..", ".."))
    if os.path.isfile(os.path.join(root, RULES_DOC)):
        return "file://" + quote(root.replace(os.sep, "/"))
    return None


def help_uri(rule_id: str, base: Optional[str]) -> Optional[str]:
    # the rule's heading in validator-rules.md is "### RULE-ID"; its anchor is the id itself
    return f"{base}/{RULES_DOC}#{rule_id}" if base else None


def _rule_descriptor(r: core.Rule, base: Optional[str]) -> Dict[str, Any]:
    from .docs import parse_doc  # lazy: docs imports cli, which imports this module
    desc, _examples = parse_doc(r.doc)
    full = " ".join(desc.split()).replace("``", "`") if desc else r.summary  # RST literals -> Markdown
    d: Dict[str, Any] = {
        "id": r.id,
        "name": "".join(part.capitalize() for part in r.id.split("-")),
        "shortDescription": {"text": r.summary},
        "fullDescription": {"text": full},
        "defaultConfiguration": {"level": SARIF_LEVEL[r.severity]},
        "help": {"text": f"{full}\nSource: {r.source}. Rule reference: {RULES_DOC}#{r.id}",
                 "markdown": f"{full}\n\nSource: `{r.source}`. Rule reference: "
                             f"[{r.id}]({RULES_DOC}#{r.id})"},
        "properties": {"tags": [r.family], "family": r.family, "source": r.source},
    }
    uri = help_uri(r.id, base)
    if uri:
        d["helpUri"] = uri
    if r.consumers:
        d["properties"]["consumers"] = list(r.consumers)
    return d


def _artifact(name: str) -> Optional[Dict[str, Any]]:
    """artifactLocation for a file name as the CLI shows it; None for standard input."""
    if not name or name == "<stdin>":
        return None
    path = name.replace(os.sep, "/")
    if os.path.isabs(name):
        return {"uri": "file://" + quote(path)}
    if path.startswith("./"):
        path = path[2:]
    return {"uri": quote(path), "uriBaseId": "%SRCROOT%"}


def _location(name: str, line: Optional[int], col: Optional[int]) -> Optional[Dict[str, Any]]:
    art = _artifact(name)
    if art is None:
        return None
    phys: Dict[str, Any] = {"artifactLocation": art}
    if isinstance(line, int) and line >= 1:
        region: Dict[str, Any] = {"startLine": line}
        if isinstance(col, int) and col >= 1:
            region["startColumn"] = col
        phys["region"] = region
    return {"physicalLocation": phys}


def _message(f: Finding) -> str:
    text = f.message
    if f.path:
        text += f" [{f.key_path()}]"
    if f.hint:
        text += f" (hint: {f.hint})"
    return text


def sarif_log(findings: List[Finding], input_errors: List[Dict[str, str]]) -> Dict[str, Any]:
    from . import rules  # noqa: F401  (registers every rule)
    base = docs_base()
    regs = sorted(core.REGISTRY.values(), key=lambda r: r.id)
    index = {r.id: i for i, r in enumerate(regs)}
    version = bundle_version()
    driver: Dict[str, Any] = {
        "name": TOOL_NAME,
        "fullName": f"{TOOL_NAME} ({DISTRIBUTION} bundle)",
        "version": version,
        "rules": [_rule_descriptor(r, base) for r in regs],
        "properties": {"verifiedAgainst": VERIFIED_AGAINST},
    }
    if version.count(".") == 2:
        driver["semanticVersion"] = version
    if base:
        driver["informationUri"] = f"{base}/{RULES_DOC}"
    results = []
    for f in findings:
        res: Dict[str, Any] = {
            "ruleId": f.rule,
            "level": SARIF_LEVEL.get(f.severity, "error"),
            "message": {"text": _message(f)},
        }
        if f.rule in index:
            res["ruleIndex"] = index[f.rule]
        loc = _location(f.file, f.line, f.col)
        if loc:
            res["locations"] = [loc]
        if f.path:
            res["properties"] = {"keyPath": f.key_path()}
        results.append(res)
    notes = []
    for ie in input_errors:
        n: Dict[str, Any] = {"level": "error", "message": {"text": f"{ie['file']}: {ie['message']}"},
                             "descriptor": {"id": "input-unreadable"}}
        loc = _location(ie["file"], None, None)
        if loc:
            n["locations"] = [loc]
        notes.append(n)
    invocation: Dict[str, Any] = {"executionSuccessful": not input_errors}
    if notes:
        invocation["toolExecutionNotifications"] = notes
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": driver},
            "invocations": [invocation],
            "columnKind": "unicodeCodePoints",
            "results": results,
        }],
    }


# ---------------------------------------------------------------- GitHub Actions
def _escape_data(s: str) -> str:
    """Workflow-command message escaping (as @actions/core escapeData does)."""
    return str(s).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(s: str) -> str:
    """Workflow-command property escaping (as @actions/core escapeProperty does)."""
    return _escape_data(s).replace(":", "%3A").replace(",", "%2C")


def github_line(kind: str, message: str, file: str = "", line: Optional[int] = None,
                col: Optional[int] = None, title: str = "") -> str:
    props = []
    if file and file != "<stdin>":
        props.append(f"file={_escape_property(file)}")
        if isinstance(line, int) and line >= 1:
            props.append(f"line={line}")
            if isinstance(col, int) and col >= 1:
                props.append(f"col={col}")
    if title:
        props.append(f"title={_escape_property(title)}")
    head = f"::{kind}" + (" " + ",".join(props) if props else "")
    return f"{head}::{_escape_data(message)}"


def github_lines(findings: List[Finding], input_errors: List[Dict[str, str]]) -> List[str]:
    out = []
    for f in findings:
        msg = f.message + (f" [{f.key_path()}]" if f.path else "") + (f"\nhint: {f.hint}" if f.hint else "")
        if f.file == "<stdin>":
            msg = f"<stdin>: {msg}"
        out.append(github_line(GITHUB_COMMAND.get(f.severity, "error"), msg, f.file, f.line, f.col, f.rule))
    for ie in input_errors:
        out.append(github_line("error", f"{ie['file']}: {ie['message']}", ie["file"], title="input-error"))
    return out

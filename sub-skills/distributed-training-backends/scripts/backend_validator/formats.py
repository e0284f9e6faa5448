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

Launch commands (``--launch-command`` / ``--node-set``): a finding on the command itself
has the file name ``<launch-command>`` (``<launch-command>#N`` for the N-th of several) and
the line/column of the flag inside the command string. Pass ``commands`` (that name ->
the command text) to :func:`write`. SARIF gives each command an artifact of its own,
``launch-command-N`` (a relative URI with no ``uriBaseId``), whose ``contents.text`` is the
command, and puts the flag's line/column in the result's ``physicalLocation`` region:
GitHub code scanning shows only results that carry a physical location with a non-empty
``artifactLocation.uri`` (it ignores logical locations), and it accepts a URI that is not a
file of the repository (the alert then shows the name without a code preview). GitHub
annotations have no file for a command: the message starts with where the flag is
(``launch command N, line L, column C: ...``). Standard input gets the artifact ``stdin``: every
result carries a location, because code scanning rejects an upload with a result that has none.

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


def write(kind: str, out: TextIO, findings: List[Finding], input_errors: List[Dict[str, str]],
          commands: Optional[Dict[str, str]] = None) -> None:
    """``commands``: finding file name (``<launch-command>`` or ``<launch-command>#N``) -> command text."""
    if kind == "sarif":
        json.dump(sarif_log(findings, input_errors, commands), out, indent=2)
        out.write("\n")
    elif kind == "github":
        for line in github_lines(findings, input_errors, commands):
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
    from .docs import parse_doc  # lazy: the rule docstrings are read only for SARIF
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
    """artifactLocation for a file name as the CLI shows it; None for standard input and other
    <names> that are no file."""
    if not name or (name.startswith("<") and ">" in name):
        return None
    path = name.replace(os.sep, "/")
    if os.path.isabs(name):
        return {"uri": "file://" + quote(path)}
    if path.startswith("./"):
        path = path[2:]
    return {"uri": quote(path), "uriBaseId": "%SRCROOT%"}


def command_number(name: str, commands: Optional[Dict[str, str]]) -> Optional[int]:
    """1-based number of the launch command a finding's file name stands for, else None."""
    if not commands or name not in commands:
        return None
    return list(commands).index(name) + 1


def command_uri(n: int) -> str:
    return f"launch-command-{n}"


def _command_snippet(command: Optional[str], line: Optional[int], col: Optional[int]) -> Optional[str]:
    """The word of a launch command that starts at line/col (up to the next blank)."""
    if not command or not isinstance(line, int) or not isinstance(col, int) or line < 1 or col < 1:
        return None
    lines = command.split("\n")
    if line > len(lines):
        return None
    rest = lines[line - 1][col - 1:].split()
    return rest[0] if rest else None


def _location(name: str, line: Optional[int], col: Optional[int],
              commands: Optional[Dict[str, str]] = None) -> Optional[Dict[str, Any]]:
    n = command_number(name, commands)
    art = {"uri": command_uri(n), "index": n - 1} if n else _artifact(name)
    if art is None and name:
        # standard input (or a command not given): still a location, since code scanning rejects the
        # whole upload when a result has none ("expected at least one location", codeql-action #1738)
        import re
        art = {"uri": re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-") or "input"}
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


def sarif_log(findings: List[Finding], input_errors: List[Dict[str, str]],
              commands: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
    from . import rules
    rules.load_all()  # every rule is described in the SARIF driver
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
        loc = _location(f.file, f.line, f.col, commands)
        if loc:
            res["locations"] = [loc]
        if f.path:
            res["properties"] = {"keyPath": f.key_path()}
        snippet = _command_snippet(commands.get(f.file) if commands else None, f.line, f.col)
        if loc and snippet:  # the flag as written, for viewers that show no artifact contents
            loc["physicalLocation"]["region"]["snippet"] = {"text": snippet}
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
    run: Dict[str, Any] = {
        "tool": {"driver": driver},
        "invocations": [invocation],
        "columnKind": "unicodeCodePoints",
        "results": results,
    }
    if commands:  # one artifact per launch command, its text embedded (see the module docstring)
        run["artifacts"] = [{"location": {"uri": command_uri(i + 1)}, "contents": {"text": c},
                             "mimeType": "text/x-shellscript",
                             "description": {"text": f"launch command {i + 1} as given to --launch-command"}}
                            for i, c in enumerate(commands.values())]
    return {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}


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


def github_lines(findings: List[Finding], input_errors: List[Dict[str, str]],
                 commands: Optional[Dict[str, str]] = None) -> List[str]:
    out = []
    for f in findings:
        msg = f.message + (f" [{f.key_path()}]" if f.path else "") + (f"\nhint: {f.hint}" if f.hint else "")
        n = command_number(f.file, commands)
        if f.file == "<stdin>":
            msg = f"<stdin>: {msg}"
        elif n:  # no file to annotate: say where in which command
            where = f", line {f.line}, column {f.col}" if f.line else ""
            msg = f"launch command {n}{where}: {msg}"
            out.append(github_line(GITHUB_COMMAND.get(f.severity, "error"), msg, title=f.rule))
            continue
        out.append(github_line(GITHUB_COMMAND.get(f.severity, "error"), msg, f.file, f.line, f.col, f.rule))
    for ie in input_errors:
        out.append(github_line("error", f"{ie['file']}: {ie['message']}", ie["file"], title="input-error"))
    return out

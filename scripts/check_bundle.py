#!/usr/bin/env python3
"""Lint an agent-skill bundle: front matter, paths, orphans, tables of contents, sizes.

Standard library + PyYAML only. Never modifies files. Run `--help` for the rules.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import posixpath
import re
import sys
import urllib.parse
from dataclasses import asdict, dataclass
from pathlib import Path

try:
    import yaml
except ImportError:  # pragma: no cover - exercised only without PyYAML
    yaml = None

EXIT_CLEAN, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2

SPEC_FIELDS = ("name", "description", "license", "compatibility", "metadata", "allowed-tools")
SUB_SKILL_ONLY_FIELDS = ("disable-model-invocation",)
NAME_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
RESERVED_NAME_WORDS = ("anthropic", "claude")
MAX_NAME = 64
MAX_DESCRIPTION = 1024
MAX_COMPATIBILITY = 500
MAX_BODY_LINES = 500          # a SKILL.md body must be *under* this many lines
MAX_BODY_TOKENS = 5000        # recommended activation budget (spec), estimated
TOC_THRESHOLD = 100           # references longer than this need a table of contents
TOC_WINDOW = 40               # ... which must start within this many lines
CHARS_PER_TOKEN = 4           # token estimate: ceil(characters / 4)

# Folders never linted (besides any folder whose name starts with a dot).
PRUNE_DIRS = {"node_modules", "__pycache__", "venv", "build", "dist", "site-packages"}
# Prefixes that make a backticked token "look like a bundle path".
BUNDLE_PREFIXES = ("sub-skills/", "references/", "scripts/")
PARENT_SUFFIXES = ("/", ".md", ".py", ".sh")   # `../x` is checked only with these endings
PLACEHOLDER_RE = re.compile(r"[*?<>{}\[\]$|=%\\]|\.\.\.|\u2026")
SCHEME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
LINE_SUFFIX_RE = re.compile(r":\d+(?:[:-]\d+)?$")
FENCE_RE = re.compile(r"^\s*(`{3,}|~{3,})(.*)$")
ATX_RE = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*$")
SETEXT_RE = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
BACKTICKS_RE = re.compile(r"`+")
INLINE_LINK_RE = re.compile(
    r"(!?)\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\(\s*"
    r"(<[^>\n]*>|[^\s()]*(?:\([^\s()]*\)[^\s()]*)*)"
    r"(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^)]*\)))?\s*\)")
REF_DEF_RE = re.compile(r"^ {0,3}\[([^\]]+)\]:\s*(<[^>]*>|\S+)")
HTML_ANCHOR_RE = re.compile(r"<a\s[^>]*?(?:id|name)\s*=\s*[\"']([^\"']+)[\"']", re.I)
HTML_TAG_RE = re.compile(r"<[^>]+>")
TOC_ITEM_RE = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+.*\]\(#[^)]+\)")

HELP = """\
Lint an agent-skill bundle (standard library + PyYAML; never modifies files).

What is linted
  Skill files: the root SKILL.md (the router) and sub-skills/<name>/SKILL.md.
  Markdown: every *.md under the root except in folders whose name starts with
  a dot (.git, .venv, .ci, ...), node_modules, __pycache__, venv, build, dist,
  site-packages, *.egg-info, and any fixtures/ folder under tests/ (fixture
  bundles are meant to be broken).

Rules (the name is printed in every finding)
  frontmatter      SKILL.md starts with a closed '---' YAML block that parses to
                   a mapping, without duplicate keys or flow style ([..], {..})
  fields           keys limited to name, description, license, compatibility,
                   metadata, allowed-tools (+ disable-model-invocation in
                   sub-skills only); metadata maps strings to strings;
                   compatibility 1-500 chars; license/allowed-tools strings
  convention       sub-skills keep the seed front matter:
                   disable-model-invocation: true, metadata.disco-role:
                   operating, and a license
  name             1-64 chars of a-z, 0-9 and single hyphens, no reserved word
                   (anthropic, claude), equal to its folder, unique
  description      string of 1-1024 characters without '<' or '>'
  body-length      SKILL.md body (after the front matter) under 500 lines and
                   at most ~5000 estimated tokens
  layout           every sub-skills/<name>/ folder has a file named exactly
                   SKILL.md; no SKILL.md elsewhere
  link             every relative Markdown link / image / reference definition
                   resolves, exact case, relative to the linking file
  path             every backticked token that looks like a bundle path exists,
                   exact case (see below)
  anchor           '#fragment' of a link to a Markdown file names a heading
                   there (GitHub slug rules) or an <a id/name> anchor
  orphan           every file under <skill>/references/ is linked or named
                   from that skill's SKILL.md; a data file (not .md) may
                   instead be named in a <skill>/scripts/*.py helper that
                   queries it
  toc              a Markdown file under a references/ folder with more than
                   100 lines has a table of contents (list items linking to
                   '#anchors') starting in its first 40 lines after the front
                   matter; those anchors are checked by the 'anchor' rule
  read             the file is readable UTF-8
  internal         the linter itself failed on this file (a bug to report);
                   reported as a finding instead of a traceback

What "looks like a bundle path" means (rule 'path')
  Outside fenced code blocks, each inline code span is split on whitespace;
  a token (quotes, brackets and ',;' trimmed; a ':LINE' suffix dropped) is
  checked when it starts with sub-skills/, references/ or scripts/, or
  starts with ../ and ends with /, .md, .py or .sh. Inside fenced code
  blocks (``` or ~~~; indented code is read as text) only tokens starting
  with sub-skills/ are checked. Tokens with placeholder characters
  (* ? < > { } [ ] $ | = % \\ ...) are skipped, as are URLs and absolute
  paths. To cite an upstream file that would look like a bundle path,
  qualify it, e.g. `deepspeed/runtime/config.py` or `DeepSpeed/scripts/x.py`.

How paths resolve
  Links: relative to the directory of the Markdown file (as renderers do).
  Backticked paths: relative to the Markdown file's directory, then to its
  skill folder (sub-skills/<name>/ for files under it, else the root), then,
  for sub-skills/, references/ and scripts/ forms, to the bundle root. The
  first that exists with exact case wins. Anything resolving outside the root
  is a finding.

Root name
  The root SKILL.md name must equal --root-name if given, otherwise the root
  folder's name; a git checkout (root holds .git) may have any folder name,
  so then only the name format is checked.

Sizes
  Tokens are estimated as ceil(characters / 4). The worst case is the
  router SKILL.md + the largest sub-skill SKILL.md + reference pair an agent
  can load through it (its own references or the top-level references/).

Output
  text (default): one finding per line on stdout, 'path:line: rule: message';
  --sizes adds a per-file table (lines, tokens) and the worst case on stdout.
  A one-line summary goes to stderr. --format json prints one object:
  {root, findings: [{path, line, rule, message}], files: [{path, kind, lines,
  tokens}], worst_case: {tokens, files}, summary: {files, findings}}.

Exit codes
  0 no findings, 1 findings, 2 usage error (bad option, root missing or
  without SKILL.md, PyYAML missing).

Examples
  python3 scripts/check_bundle.py
  python3 scripts/check_bundle.py --sizes
  python3 scripts/check_bundle.py --format json | python3 -m json.tool
  python3 scripts/check_bundle.py --root ../other-bundle --root-name other-bundle
"""


@dataclass
class Finding:
    path: str
    line: int
    rule: str
    message: str

    def text(self) -> str:
        return f"{self.path}:{self.line}: {self.rule}: {self.message}"


class UsageError(Exception):
    pass


# --------------------------------------------------------------------------- Markdown helpers

def github_slug(text: str) -> str:
    """GitHub heading anchor: lower-case, drop punctuation, spaces -> '-'."""
    text = text.strip().lower()
    out = []
    for ch in text:
        if ch == " ":
            out.append("-")
        elif ch in "-_" or ch.isalnum():
            out.append(ch)
    return "".join(out)


def heading_plain_text(raw: str) -> str:
    """Rendered text of a heading: inline markup removed, code-span content kept."""
    raw = re.sub(r"[ \t]+#+[ \t]*$", "", raw)          # closing ### sequence
    raw = re.sub(r"^#+$", "", raw)
    raw = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", raw)  # links / images -> text
    raw = HTML_TAG_RE.sub("", raw)
    raw = raw.replace("`", "")
    raw = raw.replace("*", "")
    raw = re.sub(r"(?<![\w])_+|_+(?![\w])", "", raw)     # _emphasis_, keep snake_case
    raw = raw.replace("~~", "")
    return raw.strip()


def code_spans(line: str):
    """Yield (start, end, content) of inline code spans on one line (CommonMark-like)."""
    pos = 0
    while True:
        m = BACKTICKS_RE.search(line, pos)
        if not m:
            return
        n = len(m.group())
        close = None
        for m2 in BACKTICKS_RE.finditer(line, m.end()):
            if len(m2.group()) == n:
                close = m2
                break
        if close is None:
            pos = m.end()
            continue
        yield m.start(), close.end(), line[m.end():close.start()].strip()
        pos = close.end()


@dataclass
class MdDoc:
    rel: str
    lines: list
    body_start: int          # index of first line after the front matter (0 if none)
    fm_closed: bool          # True if a front matter block was found and closed
    in_fence: list           # per line: inside (or delimiting) a fenced code block
    headings: list           # (line_no, level, text)
    anchors: set
    chars: int


def parse_markdown(rel: str, text: str) -> MdDoc:
    lines = text.splitlines()
    body_start, fm_closed = 0, False
    if lines and lines[0].rstrip() == "---":
        for i in range(1, len(lines)):
            if lines[i].rstrip() in ("---", "..."):
                body_start, fm_closed = i + 1, True
                break
    in_fence = [False] * len(lines)
    headings = []
    fence = None
    for i in range(body_start, len(lines)):
        line = lines[i]
        m = FENCE_RE.match(line)
        if fence:
            in_fence[i] = True
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and not m.group(2).strip():
                fence = None
            continue
        if m and not (m.group(1)[0] == "`" and "`" in m.group(2)):
            fence = m.group(1)
            in_fence[i] = True
            continue
        a = ATX_RE.match(line)
        if a:
            headings.append((i + 1, len(a.group(1)), heading_plain_text(a.group(2) or "")))
            continue
        s = SETEXT_RE.match(line)
        if s and i > body_start and lines[i - 1].strip() and not in_fence[i - 1] \
                and not ATX_RE.match(lines[i - 1]) and not lines[i - 1].lstrip().startswith(("-", "*", "+", ">", "|")):
            headings.append((i, 1 if s.group(1)[0] == "=" else 2, heading_plain_text(lines[i - 1])))
    anchors = set()
    seen = {}
    for _, _, htext in headings:
        slug = github_slug(htext)
        if slug in seen:
            seen[slug] += 1
            anchors.add(f"{slug}-{seen[slug]}")
        else:
            seen[slug] = 0
            anchors.add(slug)
    for i, line in enumerate(lines):
        if not in_fence[i]:
            anchors.update(HTML_ANCHOR_RE.findall(line))
    return MdDoc(rel, lines, body_start, fm_closed, in_fence, headings, anchors, len(text))


# --------------------------------------------------------------------------- the linter

class Linter:
    def __init__(self, root: Path, root_name: str | None):
        self.root = root
        self.root_name = root_name
        self.findings: list[Finding] = []
        self.docs: dict[str, MdDoc] = {}
        self._listdir: dict[str, dict] = {}
        self._named: dict[str, set] = {}
        self._unlinted: dict[str, MdDoc] = {}

    # ---- file system with exact case
    def _entries(self, rel_dir: str):
        if rel_dir not in self._listdir:
            try:
                names = os.listdir(self.root / rel_dir) if rel_dir else os.listdir(self.root)
            except OSError:
                names = []
            self._listdir[rel_dir] = {n: n for n in names}
            self._listdir[rel_dir].update({n.lower(): n for n in names if n.lower() not in self._listdir[rel_dir]})
        return self._listdir[rel_dir]

    def resolve(self, rel: str):
        """rel: normalised POSIX path under the root. Returns ('ok'|'case'|'missing', actual)."""
        parts = [p for p in rel.split("/") if p]
        cur, actual, status = "", [], "ok"
        for part in parts:
            entries = self._entries(cur)
            if part in entries and entries[part] == part:
                name = part
            elif part.lower() in entries:
                name, status = entries[part.lower()], "case"
            else:
                return "missing", None
            actual.append(name)
            cur = "/".join(actual)
        return status, cur

    @staticmethod
    def norm(base_dir: str, target: str):
        """Join and normalise; None when the result leaves the root."""
        joined = posixpath.normpath(posixpath.join(base_dir or ".", target))
        if joined == ".":
            return ""
        if joined == ".." or joined.startswith("../") or joined.startswith("/"):
            return None
        return joined

    def add(self, path: str, line: int, rule: str, message: str):
        self.findings.append(Finding(path, line, rule, message))

    # ---- discovery
    def discover(self):
        md_files = []
        for dirpath, dirnames, filenames in os.walk(self.root):
            rel_dir = os.path.relpath(dirpath, self.root).replace(os.sep, "/")
            rel_dir = "" if rel_dir == "." else rel_dir
            keep = []
            for d in sorted(dirnames):
                sub = f"{rel_dir}/{d}" if rel_dir else d
                if d.startswith(".") or d in PRUNE_DIRS or d.endswith(".egg-info"):
                    continue
                if d == "fixtures" and (sub.startswith("tests/")):
                    continue
                keep.append(d)
            dirnames[:] = keep
            for f in sorted(filenames):
                if f.endswith(".md"):
                    md_files.append(f"{rel_dir}/{f}" if rel_dir else f)
        return md_files

    @staticmethod
    def skill_dir_of(rel: str) -> str:
        """The skill folder owning rel: sub-skills/<name> for files under it, else '' (the root)."""
        parts = rel.split("/")
        if len(parts) > 2 and parts[0] == "sub-skills":
            return "/".join(parts[:2])
        return ""

    # ---- main
    def run(self):
        md_files = self.discover()
        for rel in md_files:
            try:
                text = (self.root / rel).read_bytes().decode("utf-8")
            except UnicodeDecodeError as e:
                self.add(rel, 1, "read", f"not valid UTF-8 ({e.reason} at byte {e.start})")
                continue
            except OSError as e:
                self.add(rel, 1, "read", f"cannot read file: {e.strerror}")
                continue
            self.docs[rel] = parse_markdown(rel, text)

        skills = self.check_layout(md_files)
        names = {}
        for rel in skills:
            if rel in self.docs:
                self._guard(rel, self.check_skill, rel, names)
        for rel, doc in self.docs.items():
            self._guard(rel, self.check_paths, doc)
            if "references" in rel.split("/")[:-1] and len(doc.lines) > TOC_THRESHOLD:
                self._guard(rel, self.check_toc, doc)
        for rel in skills:
            if rel in self.docs:
                self._guard(rel, self.check_orphans, rel)
        self.findings.sort(key=lambda f: (f.path, f.line, f.rule, f.message))

    def _guard(self, rel, fn, *args):
        """A file the linter cannot handle becomes a finding, never a traceback."""
        try:
            fn(*args)
        except Exception as e:  # noqa: BLE001 - reported, and tested to stay unreachable
            self.add(rel, 1, "internal", f"linter error, please report: {type(e).__name__}: {e}")

    # ---- layout
    def check_layout(self, md_files):
        skills = ["SKILL.md"]
        sub_root = self.root / "sub-skills"
        if sub_root.is_dir():
            for d in sorted(os.listdir(sub_root)):
                if d.startswith(".") or not (sub_root / d).is_dir():
                    continue
                entries = os.listdir(sub_root / d)
                if "SKILL.md" in entries:
                    skills.append(f"sub-skills/{d}/SKILL.md")
                else:
                    variant = [e for e in entries if e.lower() == "skill.md"]
                    hint = f" (found '{variant[0]}'; the name must be exactly SKILL.md)" if variant else ""
                    self.add(f"sub-skills/{d}", 1, "layout", f"sub-skill folder has no SKILL.md{hint}")
        for rel in md_files:
            if posixpath.basename(rel) == "SKILL.md" and rel not in skills:
                self.add(rel, 1, "layout",
                         "SKILL.md outside the bundle layout (allowed: the root and sub-skills/<name>/)")
        return skills

    # ---- front matter
    def check_skill(self, rel: str, names: dict):
        doc = self.docs[rel]
        is_sub = rel != "SKILL.md"
        folder = posixpath.basename(posixpath.dirname(rel)) if is_sub else None
        if not doc.lines or doc.lines[0].rstrip() != "---":
            self.add(rel, 1, "frontmatter", "missing front matter: the file must start with a '---' line")
            return
        if not doc.fm_closed:
            self.add(rel, 1, "frontmatter", "front matter is not closed by a '---' line")
            return
        fm_text = "\n".join(doc.lines[1:doc.body_start - 1])
        try:
            loader = yaml.SafeLoader(fm_text)
            try:
                node = loader.get_single_node()
                data = loader.construct_document(node) if node is not None else None
            finally:
                loader.dispose()
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            line = (mark.line + 2) if mark is not None else 1
            problem = getattr(e, "problem", None) or str(e).splitlines()[0]
            self.add(rel, line, "frontmatter", f"front matter is not valid YAML: {problem}"
                     " (quote values that contain ': ' or ' #')")
            return
        if not isinstance(data, dict):
            self.add(rel, 1, "frontmatter", "front matter must be a YAML mapping of fields")
            return

        key_line = {}
        seen = set()
        for k_node, _ in node.value:
            line = k_node.start_mark.line + 2
            key = k_node.value
            key_line.setdefault(key, line)
            if key in seen:
                self.add(rel, line, "frontmatter", f"duplicate key '{key}'")
            seen.add(key)

        def walk(n):
            if isinstance(n, (yaml.MappingNode, yaml.SequenceNode)):
                if n.flow_style:
                    self.add(rel, n.start_mark.line + 2, "frontmatter",
                             "flow-style YAML ([..] or {..}) is rejected by strictyaml-based validators "
                             "such as skills-ref; use block style")
                for item in n.value:
                    for sub in (item if isinstance(item, tuple) else (item,)):
                        walk(sub)
        walk(node)

        allowed = SPEC_FIELDS + (SUB_SKILL_ONLY_FIELDS if is_sub else ())
        for key in data:
            if key not in allowed:
                where = "the six spec fields" + (" plus disable-model-invocation" if is_sub else "")
                extra = (" (disable-model-invocation is allowed in sub-skills only)"
                         if key in SUB_SKILL_ONLY_FIELDS else "")
                self.add(rel, key_line.get(key, 1), "fields",
                         f"field '{key}' is not allowed here; allowed: {where}{extra}")
        self._check_field_types(rel, data, key_line)
        if is_sub:
            self._check_convention(rel, data, key_line)

        # name
        name = data.get("name")
        nline = key_line.get("name", 1)
        if name is None:
            self.add(rel, 1, "name", "missing required field 'name'")
        elif not isinstance(name, str):
            self.add(rel, nline, "name", f"name must be a string, got {type(name).__name__}")
        else:
            if not 1 <= len(name) <= MAX_NAME:
                self.add(rel, nline, "name", f"name is {len(name)} characters; allowed 1-{MAX_NAME}")
            if not NAME_RE.match(name):
                self.add(rel, nline, "name", f"name '{name}' must be lowercase a-z, 0-9 and single hyphens, "
                         "not starting or ending with '-'")
            for word in RESERVED_NAME_WORDS:
                if word in name:
                    self.add(rel, nline, "name", f"name '{name}' contains the reserved word '{word}'")
            expected = folder if is_sub else self._expected_root_name()
            if expected is not None and name != expected:
                what = "its folder" if is_sub else ("--root-name" if self.root_name else "the root folder")
                self.add(rel, nline, "name", f"name '{name}' must equal {what} '{expected}'")
            if name in names:
                self.add(rel, nline, "name", f"name '{name}' is also used by {names[name]}")
            else:
                names[name] = rel

        # description
        desc = data.get("description")
        dline = key_line.get("description", 1)
        if desc is None:
            self.add(rel, 1, "description", "missing required field 'description'")
        elif not isinstance(desc, str):
            self.add(rel, dline, "description", f"description must be a string, got {type(desc).__name__}")
        else:
            if not desc.strip():
                self.add(rel, dline, "description", "description is empty")
            elif len(desc) > MAX_DESCRIPTION:
                self.add(rel, dline, "description",
                         f"description is {len(desc)} characters; at most {MAX_DESCRIPTION}")
            bad = sorted(set(c for c in desc if c in "<>"))
            if bad:
                self.add(rel, dline, "description",
                         f"description contains {' and '.join(repr(c) for c in bad)}; angle brackets are rejected")

        # body
        body = doc.lines[doc.body_start:]
        if len(body) >= MAX_BODY_LINES:
            self.add(rel, doc.body_start + 1, "body-length",
                     f"body is {len(body)} lines; must be under {MAX_BODY_LINES}")
        tokens = estimate_tokens(sum(len(x) + 1 for x in body))
        if tokens > MAX_BODY_TOKENS:
            self.add(rel, doc.body_start + 1, "body-length",
                     f"body is ~{tokens} estimated tokens; at most {MAX_BODY_TOKENS}")

    def _expected_root_name(self):
        if self.root_name:
            return self.root_name
        if (self.root / ".git").exists():
            return None
        return self.root.name

    def _check_field_types(self, rel, data, key_line):
        md = data.get("metadata")
        if "metadata" in data:
            if not isinstance(md, dict):
                self.add(rel, key_line["metadata"], "fields", "metadata must be a mapping of string keys to string values")
            else:
                for k, v in md.items():
                    if not isinstance(k, str) or not isinstance(v, str):
                        self.add(rel, key_line["metadata"], "fields",
                                 f"metadata entry {k!r}: {v!r} must map a string to a string (quote it)")
        if "compatibility" in data:
            c = data["compatibility"]
            if not isinstance(c, str) or not 1 <= len(c) <= MAX_COMPATIBILITY:
                self.add(rel, key_line["compatibility"], "fields",
                         f"compatibility must be a string of 1-{MAX_COMPATIBILITY} characters")
        for key in ("license", "allowed-tools"):
            if key in data and not (isinstance(data[key], str) and data[key].strip()):
                self.add(rel, key_line[key], "fields", f"{key} must be a non-empty string")

    def _check_convention(self, rel, data, key_line):
        if data.get("disable-model-invocation") is not True:
            self.add(rel, key_line.get("disable-model-invocation", 1), "convention",
                     "sub-skill front matter needs 'disable-model-invocation: true' (reached through the router)")
        md = data.get("metadata")
        if not (isinstance(md, dict) and md.get("disco-role") == "operating"):
            self.add(rel, key_line.get("metadata", 1), "convention",
                     "sub-skill front matter needs 'metadata:' with 'disco-role: operating'")
        if "license" not in data:
            self.add(rel, 1, "convention", "sub-skill front matter needs a 'license' field")

    # ---- links and paths
    def check_paths(self, doc: MdDoc):
        rel = doc.rel
        base = posixpath.dirname(rel)
        skill_dir = self.skill_dir_of(rel)
        for i in range(doc.body_start, len(doc.lines)):
            line = doc.lines[i]
            ln = i + 1
            if doc.in_fence[i]:
                if FENCE_RE.match(line):
                    continue
                for tok in line.split():
                    cand = clean_token(tok)
                    if cand and cand.startswith("sub-skills/"):
                        self._check_backtick(doc, ln, cand, base, skill_dir)
                continue
            blanked = line
            for start, end, content in code_spans(line):
                blanked = blanked[:start] + " " * (end - start) + blanked[end:]
                for tok in content.split():
                    cand = clean_token(tok)
                    if cand and looks_like_bundle_path(cand):
                        self._check_backtick(doc, ln, cand, base, skill_dir)
            for m in INLINE_LINK_RE.finditer(blanked):
                self._check_link(doc, ln, m.group(3))
            r = REF_DEF_RE.match(blanked)
            if r:
                self._check_link(doc, ln, r.group(2))

    def _check_link(self, doc: MdDoc, ln: int, target: str):
        t = target.strip()
        if t.startswith("<") and t.endswith(">"):
            t = t[1:-1].strip()
        if not t:
            self.add(doc.rel, ln, "link", "empty link target")
            return
        if SCHEME_RE.match(t) or t.startswith("//"):
            return
        path, _, frag = t.partition("#")
        path = urllib.parse.unquote(path.split("?", 1)[0])
        if not path:
            self._check_anchor(doc, ln, doc.rel, urllib.parse.unquote(frag), "link")
            return
        if path.startswith("/"):
            self.add(doc.rel, ln, "link", f"absolute link target '{path}'; use a path relative to this file")
            return
        joined = self.norm(posixpath.dirname(doc.rel), path)
        if joined is None:
            self.add(doc.rel, ln, "link", f"'{path}' points outside the bundle")
            return
        status, actual = self.resolve(joined)
        if status == "missing":
            self.add(doc.rel, ln, "link", f"'{path}' not found (resolved relative to this file: {joined or '.'})")
        elif status == "case":
            self.add(doc.rel, ln, "link", f"'{path}' differs in case from the file on disk '{actual}'")
        elif frag and joined.endswith(".md"):
            self._check_anchor(doc, ln, joined, urllib.parse.unquote(frag), "anchor")
        self._mark_named(doc.rel, joined)

    def _check_anchor(self, doc, ln, target_rel, frag, rule):
        target = self.docs.get(target_rel) or self._unlinted.get(target_rel)
        if target is None:  # a Markdown file outside the linted set (e.g. under tests/fixtures)
            try:
                target = parse_markdown(target_rel, (self.root / target_rel).read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError):
                return
            self._unlinted[target_rel] = target
        if frag not in target.anchors:
            where = "this file" if target_rel == doc.rel else target_rel
            self.add(doc.rel, ln, "anchor", f"anchor '#{frag}' not found in {where}")

    def _check_backtick(self, doc, ln, cand, base, skill_dir):
        cand_path, _, frag = cand.partition("#")
        tries = [base, skill_dir]
        if cand_path.startswith(BUNDLE_PREFIXES):
            tries.append("")
        seen, case_hit, outside = [], None, False
        for b in tries:
            joined = self.norm(b, cand_path)
            if joined is None:
                outside = True
                continue
            if joined in seen:
                continue
            seen.append(joined)
            status, actual = self.resolve(joined)
            if status == "ok":
                self._mark_named(doc.rel, joined)
                if frag and joined.endswith(".md"):
                    self._check_anchor(doc, ln, joined, frag, "anchor")
                return
            if status == "case" and case_hit is None:
                case_hit = actual
        if case_hit:
            self.add(doc.rel, ln, "path", f"'{cand_path}' differs in case from the file on disk '{case_hit}'")
        elif outside and not seen:
            self.add(doc.rel, ln, "path", f"'{cand_path}' points outside the bundle")
        else:
            self.add(doc.rel, ln, "path", f"'{cand_path}' not found (tried: {', '.join(s or '.' for s in seen)})")

    # ---- orphans
    def _mark_named(self, from_rel, target_rel):
        if target_rel is not None:
            self._named.setdefault(from_rel, set()).add(target_rel)

    def check_orphans(self, skill_rel: str):
        skill_dir = posixpath.dirname(skill_rel)
        ref_dir = f"{skill_dir}/references" if skill_dir else "references"
        if not (self.root / ref_dir).is_dir():
            return
        named = self._named.get(skill_rel, set())
        helpers = self._helper_sources(f"{skill_dir}/scripts" if skill_dir else "scripts")
        for dirpath, dirnames, filenames in os.walk(self.root / ref_dir):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d not in PRUNE_DIRS)
            rel_dir = os.path.relpath(dirpath, self.root).replace(os.sep, "/")
            for f in sorted(filenames):
                if f.startswith("."):
                    continue
                rel = f"{rel_dir}/{f}"
                if rel in named or (not f.endswith(".md") and any(f in src for src in helpers)):
                    continue  # a data file a helper script queries need not be named to agents
                self.add(rel, 1, "orphan", f"not linked or named from {skill_rel}")

    def _helper_sources(self, scripts_rel: str) -> list:
        """Text of the skill's helper scripts (<skill>/scripts/*.py), which may own data files."""
        out = []
        for p in sorted((self.root / scripts_rel).glob("*.py")):
            try:
                out.append(p.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError):
                continue
        return out

    # ---- tables of contents
    def check_toc(self, doc: MdDoc):
        items = []
        for i in range(doc.body_start, min(len(doc.lines), doc.body_start + TOC_WINDOW)):
            if not doc.in_fence[i] and TOC_ITEM_RE.match(doc.lines[i]):
                items.append(i)
        if not items:
            self.add(doc.rel, 1, "toc",
                     f"{len(doc.lines)} lines but no table of contents (a list of links to '#anchors') "
                     f"in the first {TOC_WINDOW} lines")
        # the anchors themselves are checked by the 'anchor' rule on every link

    # ---- sizes
    def sizes(self):
        files = []
        for rel in sorted(self.docs):
            doc = self.docs[rel]
            if rel == "SKILL.md":
                kind = "router"
            elif re.fullmatch(r"sub-skills/[^/]+/SKILL\.md", rel):
                kind = "sub-skill"
            elif "references" in rel.split("/")[:-1]:
                kind = "reference"
            else:
                kind = "doc"
            files.append({"path": rel, "kind": kind, "lines": len(doc.lines),
                          "tokens": estimate_tokens(doc.chars)})
        by_path = {f["path"]: f for f in files}
        top_refs = [f for f in files if f["kind"] == "reference" and f["path"].startswith("references/")]
        router = by_path.get("SKILL.md")
        best = None
        subs = [f for f in files if f["kind"] == "sub-skill"] or [None]
        for sub in subs:
            refs = list(top_refs)
            if sub:
                prefix = posixpath.dirname(sub["path"]) + "/references/"
                refs += [f for f in files if f["kind"] == "reference" and f["path"].startswith(prefix)]
            ref = max(refs, key=lambda f: f["tokens"], default=None)
            chain = [x for x in (router, sub, ref) if x]
            total = sum(x["tokens"] for x in chain)
            if best is None or total > best["tokens"]:
                best = {"tokens": total, "files": [x["path"] for x in chain]}
        return files, best


def estimate_tokens(chars: int) -> int:
    return math.ceil(chars / CHARS_PER_TOKEN)


def clean_token(tok: str):
    tok = tok.strip("'\"()[],;")
    tok = LINE_SUFFIX_RE.sub("", tok)
    tok = tok.rstrip(".:")
    return tok or None


def looks_like_bundle_path(tok: str) -> bool:
    if PLACEHOLDER_RE.search(tok.partition("#")[0]) or "://" in tok:
        return False
    if tok.startswith(BUNDLE_PREFIXES):
        return True
    if tok.startswith("../"):
        return tok.partition("#")[0].endswith(PARENT_SUFFIXES)
    return False


# --------------------------------------------------------------------------- CLI

class _Parser(argparse.ArgumentParser):
    def error(self, message):
        self.print_usage(sys.stderr)
        print(f"check_bundle.py: error: {message}", file=sys.stderr)
        sys.exit(EXIT_USAGE)


def build_parser():
    p = _Parser(prog="check_bundle.py", description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--root", metavar="DIR", default=None,
                   help="bundle root to lint (default: the folder above this script)")
    p.add_argument("--root-name", metavar="NAME", default=None,
                   help="expected name of the root SKILL.md (default: the root folder's name)")
    p.add_argument("--format", choices=("text", "json"), default="text", help="output format (default: text)")
    p.add_argument("--sizes", action="store_true", help="text format: also print per-file sizes and the worst case")
    return p


def lint(root: Path, root_name: str | None = None):
    if yaml is None:
        raise UsageError("PyYAML is required: pip install -r requirements.txt")
    if not root.is_dir():
        raise UsageError(f"root '{root}' is not a directory")
    if not (root / "SKILL.md").is_file():
        variants = [n for n in os.listdir(root) if n.lower() == "skill.md"]
        hint = f" (found '{variants[0]}'; the name must be exactly SKILL.md)" if variants else ""
        raise UsageError(f"'{root}' is not a skill bundle: no SKILL.md at its root{hint}")
    linter = Linter(root, root_name)
    linter.run()
    files, worst = linter.sizes()
    return linter.findings, files, worst


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    root = Path(args.root) if args.root else Path(__file__).resolve().parent.parent
    try:
        findings, files, worst = lint(root.resolve() if root.exists() else root, args.root_name)
    except UsageError as e:
        print(f"check_bundle.py: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    summary = {"files": len(files), "findings": len(findings)}
    if args.format == "json":
        json.dump({"root": str(root), "findings": [asdict(f) for f in findings], "files": files,
                   "worst_case": worst, "summary": summary}, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        for f in findings:
            print(f.text())
        if args.sizes:
            print(f"{'lines':>6} {'tokens':>7}  {'kind':<9}  path")
            for f in files:
                print(f"{f['lines']:>6} {f['tokens']:>7}  {f['kind']:<9}  {f['path']}")
            if worst:
                print(f"worst case: ~{worst['tokens']} tokens = {' + '.join(worst['files'])}")
    wc = f"; worst case ~{worst['tokens']} tokens ({' + '.join(worst['files'])})" if worst else ""
    print(f"check_bundle: {summary['files']} Markdown files, {summary['findings']} findings{wc}", file=sys.stderr)
    return EXIT_FINDINGS if findings else EXIT_CLEAN


if __name__ == "__main__":
    import signal

    # A reader that stops early (`... | head`) ends us quietly, like any Unix filter.
    if hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    sys.exit(main())

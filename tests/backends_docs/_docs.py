"""Helpers for the backends_docs tests: where the documents are, how names are pulled out of
them, and how each kind of name is resolved against the installed packages.

Convention the documents follow (so that names are machine-readable): every config key, flag,
environment variable, class, field, import path, value and upstream citation is written as an
inline code span. Every code span is classified below and must resolve; an unresolvable span
fails the test. Fenced blocks are handled separately (python: compiled/run; memory: formulas).
"""
from __future__ import annotations

import builtins
import re
import sysconfig
from functools import lru_cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SUB = REPO / "sub-skills" / "distributed-training-backends"
REFS = SUB / "references"
EXAMPLES = SUB / "examples"
VALIDATOR = SUB / "scripts" / "validate_backend_config.py"
MATRIX = REPO / "references" / "backend-matrix.md"
OWNED_REFS = ["deepspeed-fsdp.md", "parallelism-and-precision.md", "api-reference.md", "troubleshooting.md",
              "backend-checks.md"]
DOCS = [SUB / "SKILL.md"] + [REFS / n for n in OWNED_REFS] + [MATRIX]

FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```", re.S | re.M)
CODE_SPAN = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")


def site_packages() -> Path:
    """site-packages of the interpreter that runs pytest (the pinned environment)."""
    return Path(sysconfig.get_paths()["purelib"])


def strip_fences(text: str) -> str:
    return FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)


def fenced_blocks(text: str):
    """(info string, body) of every fenced block."""
    return [(m.group(1).strip(), m.group(2)) for m in FENCE.finditer(text)]


def code_spans(text: str):
    """(line number, span) of every inline code span outside fenced blocks."""
    out = []
    for i, line in enumerate(strip_fences(text).splitlines(), 1):
        for m in CODE_SPAN.finditer(line):
            out.append((i, m.group(1)))
    return out


def table_rows(text: str, header_first_cell: str):
    """Rows (lists of raw cells) of every Markdown table whose first header cell equals
    header_first_cell (case-insensitive)."""
    rows, active = [], False
    for line in strip_fences(text).splitlines():
        if not line.startswith("|"):
            active = False
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not active:
            if cells and cells[0].lower() == header_first_cell.lower():
                active = True
                continue
        elif set(cells[0]) <= set("-: "):
            continue
        else:
            rows.append(cells)
    return rows


def spans_in(cell: str):
    return CODE_SPAN.findall(cell)


# ---------------------------------------------------------------- word index of the sources
SOURCE_ROOTS = ["accelerate", "deepspeed", "torch/distributed", "torch/cuda", "torch/optim", "torch/amp",
                # the Trainer pages this sub-skill routes to (transformers 5.25.0, pinned for the tests)
                "transformers/trainer.py", "transformers/training_args.py", "transformers/distributed",
                "transformers/integrations/deepspeed.py", "transformers/integrations/fsdp.py"]


@lru_cache(maxsize=None)
def source_index():
    """Identifiers and dotted/hyphenated words found in the package sources, plus the
    'def'/'class' names per file."""
    sp = site_packages()
    words, texts = set(), {}
    for root in SOURCE_ROOTS:
        for p in ([sp / root] if root.endswith(".py") else (sp / root).rglob("*.py")):
            t = p.read_text(encoding="utf-8", errors="ignore")
            texts[str(p.relative_to(sp))] = t
            words.update(re.findall(r"[A-Za-z_][\w.\-]*[\w]|[A-Za-z_]", t))
    idents = set()
    for w in words:
        idents.update(re.split(r"[.\-]", w))
    return frozenset(words), frozenset(idents), texts


@lru_cache(maxsize=None)
def source_extras():
    """Class names defined in the sources, string literals used as env/key prefixes, and the
    config keys the launcher reads with getattr(args, "...") (keys without a CLI flag)."""
    _, _, texts = source_index()
    classes, prefixes, getattr_keys = set(), set(), set()
    for rel, t in texts.items():
        classes.update(re.findall(r"^\s*class\s+(\w+)", t, re.M))
        prefixes.update(re.findall(r"[\"']([A-Za-z][A-Za-z0-9_]*_)[\"']", t))
        if rel.startswith("accelerate/"):
            getattr_keys.update(re.findall(r"getattr\(args,\s*[\"'](\w+)[\"']", t))
    return frozenset(classes), frozenset(prefixes), frozenset(getattr_keys)


def defined_in(rel_file: str, dotted: str) -> bool:
    """`accelerate/x.py::Class.method` style citation: file exists and each name is defined."""
    p = site_packages() / rel_file
    if not p.is_file():
        return False
    text = p.read_text(encoding="utf-8", errors="ignore")
    return all(re.search(rf"^\s*(?:async\s+)?(?:def|class)\s+{re.escape(n)}\b", text, re.M)
               for n in dotted.split("."))


# ---------------------------------------------------------------- classification
LIST_LITERAL = re.compile(r"^[\[(]\s*(?:(?:true|false)\s*,\s*)*(?:true|false)\s*[\])]$", re.I)
NUMBER = re.compile(r"^-?\d+(?:\.\d+)?(?:e\d+)?$")
CONVENTION_MARKERS = {"# cpu: no-run", "# validator:", "# oracle:"}  # this bundle's own markers (python fences, example headers)
CONFIG_PREFIXES = ("fsdp_", "parallelism_config_", "megatron_lm_", "dynamo_", "deepspeed_", "zero_stage",
                   "zero3_", "offload_", "fp8_")


class Resolver:
    """Resolves code spans. `facts` comes from the oracle subprocess (launch parser, config
    classes, DeepSpeed JSON keys, enum values); imports/classes/fields are answered by the
    oracle too, collected in a first pass (see `wanted`)."""

    def __init__(self, facts, answers=None):
        self.f = facts
        self.a = answers or {"imports": {}, "classes": {}, "fields": {}}
        self.words, self.idents, self.texts = source_index()
        self.flags = set(facts["launch_flags"]) | set(facts["to_fsdp2_flags"]) | set(facts["deepspeed_runner_flags"]) \
            | set(facts.get("validator_flags", []))
        self.config_names = set(facts["cluster_fields"]) | set(facts["launch_dests"]) | set(facts["ds_json_keys"]) \
            | set(facts.get("plugin_fields", []))
        self.values = set(facts["enum_values"])
        self.classes, self.prefixes, getattr_keys = source_extras()
        self.config_names |= set(getattr_keys)
        self.rule_ids = set(facts.get("rule_ids", []))

    # -- what the oracle must be asked
    @staticmethod
    def wanted(spans):
        imports, classes, fields = set(), set(), set()
        for s in spans:
            s = s.strip("'\"")
            s = s.split("(")[0] if re.match(r"^[\w.]+\(", s) else s
            if re.match(r"^(accelerate|deepspeed|torch)(\.\w+)+$", s):
                imports.add(s)
            elif re.match(r"^[A-Z]\w*[a-z]\w*\.\w+$", s) and "_" not in s.split(".")[0]:
                c, f = s.split(".")
                fields.add((c, f))
                classes.add(c)
            elif re.match(r"^[A-Z][a-z0-9]+[A-Z]\w*$", s) or re.match(r"^[A-Z][a-z]+$", s):
                classes.add(s)
        return sorted(imports), sorted(classes), sorted(fields)

    def is_config_name(self, name: str) -> bool:
        return name in self.config_names

    def _name(self, s: str) -> bool:
        """a single identifier-like token"""
        if s in self.values or s.lower() in {v.lower() for v in self.values}:
            return True
        if re.match(r"^(acc|ds|xf|input|yaml)-[a-z0-9-]+$", s):  # validator rule id
            return s in self.rule_ids
        if s.endswith("_") and re.match(r"^\w+$", s):  # a key/env prefix the launcher adds
            return s in self.prefixes
        if s.startswith(CONFIG_PREFIXES):
            return self.is_config_name(s)
        if re.match(r"^[A-Z][A-Z0-9_]*$", s):  # env var, enum member, constant
            if s in self.idents:
                return True
            # built as PREFIX + "NAME" (e.g. "ACCELERATE_FP8_" + "FORMAT")
            return any(s.startswith(p) and len(s) > len(p) and s[len(p):] in self.idents for p in self.prefixes)
        if s.endswith("_") and re.match(r"^\w+$", s):  # a key/env prefix the launcher adds
            return s in self.prefixes
        if s in dir(builtins):
            return True
        if re.match(r"^[A-Z]\w*$", s) and s in self.a["classes"]:
            return self.a["classes"][s] or s in self.classes
        return s in self.idents or s in self.words

    def resolve(self, raw: str, doc: Path) -> bool:
        s = raw.strip()
        if len(s) >= 2 and s[0] == s[-1] and s[0] in "'\"":
            s = s[1:-1]
        if not s:
            return False
        if NUMBER.match(s) or LIST_LITERAL.match(s) or s in CONVENTION_MARKERS:
            return True
        call = re.match(r"^([\w.]+)\((.*)\)$", s)
        if call:  # name(args): the callable and every keyword name must exist
            kws = re.findall(r"(\w+)=", call.group(2))
            return self.resolve(call.group(1), doc) and all(k in self.idents for k in kws)
        kv = re.match(r"^([a-z_]\w*)=(\S+)$", s)
        if kv:  # name=value (a keyword argument as written in code)
            return self._name(kv.group(1))
        if "::" in s:  # upstream citation file::name
            f, name = s.split("::", 1)
            return defined_in(f, name)
        if ": " in s and not s.startswith("("):  # `key: value`
            k, v = s.split(": ", 1)
            return self.resolve(k, doc) and (NUMBER.match(v) is not None or v.lower() in ("true", "false")
                                              or self.resolve(v, doc))
        if " " in s:  # a command line or a flag with its value
            words = s.split()
            if words[0] in ("accelerate", "python3", "python", "deepspeed"):
                ok = True
                if words[0] == "accelerate" and len(words) > 1:
                    ok = f'"{words[1]}"' in self.f["cli_source"] or words[1] in self.words
                for w in words[1:]:
                    if w.startswith("--"):
                        ok = ok and w.split("=")[0] in self.flags
                return ok
            if words[0].startswith("--"):
                return words[0] in self.flags
            return False
        if re.match(r"^[A-Z][A-Z0-9_]*=\S+$", s):  # NAME=value
            return s.split("=")[0] in self.idents
        if s.startswith("--"):
            return s.split("=")[0] in self.flags
        if "*" in s:  # wildcard: must match at least one known name
            if s.endswith("*") and "*" not in s[:-1] and s[:-1] in self.prefixes:
                return True
            rx = re.compile("^" + re.escape(s).replace(r"\*", r"\w+") + "$")
            return any(rx.match(n) for n in self.idents | self.config_names)
        if "/" in s or re.search(r"\.(md|py|ya?ml|json)$", s):
            return self.path_exists(s, doc)
        if re.match(r"^(accelerate|deepspeed|torch)(\.\w+)+$", s):
            return self.a["imports"].get(s, False)
        if re.match(r"^[A-Z]\w*[a-z]\w*\.\w+$", s) and "_" not in s.split(".")[0]:
            return self.a["fields"].get(s, False)
        if "." in s:  # dotted key path (DeepSpeed JSON, model.config...) or a module
            if s.startswith("."):
                return s in self.words or s[1:] in self.idents
            if s in self.words:
                return True
            return all(self._name(p) for p in s.split("."))
        return self._name(s)

    @staticmethod
    def path_exists(s: str, doc: Path) -> bool:
        s = s.split("#")[0]
        cands = [doc.parent / s, SUB / s, REPO / s, site_packages() / s]
        return any(c.exists() and _exact_case(c) for c in cands)


def _exact_case(p: Path) -> bool:
    p = p.resolve()
    for part in [p] + list(p.parents):
        if part.parent == part:
            break
        if part.name not in {c.name for c in part.parent.iterdir()}:
            return False
    return True


def accelerate_examples():
    """accelerate config files among the examples (DeepSpeed JSONs are referenced by them)."""
    import json

    out = []
    for p in sorted(EXAMPLES.iterdir()):
        if p.suffix in (".yaml", ".yml"):
            out.append(p)
        elif p.suffix == ".json" and "zero_optimization" not in json.loads(p.read_text()):
            out.append(p)
    return out

"""Rule modules. A module here registers its rules in core.REGISTRY when it is imported.

Only what an input needs is imported (most of the start-up time when no bytecode is cached,
PYTHONDONTWRITEBYTECODE=1 or a read-only skills folder; benchmarks/bench_validator.py):

* by family: a module is imported when core.run_rules first runs a family it registers rules of
  (:func:`load_family`), so a plain file check never compiles the launch rules and a torchrun
  command never compiles the DeepSpeed rules;
* by topic: a module whose header (its source before the first ``@rule``) says
  ``NEEDS = ("word", ...)`` is imported only for a document whose keys or string values mention one
  of the words (case-insensitive substring), e.g. the FSDP rules for a config that names FSDP
  somewhere; a word written ``"=word"`` must equal a whole key or string value instead
  (``"=optimizer"`` is not mentioned by ``offload_optimizer``). Such a module promises that its
  rules report nothing on any other document; tests/validator_cli/test_lazy_rules.py checks the promise on every
  rule's examples and the shipped configs;
* by a condition: a module whose header says ``SILENT_WHEN = "_mod.function"`` is not imported for a
  document on which that function of rules/_mod.py (a module the family has imported anyway) returns
  True: it promises that each of its rules returns at once there, e.g. the inline DeepSpeed-block
  rules when ``deepspeed_config_file`` names a JSON (test_lazy_rules.py checks this promise as the
  NEEDS one);
* by consumer: a module whose header says ``CONSUMERS = ("name", ...)`` holds only rules whose
  ``consumers`` are among those names, so core.run_rules would run none of them for a check with
  another consumer (or none): it is not imported for such a check (test_lazy_rules.py checks that
  every rule of such a module names its consumers within the module's);
* by option: a module whose header says ``OPTION = "name"`` is imported only for a check whose
  core.Options has that option on (its rules return at once without it, e.g. --check-imports);
* one rule: :func:`load_rule` imports the module that defines a rule id (a rule that runs another
  family's rule on a derived document).

:func:`load_all` imports everything (--list-rules, SARIF, the generated reference, tests). The
families, NEEDS words and rule ids of a module are read from its source, so a new rule module
needs nothing else edited.
"""
import os
import re

from .. import core

_HERE = os.path.dirname(os.path.abspath(__file__))
# Each pattern starts with a literal, which re finds with a fast substring search: a leading \b made
# the scan of the rule sources cost more than compiling them (about 50 ms per pattern).
_FAMILY = re.compile(r'family="([a-z]+)"')
_NEEDS = re.compile(r'\nNEEDS = \(([^)]*)\)')
_CONSUMERS = re.compile(r'\nCONSUMERS = \(([^)]*)\)')
_OPTION = re.compile(r'\nOPTION = "([a-z_]+)"')
_SILENT = re.compile(r'\nSILENT_WHEN = "([a-z_]+)\.([a-z_]+)"')
_RULE_ID = re.compile(r'@rule\(id="([a-z0-9-]+)"')
_WORD = re.compile(r'"([^"]+)"')
_imported = set()  # module names imported
_complete = set()  # families whose every module is imported
_index = None  # (family -> module names sorted, module -> NEEDS words or None, rule id -> module (None until
#                load_rule needs it),
#                module -> SILENT_WHEN (module, function), module -> CONSUMERS names, module -> OPTION)


def _modules():
    return sorted(f[:-3] for f in os.listdir(_HERE) if f.endswith(".py") and not f.startswith("_"))


def _source(m: str) -> str:
    with open(os.path.join(_HERE, m + ".py"), encoding="utf-8") as fh:
        return fh.read()


def _scan():
    global _index
    if _index is None:
        by_family, needs, silent, consumers, options = {}, {}, {}, {}, {}
        for m in _modules():
            src = _source(m)
            for fam in sorted(set(_FAMILY.findall(src))):
                by_family.setdefault(fam, []).append(m)
            # NEEDS and SILENT_WHEN sit in a module's header, before its first rule: searching only there
            # (and reading the rule ids only when load_rule needs them) halves the cost of this scan
            first = src.find("\n@rule(")
            head = src[:first] if first >= 0 else src
            n = _NEEDS.search(head)
            needs[m] = tuple(w.lower() for w in _WORD.findall(n.group(1))) if n else None
            w = _SILENT.search(head)
            if w:
                silent[m] = w.groups()
            c = _CONSUMERS.search(head)
            if c:
                consumers[m] = tuple(_WORD.findall(c.group(1)))
            o = _OPTION.search(head)
            if o:
                options[m] = o.group(1)
        _index = (by_family, needs, None, silent, consumers, options)
    return _index


def _rule_ids():
    """rule id -> module (read from the sources on first use: only a rule run on a derived document needs it)."""
    global _index
    index = _scan()
    if index[2] is None:
        ids = {}
        for m in _modules():
            for rid in _RULE_ID.findall(_source(m)):
                ids.setdefault(rid, m)
        _index = index = (index[0], index[1], ids) + index[3:]
    return index[2]


def mention_text(doc) -> str:
    """Every key and string value of doc, lowercased, one per line, with a newline before the first and
    after the last (cached on the document)."""
    text = getattr(doc, "_mention_text", None)
    if text is None:
        parts, stack = [], [doc.data]
        while stack:
            v = stack.pop()
            if isinstance(v, dict):
                for k, x in v.items():
                    parts.append(str(k))
                    stack.append(x)
            elif isinstance(v, list):
                stack.extend(v)
            elif isinstance(v, str):
                parts.append(v)
        text = "\n" + "\n".join(parts).lower() + "\n"
        doc._mention_text = text
    return text


def needed(module: str, doc, consumer=None, options=None) -> bool:
    """Whether ``module``'s rules can report anything on ``doc`` read by ``consumer`` with ``options``
    (its NEEDS words, SILENT_WHEN, CONSUMERS and OPTION; with none of them: always)."""
    index = _scan()
    if doc is None:
        return True
    option = index[5].get(module)
    if option is not None and not getattr(options, option, False):
        return False
    names = index[4].get(module)
    if names is not None and consumer not in names:
        return False
    words = index[1].get(module)
    if words:
        text = mention_text(doc)
        if not any((f"\n{w[1:]}\n" if w[0] == "=" else w) in text for w in words):
            return False
    silent = index[3].get(module)
    if silent:
        helper = __import__(f"{__name__}.{silent[0]}", fromlist=["_"])
        return not getattr(helper, silent[1])(doc)
    return True


def _import(m: str) -> None:
    if m not in _imported:
        __import__(f"{__name__}.{m}")  # importlib.import_module without importing importlib
        _imported.add(m)


def load_family(family: str, doc=None, consumer=None, options=None) -> None:
    """Import the modules that register rules of ``family`` and that ``doc`` read by ``consumer`` with
    ``options`` needs (every one of them when doc is None)."""
    if family in _complete:
        return
    mods = _scan()[0].get(family, ())
    for m in mods:
        if needed(m, doc, consumer, options):
            _import(m)
    if all(m in _imported for m in mods):
        _complete.add(family)


def load_rule(rule_id: str) -> None:
    """Import the module that defines ``rule_id`` (nothing to do when it is registered already)."""
    if rule_id in core.REGISTRY:
        return
    m = _rule_ids().get(rule_id)
    if m is not None:
        _import(m)


def load_all() -> None:
    """Import every rule module (the whole registry)."""
    for m in _modules():
        _import(m)
    _complete.update(core.FAMILIES)


core.FAMILY_LOADER = load_family

"""Validate a whole launch command: parse it, read the config it names, merge, run every rule.

Entry point: :func:`check_command`. Returns a :class:`LaunchResult` with findings (for the files
and for the command itself, ``<launch-command>:LINE:COL``) and the explain rows (value and origin
of each effective setting). Standard library + PyYAML; nothing is launched or imported.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from .. import core, engine
from ..core import Context, Doc, Finding, InputError, Options
from . import accelerate as acc
from . import argv as argvmod
from . import runners
from .argv import CommandError, Word

COMMAND_NAME = "<launch-command>"

# how to recognise the launcher: (words that start the command) -> launcher
PY_MODULES = {"accelerate.commands.launch": "accelerate", "torch.distributed.run": "torchrun",
              "deepspeed.launcher.runner": "deepspeed"}


@dataclass
class Issue:
    rule: str
    message: str
    hint: str = ""
    word: Optional[Word] = None
    path: Tuple[Any, ...] = ()
    file: str = ""
    line: Optional[int] = None


class LaunchView:
    """What the launch rules see (ctx.launch)."""

    def __init__(self, kind: str, command_doc: Doc, issues: List[Issue], file_doc: Optional[Doc] = None,
                 docs: Optional[Dict[str, Doc]] = None) -> None:
        self.kind = kind
        self.command_doc = command_doc
        self.file_doc = file_doc
        self.issues = issues
        self.docs = docs or {}

    def report(self, ctx: Context, issue: Any) -> None:
        if getattr(issue, "word", None) is not None:
            ctx.report((), issue.message, issue.hint, doc=self.command_doc, line=issue.word.line, col=issue.word.col)
        elif getattr(issue, "file", "") and issue.file in self.docs:
            ctx.report(tuple(getattr(issue, "path", ()) or ()), issue.message, issue.hint, doc=self.docs[issue.file],
                       line=getattr(issue, "line", None), col=1 if getattr(issue, "line", None) else None)
        elif getattr(issue, "file", ""):
            d = Doc({}, kind="text", name=issue.file)
            ctx.report((), issue.message, issue.hint, doc=d, line=getattr(issue, "line", None),
                       col=1 if getattr(issue, "line", None) else None)
        elif self.file_doc is not None:
            ctx.report(tuple(getattr(issue, "path", ()) or ()), issue.message, issue.hint, doc=self.file_doc)
        else:
            ctx.report((), issue.message, issue.hint, doc=self.command_doc, line=None, col=None)


@dataclass
class LaunchResult:
    launcher: str = ""
    findings: List[Finding] = field(default_factory=list)
    explain: List[Dict[str, Any]] = field(default_factory=list)
    files: List[Dict[str, Any]] = field(default_factory=list)
    effective: Dict[str, Any] = field(default_factory=dict)  # final launcher values (for --output json)
    input_errors: List[Dict[str, str]] = field(default_factory=list)
    stopped: Optional[str] = None


def split_launcher(words: List[Word], env: Dict[str, str]) -> Tuple[str, List[Word]]:
    """(launcher, words after the launcher name); leading NAME=VALUE words go into env."""
    i = 0
    while i < len(words) and "=" in words[i].text and not words[i].text.startswith("-") and \
            words[i].text.split("=", 1)[0].replace("_", "a").isalnum():
        k, v = words[i].text.split("=", 1)
        env[k] = v
        i += 1
    if i < len(words) and words[i].text == "env":
        return split_launcher(words[i + 1:], env)
    if i >= len(words):
        raise CommandError("empty command: expected accelerate launch, deepspeed or torchrun")
    head = os.path.basename(words[i].text)
    if head == "accelerate":
        if i + 1 < len(words) and words[i + 1].text == "launch":
            return "accelerate", words[i + 2:]
        raise CommandError("only `accelerate launch` commands are checked")
    if head in ("accelerate-launch",):
        return "accelerate", words[i + 1:]
    if head in ("torchrun",):
        return "torchrun", words[i + 1:]
    if head in ("deepspeed", "ds"):
        return "deepspeed", words[i + 1:]
    if head.startswith("python"):
        j = i + 1
        while j < len(words) and words[j].text.startswith("-") and words[j].text != "-m":
            j += 1
        if j + 1 < len(words) and words[j].text == "-m" and words[j + 1].text in PY_MODULES:
            return PY_MODULES[words[j + 1].text], words[j + 2:]
        if j + 1 < len(words) and words[j].text.startswith("-m") and words[j].text[2:] in PY_MODULES:
            return PY_MODULES[words[j].text[2:]], words[j + 1:]
    raise CommandError(f"{words[i].text!r} is not a launcher this tool knows (accelerate launch, deepspeed, "
                       "torchrun, python -m torch.distributed.run)")


def _rules_loaded() -> None:
    from .. import rules  # noqa: F401


def _run_launch_rules(view: LaunchView, options: Options) -> List[Finding]:
    _rules_loaded()
    ctx = Context(doc=view.command_doc, options=options)
    ctx.launch = view  # type: ignore[attr-defined]
    core.run_rules(ctx, "launch")
    return ctx.findings


def check_command(command: str, env: Optional[Dict[str, str]] = None, cwd: str = ".",
                  options: Optional[Options] = None) -> LaunchResult:
    """Check one launch command. Raises CommandError for a command that cannot be split or is not a
    launcher; every other problem is a finding."""
    env = dict(os.environ if env is None else env)
    options = options or Options(cwd=cwd)
    words = argvmod.split_words(command)
    launcher, rest = split_launcher(words, env)
    command_doc = Doc({}, kind="text", name=COMMAND_NAME, text=command)
    res = LaunchResult(launcher=launcher)
    parsed = argvmod.parse(launcher, rest, env)
    issues: List[Issue] = []
    if parsed.error:
        issues.append(Issue("launch-parse-error", f"{launcher}: {parsed.error}",
                            "fix the flag (the launcher exits with status 2 before starting anything)",
                            parsed.error_word))
        res.stopped = "parse"
        res.findings = _run_launch_rules(LaunchView(launcher, command_doc, issues), options)
        return res
    _common_flag_issues(parsed, issues)
    if launcher == "accelerate":
        _check_accelerate(parsed, env, cwd, options, command_doc, issues, res)
    elif launcher == "torchrun":
        R = runners.analyse_torchrun(parsed, env)
        issues.extend(Issue(i.rule, i.message, i.hint, i.word) for i in R.issues)
        res.explain = [{"setting": d, "value": R.values.get(d), "origin": R.origin.get(d, "")}
                       for d in ("nnodes", "nproc_per_node", "node_rank", "rdzv_backend", "rdzv_endpoint",
                                 "rdzv_id", "master_addr", "master_port", "standalone", "max_restarts",
                                 "training_script")]
        res.effective = {k: R.values.get(k) for k in ("nnodes", "nproc_per_node", "node_rank", "rdzv_backend",
                                                      "rdzv_endpoint", "master_addr", "master_port")}
        res.effective["world_size"] = R.world_size
        res.findings = _run_launch_rules(LaunchView(launcher, command_doc, issues), options)
    else:
        R = runners.analyse_deepspeed(parsed, env, cwd)
        docs: Dict[str, Doc] = {}
        for i in R.issues:
            issues.append(Issue(i.rule, i.message, i.hint, i.word, file=i.file, line=i.line))
        res.explain = [{"setting": d, "value": R.values.get(d), "origin": R.origin.get(d, "")}
                       for d in ("hostfile", "include", "exclude", "num_nodes", "num_gpus", "master_addr",
                                 "master_port", "launcher", "no_ssh", "user_script")]
        res.effective = {k: R.values.get(k) for k in ("hostfile", "num_nodes", "num_gpus", "master_addr",
                                                      "master_port", "launcher", "include", "exclude")}
        res.effective["world_size"] = R.world_size
        res.findings = _run_launch_rules(LaunchView(launcher, command_doc, issues, docs=docs), options)
        if R.ds_config is not None:
            _check_ds_json(R.ds_config[0], R.ds_config[1], cwd, options, R.world_size, res)
    return res


def _common_flag_issues(parsed: argvmod.Parsed, issues: List[Issue]) -> None:
    for dest, gs in parsed.given.items():
        if len(gs) > 1 and gs[0].raw is not None and len({g.raw for g in gs}) > 1:
            issues.append(Issue("launch-flag-repeated", f"{gs[-1].canonical} is given {len(gs)} times; only the last "
                                f"value {gs[-1].raw!r} is used", "give the flag once", gs[0].word))
    for g in parsed.abbreviations:
        issues.append(Issue("launch-abbreviated-flag", f"{g.option} is an abbreviation of {g.canonical}",
                            f"write {g.canonical} in full", g.word))


# accelerate flags and the launchers that read them (others ignore them)
TORCHRUN_ONLY = ("rdzv_backend", "rdzv_conf", "max_restarts", "monitor_interval", "tee", "log_dir", "role")


def _ignored_flags(L: acc.AccelerateLaunch) -> List[Issue]:
    out: List[Issue] = []
    a = L.args
    launcher = L.launcher
    nm = a.get("num_machines")
    multi = isinstance(nm, int) and not isinstance(nm, bool) and nm > 1
    for dest, gs in L.parsed.given.items():
        g = gs[-1]
        why = None
        block = acc.block_of_dest(dest)
        if block == "deepspeed_config" and launcher != "deepspeed":
            why = f"DeepSpeed flag, but the launch runs the {launcher} launcher"
        elif block == "fsdp_config" and not (launcher == "torchrun" and a.get("use_fsdp")):
            why = f"FSDP flag, but the launch is not FSDP ({launcher} launcher)"
        elif block == "megatron_lm_config" and not (launcher == "torchrun" and a.get("use_megatron_lm")):
            why = "Megatron-LM flag, but the launch is not Megatron-LM"
        elif dest in TORCHRUN_ONLY and launcher not in ("torchrun", "deepspeed"):
            why = f"passed only to torchrun, but the launch runs the {launcher} launcher"
        elif dest in ("main_process_ip", "machine_rank") and not multi and launcher in ("torchrun", "deepspeed"):
            why = "read only when num_machines > 1"
        elif dest in ("deepspeed_hostfile", "deepspeed_exclusion_filter", "deepspeed_inclusion_filter") and \
                launcher == "deepspeed" and (not multi or a.get("deepspeed_multinode_launcher") == "standard"):
            why = "read only by the multi-node deepspeed runner (num_machines > 1, launcher not 'standard')"
        elif dest == "deepspeed_inclusion_filter" and a.get("deepspeed_exclusion_filter") is not None:
            why = "the exclusion filter wins (only one filter is passed to deepspeed)"
        elif dest == "use_megatron_lm" and launcher == "deepspeed":
            why = "--use_deepspeed (or distributed_type DEEPSPEED) is chosen first"
        elif dest in acc.PARADIGM_FLAGS and a.get("cpu"):
            why = "--cpu wins: the simple launcher runs on CPU"
        if why:
            out.append(Issue("launch-flag-ignored", f"{g.option} is ignored: {why}",
                             "drop the flag, or pick the launcher it belongs to", g.word))
    return out


def _check_accelerate(parsed: argvmod.Parsed, env: Dict[str, str], cwd: str, options: Options, command_doc: Doc,
                      issues: List[Issue], res: LaunchResult) -> None:
    cf = parsed.values.get("config_file")
    config_from = ""
    path = None
    if cf is not None:
        path = cf if os.path.isabs(cf) else os.path.join(cwd, cf)
        config_from = "flag"
    else:
        default = acc.default_config_file(env)
        if os.path.isfile(default) and not parsed.values.get("cpu"):
            path, cf, config_from = default, default, "default location"
    doc: Optional[Doc] = None
    loadable = True
    if path is not None:
        if not os.path.isfile(path):
            issues.append(Issue("launch-config-file-missing", f"--config_file {cf}: no such file "
                                f"(looked in {os.path.dirname(os.path.abspath(path))})",
                                "fix the path; relative paths resolve against the directory the command runs in",
                                parsed.last("config_file").word if parsed.last("config_file") else None))
            loadable = False
        else:
            try:
                text = core.read_input_file(path)
                doc = engine.parse_input(text, cf, os.path.abspath(path), "accelerate")
            except (InputError, RecursionError) as e:
                res.input_errors.append({"file": cf, "message": str(e)})
                loadable = False
    data = doc.data if doc is not None and isinstance(doc.data, dict) else None
    if doc is not None and data is None:
        loadable = False
    L = acc.merge(parsed, data, config_path=path, config_name=cf or "", config_from=config_from,
                  loadable=loadable if path is not None else True)
    res.stopped = L.stopped
    for i in L.issues:
        issues.append(Issue(i.rule, i.message, i.hint, i.word, i.path))
    if L.merged is not None:
        issues.extend(_ignored_flags(L))
        _derived_warnings(L, data, issues)
        _json_filled_flags(L, cwd, issues)
    file_doc = doc
    view = LaunchView("accelerate", command_doc, issues, file_doc=file_doc)
    res.findings.extend(_run_launch_rules(view, options))
    # every file rule on the merged configuration
    if L.merged is not None:
        mdoc = Doc(L.merged, kind=doc.kind if doc else "yaml", name=cf or COMMAND_NAME,
                   text=doc.text if doc else "", positions=dict(doc.positions) if doc else {},
                   scalars=dict(doc.scalars) if doc else {}, source_path=doc.source_path if doc else None)
        if doc is not None:
            mdoc.parse_findings = list(doc.parse_findings)
        try:
            fr = engine.validate_doc(mdoc, "accelerate", options)
        except Exception as e:  # noqa: BLE001 - never a traceback for bad input
            res.input_errors.append({"file": cf or COMMAND_NAME, "message": _internal(e)})
            fr = engine.FileResult(cf or COMMAND_NAME)
        for f in fr.findings:
            res.findings.append(_relocate(f, L, command_doc, data is None))
        res.files.append(fr.as_dict())
    elif doc is not None and L.stopped != "pre-merge":
        try:
            fr = engine.validate_doc(doc, "accelerate", options)
        except Exception as e:  # noqa: BLE001
            res.input_errors.append({"file": cf, "message": _internal(e)})
            fr = engine.FileResult(cf)
        res.findings.extend(fr.findings)
        res.files.append(fr.as_dict())
    res.explain = _explain_rows(L, doc)
    res.effective = {k: L.args.get(k) for k in EXPLAIN_KEYS if k in L.args}
    res.effective["launcher"] = L.launcher if L.merged is not None else None
    res.effective["config_file"] = cf
    res._merged = L.merged  # type: ignore[attr-defined]
    res.accelerate = L  # type: ignore[attr-defined]  (full values and origins, for tests and library use)


def _internal(e: Exception) -> str:
    return f"internal error while checking ({type(e).__name__}: {str(e)[:200]}); please report"


def _relocate(f: Finding, L: acc.AccelerateLaunch, command_doc: Doc, no_file: bool) -> Finding:
    """A finding on a key the command line set points at that flag."""
    p = tuple(f.path)
    while p:
        o = L.merged_origin.get(p)
        if o is not None and o.kind == "flag" and o.word is not None:
            return f.replace(file=COMMAND_NAME, line=o.word.line, col=o.word.col,
                             message=f"{f.message} (set by {o.detail})")
        p = p[:-1]
    if no_file:
        return f.replace(file=COMMAND_NAME, line=None, col=None)
    return f


def _derived_warnings(L: acc.AccelerateLaunch, data: Optional[Dict[str, Any]], issues: List[Issue]) -> None:
    a, parsed = L.args, L.parsed
    if data is not None and L.paradigm_from == "flags":
        flag = next((parsed.last(f) for f in acc.PARADIGM_FLAGS if parsed.last(f)), None)
        dt = data.get("distributed_type")
        implied = {"use_deepspeed": ("DEEPSPEED",), "use_fsdp": ("FSDP",), "use_megatron_lm": ("MEGATRON_LM",),
                   "multi_gpu": acc.MULTI_DEVICE_TYPES, "tpu": ("XLA",), "tpu_use_cluster": ("XLA",)}
        if flag is not None and dt not in implied.get(flag.dest, ()):
            issues.append(Issue("launch-paradigm-flag-overrides-file",
                                f"{flag.option} replaces distributed_type {dt!r} of {L.config_name}: the file's "
                                "distributed_type is not read when a paradigm flag is given",
                                "drop the flag or change distributed_type in the file", flag.word))
    for dest, gs in parsed.given.items():
        if dest.startswith("megatron_lm_") and gs[-1].raw is not None:
            from .flags import ACCELERATE
            typ = next((r[3] for r in ACCELERATE if r[1] == dest), None)
            if typ == "bool" and gs[-1].raw.lower() in argvmod.FALSE_WORDS + ("",):
                issues.append(Issue("launch-bool-flag-value", f"{gs[-1].option} {gs[-1].raw!r} is parsed with "
                                    "bool(): the option is switched ON", "leave the flag out to keep it off",
                                    gs[-1].word))
    nm = a.get("num_machines")
    if isinstance(nm, int) and not isinstance(nm, bool) and nm > 1 and L.launcher in ("torchrun", "deepspeed") \
            and data is not None and not parsed.last("machine_rank") and "machine_rank" not in data:
        issues.append(Issue("launch-machine-rank-default", f"num_machines {nm} but no --machine_rank and no "
                            "machine_rank in the file: this node starts as rank 0",
                            "pass --machine_rank N on each node (0 on the main node)",
                            parsed.last("num_machines").word if parsed.last("num_machines") else None))


def _json_filled_flags(L: acc.AccelerateLaunch, cwd: str, issues: List[Issue]) -> None:
    """DeepSpeed flags next to a deepspeed_config_file: an explicit value in the JSON wins silently."""
    import json
    ds_file = L.args.get("deepspeed_config_file")
    if L.launcher != "deepspeed" or not isinstance(ds_file, str) or ds_file.strip() in ("", "none"):
        return
    full = ds_file if os.path.isabs(ds_file) else os.path.join(cwd, ds_file)
    try:
        ds = json.loads(core.read_input_file(full))
    except Exception:  # noqa: BLE001 - unreadable JSON is reported by the file rules
        return
    for dest, dotted in acc.JSON_FILLED.items():
        g = L.parsed.last(dest)
        if g is None:
            continue
        cur: Any = ds
        for part in dotted.split("."):
            cur = cur.get(part) if isinstance(cur, dict) else None
        if cur is not None and cur != "auto" and str(cur).lower() != str(g.value).lower():
            issues.append(Issue("launch-flag-loses-to-deepspeed-json",
                                f"{g.option} {g.raw} loses to {dotted} = {cur!r} in {ds_file}: with a DeepSpeed JSON "
                                "the flag only fills 'auto' values", f"set {dotted} in the JSON (or to \"auto\")",
                                g.word))


EXPLAIN_KEYS = ("use_deepspeed", "use_fsdp", "use_megatron_lm", "multi_gpu", "tpu", "cpu", "num_processes",
                "num_machines", "machine_rank", "gpu_ids", "main_process_ip", "main_process_port", "mixed_precision",
                "dynamo_backend", "same_network", "rdzv_backend", "deepspeed_config_file", "zero_stage",
                "deepspeed_multinode_launcher", "deepspeed_hostfile", "fsdp_version", "fsdp_sharding_strategy",
                "fsdp_offload_params", "nproc_per_node", "nnodes", "node_rank", "master_addr", "master_port",
                "rdzv_endpoint")


def _explain_rows(L: acc.AccelerateLaunch, doc: Optional[Doc] = None) -> List[Dict[str, Any]]:
    rows = [{"setting": "config file", "value": L.config_name or None,
             "origin": L.config_from or "none read"},
            {"setting": "launcher", "value": L.launcher if L.merged is not None else None,
             "origin": "paradigm flags" if L.paradigm_from == "flags" else "distributed_type"}]
    for k in EXPLAIN_KEYS:
        if k not in L.args:
            continue
        o = L.origin.get(k)
        text = o.describe(L.config_name) if o else "default"
        if o is not None and o.kind == "file" and doc is not None and doc.pos(o.path)[0] is not None:
            text = f"file {L.config_name}:{doc.pos(o.path)[0]} {'.'.join(map(str, o.path))}"
        rows.append({"setting": k, "value": L.args.get(k), "origin": text})
    if L.stopped:
        rows.append({"setting": "stopped", "value": L.stopped, "origin": "accelerate stops here"})
    return rows


def _check_ds_json(path: str, word: Word, cwd: str, options: Options, world: Optional[int],
                   res: LaunchResult) -> None:
    full = path if os.path.isabs(path) else os.path.join(cwd, path)
    try:
        text = core.read_input_file(full)
        o = Options(consumer=options.consumer or "deepspeed", world_size=options.world_size or world,
                    cwd=cwd, check_imports=options.check_imports)
        fr = engine.validate_text(text, path, "deepspeed", o, source_path=os.path.abspath(full))
    except RecursionError:
        res.input_errors.append({"file": path, "message": "nesting too deep to check"})
        return
    except InputError as e:
        res.input_errors.append({"file": path, "message": f"{e} (named by the launch command at "
                                                          f"{word.line}:{word.col})"})
        return
    res.findings.extend(fr.findings)
    res.files.append(fr.as_dict())


# ---------------------------------------------------------------------------------------------
def _node_from_launch(name: str, r: LaunchResult, merged: Optional[Dict[str, Any]], cwd: str, word: Word):
    from .nodeset import Node, _json_content
    e = r.effective
    m = merged or {}
    vals = {k: e.get(k) for k in ("num_machines", "num_processes", "machine_rank", "main_process_ip",
                                  "main_process_port", "mixed_precision", "rdzv_backend", "same_network")}
    vals["distributed_type"] = m.get("distributed_type")
    if e.get("launcher") == "deepspeed":
        vals["deepspeed_multinode_launcher"] = e.get("deepspeed_multinode_launcher")
        vals["ds_json"] = _json_content(e.get("deepspeed_config_file"), cwd)
        vals["deepspeed_hostfile"] = e.get("deepspeed_hostfile")
    return Node(name, vals, word=word)


def check_node_set(files: List[str], commands: List[str], env: Optional[Dict[str, str]], cwd: str,
                   options: Optional[Options] = None) -> LaunchResult:
    """Per-node configs (files) or per-node launch commands: each is checked alone, then together."""
    from .nodeset import check_nodes, key_path, node_from_config
    options = options or Options(cwd=cwd)
    res = LaunchResult(launcher="node-set")
    nodes = []
    docs: Dict[str, Doc] = {}
    command_doc = Doc({}, kind="text", name=COMMAND_NAME)
    for f in files:
        try:
            text = core.read_input_file(f if os.path.isabs(f) else os.path.join(cwd, f))
            doc = engine.parse_input(text, f, os.path.abspath(os.path.join(cwd, f)), "accelerate")
        except (InputError, RecursionError) as e:
            res.input_errors.append({"file": f, "message": str(e)})
            continue
        try:
            fr = engine.validate_doc(doc, "accelerate", options)
        except Exception as e:  # noqa: BLE001
            res.input_errors.append({"file": f, "message": _internal(e)})
            continue
        res.findings.extend(fr.findings)
        res.files.append(fr.as_dict())
        docs[f] = doc
        nodes.append(node_from_config(f, doc, cwd))
    for i, c in enumerate(commands):
        r = check_command(c, env, cwd, options)
        name = f"{COMMAND_NAME}#{i + 1}"
        for fd in r.findings:
            res.findings.append(fd.replace(file=name) if fd.file == COMMAND_NAME else fd)
        res.input_errors.extend(r.input_errors)
        merged = getattr(r, "_merged", None)
        if r.launcher == "accelerate" and r.effective.get("launcher"):
            nodes.append(_node_from_launch(name, r, merged, cwd, Word(c, 0, 1, 1)))
    issues: List[Issue] = []
    for ni in check_nodes(nodes, cwd):
        n = ni.node
        if n is not None and n.doc is not None:
            issues.append(Issue(ni.rule, ni.message, ni.hint, None, key_path(ni.key), file=n.name))
        else:
            cd = Doc({}, kind="text", name=n.name if n else COMMAND_NAME)
            docs[cd.name] = cd
            issues.append(Issue(ni.rule, ni.message, ni.hint, None, (), file=cd.name))
    view = LaunchView("node-set", command_doc, issues, docs=docs)
    res.findings.extend(_run_launch_rules(view, options))
    res.explain = [{"setting": f"node {n.name}", "value": {k: v for k, v in n.values.items() if k != "ds_json"},
                    "origin": "file" if n.doc is not None else "launch command"} for n in nodes]
    return res

"""Generate ``references/validator-rules.md`` from the rule registry.

    python sub-skills/distributed-training-backends/scripts/backend_validator/docs.py --write
    python sub-skills/distributed-training-backends/scripts/backend_validator/docs.py --check

The page lists every registered rule (whatever module registered it) with its
severity, family, upstream source, description and its failing / passing
example, so the reference can never drift from the code (a test runs --check).
"""
from __future__ import annotations

import argparse
import inspect
import os
import re
import sys
from typing import Dict, List, Optional, Tuple

if __package__ in (None, ""):  # run as a script
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from backend_validator import core  # type: ignore
    from backend_validator.version import VERIFIED_AGAINST  # type: ignore
else:
    from . import core
    from .version import VERIFIED_AGAINST

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.normpath(os.path.join(HERE, "..", "..", "references", "validator-rules.md"))
REGEN = "python sub-skills/distributed-training-backends/scripts/backend_validator/docs.py --write"

FAMILY_TITLES = [
    ("input", "Parse-level rules (family input)"),
    ("accelerate", "Accelerate config rules (family accelerate)"),
    ("deepspeed", "DeepSpeed JSON rules (family deepspeed)"),
    ("cross", "Accelerate + DeepSpeed cross-file rules (family cross)"),
    ("launch", "Launch command and node-set rules (family launch)"),
    ("jobspec", "Job spec rules: SLURM batch scripts and Kubeflow manifests (family jobspec)"),
]

PROOF = [
    "The Accelerate and parse-level rules (`acc-`, `yaml-`, `input-`) are checked by `tests/validator` "
    "against `tests/oracle/accelerate_oracle.py`, which runs accelerate's own code on CPU, in the order "
    "`accelerate launch` and `Accelerator()` run it:",
    "",
    "| stage | upstream code run |",
    "| --- | --- |",
    "| load | `accelerate/commands/config/config_args.py::load_config_from_file` |",
    "| launch | `accelerate/commands/launch.py::launch_command_parser` + `_validate_launch_command` |",
    "| env | `accelerate/utils/launch.py::prepare_simple_launcher_cmd_env` / `prepare_multi_gpu_env` / "
    "`prepare_deepspeed_cmd_env` / `prepare_tpu` / `prepare_sagemager_args_inputs` (the launcher "
    "`launch_command` picks) |",
    "| plugins | `FullyShardedDataParallelPlugin()`, `DeepSpeedPlugin()` + `set_mixed_precision`, "
    "`MegatronLMPlugin()`, `ParallelismConfig()`, `TorchDynamoPlugin()`, `FP8BackendType` + "
    "`AORecipeKwargs` / `TERecipeKwargs` / `MSAMPRecipeKwargs`, built from that environment |",
    "| accelerator | `ParallelismConfig._validate_accelerator` on a stand-in accelerator; the cp, MS-AMP, "
    "torchao and gradient-accumulation checks of `Accelerator.__init__` / `AcceleratorState` (replayed) |",
    "| torchrun | `torch/distributed/run.py::config_from_args` on the arguments accelerate passes |",
    "| deepspeed / deepspeed-runner | `deepspeed/runtime/zero/config.py::DeepSpeedZeroConfig` on the "
    "generated ZeRO block; `deepspeed/launcher/runner.py::parse_args` + launcher-name dispatch |",
    "| compile | `torch.compile(..., mode=...)` argument check (inductor; nothing is compiled) |",
    "",
    "An error rule's failing example must be rejected and its passing example accepted; a warning "
    "rule's failing example must be accepted with the value visibly lost or changed (loaded config, "
    "launch arguments, environment or plugin field). The shared corpus and 600 generated configs "
    "must agree with the oracle (error exactly when accelerate rejects for a reason the file decides). "
    "`yaml-duplicate-key` is the one error accelerate accepts: `safe_load` keeps the later value.",
    "",
    "Not decidable from the file, so not reported: whether FP8 libraries (TE, MS-AMP, torchao), "
    "`mpirun`, transformers, Megatron-LM or a GPU are installed (`--check-imports` gives hints), "
    "ports already in use, DeepSpeed < 0.14.5 for `nossh`, the training script (layer classes to wrap, "
    "MoE classes, `main_training_function`), `prepare()`-time DeepSpeed checks, process groups and "
    "device meshes, TPU spawning and the SageMaker estimator. Which FP8 recipe an fp8 run without "
    "`fp8_config.backend` uses depends on the installed libraries, so recipe values are checked only "
    "for an explicit backend. DeepSpeed JSON content and the Accelerate/DeepSpeed interplay "
    "(missing `deepspeed_config_file`, `zero_optimization`, precision conflicts) are the `ds-`/`xf-` "
    "rules below.",
    "",
    "The launch rules (`launch-`, `nodeset-`) are checked by `tests/launch`: the validator's flag tables are "
    "compared with the real parsers (accelerate `launch_command_parser`, deepspeed `runner.parse_args`, torch "
    "`get_args_parser`), and a generated grid of command lines x configs agrees with accelerate's parser + "
    "`_validate_launch_command` + env builders (same oracle, whole command lines), torchrun's own `run()` "
    "(agent start stubbed) and deepspeed's `runner.main` (process start stubbed) on every case.",
    # --- job specs (backend_validator/jobspec/) ---
    "",
    "The job spec rules (`jobspec-`) are checked by `tests/jobspec`: every SLURM example is run task by task with "
    "real bash, a stand-in `srun` giving each task the variables SLURM documents for it, and the argv each launcher "
    "gets must equal the checker's; a correct two-node script and a PyTorchJob's pods (the operator's PET_* "
    "environment from kubeflow/training-operator v1.9.0 `envvar.go`) start real torchrun on CPU (gloo) and get ranks "
    "0 and 1; 29 real scripts and manifests (11 held out) get no false error.",
]

# what a clean report does not prove is for users: rendered at the top, the rest of PROOF at the end
_nd = next(i for i, line in enumerate(PROOF) if line.startswith("Not decidable from the file"))
NOT_DECIDABLE = PROOF[_nd]
PROOF = PROOF[:_nd] + PROOF[_nd + 2:] if _nd + 1 < len(PROOF) and PROOF[_nd + 1] == "" else PROOF[:_nd] + PROOF[_nd + 1:]

_FENCE = re.compile(r"(Fails|Passes):\s*\n\s*```(\w*)\n(.*?)\n\s*```", re.S)


def parse_doc(doc: str) -> Tuple[str, Dict[str, Tuple[str, str]]]:
    """(description, {"Fails": (lang, text), "Passes": (lang, text)}) from a rule docstring."""
    doc = inspect.cleandoc(doc or "")
    examples: Dict[str, Tuple[str, str]] = {}
    for m in _FENCE.finditer(doc):
        examples.setdefault(m.group(1), (m.group(2) or "yaml", inspect.cleandoc("\n" + m.group(3)) + "\n"))
    first = re.search(r"^\s*(Fails|Passes):", doc, re.M)
    desc = doc[:first.start()].strip() if first else doc.strip()
    return desc, examples


def slug(text: str) -> str:
    s = text.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


RULES_PAGE = "references/validator-rules.md"  # relative to the sub-skill folder


def rule_info(rule_id: str) -> Optional[Dict[str, object]]:
    """One rule as --explain-rule prints it, or None for an unknown id: id, severity, family,
    consumers, summary, upstream source, description, the failing and passing examples, the fix
    (the lines that change from the failing to the passing example) and its reference anchor."""
    import difflib
    from . import rules
    rules.load_all()
    r = core.REGISTRY.get(rule_id)
    if r is None:
        return None
    desc, ex = parse_doc(r.doc)
    fails, passes = ex.get("Fails"), ex.get("Passes")
    fix: List[str] = []
    if fails and passes:
        fix = [line for line in difflib.unified_diff(fails[1].splitlines(), passes[1].splitlines(), lineterm="", n=0)
               if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    return {
        "id": r.id, "severity": r.severity, "family": r.family, "consumers": list(r.consumers),
        "summary": r.summary, "source": r.source,
        # the Oracle: line is test metadata (the consumer / world size the examples are checked with)
        "description": " ".join(" ".join(x for x in desc.splitlines() if not x.strip().startswith("Oracle:")).split())
        or r.summary,
        "fails": {"lang": fails[0], "text": fails[1]} if fails else None,
        "passes": {"lang": passes[0], "text": passes[1]} if passes else None,
        "fix": fix, "reference": f"{RULES_PAGE}#{slug(r.id)}",
    }


def explain_text(info: Dict[str, object]) -> str:
    """The text form of :func:`rule_info`."""
    import textwrap
    out = [f"{info['id']}  ({info['severity']}, family {info['family']}"
           + (f", consumers {', '.join(info['consumers'])}" if info["consumers"] else "") + ")",
           f"finds: {info['summary']}", f"source: {info['source']}", ""]
    if info["description"] != info["summary"]:
        out += textwrap.wrap(str(info["description"]), 100) + [""]
    for label, key in (("Fails", "fails"), ("Passes", "passes")):
        ex = info[key]
        if ex:
            out.append(f"{label} ({ex['lang']}):")
            out += ["    " + line for line in ex["text"].rstrip("\n").splitlines()]
            out.append("")
    if info["fix"]:
        out.append("fix (failing -> passing example):")
        out += ["    " + line for line in info["fix"]]
        out.append("")
    out.append(f"reference: {info['reference']}")
    return "\n".join(out) + "\n"


def render() -> str:
    from . import rules
    rules.load_all()
    regs = sorted(core.REGISTRY.values(), key=lambda r: r.id)
    by_family: Dict[str, List[core.Rule]] = {}
    for r in regs:
        by_family.setdefault(r.family, []).append(r)
    counts = {s: sum(r.severity == s for r in regs) for s in core.SEVERITIES}
    out: List[str] = []
    w = out.append
    w(f"<!-- GENERATED from the validator's rule registry by `{REGEN}`; do not edit by hand "
      "(tests/validator/test_docs.py keeps it in sync). -->")
    w("# Validator rules (`scripts/validate_backend_config.py`)")
    w("")
    w("Query one rule instead of reading this page whole: `scripts/validate_backend_config.py --explain-rule "
      "RULE-ID` prints its severity, what fails and passes, the fix and its source (`--output json` too); "
      "`--list-rules` lists every id with its severity and summary.")
    w("")
    w("Families: " + " · ".join(f"[{fam}](#{slug(title)}) ({len(by_family[fam])})"
                                for fam, title in FAMILY_TITLES if fam in by_family)
      + " · [rule index](#rule-index) · [how the rules are proven](#how-the-rules-are-proven)")
    w("")
    w(f"Verified against: {VERIFIED_AGAINST}. Look a rule id up in the [rule index](#rule-index); how each "
      "rule was checked against the real libraries is at the end ([How the rules are proven]"
      "(#how-the-rules-are-proven)).")
    w("")
    w(f"{len(regs)} rules: {counts['error']} errors, {counts['warning']} warnings, {counts['info']} info. "
      "Exit codes: 0 no errors, 1 errors (or warnings with `--strict`), 2 unreadable input. "
      "Run `scripts/validate_backend_config.py --help` for options and input limits.")
    w("")
    w(NOT_DECIDABLE)  # what a clean report does not prove: users need it before the rules
    w("")
    w("## Contents")
    w("")
    w("- [Rule index](#rule-index)")
    for fam, title in FAMILY_TITLES:
        if fam in by_family:
            w(f"- [{title}](#{slug(title)})")
    w("- [How the rules are proven](#how-the-rules-are-proven)")
    w("")
    w("## Rule index")
    w("")
    w("| rule | severity | family | finds |")
    w("| --- | --- | --- | --- |")
    for r in regs:
        w(f"| [`{r.id}`](#{slug(r.id)}) | {r.severity} | {r.family} | {r.summary.replace('|', '/')} |")
    for fam, title in FAMILY_TITLES:
        if fam not in by_family:
            continue
        w("")
        w(f"## {title}")
        for r in by_family[fam]:
            desc, ex = parse_doc(r.doc)
            w("")
            w(f"### {r.id}")
            w("")
            meta = f"**{r.severity}** · source: `{r.source}`"
            if r.consumers:
                meta += f" · consumers: {', '.join(r.consumers)}"
            w(meta)
            w("")
            w(desc if desc else r.summary)
            for label in ("Fails", "Passes"):
                if label in ex:
                    lang, text = ex[label]
                    w("")
                    w(f"{label}:")
                    w("")
                    w(f"```{lang}")
                    w(text.rstrip("\n"))
                    w("```")
    w("")
    # the method (how each rule was checked) is for maintainers: last, after every rule
    w("## How the rules are proven")
    w("")
    w("Every error rule's failing example is rejected by the real library and its passing example "
      "accepted; every warning rule's failing example is shown to lose or change the value "
      "(tests/validator, oracle in tests/oracle).")
    w("")
    for line in PROOF:
        if line is not NOT_DECIDABLE:
            w(line)
    w("")
    return "\n".join(out)


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description="Generate references/validator-rules.md from the rule registry.")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--write", action="store_true", help=f"write {os.path.relpath(OUT)}")
    g.add_argument("--check", action="store_true", help="exit 1 if the committed file is out of date")
    a = p.parse_args(argv)
    text = render()
    if a.write:
        with open(OUT, "w", encoding="utf-8") as f:
            f.write(text)
        return 0
    if a.check:
        try:
            with open(OUT, encoding="utf-8") as f:
                cur = f.read()
        except OSError:
            cur = ""
        if cur != text:
            sys.stderr.write(f"{OUT} is out of date; run: {REGEN}\n")
            return 1
        return 0
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    if __package__ in (None, ""):
        from backend_validator import docs as _d  # type: ignore
        sys.exit(_d.main())
    sys.exit(main())

"""Generate references/facts/names.json: exhaustive name tables read from the pinned packages.

Maintainer tool (not shipped): it imports accelerate, deepspeed, torch and transformers from the
environment it runs in (the repository's .venv holds the pinned versions) and reads their sources
by AST. scripts/lookup.py queries the file it writes.

  .venv/bin/python tests/facts/generate_facts.py                 # rewrite the shipped file
  .venv/bin/python tests/facts/generate_facts.py --tf4-wheel /tmp/tf4/transformers-4.57.1-py3-none-any.whl
  .venv/bin/python tests/facts/generate_facts.py --stdout        # print, do not write

The transformers 4 -> 5 diff needs the 4.57.1 wheel (read from the zip by AST, never installed);
without --tf4-wheel the diff already in the shipped file is kept as it is (the test checks it
against the installed 5.x table instead).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
REPO = HERE.parents[1]
OUT = REPO / "references" / "facts" / "names.json"
os.environ.setdefault("DS_ACCELERATOR", "cpu")

FORMAT = 1


def _versions():
    from importlib.metadata import version
    return {p: version(p) for p in ("accelerate", "deepspeed", "torch", "transformers")}


def build(tf4_wheel: str = "", previous: dict = None) -> dict:
    import logging
    logging.disable(logging.WARNING)
    import _fx_accelerate as fa
    import _fx_deepspeed as fd
    import _fx_torch as ft
    import _fx_transformers as fx

    v = _versions()
    sections = {}
    entries = []
    unresolved = {}

    def add(sec, rows, pkg, how):
        sections[sec] = {"count": len(rows), "package": f"{pkg} {v[pkg]}", "how": how}
        entries.extend(rows)

    flags, config = fa.launch_and_config(v["accelerate"])
    add("accelerate-launch", flags, "accelerate",
        "accelerate.commands.launch.launch_command_parser() actions; file-settable when a ClusterConfig "
        "field or a nested-table key reaches the flag in _validate_launch_command")
    add("accelerate-config", config, "accelerate",
        "ClusterConfig/BaseConfig dataclass fields (the loader rejects other top-level keys) plus the "
        "nested-table keys that _validate_launch_command copies onto launch flags, plus nested keys the "
        "accelerate config questionnaire (cluster.py) writes that reach no flag, plus flagless nested keys "
        "the launcher still reads from args (getattr, fp8_* exports)")
    rows, un = fa.env_section()
    unresolved["accelerate-env"] = un
    add("accelerate-env", rows, "accelerate", "AST scan of accelerate/**.py for environment reads and "
        "for assignments into env dicts (what accelerate launch sets for its children)")
    add("accelerate-api", fa.api_section(), "accelerate",
        "inspect.signature(Accelerator.__init__) and dataclasses.fields of every dataclass in "
        "accelerate/utils/dataclasses.py and accelerate/parallelism_config.py; env links from __post_init__")
    add("deepspeed-config", fd.config_section(), "deepspeed",
        "pydantic model_fields of the DeepSpeed config models reached from their top-level key, plus "
        "get_scalar_param/get_list_param/get_dict_param and direct dict reads, each with its full table path "
        "traced from DeepSpeedConfig through getters and calls (fn: the reading function), plus the remaining "
        "KEY/KEY_DEFAULT pairs of the constants modules")
    add("deepspeed-launcher", fd.launcher_section(), "deepspeed",
        "deepspeed.launcher.runner.parse_args parser actions")
    add("deepspeed-removed", fd.removed_section(), "deepspeed",
        "deepspeed.runtime.config._REMOVED_TOP_LEVEL_CONFIG_KEYS / _REMOVED_ZERO_CONFIG_KEYS: keys whose presence "
        "DeepSpeedConfig refuses")
    rows, un = fd.env_section()
    unresolved["deepspeed-env"] = un
    add("deepspeed-env", rows, "deepspeed", "AST scan of deepspeed/**.py (ops/csrc sources excluded)")
    add("torchrun", ft.torchrun_section(), "torch",
        "torch.distributed.run.get_args_parser() actions; PET_ variables from argparse_util env actions")
    rows, un = ft.env_section()
    unresolved["torch-env"] = un
    add("torch-env", rows, "torch", "AST scan of torch/distributed/**.py and torch/nn/parallel/**.py "
        "(Python side only; C++-side variables are not indexed)")
    add("deepspeed-inference-config", fd.inference_config_section(), "deepspeed",
        "pydantic model_fields of deepspeed.inference.config.DeepSpeedInferenceConfig (the keys "
        "deepspeed.init_inference accepts as config= or keyword arguments), aliases and deprecations")
    add("torch-dynamo-config", ft.dynamo_config_section(), "torch",
        "torch._dynamo.config's registered options (_config): declared default and type, the declaring "
        "line, and the environment variable a Config(env_name_default/env_name_force) reads")
    add("trainer-args", fx.trainer_section(), "transformers",
        "dataclasses.fields(TrainingArguments) with metadata choices; fsdp_config keys read by "
        "TrainingArguments.__post_init__")
    diff = fx.diff_section(tf4_wheel) if tf4_wheel else [e for e in (previous or {}).get("entries", [])
                                                           if e["s"] == "transformers-4-to-5"]
    sections["transformers-4-to-5"] = {"count": len(diff), "package": f"transformers 4.57.1 -> {v['transformers']}",
                                       "how": "TrainingArguments fields of the 4.57.1 wheel read by AST from the zip, "
                                              "compared with the installed version's"}
    entries.extend(diff)
    _symmetric_links(entries)
    free_tables = sorted({v[0] for v in fa.GROUP_TO_DICT.values()} | {"dynamo_config"})
    return {"format": FORMAT, "versions": v, "sections": sections,
            "free_tables": {
                "tables": free_tables,
                "note": "accelerate's config loader does not check the keys inside these tables; launch copies each "
                        "key onto its arguments, so in an accelerate config file a key that matches no launch flag loads "
                        "without an error and sets no launch option (accelerate " + v["accelerate"] + ")"},
            "not_indexed": {
                "cxx_env_prefixes": ["TORCH_NCCL_", "NCCL_", "GLOO_", "TORCH_GLOO_", "TORCH_CPP_", "TORCH_SHOW_",
                                     "CUDA_", "FI_", "UCX_", "MASTER_"],
                "cxx_env_reason": "variables read by C++ (ProcessGroupNCCL, gloo, NCCL itself) are not in the Python "
                                  "sources, and the CPU wheel of torch lacks the ProcessGroupNCCL strings",
                "see": "sub-skills/torch-distributed/references/debugging-and-env.md",
                "unresolved_env_reads": {k: len(v_) for k, v_ in unresolved.items()},
                "unresolved_env_read_sites": {k: sorted(set(v_)) for k, v_ in unresolved.items()},
            },
            "entries": entries}


def _symmetric_links(entries) -> None:
    """A link from A to B is written on B as well (flag <-> config key <-> env var <-> field)."""
    by = {f"{e['s']}:{e['n']}": e for e in entries}
    for e in entries:
        me = f"{e['s']}:{e['n']}"
        for target in e.get("l", []):
            t = by.get(target)
            if t is not None and me not in t.get("l", []):
                t["l"] = sorted(set(t.get("l", [])) | {me})
    for e in entries:
        e["l"] = [x for x in e.get("l", []) if x in by]
        if not e["l"]:
            del e["l"]


def dumps(data: dict) -> str:
    """Compact JSON with one name entry per line, so that `grep NAME names.json` prints the matching
    entries only (as a single line, the whole 340 KB file came back to an agent that grepped it)."""
    def enc(obj) -> str:
        return json.dumps(obj, separators=(",", ":"), sort_keys=False, ensure_ascii=True)
    head = [f"{enc(k)}:{enc(v)}" for k, v in data.items() if k != "entries"]
    body = ",\n".join(enc(e) for e in data.get("entries", []))
    return "{" + ",\n".join(head + ['"entries":[\n' + body + "\n]"]) + "}\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tf4-wheel", default="", help="transformers 4.57.1 wheel for the 4 -> 5 diff")
    ap.add_argument("--stdout", action="store_true", help="print the JSON instead of writing it")
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args(argv)
    prev = json.loads(Path(args.out).read_text()) if Path(args.out).is_file() else None
    t0 = time.time()
    text = dumps(build(args.tf4_wheel, prev))
    if args.stdout:
        sys.stdout.write(text)
    else:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text)
        print(f"wrote {args.out} ({len(text)} bytes) in {time.time() - t0:.1f}s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

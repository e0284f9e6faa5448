#!/usr/bin/env python3
"""Check a config key, launch flag, environment variable or argument name against tables generated
from the pinned packages (references/facts/names.json), before writing it in an answer.

Standard library only; never imports torch, accelerate, deepspeed or transformers.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "references" / "facts" / "names.json"
NAME_RE = re.compile(r"^[A-Za-z0-9_.\-]+$")
LIMIT = 40
SHOWN = ("t", "d", "c", "w", "a", "l", "o")
LABELS = {"t": "type", "d": "default", "c": "choices", "w": "where", "a": "aliases", "l": "linked", "o": "note"}

EPILOG = """\
examples:
  python3 scripts/lookup.py num_cpu_threads_per_process    # a flag; is it also a config-file key?
  python3 scripts/lookup.py --nproc-per-node               # torchrun flag and its PET_ variable
  python3 scripts/lookup.py offload_optimizer.device       # DeepSpeed key, dotted path or bare leaf
  python3 scripts/lookup.py FSDP_TRANSFORMER_CLS_TO_WRAP   # env var: who reads it, who sets it
  python3 scripts/lookup.py --search cpu_offload --section trainer-args
  python3 scripts/lookup.py --list-sections
  python3 scripts/lookup.py eval_strategy --output json

matching: case-insensitive; a leading -- is dropped and - and _ are the same; a dotted DeepSpeed or
accelerate path is found by its full path and by its last part.

exit codes:
  0  found (or --search/--list-sections printed something)
  1  not found: the closest real names are printed, and what the tables do not cover
  2  bad input: empty or malformed name, unknown --section, unreadable table file
"""


def bundle_version() -> str:
    try:
        return (DATA.parents[2] / "VERSION").read_text(encoding="utf-8").strip()
    except OSError:
        return "unknown"


class InputError(Exception):
    pass


def norm(name: str) -> str:
    return name.strip().lstrip("-").replace("-", "_").lower()


def load(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or not isinstance(data.get("entries"), list):
            raise ValueError("no entries list")
        return data
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read the name tables at {path}: {exc}") from None


def index(entries):
    idx = {}
    for i, e in enumerate(entries):
        keys = {norm(e["n"])} | {norm(a) for a in e.get("a", ())}
        for k in list(keys):
            parts = k.split(".")
            keys.update(".".join(parts[i:]) for i in range(1, len(parts)))
        for k in keys:
            idx.setdefault(k, []).append(i)
    return idx


def version_of(data, section):
    return data["sections"].get(section, {}).get("package", "")


def coverage_line(data, name=""):
    v = data.get("versions", {})
    ni = data.get("not_indexed", {})
    searched = ", ".join(f"{k} {val}" for k, val in sorted(v.items()))
    line = (f"searched: {searched} (plus the transformers 4.57.1 -> 5 TrainingArguments diff). Not indexed: "
            f"C++-side environment variables ({', '.join(ni.get('cxx_env_prefixes', []))}...), names built at run "
            f"time that the source scan could not resolve ({sum(ni.get('unresolved_env_reads', {}).values())} env "
            f"reads, listed by --list-sections --output json), DeepSpeed keys read only outside the DeepSpeedConfig call tree (by the engine or an op at run time), and packages other "
            f"than these four.")
    free = data.get("free_tables", {})
    if "." in name and name.split(".", 1)[0] in free.get("tables", []):
        line = f"{name.split('.', 1)[0]}: {free.get('note', '')}.\n" + line
    up = name.upper().lstrip("-")
    if any(up.startswith(p) for p in ni.get("cxx_env_prefixes", [])):
        line = (f"{name} looks like a C++-side variable: those are not indexed ({ni.get('cxx_env_reason', '')}); "
                f"not being found here says nothing about it; see {ni.get('see', '')}.\n" + line)
    return line


def hit_json(data, e):
    out = dict(e)
    out["package"] = version_of(data, e["s"])
    return out


def print_hit(data, e, out):
    head = f"{e['s']}  {e['n']}  [{e['k']}]"
    out.write(head + "\n")
    for k in SHOWN:
        if k in e:
            val = e[k]
            if isinstance(val, list):
                val = ", ".join(val)
            if k == "w":
                val = f"{val}  ({version_of(data, e['s'])})"
            out.write(f"  {LABELS[k]}: {val}\n")
    for k, val in e.items():
        if k in SHOWN or k in ("n", "s", "k"):
            continue
        if isinstance(val, list):
            val = ", ".join(val)
        out.write(f"  {k}: {val}\n")


def cmd_lookup(data, name, section, output, limit):
    if not name.strip() or not NAME_RE.match(name.strip()):
        raise InputError(f"not a name: {name!r} (letters, digits, _ - . only)")
    entries = data["entries"]
    idx = index(entries)
    key = norm(name)
    hits = [entries[i] for i in idx.get(key, [])]
    if section:
        hits = [e for e in hits if e["s"] == section]
    # exact full names before leaf matches
    hits.sort(key=lambda e: (norm(e["n"]) != key and key not in {norm(a) for a in e.get("a", ())}, e["s"], e["n"]))
    if hits:
        shown = hits[:limit]
        if output == "json":
            json.dump({"query": name, "found": True, "hits": [hit_json(data, e) for e in shown],
                       "more": len(hits) - len(shown)}, sys.stdout, indent=1)
            sys.stdout.write("\n")
        else:
            for e in shown:
                print_hit(data, e, sys.stdout)
            if len(hits) > len(shown):
                print(f"{len(hits) - len(shown)} more, narrow with --section")
        return 0
    import difflib
    pool = {}
    for e in entries:
        if section and e["s"] != section:
            continue
        for n in [e["n"]] + list(e.get("a", ())):
            pool.setdefault(norm(n), set()).add(f"{e['s']}:{e['n']}")
            parts = norm(n).split(".")
            for i in range(1, len(parts)):
                pool.setdefault(".".join(parts[i:]), set()).add(f"{e['s']}:{e['n']}")
    close = difflib.get_close_matches(key, list(pool), n=8, cutoff=0.6)
    sugg = []
    for c in close:
        for s in sorted(pool[c]):
            if s not in sugg:
                sugg.append(s)
    sugg = sugg[:10]
    cover = coverage_line(data, name.strip())
    if output == "json":
        json.dump({"query": name, "found": False, "closest": sugg, "coverage": cover}, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        where = f" in section {section}" if section else ""
        print(f"{name}: not found{where}")
        print("closest: " + (", ".join(sugg) if sugg else "(none)"))
        print(cover)
    return 1


def cmd_search(data, text, section, output, limit):
    t = text.strip().lower()
    if not t:
        raise InputError("--search needs a non-empty text")
    tn = norm(t)
    hits = [e for e in data["entries"] if (not section or e["s"] == section)
            and (tn in norm(e["n"]) or t in e.get("o", "").lower() or any(tn in norm(a) for a in e.get("a", ())))]
    shown = hits[:limit]
    if output == "json":
        json.dump({"search": text, "hits": [hit_json(data, e) for e in shown], "more": len(hits) - len(shown)},
                  sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        for e in shown:
            d = f"  default {e['d']}" if "d" in e else ""
            print(f"{e['s']:<20} {e['n']}{d}")
        if len(hits) > len(shown):
            print(f"{len(hits) - len(shown)} more, narrow with --section")
        if not hits:
            print(f"no name contains {text!r}")
    return 0 if hits else 1


def cmd_sections(data, output):
    secs = data["sections"]
    if output == "json":
        json.dump({"versions": data.get("versions", {}), "sections": secs,
                   "not_indexed": data.get("not_indexed", {})}, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        for name, s in secs.items():
            print(f"{name:<20} {s['count']:>5}  {s['package']}")
            print(f"{'':<27}{s['how']}")
        print(coverage_line(data))
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="lookup.py", description=__doc__, epilog=EPILOG,
                                 formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    ap.add_argument("name", nargs="?", help="a flag, config key, env var, argument or field name")
    ap.add_argument("--search", metavar="TEXT", help="substring search over names and notes")
    ap.add_argument("--section", metavar="S", help="restrict to one section (see --list-sections)")
    ap.add_argument("--list-sections", action="store_true", help="sections, counts, versions, how generated")
    ap.add_argument("--output", choices=("text", "json"), default="text", help="output format (default text)")
    ap.add_argument("--limit", type=int, default=LIMIT, help=f"most hits printed (default {LIMIT})")
    ap.add_argument("--version", action="store_true", help="bundle version and the package versions the tables hold")
    ap.add_argument("--data", default=str(DATA), help=argparse.SUPPRESS)
    try:
        # a flag name such as --nproc-per-node is the thing looked up, not an option of this script
        args, unknown = ap.parse_known_args(argv)
    except SystemExit as exc:
        return 0 if exc.code == 0 else 2
    if unknown:
        if args.name is None and len(unknown) == 1:
            args.name = unknown[0]
        else:
            print(f"lookup.py: error: unexpected arguments: {' '.join(unknown)}", file=sys.stderr)
            return 2
    try:
        data = load(Path(args.data))
        if args.section and args.section not in data["sections"]:
            raise InputError(f"unknown section {args.section!r}; one of: {', '.join(data['sections'])}")
        if args.limit < 1:
            raise InputError("--limit must be at least 1")
        if args.version:
            print(f"lookup.py {bundle_version()} (pytorch-distributed-training bundle; tables from "
                  + ", ".join(f"{k} {v}" for k, v in sorted(data.get("versions", {}).items())) + ")")
            return 0
        if args.list_sections:
            return cmd_sections(data, args.output)
        if args.search is not None:
            return cmd_search(data, args.search, args.section, args.output, args.limit)
        if args.name is None:
            raise InputError("give a NAME, --search TEXT or --list-sections (see --help)")
        return cmd_lookup(data, args.name, args.section, args.output, args.limit)
    except InputError as exc:
        print(f"lookup.py: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())

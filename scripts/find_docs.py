#!/usr/bin/env python3
"""Find the section of the bundle's references that answers a question, and read only its lines.

Ranks every heading section of SKILL.md, references/ and each sub-skill's SKILL.md and references/ for
the query words (error text, names, a short description) and prints the best ones as
PATH:FIRST-LAST with their heading trail, so an agent reads one range instead of a whole file.
Standard library only; reads nothing outside the bundle.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # _docsearch.py beside this file, however it is run
import _docsearch  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 5

EPILOG = """\
examples:
  python3 scripts/find_docs.py "Grad strides do not match bucket view strides"   # an error line
  python3 scripts/find_docs.py no_sync gradient accumulation DDP
  python3 scripts/find_docs.py zero3 generate hang --sub-skill failure-triage
  python3 scripts/find_docs.py NCCL_SOCKET_IFNAME multi-node --limit 3 --output json
  python3 scripts/find_docs.py srun torchrun rendezvous --show      # also print the top section

then read only the printed range, e.g. sed -n 120,176p sub-skills/torch-distributed/references/ddp.md

ranking: BM25 over words (identifiers count whole and by their parts; the heading trail counts three
times), doubled when the whole query occurs verbatim in the section. A hit covers at most 60 lines and
about 3,000 characters; a longer section is split, so neighbouring ranges may continue it. A miss means
no section shares the query's words: try the error's key names, or the routers (SKILL.md) and the helpers' own --search.

exit codes:
  0  at least one section found
  1  no section matches the query
  2  bad input: empty query, unknown --sub-skill, a limit below 1
"""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="find_docs.py", description=__doc__, epilog=EPILOG,
                                 formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    ap.add_argument("query", nargs="*", help="words, names or an error line")
    ap.add_argument("--limit", type=int, default=LIMIT, help=f"most sections printed (default {LIMIT})")
    ap.add_argument("--sub-skill", metavar="NAME", help="only this sub-skill's SKILL.md and references")
    ap.add_argument("--show", action="store_true", help="also print the text of the best section")
    ap.add_argument("--output", choices=("text", "json"), default="text", help="output format (default text)")
    ap.add_argument("--root", default=str(ROOT), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    query = " ".join(args.query).strip()
    root = Path(args.root)
    if not query:
        print("find_docs.py: error: give the words to look for (see --help)", file=sys.stderr)
        return 2
    if args.limit < 1:
        print("find_docs.py: error: --limit must be 1 or more", file=sys.stderr)
        return 2
    if args.sub_skill and not (root / "sub-skills" / args.sub_skill / "SKILL.md").is_file():
        names = sorted(p.name for p in (root / "sub-skills").iterdir() if (p / "SKILL.md").is_file()) \
            if (root / "sub-skills").is_dir() else []
        print(f"find_docs.py: error: no sub-skill {args.sub_skill!r} (known: {', '.join(names)})", file=sys.stderr)
        return 2
    try:
        hits = _docsearch.Index(root, args.sub_skill).search(query, args.limit)
    except OSError as e:
        print(f"find_docs.py: error: cannot read the bundle: {e}", file=sys.stderr)
        return 2
    if args.output == "json":
        print(json.dumps({"query": query, "hits": [
            {"path": s.path, "first_line": s.start, "last_line": s.end, "headings": s.trail,
             "score": round(sc, 2), "snippet": _docsearch.snippet(s),
             **({"text": s.text} if args.show and k == 0 else {})}
            for k, (sc, s) in enumerate(hits)]}, indent=1))
    else:
        for k, (sc, s) in enumerate(hits, 1):
            print(f"{k}. {s.path}:{s.start}-{s.end}  {' > '.join(s.trail)}  [{sc:.1f}]")
            snip = _docsearch.snippet(s)
            if snip:
                print(f"   {snip}")
        if hits and args.show:
            s = hits[0][1]
            print(f"\n--- {s.path}:{s.start}-{s.end}\n{s.text}")
        if not hits:
            print(f"no section matches {query!r}", file=sys.stderr)
    return 0 if hits else 1


if __name__ == "__main__":
    sys.exit(main())

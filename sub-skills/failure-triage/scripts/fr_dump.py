#!/usr/bin/env python3
"""Read PyTorch flight-recorder dumps of every rank and name the rank and collective that diverged.

Standard library only; never imports torch and never unpickles: a pickled dump is read by an
opcode walker (pickletools.genops) that builds dicts, lists, tuples, sets, strings, bytes, numbers,
booleans and None, and refuses every opcode that imports or calls (GLOBAL, REDUCE, BUILD, ...).
triage_log.py routes dumps here; this file also runs on its own. Run with --help for usage.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import pickletools
import re
import sys

EXIT_FOUND, EXIT_NOT_FOUND, EXIT_USAGE = 0, 1, 2   # the same meanings as triage_log.py's codes

MAX_BYTES = 256 * 1024 * 1024   # bytes read per dump (torch's default buffer keeps 2000 entries)
MAX_ENTRIES = 200_000           # entries kept per dump (the newest ones)
MAX_FILES = 4096                # dump files read from the inputs
SNIFF_BYTES = 4096              # bytes looked at to recognise a dump

HELP_EPILOG = """\
examples:
  fr_dump.py /tmp/fr/                      # a folder holding one dump per rank, <prefix><rank>
  fr_dump.py fr_0.json fr_1.json           # JSON dumps (torch._C._distributed_c10d._dump_fr_trace_json())
  fr_dump.py nccl_trace_rank_0 nccl_trace_rank_1   # pickled dumps, read without unpickling
  python -m torch.distributed.flight_recorder.fr_trace DIR > fr.txt; fr_dump.py fr.txt
  triage_log.py --fr-dump DIR              # the same report through triage_log.py
  fr_dump.py --output json DIR

what it does:
  The rank of a dump comes from the digits that end its file name (torch writes <prefix><rank>;
  a .json/.pkl/.pickle suffix is allowed). Collectives are matched per process group by
  collective_seq_id, as torch's fr_trace does. The first sequence number where the ranks of a
  group disagree is the divergence: a rank that never issued it (it stopped at a lower sequence
  number: it skipped the collective or is stuck before it), a rank that ran a different
  collective, or different sizes or dtypes. With two ranks a different collective is a tie: the
  rank that differs from the lowest rank is named. The analyser's own text output (fr_trace) is
  read too.

exit codes:
  0  a divergence was found and named
  1  the dumps agree (no divergence), or too few ranks dumped to compare
  2  usage error, unreadable, malformed or refused input (a pickle that would import or call)
"""

# collective_seq_id, profiling_name and process_group are what matching needs.
_JSON_FIRST_KEY = re.compile(
    rb'^\s*\{\s*"(comm_lib_version|entries|nccl_comm_state|pg_config|pg_status|version)"\s*:')
_JSON_MARKERS = (b'"collective_seq_id"', b'"pg_status"', b'"pg_config"', b'"profiling_name"',
                 b'"nccl_comm_state"')
_FR_TRACE_HEADER = re.compile(
    r"^(?:(?P<missing>Not all ranks joining collective, sequence number: (?P<s1>\d+))"
    r"|(?P<errors>Collective sequence number: (?P<s2>\d+) has errors)"
    r"|(?P<numel>Input/output mismatch in the collective sequence number: (?P<s3>\d+)))\s*$", re.M)
_RANK_IN_NAME = re.compile(r"(\d+)(?:\.(?:json|pkl|pickle|pt|bin|dump|txt|log))?$", re.I)


class FrDumpError(Exception):
    """A dump cannot be read: malformed, truncated, not a dump, or refused (unsafe pickle)."""


# --------------------------------------------------------------------------- detection


def looks_like_dump(first_bytes: bytes) -> str | None:
    """'pickle', 'json' or 'fr_trace' when these leading bytes start a flight-recorder dump (or the
    text fr_trace prints), else None. Only a prefix is needed (SNIFF_BYTES is plenty)."""
    if not first_bytes:
        return None
    if first_bytes[:1] == b"\x80" and first_bytes[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        return "pickle"
    head = first_bytes.lstrip(b"\xef\xbb\xbf")
    if _JSON_FIRST_KEY.match(head) and any(m in head for m in _JSON_MARKERS):
        return "json"
    text = first_bytes.decode("utf-8", "replace")
    if _FR_TRACE_HEADER.search(text) and re.search(r"^group info: ", text, re.M):
        return "fr_trace"
    return None


def _read_head(path: str) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read(SNIFF_BYTES)
    except OSError:
        return b""


def is_dump_path(path: str) -> bool:
    """True when `path` is a dump file, fr_trace output, or a folder that holds a dump."""
    if os.path.isdir(path):
        try:
            names = sorted(os.listdir(path))[:MAX_FILES]
        except OSError:
            return False
        return any(os.path.isfile(os.path.join(path, n)) and looks_like_dump(_read_head(os.path.join(path, n)))
                   for n in names)
    return os.path.isfile(path) and looks_like_dump(_read_head(path)) is not None


# --------------------------------------------------------------------------- loading

_BUILD_OPS = {
    "EMPTY_DICT", "EMPTY_LIST", "EMPTY_TUPLE", "EMPTY_SET", "MARK", "SETITEM", "SETITEMS", "APPEND",
    "APPENDS", "ADDITEMS", "TUPLE", "TUPLE1", "TUPLE2", "TUPLE3", "LIST", "DICT", "FROZENSET",
    "POP", "POP_MARK", "DUP", "PUT", "BINPUT", "LONG_BINPUT", "MEMOIZE", "GET", "BINGET", "LONG_BINGET",
    "PROTO", "FRAME", "STOP", "NONE", "NEWTRUE", "NEWFALSE",
}
_VALUE_OPS = {  # opcodes whose argument, as pickletools decodes it, is the value pushed
    "INT", "BININT", "BININT1", "BININT2", "LONG", "LONG1", "LONG4", "FLOAT", "BINFLOAT",
    "STRING", "BINSTRING", "SHORT_BINSTRING", "UNICODE", "BINUNICODE", "SHORT_BINUNICODE",
    "BINUNICODE8", "BINBYTES", "SHORT_BINBYTES", "BINBYTES8",
}


def load_pickle_restricted(data: bytes):
    """The plain containers a pickle describes, built without unpickling.

    Walks the opcodes (pickletools.genops parses, never executes) and builds only dict, list,
    tuple, set, frozenset, str, bytes, int, float, bool and None. Any other opcode (GLOBAL,
    STACK_GLOBAL, REDUCE, BUILD, INST, OBJ, NEWOBJ, PERSID, EXT*, buffers) raises FrDumpError
    before anything is imported or called.
    """
    was_enabled = gc.isenabled()
    gc.disable()   # only containers of plain data are built (no cycles to collect): keep GC out of the loop
    try:
        return _walk(data)
    finally:
        if was_enabled:
            gc.enable()


def _walk(data: bytes):
    stack: list = []
    marks: list[int] = []
    memo: dict = {}

    def pop_mark() -> list:
        if not marks:
            raise FrDumpError("malformed pickle: no MARK")
        at = marks.pop()
        items = stack[at:]
        del stack[at:]
        return items

    def top(kind: type, op: str):
        if not stack or not isinstance(stack[-1], kind):
            raise FrDumpError(f"malformed pickle: {op} without a {kind.__name__}")
        return stack[-1]

    def need(n: int, op: str):
        if len(stack) - (marks[-1] if marks else 0) < n:
            raise FrDumpError(f"malformed pickle: {op} on a short stack")

    try:
        for opcode, arg, pos in pickletools.genops(data):
            name = opcode.name
            if name in _VALUE_OPS:
                if name == "INT" and isinstance(arg, bool):
                    stack.append(arg)
                else:
                    stack.append(arg)
                continue
            if name not in _BUILD_OPS:
                what = f" {arg!r}" if isinstance(arg, str) and name in ("GLOBAL", "INST") else ""
                raise FrDumpError(
                    f"refused pickle opcode {name}{what} at byte {pos}: a flight-recorder dump holds only "
                    "plain data; this file would import or call code")
            if name in ("PROTO", "FRAME"):
                continue
            if name == "STOP":
                if len(stack) != 1 or marks:
                    raise FrDumpError("malformed pickle: stack not empty at STOP")
                return stack[0]
            if name == "EMPTY_DICT":
                stack.append({})
            elif name == "EMPTY_LIST":
                stack.append([])
            elif name == "EMPTY_TUPLE":
                stack.append(())
            elif name == "EMPTY_SET":
                stack.append(set())
            elif name == "NONE":
                stack.append(None)
            elif name == "NEWTRUE":
                stack.append(True)
            elif name == "NEWFALSE":
                stack.append(False)
            elif name == "MARK":
                marks.append(len(stack))
            elif name == "SETITEMS":
                items = pop_mark()
                if len(items) % 2:
                    raise FrDumpError("malformed pickle: odd SETITEMS")
                d = top(dict, name)
                for k, v in zip(items[::2], items[1::2]):
                    d[k] = v
            elif name == "SETITEM":
                need(3, name)
                v = stack.pop()
                k = stack.pop()
                top(dict, name)[k] = v
            elif name == "APPENDS":
                items = pop_mark()
                top(list, name).extend(items)
            elif name == "APPEND":
                need(2, name)
                v = stack.pop()
                top(list, name).append(v)
            elif name == "ADDITEMS":
                items = pop_mark()
                top(set, name).update(items)
            elif name == "FROZENSET":
                stack.append(frozenset(pop_mark()))
            elif name == "TUPLE":
                stack.append(tuple(pop_mark()))
            elif name in ("TUPLE1", "TUPLE2", "TUPLE3"):
                n = int(name[-1])
                need(n, name)
                items = stack[-n:]
                del stack[-n:]
                stack.append(tuple(items))
            elif name == "LIST":
                stack.append(pop_mark())
            elif name == "DICT":
                items = pop_mark()
                if len(items) % 2:
                    raise FrDumpError("malformed pickle: odd DICT")
                stack.append(dict(zip(items[::2], items[1::2])))
            elif name == "POP":
                need(1, name)
                stack.pop()
            elif name == "POP_MARK":
                pop_mark()
            elif name == "DUP":
                need(1, name)
                stack.append(stack[-1])
            elif name in ("PUT", "BINPUT", "LONG_BINPUT"):
                need(1, name)
                memo[arg] = stack[-1]
            elif name == "MEMOIZE":
                need(1, name)
                memo[len(memo)] = stack[-1]
            elif name in ("GET", "BINGET", "LONG_BINGET"):
                if arg not in memo:
                    raise FrDumpError(f"malformed pickle: memo key {arg} unset")
                stack.append(memo[arg])
    except FrDumpError:
        raise
    except TypeError as exc:   # an unhashable key (a list used as a dict key)
        raise FrDumpError(f"malformed pickle: {exc}") from None
    except Exception as exc:    # pickletools: unknown opcode, truncated argument, bad encoding
        raise FrDumpError(f"truncated or malformed pickle: {exc}") from None
    raise FrDumpError("truncated pickle: no STOP opcode")


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _text(value, limit: int) -> str:
    """A string from the dump as it may be printed: control characters (terminal escapes) removed."""
    return _CONTROL.sub("?", str(value)[:limit])


def _as_int(value, default=None):
    if isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.fullmatch(r"-?\d{1,30}", value.strip()):
        return int(value)
    return default


def _sizes(value):
    """input_sizes/output_sizes as a tuple of tuples of ints (hashable, comparable)."""
    if not isinstance(value, (list, tuple)):
        return ()
    out = []
    for dims in value[:4096]:
        if isinstance(dims, (list, tuple)):
            out.append(tuple(d if isinstance(d, int) and not isinstance(d, bool) else -1 for d in dims[:64]))
    return tuple(out)


def _strs(value):
    if not isinstance(value, (list, tuple)):
        return ()
    return tuple(_text(v, 64) for v in value[:4096])


def normalise(raw, name: str) -> dict:
    """Check a loaded dump and keep what the analysis needs; FrDumpError when it is not a dump."""
    if not isinstance(raw, dict):
        raise FrDumpError(f"{name}: not a flight-recorder dump (top level is {type(raw).__name__}, not a dict)")
    known = {"entries", "version", "pg_config", "pg_status", "nccl_comm_state", "comm_lib_version"}
    if not known & set(k for k in raw if isinstance(k, str)):
        raise FrDumpError(f"{name}: not a flight-recorder dump (none of the keys entries, version, pg_config)")
    notes = []
    entries_raw = raw.get("entries")
    if entries_raw is None:
        entries_raw = []
        notes.append(f"{name}: no entries (recorder off: TORCH_FR_BUFFER_SIZE=0, or nothing ran yet)")
    if not isinstance(entries_raw, list):
        raise FrDumpError(f"{name}: 'entries' is {type(entries_raw).__name__}, not a list")
    if len(entries_raw) > MAX_ENTRIES:
        notes.append(f"{name}: {len(entries_raw)} entries, only the newest {MAX_ENTRIES} analysed")
        entries_raw = entries_raw[-MAX_ENTRIES:]
    entries, bad = [], 0
    for e in entries_raw:
        if not isinstance(e, dict):
            bad += 1
            continue
        pg = e.get("process_group")
        seq = _as_int(e.get("collective_seq_id"))
        prof = e.get("profiling_name")
        if not (isinstance(pg, (list, tuple)) and len(pg) >= 1 and isinstance(prof, str) and seq is not None):
            bad += 1
            continue
        backend, _, op = prof.partition(":")
        op = op.split(" ")[0] if op else backend
        entries.append({
            "record_id": _as_int(e.get("record_id"), -1),
            "pg": _text(pg[0], 200),
            "pg_desc": _text(pg[1], 200) if len(pg) > 1 else "",
            "seq": seq,
            "p2p_seq": _as_int(e.get("p2p_seq_id"), 0),
            "is_p2p": bool(e.get("is_p2p")) if isinstance(e.get("is_p2p"), bool) else False,
            "profiling_name": _text(prof, 200),
            "op": _text(op, 100),
            "input_sizes": _sizes(e.get("input_sizes")),
            "output_sizes": _sizes(e.get("output_sizes")),
            "input_dtypes": _strs(e.get("input_dtypes")),
            "output_dtypes": _strs(e.get("output_dtypes")),
            "state": _text(e.get("state"), 40) if e.get("state") is not None else None,
            "time_created_ns": _as_int(e.get("time_created_ns"), 0),
            "frames": _frames(e.get("frames")),
        })
    if bad:
        notes.append(f"{name}: {bad} entries without process_group/collective_seq_id/profiling_name skipped")
    entries.sort(key=lambda x: x["record_id"])
    pg_config = {}
    cfg = raw.get("pg_config")
    if isinstance(cfg, dict):
        for key, val in cfg.items():
            if isinstance(val, dict) and isinstance(val.get("ranks"), str):
                ranks = [int(r) for r in re.findall(r"-?\d+", val["ranks"])[:100000]]
                pg_config[_text(key, 200)] = {"desc": _text(val.get("desc", ""), 200), "ranks": ranks}
    version = raw.get("version")
    return {"version": _text(version, 20) if version is not None else None, "entries": entries,
            "pg_config": pg_config, "notes": notes}


def _frames(value) -> list:
    out = []
    if isinstance(value, list):
        for f in value[:32]:
            if isinstance(f, dict):
                out.append(f"{_text(f.get('name'), 80)} at {_text(f.get('filename'), 200)}:{_as_int(f.get('line'), '?')}")
    return out


def load_dump(data: bytes, name: str) -> dict:
    """A dump's bytes (JSON or pickle) -> the normalised dict; FrDumpError when unreadable."""
    kind = looks_like_dump(data[:SNIFF_BYTES])
    if kind == "pickle":
        raw = load_pickle_restricted(data)
    elif kind == "json" or data.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] == b"{":
        try:
            raw = json.loads(data.decode("utf-8-sig"))
        except UnicodeDecodeError as exc:
            raise FrDumpError(f"{name}: not UTF-8 JSON ({exc.reason} at byte {exc.start})") from None
        except json.JSONDecodeError as exc:
            raise FrDumpError(f"{name}: malformed or truncated JSON: {exc.msg} at line {exc.lineno} "
                              f"column {exc.colno}") from None
        except (RecursionError, ValueError) as exc:
            raise FrDumpError(f"{name}: unreadable JSON: {str(exc)[:100]}") from None
    else:
        raise FrDumpError(f"{name}: not a flight-recorder dump (neither JSON nor a pickle); give logs and "
                          "dumps in separate runs")
    try:
        return normalise(raw, name)
    except FrDumpError as exc:
        msg = str(exc)
        raise FrDumpError(msg if msg.startswith(name) else f"{name}: {msg}") from None


def rank_from_name(path: str) -> int | None:
    """The rank torch puts at the end of a dump's name (<prefix><rank>), else None."""
    m = _RANK_IN_NAME.search(os.path.basename(path))
    return int(m.group(1)) if m else None


# --------------------------------------------------------------------------- analysis


def _signature(entries: list) -> tuple:
    return tuple((e["op"], e["input_sizes"], e["output_sizes"], e["input_dtypes"], e["output_dtypes"])
                 for e in entries)


def _fmt_sizes(sizes) -> str:
    return "[" + ", ".join("[" + ", ".join(str(d) for d in s) + "]" for s in sizes) + "]"


def _describe(entries: list) -> str:
    if not entries:
        return "nothing"
    parts = [f"{e['op']} {_fmt_sizes(e['input_sizes'])}" for e in entries]
    return " + ".join(parts)


def analyse(dumps: dict) -> dict:
    """dumps: {rank: normalised dump}. Returns the report (see render_text and --output json)."""
    notes = [n for r in sorted(dumps) for n in dumps[r]["notes"]]
    ranks = sorted(dumps)
    # per process group: {pg: {rank: {seq: [entries]}}}
    groups: dict[str, dict] = {}
    descs: dict[str, str] = {}
    p2p = 0
    for r in ranks:
        for e in dumps[r]["entries"]:
            if e["is_p2p"]:
                p2p += 1
                continue
            descs.setdefault(e["pg"], e["pg_desc"])
            groups.setdefault(e["pg"], {}).setdefault(r, {}).setdefault(e["seq"], []).append(e)
    if p2p:
        notes.append(f"{p2p} point-to-point entries (send/recv) not compared: they are matched by peer, not by sequence")
    # members: pg_config when it names the group with ranks, the default group is every dumped rank
    cfg_members: dict[str, set] = {}
    for r in ranks:
        for key, val in dumps[r]["pg_config"].items():
            if val["ranks"]:
                cfg_members.setdefault(key, set()).update(val["ranks"])
    group_reports, divergences = [], []
    missing_dumps: set = set()
    for pg in sorted(groups, key=lambda g: (_as_int(g, 1 << 30), g)):
        by_rank = groups[pg]
        desc = descs.get(pg, "")
        members = set(by_rank)
        if pg in cfg_members:
            members |= cfg_members[pg]
        if desc == "default_pg" or pg == "0":
            members |= set(ranks)
        dumped = sorted(m for m in members if m in dumps)
        missing_dumps |= {m for m in members if m not in dumps}
        last = {r: max(by_rank[r]) if by_rank.get(r) else None for r in dumped}
        first = {r: min(by_rank[r]) for r in dumped if by_rank.get(r)}
        report = {"name": pg, "desc": desc, "members": sorted(members), "dumped": dumped,
                  "last_seq": {str(r): last[r] for r in dumped},
                  "last_collective": {str(r): _describe(by_rank[r][last[r]]) if last[r] is not None else None
                                      for r in dumped},
                  "last_state": {str(r): by_rank[r][last[r]][-1]["state"] if last[r] is not None else None
                                 for r in dumped}}
        group_reports.append(report)
        if len(dumped) < 2:
            continue
        start = max(first.values()) if first else 0
        end = max((v for v in last.values() if v is not None), default=0)
        for seq in range(start, end + 1):
            at = {r: by_rank.get(r, {}).get(seq, []) for r in dumped}
            present = [r for r in dumped if at[r]]
            absent = [r for r in dumped if not at[r]]
            if not present:
                continue
            div = None
            if absent:
                ref = present[0]
                div = {"type": "missing", "ranks": absent, "reference_ranks": present,
                       "collective": None, "expected": at[ref][-1]["op"], "tie": False}
            else:
                sigs: dict[tuple, list] = {}
                for r in dumped:
                    sigs.setdefault(_signature(at[r]), []).append(r)
                if len(sigs) > 1:
                    ordered = sorted(sigs.values(), key=lambda rs: (-len(rs), rs[0]))
                    ref_ranks = ordered[0]
                    tie = len(ordered) > 1 and len(ordered[1]) == len(ref_ranks)
                    odd = sorted(r for rs in ordered[1:] for r in rs)
                    ref = ref_ranks[0]
                    a, b = at[ref], at[odd[0]]
                    if [e["op"] for e in a] != [e["op"] for e in b]:
                        kind = "op_mismatch"
                    elif [(e["input_sizes"], e["output_sizes"]) for e in a] != \
                            [(e["input_sizes"], e["output_sizes"]) for e in b]:
                        kind = "size_mismatch"
                    else:
                        kind = "dtype_mismatch"
                    div = {"type": kind, "ranks": odd, "reference_ranks": ref_ranks,
                           "collective": b[-1]["op"], "expected": a[-1]["op"], "tie": tie}
            if div is None:
                continue
            div.update({"group": pg, "group_desc": desc, "seq": seq,
                        "per_rank": {str(r): {
                            "last_seq": last[r],
                            "collective": _describe(at[r]) if at[r] else None,
                            "input_sizes": [list(s) for s in at[r][-1]["input_sizes"]] if at[r] else None,
                            "output_sizes": [list(s) for s in at[r][-1]["output_sizes"]] if at[r] else None,
                            "dtypes": list(at[r][-1]["input_dtypes"]) if at[r] else None,
                            "state": at[r][-1]["state"] if at[r] else None,
                            "frames": at[r][-1]["frames"] if at[r] else [],
                        } for r in dumped}})
            ref_entry = at[div["reference_ranks"][0]][-1]
            div["_time"] = ref_entry["time_created_ns"]
            div["message"] = _message(div)
            divergences.append(div)
            break   # later sequence numbers of this group only repeat the consequence
    for gr in group_reports:   # NCCL states: every rank entered the last collective, not all finished it
        seqs = {v for v in gr["last_seq"].values() if v is not None}
        states = {r: st for r, st in gr["last_state"].items() if st}
        if len(seqs) == 1 and len(set(states.values())) > 1 and not any(d["group"] == gr["name"] for d in divergences):
            notes.append(f"process group {gr['name']}: last collective seq {seqs.pop()} is "
                         + ", ".join(f"'{st}' on rank {r}" for r, st in sorted(states.items(), key=lambda kv: int(kv[0])))
                         + ": the ranks not 'completed' are the ones still inside it")
    if missing_dumps:
        notes.append("no dump from rank(s) " + ", ".join(str(r) for r in sorted(missing_dumps))
                     + ": their part cannot be compared; dump every rank")
    versions = sorted({d["version"] for d in dumps.values() if d["version"]})
    if len(versions) > 1:
        notes.append("dump format versions differ between ranks: " + ", ".join(versions))
    divergences.sort(key=lambda d: d.pop("_time"))
    root = divergences[0] if divergences else None
    if root is None and len(ranks) < 2:
        notes.append("only one rank's dump: nothing to compare it with; dump every rank")
    elif root is None and group_reports:
        notes.append("every rank reached the same collectives with the same sizes: the dumps show no "
                     "desync; a slow or stuck rank inside the last collective (see each rank's state and "
                     "log) or a hang outside collectives is left")
    return {"source": "flight_recorder", "ranks": ranks, "versions": versions, "divergence": root,
            "divergences": divergences, "groups": group_reports, "notes": notes}


def _message(div: dict) -> str:
    g = f"process group {div['group']}" + (f" ({div['group_desc']})" if div["group_desc"] else "")
    who = ", ".join(str(r) for r in div["ranks"])
    refs = ", ".join(str(r) for r in div["reference_ranks"])
    pr = div["per_rank"]
    ref0 = str(div["reference_ranks"][0])
    if div["type"] == "missing":
        lasts = ", ".join(f"rank {r} at seq {pr[str(r)]['last_seq']}" for r in div["ranks"])
        return (f"rank(s) {who} never issued collective seq {div['seq']} of {g} ({div['expected']}, which "
                f"rank(s) {refs} entered): stopped at a lower sequence number ({lasts}). The rank skipped "
                f"this {div['expected']} or is stuck before it, outside any collective.")
    odd0 = str(div["ranks"][0])
    tie = (" With as many ranks on each side the dumps cannot say which side is wrong: compare both code "
           "paths." if div["tie"] else "")
    if div["type"] == "op_mismatch":
        return (f"rank(s) {who} ran {pr[odd0]['collective']} as collective seq {div['seq']} of {g} while "
                f"rank(s) {refs} ran {pr[ref0]['collective']}: the ranks issue collectives in a different "
                f"order (or one skipped an earlier one).{tie}")
    what = "sizes" if div["type"] == "size_mismatch" else "dtypes"
    return (f"rank(s) {who} ran collective seq {div['seq']} of {g} ({div['collective']}) with different "
            f"{what} from rank(s) {refs}: {pr[odd0]['collective']} {pr[odd0]['dtypes']} vs "
            f"{pr[ref0]['collective']} {pr[ref0]['dtypes']}.{tie}")


# --------------------------------------------------------------------------- fr_trace text


def parse_fr_trace_text(text: str) -> dict:
    """The mismatches `python -m torch.distributed.flight_recorder.fr_trace DIR` printed, as a report
    of the same shape as analyse() (divergence / divergences / notes)."""
    divergences = []
    heads = list(_FR_TRACE_HEADER.finditer(text))
    for i, m in enumerate(heads):
        block = text[m.end(): heads[i + 1].start() if i + 1 < len(heads) else len(text)]
        fields = {}
        for line in block.splitlines():
            k, sep, v = line.partition(": ")
            if sep and k in ("internal record id", "group info", "collective", "missing ranks", "input sizes",
                             "output sizes", "world size", "expected ranks", "collective state", "error msg",
                             "total input numel", "total output numel"):
                fields.setdefault(k, v.strip())
        seq = int(m.group("s1") or m.group("s2") or m.group("s3"))
        group = fields.get("group info", "")
        name, _, desc = group.partition(":")
        coll = fields.get("collective", "")
        op = coll.partition(":")[2].split(" ")[0] if ":" in coll else coll
        culprits = [int(x) for x in re.findall(r"Culprit rank (\d+)", fields.get("error msg", ""))]
        kinds = re.findall(r"Error type: (\w+)", fields.get("error msg", ""))
        found = re.findall(r"found collective type: '(\w+)'", fields.get("error msg", ""))
        if m.group("missing"):
            kind, ranks = "missing", [int(x) for x in re.findall(r"\d+", fields.get("missing ranks", ""))]
        elif m.group("numel"):
            kind, ranks = "size_mismatch", culprits
        else:
            kmap = {"COLLECTIVE_TYPE_MISMATCH": "op_mismatch", "SIZE_OR_SYNTAX_MISMATCH": "size_mismatch",
                    "COLLECTIVE_DTYPE_MISMATCH": "dtype_mismatch", "COLLECTIVE_STATE_MISMATCH": "state_mismatch"}
            kind, ranks = (kmap.get(kinds[0], "mismatch") if kinds else "mismatch"), culprits
        expected = [int(x) for x in re.findall(r"\d+", fields.get("expected ranks", ""))]
        div = {"type": kind, "group": name, "group_desc": desc, "seq": seq, "ranks": ranks,
               "reference_ranks": sorted(set(expected) - set(ranks)),
               "collective": found[0] if found else (None if kind == "missing" else op), "expected": op,
               "tie": False, "fr_trace": fields}
        detail = fields.get("error msg") or (f"missing ranks {fields.get('missing ranks')}" if kind == "missing" else "")
        div["message"] = (f"fr_trace: collective seq {seq} of process group {group or '?'} ({coll}): "
                          f"{'not all ranks joined' if kind == 'missing' else kind.replace('_', ' ')}"
                          + (f"; {detail}" if detail else ""))
        divergences.append(div)
    notes = []
    if re.search(r"^Missing dump files from ranks", text, re.M) or "Missing dump files from ranks" in text:
        notes.append("fr_trace stopped: dump files are missing for some ranks (--allow-incomplete-ranks)")
    if "KeyError" in text and "_pg_guids" in text:
        notes.append("fr_trace crashed on a KeyError in _pg_guids: the dumps' pg_config does not name the "
                     "groups their entries use (gloo dumps of torch 2.13.0 do this); read the dumps here instead")
    return {"source": "fr_trace_text", "ranks": [], "versions": [],
            "divergence": divergences[0] if divergences else None, "divergences": divergences,
            "groups": [], "notes": notes}


# --------------------------------------------------------------------------- inputs and report


def _gather(paths: list[str], notices: list[str]) -> list[str]:
    files = []
    for p in paths:
        if p == "-":
            raise FrDumpError("dumps are files: stdin (-) is read as a log, not as a dump")
        if not os.path.exists(p):
            raise FrDumpError(f"{p}: no such file")
        if os.path.isdir(p):
            try:
                names = sorted(os.listdir(p))
            except OSError as exc:
                raise FrDumpError(f"{p}: cannot list: {exc.strerror or exc}") from None
            found = [os.path.join(p, n) for n in names
                     if os.path.isfile(os.path.join(p, n)) and looks_like_dump(_read_head(os.path.join(p, n)))]
            skipped = sum(1 for n in names if os.path.isfile(os.path.join(p, n))) - len(found)
            if skipped:
                notices.append(f"{p}: {skipped} file(s) that are not dumps ignored")
            if not found:
                raise FrDumpError(f"{p}: no flight-recorder dump in this folder")
            files.extend(found)
        else:
            files.append(p)
        if len(files) > MAX_FILES:
            raise FrDumpError(f"more than {MAX_FILES} dump files")
    return files


def _read(path: str, max_bytes: int) -> bytes:
    try:
        with open(path, "rb") as fh:
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        raise FrDumpError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(data) > max_bytes:
        raise FrDumpError(f"{path}: larger than {max_bytes} bytes (raise --max-bytes)")
    return data


def triage_dumps(paths: list[str], max_bytes: int = MAX_BYTES) -> tuple[dict, list[str]]:
    """Read dump files, folders of dumps or fr_trace text; return (report, notices). FrDumpError on
    unreadable or refused input."""
    notices: list[str] = []
    files = _gather(paths, notices)
    kinds = {f: looks_like_dump(_read_head(f)) for f in files}
    texts = [f for f in files if kinds[f] == "fr_trace"]
    if texts:
        if len(files) > len(texts):
            raise FrDumpError("give fr_trace's text output or the dumps, not both")
        text = "\n".join(_read(f, max_bytes).decode("utf-8", "replace") for f in texts)
        return parse_fr_trace_text(text), notices
    by_rank: dict[int, tuple[str, dict]] = {}
    for f in files:
        dump = load_dump(_read(f, max_bytes), f)
        rank = rank_from_name(f)
        if rank is None:
            raise FrDumpError(f"{f}: no rank at the end of the file name (torch names dumps <prefix><rank>)")
        if rank in by_rank:
            prev = by_rank[rank][0]
            # a folder can hold both forms of one rank (pickle and .json): keep the JSON one
            if f.lower().endswith(".json") and not prev.lower().endswith(".json"):
                notices.append(f"rank {rank}: {prev} and {f} both given; {f} used")
                by_rank[rank] = (f, dump)
            elif prev.lower().endswith(".json") and not f.lower().endswith(".json"):
                notices.append(f"rank {rank}: {prev} and {f} both given; {prev} used")
            else:
                raise FrDumpError(f"two dumps for rank {rank}: {prev} and {f}")
            continue
        by_rank[rank] = (f, dump)
    report = analyse({r: d for r, (_, d) in by_rank.items()})
    report["files"] = {str(r): f for r, (f, _) in sorted(by_rank.items())}
    return report, notices


def exit_code(report: dict) -> int:
    return EXIT_FOUND if report.get("divergence") else EXIT_NOT_FOUND


def render_text(report: dict) -> str:
    out = []
    div = report.get("divergence")
    src = "fr_trace output" if report.get("source") == "fr_trace_text" else \
        "flight-recorder dumps of rank(s) " + ", ".join(str(r) for r in report.get("ranks", []))
    if div is None:
        out.append(f"No divergence found in the {src}.")
    else:
        who = ", ".join(str(r) for r in div["ranks"]) or "?"
        g = f"{div['group']}" + (f" ({div['group_desc']})" if div["group_desc"] else "")
        out.append(f"DIVERGED: rank {who} at collective seq {div['seq']} of process group {g}: "
                   + {"missing": "never issued it", "op_mismatch": "ran a different collective",
                      "size_mismatch": "different sizes", "dtype_mismatch": "different dtypes"}.get(
                       div["type"], div["type"].replace("_", " ")))
        out.append(f"  {div['message']}")
        for r, info in sorted(div.get("per_rank", {}).items(), key=lambda kv: int(kv[0])):
            what = info["collective"] or f"nothing (last collective of this group: seq {info['last_seq']})"
            state = f", state {info['state']}" if info.get("state") else ""
            out.append(f"  rank {r}: {what}{state}")
            frames = info.get("frames", [])
            own = [fr for fr in frames if "/torch/" not in fr.replace("\\", "/")] or frames
            for fr in own[:3]:   # the program's own frames first: torch's wrappers say nothing
                out.append(f"      {fr}")
        for other in report.get("divergences", [])[1:]:
            out.append(f"  also: {other['message']}")
    if report.get("groups"):
        out.append("")
        out.append("PROCESS GROUPS (last collective per rank):")
        for gr in report["groups"]:
            name = gr["name"] + (f" ({gr['desc']})" if gr["desc"] else "")
            cells = "; ".join(f"rank {r}: seq {gr['last_seq'][r]} {gr['last_collective'][r]}"
                              for r in gr["last_seq"])
            out.append(f"  {name}: {cells}")
    for n in report.get("notes", []):
        out.append(f"note: {n}")
    return "\n".join(out) + "\n"


def render(report: dict, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(report, indent=2, ensure_ascii=False, default=list) + "\n"
    return render_text(report)


def bundle_version() -> str:
    """The bundle version (triage/version.py beside this script; 'unknown' without it)."""
    here = os.path.dirname(os.path.abspath(__file__))
    if here not in sys.path:
        sys.path.insert(0, here)
    try:
        from triage.version import bundle_version as lookup
    except ImportError:
        return "unknown"
    return lookup()


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def main(argv: list[str] | None = None) -> int:
    p = _Parser(prog="fr_dump.py", description=__doc__.splitlines()[0], epilog=HELP_EPILOG,
                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("inputs", nargs="+", metavar="DUMP", help="dump files, folders of dumps, or fr_trace output")
    p.add_argument("--version", action="version",
                   version=f"fr_dump.py {bundle_version()} (pytorch-distributed-training bundle; dumps of torch 2.13.0)")
    p.add_argument("--output", choices=("text", "json"), default="text", help="report format (default text)")
    p.add_argument("--max-bytes", type=int, default=MAX_BYTES, help=f"bytes read per dump (default {MAX_BYTES})")
    args = p.parse_args(argv)
    try:
        report, notices = triage_dumps(args.inputs, max(1, args.max_bytes))
    except FrDumpError as exc:
        sys.stderr.write(f"fr_dump.py: error: {exc}\n")
        return EXIT_USAGE
    for n in notices:
        sys.stderr.write(f"fr_dump.py: notice: {n}\n")
    try:
        sys.stdout.write(render(report, args.output))
        sys.stdout.flush()
    except (BrokenPipeError, OSError):
        pass
    return exit_code(report)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
    except MemoryError:
        sys.stderr.write("fr_dump.py: error: out of memory\n")
        sys.exit(EXIT_USAGE)

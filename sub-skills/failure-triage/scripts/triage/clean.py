"""Line cleaning: ANSI codes, rank/host prefixes, Rich boxes, glued lines, timestamps."""
from __future__ import annotations

import re

_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])")
_CTRL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_PREFIXES = [
    (re.compile(r"^\[(?:rank|default)(\d{1,6})\]:[ \t]?"), True),        # torch [rank3]: / [default0]:
    (re.compile(r"^\[(?:\d+,)?(\d{1,6})\]<std(?:out|err)>:[ \t]?"), True),  # mpirun [1,3]<stderr>:, horovodrun [3]<stderr>:
    (re.compile(r"^(\d{1,5}):[ \t]"), True),                              # srun -l / "3: "
    (re.compile(r"^\([^()]{0,80}\bpid=\d+[^()]{0,80}\)[ \t]?"), False),       # Ray "(Worker pid=12, ip=...)"
    # pdsh / deepspeed multi-node "host: ": a name with a digit (node01, 10.0.0.1, ip-10-0-0-1.ec2),
    # localhost, or any host-like name followed by something only a log line starts with
    (re.compile(r"^(?:localhost|[A-Za-z0-9-]*\d[A-Za-z0-9-]*(?:\.[A-Za-z0-9-]+)*):[ \t]"), False),
    (re.compile(r"^[A-Za-z0-9][A-Za-z0-9.-]{0,62}:[ \t](?=\[(?:rank|default)\d|Traceback|\s+File \"|\[\d{4}-\d\d-\d\d)"),
     False),
]
_NOT_HOST = re.compile(r"^(?:[\w.-]*(?:Error|Exception|Warning|Interrupt|Exit|Failure|Fault)\d*|"
                       r"collect2|cc1plus|cc1|cicc|ptxas|cudafe\+\+|(?:gcc|g\+\+|clang|clang\+\+|c\+\+)-[\d.]+)\s*:")
BOX_EDGE = re.compile(r"^\s*[╭╰┏┗╔╚+][─━═\-]")
_BOX_SIDE = "│┃║"
_RANK_IN_TEXT = re.compile(r"\[[Rr]ank ?(\d{1,6})\]")
# a rank prefix inside a line: two ranks wrote into one line ("...out of memo[rank1]:Traceback")
_GLUED = re.compile(r"(?<=\S)(?=\[(?:rank|default)\d{1,6}\]:|(?:slurmstepd|srun): error: )")


def clean(line: str) -> tuple[str, int | None, bool]:
    """Return (text without prefixes, rank from a prefix or None, came-from-a-Rich-box)."""
    line = _ANSI.sub("", line)
    if "\x00" in line or _CTRL.search(line):
        line = _CTRL.sub("", line)
    rank = None
    for _ in range(3):
        for rx, is_rank in _PREFIXES:
            m = rx.match(line)
            if not m:
                continue
            if not is_rank and _NOT_HOST.match(line):
                continue
            if is_rank and rank is None:
                rank = int(m.group(1))
            line = line[m.end():]
            break
        else:
            break
    boxed = False
    s = line.strip()
    if s and s[0] in _BOX_SIDE:
        boxed = True
        s = s[1:]
        if s and s[-1] in _BOX_SIDE:
            s = s[:-1]
        line = "  " + s.strip()
    else:
        line = line.rstrip()
    return line, rank, boxed


def rank_in_text(text: str) -> int | None:
    m = _RANK_IN_TEXT.search(text)
    return int(m.group(1)) if m else None


def split_glued(raw: str) -> list[str]:
    """A physical line cut where another rank's prefix starts inside it (and at carriage returns)."""
    parts = raw.split("\r") if "\r" in raw else [raw]
    if ("]:" in raw and ("[rank" in raw or "[default" in raw)) or ": error: " in raw:
        out = []
        for p in parts:
            out.extend(_GLUED.split(p))
        return out
    return parts


# --------------------------------------------------------------------------- timestamps

# glog (torch C++): [E1201 12:00:01.123456789 file.cpp:12] or E1201 12:00:01.123 at the start
_TS_GLOG = re.compile(r"(?:^|\[)[EWIF](\d{1,2})(\d\d) (\d\d):(\d\d):(\d\d(?:\.\d+)?)\b")
# DeepSpeed / Python logging / ISO 8601: [2026-12-01 12:00:01,123], 2026-12-01T12:00:01.123Z,
# torchrun's summary "time : 2026-12-01_12:00:01"
_TS_ISO = re.compile(r"(?<!\d)(\d{4})-(\d\d)-(\d\d)[T _](\d\d):(\d\d):(\d\d(?:[.,]\d+)?)")
TS_SCAN = 80  # characters at the start of a cleaned line searched for a timestamp


def timestamp(text: str) -> float | None:
    """Seconds since the start of the year (month*32+day days; the year is ignored because glog
    omits it) of the first timestamp near the start of the line, or None."""
    head = text[:TS_SCAN]
    if ":" not in head:
        return None
    m = _TS_ISO.search(head)
    if m:
        _, mo, d, h, mi, s = m.groups()
    else:
        m = _TS_GLOG.search(head)
        if not m:
            return None
        mo, d, h, mi, s = m.groups()
    try:
        mo_i, d_i, h_i, mi_i, s_f = int(mo), int(d), int(h), int(mi), float(s.replace(",", "."))
    except ValueError:
        return None
    if not (1 <= mo_i <= 12 and 1 <= d_i <= 31 and h_i < 24 and mi_i < 60 and s_f < 61):
        return None
    return ((mo_i * 32 + d_i) * 24 + h_i) * 3600 + mi_i * 60 + s_f

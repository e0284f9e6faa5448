"""Bounded readers: files and streams read in blocks of whole lines, fed to the engine.

A block is the decoded text of whole lines (bounded by --max-bytes per input, lines cut at
--max-line characters). Lines the engine's prefilter rejects are skipped in C (a regex search
over the block, newline counting), so a long training log costs little more than reading it.
"""
from __future__ import annotations

import os
import time

from .engine import CHUNK, TS_BACK, _Triage


def iter_blocks(fh, max_bytes: int, max_line: int, notices: list, name: str) -> Iterator[bytes]:
    """Yield blocks of whole lines (bytes, '\\n'-joined, no final newline) from a binary stream.

    Reads chunks (read1 returns what a pipe has, so a live stream is processed as it comes),
    keeps at most 4 * max_line bytes of a line that spans chunks, stops after max_bytes.
    """
    read = 0
    keep = max_line * 4
    carry = b""
    carry_cut = False
    cut_lines = 0
    reader = getattr(fh, "read1", fh.read)
    while read < max_bytes:
        buf = reader(min(CHUNK, max_bytes - read))
        if not buf:
            break
        read += len(buf)
        last_nl = buf.rfind(b"\n")
        if last_nl < 0:
            if not carry_cut:
                carry += buf
                if len(carry) > keep:
                    carry, carry_cut = carry[:keep], True
            continue
        head, tail = buf[:last_nl], buf[last_nl + 1:]
        first_nl = head.find(b"\n")
        first = head if first_nl < 0 else head[:first_nl]
        if carry or carry_cut:
            if not carry_cut:
                carry += first[: keep + 1]
            if len(carry) > keep or carry_cut:
                cut_lines += 1
            yield carry[:keep]
            if first_nl >= 0:
                yield head[first_nl + 1:]
        else:
            yield head
        carry, carry_cut = tail[: keep + 1], False
        if len(carry) > keep:
            carry, carry_cut = carry[:keep], True
    if carry or carry_cut:
        if carry_cut:
            cut_lines += 1
        yield carry[:keep]
    if read >= max_bytes:
        try:
            more = reader(1)
        except (OSError, ValueError):
            more = b""
        if more:
            notices.append(f"{name}: stopped after {max_bytes} bytes (--max-bytes); the rest was not read")
    if cut_lines:
        notices.append(f"{name}: {cut_lines} line(s) longer than {max_line} characters were cut")


def iter_lines(fh, max_bytes: int, max_line: int, notices: list, name: str,
               start_line: int = 0) -> Iterator[tuple[int, str]]:
    """(1-based line number, line) for every line of the stream, as the engine numbers them."""
    n = start_line
    for block in iter_blocks(fh, max_bytes, max_line, notices, name):
        for text in block.split(b"\n"):
            n += 1
            yield n, text[: max_line * 4].decode("utf-8", errors="replace")[:max_line]


def open_tail(path: str, max_bytes: int, notices: list):
    """Open a file for reading; for a regular file larger than max_bytes, seek to its tail.
    Returns (binary file object, lines skipped in the head)."""
    fh = open(path, "rb")
    try:
        st = os.fstat(fh.fileno())
        size = st.st_size if os.path.isfile(path) else -1
    except OSError:
        size = -1
    skipped_lines = 0
    if size > max_bytes:
        # Errors sit at the end of a failed run's log: read the tail, count the head's lines.
        skip_to = size - max_bytes
        done = 0
        buf = b""
        while done < skip_to:
            buf = fh.read(min(1 << 22, skip_to - done))
            if not buf:
                break
            done += len(buf)
            skipped_lines += buf.count(b"\n")
        if done and not buf.endswith(b"\n"):
            fh.readline(max_bytes)  # finish the partial line
            skipped_lines += 1
        notices.append(f"{path}: {size} bytes; only the last {max_bytes} bytes were read "
                       f"(--max-bytes), line numbers still count from the top")
    return fh, skipped_lines


class Deadline(Exception):
    pass


def feed_stream(t: _Triage, fh, name: str, n: int, max_bytes: int, max_line: int, notices: list,
                deadline: float) -> int:
    """Feed one input to the engine block by block; return the last line number.

    Lines the prefilter rejects are counted, not decoded, unless the engine is busy (an open
    traceback or message), when every line goes to it."""
    regexes = t.cat.prefilter_bytes.regexes if t.filter else None
    keep = max_line * 4
    fed = 0
    try:
        for block in iter_blocks(fh, max_bytes, max_line, notices, name):
            block = b"\n" + block  # position 0 is the newline before the first line
            pos, end_all = 1, len(block)
            # the next match of each prefilter regex at or after pos - 1 (None: no more in the block)
            nxt = [rx.search(block, 0) for rx in regexes] if regexes is not None else None
            while True:
                if nxt is not None and not t.busy():
                    for i, m in enumerate(nxt):
                        if m is not None and m.start() < pos - 1:
                            nxt[i] = regexes[i].search(block, pos - 1)
                    live = [m.start() for m in nxt if m is not None]
                    if not live:
                        n += block.count(b"\n", pos) + 1
                        break
                    first = min(live)
                    hit = first + 1 if block[first:first + 1] == b"\n" else first
                    start = block.rfind(b"\n", 0, hit) + 1
                    if start > pos:
                        n += block.count(b"\n", pos, start)
                        pos = start
                end = block.find(b"\n", pos)
                if end < 0:
                    end = end_all
                n += 1
                t.lookback = lambda b=block, p=pos: [x.decode("utf-8", "replace") for x in
                                                     b[max(0, p - 8192):p].split(b"\n")[-TS_BACK:]]
                t.feed_line(n, block[pos:min(end, pos + keep)].decode("utf-8", errors="replace")[:max_line])
                fed += 1
                if fed % 256 == 0 and time.monotonic() > deadline:
                    raise Deadline(n)
                if end >= end_all:
                    break
                pos = end + 1
            if time.monotonic() > deadline:
                raise Deadline(n)
    finally:
        t.lookback = None
    return n

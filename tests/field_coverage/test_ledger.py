"""The field-coverage ledger is well formed and every place it names exists: covered_by paths and
their #anchors resolve to a file and heading of this bundle, URLs are unique, and MECHANISMS.md
carries the table summarize.py prints."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "benchmarks" / "field_coverage"
sys.path.insert(0, str(BENCH))
import summarize  # noqa: E402


def _slug(heading: str) -> str:
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    return {_slug(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", path.read_text(), re.M)}


def test_rows_are_complete_and_unique():
    rows = summarize.load()
    urls = [r["url"] for r in rows]
    assert len(rows) >= 300 and len(set(urls)) == len(urls)
    assert all(u.startswith("https://github.com/") for u in urls)
    assert all(r["url"].split("/")[3] + "/" + r["url"].split("/")[4] == r["repo"] for r in rows)


def test_covered_by_points_at_real_files_and_headings():
    bad = []
    for r in summarize.load():
        where = r["covered_by"]
        if where.startswith("uncovered"):
            continue
        where = where.removeprefix("new: ").split(" ")[0]
        path, _, anchor = where.partition("#")
        f = REPO / path
        if not f.exists():
            bad.append(f"{r['url']}: {path} missing")
        elif anchor and f.suffix == ".md" and anchor not in _anchors(f):
            bad.append(f"{r['url']}: #{anchor} not a heading of {path}")
    assert not bad, "\n".join(bad)


def test_mechanisms_md_has_the_current_table():
    table = subprocess.run([sys.executable, str(BENCH / "summarize.py"), "--markdown"], capture_output=True,
                           text=True, check=True).stdout
    assert table.strip() in (BENCH / "MECHANISMS.md").read_text()


def test_summarize_rejects_a_bad_header(tmp_path):
    bad = tmp_path / "threads.tsv"
    bad.write_text("url\trepo\n")
    try:
        summarize.load(bad)
    except ValueError as e:
        assert "header" in str(e)
    else:
        raise AssertionError("a malformed ledger was accepted")

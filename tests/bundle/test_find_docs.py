"""scripts/find_docs.py and its engine scripts/_docsearch.py: sections, ranges, ranking, bad input.

Run as a subprocess (as an agent runs it) on the real bundle and on a small bundle written here, where
each behaviour (fenced headings, window cuts, skipped contents lists, verbatim bonus) is forced.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "find_docs.py"
sys.path.insert(0, str(REPO / "scripts"))
import _docsearch  # noqa: E402


def run(*args, root=None):
    extra = ["--root", str(root)] if root else []
    return subprocess.run([sys.executable, str(SCRIPT), *args, *extra], capture_output=True, text=True, timeout=60)


def test_help_has_examples_and_exit_codes():
    r = run("--help")
    assert r.returncode == 0
    assert "examples:" in r.stdout and "exit codes:" in r.stdout and "PATH:FIRST-LAST" in r.stdout


@pytest.mark.parametrize("args, msg", [
    ([], "give the words"),
    (["ddp", "--limit", "0"], "--limit must be 1 or more"),
    (["ddp", "--sub-skill", "nope"], "no sub-skill 'nope'"),
])
def test_bad_input_is_one_line_and_exit_2(args, msg):
    r = run(*args)
    assert r.returncode == 2 and r.stdout == ""
    assert msg in r.stderr and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_no_match_exits_1():
    r = run("qqzxv", "wqxzz")
    assert r.returncode == 1 and r.stdout == "" and "no section matches" in r.stderr


def test_every_hit_range_is_the_files_own_lines_and_at_most_a_window():
    r = run("NCCL", "timeout", "watchdog", "--limit", "8", "--output", "json", "--show")
    assert r.returncode == 0
    hits = json.loads(r.stdout)["hits"]
    assert len(hits) == 8
    for k, h in enumerate(hits):
        lines = (REPO / h["path"]).read_text(encoding="utf-8").splitlines()
        assert 1 <= h["first_line"] <= h["last_line"] <= len(lines)
        assert h["last_line"] - h["first_line"] < _docsearch.WINDOW
        span = lines[h["first_line"] - 1:h["last_line"]]
        assert sum(len(x) + 1 for x in span) <= _docsearch.WINDOW_CHARS or len(span) == 1
        assert h["headings"] and h["headings"][-1].lower() != "contents"
        if k == 0:
            assert h["text"] == "\n".join(lines[h["first_line"] - 1:h["last_line"]])
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)


def test_sub_skill_filter_keeps_to_that_sub_skill():
    r = run("checkpoint", "resume", "--sub-skill", "checkpointing-and-tracking", "--output", "json")
    hits = json.loads(r.stdout)["hits"]
    assert hits and all(h["path"].startswith("sub-skills/checkpointing-and-tracking/") for h in hits)


def test_text_output_names_the_range_and_the_heading_trail():
    r = run("Grad strides do not match bucket view strides", "--limit", "1")
    first = r.stdout.splitlines()[0]
    assert first.startswith("1. sub-skills/torch-distributed/references/ddp.md:")
    assert "Grad strides do not match bucket view strides" in first


def make_bundle(tmp_path: Path) -> Path:
    root = tmp_path / "b"
    (root / "sub-skills" / "one" / "references").mkdir(parents=True)
    (root / "SKILL.md").write_text("# Router\n\nRoutes to one.\n")
    (root / "sub-skills" / "one" / "SKILL.md").write_text("# One\n\nOpen the references.\n")
    body = ["# Topic", "", "## Contents", "- [Alpha](#alpha)", "- [Long](#long)", "",
            "## Alpha", "gizmo flange explained here.", "```", "# not a heading: gizmo in a fence", "```", "",
            "## Long"]
    for para in range(8):                                 # 8 paragraphs of 15 lines, blank line between
        body += [f"filler line {para}-{i} sprocket" for i in range(15)] + [""]
    body += ["## Provenance", "gizmo flange gizmo flange evidence trail"]
    (root / "sub-skills" / "one" / "references" / "topic.md").write_text("\n".join(body) + "\n")
    return root


def test_sections_fences_windows_and_skipped_titles(tmp_path):
    root = make_bundle(tmp_path)
    secs = _docsearch.sections(root / "sub-skills/one/references/topic.md", "sub-skills/one/references/topic.md")
    titles = [s.trail[-1] for s in secs]
    assert "Contents" not in titles and "Provenance" not in titles
    alpha = [s for s in secs if s.trail[-1] == "Alpha"]
    assert len(alpha) == 1 and "# not a heading" in alpha[0].text      # the fenced line stayed inside
    long = [s for s in secs if s.trail == ["Topic", "Long"]]
    assert len(long) >= 3                                              # 129 lines cut into windows
    assert all(s.end - s.start < _docsearch.WINDOW for s in long)
    assert all(s.start == long[0].start or not secs_line(root, s.start - 1).strip() for s in long)
    assert long[0].start < long[1].start and long[-1].end == long[0].start + 8 * 16


def test_windows_cut_long_lines_by_characters_and_keep_an_overlong_line_whole():
    row = "| " + "x" * 700 + " |"                   # a table row of ~700 characters
    lines = [row] * 12 + ["", "y" * (_docsearch.WINDOW_CHARS + 50), "tail"]
    wins = list(_docsearch._windows(lines, 1, len(lines)))
    assert wins[0] == (1, _docsearch.WINDOW_CHARS // (len(row) + 1))  # rows up to the character cap
    assert [a for a, _ in wins] == sorted({a for a, _ in wins}) and wins[-1][1] == len(lines)
    assert all(b2 == a1 - 1 for (_, b2), (a1, _) in zip(wins, wins[1:]))     # no gap, no overlap
    big = len(lines) - 1                            # the over-long line is a window of its own
    assert (big, big) in wins
    for a, b in wins:
        assert sum(len(x) + 1 for x in lines[a - 1:b]) <= _docsearch.WINDOW_CHARS or a == b


def secs_line(root, n):
    return (root / "sub-skills/one/references/topic.md").read_text().splitlines()[n - 1]


def test_identifier_parts_and_digit_joins_are_tokens():
    toks = _docsearch.tokens("ZeRO-3 zero_optimization.stage NCCL_SOCKET_IFNAME")
    assert {"zero-3", "zero3", "zero_optimization.stage", "optimization", "stage", "nccl_socket_ifname",
            "socket", "ifname"} <= set(toks)


def test_verbatim_query_doubles_the_score(tmp_path):
    root = make_bundle(tmp_path)
    idx = _docsearch.Index(root)
    (sc_words, s1), = idx.search("explained flange gizmo here", 1)
    (sc_phrase, s2), = idx.search("gizmo flange explained here", 1)
    assert s1.trail[-1] == s2.trail[-1] == "Alpha"
    assert sc_phrase == pytest.approx(2 * sc_words)


def test_runs_on_a_small_bundle_given_by_root(tmp_path):
    root = make_bundle(tmp_path)
    r = run("sprocket", "--limit", "2", root=root)
    assert r.returncode == 0
    assert r.stdout.startswith("1. sub-skills/one/references/topic.md:")

"""benchmarks/answer_eval/grade.py on a tiny fixture: per-area held-out N/M, points, misleading, median tokens.

The fixture question set is written to tmp_path; only the structure check below reads the real held-out
set, through the script, and asserts counts only.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
GRADE = REPO / "benchmarks" / "answer_eval" / "grade.py"

QUESTIONS = {"questions": [
    {"id": "a-1", "area": "alpha", "question": "q?", "source": ["https://example.invalid/1"],
     "ground_truth": "gt", "must_mention": ["p1", "p2", "p3"], "misleading_if": ["m"], "verified_against": ["v"]},
    {"id": "a-2", "area": "alpha", "question": "q?", "source": ["https://example.invalid/2"],
     "ground_truth": "gt", "must_mention": ["p1", "p2"], "misleading_if": ["m"], "verified_against": ["v"]},
    {"id": "b-1", "area": "beta", "question": "q?", "source": ["https://example.invalid/3"],
     "ground_truth": "gt", "must_mention": ["p1", "p2"], "misleading_if": ["m"], "verified_against": ["v"]},
]}
ANSWERS = {
    "a-1": {"answer": "x", "files_opened": ["SKILL.md"], "tokens_read": 100},
    "a-2": {"answer": "y", "files_opened": ["SKILL.md"], "tokens_read": 300},
    "b-1": {"answer": "z", "files_opened": [], "tokens_read": 200},
}
GRADES = {
    "a-1": {"points": [True, True, True], "misleading": False},   # passes: 3/3 points
    "a-2": {"points": [True, False], "misleading": False},        # fails: 1/2 points
    "b-1": {"points": [True, True], "misleading": True},          # fails: misleading -> 0 points
}


def run(*args, cwd=None):
    return subprocess.run([sys.executable, str(GRADE), *map(str, args)], capture_output=True, text=True,
                          timeout=60, cwd=cwd)


def write(tmp: Path, name: str, data, as_json=False) -> Path:
    p = tmp / name
    p.write_text(json.dumps(data) if as_json else yaml.safe_dump(data), encoding="utf-8")
    return p


def fixture(tmp: Path, grades=GRADES, as_json=False):
    ext = "json" if as_json else "yaml"
    return (write(tmp, f"questions.{ext}", QUESTIONS, as_json), write(tmp, f"answers.{ext}", ANSWERS, as_json),
            write(tmp, f"grades.{ext}", grades, as_json))


def test_help_documents_definition_examples_and_exit_codes():
    r = run("--help")
    assert r.returncode == 0, r.stderr
    for needle in ("question-based", "points-based", "examples:", "exit codes:", "misleading"):
        assert needle in r.stdout


def test_text_report_per_area(tmp_path):
    q, a, g = fixture(tmp_path)
    r = run(a, g, "--questions", q)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        "alpha: held-out 1/2 (points 4/5), misleading 0",
        "beta: held-out 0/1 (points 0/2), misleading 1",
        "total: held-out 1/3 (33.3%), points 4/7 (57.1%), misleading 1, ungraded 0",
        "median tokens read: 200 (3 answers)",
    ]
    assert r.stderr == ""


def test_json_report_and_json_inputs(tmp_path):
    q, a, g = fixture(tmp_path, as_json=True)
    r = run(a, g, "--questions", q, "--output", "json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["total"] == {"area": "total", "questions": 3, "passed": 1, "points": 4, "points_total": 7,
                             "misleading": 1, "ungraded": 0}
    assert [(x["area"], x["passed"], x["questions"]) for x in data["areas"]] == [("alpha", 1, 2), ("beta", 0, 1)]
    assert data["median_tokens_read"] == 200


def test_check_fails_below_target_or_on_misleading(tmp_path):
    q, a, g = fixture(tmp_path)
    r = run(a, g, "--questions", q, "--check", "--target", "30")
    assert r.returncode == 1                       # 33.3% >= 30% but one answer is misleading
    assert "1 misleading" in r.stderr
    clean = dict(GRADES, **{"b-1": {"points": [True, True], "misleading": False}})
    q, a, g = fixture(tmp_path, grades=clean)
    assert run(a, g, "--questions", q, "--check", "--target", "60").returncode == 0    # 2/3 = 66.7%
    r = run(a, g, "--questions", q, "--check", "--target", "95")
    assert r.returncode == 1 and "below 95%" in r.stderr


def test_ungraded_question_counts_as_failed(tmp_path):
    q, a, g = fixture(tmp_path, grades={k: v for k, v in GRADES.items() if k != "a-1"})
    r = run(a, g, "--questions", q)
    assert r.returncode == 0
    assert "alpha: held-out 0/2 (points 1/5), misleading 0" in r.stdout
    assert "a-1" in r.stderr and "count as failed" in r.stderr


def test_question_dropped_after_answers_is_not_scored(tmp_path):
    qs = {"questions": [dict(q, dropped_after_answers="ground truth shown wrong") if q["id"] == "a-2" else q
                        for q in QUESTIONS["questions"]]}
    _, a, g = fixture(tmp_path)
    q = write(tmp_path, "questions_dropped.yaml", qs)
    r = run(a, g, "--questions", q)
    assert r.returncode == 0, r.stderr
    assert "alpha: held-out 1/1 (points 3/3), misleading 0" in r.stdout
    assert "total: held-out 1/2 " in r.stdout
    assert "not scored (dropped_after_answers): a-2" in r.stdout


def test_bad_inputs_give_one_line_error_and_exit_2(tmp_path):
    q, a, g = fixture(tmp_path)
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text("a-1: {points: [true,\n", encoding="utf-8")
    cases = {
        "malformed": (a, bad_yaml),
        "point count": (a, write(tmp_path, "g2.yaml", dict(GRADES, **{"a-2": {"points": [True], "misleading": False}}))),
        "unknown id": (a, write(tmp_path, "g3.yaml", dict(GRADES, **{"zz-9": {"points": [True], "misleading": False}}))),
        "not bool": (a, write(tmp_path, "g4.yaml", dict(GRADES, **{"a-2": {"points": [True, False], "misleading": "no"}}))),
        "tokens": (write(tmp_path, "a2.yaml", dict(ANSWERS, **{"a-1": {"answer": "x", "tokens_read": -1}})), g),
        "missing file": (a, tmp_path / "absent.yaml"),
        "not a mapping": (a, write(tmp_path, "g5.yaml", ["a-1"])),
    }
    for name, (ans, grd) in cases.items():
        r = run(ans, grd, "--questions", q)
        assert r.returncode == 2, (name, r.stdout, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("grade.py: error:"), (name, r.stderr)
        assert "Traceback" not in r.stderr and r.stdout == "", name


def test_missing_positional_arguments_is_usage_error():
    for args in ((), ("--output", "xml")):
        r = run(*args)
        assert r.returncode == 2, args
        assert len(r.stderr.strip().splitlines()) == 1 and r.stderr.startswith("grade.py: error:"), r.stderr
    assert "ANSWERS and GRADES are required" in run().stderr


def test_held_out_set_structure_is_valid():
    r = run("--validate-questions", "--output", "json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["questions"] >= 60
    assert len(data["areas"]) >= 8 and all(n >= 1 for n in data["areas"].values())


def test_every_committed_set_is_valid():
    """Each set's questions.yaml (sets 2 onward) passes the same structural check as the default set:
    the figure of record is often a later set, and a malformed one would only fail at grading time."""
    sets = sorted(Path(__file__).resolve().parents[2].glob("benchmarks/answer_eval/set*/questions.yaml"))
    assert len(sets) >= 13, sets
    for path in sets:
        r = run("--validate-questions", "--questions", str(path), "--output", "json")
        assert r.returncode == 0, (path, r.stderr)
        assert json.loads(r.stdout)["questions"] >= 1, path

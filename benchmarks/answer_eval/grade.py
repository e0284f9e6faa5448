#!/usr/bin/env python3
"""Score graded answers to the held-out answer eval (issue 21 item 3).

Standard library + PyYAML. Reads files only; never prompts. Run with --help for the grading definition.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

try:
    import yaml
except ImportError:  # pragma: no cover - exercised only without PyYAML
    yaml = None

EXIT_OK, EXIT_BELOW_TARGET, EXIT_INPUT = 0, 1, 2
HERE = Path(__file__).resolve().parent
DEFAULT_QUESTIONS = HERE / "questions.yaml"
QUESTION_FIELDS = ("id", "area", "question", "source", "ground_truth", "must_mention", "misleading_if",
                   "verified_against")

DESCRIPTION = """\
Score graded answers to the held-out answer eval and print per-area figures.

Inputs (YAML or JSON; a top-level "answers:" / "grades:" wrapper is optional):
  ANSWERS  id -> {answer: str, files_opened: [str, ...], tokens_read: int}
  GRADES   id -> {points: [true|false per must_mention point, in order], misleading: true|false}

Definitions (see README.md here for the protocol):
  question-based  a question passes when every must_mention point is stated and the answer is not
                  misleading; per area "held-out N/M" = passing / questions in that area.
  points-based    stated points / all must_mention points; a misleading answer scores 0 points.
  misleading      number of answers graded misleading.
  Questions with no grade count as failed (0 points) and are listed on stderr.
  median tokens   median of tokens_read over the answers given.
"""

EPILOG = """\
examples:
  python3 benchmarks/answer_eval/grade.py answers.yaml grades.yaml
  python3 benchmarks/answer_eval/grade.py answers.json grades.json --output json
  python3 benchmarks/answer_eval/grade.py answers.yaml grades.yaml --check --target 95
  python3 benchmarks/answer_eval/grade.py --validate-questions

exit codes:
  0  report printed (and, with --check, target met with 0 misleading)
  1  --check given and the question-based total is below --target or an answer is misleading
  2  usage error or unreadable/malformed input (one-line message on stderr)
"""


class InputError(Exception):
    """Bad input file; reported as one line, exit code 2."""


@dataclass
class AreaScore:
    area: str
    questions: int = 0
    passed: int = 0
    points: int = 0
    points_total: int = 0
    misleading: int = 0
    ungraded: int = 0

    def line(self) -> str:
        return (f"{self.area}: held-out {self.passed}/{self.questions} "
                f"(points {self.points}/{self.points_total}), misleading {self.misleading}")


@dataclass
class Report:
    areas: list = field(default_factory=list)
    total: AreaScore = field(default_factory=lambda: AreaScore("total"))
    median_tokens_read: float | None = None
    answers_with_tokens: int = 0
    ungraded_ids: list = field(default_factory=list)
    dropped_ids: list = field(default_factory=list)


def _load(path: Path):
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read {path}: {exc.__class__.__name__}: {exc}") from None
    try:
        if path.suffix.lower() == ".json":
            return json.loads(text)
        if yaml is None:
            raise InputError("PyYAML is required to read YAML files (pip install pyyaml)")
        return yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError if yaml else ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else exc.__class__.__name__
        raise InputError(f"{path}: not valid {'JSON' if path.suffix.lower() == '.json' else 'YAML'}: "
                         f"{first}") from None


def _unwrap(data, key: str, path: Path) -> dict:
    if isinstance(data, dict) and set(data) == {key}:
        data = data[key]
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a mapping of question id -> entry, got {type(data).__name__}")
    return data


def load_questions(path: Path) -> list:
    data = _load(path)
    items = data.get("questions") if isinstance(data, dict) else data
    if not isinstance(items, list) or not items:
        raise InputError(f"{path}: expected a non-empty 'questions:' list")
    seen = set()
    for i, q in enumerate(items):
        if not isinstance(q, dict):
            raise InputError(f"{path}: question #{i + 1} is not a mapping")
        missing = [k for k in QUESTION_FIELDS if k not in q]
        if missing:
            raise InputError(f"{path}: question {q.get('id', '#' + str(i + 1))} lacks {', '.join(missing)}")
        qid = q["id"]
        if not isinstance(qid, str) or not qid:
            raise InputError(f"{path}: question #{i + 1} has a non-string id")
        if qid in seen:
            raise InputError(f"{path}: duplicate question id {qid}")
        seen.add(qid)
        mm = q["must_mention"]
        if not isinstance(mm, list) or not 2 <= len(mm) <= 4 or not all(isinstance(p, str) and p for p in mm):
            raise InputError(f"{path}: question {qid}: must_mention must be a list of 2-4 non-empty strings")
        if not isinstance(q["area"], str) or not q["area"]:
            raise InputError(f"{path}: question {qid}: area must be a non-empty string")
    return items


def load_answers(path: Path, known: set) -> dict:
    answers = _unwrap(_load(path), "answers", path)
    for qid, entry in answers.items():
        qid = str(qid)
        if qid not in known:
            raise InputError(f"{path}: unknown question id {qid}")
        if not isinstance(entry, dict):
            raise InputError(f"{path}: answer {qid} must be a mapping with answer/files_opened/tokens_read")
        tokens = entry.get("tokens_read")
        if tokens is not None and (isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0):
            raise InputError(f"{path}: answer {qid}: tokens_read must be a non-negative integer")
        files = entry.get("files_opened", [])
        if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
            raise InputError(f"{path}: answer {qid}: files_opened must be a list of strings")
        if not isinstance(entry.get("answer", ""), str):
            raise InputError(f"{path}: answer {qid}: answer must be a string")
    return {str(k): v for k, v in answers.items()}


def load_grades(path: Path, questions: dict) -> dict:
    grades = _unwrap(_load(path), "grades", path)
    for qid, entry in grades.items():
        qid = str(qid)
        if qid not in questions:
            raise InputError(f"{path}: unknown question id {qid}")
        if not isinstance(entry, dict):
            raise InputError(f"{path}: grade {qid} must be a mapping with points and misleading")
        points = entry.get("points")
        want = len(questions[qid]["must_mention"])
        if not isinstance(points, list) or not all(isinstance(p, bool) for p in points):
            raise InputError(f"{path}: grade {qid}: points must be a list of true/false")
        if len(points) != want:
            raise InputError(f"{path}: grade {qid}: {len(points)} points given, question has {want}")
        if not isinstance(entry.get("misleading"), bool):
            raise InputError(f"{path}: grade {qid}: misleading must be true or false")
    return {str(k): v for k, v in grades.items()}


def score(questions: list, answers: dict, grades: dict) -> Report:
    report = Report()
    by_area: dict = {}
    for q in questions:
        if q.get("dropped_after_answers"):  # ground truth shown wrong after answering: not scored
            report.dropped_ids.append(q["id"])
            continue
        area = by_area.setdefault(q["area"], AreaScore(q["area"]))
        n_points = len(q["must_mention"])
        area.questions += 1
        area.points_total += n_points
        grade = grades.get(q["id"])
        if grade is None:
            area.ungraded += 1
            report.ungraded_ids.append(q["id"])
            continue
        if grade["misleading"]:
            area.misleading += 1
            continue
        stated = sum(1 for p in grade["points"] if p)
        area.points += stated
        if stated == n_points:
            area.passed += 1
    report.areas = [by_area[a] for a in sorted(by_area)]
    t = report.total
    for a in report.areas:
        for name in ("questions", "passed", "points", "points_total", "misleading", "ungraded"):
            setattr(t, name, getattr(t, name) + getattr(a, name))
    tokens = [a["tokens_read"] for a in answers.values() if a.get("tokens_read") is not None]
    report.answers_with_tokens = len(tokens)
    report.median_tokens_read = statistics.median(tokens) if tokens else None
    return report


def _pct(n: int, m: int) -> str:
    return f"{100.0 * n / m:.1f}%" if m else "n/a"


def render_text(report: Report) -> str:
    lines = [a.line() for a in report.areas]
    t = report.total
    lines.append(f"total: held-out {t.passed}/{t.questions} ({_pct(t.passed, t.questions)}), "
                 f"points {t.points}/{t.points_total} ({_pct(t.points, t.points_total)}), "
                 f"misleading {t.misleading}, ungraded {t.ungraded}")
    med = "n/a" if report.median_tokens_read is None else f"{report.median_tokens_read:g}"
    lines.append(f"median tokens read: {med} ({report.answers_with_tokens} answers)")
    if report.dropped_ids:
        lines.append(f"not scored (dropped_after_answers): {', '.join(report.dropped_ids)}")
    return "\n".join(lines) + "\n"


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line on stderr (exit 2), like input errors."""

    def error(self, message):
        self.exit(EXIT_INPUT, f"grade.py: error: {message} (see --help)\n")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="grade.py", description=DESCRIPTION, epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("answers", nargs="?", type=Path, help="answers file (YAML or JSON)")
    p.add_argument("grades", nargs="?", type=Path, help="per-point grades file (YAML or JSON)")
    p.add_argument("--questions", type=Path, default=DEFAULT_QUESTIONS,
                   help="question set (default: questions.yaml beside this script)")
    p.add_argument("--output", choices=("text", "json"), default="text", help="stdout format (default text)")
    p.add_argument("--check", action="store_true",
                   help="exit 1 when the question-based total is below --target or any answer is misleading")
    p.add_argument("--target", type=float, default=95.0, help="percentage used by --check (default 95)")
    p.add_argument("--validate-questions", action="store_true",
                   help="only check the question file's structure and print the per-area counts")
    return p


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        questions = load_questions(args.questions)
        if args.validate_questions:
            counts: dict = {}
            for q in questions:
                counts[q["area"]] = counts.get(q["area"], 0) + 1
            if args.output == "json":
                print(json.dumps({"questions": len(questions), "areas": counts}, indent=2, sort_keys=True))
            else:
                for area in sorted(counts):
                    print(f"{area}: {counts[area]}")
                print(f"total: {len(questions)}")
            return EXIT_OK
        if args.answers is None or args.grades is None:
            parser.error("ANSWERS and GRADES are required unless --validate-questions is given")
        if not 0 <= args.target <= 100:
            parser.error("--target must be between 0 and 100")
        by_id = {q["id"]: q for q in questions}
        answers = load_answers(args.answers, set(by_id))
        grades = load_grades(args.grades, by_id)
    except InputError as exc:
        print(f"grade.py: error: {exc}", file=sys.stderr)
        return EXIT_INPUT
    report = score(questions, answers, grades)
    if report.ungraded_ids:
        print(f"grade.py: {len(report.ungraded_ids)} question(s) without a grade count as failed: "
              f"{', '.join(report.ungraded_ids)}", file=sys.stderr)
    if args.output == "json":
        payload = asdict(report)
        print(json.dumps(payload, indent=2, sort_keys=True))
    else:
        sys.stdout.write(render_text(report))
    if args.check:
        t = report.total
        rate = 100.0 * t.passed / t.questions if t.questions else 0.0
        reasons = []
        if rate < args.target:
            reasons.append(f"held-out {t.passed}/{t.questions} ({rate:.1f}%) is below {args.target:g}%")
        if t.misleading:
            reasons.append(f"{t.misleading} misleading answer(s)")
        if reasons:
            print(f"grade.py: check failed: {'; '.join(reasons)}", file=sys.stderr)
            return EXIT_BELOW_TARGET
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())

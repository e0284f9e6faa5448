"""benchmarks/reading_cost.py measures what answering agents read; it must run on the recorded
answers and refuse bad input with one line and exit 2 (in-process, well under a second)."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("reading_cost", REPO / "benchmarks" / "reading_cost.py")
rc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(rc)


def test_measures_the_router_every_skill_and_the_references(capsys):
    assert rc.main(["--top", "5", "--output", "json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["answers"] >= 300 and len(res["references"]) == 5
    router = res["skill_md"]["SKILL.md"]
    assert router["opened"] == res["answers"]  # every answer starts at the router
    assert router["tokens"] == len((REPO / "SKILL.md").read_text(encoding="utf-8")) // 4
    assert all(r["opened"] >= res["references"][-1]["opened"] for r in res["references"])


def test_bad_input_is_one_line_and_exit_2(capsys):
    assert rc.main(["--run", "no-such-run"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "no-such-run" in err
    assert rc.main(["--top", "0"]) == 2

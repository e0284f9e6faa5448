"""Integrity of the real-log evaluation set: the dev part (tests/failure_triage/real_logs/) and
the held-out test part (tests/failure_triage/real_logs_test/), each with its labels.yaml.

The labels are the ground truth the triage script is scored on, so they must stay consistent:
every labelled file exists and is used once, the labelled root line exists and is not blank,
the expected catalog signature exists in the catalog folder and its pattern matches the
labelled line once cleaned (ANSI codes, CR and rank/host prefixes removed). The cleaning here is
deliberately independent of triage_log.py so the labels do not depend on the code they score.
The two parts share no log and no source thread, and every test-part log obeys the split rule
(odd sha256 of its file name). Triage figures are asserted on the dev part only
(test_triage_real_logs.py); nothing here runs triage_log.py.
"""
from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest
import yaml

HERE = Path(__file__).resolve().parent
REAL = HERE / "real_logs"
LABELS = REAL / "labels.yaml"
HELD_OUT = HERE / "real_logs_test"
PARTS = {"dev": REAL, "test": HELD_OUT}
CATALOG = HERE.parents[1] / "sub-skills" / "failure-triage" / "catalog"
KEYS = {"file", "source", "root_line", "root_rank", "resolution", "fix_keywords", "expected_signature"}
MIN_LOGS = 45
MIN_TEST_LOGS = 30

_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])")
_PREFIXES = (
    re.compile(r"^\[(?:rank|default)\d+\]:[ \t]?"),      # torch: [rank3]: / [default0]:
    re.compile(r"^rank\d+:[ \t]"),                         # rank3: text
    re.compile(r"^\d{1,5}:[ \t]"),                         # srun -l: 3: text
    # pdsh/deepspeed multi-node "host: " prefix; a host name has a digit, an exception name does not
    re.compile(r"^(?:localhost|[A-Za-z0-9-]*\d[A-Za-z0-9-]*(?:\.[A-Za-z0-9-]+)*):[ \t]"),
)


def clean(line: str) -> str:
    """The labelled line as a matcher sees it: no ANSI codes, no CR, no leading rank/host prefix."""
    text = _ANSI.sub("", line).replace("\r", "")
    for _ in range(3):
        for rx in _PREFIXES:
            m = rx.match(text)
            if m:
                text = text[m.end():]
                break
        else:
            break
    return text.strip()


def _labels(folder: Path = REAL) -> list[dict]:
    data = yaml.safe_load((folder / "labels.yaml").read_text(encoding="utf-8"))
    assert isinstance(data, list), f"{folder.name}/labels.yaml must be a YAML list"
    return data


def _catalog() -> dict[str, dict]:
    out: dict[str, dict] = {}
    for path in sorted(CATALOG.glob("*.yaml")):
        for entry in yaml.safe_load(path.read_text(encoding="utf-8")) or []:
            if isinstance(entry, dict) and "id" in entry:
                out[entry["id"]] = entry
    return out


LABELLED = _labels()
HELD_OUT_LABELLED = _labels(HELD_OUT)
# per-entry checks run on both parts: (folder, entry) pairs with readable ids
ALL = [(REAL, e) for e in LABELLED] + [(HELD_OUT, e) for e in HELD_OUT_LABELLED]
ALL_IDS = [f"{folder.name}/{e.get('file', f'#{n}')}" for n, (folder, e) in enumerate(ALL)]
WITH_SIG = [(f, e) for f, e in ALL if e.get("expected_signature")]
WITH_SIG_IDS = [f"{f.name}/{e['file']}" for f, e in WITH_SIG]


def _lines(entry: dict, folder: Path = REAL) -> list[str]:
    return (folder / entry["file"]).read_text(encoding="utf-8").splitlines()


def _held_out(file_name: str) -> bool:
    """The split rule of issue 20: a log whose file name has an odd sha256 belongs to the test part."""
    return int(hashlib.sha256(file_name.encode()).hexdigest(), 16) % 2 == 1


def test_clean_removes_prefixes_and_keeps_script_names():
    assert clean("\x1b[31m[rank3]:\x1b[0m RuntimeError: boom\r") == "RuntimeError: boom"
    assert clean("[default0]:ValueError: x") == "ValueError: x"
    assert clean("rank1: KeyError: y") == "KeyError: y"
    assert clean("node-12: torch.OutOfMemoryError: CUDA out of memory") == "torch.OutOfMemoryError: CUDA out of memory"
    # a script name before "error:" is not a host prefix
    assert clean("main.py: error: unrecognized arguments: --local-rank=0").startswith("main.py: error:")
    assert clean("ValueError: bad") == "ValueError: bad"


def test_enough_logs_and_every_log_is_labelled_once():
    files = [e["file"] for e in LABELLED]
    assert len(files) >= MIN_LOGS, f"only {len(files)} labelled logs"
    assert len(set(files)) == len(files), "a log is labelled twice"
    on_disk = {p.name for p in REAL.glob("*.log")}
    assert on_disk == set(files), f"unlabelled: {on_disk - set(files)}, missing: {set(files) - on_disk}"


def test_held_out_part_is_large_enough_and_labelled_once():
    files = [e["file"] for e in HELD_OUT_LABELLED]
    assert len(files) >= MIN_TEST_LOGS, f"only {len(files)} held-out logs"
    assert len(set(files)) == len(files), "a held-out log is labelled twice"
    on_disk = {p.name for p in HELD_OUT.glob("*.log")}
    assert on_disk == set(files), f"unlabelled: {on_disk - set(files)}, missing: {set(files) - on_disk}"


def test_parts_share_no_log_and_no_thread():
    assert not {e["file"] for e in LABELLED} & {e["file"] for e in HELD_OUT_LABELLED}
    assert not {e["source"] for e in LABELLED} & {e["source"] for e in HELD_OUT_LABELLED}


def test_held_out_logs_follow_the_split_rule():
    """Every test-part log has an odd file-name sha256 (the rule the split was made by)."""
    wrong = [e["file"] for e in HELD_OUT_LABELLED if not _held_out(e["file"])]
    assert not wrong, f"not held out by the split rule: {wrong}"


def test_split_rule_sends_both_ways():
    """The rule itself: known names land on each side (so the check above can fail)."""
    assert _held_out("x-1.log") is False and _held_out("x-7.log") is True


def test_logs_come_from_several_trackers():
    repos = {re.match(r"https://github\.com/([^/]+/[^/]+)/", e["source"]).group(1).lower() for e in LABELLED}
    assert len(repos) >= 15, repos


@pytest.mark.parametrize("folder,entry", ALL, ids=ALL_IDS)
def test_label_schema(folder, entry):
    assert set(entry) == KEYS, f"keys {sorted(entry)}"
    assert re.fullmatch(r"[a-z0-9][a-z0-9.-]*-\d+\.log", entry["file"]), entry["file"]
    assert re.fullmatch(r"https://github\.com/[\w.-]+/[\w.-]+/(issues|pull)/\d+", entry["source"]), entry["source"]
    number = re.search(r"/(\d+)$", entry["source"]).group(1)
    assert entry["file"].endswith(f"-{number}.log"), "file name must end in the issue number"
    assert isinstance(entry["root_line"], int) and not isinstance(entry["root_line"], bool)
    assert entry["root_rank"] is None or (isinstance(entry["root_rank"], int) and entry["root_rank"] >= 0)
    assert isinstance(entry["resolution"], str) and len(entry["resolution"]) >= 20
    kws = entry["fix_keywords"]
    assert isinstance(kws, list) and kws, "fix_keywords must be a non-empty list"
    assert all(isinstance(k, str) and k.strip() and k == k.lower() for k in kws), kws
    assert entry["expected_signature"] is None or isinstance(entry["expected_signature"], str)


@pytest.mark.parametrize("folder,entry", ALL, ids=ALL_IDS)
def test_root_line_exists_and_is_not_blank(folder, entry):
    path = folder / entry["file"]
    assert path.is_file(), f"{entry['file']} missing"
    lines = _lines(entry, folder)
    assert 1 <= entry["root_line"] <= len(lines), f"root_line {entry['root_line']} outside 1..{len(lines)}"
    assert clean(lines[entry["root_line"] - 1]), "labelled root line is blank"


@pytest.mark.parametrize("folder,entry", ALL, ids=ALL_IDS)
def test_root_line_is_not_a_traceback_frame(folder, entry):
    """The label points at the line stating the error, not at a frame or the Traceback header."""
    text = clean(_lines(entry, folder)[entry["root_line"] - 1])
    assert not re.match(r"(?:│\s*)?File \"", text), text
    assert not text.startswith("Traceback (most recent call last)"), text


@pytest.mark.parametrize("folder,entry", ALL, ids=ALL_IDS)
def test_root_rank_agrees_with_a_rank_prefix(folder, entry):
    """When the labelled line carries a [rankN]: prefix, root_rank is that N."""
    raw = _ANSI.sub("", _lines(entry, folder)[entry["root_line"] - 1])
    m = re.search(r"\[rank(\d+)\]:", raw)
    if m:
        assert entry["root_rank"] == int(m.group(1)), raw[:80]


@pytest.mark.parametrize("folder,entry", WITH_SIG, ids=WITH_SIG_IDS)
def test_expected_signature_exists_and_matches_the_labelled_line(folder, entry):
    catalog = _catalog()
    sig = entry["expected_signature"]
    assert sig in catalog, f"{sig} is not in {CATALOG.relative_to(HERE.parents[1])}"
    line = clean(_lines(entry, folder)[entry["root_line"] - 1])
    assert re.search(catalog[sig]["pattern"], line), f"{sig} pattern does not match: {line[:120]}"
    assert catalog[sig].get("role") == "root", f"{sig} is labelled as a root cause but has role {catalog[sig].get('role')}"


def test_most_logs_have_a_known_signature():
    known = sum(1 for e in LABELLED if e["expected_signature"])
    assert known >= 0.8 * len(LABELLED), f"{known}/{len(LABELLED)}"


def test_set_covers_the_failure_families():
    """The set spans the triage references (config, OOM, hangs, builds, checkpoints, numerics, ...)."""
    catalog = _catalog()
    refs = {catalog[e["expected_signature"]].get("reference", "").rsplit("/", 1)[-1]
            for e in LABELLED if e["expected_signature"] in catalog}
    wanted = {"startup-and-config.md", "out-of-memory.md", "hangs-and-timeouts.md", "build-failures.md",
              "checkpoints-and-resume.md", "numerics.md", "generation-under-sharding.md", "multi-node.md",
              "runtime-errors.md"}
    assert wanted <= refs, f"no labelled log for {sorted(wanted - refs)}"
    assert sum(1 for e in LABELLED if e["root_line"] > 1) >= len(LABELLED) // 3, "too few logs with noise before the root"

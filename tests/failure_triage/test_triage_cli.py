"""triage_log.py: the JSON contract, exit codes, log cleaning, root versus cascade, the Python API."""
from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "sub-skills" / "failure-triage" / "scripts" / "triage_log.py"
KEYS = {"line", "rank", "text", "signature", "cause", "fix", "reference", "class", "file", "file_line"}

LOAD = "ValueError: Tried to find /ckpt/step_9 but folder does not exist"
TB = [
    "Traceback (most recent call last):",
    '  File "train.py", line 10, in <module>',
    "    accelerator.load_state(args.resume)",
    '  File "/x/accelerate/accelerator.py", line 3829, in load_state',
    '    raise ValueError(f"Tried to find {input_dir} but folder does not exist")',
    LOAD,
]
CHILD = "subprocess.CalledProcessError: Command '['/usr/bin/python3', 'train.py']' returned non-zero exit status 1."
WARN = "The following values were not passed to `accelerate launch` and had defaults used instead:"


def run(args, stdin=None, timeout=120):
    return subprocess.run([sys.executable, str(SCRIPT), *args], input=stdin, capture_output=True,
                          timeout=timeout)


def run_json(text: str, *extra):
    r = run(["--output", "json", *extra, "-"], stdin=text.encode())
    assert r.returncode in (0, 1), r.stderr
    assert b"Traceback" not in r.stderr
    return r.returncode, json.loads(r.stdout)


# --------------------------------------------------------------------------- CLI contract

def test_help_has_examples_and_exit_codes():
    r = run(["--help"])
    out = r.stdout.decode()
    assert r.returncode == 0
    for s in ("examples:", "exit codes", "--output json", "--list-signatures", "0  a root cause", "2  usage"):
        assert s in out, s


@pytest.mark.parametrize("args", [[], ["--output", "xml", "x"], ["/no/such/file.log"], ["-", "-"],
                                  ["--max-bytes", "0", "-"], ["--max-line", "abc", "-"], ["--bogus"]])
def test_usage_errors_exit_2_with_one_line(args):
    r = run(args, stdin=b"")
    assert r.returncode == 2, r
    err = r.stderr.decode().strip().splitlines()
    assert err and "Traceback" not in r.stderr.decode()
    assert len(err) <= 3


def test_directory_and_unreadable_input_exit_2(tmp_path):
    assert run([str(tmp_path)]).returncode == 2
    bad = tmp_path / "bad.log"
    bad.write_text("x")
    bad.chmod(0)
    r = run([str(bad)])
    import os
    if os.geteuid() != 0:  # root reads anything
        assert r.returncode == 2 and b"cannot read" in r.stderr


def test_broken_catalog_is_a_clean_error(tmp_path):
    (tmp_path / "x.yaml").write_text("- id: a\n  pattern: '('\n")
    r = run(["--catalog", str(tmp_path), "-"], stdin=b"x")
    assert r.returncode == 2 and b"lacks" in r.stderr and b"Traceback" not in r.stderr
    (tmp_path / "x.yaml").write_text(": : :\n")
    r = run(["--catalog", str(tmp_path), "-"], stdin=b"x")
    assert r.returncode == 2 and b"cannot read" in r.stderr


def test_list_signatures_text_and_json(catalog):
    r = run(["--list-signatures"])
    assert r.returncode == 0
    assert f"{len(catalog.entries)} signatures" in r.stdout.decode()
    r = run(["--list-signatures", "--output", "json"])
    rows = json.loads(r.stdout)
    assert {x["id"] for x in rows} == {e.id for e in catalog.entries}
    assert set(rows[0]) == {"id", "role", "library", "versions", "reference"}


def test_json_shape_and_exit_0_for_a_known_root():
    rc, doc = run_json("\n".join(["starting"] + TB + [CHILD]))
    assert rc == 0
    assert set(doc) == {"root_cause", "findings"}
    root = doc["root_cause"]
    assert set(root) == KEYS
    assert root["line"] == 7 and root["text"] == LOAD and root["signature"] == "accelerate-load-state-missing-dir"
    assert root["cause"] and root["fix"] and root["reference"].startswith("sub-skills/failure-triage/references/")
    for f in doc["findings"]:
        assert set(f) == KEYS | {"role"} and f["role"] in ("root", "cascade", "warning")
    assert [(f["signature"], f["role"]) for f in doc["findings"]] == [
        ("accelerate-load-state-missing-dir", "root"), ("accelerate-launch-child-failed", "cascade")]


def test_text_output_names_root_and_secondary():
    r = run(["-"], stdin="\n".join([WARN] + TB + [CHILD]).encode())
    out = r.stdout.decode()
    assert r.returncode == 0
    assert out.startswith("ROOT CAUSE (line 7)") and "fix:" in out and "SECONDARY FINDINGS" in out
    assert "warning [accelerate-launch-defaults-used-warning]" in out
    assert "cascade [accelerate-launch-child-failed]" in out


def test_unknown_failure_points_at_the_exception_line_exit_1():
    text = "ok\nTraceback (most recent call last):\n  File \"a.py\", line 1, in <module>\n    f()\n" \
           "ZeroDivisionError: division by zero\n"
    rc, doc = run_json(text)
    assert rc == 1
    root = doc["root_cause"]
    assert root["line"] == 5 and root["signature"] is None and root["text"].startswith("ZeroDivisionError")
    assert root["cause"] and root["fix"]


def test_no_failure_is_null_exit_1():
    rc, doc = run_json("epoch 1 loss 0.3\nepoch 2 loss 0.2\n")
    assert rc == 1 and doc == {"root_cause": None, "findings": []}


def test_empty_input():
    rc, doc = run_json("")
    assert rc == 1 and doc["root_cause"] is None


def test_cascade_only_log_gives_a_root_without_signature():
    rc, doc = run_json("step 5\n" + CHILD + "\n")
    assert rc == 1
    assert doc["root_cause"]["line"] == 2 and doc["root_cause"]["signature"] is None
    assert "first failing rank" in doc["root_cause"]["fix"]


def test_several_files_are_numbered_as_one_input(tmp_path):
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    a.write_text("one\ntwo\n")
    b.write_text(LOAD + "\n")
    r = run(["--output", "json", str(a), str(b)])
    assert r.returncode == 0 and json.loads(r.stdout)["root_cause"]["line"] == 3


# --------------------------------------------------------------------------- cleaning and ordering (API)

def test_api_text_and_lines_agree(triage, catalog):
    text = "\n".join(TB)
    a = triage.triage_text(text, catalog)
    b = triage.triage_lines(TB, catalog)
    c = triage.triage_lines([x.encode() + b"\n" for x in TB], catalog)
    d = triage.triage_text(text.encode(), catalog)
    assert a == b == c == d
    assert a["root_cause"]["line"] == 6


@pytest.mark.parametrize("prefix,rank", [
    ("[rank3]:", 3), ("[rank3]: ", 3), ("[default2]:", 2), ("3: ", 3), ("[1,5]<stderr>:", 5), ("[5]<stdout>:", 5), ("(RayTrainWorker pid=12, ip=10.0.0.1) ", None),
    ("worker-1: ", None), ("localhost: ", None), ("ip-10-0-0-1.ec2.internal: ", None),
    ("worker-1: [rank7]: ", 7), ("\x1b[31m[rank4]:\x1b[0m ", 4),
])
def test_prefixes_are_removed_and_give_the_rank(triage, catalog, prefix, rank):
    res = triage.triage_text("\n".join(prefix + ln for ln in TB), catalog)
    root = res["root_cause"]
    assert root["signature"] == "accelerate-load-state-missing-dir", prefix
    assert root["text"] == LOAD and root["rank"] == rank and root["line"] == 6


def test_exception_names_are_not_taken_for_hosts(triage):
    text, rank, _ = triage.clean("RuntimeError: boom")
    assert text == "RuntimeError: boom" and rank is None
    text, _, _ = triage.clean("torch.distributed.elastic.multiprocessing.errors.ChildFailedError: x")
    assert text.startswith("torch.distributed")


def test_ansi_crlf_nul_and_invalid_utf8(catalog, triage):
    raw = ("\x1b[1;31m" + LOAD.replace("folder", "fol\x00der") + "\x1b[0m\r\n").encode()
    raw = b"\xff\xfe garbage \xc3\x28\r\n" + raw.replace(b"fol\x00der", b"fol\x00der")
    res = triage.triage_text(raw, catalog)
    assert res["root_cause"]["signature"] == "accelerate-load-state-missing-dir"
    assert res["root_cause"]["line"] == 2
    assert "\x1b" not in res["root_cause"]["text"] and "\x00" not in res["root_cause"]["text"]


def test_carriage_return_progress_bar_does_not_hide_the_error(triage, catalog):
    line = " 10%|#  | 1/10 [00:01<00:09]\r 20%|##  | 2/10 [00:02<00:08]\r" + LOAD
    res = triage.triage_text("start\n" + line + "\n", catalog)
    assert res["root_cause"]["line"] == 2 and res["root_cause"]["signature"] == "accelerate-load-state-missing-dir"


def test_rich_boxed_traceback(triage, catalog):
    box = [
        "╭───────────────────── Traceback (most recent call last) ──────────────────────╮",
        "│ /x/train.py:10 in <module>                                                   │",
        "│ ❱ 10 accelerator.load_state(args.resume)                                     │",
        '│   raise ValueError(f"Tried to find {input_dir} but folder does not exist")   │',
        "╰──────────────────────────────────────────────────────────────────────────────╯",
        LOAD,
    ]
    res = triage.triage_text("\n".join(box), catalog)
    assert res["root_cause"]["line"] == 6 and res["root_cause"]["signature"] == "accelerate-load-state-missing-dir"
    assert len([f for f in res["findings"] if f["role"] == "root"]) == 1


def test_frame_match_is_attributed_to_the_exception_line(triage, catalog):
    # the raise statement in a frame matches the pattern; the exception line carries only the class
    lines = TB[:-1] + ["ValueError"]
    res = triage.triage_text("\n".join(lines), catalog)
    assert res["root_cause"]["line"] == 6 and res["root_cause"]["signature"] == "accelerate-load-state-missing-dir"


def test_interleaved_ranks_first_failure_wins_and_later_root_matches_are_cascade(triage, catalog):
    r0 = ["[rank0]:" + x for x in TB]
    r1 = ["[rank1]:" + x for x in TB]
    inter = [r1[0], r0[0], r1[1], r0[1], r0[2], r1[2], r1[3], r1[4], r1[5], r0[3], r0[4], r0[5]]
    res = triage.triage_text("\n".join([WARN] + inter + [CHILD]), catalog)
    root = res["root_cause"]
    assert root["rank"] == 1 and root["line"] == 10
    roles = [(f["line"], f["role"]) for f in res["findings"]]
    assert (1, "warning") in roles and (10, "root") in roles and (13, "cascade") in roles


def test_multi_line_message_after_an_unknown_exception_line(triage, catalog):
    lines = ["Traceback (most recent call last):", '  File "a.py", line 1, in <module>', "ValueError:",
             "  " + LOAD.split(": ", 1)[1], "other"]
    res = triage.triage_text("\n".join(lines), catalog)
    assert res["root_cause"]["line"] == 3 and res["root_cause"]["signature"] == "accelerate-load-state-missing-dir"


def test_chained_traceback_known_link_replaces_unknown_first(triage, catalog):
    lines = ["Traceback (most recent call last):", '  File "a.py", line 1, in <module>',
             "json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)", "",
             "During handling of the above exception, another exception occurred:", "",
             "Traceback (most recent call last):", '  File "a.py", line 2, in <module>', LOAD]
    res = triage.triage_text("\n".join(lines), catalog)
    assert res["root_cause"]["line"] == 9 and res["root_cause"]["signature"] == "accelerate-load-state-missing-dir"


def test_findings_are_deduplicated_and_capped(triage, catalog):
    res = triage.triage_text("\n".join(TB + [CHILD] * 5000), catalog)
    assert len(res["findings"]) == 2
    many = "\n".join(f"Traceback (most recent call last):\nMyError{i}: x" for i in range(1000))
    res = triage.triage_text(many, catalog)
    assert len(res["findings"]) == triage.MAX_FINDINGS


def test_long_line_is_cut_in_the_report(triage, catalog):
    res = triage.triage_text(LOAD + " " + "x" * 5000, catalog)
    assert len(res["root_cause"]["text"]) <= triage.MAX_TEXT + 1


# --------------------------------------------------------------------------- no library imports

def test_script_imports_only_stdlib_and_yaml():
    mods = set()
    for path in [SCRIPT, *sorted((SCRIPT.parent / "triage").glob("*.py"))]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                mods |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                mods.add(node.module.split(".")[0])
    allowed = set(sys.stdlib_module_names) | {"yaml", "__future__", "triage", "fr_dump"}  # fr_dump.py: beside it
    assert mods <= allowed, mods - allowed
    assert not mods & {"torch", "accelerate", "deepspeed", "transformers"}


def test_running_it_loads_no_training_library():
    code = ("import runpy, sys; sys.argv=['triage_log.py','--list-signatures'];\n"
            "try:\n    runpy.run_path(%r, run_name='__main__')\nexcept SystemExit:\n    pass\n"
            "bad=[m for m in ('torch','accelerate','deepspeed','transformers') if m in sys.modules]\n"
            "sys.stderr.write('LOADED:'+','.join(bad))" % str(SCRIPT))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "LOADED:" in r.stderr and r.stderr.split("LOADED:")[1].strip() == ""


def test_rank_named_in_the_message_labels_it_without_breaking_the_traceback(triage, catalog):
    lines = ["Traceback (most recent call last):", '  File "a.py", line 1, in <module>',
             "RuntimeError: [Rank 3] something unknown went wrong", "next"]
    res = triage.triage_text("\n".join(lines), catalog)
    assert res["root_cause"]["line"] == 3 and res["root_cause"]["rank"] == 3


def test_other_processes_lines_inside_a_traceback_do_not_end_it(triage, catalog):
    lines = ["Traceback (most recent call last):", '  File "a.py", line 1, in <module>',
             "[2023-03-21 20:28:05,674] [INFO] [engine.py:21:load] Loading checkpoint",
             "using world size: 2 and model-parallel size: 1",
             '    load()', 'py", line 261, in set_device', LOAD]
    res = triage.triage_text("\n".join(lines), catalog)
    assert res["root_cause"]["line"] == 7 and res["root_cause"]["signature"] == "accelerate-load-state-missing-dir"


def test_paste_starting_inside_a_traceback(triage, catalog):
    lines = ['File "/x/accelerate/accelerator.py", line 3829, in load_state',
             '    raise ValueError(f"Tried to find {input_dir} but folder does not exist")', LOAD,
             "  0%|          | 0/6931 [00:01<?, ?it/s]"]
    res = triage.triage_text("\n".join(lines), catalog)
    assert res["root_cause"]["line"] == 3


def test_traceback_glued_to_a_progress_bar(triage, catalog):
    lines = ["Steps:   0%|          | 0/800 [00:00<?, ?it/s]Traceback (most recent call last):"] + TB[1:]
    res = triage.triage_text("\n".join(lines), catalog)
    assert res["root_cause"]["line"] == 6


def test_indented_traceback_inside_pip_output(triage, catalog):
    lines = ["  error: subprocess-exited-with-error", "  ╰─> [8 lines of output]",
             "      Traceback (most recent call last):", '        File "setup.py", line 100, in <module>',
             "          x()", "      " + LOAD, "      [end of output]",
             "  note: This error originates from a subprocess, and is likely not a problem with pip."]
    res = triage.triage_text("\n".join(lines), catalog)
    assert res["root_cause"]["line"] == 6 and res["root_cause"]["signature"] == "accelerate-load-state-missing-dir"


def test_traceback_cut_before_its_exception_line_is_named_by_its_frame(triage, catalog):
    res = triage.triage_text("\n".join(TB[:-1]), catalog)
    assert res["root_cause"]["line"] == 5 and res["root_cause"]["signature"] == "accelerate-load-state-missing-dir"

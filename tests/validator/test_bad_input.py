"""Bad input: every case gets one clear line and exit 2, or a finding - never a traceback - and the
work it does is bounded by a limit the test names (bytes read, nodes expanded, nesting depth), not by
a clock: the times live in benchmarks/bench_validator_bad_input.py. The CLI runs in-process (cli.main
with its own streams)."""
from __future__ import annotations

import io
import os

import pytest


class CountingBytes(io.BytesIO):
    """Standard input that records how many bytes the validator took from it."""

    taken = 0

    def read(self, n=-1):
        b = super().read(n)
        self.taken += len(b)
        return b

    def read1(self, n=-1):
        b = super().read1(n)
        self.taken += len(b)
        return b


def run(bv, argv, stdin_bytes=None):
    out, err = io.StringIO(), io.StringIO()
    stdin = raw = None
    if stdin_bytes is not None:
        raw = CountingBytes(stdin_bytes)
        stdin = io.TextIOWrapper(raw, encoding="utf-8", errors="surrogateescape")
    rc = bv.cli.main(argv, stdin=stdin, stdout=out, stderr=err)
    return rc, out.getvalue(), err.getvalue(), raw


def write(tmp_path, name, data):
    p = tmp_path / name
    p.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    return str(p)


CASES = {
    "malformed-yaml": ("bad.yaml", "distributed_type: [MULTI_GPU\nnum_processes: 2\n", "invalid YAML"),
    "malformed-json": ("bad.json", '{"distributed_type": "NO", "num_processes": }', ""),
    "empty": ("empty.yaml", "", "empty"),
    "whitespace-only": ("blank.yaml", "   \n# only a comment\n", "empty"),
    "list-top-level": ("list.yaml", "- distributed_type: NO\n- num_processes: 1\n", "list"),
    "scalar-top-level": ("scalar.yaml", "MULTI_GPU\n", "scalar"),
    "json-list-top-level": ("list.json", "[1, 2]", ""),
    "binary": ("model.yaml", b"\x00\x01\x02PK\x03\x04" + bytes(range(256)), "binary"),
    "non-utf8": ("latin1.yaml", "distributed_type: 'NO'\nname: caf\xe9\n".encode("latin-1"), "UTF-8"),
    "two-documents": ("two.yaml", "distributed_type: 'NO'\n---\nnum_processes: 1\n", "document"),
    "mapping-as-key": ("key.yaml", "? {a: 1}\n: x\n", "key"),
    "undefined-alias": ("alias.yaml", "a: *nothing\n", "alias"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_unreadable_input_exits_2_with_one_line(case, bv, tmp_path):
    name, data, needle = CASES[case]
    rc, out, err, _r = run(bv, [write(tmp_path, name, data)])
    assert rc == 2, (case, rc, out, err)
    lines = [x for x in err.splitlines() if x.strip() and "error(s)" not in x]
    assert len(lines) == 1, err
    assert "Traceback" not in err + out
    assert needle.lower() in lines[0].lower(), lines[0]


def test_missing_file_and_directory(bv, tmp_path):
    rc, _o, err, _t = run(bv, [str(tmp_path / "nope.yaml")])
    assert rc == 2 and "no such file" in err
    rc, _o, err, _t = run(bv, [str(tmp_path)])
    assert rc == 2 and "directory" in err


def test_50_mb_file_refused_quickly(bv, tmp_path):
    p = tmp_path / "huge.yaml"
    with open(p, "wb") as f:
        f.write(b"distributed_type: 'NO'\n")
        f.write(b"# " + b"x" * (50 * 1024 * 1024) + b"\n")
    rc, _o, err, _r = run(bv, [str(p)])
    # refused from its size on disk, before a byte is read: the message gives the file's size
    assert rc == 2 and "file is 50.0 MiB, larger than the" in err and "limit" in err, (rc, err)


def test_50_mb_stdin_refused(bv):
    rc, _o, err, raw = run(bv, ["-"], stdin_bytes=b"a: " + b"x" * (50 * 1024 * 1024))
    assert rc == 2 and "limit" in err, err
    # the stream is read only to one byte past the limit (plus one buffer), not to its end
    limit = bv.core.MAX_INPUT_BYTES
    assert limit < raw.taken <= limit + 1 + io.DEFAULT_BUFFER_SIZE, (raw.taken, limit)


def test_alias_bomb_bounded(bv, tmp_path):
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, 10):
        refs = ", ".join([f"*a{i - 1}"] * 9)
        lines.append(f"a{i}: &a{i} [{refs}]")
    rc, _o, err, _r = run(bv, [write(tmp_path, "bomb.yaml", "\n".join(lines) + "\n")])
    # 9**10 nodes if expanded; expansion stops at the node budget
    assert rc == 2 and f"more than {bv.core.YAML_MAX_NODES} nodes after alias expansion" in err, err


@pytest.mark.parametrize("form", ["flow-seq", "flow-map", "block", "json"])
def test_10000_deep_nesting(bv, tmp_path, form):
    n = 10_000
    if form == "flow-seq":
        text, name = "a: " + "[" * n + "]" * n + "\n", "deep.yaml"
    elif form == "flow-map":
        text, name = "a: " + "{a: " * n + "1" + "}" * n + "\n", "deep.yaml"
    elif form == "block":  # indentation grows quadratically: 1,500 levels stay under the size limit
        n = 1_500
        text, name = "".join(" " * i + f"k{i}:\n" for i in range(n)) + " " * n + "v: 1\n", "deep.yaml"
    else:
        text, name = '{"a": ' + "[" * n + "]" * n + "}", "deep.json"
    rc, out, err, _r = run(bv, [write(tmp_path, name, text)])
    assert rc == 2 and ("deep" in err or "nesting" in err), err
    assert "Traceback" not in err + out


def test_duplicate_keys_name_both_lines(bv, tmp_path):
    text = "distributed_type: MULTI_GPU\nnum_processes: 2\nmixed_precision: bf16\nnum_processes: 8\n"
    rc, out, _e, _t = run(bv, [write(tmp_path, "dup.yaml", text)])
    assert rc == 1
    line = next(x for x in out.splitlines() if "yaml-duplicate-key" in x)
    assert line.startswith(str(tmp_path / "dup.yaml") + ":4:1: error yaml-duplicate-key")
    assert "line 2" in line and "line 4" in line


def test_nested_duplicate_keys(bv, tmp_path):
    text = "distributed_type: FSDP\nnum_processes: 2\nfsdp_config:\n  fsdp_version: 1\n  fsdp_version: 2\n"
    rc, out, _e, _t = run(bv, [write(tmp_path, "dup2.yaml", text)])
    assert rc == 1 and ":5:3: error yaml-duplicate-key" in out and "line 4" in out


@pytest.mark.parametrize("tag", [
    "!!python/object/apply:builtins.open",
    "!!python/object/new:builtins.open",
    "!!python/name:os.system",
    "!!python/module:os",
    "!custom",
])
def test_object_tags_are_reported_never_constructed(bv, tmp_path, tag):
    marker = tmp_path / "constructed.txt"
    text = f"distributed_type: 'NO'\nnum_processes: 1\nx: {tag} ['{marker}', 'w']\n"
    rc, out, err, _t = run(bv, [write(tmp_path, "tag.yaml", text)])
    assert not marker.exists(), "a tag was constructed"
    assert rc == 1 and "yaml-unsafe-tag" in out and "Traceback" not in err


def test_tag_on_mapping_and_scalar(bv, tmp_path):
    text = "distributed_type: 'NO'\nnum_processes: !!int 'x'\nfsdp_config: !!python/object:os.PathLike {}\n"
    rc, out, _e, _t = run(bv, [write(tmp_path, "tags.yaml", text)])
    assert rc == 1 and out.count("yaml-unsafe-tag") == 2


def test_usage_errors_exit_2(bv):
    assert run(bv, [])[0] == 2
    assert run(bv, ["--format", "toml", "x"])[0] == 2
    assert run(bv, ["--world-size", "0", "x.json"])[0] == 2
    assert run(bv, ["-", "-"], stdin_bytes=b"")[0] == 2


def test_one_bad_file_does_not_hide_the_others(bv, tmp_path):
    good = write(tmp_path, "good.yaml", "distributed_type: MULTI_GPU\nnum_process: 2\n")
    bad = write(tmp_path, "bad.yaml", "[")
    rc, out, err, _t = run(bv, [good, bad])
    assert rc == 2 and "acc-unknown-top-level-key" in out and "bad.yaml" in err

"""sub-skills/failure-triage/references/failure-matrix.md is generated from real runs:
generate_failure_matrix.py provoked each failure in a 1-2 process gloo job (torchrun, accelerate
launch, the deepspeed launcher, a plain interpreter) and kept the logs in failure_matrix/. The page's
block must equal what render() gives from those logs; triage_log.py must classify every log as the
failure it is (EXPECTED, by class and root line); the cheapest cases run live to show the fixtures
still match the pinned torch."""
from __future__ import annotations

import json
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _repro as R  # noqa: E402
import generate_failure_matrix as gen  # noqa: E402

# case -> (triage class of the root cause, text the root line holds, rank of the root line or None)
EXPECTED = {
    "raise-torchrun": ("python-exception", "ValueError: bad batch on rank 1", 1),
    "raise-accelerate": ("python-exception", "ValueError: bad batch on rank 1", 1),
    "raise-deepspeed": ("python-exception", "ValueError: bad batch on rank 1", 1),
    "sigkill-torchrun": ("signal-kill", "failed (exitcode: -9) local_rank: 1", None),
    "sigsegv-torchrun": ("segfault", "failed (exitcode: -11) local_rank: 1", None),
    "sigkill-deepspeed": ("signal-kill", "exits with return code = -9", None),
    "timeout-gloo": ("watchdog-timeout", "Timed out waiting 3000ms for recv", 0),
    "timeout-nccl-env": ("watchdog-timeout", "Timed out waiting 3000ms for recv", 0),
    "timeout-monitored-barrier": ("c10d-error", "Rank 1 failed to pass monitoredBarrier", 0),
    # gloo without DETAIL: rank 0 finishes (exit 0), rank 1 only sees the closed connection, which
    # stands in for the launcher's root-cause block (the same rank) with its entry's cause: a peer left
    "shape-mismatch": ("python-exception", "Connection closed by peer", 1),
    "shape-mismatch-detail": ("python-exception", "Detected mismatch between collectives on ranks", 1),
    "op-mismatch": ("watchdog-timeout", "Timed out waiting 5000ms for recv", 0),
    "op-mismatch-detail": ("python-exception", "Detected mismatch between collectives on ranks", 0),
    "master-unreachable": ("c10d-store", "The client socket has timed out", None),
    "master-no-peers": ("c10d-store", "DistStoreError: Timed out after", None),
    "port-in-use": ("c10d-store", "DistNetworkError: The server socket has failed to listen", None),
    "world-size-mismatch": ("c10d-store", "DistStoreError: wait timeout after 3000ms", None),
    "init-twice": ("python-exception", "trying to initialize the default process group twice", 0),
    "no-destroy": (None, "", None),
    "ckpt-none-state-dict": ("python-exception", "'NoneType' object has no attribute 'items'", 1),
    "ckpt-mismatched-keys": (None, "", None),
    "ddp-unused": ("python-exception", "Expected to have finished reduction in the prior iteration", 1),
    "ddp-find-unused-none": (None, "", None),
    "accelerate-bad-config": ("python-exception", "'MULTI_CPUS' is not a valid DistributedType", None),
    "accelerate-missing-config": ("python-exception", "The passed configuration file", None),
}


# case -> the catalog entry its captured log reproduces (the line the catalog's matcher gives it)
REPRODUCED = {
    "sigkill-torchrun": "os-sigkill-oom-killer",
    "sigsegv-torchrun": "os-segfault",
    "timeout-gloo": "torch-gloo-timeout",
    "timeout-monitored-barrier": "torch-monitored-barrier-failed",
    "shape-mismatch": "torch-gloo-peer-connection-lost",
    "shape-mismatch-detail": "torch-collective-mismatch-detected",
    "master-unreachable": "torch-store-client-connect-timeout",
    "master-no-peers": "torch-store-clients-timeout",
    "port-in-use": "torch-store-port-in-use",
    "world-size-mismatch": "torch-store-init-wait-timeout",
    "init-twice": "torch-pg-initialized-twice",
    "ddp-unused": "torch-ddp-unused-parameters",
    "accelerate-missing-config": "accelerate-launch-config-file-missing",
    "accelerate-bad-config": "accelerate-config-enum-invalid",
}


@pytest.mark.parametrize("case,sig", [pytest.param(case, sig, marks=pytest.mark.reproduces(sig), id=case)
                                      for case, sig in REPRODUCED.items()])
def test_fixture_reproduces_its_catalog_entry(case, sig):
    R.assert_reproduced((gen.FIX / f"{case}.log").read_text(encoding="utf-8"), sig)


def _block(doc: str) -> str:
    start, end = "<!-- generated: failure matrix -->\n", "\n<!-- end generated -->"
    assert start in doc
    return doc.split(start, 1)[1].split(end, 1)[0]


def test_page_is_the_generated_one():
    assert _block(gen.DOC.read_text(encoding="utf-8")) == gen.render()


def test_every_case_has_a_fixture_and_an_expectation():
    meta = json.loads((gen.FIX / "cases.json").read_text())
    assert set(meta) == set(gen.CASES) == set(EXPECTED)
    for case in gen.CASES:
        assert (gen.FIX / f"{case}.log").stat().st_size < 20000, case


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_triage_classifies_the_log(case):
    cls, text, rank = EXPECTED[case]
    got = gen.triage(gen.FIX / f"{case}.log")
    assert (got["class"], got["rank"]) == (cls, rank), (case, got)
    assert text in (got["text"] or ""), (case, got)


def test_live_cases_match_the_fixtures():
    """Rerun the cheapest cases with the pinned packages: same launcher exit code, same exceptions
    in the same order from the same process, same triage class."""
    with ThreadPoolExecutor(max_workers=len(gen.LIVE)) as pool:
        live = dict(zip(gen.LIVE, pool.map(gen.run_case, gen.LIVE)))
    meta = json.loads((gen.FIX / "cases.json").read_text())
    for case, (rc, text) in live.items():
        fixture = (gen.FIX / f"{case}.log").read_text(encoding="utf-8")
        assert rc == meta[case], case
        assert [e[1:] for e in gen.read_log(text)["excs"]] == [e[1:] for e in gen.read_log(fixture)["excs"]], case


def _log(case):
    return (gen.FIX / f"{case}.log").read_text(encoding="utf-8")


def test_rules_stated_on_the_page():
    """The 'Rules the rows support' section, checked on the logs it is written from."""
    meta = json.loads((gen.FIX / "cases.json").read_text())
    # the launcher's summary comes after the failing rank's exception; the launcher exits 1 even for signals
    for case in ("raise-torchrun", "raise-accelerate", "sigkill-torchrun", "sigsegv-torchrun"):
        info = gen.read_log(_log(case))
        assert info["excs"][0][0] < info["summary"] and info["excs"][-1][2] == "launcher", case
        assert meta[case] == 1, case
    assert "exits with return code = 1" in _log("raise-deepspeed")
    assert gen.read_log(_log("raise-deepspeed"))["excs"][-1][1] == "RuntimeError"  # no launcher traceback
    # the deepspeed launcher passes a signal death on as sys.exit(-9): the shell sees 247
    assert "exits with return code = -9" in _log("sigkill-deepspeed") and meta["sigkill-deepspeed"] == 247
    # a rank killed by a signal prints no exception of its own
    for case, sig in (("sigkill-torchrun", "Signal 9 (SIGKILL)"), ("sigsegv-torchrun", "Signal 11 (SIGSEGV)")):
        assert [e[2] for e in gen.read_log(_log(case))["excs"]] == ["rank 0", "launcher"] and sig in _log(case)
    # NCCL-only variables change nothing on gloo
    strip = lambda case: [e[1:] for e in gen.read_log(_log(case))["excs"]]  # noqa: E731
    assert strip("timeout-gloo") == strip("timeout-nccl-env")
    # the rank that skipped the collective is SIGTERMed by torchrun after the waiting rank's timeout
    for case in ("timeout-gloo", "timeout-nccl-env"):
        assert "rank      : 1 (local_rank: 1)\n  exitcode  : -15" in _log(case), case
    # shape mismatch without DETAIL: rank 0 exits 0, only rank 1 raises; with DETAIL both name the mismatch
    assert "exitcode  : 1" in _log("shape-mismatch") and "<NO_OTHER_FAILURES>" in _log("shape-mismatch")
    assert [e[2] for e in gen.read_log(_log("shape-mismatch"))["excs"]][:1] == ["rank 1"]
    assert "Detected mismatch" not in _log("shape-mismatch") + _log("op-mismatch")
    for case in ("shape-mismatch-detail", "op-mismatch-detail"):
        assert _log(case).count("Detected mismatch between collectives on ranks") == 2, case
    # store failures are torch.distributed classes; the busy port fails in the launcher
    assert gen.read_log(_log("port-in-use"))["excs"][0][1:] == ("torch.distributed.DistNetworkError", "launcher")
    assert "EADDRINUSE" in _log("port-in-use")
    assert gen.read_log(_log("master-unreachable"))["excs"][0][1] == "torch.distributed.DistNetworkError"
    for case in ("master-no-peers", "world-size-mismatch"):
        assert gen.read_log(_log(case))["excs"][0][1] == "torch.distributed.DistStoreError", case
    # runs that end well: no destroy (gloo: no warning), DCP keys per rank (union), find_unused with none unused
    assert meta["no-destroy"] == meta["ckpt-mismatched-keys"] == meta["ddp-find-unused-none"] == 0
    assert not gen.read_log(_log("no-destroy"))["warns"] and "destroy" not in _log("no-destroy")
    assert _log("ckpt-mismatched-keys").count("saved ['a', 'b']") == 2
    assert _log("ddp-find-unused-none").count("find_unused_parameters=True was specified in DDP constructor") == 2

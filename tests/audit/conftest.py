"""Prints the ledger's counts per file (claims, backed by a run, by a cited installed source, by a
cited upstream line, by a benchmark, unbacked, found wrong) at the end of a run of tests/audit, so un-backed claims are visible, not failures."""
from __future__ import annotations

import importlib.util
from pathlib import Path


def pytest_terminal_summary(terminalreporter):
    path = Path(__file__).resolve().parent / "test_claims_ledger.py"
    spec = importlib.util.spec_from_file_location("audit_ledger_counts", path)
    mod = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(mod)
        table = mod.counts_per_file()
    except Exception as exc:  # the ledger test itself reports the broken file
        terminalreporter.write_line(f"claims ledger unreadable: {exc}")
        return
    terminalreporter.section("claims ledger")
    terminalreporter.write_line(f"{'file':40} claims  run  cited  upstream  bench  unbacked  found-wrong  GPU-run")
    total = dict.fromkeys(("claims", "test", "source", "upstream", "benchmark", "none", "found_wrong",
                           "device_run"), 0)

    def line(name, row):
        terminalreporter.write_line(f"{name:40} {row['claims']:6} {row['test']:4} {row['source']:6} "
                                    f"{row['upstream']:9} {row['benchmark']:6} {row['none']:9} "
                                    f"{row['found_wrong']:12} {row['device_run']:8}")

    for name, row in sorted(table.items()):
        for k in total:
            total[k] += row.get(k, 0)
        line(name, row)
    line("total", total)

"""--explain-rule RULE-ID (issue 21 item 4): one rule instead of the whole generated reference.

Every registered rule explains in text and JSON; the anchor it names is a heading of
references/validator-rules.md; the fix is what changes from the failing to the passing example; an
unknown id is a usage error with a suggestion. --explain (launch commands) is a different option.
"""
from __future__ import annotations

import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RULES_MD = REPO / "sub-skills" / "distributed-training-backends" / "references" / "validator-rules.md"


def test_every_rule_explains_with_its_examples_fix_and_anchor(cli, run):
    from backend_validator import core, docs
    headings = {line[4:].strip() for line in RULES_MD.read_text(encoding="utf-8").splitlines()
                if line.startswith("### ")}
    ids = sorted(core.REGISTRY)
    assert len(ids) > 190
    rc, out, err = run(["--output", "json"] + [a for i in ids for a in ("--explain-rule", i)])
    assert rc == 0 and err == ""
    infos = {r["id"]: r for r in json.loads(out)["rules"]}
    assert sorted(infos) == ids
    for rid, info in infos.items():
        r = core.REGISTRY[rid]
        assert (info["severity"], info["family"], info["source"]) == (r.severity, r.family, r.source)
        assert info["reference"] == f"references/validator-rules.md#{rid}" and rid in headings
        _, ex = docs.parse_doc(r.doc)
        if "Fails" in ex:
            assert info["fails"]["text"] == ex["Fails"][1]
        if "Fails" in ex and "Passes" in ex and ex["Fails"][1] != ex["Passes"][1]:
            assert info["fix"], rid  # the lines that change
            assert all(line[0] in "+-" for line in info["fix"])
        assert not info["description"].startswith("Oracle:"), rid


def test_text_output(run):
    rc, out, err = run(["--explain-rule", "acc-fsdp2-local-state-dict"])
    assert rc == 0 and err == ""
    assert out.startswith("acc-fsdp2-local-state-dict  (error, family accelerate)")
    assert "Fails (yaml):" in out and "Passes (yaml):" in out
    assert "-  fsdp_state_dict_type: LOCAL_STATE_DICT" in out and "+  fsdp_state_dict_type: SHARDED_STATE_DICT" in out
    assert out.rstrip().endswith("reference: references/validator-rules.md#acc-fsdp2-local-state-dict")


def test_unknown_rule_is_a_usage_error_with_a_suggestion(run):
    rc, out, err = run(["--explain-rule", "ds-auto-unfillabel"])
    assert rc == 2 and out == ""
    assert err == "validate_backend_config.py: error: no rule 'ds-auto-unfillabel' (did you mean 'ds-auto-unfillable'?)\n"
    rc, out, err = run(["--explain-rule", "nothing-like-this-at-all"])
    assert rc == 2 and "--list-rules" in err


def test_explain_for_launch_commands_is_unchanged(cli):
    opts = {o for a in cli.build_parser()._actions for o in a.option_strings}
    assert {"--explain", "--explain-rule"} <= opts


def test_the_reference_page_opens_with_the_query_and_a_short_index():
    head = RULES_MD.read_text(encoding="utf-8").split("## Contents", 1)[0]
    assert "--explain-rule RULE-ID" in head and "Families: [input](#" in head
    assert len(head.splitlines()) < 15


def test_search_lists_only_matching_rules(run):
    from backend_validator import core
    rc, out, err = run(["--search", "OFFLOAD", "--output", "json"])
    assert rc == 0 and err == ""
    ids = [r["id"] for r in json.loads(out)["rules"]]
    want = sorted((r.family, r.id) for r in core.REGISTRY.values()
                  if "offload" in "\n".join((r.id, r.summary, r.source, r.doc)).lower())
    assert [i for _, i in want] == ids and "ds-offload-ignored" in ids and len(ids) < len(core.REGISTRY) / 2
    rc, out, err = run(["--search", "no-rule-says-this-zzz"])
    assert (rc, out) == (0, "")

"""Rule modules load by family (rules/__init__.py): a check compiles only the rule modules it runs,
which is most of the start-up time without bytecode (PYTHONDONTWRITEBYTECODE=1, see
benchmarks/bench_launch.py). Each case runs in a fresh process (the registry is global); the
findings must be the same as with every rule module loaded up front."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / "sub-skills" / "distributed-training-backends" / "scripts"
EX = REPO / "sub-skills" / "distributed-training-backends" / "examples"

PROBE = r"""
import io, json, sys
sys.path.insert(0, sys.argv[1])
from backend_validator import cli
eager = sys.argv[2] == "eager"
if eager:
    cli._rules_loaded()
out = {}
for argv in json.loads(sys.argv[3]):
    o, e = io.StringIO(), io.StringIO()
    rc = cli.main(argv, stdout=o, stderr=e)
    out[json.dumps(argv)] = [rc, o.getvalue(), e.getvalue()]
mods = sorted(m.rsplit(".", 1)[-1] for m in sys.modules if m.startswith("backend_validator.rules."))
print(json.dumps({"runs": out, "modules": mods, "formats": "backend_validator.formats" in sys.modules}))
"""


def probe(mode, *argvs, cwd=REPO):
    r = subprocess.run([sys.executable, "-c", PROBE, str(SCRIPTS), mode, json.dumps([list(a) for a in argvs])],
                       capture_output=True, text=True, timeout=300, cwd=cwd)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout)


def test_a_check_loads_only_the_rule_families_it_runs():
    fsdp = probe("lazy", [str(EX / "fsdp2.yaml")])
    assert "accelerate_core" in fsdp["modules"]
    # deepspeed_input holds one parse-level (family input) rule, so a YAML check loads it
    assert not [m for m in fsdp["modules"] if m.startswith(("deepspeed_", "cross_", "launch_")) and m != "deepspeed_input"]
    assert fsdp["formats"] is False  # SARIF/GitHub writer only when asked for
    ds = probe("lazy", [str(EX / "ds-zero3.json")])
    assert "deepspeed_keys" in ds["modules"] and not [m for m in ds["modules"] if m.startswith("accelerate_")]
    assert "launch_rules" not in ds["modules"]
    # topic words: ds-zero3.json has offload_optimizer but no "optimizer" or "scheduler" block and no
    # gradient-communication key, so neither topic module is compiled for it
    assert not {"deepspeed_optim", "deepspeed_comm"} & set(ds["modules"]), ds["modules"]
    # an Accelerate config whose deepspeed_config_file names a JSON: the inline-block rules are not compiled
    # (SILENT_WHEN), an inline block compiles them
    ds_file = probe("lazy", [str(EX / "deepspeed-file.yaml")])
    assert "accelerate_deepspeed" in ds_file["modules"] and "accelerate_deepspeed_inline" not in ds_file["modules"]
    inline = probe("lazy", [str(EX / "deepspeed-zero2.yaml")])
    assert "accelerate_deepspeed_inline" in inline["modules"], inline["modules"]
    tr = probe("lazy", ["--launch-command", "torchrun --nnodes 2 --nproc-per-node 8 train.py"])
    assert tr["modules"] == ["launch_rules"], tr["modules"]


def test_lazy_and_eager_loading_give_the_same_output(tmp_path):
    (tmp_path / "c.yaml").write_text("distributed_type: DEEPSPEED\nnum_processes: 2\ndeepspeed_config:\n"
                                     "  zero_stage: 0\n  offload_optimizer_device: cpu\n")
    argvs = [[str(p)] for p in sorted(EX.iterdir())]
    argvs += [["--output", "json", *map(str, sorted(EX.iterdir()))], ["--output", "sarif", str(EX / "fsdp2.yaml")],
              ["--list-rules", "--output", "json"], [str(tmp_path / "c.yaml")],
              ["--launch-command", "accelerate launch --config_file c.yaml --num_processes 0 train.py"],
              ["--launch-command", "deepspeed --num_gpus 2 train.py --deepspeed_config missing.json"]]
    lazy = probe("lazy", *argvs, cwd=tmp_path)
    eager = probe("eager", *argvs, cwd=tmp_path)
    assert lazy["runs"] == eager["runs"]
    assert len(json.loads(lazy["runs"][json.dumps(["--list-rules", "--output", "json"])][1])["rules"]) > 190
    assert any(r[0] == 1 for r in lazy["runs"].values())  # the comparison includes findings


def test_ci_format_names_match_the_writer():
    sys.path.insert(0, str(SCRIPTS))
    from backend_validator import cli, formats
    assert cli.CI_FORMATS == formats.CHOICES


# Each names its topic only one way (the legacy top-level key, the distributed_type value, the
# mixed_precision value), with a value a rule of the topic reports.
TOPIC_ONE_WAY = [
    "distributed_type: MULTI_GPU\nnum_processes: 2\ndynamo_backend: bogus\n",
    "distributed_type: MEGATRON_LM\nnum_processes: 2\nmegatron_lm_tp_degree: x\n",
    "compute_environment: AMAZON_SAGEMAKER\ndistributed_type: 'NO'\n",
    "distributed_type: MULTI_GPU\nnum_processes: 2\nmixed_precision: fp8\nfp8_backend: bogus\n",
    "distributed_type: DEEPSPEED\nnum_processes: 2\nzero_stage: 7\n",
    "distributed_type: FSDP\nnum_processes: 2\nfsdp_version: 7\n",
    "distributed_type: FSDP\nnum_processes: 2\nparallelism_config:\n  parallelism_config_tp_size: 0\n",
]


def _docs_corpus():
    """Parsed documents: every rule's Fails/Passes examples, the shipped configs, the reviewer set,
    TOPIC_ONE_WAY."""
    import importlib.util
    sys.path.insert(0, str(SCRIPTS))
    from backend_validator import core, docs, engine
    engine.rules_loaded()
    out = []
    for r in core.REGISTRY.values():
        for label, (lang, text) in docs.parse_doc(r.doc)[1].items():
            out.append((f"{r.id} {label}", text, "x.json" if lang == "json" else "x.yaml"))
    for p in sorted(EX.iterdir()):
        out.append((p.name, p.read_text(encoding="utf-8"), p.name))
    spec = importlib.util.spec_from_file_location("reviewer_configs", REPO / "tests" / "validator" / "reviewer_configs.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out += [(cid, text, name) for cid, text, _expect, name in mod.C]
    out += [(f"one-way {i}", text, "x.yaml") for i, text in enumerate(TOPIC_ONE_WAY)]
    docs_ = []
    for name, text, fname in out:
        try:
            docs_.append((name, engine.parse_input(text, fname, None, "auto")))
        except core.InputError:
            pass
    return docs_


def test_a_topic_module_reports_nothing_on_a_document_that_does_not_mention_its_words():
    """rules/__init__.py imports a module with NEEDS = (...) only for a document that mentions one
    of the words: each rule of it must report nothing on any other document, and each of its rules'
    failing examples must mention a word (else the check would never run on it)."""
    from backend_validator import core, rules
    corpus = _docs_corpus()
    assert len(corpus) > 400
    gated = {m: w for m, w in rules._scan()[1].items() if w}
    gated.update((m, w) for m, w in rules._scan()[3].items())  # SILENT_WHEN: the same promise
    assert {"accelerate_fsdp", "accelerate_fp8", "accelerate_deepspeed", "accelerate_deepspeed_inline",
            "accelerate_multinode", "deepspeed_legacy_keys", "deepspeed_json_syntax", "accelerate_json"} <= set(gated)
    checked = skipped = 0
    for m in gated:
        mod_rules = [r for r in core.REGISTRY.values() if r.func.__module__ == f"backend_validator.rules.{m}"]
        assert mod_rules, m
        for name, doc in corpus:
            if rules.needed(m, doc):
                continue
            skipped += 1
            for r in mod_rules:
                ctx = core.Context(doc=doc, options=core.Options(cwd=str(REPO)))
                ctx._rule = r
                for _ in r.func(ctx) or ():
                    pass
                assert not ctx.findings, (m, r.id, name, ctx.findings)
                checked += 1
        for r in mod_rules:
            fails = [d for n, d in corpus if n == f"{r.id} Fails"]
            assert fails and all(rules.needed(m, d) for d in fails), (m, r.id)
    assert checked > 1000 and skipped > 100


def test_a_whole_word_need_matches_a_whole_key_or_value_only():
    """NEEDS = ("=optimizer", ...): a key or string value equal to the word (any case) loads the module;
    a key that only contains it (offload_optimizer) does not; a plain word matches any substring."""
    from backend_validator import core, rules
    doc = core.Doc
    def need(data, module="deepspeed_optim"):
        return rules.needed(module, doc(data, kind="json", name="x.json"))
    assert need({"optimizer": {"type": "AdamW"}}) and need({"Scheduler": {}})
    assert need({"zero_optimization": {"x": "optimizer"}})  # a string value equal to the word
    assert not need({"zero_optimization": {"offload_optimizer": {"device": "cpu"}}})
    assert not need({"my_optimizer": 1, "schedulers": []})
    assert need({"optimizer": {"type": "Muon"}}, "deepspeed_comm")  # plain word: a substring of a value
    assert need({"gradient_allreduce_op": "sum"}, "deepspeed_comm")
    assert not need({"zero_optimization": {"stage": 3}}, "deepspeed_comm")


def test_silent_when_skips_the_inline_rules_only_when_a_json_owns_the_settings():
    """accelerate_deepspeed_inline.py: SILENT_WHEN = "_acc_ds.ds_config_file_given" - not imported when
    DeepSpeed does not launch the config or deepspeed_config_file names a JSON; imported for a missing,
    empty, 'none' or non-string file (its rules then check the inline block)."""
    sys.path.insert(0, str(SCRIPTS))
    from backend_validator import core, rules
    assert rules._scan()[3]["accelerate_deepspeed_inline"] == ("_acc_ds", "ds_config_file_given")

    def need(block, dt="DEEPSPEED"):
        data = {"distributed_type": dt, "num_processes": 2, "deepspeed_config": block}
        return rules.needed("accelerate_deepspeed_inline", core.Doc(data, kind="yaml", name="x.yaml"))
    assert not need({"deepspeed_config_file": "ds.json", "zero_stage": 9})
    assert not need({"zero_stage": 9}, dt="FSDP")
    for block in ({"zero_stage": 9}, {"deepspeed_config_file": "", "zero_stage": 9},
                  {"deepspeed_config_file": "none"}, {"deepspeed_config_file": " "}, {"deepspeed_config_file": 3},
                  {"deepspeed_config_file": None}, "not a mapping"):
        assert need(block), block
    assert rules.needed("accelerate_deepspeed_inline", None)  # no document: load everything


def test_a_consumers_module_holds_only_rules_of_those_consumers():
    """CONSUMERS = ("deepspeed", ...): the module is not imported for a check with another consumer, which
    is exact only when each of its rules names consumers (core.run_rules skips a rule whose consumers
    exclude the check's) and all of them are among the module's."""
    sys.path.insert(0, str(SCRIPTS))
    from backend_validator import core, rules
    rules.load_all()
    gated = rules._scan()[4]
    assert gated.get("deepspeed_consumers_plain") == ("deepspeed", "transformers")
    for m, names in gated.items():
        mod_rules = [r for r in core.REGISTRY.values() if r.func.__module__ == f"backend_validator.rules.{m}"]
        assert mod_rules, m
        for r in mod_rules:
            assert r.consumers and set(r.consumers) <= set(names), (m, r.id, r.consumers)
    doc = core.Doc({"train_batch_size": 8}, kind="json", name="x.json")
    assert not rules.needed("deepspeed_consumers_plain", doc, "accelerate")
    assert not rules.needed("deepspeed_consumers_plain", doc, None)
    assert rules.needed("deepspeed_consumers_plain", doc, "deepspeed")
    assert rules.needed("deepspeed_consumers_plain", doc, "transformers")
    assert rules.needed("deepspeed_consumers_plain", None, "accelerate")  # no document: load everything
    # an Accelerate config naming a JSON: the JSON's consumer is accelerate, so the plain-DeepSpeed rules
    # are not compiled; the same JSON checked alone (consumer deepspeed) compiles them
    ds_file = probe("lazy", [str(EX / "deepspeed-file.yaml")])
    assert "deepspeed_consumers_plain" not in ds_file["modules"], ds_file["modules"]
    alone = probe("lazy", [str(EX / "ds-zero3.json"), "--consumer", "deepspeed"])
    assert "deepspeed_consumers_plain" in alone["modules"], alone["modules"]


def test_an_option_module_is_compiled_only_with_its_option():
    """OPTION = "check_imports": accelerate_imports.py (acc-missing-package) is imported only for a check
    run with --check-imports; without it its rule reports nothing on any document."""
    sys.path.insert(0, str(SCRIPTS))
    from backend_validator import core, rules
    rules.load_all()
    assert rules._scan()[5] == {"accelerate_imports": "check_imports"}
    mod_rules = [r for r in core.REGISTRY.values() if r.func.__module__ == "backend_validator.rules.accelerate_imports"]
    assert [r.id for r in mod_rules] == ["acc-missing-package"]
    for name, doc in _docs_corpus():
        ctx = core.Context(doc=doc, options=core.Options(cwd=str(REPO)))
        ctx._rule = mod_rules[0]
        for _ in mod_rules[0].func(ctx) or ():
            pass
        assert not ctx.findings and not ctx.skipped, name
    doc = core.Doc({"distributed_type": "MEGATRON_LM"}, kind="yaml", name="x.yaml")
    assert not rules.needed("accelerate_imports", doc, None, core.Options())
    assert rules.needed("accelerate_imports", doc, None, core.Options(check_imports=True))
    plain = probe("lazy", [str(EX / "deepspeed-file.yaml")])
    assert "accelerate_imports" not in plain["modules"], plain["modules"]
    checked = probe("lazy", [str(EX / "deepspeed-file.yaml"), "--check-imports"])
    assert "accelerate_imports" in checked["modules"], checked["modules"]

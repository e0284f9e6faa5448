"""Child process of tests/facts/test_generated_tables.py: regenerate the name tables from the installed
packages and compare them with the shipped file, then run the real code paths behind a handful of
entries (parsers parsing, config loaders loading, TrainingArguments constructing). Prints one JSON
object on stdout; the test asserts on it. Run with the repository's .venv python."""
from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
for k in [k for k in os.environ if k.startswith("PET_")]:
    del os.environ[k]

import generate_facts  # noqa: E402


def _by(data, section):
    return {e["n"]: e for e in data["entries"] if e["s"] == section}


def regenerate(shipped_text: str) -> dict:
    shipped = json.loads(shipped_text)
    with contextlib.redirect_stderr(io.StringIO()):
        built = generate_facts.build("", shipped)
    text = generate_facts.dumps(built)
    out = {"identical": text == shipped_text}
    if text != shipped_text:
        old = {(e["s"], e["n"]): e for e in shipped["entries"]}
        new = {(e["s"], e["n"]): e for e in built["entries"]}
        out["only_shipped"] = sorted(map(list, set(old) - set(new)))[:10]
        out["only_built"] = sorted(map(list, set(new) - set(old)))[:10]
        out["changed"] = [list(k) for k in sorted(set(old) & set(new)) if old[k] != new[k]][:10]
        out["header_same"] = {k: built[k] == shipped[k] for k in ("versions", "sections", "not_indexed")}
    return out


def accelerate_checks(data) -> dict:
    from accelerate.commands.launch import launch_command_parser
    from accelerate.commands.config.config_args import ClusterConfig
    out = {}
    ns = launch_command_parser().parse_args(["train.py"])
    flags = _by(data, "accelerate-launch")
    first = {}  # two flags on one dest (--tpu_cluster/--no_tpu_cluster): the first one's default is the dest's
    for e in data["entries"]:
        if e["s"] == "accelerate-launch" and "dest" in e:
            first.setdefault(e["dest"], e["n"])
    out["launch_defaults_mismatch"] = sorted(
        n for n, e in flags.items() if "dest" in e and e["k"] != "positional" and first[e["dest"]] == n
        and repr(getattr(ns, e["dest"])) != e["d"])
    out["launch_flags_checked"] = sum(1 for e in flags.values() if e["k"] != "positional")
    config = _by(data, "accelerate-config")
    accepted, rejected = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        def load(doc):
            p = Path(tmp) / "c.yaml"
            import yaml
            p.write_text(yaml.safe_dump(doc))
            return ClusterConfig.from_yaml_file(str(p))
        tops = [n for n in config if "." not in n and n not in ("compute_environment", "distributed_type")]
        for n in tops:
            try:
                load({"distributed_type": "NO", n: None})
                accepted.append(n)
            except Exception as exc:  # a key the table lists must load
                rejected[n] = type(exc).__name__
        # flag-only flags: the table says no config key; the loader must reject the same name
        flag_only = [e["dest"] for e in flags.values() if e["k"] == "launch flag (flag-only)"]
        loader_rejects = {}
        for d in flag_only:
            try:
                load({"distributed_type": "NO", d: 1})
                loader_rejects[d] = False
            except ValueError as exc:
                loader_rejects[d] = "unknown keys" in str(exc)
        # the tables the generator calls free: the loader accepts a key in them that no flag has
        free_ok = {}
        for t in data["free_tables"]["tables"]:
            try:
                load({"distributed_type": "NO", t: {"no_such_option_xyz": 1}})
                free_ok[t] = True
            except Exception:
                free_ok[t] = False
        out["free_tables_accepting_unknown"] = free_ok
        out.update(accelerate_launch_env(data, tmp))
        # a key the questionnaire writes that reaches no flag: run launch's merge and FP8 export for real
        out.update(_fp8_questionnaire_run(data, load, tmp))
    out["config_top_keys_accepted"] = len(accepted)
    out["config_top_keys_rejected"] = rejected
    out["flag_only_checked"] = len(loader_rejects)
    out["flag_only_not_rejected"] = sorted(d for d, ok in loader_rejects.items() if not ok)
    return out


def _fp8_questionnaire_run(data, load, tmp) -> dict:
    import yaml
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils.launch import setup_fp8_env
    config = _by(data, "accelerate-config")
    env_rows = _by(data, "accelerate-env")
    stray = {n: e for n, e in config.items() if e["k"].startswith("config key (written by accelerate config")
             and n.startswith("fp8_config.")}
    doc = {"compute_environment": "LOCAL_MACHINE", "distributed_type": "NO", "mixed_precision": "fp8",
           "num_processes": 1, "fp8_config": {"backend": "TE"}}
    for i, n in enumerate(sorted(stray)):
        doc["fp8_config"][n.split(".", 1)[1]] = f"v{i}"
    path = Path(tmp) / "fp8.yaml"
    path.write_text(yaml.safe_dump(doc))
    args = launch_command_parser().parse_args(["--config_file", str(path), "train.py"])
    args = _validate_launch_command(args)[0]
    # setup_fp8_env is what the launchers call once the FP8 library check passed (none is installed here)
    env = setup_fp8_env(args, {})
    result = {"fp8_stray_keys": len(stray), "fp8_stray_wrong": []}
    for i, (n, e) in enumerate(sorted(stray.items())):
        var = next(x.split(":", 1)[1] for x in e["l"] if x.startswith("accelerate-env:"))
        flag = next(x.split(":", 1)[1] for x in e["l"] if x.startswith("accelerate-launch:"))
        reader = next(x.split(":", 1)[1] for x in config_links(data, flag) if x.startswith("accelerate-env:"))
        ok = (env.get(var) == f"v{i}" and env_rows[var]["k"] == "env var (set)"
              and env.get(reader) != f"v{i}" and "read" in env_rows[reader]["k"])
        if not ok:
            result["fp8_stray_wrong"].append([n, var, env.get(var), reader, env.get(reader)])
    return result


def config_links(data, flag):
    return _by(data, "accelerate-launch")[flag].get("l", [])


def accelerate_launch_env(data, tmp) -> dict:
    """accelerate launch's simple (CPU) launcher: every variable the table says the function sets with a
    statement directly in its body (not under an if) is in the environment it returns."""
    import ast
    import yaml
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils import launch as ul
    rows = _by(data, "accelerate-env")
    rel = "accelerate/utils/launch.py"
    tree = ast.parse(Path(ul.__file__).read_text(encoding="utf-8"))
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "prepare_simple_launcher_cmd_env")
    lines = {f"{rel}:{st.lineno}" for st in fn.body if isinstance(st, ast.Assign)
             and any(isinstance(t, ast.Subscript) for t in st.targets)}
    expected = sorted(n for n, e in rows.items() if set(e.get("sets", [])) & lines)
    cfg = Path(tmp) / "cpu.yaml"
    cfg.write_text(yaml.safe_dump({"distributed_type": "NO", "num_processes": 1, "use_cpu": True}))
    args = _validate_launch_command(launch_command_parser().parse_args(
        ["--config_file", str(cfg), "--num_cpu_threads_per_process", "2", "train.py"]))[0]
    _, env = ul.prepare_simple_launcher_cmd_env(args)
    return {"simple_env_expected": expected, "simple_env_missing": sorted(set(expected) - set(env)),
            "simple_env_omp": env.get("OMP_NUM_THREADS")}


def torch_checks(data) -> dict:
    from torch.distributed.run import get_args_parser
    out = {}
    rows = _by(data, "torchrun")
    ns = get_args_parser().parse_args(["train.py"])
    out["torchrun_defaults_mismatch"] = sorted(n for n, e in rows.items() if e["k"] != "positional"
                                               and repr(getattr(ns, e["dest"])) != e["d"])
    out["torchrun_checked"] = sum(1 for e in rows.values() if e["k"] != "positional")
    # a PET_ variable the table links to a flag really changes that flag's default
    e = rows["--nnodes"]
    env = next(x.split(":", 1)[1] for x in e["l"] if x.startswith("torch-env:PET_"))
    os.environ[env] = "2:4"
    try:
        out["pet_nnodes_default"] = get_args_parser().parse_args(["train.py"]).nnodes
    finally:
        del os.environ[env]
    out["pet_env_name"] = env
    return out


def torchrun_worker_env(data) -> dict:
    """One real torchrun (1 worker, standalone): the variables the table says torch's elastic agent
    sets for its workers are all in the worker's environment."""
    import subprocess
    import ast
    import torch.distributed.elastic.agent.server.local_elastic_agent as lea
    rows = _by(data, "torch-env")
    agent = "torch/distributed/elastic/agent/server/local_elastic_agent.py"
    # the unconditional ones: the worker_env = {...} literal (other sites depend on the machine or options)
    tree = ast.parse(Path(lea.__file__).read_text(encoding="utf-8"))
    lines = {f"{agent}:{n.lineno}" for n in ast.walk(tree) if isinstance(n, ast.Assign)
             and isinstance(n.value, ast.Dict) and any(isinstance(t, ast.Name) and "env" in t.id for t in n.targets)}
    expected = sorted(n for n, e in rows.items() if set(e.get("sets", [])) & lines)
    with tempfile.TemporaryDirectory() as tmp:
        out_file = Path(tmp) / "env.json"
        worker = Path(tmp) / "w.py"
        worker.write_text("import json, os, sys\njson.dump(sorted(os.environ), open(sys.argv[1], 'w'))\n")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PET_", "TORCHELASTIC_"))}
        proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "1",
                               str(worker), str(out_file)], capture_output=True, text=True, timeout=180, env=env,
                              cwd=tmp)
        got = set(json.loads(out_file.read_text())) if out_file.is_file() else set()
    return {"torchrun_rc": proc.returncode, "agent_sets_expected": expected,
            "agent_sets_missing_in_worker": sorted(set(expected) - got)}


def deepspeed_checks(data) -> dict:
    from deepspeed.launcher import runner
    from deepspeed.runtime.zero.config import get_zero_config
    out = {}
    rows = _by(data, "deepspeed-launcher")
    ns = runner.parse_args(["train.py"])
    out["ds_launcher_defaults_mismatch"] = sorted(n for n, e in rows.items() if e["k"] != "positional"
                                                  and repr(getattr(ns, e["dest"])) != e["d"])
    out["ds_launcher_checked"] = len(rows)
    cfg = _by(data, "deepspeed-config")
    z = get_zero_config({"zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}}})
    dev = z.offload_optimizer.device
    out["zero_offload_device"] = str(getattr(dev, "value", dev))
    out["zero_offload_choices"] = cfg["zero_optimization.offload_optimizer.device"].get("c")
    out["zero_reduce_bucket_default"] = repr(get_zero_config({"zero_optimization": {}}).reduce_bucket_size)
    out["zero_reduce_bucket_table"] = cfg["zero_optimization.reduce_bucket_size"]["d"]
    try:
        get_zero_config({"zero_optimization": {"offload_optimizer_device": "cpu"}})
        out["zero_rejects_unknown"] = False
    except Exception as exc:
        out["zero_rejects_unknown"] = "xtra" in str(exc) or "not permitted" in str(exc)
    out["zero_unknown_in_table"] = "zero_optimization.offload_optimizer_device" in cfg
    return out


TRAINER_FIELDS = ["per_device_train_batch_size", "learning_rate", "num_train_epochs", "weight_decay", "seed",
                  "ddp_timeout", "gradient_accumulation_steps", "max_grad_norm", "warmup_steps", "dataloader_num_workers"]


def transformers_checks(data) -> dict:
    from transformers import TrainingArguments
    out = {}
    rows = _by(data, "trainer-args")
    with tempfile.TemporaryDirectory() as tmp:
        args = TrainingArguments(output_dir=tmp)
    out["trainer_mismatch"] = {f: [repr(getattr(args, f)), rows[f]["d"]] for f in TRAINER_FIELDS
                               if repr(getattr(args, f)) != rows[f]["d"]}
    out["trainer_checked"] = len(TRAINER_FIELDS)
    strat = rows["eval_strategy"].get("c")
    out["eval_strategy_choices"] = strat
    bad = []
    for c in strat or []:
        with tempfile.TemporaryDirectory() as tmp:
            try:
                TrainingArguments(output_dir=tmp, eval_strategy=c, eval_steps=10)
            except ValueError:
                bad.append(c)
    out["eval_strategy_refused"] = bad
    # the note on fsdp_config keys: a key written with the fsdp_ prefix is accepted and stripped
    note = rows["fsdp_config.min_num_params"].get("o", "")
    with tempfile.TemporaryDirectory() as tmp:
        a = TrainingArguments(output_dir=tmp, fsdp=True, fsdp_config={"fsdp_min_num_params": 5})
    out["fsdp_prefix_note"] = "fsdp_ prefix is accepted" in note
    import warnings
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import logging
        logging.disable(logging.NOTSET)  # generate_facts.build() silenced warnings in this process
        records = []
        handler = logging.Handler()
        handler.emit = records.append
        logging.getLogger("transformers").addHandler(handler)
        try:
            TrainingArguments(output_dir=tmp, fsdp="full_shard auto_wrap")
        finally:
            logging.getLogger("transformers").removeHandler(handler)
    said = " ".join([str(w.message) for w in caught] + [r.getMessage() for r in records])
    out["fsdp_string_deprecated"] = "deprecated" in said and "fsdp" in said
    out["fsdp_prefix_stripped"] = a.fsdp_config.get("min_num_params") == 5 and "fsdp_min_num_params" not in a.fsdp_config
    # the 4 -> 5 diff, checked on its 5.x side (the 4.57.1 side needs the wheel; see the test's docstring)
    import _fx_transformers as fx
    new = fx.fields_from_source(fx.TA_PY.read_text(encoding="utf-8"))
    diff = _by(data, "transformers-4-to-5")
    out["diff_count"] = len(diff)
    out["diff_removed_still_present"] = sorted(n for n, e in diff.items() if "removed" in e["k"] and n in new)
    out["diff_new_side_wrong"] = sorted(n for n, e in diff.items() if "removed" not in e["k"]
                                        and (n not in new or new[n]["default"] != e["d"]))
    out["diff_removed_sample"] = sorted(n for n, e in diff.items() if "removed" in e["k"])[:5]
    not_type_error = []
    for n, e in diff.items():
        if "removed" in e["k"]:
            try:
                TrainingArguments(output_dir="unused-dir", **{n: None})
                not_type_error.append(n)
            except TypeError:
                pass
    out["diff_removed_not_type_error"] = sorted(not_type_error)
    return out


def dynamo_and_inference_checks(data) -> dict:
    """Sample entries of the two generated option tables against the live objects: setting a
    torch._dynamo.config option by its table name works and an unknown name is refused; an
    init_inference key and its alias both reach the DeepSpeedInferenceConfig field."""
    import torch._dynamo.config as dcfg
    from deepspeed.inference.config import DeepSpeedInferenceConfig

    out = {}
    dyn = {e["n"]: e for e in data["entries"] if e["s"] == "torch-dynamo-config"}
    out["dynamo_checked"] = len(dyn)
    import _fx_common
    out["dynamo_default_mismatch"] = sorted(n for n, e in dyn.items()
                                            if e.get("d") != _fx_common.default_repr(getattr(dcfg, n)) and "o" not in e
                                            and not e.get("d", "").startswith("computed:"))[:10]
    with dcfg.patch(optimize_ddp="python_reducer"):
        out["dynamo_set_optimize_ddp"] = dcfg.optimize_ddp
    try:
        dcfg.no_such_option_xyz = 1
        out["dynamo_unknown_refused"] = False
    except AttributeError:
        out["dynamo_unknown_refused"] = True
    inf = {e["n"]: e for e in data["entries"] if e["s"] == "deepspeed-inference-config"}
    out["inference_checked"] = len(inf)
    alias = inf["replace_with_kernel_inject"].get("a", [None])[0]
    out["inference_alias_reaches_field"] = DeepSpeedInferenceConfig(**{alias: True}).replace_with_kernel_inject
    out["inference_tp_default"] = inf["tensor_parallel"].get("d")
    return out


def main() -> int:
    shipped_path = Path(sys.argv[1])
    text = shipped_path.read_text(encoding="utf-8")
    data = json.loads(text)
    report = {"regenerate": regenerate(text)}
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        report.update(accelerate_checks(data))
        report.update(torch_checks(data))
        report.update(torchrun_worker_env(data))
        report.update(deepspeed_checks(data))
        report.update(transformers_checks(data))
        report.update(dynamo_and_inference_checks(data))
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""transformers 5.25.0 has no `sharded_ddp` (removed with fairscale in 4.35): the keyword raises TypeError,
the command-line flag is left over (ValueError from HfArgumentParser.parse_args_into_dataclasses). One child (transformers is never imported in the
pytest process of tests/backends_docs). Backs transformers-trainer-runtime.md's symptom row (set-23 s23-K10-02)."""
from __future__ import annotations

import subprocess
import sys
import tempfile
import textwrap

CHILD = textwrap.dedent('''
    import sys
    from transformers import HfArgumentParser, TrainingArguments
    try:
        TrainingArguments(output_dir=sys.argv[1], sharded_ddp="simple")
        print("KW accepted")
    except TypeError as e:
        print("KW " + str(e))
    try:
        HfArgumentParser(TrainingArguments).parse_args_into_dataclasses(
            ["--output_dir", sys.argv[1], "--sharded_ddp", "simple"])
        print("CLI accepted")
    except ValueError as e:
        print("CLI " + str(e))
    print("FIELDS " + ",".join(f for f in ("sharded_ddp", "fsdp", "fsdp_config", "deepspeed")
                                if f in TrainingArguments.__dataclass_fields__))
''')


def test_sharded_ddp_is_gone_and_fsdp_deepspeed_remain():
    with tempfile.TemporaryDirectory() as d:
        p = subprocess.run([sys.executable, "-c", CHILD, d], capture_output=True, text=True, timeout=120)
    out = p.stdout
    assert "KW TrainingArguments.__init__() got an unexpected keyword argument 'sharded_ddp'" in out, out + p.stderr[-2000:]
    assert "CLI Some specified arguments are not used by the HfArgumentParser: ['--sharded_ddp', 'simple']" in out, \
        out + p.stderr[-2000:]
    assert "FIELDS fsdp,fsdp_config,deepspeed" in out

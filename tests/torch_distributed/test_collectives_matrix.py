"""sub-skills/torch-distributed/references/gloo-collectives-matrix.md is one real 2-rank gloo run
(torch 2.13.0): the page's block must be the rendering of the committed capture, the capture must
hold every (collective, op, dtype) cell the generator defines, the summary rows must say what the
cells show, and a few cells (AVG on float and int64, a bitwise op on float, PREMUL_SUM) are rerun
live on two gloo processes and must equal the capture. Set-6 miss s6-td-03."""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _collectives_matrix as gen  # noqa: E402
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import _generated_blocks as gb  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "sub-skills" / "torch-distributed" / "references" / "gloo-collectives-matrix.md"
CAPTURE = json.loads(gen.CAPTURE.read_text(encoding="utf-8"))
LIVE = ["all_reduce|AVG|float32", "all_reduce|AVG|int64", "reduce|AVG|bfloat16", "reduce_scatter_tensor|AVG|float16",
        "reduce_scatter|AVG|bool", "all_reduce|BAND|float32", "all_reduce|BXOR|int64", "reduce|PREMUL_SUM|float32",
        "all_reduce AVG, float16 60000 on each rank||"]


def test_page_block_is_the_rendered_capture():
    assert gb.block(DOC.read_text(encoding="utf-8"), "gloo collectives").strip() == gen.render(CAPTURE).strip()


def test_capture_is_one_full_gloo_run_of_the_pinned_torch():
    assert CAPTURE["torch"].startswith("2.13.0") and CAPTURE["backend"] == "gloo" and CAPTURE["world_size"] == 2
    assert list(CAPTURE["cells"]) == ["|".join(c) for c in gen.cells()]
    assert len(CAPTURE["cells"]) == 5 * 9 * 5 + 10 * 5 + 6 + 2


def test_summary_rows_say_what_the_cells_show():
    c, doc = CAPTURE["cells"], DOC.read_text(encoding="utf-8")
    for kind in gen.REDUCING:
        for d in ("float32", "bfloat16", "float16"):
            assert c[f"{kind}|AVG|{d}"][0].startswith("ok [1.5, 6"), (kind, d)
            assert c[f"{kind}|BAND|{d}"][0] == "error RuntimeError: Cannot use ReduceOp.BAND with non-integral dtype"
        long_err = "error RuntimeError: result type Float can't be cast to the desired output type Long"
        assert c[f"{kind}|AVG|int64"] == [long_err, long_err]
        assert c[f"{kind}|AVG|bool"][0].endswith("desired output type Bool")
        assert all(c[f"{kind}|PREMUL_SUM|{d}"][0] == "error RuntimeError: Cannot use ReduceOp.PREMUL_SUM with Gloo"
                   for d in gen.DTYPES)
        assert not c[f"{kind}|BXOR|int64"][0].startswith("error") and not c[f"{kind}|BOR|bool"][0].startswith("error")
    # AVG is sum-then-divide in the tensor's dtype: the float16 sum overflows, float32 does not
    assert c["all_reduce AVG, float16 60000 on each rank||"] == ["ok [inf]", "ok [inf]"]
    assert c["all_reduce AVG, float32 60000 on each rank||"] == ["ok [60000]", "ok [60000]"]
    for kind in gen.PLAIN + gen.NO_DTYPE:
        assert not any(v[0].startswith("error") or v[1].startswith("error") for k, v in c.items()
                       if k.split("|")[0] == kind), kind
    assert set(CAPTURE["warnings"]) == {k for k in c if k.split("|")[0] in ("reduce_scatter_tensor", "all_gather_into_tensor")}
    for phrase in ("`RuntimeError: result type Float can't be cast to the desired output type Long`",
                   "`RuntimeError: Cannot use ReduceOp.PREMUL_SUM with Gloo`", "\"`AVG` is only available with the `NCCL` backend\"",
                   "gloo backend on CPU tensors", "torch 2.13.0", "gave `inf` in float16"):
        assert phrase in doc, phrase


def test_pinned_docstring_still_says_nccl_only():
    """The page says the wheel's own ReduceOp docstring is out of date for gloo; it must still say so."""
    import torch.distributed as dist
    assert "``AVG`` is only available with the ``NCCL`` backend" in dist.ReduceOp.__doc__


def test_live_rerun_of_some_cells_matches_the_capture():
    live = gen.run_ranks(only=LIVE, timeout=60)
    assert live["cells"] == {k: CAPTURE["cells"][k] for k in LIVE}

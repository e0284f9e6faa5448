"""sub-skills/torch-distributed/references/fsdp2-module-methods.md lists every public FSDPModule method of
the installed torch (2.13.0) with its signature: the page's block must equal _fsdp_module_methods.generate()
word for word (s11-fd-c03: the bundle was silent on set_reduce_scatter_unused_params)."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _fsdp_module_methods as gen  # noqa: E402
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import _generated_blocks as gb  # noqa: E402

DOC = Path(__file__).resolve().parents[2] / "sub-skills" / "torch-distributed" / "references" / "fsdp2-module-methods.md"


def test_method_table_is_the_generated_one():
    block = gen.generate()
    assert gb.block(DOC.read_text(encoding="utf-8"), "fsdp module methods").strip() == block.strip()
    for name in ("set_reduce_scatter_unused_params", "set_requires_gradient_sync", "set_reshard_after_backward",
                 "set_modules_to_forward_prefetch", "unshard", "reshard", "set_is_last_backward", "reset_iter_state"):
        assert f"| `{name}` |" in block
    assert "`(reduce_scatter_unused_params: bool, *, recurse: bool = True)` | `False` |" in block


def test_starting_values_are_the_sources():
    """The 'Before any call' cells of the boolean group flags are the values FSDPParamGroup / the root state start with."""
    import inspect
    from torch.distributed.fsdp._fully_shard import _fsdp_param_group, _fsdp_state
    init = inspect.getsource(_fsdp_param_group.FSDPParamGroup.__init__)
    for attr, value in (("reduce_grads", "True"), ("all_reduce_grads", "True"), ("reshard_after_backward", "True"),
                        ("reduce_scatter_unused_params", "False"), ("unshard_in_backward", "True"),
                        ("force_sum_reduction_for_comms", "False")):
        assert f"self.{attr}: bool = {value}" in init, attr
    assert "self.is_last_backward: bool = True" in inspect.getsource(_fsdp_state)
    cells = {n: d[1] for n, d in gen.DESCRIBE.items()}
    assert cells["set_reduce_scatter_unused_params"] == "`False`" and cells["set_requires_gradient_sync"] == "`True`"
    assert cells["set_reshard_after_backward"] == "`True`" and cells["set_unshard_in_backward"] == "`True`"
    assert cells["set_is_last_backward"] == "`True`" and cells["set_force_sum_reduction_for_comms"] == "`False`"

"""Optimizer state through torch.distributed.checkpoint (torch 2.13.0 CPU, one process, no process group):
what get_optimizer_state_dict does to a fresh optimizer, what dcp.load and set_optimizer_state_dict do
with a parameter that had no optimizer state when the checkpoint was written, and which param_group keys
a load restores.

Field threads (writers' side): pytorch/pytorch#192224 (flattened form, opaque TypeError),
pytorch/torchtitan#848 (KeyError 'step' on resume, the older torch's form of the same path),
pytorch/pytorch#140900 (initial_lr not restored), pytorch/pytorch#143828 (empty param group).
Reference: sub-skills/torch-distributed/references/fsdp2-and-dcp.md#optimizer-state-through-dcp.

Everything runs in this process: dcp.save/load without a process group take the single-process path
(no_dist), which is the same planner code a multi-rank load runs per rank.
"""
from __future__ import annotations

import warnings

import pytest
import torch
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.checkpoint import DefaultLoadPlanner
from torch.distributed.checkpoint.api import CheckpointException
from torch.distributed.checkpoint.state_dict import (StateDictOptions, get_optimizer_state_dict,
                                                     set_optimizer_state_dict)

pytestmark = pytest.mark.filterwarnings("ignore")     # dcp's "assuming the intent is to save in a single process"


def make(lr=0.1):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(2, 2, bias=False), nn.Linear(2, 2, bias=False))
    return model, torch.optim.AdamW(model.parameters(), lr=lr)


def steps(opt) -> dict:
    return {k: float(v["step"]) for k, v in opt.state_dict()["state"].items()}


@pytest.fixture()
def half_stepped(tmp_path):
    """A checkpoint written after one step in which only model[0] got a gradient: model[1].weight has no
    optimizer state (AdamW creates state lazily, at a parameter's first step with a gradient)."""
    model, opt = make()
    model[0](torch.ones(1, 2)).sum().backward()
    opt.step()
    opt.zero_grad()
    sd = get_optimizer_state_dict(model, opt)
    dcp.save({"optim": sd}, checkpoint_id=str(tmp_path))
    return sd, str(tmp_path)


def test_torch_version():
    assert torch.__version__.startswith("2.13.0")


def test_get_optimizer_state_dict_steps_a_fresh_optimizer_once():
    """_init_optim_state: an optimizer with no state gets zero gradients and one step() at lr 0, so the
    returned dict (and the live optimizer) has state for every trainable parameter, step 1, weights unchanged."""
    model, opt = make()
    w0 = model[0].weight.detach().clone()
    sd = get_optimizer_state_dict(model, opt)
    assert sorted(sd["state"]) == ["0.weight", "1.weight"]
    assert steps(opt) == {0: 1.0, 1: 1.0}
    assert torch.equal(model[0].weight, w0) and opt.param_groups[0]["lr"] == 0.1   # lr restored
    assert all(p.grad is None for p in model.parameters())
    # the first real step is then AdamW's step 2: a different update than a fresh optimizer's first step
    model(torch.ones(1, 2)).sum().backward()
    opt.step()
    ref_model, ref_opt = make()
    ref_model(torch.ones(1, 2)).sum().backward()
    ref_opt.step()
    assert steps(opt) == {0: 2.0, 1: 2.0} and steps(ref_opt) == {0: 1.0, 1: 1.0}
    assert not torch.allclose(model[0].weight, ref_model[0].weight)


def test_a_parameter_without_state_is_absent_from_the_checkpoint(half_stepped):
    sd, _ = half_stepped
    assert sorted(sd["state"]) == ["0.weight"]


@pytest.mark.reproduces("torch-dcp-missing-key", "torch-dcp-checkpoint-exception")
def test_dcp_load_into_a_fresh_target_raises_missing_key_for_it(half_stepped):
    """The load target built by get_optimizer_state_dict on a fresh optimizer has state for every parameter
    (the zero step above), so dcp.load asks for keys the checkpoint never had. The exception is a
    CheckpointException, a BaseException: `except Exception` does not catch it."""
    _, ckpt = half_stepped
    model, opt = make()
    target = {"optim": get_optimizer_state_dict(model, opt)}
    assert sorted(target["optim"]["state"]) == ["0.weight", "1.weight"]
    with pytest.raises(CheckpointException) as e:
        dcp.load(target, checkpoint_id=ckpt)
    assert "Missing key in checkpoint state_dict: optim.state.1.weight.step." in str(e.value)
    assert not issubclass(CheckpointException, Exception)


def test_allow_partial_load_keeps_the_targets_placeholder_state(half_stepped):
    """DefaultLoadPlanner(allow_partial_load=True) loads what the checkpoint has and leaves the rest of the
    target as it was: model[1].weight keeps the zero step's state (step 1, zero moments)."""
    _, ckpt = half_stepped
    model, opt = make()
    target = {"optim": get_optimizer_state_dict(model, opt)}
    dcp.load(target, checkpoint_id=ckpt, planner=DefaultLoadPlanner(allow_partial_load=True))
    set_optimizer_state_dict(model, opt, target["optim"])
    assert steps(opt) == {0: 1.0, 1: 1.0}
    assert torch.count_nonzero(opt.state[model[1].weight]["exp_avg"]) == 0
    assert torch.count_nonzero(opt.state[model[0].weight]["exp_avg"]) > 0     # loaded from the file


def test_set_optimizer_state_dict_strict_error_and_strict_false(half_stepped):
    sd, _ = half_stepped
    model, opt = make()
    with pytest.raises(RuntimeError, match=r"Missing optimizer state for parameter '1\.weight' in checkpoint\. "
                                           r"The parameter requires gradients but has no saved optimizer state\. "
                                           r"To load anyway, use StateDictOptions\(strict=False\)\."):
        set_optimizer_state_dict(model, opt, sd)
    model, opt = make()
    set_optimizer_state_dict(model, opt, sd, options=StateDictOptions(strict=False))
    assert steps(opt) == {0: 1.0}                       # no state for model[1]: created at its first step
    model(torch.ones(1, 2)).sum().backward()
    opt.step()
    assert steps(opt) == {0: 2.0, 1: 1.0}


def test_flattened_form_fails_with_an_opaque_typeerror():
    """flatten_optimizer_state_dict=True has no strict check: the missing parameter's state is rebuilt as
    empty dicts and Adam.__setstate__ fails on float(p_state["step"])."""
    model, opt = make()
    model[0](torch.ones(1, 2)).sum().backward()
    opt.step()
    flat = StateDictOptions(flatten_optimizer_state_dict=True)
    sd = get_optimizer_state_dict(model, opt, options=flat)
    assert sorted(k for k in sd if k.startswith("state.")) == ["state.0.weight.exp_avg", "state.0.weight.exp_avg_sq",
                                                              "state.0.weight.step"]
    for strict in (True, False):                       # strict=False does not help on this path
        model2, opt2 = make()
        with pytest.raises(TypeError, match=r"float\(\) argument must be a string or a real number, not 'dict'"):
            set_optimizer_state_dict(model2, opt2, sd, options=StateDictOptions(flatten_optimizer_state_dict=True,
                                                                                 strict=strict))
    # a parameter with requires_grad=False in the loading model is skipped: the load goes through
    model3, opt3 = make()
    model3[1].weight.requires_grad_(False)
    set_optimizer_state_dict(model3, opt3, sd, options=flat)
    assert steps(opt3) == {0: 1.0}


def _trained_with_scheduler():
    model, opt = make()
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    for _ in range(3):
        model(torch.ones(1, 2)).sum().backward()
        opt.step()
        opt.zero_grad()
        sched.step()
    return model, opt, sched


@pytest.mark.reproduces("torch-lr-scheduler-initial-lr-missing")
def test_initial_lr_is_loaded_only_when_the_target_has_it(tmp_path):
    """dcp.load fills the target in place: a param_group key the target lacks is not restored. initial_lr
    is added by an LR scheduler constructed with last_epoch=-1 (the default)."""
    model, opt, sched = _trained_with_scheduler()
    assert opt.param_groups[0]["lr"] == 0.0125 and opt.param_groups[0]["initial_lr"] == 0.1
    dcp.save({"optim": get_optimizer_state_dict(model, opt), "sched": sched.state_dict()},
             checkpoint_id=str(tmp_path))
    # target built before any scheduler exists: lr restored, initial_lr not; resuming the scheduler fails
    m2, o2 = make()
    target = {"optim": get_optimizer_state_dict(m2, o2)}
    dcp.load(target, checkpoint_id=str(tmp_path))
    set_optimizer_state_dict(m2, o2, target["optim"])
    assert o2.param_groups[0]["lr"] == 0.0125 and "initial_lr" not in o2.param_groups[0]
    with pytest.raises(KeyError, match="param 'initial_lr' is not specified in param_groups\\[0\\] when resuming "
                                       "scheduler with last_epoch >= 0"):
        torch.optim.lr_scheduler.StepLR(o2, step_size=1, gamma=0.5, last_epoch=2)
    # scheduler first (default last_epoch), then the target, then load both: everything comes back
    m3, o3 = make()
    s3 = torch.optim.lr_scheduler.StepLR(o3, step_size=1, gamma=0.5)
    target = {"optim": get_optimizer_state_dict(m3, o3), "sched": s3.state_dict()}
    dcp.load(target, checkpoint_id=str(tmp_path))
    set_optimizer_state_dict(m3, o3, target["optim"])
    s3.load_state_dict(target["sched"])
    assert o3.param_groups[0]["lr"] == 0.0125 and o3.param_groups[0]["initial_lr"] == 0.1
    assert s3.last_epoch == 3 and s3.get_last_lr() == [0.0125]
    # plain Optimizer.load_state_dict replaces the groups wholesale, initial_lr included
    m4, o4 = make()
    o4.load_state_dict(opt.state_dict())
    assert o4.param_groups[0]["initial_lr"] == 0.1


def test_an_empty_param_group_keeps_its_hyperparameters(tmp_path):
    """torch 2.13.0: a param group with no trainable parameters round-trips with lr/betas and the next
    step runs (pytorch/pytorch#143828 reported it losing them, then KeyError 'betas' at step)."""
    def make2():
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(2, 2, bias=False), nn.Linear(2, 2, bias=False))
        opt = torch.optim.AdamW([{"params": [model[0].weight]},
                                 {"params": [], "lr": 0.2, "betas": (0.8, 0.9)}], lr=0.1)
        return model, opt
    model, opt = make2()
    model[0](torch.ones(1, 2)).sum().backward()
    opt.step()
    dcp.save({"o": get_optimizer_state_dict(model, opt)}, checkpoint_id=str(tmp_path))
    m2, o2 = make2()
    target = {"o": get_optimizer_state_dict(m2, o2)}
    dcp.load(target, checkpoint_id=str(tmp_path))
    set_optimizer_state_dict(m2, o2, target["o"])
    assert o2.param_groups[1]["lr"] == 0.2 and o2.param_groups[1]["betas"] == (0.8, 0.9)
    m2[0](torch.ones(1, 2)).sum().backward()
    o2.step()


def test_a_scheduler_built_after_the_load_rewrites_the_loaded_lr():
    """A scheduler's constructor runs its first step, which writes lr into every group: built after the
    optimizer state was loaded, it scales the loaded lr again (pytorch/pytorch#119168: load after building)."""
    _, opt, _ = _trained_with_scheduler()
    _, o2 = make()
    o2.load_state_dict(opt.state_dict())
    assert o2.param_groups[0]["lr"] == 0.0125
    torch.optim.lr_scheduler.LinearLR(o2, start_factor=0.1, total_iters=10)
    assert o2.param_groups[0]["lr"] == pytest.approx(0.00125)
    _, o3 = make()
    torch.optim.lr_scheduler.LinearLR(o3, start_factor=0.1, total_iters=10)   # build first ...
    o3.load_state_dict(opt.state_dict())                                      # ... then load
    assert o3.param_groups[0]["lr"] == 0.0125

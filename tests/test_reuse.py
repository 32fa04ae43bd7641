"""Reusing a stage's last result (gradsim_taichi.reuse) while its inputs stay the same:
only without autograd, and never where an input that reaches the stage has changed (each
nuisance value moved in turn: the render equals the one computed in full)."""

import pytest
import torch
from nuisance_helpers import small_scene as _scene
from nuisance_helpers import truth_outputs as _truth_outputs

from gradsim_taichi.nuisance import Nuisance
from gradsim_taichi.reuse import LastResult

f64 = torch.float64
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_the_last_result_is_reused_only_for_the_same_inputs_without_autograd():
    calls = []

    def compute():
        calls.append(1)
        return torch.tensor(float(len(calls)))

    memo = LastResult()
    a = torch.tensor([1.0, 2.0], dtype=f64)
    with torch.no_grad():
        first = memo.get([a, 3], compute)
        assert memo.get([a.clone(), 3], compute) is first and len(calls) == 1
        a[1] = 2.0 + 1e-15  # (a change in the last bit)
        assert memo.get([a, 3], compute) is not first and len(calls) == 2
        memo.get([a, 4], compute)  # another input changed
        memo.get([a.float(), 4], compute)  # the same numbers in another type
        memo.get([a[:1], 4], compute)  # another shape
        memo.get([a[:1]], compute)  # fewer inputs
        assert len(calls) == 6
        memo.get([torch.tensor(float("nan"))], compute)
        memo.get([torch.tensor(float("nan"))], compute)  # (NaN is not equal to itself)
        assert len(calls) == 8
    memo.get([a[:1]], compute)  # with autograd: always computed
    assert len(calls) == 9


def test_a_render_without_autograd_equals_the_full_render_as_each_value_moves():
    """The frame-0 calibration's Jacobian moves one value per column: the object layer
    and the shadow are reused where that value does not reach them; the image must be
    what a new model at the same values (nothing to reuse) draws, bit for bit."""
    scene = _scene(frames=2, size=16)
    out = _truth_outputs(scene)
    kinds = ("camera", "background", "appearance", "shadow", "blur", "response")
    target = scene.render(out)
    nu = Nuisance(scene, kinds, target)

    def full(ids=None):
        """The render of a new model at ``nu``'s values: nothing to reuse."""
        fresh = Nuisance(scene, kinds, target)
        for n, t in fresh.params.items():
            t.data.copy_(nu.params[n])
        return fresh.render(out, ids)

    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        nu.render(out)
        for name, t in nu.params.items():
            for k in range(t.numel()):
                t.view(-1)[k] += 0.01 * (1 + torch.rand((), generator=gen, dtype=f64))
                assert torch.equal(nu.render(out), full()), (name, k)
    # another frame (the body's vertices moved): drawn again
    ids0, ids1 = torch.tensor([0]), torch.tensor([2])
    with torch.no_grad():
        first = nu.render(out, ids0)
        later = nu.render(out, ids1)
        assert not torch.equal(first, later) and torch.equal(later, full(ids1))

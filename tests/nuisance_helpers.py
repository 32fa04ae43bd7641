"""Shared by the nuisance tests (test_nuisance.py, test_nuisance_shadow.py): a small
rigid-mass scene, its true rollout, and a float64 central difference along a direction."""

import torch


def small_scene(mode="antialias", frames=4, size=24, **kw):
    from gradsim_taichi.scenes import make_scene

    scene = make_scene("rigid-mass", frames=frames, width=size, height=size, **kw)
    scene.render_mode = mode
    scene.build()
    return scene


def truth_outputs(scene):
    with torch.no_grad():
        return scene.simulate(scene.true_values(["mass"]))


def directional(loss, t, d, h=1e-6):
    """The float64 central difference of ``loss`` along ``d`` in the tensor ``t`` and the
    analytic one from ``t.grad`` (after ``loss().backward()``)."""
    with torch.no_grad():
        base = t.clone()
        t.copy_(base + h * d)
        lp = loss()
        t.copy_(base - h * d)
        lm = loss()
        t.copy_(base)
    return float((lp - lm) / (2 * h)), float((t.grad * d).sum())


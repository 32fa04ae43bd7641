"""The local uncertainty of an estimate (Gauss-Newton, finite-difference Jacobian) and
the flagging of what the video cannot determine."""

import numpy as np
import pytest
import torch
from toy_scene import SpringSheet

from gradsim_taichi.estimation import _Fit, estimate, render_target
from gradsim_taichi.objectives import Stages, get_loss
from gradsim_taichi.optimisers import fd_jacobian


@pytest.fixture
def scene():
    s = SpringSheet(frames=5)  # in flight all the time: the springs never stretch
    s.build()
    return s


def test_gauss_newton_matrix_matches_reverse_mode(scene):
    """J^T J from the finite-difference Jacobian against J^T (J_fd) from reverse-mode
    products through the simulator and renderer (float64)."""
    target = render_target(scene)
    fit = _Fit(scene, target, ["velocity"], {"velocity": np.array([0.9, 0.6, -0.4])}, "lbfgs",
               1.0, 1, Stages(scene.frames), 0.0, "video", get_loss("mse"), 0.0)
    u = fit.u["velocity"]
    x0 = u.detach().clone()

    def evaluate(x):
        with torch.no_grad():
            u.copy_(x)
        return fit.raw_residuals()

    r0 = evaluate(x0)
    jac = fd_jacobian(evaluate, x0, r0)
    with torch.no_grad():
        u.copy_(x0)
    ids = fit.stages.all_ids
    r = (fit.predict(ids) - target[ids]).reshape(-1)
    for j in range(3):
        (grad,) = torch.autograd.grad(r, u, jac[:, j], retain_graph=True)  # J^T J[:, j]
        np.testing.assert_allclose(grad.numpy(), (jac.T @ jac[:, j]).numpy(), rtol=1e-6,
                                   atol=1e-9 * float((jac.T @ jac).abs().max()))


def test_noise_gives_an_interval_around_the_truth(scene):
    target = render_target(scene)
    noisy = (target + 0.03 * torch.randn(target.shape, generator=torch.Generator().manual_seed(1),
                                         dtype=target.dtype))
    r = estimate(scene, noisy, params=["velocity"], iters=15, lr=1.0, optimizer="lm",
                 init={"velocity": np.array([0.9, 0.6, -0.4])}, progress=False)
    u = r.uncertainty
    assert u["sigma"] == pytest.approx(0.03, rel=0.1)  # the noise level, from the residuals
    std = np.asarray(u["params"]["velocity"]["std"])
    low, high = (np.asarray(b) for b in u["params"]["velocity"]["ci95"])
    truth = scene.params["velocity"].true
    assert np.all(std > 0) and np.allclose(high - low, 2 * 1.959964 * std)
    assert np.all(np.abs(r.params["velocity"] - truth) < 4 * std)  # within 4 sigma
    assert u["weak_directions"] == [] and r.warnings == []


def test_a_parameter_the_video_never_shows_is_flagged(scene):
    """A free-flying sheet at its rest shape: its mass changes nothing in the video."""
    target = render_target(scene, "3d")
    r = estimate(scene, target, params=["velocity", "mass"], iters=6, lr=1.0,
                 optimizer="lm", supervision="3d", progress=False,
                 init={"velocity": np.array([0.9, 0.6, -0.4]), "mass": 0.1})
    weak = r.uncertainty["weak_directions"]
    assert len(weak) == 1 and list(weak[0]["components"]) == ["mass"]
    assert any("does not determine mass" in w for w in r.warnings)
    only = estimate(scene, target, params=["velocity"], iters=6, lr=1.0, optimizer="lm",
                    supervision="3d", progress=False,
                    init={"velocity": np.array([0.9, 0.6, -0.4])})
    assert only.uncertainty["weak_directions"] == [] and only.warnings == []

"""The local uncertainty of an estimate (Gauss-Newton, finite-difference Jacobian) and
the flagging of what the video cannot determine."""

import numpy as np
import pytest
import torch
from toy_scene import SpringSheet

from gradsim_taichi.estimation import estimate, render_target
from gradsim_taichi.fit import Fit
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
    fit = Fit(scene, target, ["velocity"], {"velocity": np.array([0.9, 0.6, -0.4])}, "lbfgs",
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
    # no interval for it (not the pseudo-inverse's zero width), one for the velocity
    assert np.isnan(r.uncertainty["params"]["mass"]["std"])
    assert np.isfinite(r.uncertainty["params"]["velocity"]["std"]).all()
    only = estimate(scene, target, params=["velocity"], iters=6, lr=1.0, optimizer="lm",
                    supervision="3d", progress=False,
                    init={"velocity": np.array([0.9, 0.6, -0.4])})
    assert only.uncertainty["weak_directions"] == [] and only.warnings == []


# ---- many unknowns: Lanczos on Gauss-Newton products ------------------------------------
def _per_particle_velocity_fit(scene, target, supervision="video"):
    """A fit of every particle's own initial velocity: 16 x 3 = 48 unknowns, more than a
    dense Jacobian is built for."""
    import dataclasses

    n = scene.n * scene.n
    true = np.tile(scene.params["velocity"].true, (n, 1))
    scene.params["velocity"] = dataclasses.replace(scene.params["velocity"], true=true,
                                                   shape=(n, 3))
    init = {"velocity": true + 0.05}
    return Fit(scene, target, ["velocity"], init, "lbfgs", 1.0, 1, Stages(scene.frames),
                0.0, supervision, get_loss("mse"), 0.0)


def test_gauss_newton_products_and_lanczos_match_the_dense_matrix(scene):
    """J^T J v from central differences and a reverse pass against the dense float64
    finite-difference J^T J (48 unknowns); Lanczos' leading Ritz values against its
    eigenvalues."""
    from gradsim_taichi import uncertainty as unc

    target = render_target(scene)
    fit = _per_particle_velocity_fit(scene, target)
    tensors = [fit.u["velocity"]]
    x0 = tensors[0].detach().reshape(-1).clone()

    def evaluate(x):
        unc._set(tensors, x)
        return fit.raw_residuals()

    r0 = evaluate(x0)
    jac = fd_jacobian(evaluate, x0, r0)
    unc._set(tensors, x0)
    dense = (jac.T @ jac).numpy()
    product = unc.gauss_newton_product(fit, tensors, x0, r0, evaluate)
    v = torch.randn(len(x0), generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    np.testing.assert_allclose(product(v).numpy(), dense @ v.numpy(), rtol=1e-5,
                               atol=1e-6 * np.abs(dense).max())
    theta, vectors = unc.lanczos(lambda w: torch.as_tensor(dense) @ w, len(x0), 8)
    eig = np.sort(np.linalg.eigvalsh(dense))[::-1]
    assert theta[0] == pytest.approx(eig[0], rel=1e-6)  # the leading one converges first
    assert np.all(theta <= eig[: len(theta)] * (1 + 1e-9))  # Ritz values: lower bounds
    ritz = vectors[:, 0]
    assert abs(ritz @ dense @ ritz - theta[0]) <= 1e-8 * eig[0]


def test_many_unknowns_get_a_spectrum_and_a_plain_warning(scene):
    """48 unknowns without a basis: no per-parameter interval, but the spectrum over all
    of them, the directions the video determines counted, and a note that says the rest
    were not resolved."""
    from gradsim_taichi.uncertainty import LANCZOS_STEPS, local_uncertainty

    target = render_target(scene)
    fit = _per_particle_velocity_fit(scene, target)
    out = local_uncertainty(fit)
    spec = out["spectrum"]
    assert spec["unknowns"] == 48 and spec["products"] == LANCZOS_STEPS
    assert spec["curvatures"] == sorted(spec["curvatures"], reverse=True)
    assert spec["curvatures"][0] > 0 and 1 <= spec["determined_of_found"] <= LANCZOS_STEPS
    assert out["params"]["velocity"]["ci95"] is None
    assert "48 unknowns" in spec["note"] and "not resolved" in spec["note"]


def test_a_field_the_video_never_shows_is_flagged_by_the_spectrum():
    """Every particle's own mass (36 unknowns) of a sheet in free flight: no combination
    of them changes the motion; the spectrum finds no determined direction and flags
    the weakest it found."""
    import dataclasses

    from gradsim_taichi.uncertainty import local_uncertainty

    scene = SpringSheet(frames=5, n=6)
    scene.params["mass"] = dataclasses.replace(scene.params["mass"], true=np.full(36, 0.05),
                                               shape=(36,))
    scene.build()
    target = render_target(scene, "3d")
    fit = Fit(scene, target, ["mass"], {"mass": np.full(36, 0.08)}, "lbfgs", 1.0, 1,
               Stages(scene.frames), 0.0, "3d", get_loss("mse"), 0.0)
    out = local_uncertainty(fit)
    assert out["spectrum"]["unknowns"] == 36 and out["spectrum"]["determined_of_found"] == 0
    assert any(w.startswith("the video does not determine mass[") for w in out["warnings"])


def test_nuisance_values_left_free_widen_the_interval_by_their_schur_complement(scene):
    """With ``fit="camera"`` the camera's six values are columns of the Jacobian too: the
    velocity's variance is that of the Schur complement of the camera block,
    ``s^2 [(A_vv - A_vc A_cc^-1 A_cv)^-1]``, built here from an independent
    finite-difference Jacobian; ``std_nuisance_held`` is ``s^2 [A_vv^-1]``."""
    target = render_target(scene)
    noisy = (target + 0.03 * torch.randn(target.shape, generator=torch.Generator().manual_seed(2),
                                         dtype=target.dtype))
    r = estimate(scene, noisy, params=["velocity"], iters=15, lr=1.0, optimizer="lm",
                 fit="camera", init={"velocity": np.array([0.9, 0.6, -0.4])}, progress=False)
    u = r.uncertainty
    assert len(u["nuisance"]) == 6 and "nuisance values free (6 columns)" in u["method"]
    nuisance = r.render.__self__
    fit = Fit(scene, noisy, ["velocity"], {"velocity": r.params["velocity"]}, "lbfgs",
              1.0, 1, Stages(scene.frames), 0.0, "video", get_loss("mse"), 0.0,
              nuisance=nuisance)
    tensors = [fit.u["velocity"], *nuisance.tensors()]
    x0 = torch.cat([t.detach().reshape(-1) for t in tensors])

    def evaluate(x):
        with torch.no_grad():
            i = 0
            for t in tensors:
                t.copy_(x[i: i + t.numel()].reshape(t.shape))
                i += t.numel()
        return fit.raw_residuals()

    r0 = evaluate(x0)
    jac = fd_jacobian(evaluate, x0, r0)
    evaluate(x0)
    a = (jac.T @ jac).numpy()
    s2 = float(r0 @ r0) / (len(r0) - a.shape[0])
    schur = a[:3, :3] - a[:3, 3:] @ np.linalg.solve(a[3:, 3:], a[3:, :3])
    free = np.sqrt(s2 * np.diag(np.linalg.inv(schur)))
    held = np.sqrt(s2 * np.diag(np.linalg.inv(a[:3, :3])))
    np.testing.assert_allclose(u["params"]["velocity"]["std"], free, rtol=1e-4)
    np.testing.assert_allclose(u["params"]["velocity"]["std_nuisance_held"], held, rtol=1e-4)
    assert np.max(free / held) > 1.05  # the camera trades against the velocity


@pytest.mark.slow
def test_a_sharp_clip_holds_the_blur_at_zero_without_a_warning():
    """``fit="blur"`` on a sharp clip: the frame-0 calibration sets the blur to exactly
    0, where the loss is flat in its square root (``blur_sigma``) and the run leaves it;
    the uncertainty holds it there rather than calling it undetermined, and the mass
    keeps its interval."""
    from gradsim_taichi.scenes import make_scene

    scene = make_scene("rigid-mass", frames=4, width=24, height=24)
    scene.render_mode = "antialias"
    scene.build()
    target = render_target(scene)[..., :3]
    r = estimate(scene, target, fit="blur", iters=6, loss="robust", progress=False)
    assert r.stages[0]["nuisance"]["blur_sigma"] == 0.0 == r.nuisance["blur_sigma"]
    u = r.uncertainty
    assert u["warnings"] == [] and "nuisance" not in u
    assert np.isfinite(u["params"]["mass"]["std"])

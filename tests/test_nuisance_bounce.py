"""The kind ``bounce`` (estimate(fit=...)): a learned map of what a moving body does to
the ground's light around it, tied to the body's centre; where it is sampled, what it
leaves alone, its gradients, and how the calibration and the uncertainty treat it."""

import pytest
import torch
from nuisance_helpers import directional as _directional
from nuisance_helpers import small_scene as _scene
from nuisance_helpers import truth_outputs as _truth_outputs

from gradsim_taichi.ground_shading import (
    BOUNCE_CELLS,
    BOUNCE_REACH,
    ground_points,
    radius,
)
from gradsim_taichi.nuisance import Nuisance

f64 = torch.float64
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _moving(scene):
    return [k for k, p in enumerate(scene.parts) if p.static_vertices is None]


def test_the_map_is_sampled_at_the_ground_point_relative_to_the_body():
    """A map linear in its cells' centres, ``a_c + b_c x + e_c z`` (x, z in units of the
    reach from the body's centre), is drawn exactly by bilinear sampling inside its
    outermost cell centres: each ground pixel's factor is 1 plus that plane at the pixel's
    ground point relative to the body's centre in that frame. Beyond the map's edge and
    where a ray misses the ground the factor is exactly 1."""
    scene = _scene(size=40, frames=3)
    out = _truth_outputs(scene)
    nu = Nuisance(scene, ("bounce",), scene.render(out))
    g = BOUNCE_CELLS
    centres = -1.0 + (2.0 * torch.arange(g, dtype=f64) + 1.0) / g
    a = torch.tensor([0.05, -0.1, 0.2], dtype=f64)[:, None, None]
    b = torch.tensor([0.3, 0.1, -0.2], dtype=f64)[:, None, None]
    e = torch.tensor([-0.2, 0.25, 0.1], dtype=f64)[:, None, None]
    plane = a + b * centres[None, None, :] + e * centres[None, :, None]   # [3, z, x]
    with torch.no_grad():
        nu.params["bounce_map"].copy_(plane[None])
        verts = scene.posed_vertices(out)
        moving = _moving(scene)
        factor = nu.shadow(scene.camera, nu.meshes(), verts, moving)
        points, hit = ground_points(scene.camera, nu.ground_height)
    body = verts[moving[0]]
    reach = BOUNCE_REACH * radius(body[0])
    assert nu.bounce_reach == [reach]
    inside_n = beyond_n = 0
    for f in range(body.shape[0]):
        c = body[f].mean(0)
        x = (points[..., 0] - c[0]) / reach
        z = (points[..., 2] - c[2]) / reach
        want = 1.0 + a[:, 0, 0] + b[:, 0, 0] * x[..., None] + e[:, 0, 0] * z[..., None]
        inner = float(centres[-1])
        inside = hit & (x.abs() < inner) & (z.abs() < inner)
        beyond = ~hit | (x.abs() > 1.0 + 1.0 / g) | (z.abs() > 1.0 + 1.0 / g)
        torch.testing.assert_close(factor[f][inside], want[inside], rtol=0, atol=1e-12)
        assert float((factor[f][beyond] - 1.0).abs().max()) == 0.0
        inside_n += int(inside.sum())
        beyond_n += int((beyond & hit).sum())
    assert inside_n > 50 and beyond_n > 50 and bool((~hit).any())


def test_bounce_gradient_matches_central_differences():
    """The factor's derivative with respect to the map and to every vertex of the body
    (through its centre) against float64 central differences, with the shadow and
    occlusion on as well."""
    scene = _scene(size=24, frames=2)
    out = _truth_outputs(scene)
    nu = Nuisance(scene, ("shadow", "bounce"), scene.render(out))
    moving = _moving(scene)
    verts = [v.detach().clone() for v in scene.posed_vertices(out)]
    x = verts[moving[0]].requires_grad_(True)
    m = nu.params["bounce_map"]
    gen = torch.Generator().manual_seed(5)
    with torch.no_grad():
        m.copy_(0.3 * torch.randn(m.shape, generator=gen, dtype=f64))
        nu.params["shadow_strength"].fill_(0.5)
        nu.params["occlusion_strength"].copy_(torch.tensor([0.3, 0.2, 0.4]))
    w = torch.rand(3, 24, 24, 1, generator=gen, dtype=f64)

    def loss():
        vs = [x if k == moving[0] else v for k, v in enumerate(verts)]
        return (nu.shadow(scene.camera, nu.meshes(), vs, moving) * w).sum()

    loss().backward()
    for t in (m, x):
        num, ana = _directional(loss, t, torch.randn(t.shape, generator=gen, dtype=f64))
        assert abs(num) > 1e-6
        assert abs(ana - num) <= 1e-6 * abs(num), (ana, num)


def test_the_calibration_and_the_uncertainty_hold_the_map():
    """The map's hundreds of cells are neither calibrated on frame 0 (a Jacobian column
    each) nor columns of the uncertainty (their number would hold every nuisance value),
    and a gradient optimiser learns them only once every frame is fitted (the warm-up
    horizons and the pre-contact stage hold them); the other kinds' values are
    calibrated. ``bounce`` needs a gradient optimiser."""
    from gradsim_taichi.estimation import estimate
    from gradsim_taichi.fit import Fit
    from gradsim_taichi.objectives import Stages, get_loss

    scene = _scene(size=16, frames=2)
    target = scene.render(_truth_outputs(scene))
    nu = Nuisance(scene, ("background", "appearance", "bounce"), target)
    fit = Fit(scene, target, ["mass"], {"mass": 5.0}, "lbfgs", 1.0, 3,
              Stages(scene.frames, warmup=(2, 1)), 0.0, "video", get_loss("mse"), 0.0,
              nuisance=nu)
    fit.calibrate(iters=2)
    m = nu.params["bounce_map"]
    for it, held in ((0, True), (1, True), (2, False)):  # (2: every frame)
        fit.iteration = it
        fit.closure()
        assert (float(m.grad.abs().max()) == 0.0) == held, it
    assert float(nu.params["bounce_map"].detach().abs().max()) == 0.0
    assert float((nu.params["albedo_gain"].detach() - 1.0).abs().max()) > 0.0
    assert not bool(nu.free("bounce_map").any())
    assert bool(nu.free("ambient").all())
    with pytest.raises(ValueError, match="too many for optimizer 'lm'"):
        estimate(scene, target, fit="bounce", optimizer="lm", iters=1)

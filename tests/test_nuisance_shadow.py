"""The kind ``shadow`` (estimate(fit=...)): the cast shadow along the light, the ground's
ambient occlusion by the bodies (the sphere form factor), their strengths and bounds,
and a light that a trial step turns up."""

import pytest
import torch
from nuisance_helpers import directional as _directional
from nuisance_helpers import small_scene as _scene
from nuisance_helpers import truth_outputs as _truth_outputs

from gradsim_taichi.ground_shading import ground_points, sphere_occlusion
from gradsim_taichi.nuisance import Nuisance

f64 = torch.float64
pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.mark.parametrize("direction", [(0.0, -1.0, 0.0), (0.3, -1.0, -0.6)])
def test_the_shadow_falls_along_the_light_onto_the_ground(direction):
    """A body in the air: the ground pixel that the light carries its centre onto is in
    full shadow (darkened by the strength), the pixel of a ground point 0.4 m beside it
    is not; the darkening is 1 - strength times the shadow's coverage there."""
    from gradsim_taichi.render import DirectionalLight

    scene = _scene(size=48, frames=1)
    scene.renderer.lights = [lt if not isinstance(lt, DirectionalLight) else
                             DirectionalLight(direction, lt.intensity, lt.color)
                             for lt in scene.renderer.lights]
    out = _truth_outputs(scene)
    nu = Nuisance(scene, ("shadow",), scene.render(out))
    with torch.no_grad():
        nu.params["shadow_strength"].fill_(0.6)
        verts = scene.posed_vertices(out)
        moving = [k for k, p in enumerate(scene.parts) if p.static_vertices is None]
        shade = nu.shadow(scene.camera, nu.meshes(), verts, moving)[0, ..., 0]
    centre = verts[moving[0]][0].mean(0)
    assert centre[1] > 0.2  # in the air
    d = torch.as_tensor(direction, dtype=f64)
    on_ground = centre - centre[1] / d[1] * d
    beside = on_ground + torch.tensor([0.4, 0.0, 0.0], dtype=f64)
    uv = scene.camera.project(torch.stack([on_ground, beside]))[0]  # pixel centres: +0.5
    (u0, v0), (u1, v1) = uv.floor().long().tolist()
    # (within the blur's tail from the shadow's edge, pixels away)
    assert abs(float(shade[v0, u0]) - 0.4) < 0.01
    assert abs(float(shade[v1, u1]) - 1.0) < 0.01
    assert float(shade.min()) >= 0.4 - 1e-9 and float(shade.max()) <= 1.0 + 1e-9


def test_a_light_turned_up_is_a_step_too_far_not_an_error():
    """``appearance`` learns the light's direction; a line-search trial that turns it
    up, where ``shadow`` has no shadow to cast, gets the fit's penalty (a ValueError
    there ended a path-traced box's run mid-way); a scene lit from below is named when
    the fit is set up."""
    from gradsim_taichi.fit import Fit
    from gradsim_taichi.objectives import Stages, get_loss
    from gradsim_taichi.render import DirectionalLight

    scene = _scene(frames=2)
    target = scene.render(_truth_outputs(scene))
    nu = Nuisance(scene, ("appearance", "shadow"), target)
    fit = Fit(scene, target, ["mass"], {"mass": 5.0}, "lbfgs", 1.0, 1,
              Stages(scene.frames), 0.0, "video", get_loss("mse"), 0.0, nuisance=nu)
    ids = torch.arange(scene.frames + 1)
    assert nu.drawable() and fit.predict(ids) is not None
    with torch.no_grad():  # offsets across the light: 10x its length, upwards
        d0 = nu.light_direction().clone()
        nu.params["light_direction"].copy_(torch.tensor([10.0, 0.0], dtype=f64))
        e1 = nu.light_direction() - d0
        nu.params["light_direction"].copy_(torch.tensor([10.0 if e1[1] > 0 else -10.0, 0.0],
                                                        dtype=f64))
    assert float(nu.light_direction().detach()[1]) > 0 and not nu.drawable()
    assert fit.predict(ids) is None
    value = fit.objective().detach()
    assert float(value) >= 1e6 and torch.isfinite(value)
    scene.renderer.lights = [lt if not isinstance(lt, DirectionalLight) else
                             DirectionalLight((0.0, 1.0, 0.0), lt.intensity, lt.color)
                             for lt in scene.renderer.lights]
    with pytest.raises(ValueError, match="must shine downwards"):
        Nuisance(scene, ("shadow",), target)


def _ball(centre, r):
    """Six vertices ``[1, 6, 3]`` at distance ``r`` from ``centre`` along the axes: their
    mean is the centre, their root-mean-square distance from it ``r``."""
    axes = torch.cat([torch.eye(3, dtype=f64), -torch.eye(3, dtype=f64)])
    return (centre + r * axes)[None]


@pytest.mark.parametrize("offset", [0.0, 0.15])
def test_occlusion_is_the_sphere_form_factor_at_the_pixel_of_its_ground_point(offset):
    """The ground point of pixel (i, j) projects to that pixel's centre; a sphere of
    radius r centred a height h above it (and ``offset`` across) hides
    (r / d)^2 cos(theta) of its cosine-weighted sky: r^2 / h^2 straight above."""
    scene = _scene(size=32, frames=1)
    nu = Nuisance(scene, ("shadow",), scene.render(_truth_outputs(scene)))
    cam = scene.camera
    with torch.no_grad():
        points, hit = ground_points(cam, nu.ground_height)
        i, j = 22, 13
        p = points[i, j]
        assert bool(hit[i, j]) and abs(float(p[1]) - nu.ground_height) < 1e-12
        uv = cam.project(p)[0]
        assert torch.allclose(uv, torch.tensor([j + 0.5, i + 0.5], dtype=f64), atol=1e-9)
        r, h = 0.1, 0.4
        centre = p + torch.tensor([offset, h, 0.0], dtype=f64)
        ao = sphere_occlusion(points, hit, [_ball(centre, r)])[0, i, j, 0]
    d = (offset ** 2 + h ** 2) ** 0.5
    assert abs(float(ao) - (r / d) ** 2 * h / d) < 1e-12
    if offset == 0.0:
        assert abs(float(ao) - r * r / (h * h)) < 1e-12


def test_pixels_whose_ray_misses_the_ground_get_no_occlusion():
    """Above the horizon (the row a far ground point projects to) no pixel is darkened,
    however close the sphere; below it every pixel meets the ground."""
    from gradsim_taichi.render import Camera

    scene = _scene(size=32, frames=1)
    nu = Nuisance(scene, ("shadow",), scene.render(_truth_outputs(scene)))
    # looking slightly down: the horizon crosses the image
    cam = Camera.look_at((0.0, 0.5, 2.0), (0.0, 0.35, 0.0), fov_y_deg=50.0, width=32,
                         height=32)
    with torch.no_grad():
        far = torch.tensor([0.0, nu.ground_height, -1e7], dtype=f64)
        horizon = float(cam.project(far)[0][1])
        assert 4 < horizon < 28
        points, hit = ground_points(cam, nu.ground_height)
        rows = torch.arange(32, dtype=f64)[:, None].expand(32, 32) + 0.5
        assert torch.equal(hit, rows > horizon)
        ao = sphere_occlusion(points, hit,
                              [_ball(torch.tensor([0.0, 0.3, 0.0], dtype=f64), 0.25)])[0, ..., 0]
    assert float(ao[~hit].abs().max()) == 0.0
    assert float(ao[hit].max()) > 0.05


def test_strengths_are_projected_back_into_their_range():
    """After each optimiser step (Fit.step) the strengths return to [0, 1]: an early step
    below 0 must not leave the occlusion out for the rest of a run."""
    scene = _scene(frames=1)
    nu = Nuisance(scene, ("shadow",), scene.render(_truth_outputs(scene)))
    with torch.no_grad():
        nu.params["shadow_strength"].fill_(-0.3)
        nu.params["occlusion_strength"].copy_(torch.tensor([1.7, -0.2, 0.5]))
    nu.project()
    assert float(nu.params["shadow_strength"].detach()) == 0.0
    assert nu.params["occlusion_strength"].detach().tolist() == [1.0, 0.0, 0.5]
    assert nu.params["occlusion_strength"].requires_grad


def test_occlusion_darkens_each_colour_channel_by_its_own_strength():
    """The ground's occlusion strength is per colour channel (what the sky gave less what
    the body bounces back, in that colour): with no cast shadow, channel c of the
    darkening is 1 - strength_c * F, F the occlusion."""
    scene = _scene(size=24, frames=2)
    out = _truth_outputs(scene)
    nu = Nuisance(scene, ("shadow",), scene.render(out))
    strength = torch.tensor([0.1, 0.5, 0.9], dtype=f64)
    with torch.no_grad():
        nu.params["occlusion_strength"].copy_(strength)
        verts = scene.posed_vertices(out)
        moving = [k for k, p in enumerate(scene.parts) if p.static_vertices is None]
        shade = nu.shadow(scene.camera, nu.meshes(), verts, moving)
        ao = sphere_occlusion(*ground_points(scene.camera, nu.ground_height),
                              [verts[k] for k in moving])
    assert shade.shape == (3, 24, 24, 3)
    assert float(ao.max()) > 0.05
    torch.testing.assert_close(shade, 1.0 - strength * ao, rtol=0, atol=1e-12)


def test_occlusion_gradient_matches_central_differences():
    """The darkening's derivative with respect to the occlusion strength and to every
    vertex of the body (through the sphere's centre and radius) against float64 central
    differences (the cast shadow off, to see the occlusion alone)."""
    scene = _scene(size=24, frames=2)
    out = _truth_outputs(scene)
    nu = Nuisance(scene, ("shadow",), scene.render(out))
    moving = [k for k, p in enumerate(scene.parts) if p.static_vertices is None]
    verts = [v.detach().clone() for v in scene.posed_vertices(out)]
    x = verts[moving[0]].requires_grad_(True)
    a = nu.params["occlusion_strength"]
    with torch.no_grad():
        a.copy_(torch.tensor([0.3, 0.2, 0.4]))
    w = torch.rand(3, 24, 24, 1, generator=torch.Generator().manual_seed(3), dtype=f64)

    def loss():
        vs = [x if k == moving[0] else v for k, v in enumerate(verts)]
        return (nu.shadow(scene.camera, nu.meshes(), vs, moving) * w).sum()

    loss().backward()
    g = torch.Generator().manual_seed(4)
    for t in (a, x):
        num, ana = _directional(loss, t, torch.randn(t.shape, generator=g, dtype=f64))
        assert abs(num) > 1e-6
        assert abs(ana - num) <= 1e-6 * abs(num), (ana, num)


@pytest.mark.parametrize("shape", ["cylinder", "lshape"])
def test_the_shadow_moves_smoothly_with_the_body(shape):
    """The cast shadow's factor along a slide of the body in steps of 0.1 mm: its second
    differences are small against its first (nearly a smooth function of the pose; the
    anti-aliasing's approximations at corners leave a few small jumps: 0.058 and 0.044
    of the first here). With the shadow's faces flattened onto the ground coplanar, the
    z-buffer's pick among a closed body's overlapping lit and unlit sides flipped with
    the steps, and the cover's edge with it: 0.31 (cylinder) and 1.36 (L-shape); with
    the anti-aliasing's walk over thin faces cut after 8 faces, 0.059 and 0.11."""
    scene = _scene(size=48, frames=16, shape=shape)
    out = _truth_outputs(scene)
    nu = Nuisance(scene, ("shadow",), scene.render(out))
    moving = [k for k, p in enumerate(scene.parts) if p.static_vertices is None]
    step = torch.tensor([1e-4, 0.0, 0.5e-4], dtype=f64)
    shades = []
    with torch.no_grad():
        nu.params["shadow_strength"].fill_(1.0)
        verts = scene.posed_vertices(out)
        for s in range(9):
            moved = [v + s * step if k in moving else v for k, v in enumerate(verts)]
            shades.append(nu.shadow(scene.camera, nu.meshes(), moved, moving))
    a = torch.stack(shades).reshape(9, -1)
    first = (a[2:] - a[:-2]).abs().sum()
    second = (a[:-2] - 2 * a[1:-1] + a[2:]).abs().sum()
    assert float(first) > 0.5  # the shadow moves
    assert float(second) < 0.08 * float(first)

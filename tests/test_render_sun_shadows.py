"""Shadows of the directional lights on the meshes (``SoftRasterizer(sun_shadows=...)``):
pixels against exact ray geometry, convex bodies unchanged, gradients against float64
central differences."""

import numpy as np
import pytest
import torch

from gradsim_taichi.meshes import lshape_mesh
from gradsim_taichi.render import AmbientLight, Camera, DirectionalLight, Mesh, SoftRasterizer

f64 = torch.float64
pytestmark = pytest.mark.usefixtures("one_torch_thread")

AMBIENT, SUN = 0.3, 0.7


def _lights(direction, sun=SUN, ambient=AMBIENT):
    return [AmbientLight(ambient), DirectionalLight(direction, sun)]


def _quad(x0, x1, z0, z1, y):
    """A horizontal quad facing up (+y): its vertices and faces."""
    v = torch.tensor([[x0, y, z0], [x1, y, z0], [x1, y, z1], [x0, y, z1]], dtype=f64)
    return v, [[0, 2, 1], [0, 3, 2]]


def test_plate_shadow_on_ground_matches_ray_geometry():
    # a plate above a ground quad, the sun oblique: every pixel's colour from exact rays
    direction = np.array([0.35, -1.0, 0.25])
    cam = Camera.look_at((0.3, 2.4, 2.2), (0.0, 0.0, 0.0), fov_y_deg=50, width=64, height=48)
    ground, gf = _quad(-1.2, 1.2, -1.2, 1.2, 0.0)
    plate, pf = _quad(-0.3, 0.2, -0.25, 0.3, 0.45)
    g_col, p_col = np.array([0.2, 0.6, 0.4]), np.array([0.9, 0.3, 0.1])
    meshes = [Mesh(gf, color=tuple(g_col)), Mesh(pf, color=tuple(p_col))]
    lights = _lights(tuple(direction))
    shadowed = SoftRasterizer(cam, meshes, lights=lights, mode="hard", sun_shadows=True,
                              background=(0, 0, 0))([ground, plate])
    plain = SoftRasterizer(cam, meshes, lights=lights, mode="hard",
                           background=(0, 0, 0))([ground, plate])

    to_light = -direction / np.linalg.norm(direction)
    lit = AMBIENT + SUN * to_light[1]  # both quads face up
    R, _ = (x.numpy() for x in cam.world_to_camera())
    eye = cam.eye().numpy()
    fx, fy, cx, cy = (float(x) for x in cam.intrinsics())
    v, u = np.meshgrid(np.arange(48) + 0.5, np.arange(64) + 0.5, indexing="ij")
    ray = np.stack([(u - cx) / fx, (v - cy) / fy, np.ones_like(u)], -1) @ R

    def on_quad(y, x0, x1, z0, z1):
        t = (y - eye[1]) / ray[..., 1]
        p = eye + t[..., None] * ray
        return (t > 0) & (p[..., 0] > x0) & (p[..., 0] < x1) & (p[..., 2] > z0) & (
            p[..., 2] < z1), p

    on_plate, _ = on_quad(0.45, -0.3, 0.2, -0.25, 0.3)
    on_ground, p = on_quad(0.0, -1.2, 1.2, -1.2, 1.2)
    on_ground &= ~on_plate
    # the ground point's ray towards the sun meets the plate's plane inside the plate
    q = p + (0.45 / to_light[1]) * to_light
    dark = on_ground & (q[..., 0] > -0.3) & (q[..., 0] < 0.2) & (q[..., 2] > -0.25) & (
        q[..., 2] < 0.3)
    expected = np.zeros((48, 64, 3))
    expected[on_ground] = g_col * lit
    expected[dark] = g_col * AMBIENT
    expected[on_plate] = p_col * lit
    assert 40 < dark.sum() < on_ground.sum() / 4  # the shadow is in view, not all of it
    assert np.abs(shadowed[..., :3].numpy() - expected).max() < 1e-12
    changed = (shadowed - plain).abs().sum(-1).numpy() > 0
    assert (changed == dark).all()


def _posed(mesh, angle=0.5, shift=(0.0, 0.1, 0.0)):
    c, s = np.cos(angle), np.sin(angle)
    rot = np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]]) @ np.array(
        [[1, 0, 0], [0, np.cos(0.3), -np.sin(0.3)], [0, np.sin(0.3), np.cos(0.3)]])
    return torch.tensor(mesh.vertices @ rot.T + np.asarray(shift), dtype=f64)


def test_convex_body_is_unchanged():
    # a closed convex body never hides the sun from its own lit faces
    import trimesh

    box = trimesh.creation.box((0.4, 0.3, 0.5))
    cam = Camera.look_at((0.6, 0.9, 1.6), (0.0, 0.1, 0.0), fov_y_deg=40, width=48, height=40)
    args = dict(lights=_lights((0.4, -1.0, -0.5)), mode="antialias")
    v = _posed(box)
    with_shadows = SoftRasterizer(cam, Mesh(box.faces), sun_shadows=[0], **args)(v)
    assert torch.equal(with_shadows, SoftRasterizer(cam, Mesh(box.faces), **args)(v))


def _lshape_scene():
    """The L-shape's upper arm shading its step (light travelling towards +x)."""
    lsh = lshape_mesh()
    cam = Camera.look_at((0.25, 0.9, 1.4), (0.05, 0.0, 0.0), fov_y_deg=35, width=48,
                         height=40)
    return lsh, cam, torch.tensor(lsh.vertices, dtype=f64)


def test_lshape_step_is_shadowed():
    lsh, cam, v = _lshape_scene()
    lights = _lights((1.0, -0.7, 0.1))
    mesh = Mesh(lsh.faces, color=(0.8, 0.4, 0.2))
    on = SoftRasterizer(cam, mesh, lights=lights, mode="antialias", sun_shadows=True)(v)
    off = SoftRasterizer(cam, mesh, lights=lights, mode="antialias")(v)
    darker = (off - on)[..., :3].sum(-1)
    assert (darker > 1e-3).sum() >= 10  # part of the step is in the arm's shadow
    assert darker.min() > -1e-12  # a shadow only darkens
    assert torch.equal(on[..., 3], off[..., 3])  # and leaves the coverage


def test_gradients_match_central_differences():
    # the light each shadowed pixel loses, against the light, the albedo and the
    # positions (through the face's normal and the interpolation)
    lsh, cam, v = _lshape_scene()
    weights = torch.rand(40, 48, 3, generator=torch.Generator().manual_seed(0), dtype=f64)

    def loss(sun, ambient, direction, colour, verts):
        lights = [AmbientLight(ambient), DirectionalLight(direction, sun)]
        images = [SoftRasterizer(cam, Mesh(lsh.faces, color=colour), lights=lights,
                                 mode="antialias", sun_shadows=on)(verts)[..., :3]
                  for on in (True, None)]
        return ((images[0] - images[1]) * weights).sum()

    x0 = [torch.tensor(SUN, dtype=f64), torch.tensor(AMBIENT, dtype=f64),
          torch.tensor([1.0, -0.7, 0.1], dtype=f64), torch.tensor([0.8, 0.4, 0.2], dtype=f64),
          v.clone()]
    xs = [x.clone().requires_grad_(True) for x in x0]
    loss(*xs).backward()
    rng = np.random.default_rng(1)
    for k, x in enumerate(x0):
        d = torch.tensor(rng.standard_normal(tuple(x.shape)), dtype=f64)
        h = 1e-7  # (as the antialiased image's own checks: its edges curve at 1e-6)
        plus = [y + h * d if j == k else y for j, y in enumerate(x0)]
        minus = [y - h * d if j == k else y for j, y in enumerate(x0)]
        numeric = float((loss(*plus) - loss(*minus)) / (2 * h))
        analytic = float((xs[k].grad * d).sum())
        if k == 1:  # a shadow takes none of the ambient light
            assert analytic == 0.0 and abs(numeric) < 1e-8, (analytic, numeric)
            continue
        assert abs(numeric) > 1e-2, (k, numeric)
        assert abs(analytic - numeric) <= 1e-6 * abs(numeric), (k, analytic, numeric)


def test_bad_settings():
    cam = Camera.look_at((0, 0, 3.0), (0, 0, 0), width=16, height=16)
    mesh = Mesh([[0, 1, 2]])
    with pytest.raises(ValueError, match="sun_shadows needs mode"):
        SoftRasterizer(cam, mesh, sun_shadows=True)
    with pytest.raises(ValueError, match="indices of meshes"):
        SoftRasterizer(cam, mesh, mode="hard", sun_shadows=[1])

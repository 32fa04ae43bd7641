"""Hard (z-buffered) mode: silhouette areas against analytic projections."""

import math

import pytest
import torch

from gradsim_taichi.render import Camera, Mesh, SoftRasterizer

f64 = torch.float64


# tiny images: torch's thread pool only adds latency (see conftest.one_torch_thread)
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_square_silhouette_area_non_square_image():
    W, H = 256, 192
    cam = Camera.look_at((0, 0, 5.0), (0, 0, 0), fov_y_deg=40, width=W, height=H)
    f = cam.fy.item()
    side_px = 170.4
    s = side_px * 5.0 / f  # world side length projecting to side_px pixels
    v = torch.tensor([[-s, -s, 0], [s, -s, 0], [s, s, 0], [-s, s, 0]], dtype=f64) / 2
    mesh = Mesh([[0, 1, 2], [0, 2, 3]], lit=False)
    out = SoftRasterizer(cam, mesh, mode="hard")(v)
    assert out.shape == (H, W, 4)
    area = out[..., 3].sum().item()
    assert abs(area - side_px**2) / side_px**2 < 0.01, (area, side_px**2)
    # the square is centred: its box is symmetric about the image centre
    rows = torch.nonzero(out[..., 3].sum(1)).flatten()
    cols = torch.nonzero(out[..., 3].sum(0)).flatten()
    assert rows.min() + rows.max() == H - 1 and cols.min() + cols.max() == W - 1


def test_sphere_silhouette_area():
    import trimesh

    ico = trimesh.creation.icosphere(subdivisions=4, radius=1.0)
    d, R = 4.0, 1.0
    cam = Camera.look_at((0, 0, d), (0, 0, 0), fov_y_deg=45, width=200, height=200)
    out = SoftRasterizer(cam, Mesh(ico.faces), mode="hard")(torch.tensor(ico.vertices, dtype=f64))
    r_px = cam.fy.item() * R / math.sqrt(d * d - R * R)
    expected = math.pi * r_px**2
    area = out[..., 3].sum().item()
    assert abs(area - expected) / expected < 0.01, (area, expected)


def test_hard_colours_and_gradients_to_appearance():
    cam = Camera.look_at((0, 0, 5.0), (0, 0, 0), fov_y_deg=40, width=40, height=30)
    v = torch.tensor([[-1, -1, 0], [1, -1, 0], [1, 1, 0], [-1, 1, 0]], dtype=f64)
    colours = torch.tensor([[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 1]], dtype=f64)
    colours.requires_grad_()
    mesh = Mesh([[0, 1, 2], [0, 2, 3]], vertex_colors=colours, lit=False)
    out = SoftRasterizer(cam, mesh, mode="hard", background=(0.5, 0.5, 0.5))(v)
    assert out[0, 0].tolist() == [0.5, 0.5, 0.5, 0.0]
    centre = out[15, 20]
    # the pixel centre lies near the diagonal v0-v2: about half red, half blue
    assert centre[3] == 1.0
    assert (centre[:3] - torch.tensor([0.5, 0.0, 0.5], dtype=f64)).abs().max() < 0.1
    out[..., :3].sum().backward()
    assert colours.grad.shape == (4, 3) and colours.grad.sum() > 0


def test_backface_and_winding_do_not_matter_for_silhouette():
    cam = Camera.look_at((0, 0, 5.0), (0, 0, 0), fov_y_deg=40, width=32, height=32)
    v = torch.tensor([[-1, -1, 0], [1, -1, 0], [0, 1, 0]], dtype=f64)
    a = SoftRasterizer(cam, Mesh([[0, 1, 2]], lit=False), mode="hard")(v)
    b = SoftRasterizer(cam, Mesh([[0, 2, 1]], lit=False), mode="hard")(v)
    assert torch.equal(a[..., 3], b[..., 3]) and a[..., 3].sum() > 50
    assert torch.allclose(a, b, atol=1e-12)


def test_texture_orientation_soft_and_hard():
    """uv (0, 0) is the texture's bottom-left: the image shows the texture upright."""
    tex = torch.zeros(4, 4, 3, dtype=f64)
    tex[:2, :, 0] = 1  # top rows red
    tex[2:, :, 2] = 1  # bottom rows blue
    tex[:, :2, 1] = 0.5  # left columns get green
    v = torch.tensor([[-1, -1, 0], [1, -1, 0], [1, 1, 0], [-1, 1, 0]], dtype=f64)
    uv = torch.tensor([[0, 0], [1, 0], [1, 1], [0, 1]], dtype=f64)
    cam = Camera.look_at((0, 0, 5.0), (0, 0, 0), fov_y_deg=40, width=32, height=32)
    mesh = Mesh([[0, 1, 2], [0, 2, 3]], uv=uv, texture=tex, lit=False)
    for mode in ("hard", "soft"):
        out = SoftRasterizer(cam, mesh, mode=mode)(v)
        assert torch.allclose(out[10, 10], torch.tensor([1.0, 0.5, 0.0, 1.0], dtype=f64))
        assert torch.allclose(out[21, 21], torch.tensor([0.0, 0.0, 1.0, 1.0], dtype=f64))

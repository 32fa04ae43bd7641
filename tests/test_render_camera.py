"""Camera projection against hand computations, and input validation of the renderer."""

import math

import pytest
import torch

from gradsim_taichi.render import Camera, Mesh, SoftRasterizer

f64 = torch.float64


# tiny images: torch's thread pool only adds latency (see conftest.one_torch_thread)
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_look_at_projection_by_hand():
    # camera at (0, 0, 5) looking at the origin: x_cam = x, y_cam = -y, depth = 5 - z
    cam = Camera.look_at((0, 0, 5.0), (0, 0, 0), fov_y_deg=60, width=320, height=240)
    f = 120 / math.tan(math.radians(30))
    pts = torch.tensor([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0.5, -0.25, 1.0]], dtype=f64)
    uv, depth = cam.project(pts)
    expected_uv = [
        [160, 120],
        [160 + f / 5, 120],
        [160, 120 - f / 5],  # y up in the world is up in the image (smaller row)
        [160 + f * 0.5 / 4, 120 + f * 0.25 / 4],
    ]
    assert torch.allclose(uv, torch.tensor(expected_uv, dtype=f64), atol=1e-12)
    assert torch.allclose(depth, torch.tensor([5, 5, 5, 4], dtype=f64), atol=1e-12)


def test_look_at_from_the_side_and_extrinsic_agree():
    eye = torch.tensor([3.0, 1.0, 0.0], dtype=f64)
    cam = Camera.look_at(eye, (0, 1, 0), fov_y_deg=50, width=100, height=80)
    # camera on +x looking towards -x: image right is world -z, image down is world -y
    R, t = cam.world_to_camera()
    assert torch.allclose(R, torch.tensor([[0, 0, -1], [0, -1, 0], [-1, 0, 0]], dtype=f64))
    assert torch.allclose(cam.eye(), eye)
    T = torch.eye(4, dtype=f64)
    T[:3, :3], T[:3, 3] = R, t
    cam2 = Camera.from_extrinsic(T, cam.fx, cam.fy, cam.cx, cam.cy, width=100, height=80)
    pts = torch.randn(10, 3, dtype=f64)
    assert torch.allclose(cam.project(pts)[0], cam2.project(pts)[0], atol=1e-12)


def test_intrinsics_principal_point():
    T = torch.eye(4, dtype=f64)
    cam = Camera.from_extrinsic(T, 100.0, 50.0, 10.0, 20.0, width=64, height=48)
    uv, z = cam.project(torch.tensor([[0.2, -0.4, 2.0]], dtype=f64))
    assert torch.allclose(uv, torch.tensor([[10 + 100 * 0.1, 20 - 50 * 0.2]], dtype=f64))
    assert z.item() == 2.0


def test_camera_pose_gradient_flows():
    eye = torch.tensor([0.0, 0.0, 5.0], dtype=f64, requires_grad=True)
    cam = Camera.look_at(eye, (0, 0, 0), width=32, height=32)
    uv, _ = cam.project(torch.tensor([[1.0, 0.5, 0.0]], dtype=f64))
    uv.sum().backward()
    assert eye.grad is not None and eye.grad.abs().sum() > 0


def test_camera_errors():
    with pytest.raises(ValueError, match="image size"):
        Camera.look_at((0, 0, 5), width=0, height=32)
    with pytest.raises(ValueError, match="image size"):
        Camera.look_at((0, 0, 5), width=32, height=-4)
    with pytest.raises(ValueError, match="coincide"):
        Camera.look_at((0, 0, 0), (0, 0, 0))
    with pytest.raises(ValueError, match="parallel"):
        Camera.look_at((0, 5, 0), (0, 0, 0), up=(0, 1, 0))
    with pytest.raises(ValueError, match="fov"):
        Camera.look_at((0, 0, 5), fov_y_deg=0)
    with pytest.raises(ValueError, match="shape"):
        Camera.from_extrinsic(torch.eye(3), 1, 1, 0, 0, 8, 8)


def _scene():
    cam = Camera.look_at((0, 0, 4.0), (0, 0, 0), width=16, height=12)
    mesh = Mesh([[0, 1, 2]])
    v = torch.tensor([[-1, -1, 0], [1, -1, 0], [0, 1, 0]], dtype=f64)
    return SoftRasterizer(cam, mesh), v


def test_renderer_input_errors():
    r, v = _scene()
    assert r(v).shape == (12, 16, 4)
    with pytest.raises(ValueError, match="faces index vertex 2 but only 2"):
        r(v[:2])
    bad = v.clone()
    bad[1, 0] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        r(bad)
    with pytest.raises(TypeError, match="dtype"):
        r(v.float())
    with pytest.raises(TypeError, match="dtype"):
        r(v.long())
    with pytest.raises(ValueError, match="must be"):
        r(v[:, :2])
    with pytest.raises(ValueError, match="vertex tensors"):
        r([v, v])
    with pytest.raises(ValueError, match="different frame counts"):
        SoftRasterizer(r.camera, [Mesh([[0, 1, 2]]), Mesh([[0, 1, 2]])])(
            [v[None].expand(2, 3, 3), v[None].expand(3, 3, 3)]
        )
    with pytest.raises(ValueError, match="background"):
        SoftRasterizer(r.camera, Mesh([[0, 1, 2]]), background=torch.zeros(5, 5, 3))(v)
    with pytest.raises(ValueError, match="mode"):
        SoftRasterizer(r.camera, Mesh([[0, 1, 2]]), mode="fuzzy")


def test_mesh_errors():
    with pytest.raises(ValueError, match=r"\[T, 3\]"):
        Mesh([[0, 1]])
    with pytest.raises(TypeError, match="integer"):
        Mesh([[0.0, 1.0, 2.0]])
    with pytest.raises(ValueError, match="negative"):
        Mesh([[0, -1, 2]])
    with pytest.raises(ValueError, match="face_colors"):
        Mesh([[0, 1, 2]], face_colors=torch.ones(2, 3))
    with pytest.raises(ValueError, match="uv"):
        Mesh([[0, 1, 2]], texture=torch.ones(4, 4, 3))

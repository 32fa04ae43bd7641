"""The rasterizer's two kernel shapes (``runtime.raster_shape``): the GPU's ``pixel`` shape
(one thread per (frame, pixel) forward, per tile entry backward), forced on the CPU with
``GRADSIM_RASTER_SHAPE``, gives the CPU's ``tile`` shape's images and gradients, in the
soft, hard and anti-aliased modes, with textures and with occlusion."""

import pytest
import torch
from test_render_soft import _random_faces, _two_mesh_scene

from gradsim_taichi import runtime
from gradsim_taichi.render import RasterSettings, SoftRasterFunction, hard_raster
from gradsim_taichi.render import soft_raster as K

f64 = torch.float64

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture
def launches(monkeypatch):
    """Records the ``pixels`` argument of every rasterizer kernel launch, by kernel name
    (so a test knows which shape really ran)."""
    seen = {}
    for module, name in ((K, "soft_forward"), (K, "soft_backward"),
                         (hard_raster, "hard_zbuffer")):
        kernel = getattr(module, name)

        def record(*args, _kernel=kernel, _name=name):
            seen.setdefault(_name, []).append(args[-1])
            return _kernel(*args)

        monkeypatch.setattr(module, name, record)
    return seen


def _in_shape(monkeypatch, shape, fn):
    monkeypatch.setenv("GRADSIM_RASTER_SHAPE", shape)
    assert runtime.raster_shape() == shape
    return fn()


def _assert_close(a, b, tol):
    assert a.shape == b.shape
    scale = max(1.0, b.abs().max().item())
    assert (a - b).abs().max().item() <= tol * scale, (a - b).abs().max().item()


def test_shape_choice_and_override(monkeypatch):
    monkeypatch.delenv("GRADSIM_RASTER_SHAPE", raising=False)
    assert runtime.raster_shape() == runtime.RASTER_SHAPES[runtime.info()["arch"]]
    assert runtime.RASTER_SHAPES == {"cpu": "tile", "cuda": "pixel"}
    monkeypatch.setenv("GRADSIM_RASTER_SHAPE", "pixel")
    assert runtime.raster_shape() == "pixel"
    monkeypatch.setenv("GRADSIM_RASTER_SHAPE", "tiles")
    with pytest.raises(ValueError, match="GRADSIM_RASTER_SHAPE"):
        runtime.raster_shape()


def _soft_images_and_grads(args, st):
    """Image and gradients of xy, z, col, tex, bg under a fixed random output weight."""
    leaves = [a.detach().requires_grad_() if i < 5 and a is not None else a
              for i, a in enumerate(args)]  # fmt: skip
    out = SoftRasterFunction.apply(*leaves, st)
    w = torch.rand(out.shape, generator=torch.Generator().manual_seed(7), dtype=f64)
    grads = torch.autograd.grad(out, leaves[:5], w)
    return out.detach(), grads


@pytest.mark.parametrize("tile", [4, 16])
def test_soft_pixel_shape_equals_tile_shape(monkeypatch, launches, tile):
    """Random overlapping textured faces (occlusion, culled corners, several tiles)."""
    H, W = 14, 19
    args = _random_faces(2, 9, H, W, seed=4)
    args[1][0, 2, 1] = 0.2  # a corner in front of near: culled
    st = RasterSettings(width=W, height=H, sigma=3e-3, gamma=3e-2, near=0.5, far=10.0, tile=tile)
    tile_out, tile_g = _in_shape(monkeypatch, "tile", lambda: _soft_images_and_grads(args, st))
    pix_out, pix_g = _in_shape(monkeypatch, "pixel", lambda: _soft_images_and_grads(args, st))
    assert launches["soft_forward"] == [0, 1] and launches["soft_backward"] == [0, 1]
    assert tile_out[..., 3].max() > 0.5 and tile_out[..., 3].min() < 0.5
    _assert_close(pix_out, tile_out, 1e-12)
    for a, b in zip(pix_g, tile_g, strict=True):
        assert b.abs().max() > 0
        _assert_close(a, b, 1e-10)


def _scene_images_and_grads(mode):
    """The textured quad in front of a ground (occlusion), two frames: image and the
    gradients of the quad's vertex positions and the ground's vertex colours."""
    r, verts = _two_mesh_scene(textured=True, W=22, H=17)
    r.mode = mode
    qv = torch.stack([verts[0], verts[0] + torch.tensor([0.13, 0.04, 0.0], dtype=f64)])
    qv.requires_grad_()
    colours = r.meshes[1].vertex_colors.detach().clone().requires_grad_()
    r.meshes[1].vertex_colors = colours
    out = r([qv, verts[1]])
    w = torch.rand(out.shape, generator=torch.Generator().manual_seed(3), dtype=f64)
    grads = torch.autograd.grad((out * w).sum(), [qv, colours])
    return out.detach(), grads


@pytest.mark.cuda
@pytest.mark.parametrize("mode", ["soft", "hard", "antialias"])
def test_renderer_pixel_shape_equals_tile_shape(monkeypatch, launches, mode):
    tile_out, tile_g = _in_shape(monkeypatch, "tile", lambda: _scene_images_and_grads(mode))
    pix_out, pix_g = _in_shape(monkeypatch, "pixel", lambda: _scene_images_and_grads(mode))
    kernel = "soft_forward" if mode == "soft" else "hard_zbuffer"
    assert launches[kernel] == [0, 1]
    # the scene covers part of the image (the quad stands in front of the ground)
    covered = (tile_out[..., 3] > 0.5).double().mean()
    assert 0.3 < covered < 0.95 and tile_out[..., :3].std() > 0.05
    _assert_close(pix_out, tile_out, 1e-12)
    for a, b in zip(pix_g, tile_g, strict=True):
        assert b.abs().max() > 0
        _assert_close(a, b, 1e-10)


def test_pixel_shape_with_nothing_in_view(monkeypatch, launches):
    """No tile entries at all (every face behind the camera): background, zero gradients."""
    r, verts = _two_mesh_scene(textured=True)
    monkeypatch.setenv("GRADSIM_RASTER_SHAPE", "pixel")
    qv = (verts[0] + torch.tensor([0.0, 0.0, 10.0], dtype=f64)).requires_grad_()
    out = r([qv, verts[1] + torch.tensor([0.0, 0.0, 10.0], dtype=f64)])
    out.sum().backward()
    assert launches["soft_backward"] == [1]
    assert torch.allclose(out[..., :3], torch.tensor([0.1, 0.2, 0.3], dtype=f64).expand(16, 20, 3))
    assert out[..., 3].abs().max() == 0 and qv.grad.abs().max() == 0


@pytest.mark.cuda
def test_pixel_shape_gradcheck(monkeypatch, launches):
    """The pixel shape's hand-written backward against float64 central differences."""
    monkeypatch.setenv("GRADSIM_RASTER_SHAPE", "pixel")
    H, W = 4, 5
    args = _random_faces(1, 3, H, W, seed=5)
    args[3] = args[3][:, :3, :3].contiguous()
    args[7] = torch.tensor([[3, 3], [2, 3]], dtype=torch.int32)
    st = RasterSettings(width=W, height=H, sigma=5e-2, gamma=5e-2, near=0.5, far=10.0, tile=2,
                        threshold=1e-12)  # fmt: skip
    inputs = tuple(a.detach().requires_grad_() for a in args[:5])

    def fn(xy, z, col, tex, bg):
        return SoftRasterFunction.apply(xy, z, col, tex, bg, *args[5:], st)

    assert torch.autograd.gradcheck(fn, inputs, eps=1e-6, atol=1e-6, nondet_tol=1e-12,
                                    fast_mode=True)  # fmt: skip
    assert set(launches["soft_backward"]) == {1}


def test_specular_flag_is_read_once_per_tensor_and_on_when_learned(monkeypatch):
    """Shading reads whether a mesh has a highlight once per specular tensor (each read
    waits for the device on CUDA), and always computes it for a learned specular, whose
    gradient at 0 is then the central difference's (the image is linear in it)."""
    r, verts = _two_mesh_scene(textured=False)
    quad = r.meshes[0]
    reads = []
    real_bool = torch.Tensor.__bool__
    monkeypatch.setattr(torch.Tensor, "__bool__",
                        lambda t: reads.append(t.shape) or real_bool(t))  # fmt: skip
    quad.specular = torch.tensor(0.5, dtype=f64)
    assert quad._uses_specular() and quad._uses_specular() and len(reads) == 1
    quad.specular.zero_()  # changed in place: read again
    assert not quad._uses_specular() and len(reads) == 2
    monkeypatch.setattr(torch.Tensor, "__bool__", real_bool)
    spec = torch.tensor(0.0, dtype=f64, requires_grad=True)
    quad.specular = spec
    assert quad._uses_specular() and len(reads) == 2
    w = torch.rand(r.camera.height, r.camera.width, 4, generator=torch.Generator().manual_seed(2),
                   dtype=f64)  # fmt: skip
    (grad,) = torch.autograd.grad((r(verts) * w).sum(), [spec])
    h = 1e-3
    with torch.no_grad():
        quad.specular = torch.tensor(h, dtype=f64)
        up = (r(verts) * w).sum()
        quad.specular = torch.tensor(-h, dtype=f64)
        down = (r(verts) * w).sum()
    fd = ((up - down) / (2 * h)).item()
    assert abs(fd) > 1e-3 and abs(grad.item() - fd) < 1e-8 * abs(fd)


def test_hard_mode_reads_no_texture_sizes_back(monkeypatch):
    """The hard image re-shades learned textured pixels in torch with the texture sizes the
    rasterizer kept on the host: no read of ``texsize`` per texture per render (the one
    scalar read left is the binning's entry count, see ``tiles.bin_faces``)."""
    import sys

    from gradsim_taichi.render.texture import sample_bilinear

    r, verts = _two_mesh_scene(textured=True)
    r.mode = "hard"
    qv = verts[0].clone().requires_grad_()
    r([qv, verts[1]])  # reads each mesh's faces once
    readers = []
    def spy(real):
        def read(t, *a, **k):
            readers.append(sys._getframe(1).f_code.co_name)
            return real(t, *a, **k)

        return read

    for name in ("__int__", "__index__", "tolist", "item"):
        monkeypatch.setattr(torch.Tensor, name, spy(getattr(torch.Tensor, name)))
    out = r([qv, verts[1]])
    out.sum().backward()
    assert qv.grad.abs().max() > 0
    assert set(readers) == {"bin_faces"}
    p, _ = r.prepare([qv, verts[1]])
    u = torch.tensor([0.3, 0.7], dtype=f64)
    tid = torch.tensor([0, -1])
    readers.clear()
    host = sample_bilinear(p["tex"], p["texsize"], tid, u, u, p["tex_sizes"])
    assert readers == []
    assert torch.equal(host, sample_bilinear(p["tex"], p["texsize"], tid, u, u))
    assert readers == ["sample_bilinear"]  # without the host sizes, texsize is read

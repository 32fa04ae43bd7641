"""Soft rasterizer: agreement with the dense PyTorch reference, gradcheck, finite
differences, occlusion and the soft -> hard limit."""

import math

import pytest
import torch
from softras_reference import soft_rasterize_reference

from gradsim_taichi.render import (
    AmbientLight,
    Camera,
    DirectionalLight,
    Mesh,
    RasterSettings,
    SoftRasterFunction,
    SoftRasterizer,
)

f64 = torch.float64


# tiny images: torch's thread pool only adds latency (see conftest.one_torch_thread)
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _random_faces(F, T, H, W, seed=0, tex=True):
    g = torch.Generator().manual_seed(seed)
    xy = torch.rand(F, T, 3, 2, generator=g, dtype=f64) * torch.tensor([W * 2 / H, 2.0], dtype=f64)
    z = 1 + 3 * torch.rand(F, T, 3, generator=g, dtype=f64)
    col = torch.rand(F, T, 18, generator=g, dtype=f64)
    texture = torch.rand(2, 5, 7, 3, generator=g, dtype=f64) if tex else None
    texsize = torch.tensor([[5, 7], [4, 6]], dtype=torch.int32)
    texid = torch.tensor([(0, -1, 1)[t % 3] if tex else -1 for t in range(T)], dtype=torch.int32)
    uv = torch.rand(T, 6, generator=g, dtype=f64)
    bg = torch.rand(H, W, 3, generator=g, dtype=f64)
    return [xy, z, col, texture, bg, uv, texid, texsize]


def _reference(args, st, rows=None):
    return soft_rasterize_reference(
        *args, sigma=st.sigma, gamma=st.gamma, near=st.near, far=st.far, eps=st.eps,
        threshold=st.threshold, rows=rows,
    )  # fmt: skip


def _compare_with_reference(args, st, diff_idx=(0, 1, 2, 3, 4)):
    for i in diff_idx:
        if args[i] is not None:
            args[i] = args[i].detach().requires_grad_()
    ours = SoftRasterFunction.apply(*args, st)
    ref = _reference(args, st)
    assert ours.shape == ref.shape
    assert (ours - ref).abs().max().item() < 1e-10
    assert ref[..., 3].max() > 0.5, "scene should cover some pixels"
    wrt = [args[i] for i in diff_idx if args[i] is not None]
    gout = torch.rand(ours.shape, generator=torch.Generator().manual_seed(7), dtype=f64)
    g_ours = torch.autograd.grad(ours, wrt, gout)
    g_ref = torch.autograd.grad(ref, wrt, gout)
    for a, b in zip(g_ours, g_ref, strict=True):
        assert b.abs().max() > 0
        assert (a - b).abs().max().item() < 1e-10 * max(1.0, b.abs().max().item())


@pytest.mark.parametrize("tile", [4, 16])
def test_matches_reference_random_faces(tile):
    H, W = 14, 19
    args = _random_faces(2, 7, H, W)
    st = RasterSettings(width=W, height=H, sigma=3e-3, gamma=3e-2, near=0.5, far=10.0, tile=tile)
    _compare_with_reference(args, st)


def test_matches_reference_sharp_settings_and_culling():
    H, W = 16, 16
    args = _random_faces(1, 9, H, W, seed=3, tex=False)
    args[1][0, 2, 1] = 0.2  # a corner in front of near: face culled
    st = RasterSettings(width=W, height=H, sigma=1e-4, gamma=1e-4, near=0.5, far=10.0, tile=8)
    _compare_with_reference(args, st, diff_idx=(0, 1, 2, 4))


def _two_mesh_scene(W=20, H=16, textured=True, sigma=2e-3, gamma=1e-2, eye=(0.3, 1.2, 3.0)):
    """A textured quad standing on a coloured ground plane."""
    quad_v = torch.tensor([[-0.5, 0, 0], [0.5, 0, 0], [0.5, 1, 0], [-0.5, 1, 0.1]], dtype=f64)
    quad_f = [[0, 1, 2], [0, 2, 3]]
    g = torch.Generator().manual_seed(1)
    texture = torch.rand(6, 5, 3, generator=g, dtype=f64)
    uv = torch.tensor([[0, 0], [1, 0], [1, 1], [0, 1]], dtype=f64)
    ground_v = torch.tensor([[-2, 0, -2], [2, 0, -2], [2, 0, 2], [-2, 0, 2]], dtype=f64) - 0.01
    ground_f = [[0, 2, 1], [0, 3, 2]]
    quad = Mesh(quad_f, uv=uv, texture=texture) if textured else Mesh(quad_f, color=(0.9, 0.2, 0.1))
    ground = Mesh(ground_f, vertex_colors=torch.rand(4, 3, generator=g, dtype=f64), smooth=False)
    cam = Camera.look_at(eye, (0, 0.4, 0), fov_y_deg=50, width=W, height=H)
    lights = [AmbientLight(0.4), DirectionalLight((0.2, -1.0, -0.5), 0.6)]
    r = SoftRasterizer(cam, [quad, ground], lights=lights, sigma=sigma, gamma=gamma,
                       background=(0.1, 0.2, 0.3), threshold=1e-12)  # fmt: skip
    return r, [quad_v, ground_v]


def test_full_pipeline_matches_reference():
    r, verts = _two_mesh_scene()
    frames = torch.stack([verts[0], verts[0] + torch.tensor([0.1, 0.05, 0.0], dtype=f64)])
    p, _ = r.prepare([frames, verts[1]])
    args = [p[k] for k in ("xy", "z", "col", "tex", "bg", "uv", "texid", "texsize")]
    args[4] = args[4].contiguous()
    _compare_with_reference(args, r.settings)


@pytest.mark.cuda
def test_gradcheck_function():
    H, W = 4, 5
    args = _random_faces(1, 3, H, W, seed=5)
    args[3] = args[3][:, :3, :3].contiguous()  # small textures keep the check fast
    args[7] = torch.tensor([[3, 3], [2, 3]], dtype=torch.int32)
    st = RasterSettings(width=W, height=H, sigma=5e-2, gamma=5e-2, near=0.5, far=10.0, tile=4,
                        threshold=1e-12)  # fmt: skip
    for i in (0, 1, 2, 3, 4):
        args[i] = args[i].detach().requires_grad_()

    def fn(xy, z, col, tex, bg):
        return SoftRasterFunction.apply(xy, z, col, tex, bg, *args[5:], st)

    inputs = tuple(args[:5])
    # every Jacobian entry for the geometry, a random projection for all inputs
    assert torch.autograd.gradcheck(
        lambda xy, z: fn(xy, z, *inputs[2:]), inputs[:2], eps=1e-6, atol=1e-6, nondet_tol=1e-12
    )
    assert torch.autograd.gradcheck(
        fn, inputs, eps=1e-6, atol=1e-6, nondet_tol=1e-12, fast_mode=True
    )


def _fd_check(loss_fn, param, n_probe=6, h=1e-6, seed=0):
    """Central differences of ``loss_fn()`` in a few coordinates of ``param`` vs autograd."""
    param.grad = None
    loss = loss_fn()
    (grad,) = torch.autograd.grad(loss, [param])
    flat = param.data.view(-1)
    g = torch.Generator().manual_seed(seed)
    idx = torch.randperm(flat.numel(), generator=g)[:n_probe]
    biggest = grad.abs().max().item()
    assert biggest > 0, "gradient is identically zero"
    for k in idx.tolist():
        old = flat[k].item()
        flat[k] = old + h
        lp = loss_fn().item()
        flat[k] = old - h
        lm = loss_fn().item()
        flat[k] = old
        fd = (lp - lm) / (2 * h)
        assert abs(fd - grad.view(-1)[k].item()) < 1e-6 * max(1.0, biggest), (
            k,
            fd,
            grad.view(-1)[k],
        )


def _weights(shape):
    return torch.rand(shape, generator=torch.Generator().manual_seed(11), dtype=f64)


def test_fd_positions_and_vertex_colours():
    r, verts = _two_mesh_scene(textured=False)
    wgt = _weights((r.camera.height, r.camera.width, 4))
    qv = verts[0].clone().requires_grad_()
    _fd_check(lambda: (r([qv, verts[1]]) * wgt).sum(), qv, n_probe=8)
    colours = r.meshes[1].vertex_colors.detach().clone().requires_grad_()
    r.meshes[1].vertex_colors = colours
    _fd_check(lambda: (r([verts[0], verts[1]]) * wgt).sum(), colours)


def test_fd_texture_lights_face_colours_background():
    r, verts = _two_mesh_scene(textured=True)
    wgt = _weights((r.camera.height, r.camera.width, 4))

    def loss():
        return (r(verts) * wgt).sum()

    tex = r.meshes[0].texture.detach().clone().requires_grad_()
    r.meshes[0].texture = tex
    _fd_check(loss, tex, n_probe=8)
    light = r.lights[1]
    light.direction = light.direction.detach().clone().requires_grad_()
    _fd_check(loss, light.direction, n_probe=3)
    light.intensity = light.intensity.detach().clone().requires_grad_()
    _fd_check(loss, light.intensity, n_probe=1)
    r.lights[0].color = r.lights[0].color.detach().clone().requires_grad_()
    _fd_check(loss, r.lights[0].color, n_probe=3)
    bg = torch.tensor([0.1, 0.2, 0.3], dtype=f64, requires_grad=True)
    r.background = bg
    _fd_check(loss, bg, n_probe=3)
    bg_image = torch.rand(16, 20, 3, generator=torch.Generator().manual_seed(2), dtype=f64)
    r.background = bg_image.requires_grad_()
    _fd_check(loss, bg_image, n_probe=4)
    fc = torch.tensor([[0.2, 0.5, 0.9], [0.7, 0.1, 0.3]], dtype=f64, requires_grad=True)
    r.meshes[1].vertex_colors = None
    r.meshes[1].face_colors = fc
    _fd_check(loss, fc, n_probe=6)


def test_fd_camera_pose_and_specular():
    r, verts = _two_mesh_scene(textured=False)
    r.meshes[0].specular = torch.tensor(0.5, dtype=f64)
    r.meshes[0].smooth = True
    wgt = _weights((r.camera.height, r.camera.width, 4))
    eye = torch.tensor([0.3, 1.2, 3.0], dtype=f64, requires_grad=True)
    r.camera = Camera.look_at(eye, (0, 0.4, 0), fov_y_deg=50, width=20, height=16)
    _fd_check(lambda: (r(verts) * wgt).sum(), eye, n_probe=3)
    T = torch.eye(4, dtype=f64)
    T[:3, :3] = torch.tensor([[1, 0, 0], [0, -1, 0], [0, 0, -1]], dtype=f64)
    T[:3, 3] = torch.tensor([0.013, 0.52, 3.07], dtype=f64)
    T.requires_grad_()
    # generic numbers: no pixel centre exactly on an edge (the coverage has a kink there)
    r.camera = Camera.from_extrinsic(T, 18.3, 18.1, 10.37, 7.91, width=20, height=16)
    _fd_check(lambda: (r(verts) * wgt).sum(), T, n_probe=6)


def _two_triangles(near_first: bool):
    """A red triangle at z = 0.5 in front of a blue one at z = 0 (camera at +z)."""
    red = torch.tensor([[-1, -1, 0.5], [1, -1, 0.5], [0, 1, 0.5]], dtype=f64)
    blue = torch.tensor([[-1, 1, 0.0], [0, -1, 0.0], [1, 1, 0.0]], dtype=f64)
    meshes = [
        Mesh([[0, 1, 2]], color=(1, 0, 0), lit=False),
        Mesh([[0, 1, 2]], color=(0, 0, 1), lit=False),
    ]
    verts = [red, blue]
    if not near_first:
        meshes, verts = meshes[::-1], verts[::-1]
    return meshes, verts


@pytest.mark.parametrize("near_first", [True, False])
def test_occlusion(near_first):
    meshes, verts = _two_triangles(near_first)
    cam = Camera.look_at((0, 0, 4.0), (0, 0, 0), fov_y_deg=40, width=32, height=32)
    hard = SoftRasterizer(cam, meshes, mode="hard")(verts)
    soft = SoftRasterizer(cam, meshes, sigma=1e-4, gamma=1e-4)(verts)
    centre = (16, 16)  # inside both triangles
    assert hard[centre].tolist() == [1.0, 0.0, 0.0, 1.0]
    assert soft[centre][0] > 0.99 and soft[centre][2] < 0.01
    # a point only the blue triangle covers: near its top-left corner
    uv, _ = cam.project(torch.tensor([[-0.75, 0.8, 0.0]], dtype=f64))
    j, i = int(uv[0, 0]), int(uv[0, 1])
    assert hard[i, j].tolist() == [0.0, 0.0, 1.0, 1.0]
    assert soft[i, j][2] > 0.99


def test_soft_converges_to_hard():
    import trimesh

    ico = trimesh.creation.icosphere(subdivisions=2)
    cam = Camera.look_at((0, 0.5, 3.0), (0, 0, 0), fov_y_deg=40, width=48, height=40)
    mesh = Mesh(ico.faces, face_colors=torch.rand(len(ico.faces), 3, dtype=f64))
    v = torch.tensor(ico.vertices, dtype=f64)
    hard = SoftRasterizer(cam, mesh, mode="hard", background=(0.5, 0.5, 0.5))(v)
    errs = []
    for sigma in (1e-3, 1e-4, 1e-5, 1e-7):
        soft = SoftRasterizer(cam, mesh, sigma=sigma, gamma=1e-5, background=(0.5, 0.5, 0.5))(v)
        errs.append((soft - hard).abs().mean().item())
    assert all(a > b for a, b in zip(errs, errs[1:], strict=False)), errs
    assert errs[-1] < 2e-3, errs


def test_batch_equals_single_frames_and_static_mesh():
    r, verts = _two_mesh_scene(textured=True, W=24, H=18)
    shift = torch.tensor([0.2, 0.0, 0.0], dtype=f64)
    frames = torch.stack([verts[0], verts[0] + shift, verts[0] - shift])
    batch = r([frames, verts[1]])
    assert batch.shape == (3, 18, 24, 4)
    for k in range(3):
        single = r([frames[k], verts[1]])
        assert single.shape == (18, 24, 4)
        assert torch.equal(single, batch[k])
    assert not torch.equal(batch[0], batch[1])


def test_transparent_background_and_empty_view():
    r, verts = _two_mesh_scene(textured=False)
    behind = [v + torch.tensor([0.0, 0.0, 10.0], dtype=f64) for v in verts]  # behind the camera
    out = r(behind)
    assert torch.allclose(out[..., :3], torch.tensor([0.1, 0.2, 0.3], dtype=f64).expand(16, 20, 3))
    assert out[..., 3].abs().max() == 0


@pytest.mark.precision("f32")
def test_float32_runtime_renders():
    meshes, verts = _two_triangles(True)
    cam = Camera.look_at((0, 0, 4.0), (0, 0, 0), fov_y_deg=40, width=16, height=16)
    verts = [v.float().requires_grad_() for v in verts]
    out = SoftRasterizer(cam, meshes, sigma=1e-3)(verts)
    assert out.dtype == torch.float32 and math.isclose(out[8, 8, 0].item(), 1.0, abs_tol=1e-3)
    out.sum().backward()
    assert torch.isfinite(verts[0].grad).all() and verts[0].grad.abs().sum() > 0


def test_taichi_binning_matches_torch_binning():
    from gradsim_taichi.render.raster_autograd import pack_geometry
    from gradsim_taichi.render.tiles import bin_faces, bin_faces_torch, face_valid

    xy, z = _random_faces(3, 40, 50, 70, seed=9, tex=False)[:2]
    xy = xy * 1.4 - 0.3  # some faces leave the image
    geom = pack_geometry(xy, z)
    geom[0, 5, 7] = 0.1  # behind near
    geom[1, 7, 0] = float("nan")
    geom[2, 3, 2:4] = geom[2, 3, 0:2]  # degenerate
    for reach in (0.0, 0.05):
        a = bin_faces(geom, 0.5, 70, 50, reach, 8)
        b = bin_faces_torch(geom, face_valid(geom, 0.5), 70, 50, reach, 8)
        for k in ("bbox", "tile_start", "entry_face", "entry_tile", "entry_key"):
            assert torch.equal(getattr(a, k), getattr(b, k)), k
        assert a.entry_key.numel() > 0
        # each entry's tile is the one whose range of tile_start holds it
        tiles = torch.arange(a.tile_start.numel() - 1)
        assert torch.equal(a.entry_tile, tiles.repeat_interleave(a.tile_start.diff().long()))


def test_function_input_errors():
    H, W = 6, 7
    args = _random_faces(1, 3, H, W)
    st = RasterSettings(width=W, height=H)
    bad = list(args)
    bad[0] = args[0].float()
    with pytest.raises(TypeError, match="xy has dtype"):
        SoftRasterFunction.apply(*bad, st)
    bad = list(args)
    bad[4] = args[4][:, :5]
    with pytest.raises(ValueError, match="bg must have shape"):
        SoftRasterFunction.apply(*bad, st)
    bad = list(args)
    bad[6] = torch.tensor([0, 5, -1], dtype=torch.int32)
    with pytest.raises(ValueError, match="past the 2 textures"):
        SoftRasterFunction.apply(*bad, st)


def test_texture_ids_and_face_indices_are_not_read_back_on_every_render(monkeypatch):
    """The rasterizer tells the function the largest texid it built (no read of texid from
    the device: a host sync on CUDA), and a mesh reads its faces' largest index once per
    faces tensor, not on every render."""
    r, verts = _two_mesh_scene(textured=True)
    p, _ = r.prepare(verts)
    assert p["texid_max"] == int(p["texid"].max()) == 0
    args = [p[k] for k in ("xy", "z", "col", "tex", "bg", "uv", "texid", "texsize")]
    with pytest.raises(ValueError, match="texid 3 is past the 1 textures"):  # the bound is used
        SoftRasterFunction.apply(*args, r.settings, None, 3)
    r(verts)  # reads each mesh's faces once
    maxes = []
    real_max = torch.Tensor.max
    monkeypatch.setattr(torch.Tensor, "max", lambda t, *a, **k: maxes.append(t.shape)
                        or real_max(t, *a, **k))
    r(verts)
    r(verts)
    assert maxes == []  # neither texid.max() nor faces.max() per render
    quad = r.meshes[0]
    quad.faces = torch.tensor([[0, 1, 2]])  # a new faces tensor is read again
    assert quad._faces_max() == 2 and len(maxes) == 1
    quad.faces[0, 0] = 3  # so is one changed in place
    assert quad._faces_max() == 3 and len(maxes) == 2


def test_static_meshes_are_skipped_in_the_backward_pass_exactly():
    """A mesh whose positions, colours and texture need no gradient (a static ground)
    gets face_grad 0 and the backward pass skips its faces: the moving mesh's gradients
    are bitwise those of a pass over every face. A static mesh whose colour is learned
    is not skipped."""
    r, verts = _two_mesh_scene(textured=True, W=24, H=18)
    shift = torch.tensor([0.1, 0.05, 0.0], dtype=f64)
    moving = torch.stack([verts[0], verts[0] + shift]).requires_grad_()
    p, _ = r.prepare([moving, verts[1]])
    T0 = r.meshes[0].num_faces
    assert p["face_grad"][:T0].eq(1).all() and p["face_grad"][T0:].eq(0).all()
    args = [p[k] for k in ("xy", "z", "col", "tex", "bg", "uv", "texid", "texsize")]
    gout = torch.rand(2, 18, 24, 4, generator=torch.Generator().manual_seed(1), dtype=f64)
    skipped = torch.autograd.grad(SoftRasterFunction.apply(*args, r.settings, p["face_grad"]),
                                  moving, gout, retain_graph=True)[0]
    every = torch.autograd.grad(SoftRasterFunction.apply(*args, r.settings), moving, gout)[0]
    assert float(every.abs().max()) > 0 and torch.equal(skipped, every)
    r.meshes[1].vertex_colors = r.meshes[1].vertex_colors.detach().clone().requires_grad_()
    p, _ = r.prepare([moving, verts[1]])
    assert p["face_grad"].eq(1).all()

"""Antialiased mode (z-buffer + analytic edge anti-aliasing): exact edge coverage, a
supersampled z-buffered reference of the same meshes, and float64 finite differences of
the image with respect to vertex positions at silhouette and occlusion edges."""

import numpy as np
import pytest
import torch

from gradsim_taichi.render import Camera, Mesh, SoftRasterizer
from gradsim_taichi.render.antialias import antialias, face_neighbours
from gradsim_taichi.render.raster_autograd import RasterSettings, hard_face_ids

f64 = torch.float64
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _screen_render(xy, z, colors, H, W, bg=(0.0, 0.0, 0.0)):
    """Antialiased RGBA of flat-coloured screen-space triangles ``xy [T, 3, 2]`` (pixel
    units), corner depths ``z [T, 3]``: the stage without camera or shading."""
    st = RasterSettings(width=W, height=H, near=0.01, far=100.0)
    s = 2.0 / H
    xys, zs = (xy * s)[None], z[None]
    ids = hard_face_ids(xys, zs, st)
    hit = ids >= 0
    col = torch.cat([colors, torch.ones(len(colors), 1, dtype=f64)], -1)[ids.clamp_min(0)]
    bgc = torch.tensor([*bg, 0.0], dtype=f64)
    img = torch.where(hit[..., None], col, bgc)
    return antialias(img, ids, xys, zs)[0]


def _coverage(poly_edges, H, W, n=64):
    """Supersampled (n x n per pixel) coverage of the half-plane intersection."""
    u = (torch.arange(n, dtype=f64) + 0.5) / n
    ys = (torch.arange(H, dtype=f64)[:, None] + u[None]).reshape(-1)
    xs = (torch.arange(W, dtype=f64)[:, None] + u[None]).reshape(-1)
    Y, X = torch.meshgrid(ys, xs, indexing="ij")
    inside = torch.ones_like(X, dtype=torch.bool)
    for (ax, ay), (bx, by) in poly_edges:
        inside &= (bx - ax) * (Y - ay) - (by - ay) * (X - ax) >= 0
    return inside.to(f64).reshape(H, n, W, n).mean((1, 3))


@pytest.mark.parametrize("slope", [0.0, 0.37, -0.8, 1.6])
def test_straight_edge_coverage(slope):
    """A straight edge over the background, against its exact covered area per pixel
    (sampled 64 x 64): the anti-aliased alpha is exact where the edge crosses two
    opposite sides of a pixel; where it also crosses into the next pixel within the
    row, off by at most the cut corner, |m| / 8 for the edge's slope m against the axis
    it is handled along; each row's (column's) total is exact."""
    H = W = 24
    x0 = 11.3  # the edge: x = x0 + slope * (y - 12), steep (|slope| < 1) or shallow
    steep = abs(slope) <= 1
    if steep:
        a = (x0 + slope * (-300 - 12), -300.0)
        b = (x0 + slope * (300 - 12), 300.0)
        far = (-300.0, 0.0)  # the covered side: x smaller than the edge
    else:  # shallow: y = 12 + (x - x0) / slope, covered below
        a = (-300.0, 12 + (-300 - x0) / slope)
        b = (300.0, 12 + (300 - x0) / slope)
        far = (0.0, 300.0)
    tri = torch.tensor([[a, b, far]], dtype=f64)
    if float(torch.linalg.det(torch.stack([tri[0, 1] - tri[0, 0], tri[0, 2] - tri[0, 0]]))) < 0:
        tri = tri[:, [0, 2, 1]]
    alpha = _screen_render(tri, torch.ones(1, 3, dtype=f64), torch.ones(1, 3, dtype=f64),
                           H, W)[..., 3]
    t = tri[0].tolist()
    exact = _coverage([(t[0], t[1]), (t[1], t[2]), (t[2], t[0])], H, W)
    cut = (exact > 0) & (exact < 1)
    assert cut.sum() >= H - 2
    m = abs(slope) if steep else 1 / abs(slope)
    sampling = 1.0 / 64
    err = (alpha - exact).abs()
    assert err.max() < m / 8 + sampling, (err.max(), m / 8)
    totals = (alpha - exact).sum(1 if steep else 0).abs()
    assert totals.max() < 2 * sampling, totals.max()
    if m == 0:
        assert err.max() < sampling
    # the hard image is off by up to half a pixel where the edge cuts
    assert ((alpha > 0.5).to(f64) - exact).abs()[cut].max() > 0.2


def _scene(shape="box"):
    import trimesh

    mesh = {"box": lambda: trimesh.creation.box((0.5, 0.35, 0.3)),
            "cone": lambda: trimesh.creation.cone(0.25, 0.5, sections=16),
            "cylinder": lambda: trimesh.creation.cylinder(0.2, 0.45, sections=20)}[shape]()
    rot = trimesh.transformations.rotation_matrix(0.5, [0.3, 1.0, 0.2])
    mesh.apply_transform(rot)
    mesh.apply_translation([0.05, 0.3, 0.0])
    n = np.cross(mesh.vertices[mesh.faces[:, 1]] - mesh.vertices[mesh.faces[:, 0]],
                 mesh.vertices[mesh.faces[:, 2]] - mesh.vertices[mesh.faces[:, 0]])
    n /= np.linalg.norm(n, axis=1, keepdims=True)
    body = Mesh(mesh.faces, face_colors=np.clip(0.5 + 0.4 * n, 0, 1), smooth=False)
    ground = Mesh([[0, 1, 2], [0, 2, 3]], color=(0.4, 0.6, 0.4))
    gv = torch.tensor([[-2, 0, -2], [-2, 0, 2], [2, 0, 2], [2, 0, -2]], dtype=f64)
    return [body, ground], [torch.tensor(mesh.vertices, dtype=f64), gv]


def _camera(scale=1, size=48):
    return Camera.look_at((0.3, 0.9, 1.6), (0, 0.25, 0), fov_y_deg=40,
                          width=size * scale, height=size * scale, near=0.1, far=10)


@pytest.mark.parametrize("shape", ["box", "cone", "cylinder"])
def test_closer_to_supersampled_reference_than_hard_and_soft(shape):
    """MSE to a z-buffered render at 8 x 8 samples per pixel of the same meshes (a camera
    of 8x the resolution, pooled): the antialiased image, alone and in 2 x 2 blocks (its
    default), against the hard and soft ones."""
    meshes, verts = _scene(shape)
    S = 8
    ref = SoftRasterizer(_camera(S), meshes, mode="hard", background=(1, 1, 1))(verts)
    ref = torch.nn.functional.avg_pool2d(ref.permute(2, 0, 1), S).permute(1, 2, 0)
    err = {}
    for mode, ss in (("soft", 1), ("hard", 1), ("antialias", 1), ("antialias", 2)):
        img = SoftRasterizer(_camera(), meshes, mode=mode, gamma=1e-2, threshold=1e-30,
                             background=(1, 1, 1), supersample=ss)(verts)
        err[mode, ss] = float(((img[..., :3] - ref[..., :3]) ** 2).mean())
    # measured 7.5e-6 to 3.9e-5 on these 48 px scenes (4e-5 to 7e-5 before the faces
    # that no pixel centre sees got their own colour and the edges shared the axes), far
    # below the hard image's; in 2 x 2 blocks 2.0e-6 to 3.0e-6 (5.6e-6 to 1.0e-5 before)
    assert err["antialias", 1] < 6e-5, err
    assert err["antialias", 1] < err["hard", 1] / 8 < err["soft", 1] / 8, err
    assert err["antialias", 2] < min(5e-6, err["antialias", 1] / 1.2), err
    # the supersampled hard image is the finer camera's, pooled
    same = SoftRasterizer(_camera(), meshes, mode="hard", background=(1, 1, 1),
                          supersample=S)(verts)
    assert torch.allclose(same, ref, atol=1e-12)
    assert SoftRasterizer(_camera(), meshes, mode="antialias").supersample == 2
    with pytest.raises(ValueError, match="supersample"):
        SoftRasterizer(_camera(), meshes, mode="antialias", supersample=0)


@pytest.mark.parametrize("shape, most, largest",
                         [("box", 4, 0.12), ("cone", 2, 0.06), ("cylinder", 0, 0.02)])
def test_few_jumps_as_the_body_slides(shape, most, largest):
    """The body slid by a pixel in 200 steps: a continuous image changes by ~4e-3 a step;
    count the steps where some pixel jumps by more than 0.05. Measured: box 2 (largest
    0.08), cone 0 (0.037), cylinder 0 (0.0065); 20 (0.40), 63 (0.38) on the box and the
    cone when each edge took one pixel axis and a face between a pair's centres the
    front's colour, and the cone 20 (0.08), the cylinder 24 (0.13) when the faces crossed
    took one colour, the first one's (benchmarks/antialias_jumps.py)."""
    meshes, verts = _scene(shape)
    r = SoftRasterizer(_camera(), meshes, mode="antialias", supersample=1)
    d = torch.tensor([1.0, 0.37, 0.2], dtype=f64) / 48
    n = 200
    frames = torch.stack([verts[0] + d * k / n for k in range(n + 1)])
    with torch.no_grad():
        img = r([frames, verts[1].expand(n + 1, 4, 3)])[..., :3]
    change = (img[1:] - img[:-1]).abs().amax((1, 2, 3))
    assert float(change.median()) < 1e-2
    assert int((change > 0.05).sum()) <= most, int((change > 0.05).sum())
    assert float(change.max()) < largest, float(change.max())


def _fd_image_check(render, x, seed=0, h=1e-6, rtol=1e-6):
    """Directional derivative of sum(w * render(x)) against float64 central differences."""
    g = torch.Generator().manual_seed(seed)
    out = render(x)
    w = torch.rand(out.shape, generator=g, dtype=f64)
    x = x.detach().requires_grad_(True)
    (render(x) * w).sum().backward()
    d = torch.randn(x.shape, generator=g, dtype=f64)
    with torch.no_grad():
        num = ((render(x + h * d) * w).sum() - (render(x - h * d) * w).sum()) / (2 * h)
    ana = (x.grad * d).sum()
    assert abs(ana - num) <= rtol * abs(num) + 1e-9, (float(ana), float(num))
    return float(ana)


def test_gradients_at_silhouette_and_occlusion_edges():
    """Two overlapping triangles over the background: the front one's edges are both
    silhouettes (against the background) and occluding edges (against the back one)."""
    H = W = 20
    z = torch.tensor([[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]], dtype=f64)
    colors = torch.tensor([[0.9, 0.2, 0.1], [0.1, 0.3, 0.8]], dtype=f64)
    base = torch.tensor([[[3.3, 2.7], [15.2, 5.1], [6.1, 16.4]],
                         [[8.2, 3.9], [18.6, 12.3], [4.4, 18.1]]], dtype=f64)

    def render(xy):
        return _screen_render(xy, z, colors, H, W, bg=(1.0, 1.0, 1.0))

    ids = hard_face_ids((base * 2 / H)[None], z[None],
                        RasterSettings(width=W, height=H, near=0.01, far=100.0))[0]
    assert (ids == 0).any() and (ids == 1).any() and (ids == -1).any()
    for seed in range(4):
        assert abs(_fd_image_check(render, base, seed)) > 1e-3


def test_gradients_through_camera_projection_3d():
    """Vertex positions in 3D -> antialiased image of a box over the ground: float64
    central differences, and the gradient is not zero (silhouettes move the image)."""
    meshes, verts = _scene("box")
    r = SoftRasterizer(_camera(size=32), meshes, mode="antialias")

    def render(v):
        return r([v, verts[1]])

    for seed in range(2):
        assert abs(_fd_image_check(render, verts[0], seed, h=1e-7)) > 1e-3


def test_gradients_of_a_rigid_motion_of_a_non_convex_body():
    """The rigid-mass L-shape (a non-convex prism whose planar caps are fans of thin
    triangles, seen through the surface walk) moved rigidly: float64 central
    differences of its antialiased image, at three frames of its tumble."""
    from gradsim_taichi.scenes import make_scene

    scene = make_scene("rigid-mass", shape="lshape", width=32, height=32)
    scene.render_mode = "antialias"
    scene.build()
    posed = [v.detach() for v in scene.posed_vertices(
        scene.simulate(scene.true_values(scene.params)), None)]
    g = torch.Generator().manual_seed(0)
    for frame in (5, 20, 35):
        body, stage = posed[0][frame], posed[1][frame] if posed[1].dim() == 3 else posed[1]
        w, u = torch.randn(3, generator=g, dtype=f64), torch.randn(3, generator=g, dtype=f64)
        turn = torch.linalg.cross(w.expand_as(body), body - body.mean(0)) + u

        def render(a, body=body, turn=turn, stage=stage):
            return scene.renderer([body + a * turn, stage])

        assert abs(_fd_image_check(render, torch.zeros((), dtype=f64), frame, h=1e-7,
                                   rtol=1e-5)) > 1e-3


def test_follows_thin_faces_to_the_silhouette():
    """A fan of thin faces (a cone's side) meets the background at its outer edge: with
    the face adjacency the crossing is found there, not at the inner crease."""
    meshes, verts = _scene("cone")
    S = 8
    ref = SoftRasterizer(_camera(S), meshes[:1], mode="hard")(verts[:1])
    ref = torch.nn.functional.avg_pool2d(ref.permute(2, 0, 1), S).permute(1, 2, 0)
    r = SoftRasterizer(_camera(), meshes[:1], mode="antialias", supersample=1)
    p, _ = r.prepare(verts[:1])
    ids = hard_face_ids(p["xy"], p["z"], r.settings)
    hard = SoftRasterizer(_camera(), meshes[:1], mode="hard")(verts[:1])[None]
    alone = antialias(hard, ids, p["xy"], p["z"])[0]
    walked = antialias(hard, ids, p["xy"], p["z"], r.neighbours())[0]
    e_alone = float(((alone[..., 3] - ref[..., 3]) ** 2).mean())
    e_walked = float(((walked[..., 3] - ref[..., 3]) ** 2).mean())
    assert e_walked < 0.5 * e_alone, (e_walked, e_alone)


def test_walks_many_thin_faces_to_the_silhouette():
    """A fine cylinder (128 sections) seen at 24 px: up to a dozen faces lie between a
    pixel centre and the silhouette; the walk crosses them all (measured coverage MSE
    against a 16 x 16 supersampled z-buffer 2.4e-5, largest error 0.058; 1.6e-3 and 0.39
    when a walk stopped after 8 faces and took an inner edge for the boundary)."""
    import trimesh

    mesh = trimesh.creation.cylinder(0.2, 0.45, sections=128)
    mesh.apply_transform(trimesh.transformations.rotation_matrix(1.2, [0.3, 1.0, 0.2]))
    mesh.apply_translation([0.05, 0.3, 0.0])
    v = torch.tensor(mesh.vertices, dtype=f64)

    def camera(scale):
        return Camera.look_at((0.3, 0.9, 1.6), (0, 0.25, 0), fov_y_deg=40, width=24 * scale,
                              height=24 * scale, near=0.1, far=10)
    ref = SoftRasterizer(camera(16), Mesh(mesh.faces), mode="hard").coverage(v)
    ref = torch.nn.functional.avg_pool2d(ref.permute(2, 0, 1), 16).permute(1, 2, 0)
    cov = SoftRasterizer(camera(1), Mesh(mesh.faces), mode="antialias",
                         supersample=1).coverage(v)
    assert float(((cov - ref) ** 2).mean()) < 1e-4
    assert float((cov - ref).abs().max()) < 0.1


def test_face_neighbours():
    faces = torch.tensor([[0, 1, 2], [2, 1, 3], [3, 1, 4], [5, 6, 7]])
    n = face_neighbours(faces)
    # face 0's edge opposite corner 0 is (1, 2), shared with face 1
    assert n[0].tolist() == [1, -1, -1]
    assert n[1].tolist() == [2, -1, 0]
    assert n[2].tolist() == [-1, -1, 1]
    assert n[3].tolist() == [-1, -1, -1]


def test_scene_render_mode_change_takes_effect():
    """Setting ``Scene.render_mode`` on a built scene makes its renderers again and keeps
    its model (no second compile of the physics' kernels); the image is the one of a
    scene built in that mode from the start, with the sun's shadows."""
    from gradsim_taichi.scenes import make_scene

    scene = make_scene("rigid-mass", frames=2, width=16, height=16)
    scene.ensure_built()
    assert scene.renderer.mode == "soft"
    sim = scene.sim
    scene.render_mode = "antialias"
    scene.ensure_built()
    assert scene.renderer.mode == "antialias" and scene.coverage_renderer.mode == "antialias"
    assert scene.sim is sim
    fresh = make_scene("rigid-mass", frames=2, width=16, height=16)
    fresh.render_mode = "antialias"
    fresh.ensure_built()
    assert fresh.renderer.sun_shadows == scene.renderer.sun_shadows is not None
    values = scene.true_values(["mass"])
    with torch.no_grad():
        assert torch.equal(scene.render(scene.simulate(values)),
                           fresh.render(fresh.simulate(values)))


@pytest.mark.parametrize("mode", ["antialias", "hard", "soft"])
def test_coverage_is_the_renders_alpha(mode):
    """``coverage()`` (no shading) equals the alpha of the full render bit for bit, with
    its gradient, for a batch of frames and for one; the supersampled image's too."""
    meshes, verts = _scene("cylinder")
    frames = torch.stack([verts[0] + torch.tensor([0.02 * k, 0.0, 0.01 * k], dtype=f64)
                          for k in range(3)]).requires_grad_(True)
    for ss in ((1, 2) if mode == "antialias" else (1,)):
        r = SoftRasterizer(_camera(size=32), meshes[:1], mode=mode, supersample=ss)
        full, cov = r([frames])[..., 3:], r.coverage([frames])
        assert cov.shape == (3, 32, 32, 1) and torch.equal(cov, full)
        assert 0.0 < float(cov.mean()) < 1.0  # the body in view, not filling it
        assert cov.requires_grad and full.requires_grad
        if mode != "hard":  # (its coverage has a graph, with zero gradient)
            w = torch.rand(cov.shape, generator=torch.Generator().manual_seed(1), dtype=f64)
            g_full, = torch.autograd.grad((full * w).sum(), frames)
            g_cov, = torch.autograd.grad((cov * w).sum(), frames)
            assert torch.equal(g_cov, g_full) and float(g_cov.abs().sum()) > 0
        one = r.coverage(verts[0])
        assert one.shape == (32, 32, 1) and torch.equal(one, r(verts[0])[..., 3:])


def test_faces_no_pixel_sees_are_shaded_as_the_pixels_are():
    """The colour the anti-aliasing gives a face that a pair's segment crosses
    (``_colour_at``) is the hard image's at a pixel centre: with colours that vary over
    each face (per-vertex, smooth normals, specular), a texture-free mesh and the sun's
    self-shadow of an L-shape taken from the pixel given."""
    from gradsim_taichi.meshes import lshape_mesh
    from gradsim_taichi.render import AmbientLight, DirectionalLight
    from gradsim_taichi.render.rasterizer import _colour_at

    lsh = lshape_mesh()
    v = torch.tensor(lsh.vertices, dtype=f64)
    colours = 0.3 + 0.5 * (v - v.min(0).values) / (v.max(0).values - v.min(0).values)
    mesh = Mesh(lsh.faces, vertex_colors=colours, specular=0.3)
    cam = Camera.look_at((0.25, 0.9, 1.4), (0.05, 0.0, 0.0), fov_y_deg=35, width=48,
                         height=40)
    lights = [AmbientLight(0.3), DirectionalLight((1.0, -0.7, 0.1), 0.7)]
    r = SoftRasterizer(cam, mesh, lights=lights, mode="hard", sun_shadows=True)
    hard = r(v)
    p, _ = r.prepare(v)
    ids = hard_face_ids(p["xy"], p["z"], r.settings)
    r._shadowed(hard[None], ids, p)
    assert int(p["dark"][0].sum()) >= 10  # part of the step is in the arm's shadow
    pixel = torch.nonzero((ids >= 0).reshape(-1), as_tuple=True)[0]
    i, j = pixel // 48, pixel % 48
    centre = torch.stack([(j.to(f64) + 0.5), (i.to(f64) + 0.5)], -1) * (2.0 / 40)
    got = _colour_at(p, 40, 48)(torch.zeros_like(pixel), ids.reshape(-1)[pixel], centre, pixel)
    assert torch.allclose(got, hard.reshape(-1, 4)[pixel], atol=1e-12, rtol=0)
    # without the pixels' shadow state the shadowed ones come out brighter by the sun's share
    lit = _colour_at(dict(p, dark=[torch.zeros_like(p["dark"][0])]), 40, 48)(
        torch.zeros_like(pixel), ids.reshape(-1)[pixel], centre, pixel)
    assert float((lit - got)[..., :3].sum(-1).max()) > 0.05

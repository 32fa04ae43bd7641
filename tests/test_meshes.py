"""Mesh generation, validation and I/O (pure numpy/scipy/trimesh/meshio)."""

import sys

import numpy as np
import pytest
import trimesh

from gradsim_taichi.meshes import (
    boundary_surface,
    cloth_grid,
    extrude_profile,
    gear_profile,
    load_triangle_mesh,
    lumped_masses,
    orient_tets,
    read_tet_mesh,
    tet_ball,
    tet_beam,
    tet_box,
    tet_faces,
    tet_gear,
    tet_volumes,
    tet_walker,
    tetrahedralize_surface,
    triangle_areas,
    triangulate_polygon,
    validate_tet_mesh,
    validate_triangle_mesh,
    walker_profile,
    write_tet_mesh,
)


def polygon_area(p):
    x, y = p[:, 0], p[:, 1]
    return 0.5 * np.sum(x * np.roll(y, -1) - np.roll(x, -1) * y)


def assert_valid_closed_solid(vertices, tets):
    """Positive tets, conforming (faces used once or twice), watertight outward boundary."""
    assert vertices.dtype == np.float64 and vertices.shape[1] == 3
    assert np.issubdtype(tets.dtype, np.integer) and tets.shape[1] == 4
    vol = tet_volumes(vertices, tets)
    assert np.all(vol > 0)
    validate_tet_mesh(vertices, tets)
    _, counts, _ = tet_faces(tets)
    assert set(np.unique(counts).tolist()) <= {1, 2}
    tris, ids = boundary_surface(tets, compact=True)
    surf = trimesh.Trimesh(vertices[ids], tris, process=False)
    assert surf.is_watertight
    assert surf.is_winding_consistent
    assert surf.volume > 0
    assert surf.volume == pytest.approx(vol.sum(), rel=1e-10)
    # boundary triangles = faces used once; interior faces are all shared by 2
    assert tris.shape[0] == np.sum(counts == 1)
    return surf


# ---------------------------------------------------------------------- box / beam


def test_box_volume_counts_and_layout():
    size, res, origin = (0.3, 0.7, 1.1), (3, 4, 5), (1.0, -2.0, 0.5)
    v, t = tet_box(size, res, origin)
    assert v.shape == (4 * 5 * 6, 3)
    assert t.shape == (6 * 3 * 4 * 5, 4)
    assert abs(tet_volumes(v, t).sum() - 0.3 * 0.7 * 1.1) < 1e-12
    np.testing.assert_allclose(v.min(axis=0), origin)
    np.testing.assert_allclose(v.max(axis=0), np.add(origin, size))
    surf = assert_valid_closed_solid(v, t)
    assert surf.euler_number == 2
    assert len(surf.faces) == 2 * 2 * (3 * 4 + 4 * 5 + 3 * 5)


def test_beam_volume_and_clamped_face():
    v, t = tet_beam(length=2.0, height=0.2, width=0.1, resolution=(20, 3, 2))
    assert abs(tet_volumes(v, t).sum() - 2.0 * 0.2 * 0.1) < 1e-12
    np.testing.assert_allclose(v.max(axis=0), [2.0, 0.2, 0.1])
    assert np.count_nonzero(np.isclose(v[:, 0], 0.0)) == 4 * 3
    assert_valid_closed_solid(v, t)


def test_box_boundary_normals_point_outward():
    v, t = tet_box((1.0, 2.0, 3.0), (2, 3, 4))
    tris = boundary_surface(t)
    p = v[tris]
    normals = np.cross(p[:, 1] - p[:, 0], p[:, 2] - p[:, 0])
    out = p.mean(axis=1) - v.mean(axis=0)
    assert np.all(np.einsum("ij,ij->i", normals, out) > 0)
    # every boundary face lies on the box surface
    on_face = np.isclose(p, 0.0) | np.isclose(p, [1.0, 2.0, 3.0])
    assert np.all(np.any(np.all(on_face, axis=1), axis=1))


def test_boundary_surface_compact_and_inverted_tets():
    v, t = tet_box((1, 1, 1), (3, 3, 3))
    tris, ids = boundary_surface(t, compact=True)
    assert ids.size == 4**3 - 2**3  # the 8 interior grid points are not on the surface
    full = boundary_surface(t)
    np.testing.assert_array_equal(ids[tris], full)
    # flip some tets: with vertices given the orientation is taken from the volumes
    bad = t.copy()
    bad[::3, [2, 3]] = bad[::3, [3, 2]]
    assert np.any(tet_volumes(v, bad) < 0)
    fixed = boundary_surface(bad, vertices=v)
    assert trimesh.Trimesh(v, fixed, process=False).volume == pytest.approx(1.0, rel=1e-12)
    np.testing.assert_array_equal(orient_tets(v, bad), t)


def test_boundary_surface_rejects_non_manifold():
    v, t = tet_box((1, 1, 1), (1, 1, 1))
    apex = len(v)
    v = np.vstack([v, [[0.5, 0.5, -1.0]]])
    t = np.vstack([t, np.r_[t[0, :3], apex][None], np.r_[t[0, :3], apex][None][:, [0, 2, 1, 3]]])
    with pytest.raises(ValueError, match="more than two tets"):
        boundary_surface(t)


# -------------------------------------------------------------------------- ball


def test_ball_default_volume_and_hull():
    r, c = 0.7, (1.0, 2.0, -0.5)
    v, t = tet_ball(radius=r, center=c)
    assert 150 <= len(v) <= 250
    assert 300 <= len(t) <= 600
    vol = tet_volumes(v, t).sum()
    exact = 4.0 / 3.0 * np.pi * r**3
    assert abs(vol - exact) / exact < 0.04
    assert vol == pytest.approx(trimesh.convex.convex_hull(v).volume, rel=1e-10)
    dist = np.linalg.norm(v - c, axis=1)
    assert dist.max() == pytest.approx(r, rel=1e-12)
    assert np.count_nonzero(np.isclose(dist, r)) == 162  # the icosphere surface
    surf = assert_valid_closed_solid(v, t)
    assert surf.euler_number == 2


def test_ball_finer_is_more_accurate():
    v, t = tet_ball(radius=1.0, subdivisions=3)
    vol = tet_volumes(v, t).sum()
    assert abs(vol - 4.0 / 3.0 * np.pi) / (4.0 / 3.0 * np.pi) < 0.015
    assert_valid_closed_solid(v, t)


# -------------------------------------------------------------- extrusion / gear


def test_gear_default_size_volume_and_conformity():
    v, t = tet_gear()
    assert 800 <= len(t) <= 1600
    assert 300 <= len(v) <= 700
    profile = gear_profile()
    assert polygon_area(profile) > 0  # counter-clockwise
    assert tet_volumes(v, t).sum() == pytest.approx(polygon_area(profile) * 0.3, rel=1e-10)
    surf = assert_valid_closed_solid(v, t)
    assert surf.euler_number == 2
    # boundary = top and bottom caps + 2 triangles per boundary segment per layer
    pts2, tri2 = triangulate_polygon(profile, spacing=0.18)
    n_boundary_edges = len(_boundary_edges(tri2))
    assert len(surf.faces) == 2 * len(tri2) + 2 * 2 * n_boundary_edges
    # the teeth reach the outer radius, the roots the inner one
    rad = np.linalg.norm(v[:, :2], axis=1)
    assert rad.max() == pytest.approx(1.0) and rad.min() < 0.8


def _boundary_edges(tri):
    e = np.sort(tri[:, [0, 1, 1, 2, 2, 0]].reshape(-1, 2), axis=1)
    edges, counts = np.unique(e, axis=0, return_counts=True)
    return edges[counts == 1]


@pytest.mark.parametrize("teeth", [8, 12])
def test_gear_teeth_counts(teeth):
    v, t = tet_gear(teeth=teeth, inner_radius=0.5, outer_radius=0.7, thickness=0.2, layers=3)
    assert_valid_closed_solid(v, t)
    assert v[:, 2].min() == pytest.approx(-0.1) and v[:, 2].max() == pytest.approx(0.1)


@pytest.mark.parametrize("clockwise", [False, True])
def test_extrude_non_convex_polygon(clockwise):
    # L-shape (non-convex), area 3
    poly = np.array([[0, 0], [2, 0], [2, 1], [1, 1], [1, 2], [0, 2]], dtype=float)
    if clockwise:
        poly = poly[::-1]
    pts, tri = triangulate_polygon(poly, spacing=0.25)
    a = triangle_areas(np.column_stack([pts, np.zeros(len(pts))]), tri)
    assert a.min() > 0 and a.sum() == pytest.approx(3.0, rel=1e-12)
    # counter-clockwise triangles
    p = pts[tri]
    cross = (p[:, 1, 0] - p[:, 0, 0]) * (p[:, 2, 1] - p[:, 0, 1]) - (p[:, 2, 0] - p[:, 0, 0]) * (
        p[:, 1, 1] - p[:, 0, 1]
    )
    assert np.all(cross > 0)
    v, t = extrude_profile(poly, thickness=0.5, layers=2, spacing=0.25)
    assert len(t) == 3 * 2 * len(tri)
    assert tet_volumes(v, t).sum() == pytest.approx(1.5, rel=1e-12)
    assert_valid_closed_solid(v, t)
    # nothing fills the notch of the L
    c = v[t].mean(axis=1)
    assert not np.any((c[:, 0] > 1 + 1e-9) & (c[:, 1] > 1 + 1e-9))


def test_triangulate_recovers_boundary_segments():
    # long thin legs: a plain Delaunay of the boundary points bridges the gaps between them
    comb = walker_profile(legs=4, leg_width=0.05, leg_length=0.8)
    for interior in (False, True):
        pts, tri = triangulate_polygon(comb, spacing=1.0, interior=interior)
        assert triangle_areas(np.column_stack([pts, np.zeros(len(pts))]), tri).sum() == (
            pytest.approx(polygon_area(comb), rel=1e-12)
        )
        # the boundary points come first, in order; each consecutive pair is a boundary edge
        edges = {tuple(e) for e in _boundary_edges(tri).tolist()}
        nb = len(edges)
        assert all(tuple(sorted((i, (i + 1) % nb))) in edges for i in range(nb))
        v, t = extrude_profile(comb, thickness=0.1, spacing=1.0, interior=interior)
        assert_valid_closed_solid(v, t)


def test_drop_flat_tets():
    from gradsim_taichi.meshes.tet_primitives import _drop_flat_tets

    # a square pyramid on top of a flat tet made of its (coplanar) base
    x = np.array([[0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 1, 0], [0.5, 0.5, 1.0]])
    t = np.array([[0, 1, 2, 4], [0, 2, 3, 4], [0, 1, 2, 3]])
    kept = _drop_flat_tets(x, t)
    np.testing.assert_array_equal(kept, t[:2])
    assert_valid_closed_solid(x, orient_tets(x, kept))
    # a flat tet inside the point set cannot be dropped without a crack
    from scipy.spatial import Delaunay

    g = np.stack(np.meshgrid(*[np.arange(3.0)] * 3, indexing="ij"), -1).reshape(-1, 3)
    with pytest.raises(ValueError, match="flat tet inside"):
        _drop_flat_tets(g, Delaunay(g).simplices)


def test_extrude_without_interior_points():
    square = np.array([[0, 0], [1, 0], [1, 1], [0, 1]], dtype=float)
    v, t = extrude_profile(square, thickness=1.0, layers=3, spacing=0.5, interior=False)
    assert tet_volumes(v, t).sum() == pytest.approx(1.0, rel=1e-12)
    assert_valid_closed_solid(v, t)


@pytest.mark.parametrize("legs", [1, 2, 4])
def test_walker(legs):
    v, t = tet_walker(legs=legs)
    profile = walker_profile(legs=legs)
    assert polygon_area(profile) == pytest.approx(0.3 + legs * 0.15 * 0.3, rel=1e-12)
    assert tet_volumes(v, t).sum() == pytest.approx(polygon_area(profile) * 0.2, rel=1e-10)
    assert v[:, 1].min() == pytest.approx(0.0)
    surf = assert_valid_closed_solid(v, t)
    assert surf.euler_number == 2


def test_primitive_argument_errors():
    with pytest.raises(ValueError, match="size"):
        tet_box((1.0, -1.0, 1.0))
    with pytest.raises(ValueError, match="resolution"):
        tet_box(resolution=(0, 1, 1))
    with pytest.raises(ValueError, match="radius"):
        tet_ball(radius=0.0)
    with pytest.raises(ValueError, match="inner_radius"):
        tet_gear(inner_radius=1.2, outer_radius=1.0)
    with pytest.raises(ValueError, match="thickness"):
        extrude_profile(gear_profile(), thickness=0.0)
    with pytest.raises(ValueError, match="polygon"):
        extrude_profile(np.zeros((2, 2)), thickness=1.0)
    with pytest.raises(ValueError, match="legs"):
        tet_walker(legs=8, leg_width=0.2)


# ---------------------------------------------------------------- masses / utils


def test_lumped_masses_sum_to_total_mass():
    v, t = tet_gear()
    rho = 1234.5
    m = lumped_masses(v, t, rho)
    assert m.shape == (len(v),)
    assert np.all(m > 0)
    assert m.sum() == pytest.approx(rho * tet_volumes(v, t).sum(), rel=1e-12)
    # per-tet densities
    rho_t = np.linspace(1.0, 2.0, len(t))
    m2 = lumped_masses(v, t, rho_t)
    assert m2.sum() == pytest.approx(np.sum(rho_t * tet_volumes(v, t)), rel=1e-12)
    # a single tet: a quarter of its mass each
    vt = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]], dtype=float)
    np.testing.assert_allclose(lumped_masses(vt, [[0, 1, 2, 3]], 6.0), [0.25] * 4)
    with pytest.raises(ValueError, match="density"):
        lumped_masses(v, t, np.ones(3))


def test_tet_volume_sign_convention():
    x = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]], dtype=float)
    assert tet_volumes(x, [[0, 1, 2, 3]])[0] == pytest.approx(1.0 / 6.0)
    assert tet_volumes(x, [[0, 2, 1, 3]])[0] == pytest.approx(-1.0 / 6.0)
    # each primitive's tets satisfy det([x1-x0, x2-x0, x3-x0]) > 0
    for v, t in (tet_box(), tet_ball(), tet_gear()):
        d = np.linalg.det(np.stack([v[t[:, k]] - v[t[:, 0]] for k in (1, 2, 3)], axis=1))
        assert np.all(d > 0)


# -------------------------------------------------------------------- validation

_X = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 1]], dtype=float)
_T = np.array([[0, 1, 2, 3], [1, 2, 3, 4]])  # two positively oriented tets sharing a face


def _bad(kind):
    x, t = _X.copy(), _T.copy()
    kw = {}
    if kind == "vertex_shape":
        x = x[:, :2]
    elif kind == "tet_shape":
        t = t[:, :3]
    elif kind == "tet_dtype":
        t = t.astype(float)
    elif kind == "nan":
        x[4, 1] = np.nan
    elif kind == "inf":
        x[3, 0] = np.inf
    elif kind == "out_of_range":
        t[1, 3] = 5
    elif kind == "negative":
        t[1, 0] = -1
    elif kind == "repeated":
        t[1] = [1, 2, 2, 4]
    elif kind == "flat":
        x[3] = [0.0, 0.0, 1e-12]  # tet 0 becomes (nearly) flat, tet 1 stays fine
    elif kind == "inverted":
        t[1] = t[1][[0, 2, 1, 3]]
    elif kind == "unreferenced":
        x = np.vstack([x, [[5.0, 5.0, 5.0]]])
    elif kind == "empty":
        t = t[:0]
    return x, t, kw


@pytest.mark.parametrize(
    "kind, pattern",
    [
        ("vertex_shape", r"vertices must have shape \[N, 3\]"),
        ("tet_shape", r"tets must have shape \[M, 4\]"),
        ("tet_dtype", "integer"),
        ("nan", r"NaN or inf at vertices \[4\]"),
        ("inf", r"NaN or inf at vertices \[3\]"),
        ("out_of_range", r"out-of-range .* rows \[1\]"),
        ("negative", r"negative indices in rows \[1\]"),
        ("repeated", r"repeat a vertex within rows \[1\]"),
        ("flat", r"near-zero volume .*tets \[0\]"),
        ("inverted", r"negatively oriented .*tets \[1\].*orient_tets"),
        ("unreferenced", r"vertices \[5\] are referenced by no tet"),
        ("empty", "empty"),
    ],
)
def test_validate_tet_mesh_errors(kind, pattern):
    validate_tet_mesh(_X, _T)  # the unmodified mesh is fine
    x, t, kw = _bad(kind)
    with pytest.raises(ValueError, match=pattern):
        validate_tet_mesh(x, t, **kw)


def test_validate_tet_mesh_options_and_non_manifold():
    x = np.vstack([_X, [[5.0, 5.0, 5.0]]])
    vx, vt = validate_tet_mesh(x, _T, allow_unreferenced=True)
    assert vx.dtype == np.float64 and vt.dtype == np.int64
    inv = _T.copy()
    inv[1] = inv[1][[0, 2, 1, 3]]
    validate_tet_mesh(_X, inv, require_positive=False)
    validate_tet_mesh(_X, orient_tets(_X, inv))
    # three tets on one face
    x = np.vstack([_X, [[-1.0, -1.0, -1.0]], [[0.2, 0.2, -2.0]]])
    t = orient_tets(x, np.array([[0, 1, 2, 3], [0, 1, 2, 5], [0, 1, 2, 6], [1, 2, 3, 4]]))
    with pytest.raises(ValueError, match="non-manifold"):
        validate_tet_mesh(x, t)


def test_validate_triangle_mesh():
    v, t = tet_box((1, 1, 1), (2, 2, 2))
    tris, ids = boundary_surface(t, compact=True)
    sv = v[ids]
    validate_triangle_mesh(sv, tris, require_closed=True, allow_unreferenced=False)
    # open surface
    with pytest.raises(ValueError, match="not closed"):
        validate_triangle_mesh(sv, tris[1:], require_closed=True)
    validate_triangle_mesh(sv, tris[1:], require_manifold=True)
    # inconsistent winding
    flipped = tris.copy()
    flipped[3] = flipped[3][[0, 2, 1]]
    with pytest.raises(ValueError, match=r"inconsistent winding: triangles \[.*3"):
        validate_triangle_mesh(sv, flipped, require_manifold=True)
    # non-manifold edge: three triangles on one edge
    x = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, -1, 0], [0, 0, 1]], dtype=float)
    fan = np.array([[0, 1, 2], [1, 0, 3], [0, 1, 4]])
    validate_triangle_mesh(x, fan)
    with pytest.raises(ValueError, match="non-manifold surface"):
        validate_triangle_mesh(x, fan, require_manifold=True)
    # degenerate, out of range, nan, unreferenced
    with pytest.raises(ValueError, match=r"near-zero area triangles .*\[0\]"):
        validate_triangle_mesh(np.array([[0, 0, 0], [1, 0, 0], [2, 0, 0.0]]), [[0, 1, 2]])
    with pytest.raises(ValueError, match=r"out-of-range .*\[1\]"):
        validate_triangle_mesh(x, [[0, 1, 2], [0, 1, 9]])
    with pytest.raises(ValueError, match="NaN"):
        validate_triangle_mesh(np.where(x == 1, np.nan, x), fan)
    with pytest.raises(ValueError, match=r"vertices \[3, 4\] are referenced by no triangle"):
        validate_triangle_mesh(x, fan[:1], allow_unreferenced=False)


# ------------------------------------------------------------------------- cloth


@pytest.mark.parametrize("plane, normal", [("xz", [0, 1, 0]), ("xy", [0, 0, 1])])
@pytest.mark.parametrize("alternate", [False, True])
def test_cloth_grid(plane, normal, alternate):
    g = cloth_grid(
        size=(2.0, 1.0),
        resolution=(20, 10),
        origin=(1, 2, 3),
        plane=plane,
        alternate_diagonals=alternate,
    )
    assert g.vertices.shape == (21 * 11, 3)
    assert g.triangles.shape == (2 * 20 * 10, 3)
    areas = triangle_areas(g.vertices, g.triangles)
    np.testing.assert_allclose(areas, 2.0 / 400)
    assert areas.sum() == pytest.approx(2.0)
    mesh = trimesh.Trimesh(g.vertices, g.triangles, process=False)
    np.testing.assert_allclose(mesh.face_normals, np.tile(normal, (400, 1)), atol=1e-12)
    validate_triangle_mesh(g.vertices, g.triangles, require_manifold=True, allow_unreferenced=False)
    v = g.vertices
    second = 2 if plane == "xz" else 1
    np.testing.assert_allclose(v[g.corners[0]], [1, 2, 3])
    assert v[g.corners[2], 0] == pytest.approx(3.0)
    assert v[g.corners[2], second] == pytest.approx([0, 2, 3][second] + 1.0)
    assert np.allclose(v[g.edge_top, second], v[:, second].max()) and len(g.edge_top) == 21
    assert np.allclose(v[g.edge_bottom, second], v[:, second].min())
    assert np.allclose(v[g.edge_left, 0], 1.0) and len(g.edge_left) == 11
    assert np.allclose(v[g.edge_right, 0], 3.0)
    assert g.index(20, 10) == g.corner_top_right == g.corners[2]
    assert g.corner_top_left == g.edge_top[0] and g.corner_bottom_right == g.edge_bottom[-1]
    # only the in-plane coordinates vary
    off = [i for i in range(3) if i not in (0, second)][0]
    assert np.allclose(v[:, off], [1, 2, 3][off])


def test_cloth_grid_errors():
    with pytest.raises(ValueError, match="plane"):
        cloth_grid(plane="yz")
    with pytest.raises(ValueError, match="resolution"):
        cloth_grid(resolution=(0, 3))
    with pytest.raises(ValueError, match="size"):
        cloth_grid(size=(1.0, -1.0))


# ------------------------------------------------------------------------- I/O


@pytest.mark.parametrize("ext", ["vtu", "msh", "vtk"])
def test_tet_mesh_roundtrip(tmp_path, ext):
    v, t = tet_gear()
    path = tmp_path / f"gear.{ext}"
    write_tet_mesh(path, v, t)
    v2, t2 = read_tet_mesh(path)
    np.testing.assert_allclose(v2, v, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(t2, t)
    # with per-tet and per-vertex data
    write_tet_mesh(
        path,
        v,
        t,
        cell_data={"mu": np.arange(len(t), dtype=float)},
        point_data={"mass": lumped_masses(v, t, 1.0)},
    )
    import meshio

    m = meshio.read(path)
    np.testing.assert_allclose(m.cell_data["mu"][0], np.arange(len(t)))
    v3, t3 = read_tet_mesh(path)
    np.testing.assert_array_equal(t3, t)


def test_read_tet_mesh_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="not found"):
        read_tet_mesh(tmp_path / "missing.vtu")
    bad = tmp_path / "bad.msh"
    bad.write_text("this is not a mesh\n")
    with pytest.raises(ValueError, match="could not read"):
        read_tet_mesh(bad)
    import meshio

    tri_only = tmp_path / "tri.vtu"
    meshio.write(tri_only, meshio.Mesh(np.eye(3), [("triangle", np.array([[0, 1, 2]]))]))
    with pytest.raises(ValueError, match="no 'tetra' cells"):
        read_tet_mesh(tri_only)


@pytest.mark.parametrize("ext", ["obj", "stl", "ply"])
def test_load_triangle_mesh(tmp_path, ext):
    v, t = tet_box((1.0, 2.0, 0.5), (2, 2, 2))
    tris, ids = boundary_surface(t, compact=True)
    path = tmp_path / f"box.{ext}"
    trimesh.Trimesh(v[ids], tris, process=False).export(path)
    lv, lt = load_triangle_mesh(path)
    assert lv.dtype == np.float64 and lt.shape == tris.shape
    validate_triangle_mesh(lv, lt, require_closed=True, allow_unreferenced=False)
    assert trimesh.Trimesh(lv, lt, process=False).volume == pytest.approx(1.0, rel=1e-9)


def test_load_triangle_mesh_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="not found"):
        load_triangle_mesh(tmp_path / "nothing.obj")
    corrupt = tmp_path / "corrupt.stl"
    corrupt.write_bytes(b"solid x\n facet normal garbage \x00\x01\x02\n")
    with pytest.raises(ValueError, match="corrupt.stl"):
        load_triangle_mesh(corrupt)
    empty = tmp_path / "empty.obj"
    empty.write_text("# no faces\nv 0 0 0\n")
    with pytest.raises(ValueError, match="empty.obj"):
        load_triangle_mesh(empty)


def test_tetrahedralize_surface_without_tetgen(monkeypatch):
    monkeypatch.setitem(sys.modules, "tetgen", None)  # makes `import tetgen` fail
    v, t = tet_box()
    tris, ids = boundary_surface(t, compact=True)
    with pytest.raises(ImportError, match=r"gradsim-taichi\[mesher-agpl\]") as info:
        tetrahedralize_surface(v[ids], tris)
    assert "AGPL" in str(info.value)

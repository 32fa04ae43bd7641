"""Procedural tetrahedral meshes: box/beam, ball, extruded 2D profiles (gear, walker).

No general mesher is needed: boxes are split hexahedra, the ball is a scipy
Delaunay tetrahedralization of a convex point set, and extruded shapes are a
2D conforming Delaunay triangulation split into prisms, each prism into 3 tets.

Every function returns ``(vertices, tets)``: ``vertices`` float64 ``[N, 3]``,
``tets`` int32 ``[T, 4]``, all positively oriented
(``det([x1 - x0, x2 - x0, x3 - x0]) > 0``) and conforming (every interior face
is shared by exactly two tets).
"""

from __future__ import annotations

import itertools

import numpy as np
from matplotlib.path import Path
from scipy.spatial import Delaunay

from gradsim_taichi.meshes.tet_utils import INDEX_DTYPE, orient_tets, tet_faces, tet_volumes

__all__ = [
    "tet_box",
    "tet_beam",
    "tet_ball",
    "triangulate_polygon",
    "extrude_profile",
    "gear_profile",
    "tet_gear",
    "walker_profile",
    "tet_walker",
]


def _triple(value, name: str, kind=float):
    v = np.asarray(value, dtype=np.float64).ravel()
    if v.size == 1:
        v = np.repeat(v, 3)
    if v.size != 3 or not np.all(np.isfinite(v)):
        raise ValueError(f"{name} must be a finite scalar or 3 values, got {value!r}")
    return tuple(kind(a) for a in v)


# ----------------------------------------------------------------------------- box


def tet_box(size=(1.0, 1.0, 1.0), resolution=(1, 1, 1), origin=(0.0, 0.0, 0.0)):
    """Axis-aligned box ``[origin, origin + size]`` as a regular grid of
    ``nx * ny * nz`` hexahedra, each split into 6 tets around its main diagonal
    (Freudenthal/Kuhn split, the same in every cell, hence conforming).

    Returns ``(vertices [(nx+1)(ny+1)(nz+1), 3], tets [6 nx ny nz, 4])``.
    Vertex ``(i, j, k)`` has index ``i + (nx + 1) * (j + (ny + 1) * k)``.
    """
    lx, ly, lz = _triple(size, "size")
    if min(lx, ly, lz) <= 0:
        raise ValueError(f"size must be positive, got {size!r}")
    res = np.asarray(resolution).ravel()
    if res.size == 1:
        res = np.repeat(res, 3)
    if res.size != 3 or np.any(res < 1) or np.any(res != np.round(res)):
        raise ValueError(f"resolution must be 3 integers >= 1, got {resolution!r}")
    nx, ny, nz = (int(r) for r in res)
    ox, oy, oz = _triple(origin, "origin")

    xs = ox + lx * np.arange(nx + 1) / nx
    ys = oy + ly * np.arange(ny + 1) / ny
    zs = oz + lz * np.arange(nz + 1) / nz
    gz, gy, gx = np.meshgrid(zs, ys, xs, indexing="ij")
    vertices = np.stack([gx.ravel(), gy.ravel(), gz.ravel()], axis=1)

    def vid(i, j, k):
        return i + (nx + 1) * (j + (ny + 1) * k)

    ci, cj, ck = np.meshgrid(np.arange(nx), np.arange(ny), np.arange(nz), indexing="ij")
    ci, cj, ck = ci.ravel(), cj.ravel(), ck.ravel()
    tets = []
    # One tet per axis order: walk from corner (0,0,0) to (1,1,1) one axis at a time.
    for perm in itertools.permutations(range(3)):
        step = np.zeros(3, dtype=np.int64)
        corners = [vid(ci, cj, ck)]
        for axis in perm:
            step[axis] += 1
            corners.append(vid(ci + step[0], cj + step[1], ck + step[2]))
        tets.append(np.stack(corners, axis=1))
    tets = np.concatenate(tets, axis=0)
    tets = orient_tets(vertices, tets).astype(INDEX_DTYPE)
    return vertices, tets


def tet_beam(
    length: float = 1.0,
    height: float = 0.1,
    width: float = 0.1,
    resolution=(20, 2, 2),
    origin=(0.0, 0.0, 0.0),
):
    """Cantilever beam along +x: a :func:`tet_box` of size ``(length, height, width)``
    (height along y, the gravity axis; width along z) starting at ``origin``.

    ``resolution`` is ``(cells along x, cells along y, cells along z)``. The
    clamped end is the face ``x == origin[0]``: select it with
    ``np.nonzero(np.isclose(vertices[:, 0], origin[0]))[0]``.
    """
    return tet_box(size=(length, height, width), resolution=resolution, origin=origin)


# ---------------------------------------------------------------------------- ball


def tet_ball(
    radius: float = 1.0, subdivisions: int = 2, shells: int | None = None, center=(0.0, 0.0, 0.0)
):
    """Solid ball from an icosphere surface plus interior shells, tetrahedralized
    with scipy's Delaunay (exact for a convex point set).

    The surface is ``trimesh.creation.icosphere(subdivisions, radius)``
    (10 * 4^s + 2 vertices: 162 at the default ``subdivisions=2``). Interior
    shells are coarser icospheres at radii ``radius * k / (shells + 1)``
    (the outermost with ``subdivisions - 2``, each inner one a level coarser,
    never below 0), rotated deterministically so no two shells line up, plus the centre. Flat
    (zero-volume) tets that Delaunay creates on cospherical points are removed.

    ``shells`` defaults to ``subdivisions - 1`` (at least 1). The default gives
    175 vertices and ~460 tets, the size of the paper's 427-tet ball. The mesh
    volume equals the convex hull volume of the surface (slightly below
    4/3 pi r^3: about 5% at ``subdivisions=2``, 1.2% at 3).
    """
    import trimesh

    if not (np.isfinite(radius) and radius > 0):
        raise ValueError(f"radius must be positive and finite, got {radius!r}")
    subdivisions = int(subdivisions)
    if subdivisions < 0:
        raise ValueError(f"subdivisions must be >= 0, got {subdivisions}")
    if shells is None:
        shells = max(1, subdivisions - 1)
    shells = int(shells)
    if shells < 0:
        raise ValueError(f"shells must be >= 0, got {shells}")
    c = np.asarray(_triple(center, "center"))

    surface = np.asarray(trimesh.creation.icosphere(subdivisions=subdivisions).vertices)
    surface = surface / np.linalg.norm(surface, axis=1, keepdims=True)
    points = [surface]
    for k in range(shells, 0, -1):
        r = k / (shells + 1)
        sub = max(0, subdivisions - 2 - (shells - k))
        shell = np.asarray(trimesh.creation.icosphere(subdivisions=sub).vertices)
        shell = shell / np.linalg.norm(shell, axis=1, keepdims=True)
        points.append(r * shell @ _rotation(0.37 * k + 0.11, 0.53 * k + 0.29).T)
    points.append(np.zeros((1, 3)))
    unit = np.concatenate(points, axis=0)

    tets = Delaunay(unit).simplices.astype(np.int64)
    tets = _drop_flat_tets(unit, tets)
    vertices = c + radius * unit
    tets = orient_tets(vertices, tets)
    return _compact(vertices, tets)


def _rotation(a: float, b: float) -> np.ndarray:
    """Rotation about z by ``a`` then about x by ``b`` (radians)."""
    ca, sa, cb, sb = np.cos(a), np.sin(a), np.cos(b), np.sin(b)
    rz = np.array([[ca, -sa, 0.0], [sa, ca, 0.0], [0.0, 0.0, 1.0]])
    rx = np.array([[1.0, 0.0, 0.0], [0.0, cb, -sb], [0.0, sb, cb]])
    return rx @ rz


def _drop_flat_tets(points, tets, rtol: float = 1e-6):
    """Remove zero-volume tets that sit on the hull (coplanar hull points).

    A flat tet on the convex hull covers two coplanar hull triangles with its
    other two faces; dropping it leaves a closed surface. A flat tet strictly
    inside would leave a crack, so that raises instead.
    """
    vol = np.abs(tet_volumes(points, tets))
    a = tets[:, [0, 0, 0, 1, 1, 2]]
    b = tets[:, [1, 2, 3, 2, 3, 3]]
    edge = np.max(np.linalg.norm(points[a] - points[b], axis=2), axis=1)
    flat = vol <= rtol * edge**3
    if not np.any(flat):
        return tets
    faces, counts, _ = tet_faces(tets)
    hull = {tuple(f) for f in faces[counts == 1].tolist()}
    for t in tets[flat]:
        keys = [tuple(sorted(t[list(f)])) for f in ((0, 1, 2), (0, 1, 3), (0, 2, 3), (1, 2, 3))]
        if not any(k in hull for k in keys):
            raise ValueError(f"Delaunay produced a flat tet inside the point set: {t.tolist()}")
    return tets[~flat]


def _compact(vertices, tets):
    """Drop vertices no tet uses and renumber."""
    used, inverse = np.unique(tets.ravel(), return_inverse=True)
    return vertices[used].copy(), inverse.reshape(-1, 4).astype(INDEX_DTYPE)


# ---------------------------------------------------------------- 2D triangulation


def _polygon_area(poly: np.ndarray) -> float:
    x, y = poly[:, 0], poly[:, 1]
    return 0.5 * float(np.sum(x * np.roll(y, -1) - np.roll(x, -1) * y))


def _check_polygon(polygon) -> np.ndarray:
    p = np.asarray(polygon, dtype=np.float64)
    if p.ndim != 2 or p.shape[1] != 2 or p.shape[0] < 3:
        raise ValueError(f"polygon must have shape [P, 2] with P >= 3, got {p.shape}")
    if not np.all(np.isfinite(p)):
        raise ValueError("polygon contains NaN or inf")
    if np.allclose(p[0], p[-1]):
        p = p[:-1]
    seg = np.linalg.norm(np.roll(p, -1, axis=0) - p, axis=1)
    if np.any(seg <= 1e-12 * np.max(seg)):
        raise ValueError(f"polygon has repeated consecutive points at {np.nonzero(seg == 0)[0]}")
    area = _polygon_area(p)
    if area == 0:
        raise ValueError("polygon has zero area")
    if area < 0:  # accept clockwise input, work counter-clockwise
        p = p[::-1].copy()
    return p


def _resample_boundary(poly: np.ndarray, spacing: float) -> np.ndarray:
    """Split each polygon edge into pieces no longer than ``spacing``."""
    out = []
    nxt = np.roll(poly, -1, axis=0)
    for a, b in zip(poly, nxt, strict=True):
        n = max(1, int(np.ceil(np.linalg.norm(b - a) / spacing - 1e-9)))
        t = np.arange(n)[:, None] / n
        out.append(a + t * (b - a))
    return np.concatenate(out, axis=0)


def _segment_point_distance(points, a, b):
    """Distance from every point [M, 2] to every segment a[S, 2] -> b[S, 2]; [M, S]."""
    ab = b - a
    ap = points[:, None, :] - a[None, :, :]
    t = np.clip(np.einsum("msk,sk->ms", ap, ab) / np.einsum("sk,sk->s", ab, ab), 0.0, 1.0)
    closest = a[None] + t[..., None] * ab[None]
    return np.linalg.norm(points[:, None, :] - closest, axis=2)


def triangulate_polygon(polygon, spacing: float | None = None, interior: bool = True):
    """Conforming Delaunay triangulation of a simple (possibly non-convex) polygon.

    The boundary is resampled to at most ``spacing`` per segment and, with
    ``interior=True``, filled with a jittered triangular lattice of that
    spacing. Boundary segments missing from the Delaunay triangulation are split
    at their midpoint (and interior points encroaching on a segment's diametral
    circle are dropped) until every segment is a Delaunay edge; then triangles
    whose centroid lies outside the polygon are discarded.

    ``spacing`` defaults to 1/20 of the polygon's bounding-box diagonal.
    Returns ``(points [M, 2] float64, triangles [K, 3] int32)`` with
    counter-clockwise triangles. The first points are the boundary points in
    order around the polygon (counter-clockwise).
    """
    poly = _check_polygon(polygon)
    diag = float(np.linalg.norm(poly.max(axis=0) - poly.min(axis=0)))
    h = diag / 20.0 if spacing is None else float(spacing)
    if not (np.isfinite(h) and h > 0):
        raise ValueError(f"spacing must be positive, got {spacing!r}")
    path = Path(poly)
    boundary = _resample_boundary(poly, h)

    inner = np.zeros((0, 2))
    if interior:
        lo, hi = poly.min(axis=0), poly.max(axis=0)
        dy = h * np.sqrt(3.0) / 2.0
        rows = np.arange(lo[1], hi[1] + dy, dy)
        pts = []
        for r, y in enumerate(rows):
            xs = np.arange(lo[0] + (0.5 * h if r % 2 else 0.0), hi[0] + h, h)
            pts.append(np.stack([xs, np.full_like(xs, y)], axis=1))
        inner = np.concatenate(pts, axis=0)
        # Deterministic jitter breaks the lattice's cocircular point sets.
        inner = inner + np.random.default_rng(12345).uniform(-0.05 * h, 0.05 * h, inner.shape)
        inner = inner[path.contains_points(inner)]

    for _ in range(50):
        nb = boundary.shape[0]
        a, b = boundary, np.roll(boundary, -1, axis=0)
        if inner.shape[0]:
            dist = _segment_point_distance(inner, a, b)
            mid = 0.5 * (a + b)
            half = 0.5 * np.linalg.norm(b - a, axis=1)
            encroach = np.linalg.norm(inner[:, None, :] - mid[None], axis=2) <= half[None] * 1.05
            inner = inner[(dist.min(axis=1) > 0.45 * h) & ~encroach.any(axis=1)]
        pts = np.concatenate([boundary, inner], axis=0)
        tri = Delaunay(pts).simplices
        edges = np.sort(tri[:, [0, 1, 1, 2, 2, 0]].reshape(-1, 2), axis=1)
        edge_set = set(map(tuple, edges.tolist()))
        seg = np.sort(np.stack([np.arange(nb), (np.arange(nb) + 1) % nb], axis=1), axis=1)
        missing = np.array([tuple(s) not in edge_set for s in seg.tolist()])
        if not missing.any():
            break
        new = []
        for i in range(nb):
            new.append(boundary[i])
            if missing[i]:
                new.append(0.5 * (boundary[i] + boundary[(i + 1) % nb]))
        boundary = np.array(new)
    else:  # pragma: no cover - only for pathological polygons
        raise ValueError("could not recover the polygon boundary in the triangulation")

    centroids = pts[tri].mean(axis=1)
    tri = tri[path.contains_points(centroids)]
    x = pts[tri]
    signed = (x[:, 1, 0] - x[:, 0, 0]) * (x[:, 2, 1] - x[:, 0, 1]) - (x[:, 2, 0] - x[:, 0, 0]) * (
        x[:, 1, 1] - x[:, 0, 1]
    )
    tri = tri[np.abs(signed) > 1e-12 * h * h]
    signed = signed[np.abs(signed) > 1e-12 * h * h]
    tri[signed < 0] = tri[signed < 0][:, [0, 2, 1]]
    used, inverse = np.unique(tri.ravel(), return_inverse=True)
    # Keep the boundary points first (they are all used), then interior ones.
    return pts[used], inverse.reshape(-1, 3).astype(INDEX_DTYPE)


# ----------------------------------------------------------------------- extrusion


def extrude_profile(
    polygon, thickness: float, layers: int = 1, spacing: float | None = None, interior: bool = True
):
    """Extrude a 2D polygon (in the xy-plane) along z into a tet mesh.

    The polygon (simple, possibly non-convex, counter-clockwise or clockwise)
    is triangulated with :func:`triangulate_polygon` (``spacing``,
    ``interior``), copied to ``layers + 1`` levels ``z = -thickness / 2 ...
    thickness / 2``, and each prism is split into 3 tets. The split orders each
    triangle's vertices by global index and always takes the quad diagonal from
    the higher-index bottom vertex to the lower-index top vertex, so the two
    prisms sharing a quad face pick the same diagonal: the mesh is conforming.

    Returns ``(vertices [M (layers + 1), 3], tets [3 K layers, 4])`` where
    ``M, K`` are the 2D point and triangle counts; vertex ``i`` of layer ``l``
    has index ``l * M + i``.
    """
    if not (np.isfinite(thickness) and thickness > 0):
        raise ValueError(f"thickness must be positive, got {thickness!r}")
    layers = int(layers)
    if layers < 1:
        raise ValueError(f"layers must be >= 1, got {layers}")
    pts2, tri2 = triangulate_polygon(polygon, spacing=spacing, interior=interior)
    m = pts2.shape[0]
    zs = -0.5 * thickness + thickness * np.arange(layers + 1) / layers
    vertices = np.concatenate([np.column_stack([pts2, np.full(m, z)]) for z in zs], axis=0)
    t = np.sort(tri2.astype(np.int64), axis=1)  # v0 < v1 < v2
    v0, v1, v2 = t[:, 0], t[:, 1], t[:, 2]
    tets = []
    for layer in range(layers):
        b, u = layer * m, (layer + 1) * m
        tets.append(np.stack([v0 + b, v1 + b, v2 + b, v0 + u], axis=1))
        tets.append(np.stack([v1 + b, v2 + b, v0 + u, v1 + u], axis=1))
        tets.append(np.stack([v2 + b, v0 + u, v1 + u, v2 + u], axis=1))
    tets = orient_tets(vertices, np.concatenate(tets, axis=0)).astype(INDEX_DTYPE)
    return vertices, tets


# ---------------------------------------------------------------------------- gear


def gear_profile(
    teeth: int = 10,
    inner_radius: float = 0.8,
    outer_radius: float = 1.0,
    tooth_fraction: float = 0.5,
    tip_fraction: float = 0.6,
    arc_points: int = 2,
):
    """Counter-clockwise 2D gear outline in the xy-plane, centred at the origin.

    Each of the ``teeth`` pitch sectors has a root arc on ``inner_radius`` and a
    trapezoidal tooth reaching ``outer_radius``. ``tooth_fraction`` is the share
    of the pitch angle the tooth base takes, ``tip_fraction`` the share of the
    tooth base the flat tip keeps. ``arc_points`` points sample each arc.
    Returns ``[P, 2]`` float64.
    """
    teeth = int(teeth)
    if teeth < 3:
        raise ValueError(f"teeth must be >= 3, got {teeth}")
    if not (0 < inner_radius < outer_radius):
        raise ValueError(
            f"need 0 < inner_radius < outer_radius, got {inner_radius!r}, {outer_radius!r}"
        )
    if not (0 < tooth_fraction < 1 and 0 < tip_fraction <= 1):
        raise ValueError("tooth_fraction must be in (0, 1) and tip_fraction in (0, 1]")
    arc_points = max(1, int(arc_points))
    pitch = 2 * np.pi / teeth
    base = tooth_fraction * pitch
    tip = tip_fraction * base
    pts = []
    for i in range(teeth):
        a0 = i * pitch
        # root arc from a0 to the start of the tooth base (its end point included)
        for a in a0 + np.linspace(0.0, pitch - base, arc_points + 1):
            pts.append((inner_radius * np.cos(a), inner_radius * np.sin(a)))
        # flat tip, centred on the tooth base; the next root arc closes the flank
        tip0 = a0 + pitch - base + 0.5 * (base - tip)
        for a in tip0 + np.linspace(0.0, tip, arc_points + 1):
            pts.append((outer_radius * np.cos(a), outer_radius * np.sin(a)))
    return np.array(pts, dtype=np.float64)


def tet_gear(
    teeth: int = 10,
    inner_radius: float = 0.8,
    outer_radius: float = 1.0,
    thickness: float = 0.3,
    layers: int = 2,
    spacing: float | None = None,
    tooth_fraction: float = 0.5,
    tip_fraction: float = 0.6,
):
    """Solid gear: :func:`gear_profile` extruded along z by ``thickness``.

    ``spacing`` (target edge length in the plane) defaults to 0.18 * outer_radius;
    the defaults give roughly 1k tets and 400-500 vertices, like the paper's
    1152-tet, 480-vertex gear.
    """
    if spacing is None:
        spacing = 0.18 * outer_radius
    profile = gear_profile(teeth, inner_radius, outer_radius, tooth_fraction, tip_fraction)
    return extrude_profile(profile, thickness, layers=layers, spacing=spacing)


# -------------------------------------------------------------------------- walker


def walker_profile(
    body_length: float = 1.0,
    body_height: float = 0.3,
    legs: int = 2,
    leg_length: float = 0.3,
    leg_width: float = 0.15,
):
    """Counter-clockwise 2D outline of a walker in the xy-plane: a rectangular
    body ``[0, body_length] x [leg_length, leg_length + body_height]`` with
    ``legs`` rectangular legs of width ``leg_width`` hanging down to ``y = 0``,
    evenly spread with the outer legs flush with the body ends.
    Returns ``[P, 2]`` float64.
    """
    legs = int(legs)
    if legs < 1:
        raise ValueError(f"legs must be >= 1, got {legs}")
    if min(body_length, body_height, leg_length, leg_width) <= 0:
        raise ValueError("walker dimensions must be positive")
    if legs * leg_width >= body_length and legs > 1:
        raise ValueError(
            f"{legs} legs of width {leg_width} do not fit under a body of length {body_length}"
        )
    if legs == 1:
        starts = [0.5 * (body_length - leg_width)]
    else:
        starts = list(np.linspace(0.0, body_length - leg_width, legs))
    top = leg_length + body_height
    pts = []
    # bottom edge, left to right, dipping down for every leg
    for s in starts:
        if s > 0 or pts:
            pts.append((s, leg_length))
        pts.append((s, 0.0))
        pts.append((s + leg_width, 0.0))
        if s + leg_width < body_length - 1e-12:
            pts.append((s + leg_width, leg_length))
    if not np.isclose(pts[-1][0], body_length):
        pts.append((body_length, leg_length))
    pts.append((body_length, top))
    pts.append((0.0, top))
    if not np.isclose(starts[0], 0.0):
        pts.append((0.0, leg_length))
    p = np.array(pts, dtype=np.float64)
    keep = np.ones(len(p), dtype=bool)
    keep[1:] = np.linalg.norm(np.diff(p, axis=0), axis=1) > 1e-12
    return p[keep]


def tet_walker(
    body_length: float = 1.0,
    body_height: float = 0.3,
    legs: int = 2,
    leg_length: float = 0.3,
    leg_width: float = 0.15,
    thickness: float = 0.2,
    layers: int = 2,
    spacing: float | None = None,
):
    """Soft walker: :func:`walker_profile` extruded along z by ``thickness``
    (centred on z = 0), feet at y = 0. ``spacing`` defaults to ``leg_width / 2``.
    """
    if spacing is None:
        spacing = 0.5 * leg_width
    profile = walker_profile(body_length, body_height, legs, leg_length, leg_width)
    return extrude_profile(profile, thickness, layers=layers, spacing=spacing)

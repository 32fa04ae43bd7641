"""Tetrahedral and triangle mesh utilities: volumes, masses, orientation,
boundary surfaces and validation.

Conventions (shared by every mesh helper in :mod:`gradsim_taichi.meshes`):

- ``vertices``: float64 array ``[N, 3]``.
- ``tets``: integer array ``[T, 4]``; a tet ``(i0, i1, i2, i3)`` is positively
  oriented when ``det([x1 - x0, x2 - x0, x3 - x0]) > 0``.
- ``triangles``: integer array ``[F, 3]``; a surface of a solid is wound
  counter-clockwise seen from outside, so ``(x1 - x0) x (x2 - x0)`` points out.

Everything here is plain numpy; nothing touches Taichi.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "INDEX_DTYPE",
    "tet_volumes",
    "triangle_areas",
    "lumped_masses",
    "orient_tets",
    "tet_faces",
    "boundary_surface",
    "validate_tet_mesh",
    "validate_triangle_mesh",
]

#: Index dtype of the meshes the primitives build (matches Taichi's default ``ti.i32``).
INDEX_DTYPE = np.int32

# Faces of a positively oriented tet (i0, i1, i2, i3), each wound so that its
# normal points out of the tet. Face k is the one opposite local vertex 3 - k.
_TET_FACES_OUT = np.array([[0, 2, 1], [0, 1, 3], [0, 3, 2], [1, 2, 3]], dtype=np.int64)

# Default relative tolerance for degenerate elements: a tet whose volume is below
# rtol * (longest edge)^3 (a triangle whose area is below rtol * (longest edge)^2)
# counts as degenerate. A regular tet has volume ~0.118 * edge^3.
DEFAULT_DEGENERATE_RTOL = 1e-8


def _max_show(idx, limit: int = 10) -> str:
    """Format at most ``limit`` offending indices for an error message."""
    idx = np.asarray(idx).ravel()
    shown = ", ".join(str(int(i)) for i in idx[:limit])
    more = f", ... ({idx.size} in total)" if idx.size > limit else ""
    return f"[{shown}{more}]"


def tet_volumes(vertices, tets) -> np.ndarray:
    """Signed volume of every tet, ``det([x1 - x0, x2 - x0, x3 - x0]) / 6``.

    Positive for positively oriented tets, negative for inverted ones.
    Returns a float64 array ``[T]``.
    """
    x = np.asarray(vertices, dtype=np.float64)
    t = np.asarray(tets, dtype=np.int64)
    x0 = x[t[:, 0]]
    d1 = x[t[:, 1]] - x0
    d2 = x[t[:, 2]] - x0
    d3 = x[t[:, 3]] - x0
    return np.einsum("ij,ij->i", np.cross(d1, d2), d3) / 6.0


def triangle_areas(vertices, triangles) -> np.ndarray:
    """Unsigned area of every triangle (float64 array ``[F]``)."""
    x = np.asarray(vertices, dtype=np.float64)
    f = np.asarray(triangles, dtype=np.int64)
    n = np.cross(x[f[:, 1]] - x[f[:, 0]], x[f[:, 2]] - x[f[:, 0]])
    return 0.5 * np.linalg.norm(n, axis=1)


def lumped_masses(vertices, tets, density) -> np.ndarray:
    """Lumped vertex masses: each tet's mass ``density * |volume|`` is split
    equally among its 4 vertices.

    ``density`` is a scalar or a per-tet array ``[T]``. Returns float64 ``[N]``
    (vertices referenced by no tet get mass 0). The sum equals the total mass.
    """
    x = np.asarray(vertices, dtype=np.float64)
    t = np.asarray(tets, dtype=np.int64)
    rho = np.asarray(density, dtype=np.float64)
    if rho.ndim not in (0, 1) or (rho.ndim == 1 and rho.shape[0] != t.shape[0]):
        raise ValueError(
            f"density must be a scalar or an array of shape [{t.shape[0]}] (one per tet), "
            f"got shape {rho.shape}"
        )
    if np.any(~np.isfinite(rho)) or np.any(rho < 0):
        raise ValueError("density must be finite and non-negative")
    tet_mass = rho * np.abs(tet_volumes(x, t))
    masses = np.zeros(x.shape[0], dtype=np.float64)
    np.add.at(masses, t.ravel(), np.repeat(tet_mass / 4.0, 4))
    return masses


def orient_tets(vertices, tets) -> np.ndarray:
    """Return a copy of ``tets`` in which every negatively oriented tet has its
    last two vertices swapped, so all tets have positive volume.

    Zero-volume tets are left as they are (:func:`validate_tet_mesh` rejects them).
    """
    t = np.array(tets, copy=True)
    neg = tet_volumes(vertices, t) < 0
    t[neg, 2], t[neg, 3] = t[neg, 3].copy(), t[neg, 2].copy()
    return t


def tet_faces(tets):
    """All faces of a tet mesh, deduplicated.

    Returns ``(faces, counts, owner)``: ``faces`` ``[F, 3]`` holds each distinct
    face once as sorted vertex indices, ``counts`` ``[F]`` how many tets use it
    (1 on the boundary, 2 inside a conforming mesh, more is non-manifold), and
    ``owner`` ``[F]`` the index of the first tet that uses it.
    """
    t = np.asarray(tets, dtype=np.int64)
    all_faces = t[:, _TET_FACES_OUT].reshape(-1, 3)
    keys = np.sort(all_faces, axis=1)
    faces, first, counts = np.unique(keys, axis=0, return_index=True, return_counts=True)
    owner = first // 4
    return faces, counts, owner


def boundary_surface(tets, vertices=None, compact: bool = False):
    """Boundary surface of a tet mesh: the faces used by exactly one tet.

    The triangles are wound so that their normals point out of the solid,
    assuming positively oriented tets. If ``vertices`` is given, each tet's
    orientation is taken from its signed volume instead, so inverted tets also
    give outward faces.

    A face shared by more than two tets makes the mesh non-manifold and raises
    ``ValueError``.

    Returns ``triangles`` ``[K, 3]`` indexing the original vertices; with
    ``compact=True`` returns ``(triangles, vertex_ids)`` where the triangles
    index the compact vertex set ``vertices[vertex_ids]`` (only the vertices on
    the surface, in increasing original order).
    """
    t = np.asarray(tets, dtype=np.int64)
    if t.ndim != 2 or t.shape[1] != 4:
        raise ValueError(f"tets must have shape [T, 4], got {t.shape}")
    if vertices is not None:
        t = orient_tets(vertices, t)
    all_faces = t[:, _TET_FACES_OUT].reshape(-1, 3)
    keys = np.sort(all_faces, axis=1)
    _, inverse, counts = np.unique(keys, axis=0, return_inverse=True, return_counts=True)
    inverse = inverse.ravel()
    face_counts = counts[inverse]
    if np.any(face_counts > 2):
        bad_tets = np.unique(np.nonzero(face_counts > 2)[0] // 4)
        raise ValueError(
            "non-manifold tet mesh: some faces are shared by more than two tets "
            f"(tets {_max_show(bad_tets)})"
        )
    tris = all_faces[face_counts == 1].astype(INDEX_DTYPE)
    if not compact:
        return tris
    vertex_ids, remapped = np.unique(tris.ravel(), return_inverse=True)
    return remapped.reshape(-1, 3).astype(INDEX_DTYPE), vertex_ids.astype(INDEX_DTYPE)


def _check_vertices(vertices, name: str = "vertices") -> np.ndarray:
    x = np.asarray(vertices)
    if x.ndim != 2 or x.shape[1] != 3:
        raise ValueError(f"{name} must have shape [N, 3], got {x.shape}")
    if x.shape[0] == 0:
        raise ValueError(f"{name} is empty")
    if not (np.issubdtype(x.dtype, np.floating) or np.issubdtype(x.dtype, np.integer)):
        raise ValueError(f"{name} must be a real numeric array, got dtype {x.dtype}")
    x = x.astype(np.float64)
    bad = np.nonzero(~np.all(np.isfinite(x), axis=1))[0]
    if bad.size:
        raise ValueError(f"{name} contain NaN or inf at vertices {_max_show(bad)}")
    return x


def _check_cells(cells, n_vertices: int, k: int, name: str) -> np.ndarray:
    c = np.asarray(cells)
    if c.ndim != 2 or c.shape[1] != k:
        raise ValueError(f"{name} must have shape [M, {k}], got {c.shape}")
    if c.shape[0] == 0:
        raise ValueError(f"{name} is empty")
    if not np.issubdtype(c.dtype, np.integer):
        raise ValueError(f"{name} must be an integer array, got dtype {c.dtype}")
    c = c.astype(np.int64)
    neg = np.nonzero(np.any(c < 0, axis=1))[0]
    if neg.size:
        raise ValueError(f"{name} contain negative indices in rows {_max_show(neg)}")
    oob = np.nonzero(np.any(c >= n_vertices, axis=1))[0]
    if oob.size:
        raise ValueError(
            f"{name} contain out-of-range indices (>= {n_vertices} vertices) in rows "
            f"{_max_show(oob)}"
        )
    s = np.sort(c, axis=1)
    rep = np.nonzero(np.any(s[:, 1:] == s[:, :-1], axis=1))[0]
    if rep.size:
        raise ValueError(f"{name} repeat a vertex within rows {_max_show(rep)}")
    return c


def _check_unreferenced(n_vertices: int, cells: np.ndarray, name: str) -> None:
    used = np.zeros(n_vertices, dtype=bool)
    used[cells.ravel()] = True
    unused = np.nonzero(~used)[0]
    if unused.size:
        raise ValueError(
            f"vertices {_max_show(unused)} are referenced by no {name}; remove them or pass "
            "allow_unreferenced=True"
        )


def _longest_edge(x: np.ndarray, cells: np.ndarray) -> np.ndarray:
    k = cells.shape[1]
    longest = np.zeros(cells.shape[0])
    for a in range(k):
        for b in range(a + 1, k):
            d = np.linalg.norm(x[cells[:, a]] - x[cells[:, b]], axis=1)
            longest = np.maximum(longest, d)
    return longest


def validate_tet_mesh(
    vertices,
    tets,
    *,
    allow_unreferenced: bool = False,
    require_positive: bool = True,
    rtol: float = DEFAULT_DEGENERATE_RTOL,
):
    """Check a tet mesh and return it as ``(vertices float64 [N, 3], tets int64 [T, 4])``.

    Raises ``ValueError`` naming the problem and the offending indices for:
    wrong shapes or dtypes, empty arrays, NaN/inf vertices, negative or
    out-of-range indices, a vertex repeated within a tet, degenerate tets
    (``|volume| <= rtol * longest_edge^3``), negatively oriented tets (when
    ``require_positive``; fix them with :func:`orient_tets`), vertices used by
    no tet (unless ``allow_unreferenced``) and faces shared by more than two tets.
    """
    x = _check_vertices(vertices)
    t = _check_cells(tets, x.shape[0], 4, "tets")
    vol = tet_volumes(x, t)
    degenerate = np.nonzero(np.abs(vol) <= rtol * _longest_edge(x, t) ** 3)[0]
    if degenerate.size:
        raise ValueError(
            f"zero or near-zero volume tets (|volume| <= {rtol:g} * longest_edge^3): "
            f"tets {_max_show(degenerate)}"
        )
    if require_positive:
        neg = np.nonzero(vol < 0)[0]
        if neg.size:
            raise ValueError(
                f"negatively oriented tets (det([x1-x0, x2-x0, x3-x0]) < 0): tets "
                f"{_max_show(neg)}; fix them with orient_tets(vertices, tets)"
            )
    if not allow_unreferenced:
        _check_unreferenced(x.shape[0], t, "tet")
    _, counts, owner = tet_faces(t)
    over = np.nonzero(counts > 2)[0]
    if over.size:
        raise ValueError(
            f"non-manifold tet mesh: faces shared by more than two tets (tets "
            f"{_max_show(owner[over])})"
        )
    return x, t


def _edge_table(f: np.ndarray):
    """Undirected edges of triangles: (unique sorted edges, counts, inverse)."""
    directed = f[:, [0, 1, 1, 2, 2, 0]].reshape(-1, 2)
    und = np.sort(directed, axis=1)
    edges, inverse, counts = np.unique(und, axis=0, return_inverse=True, return_counts=True)
    return directed, edges, counts, inverse.ravel()


def validate_triangle_mesh(
    vertices,
    triangles,
    *,
    require_closed: bool = False,
    require_manifold: bool = False,
    allow_unreferenced: bool = True,
    rtol: float = DEFAULT_DEGENERATE_RTOL,
):
    """Check a triangle mesh and return it as ``(vertices float64, triangles int64)``.

    Always rejects (``ValueError``): wrong shapes or dtypes, empty arrays,
    NaN/inf vertices, negative or out-of-range indices, a vertex repeated within
    a triangle, degenerate triangles (``area <= rtol * longest_edge^2``), and
    unreferenced vertices when ``allow_unreferenced=False``.

    With ``require_manifold`` (implied by ``require_closed``): edges shared by
    more than two triangles, and two triangles that traverse a shared edge in
    the same direction (inconsistent winding). With ``require_closed``: also
    boundary edges (used by one triangle only), so the surface is watertight.
    """
    x = _check_vertices(vertices)
    f = _check_cells(triangles, x.shape[0], 3, "triangles")
    area = triangle_areas(x, f)
    degenerate = np.nonzero(area <= rtol * _longest_edge(x, f) ** 2)[0]
    if degenerate.size:
        raise ValueError(
            f"zero or near-zero area triangles (area <= {rtol:g} * longest_edge^2): "
            f"triangles {_max_show(degenerate)}"
        )
    if not allow_unreferenced:
        _check_unreferenced(x.shape[0], f, "triangle")
    if require_manifold or require_closed:
        directed, edges, counts, inverse = _edge_table(f)
        over = np.nonzero(counts > 2)[0]
        if over.size:
            tris = np.unique(np.nonzero(np.isin(inverse, over))[0] // 3)
            raise ValueError(
                f"non-manifold surface: edges {edges[over][:5].tolist()} are shared by more "
                f"than two triangles (triangles {_max_show(tris)})"
            )
        # On a consistently wound manifold every directed edge occurs once.
        _, dcounts = np.unique(directed, axis=0, return_counts=True)
        if np.any(dcounts > 1):
            d_edges, d_inv, d_counts = np.unique(
                directed, axis=0, return_inverse=True, return_counts=True
            )
            tris = np.unique(np.nonzero(d_counts[d_inv.ravel()] > 1)[0] // 3)
            raise ValueError(
                f"inconsistent winding: triangles {_max_show(tris)} traverse a shared edge "
                "in the same direction"
            )
        if require_closed:
            open_edges = np.nonzero(counts == 1)[0]
            if open_edges.size:
                tris = np.unique(np.nonzero(np.isin(inverse, open_edges))[0] // 3)
                raise ValueError(
                    f"surface is not closed: {open_edges.size} boundary edges (e.g. "
                    f"{edges[open_edges][:5].tolist()}) on triangles {_max_show(tris)}"
                )
    return x, f

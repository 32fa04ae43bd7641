"""Procedural triangle meshes: the rectangular cloth grid with index sets for pinning, and
the rigid presets' L-shaped prism."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gradsim_taichi.meshes.tet_utils import INDEX_DTYPE

__all__ = ["ClothGrid", "cloth_grid", "lshape_mesh"]

_PLANES = ("xz", "xy")


@dataclass(frozen=True)
class ClothGrid:
    """A rectangular cloth grid and its index sets.

    Grid vertex ``(i, j)`` (``0 <= i <= nx`` along the first in-plane axis,
    ``0 <= j <= ny`` along the second) has index ``j * (nx + 1) + i``. For
    ``plane="xz"`` the axes are (x, z) and the normal is +y; for ``plane="xy"``
    they are (x, y) and the normal is +z. "bottom"/"top" are ``j == 0`` /
    ``j == ny`` (so "top" is the highest row of a hanging ``"xy"`` cloth),
    "left"/"right" are ``i == 0`` / ``i == nx``.

    Attributes:
        vertices: float64 ``[(nx + 1) (ny + 1), 3]``.
        triangles: int32 ``[2 nx ny, 3]``, all wound so their normal is the
            plane normal above.
        resolution: ``(nx, ny)`` cells.
        corners: int32 ``[4]``: bottom-left, bottom-right, top-right, top-left.
        edge_bottom, edge_top: int32 ``[nx + 1]`` rows ``j = 0`` and ``j = ny``.
        edge_left, edge_right: int32 ``[ny + 1]`` columns ``i = 0`` and ``i = nx``.
    """

    vertices: np.ndarray
    triangles: np.ndarray
    resolution: tuple
    corners: np.ndarray
    edge_bottom: np.ndarray
    edge_top: np.ndarray
    edge_left: np.ndarray
    edge_right: np.ndarray

    def index(self, i, j):
        """Vertex index of grid point ``(i, j)``."""
        return np.asarray(j) * (self.resolution[0] + 1) + np.asarray(i)

    @property
    def corner_bottom_left(self) -> int:
        return int(self.corners[0])

    @property
    def corner_bottom_right(self) -> int:
        return int(self.corners[1])

    @property
    def corner_top_right(self) -> int:
        return int(self.corners[2])

    @property
    def corner_top_left(self) -> int:
        return int(self.corners[3])


def cloth_grid(
    size=(1.0, 1.0),
    resolution=(10, 10),
    origin=(0.0, 0.0, 0.0),
    plane: str = "xz",
    alternate_diagonals: bool = False,
) -> ClothGrid:
    """Rectangular cloth of ``size = (w, h)`` split into ``resolution = (nx, ny)``
    cells of two triangles, with grid point ``(0, 0)`` at ``origin``.

    ``plane="xz"`` lays it flat (w along x, h along z, at height ``origin[1]``,
    normal +y); ``plane="xy"`` stands it up (w along x, h along y, normal +z).
    With ``alternate_diagonals`` the cell diagonals alternate in a checkerboard,
    which makes the grid's response symmetric; otherwise every cell is split
    along the same diagonal. Returns a :class:`ClothGrid`.
    """
    if plane not in _PLANES:
        raise ValueError(f"plane must be one of {_PLANES}, got {plane!r}")
    sz = np.asarray(size, dtype=np.float64).ravel()
    if sz.size != 2 or not np.all(np.isfinite(sz)) or np.any(sz <= 0):
        raise ValueError(f"size must be two positive numbers (w, h), got {size!r}")
    res = np.asarray(resolution).ravel()
    if res.size != 2 or np.any(res < 1) or np.any(res != np.round(res)):
        raise ValueError(f"resolution must be two integers >= 1, got {resolution!r}")
    nx, ny = int(res[0]), int(res[1])
    w, h = float(sz[0]), float(sz[1])
    o = np.asarray(origin, dtype=np.float64).ravel()
    if o.size != 3 or not np.all(np.isfinite(o)):
        raise ValueError(f"origin must be 3 finite numbers, got {origin!r}")

    jj, ii = np.meshgrid(np.arange(ny + 1), np.arange(nx + 1), indexing="ij")
    u = (w * ii / nx).ravel()
    v = (h * jj / ny).ravel()
    vertices = np.tile(o, (u.size, 1))
    vertices[:, 0] += u
    vertices[:, 2 if plane == "xz" else 1] += v

    ci, cj = np.meshgrid(np.arange(nx), np.arange(ny), indexing="xy")
    ci, cj = ci.ravel(), cj.ravel()
    p00 = cj * (nx + 1) + ci
    p10, p01, p11 = p00 + 1, p00 + nx + 1, p00 + nx + 2
    # counter-clockwise in (u, v): normal u x v
    flip = ((ci + cj) % 2 == 1) if alternate_diagonals else np.zeros(ci.size, dtype=bool)
    t1 = np.where(flip[:, None], np.stack([p00, p10, p01], 1), np.stack([p00, p10, p11], 1))
    t2 = np.where(flip[:, None], np.stack([p10, p11, p01], 1), np.stack([p00, p11, p01], 1))
    triangles = np.stack([t1, t2], axis=1).reshape(-1, 3)
    if plane == "xz":
        # x cross z = -y: reverse the winding so the normal is +y
        triangles = triangles[:, [0, 2, 1]]

    idx = np.arange((nx + 1) * (ny + 1)).reshape(ny + 1, nx + 1)
    corners = np.array([idx[0, 0], idx[0, nx], idx[ny, nx], idx[ny, 0]])
    return ClothGrid(
        vertices=vertices,
        triangles=triangles.astype(INDEX_DTYPE),
        resolution=(nx, ny),
        corners=corners.astype(INDEX_DTYPE),
        edge_bottom=idx[0, :].astype(INDEX_DTYPE),
        edge_top=idx[ny, :].astype(INDEX_DTYPE),
        edge_left=idx[:, 0].astype(INDEX_DTYPE),
        edge_right=idx[:, nx].astype(INDEX_DTYPE),
    )


def lshape_mesh(size: float = 0.4, thickness: float = 0.2):
    """A non-convex L-shaped prism (a trimesh, closed, outward winding), centred near the
    origin: the L of legs ``size`` and width ``size / 2`` in the xy plane, extruded
    ``thickness`` along z about z = 0 (the scene files' ``shape = "lshape"``)."""
    import trimesh

    from gradsim_taichi.meshes.tet_primitives import triangulate_polygon

    s, t = size, size / 2
    poly = np.array([[0, 0], [s, 0], [s, t], [t, t], [t, s], [0, s]]) - s / 3
    pts, tris = triangulate_polygon(poly, interior=False)
    mesh = trimesh.creation.extrude_triangulation(pts, tris, thickness)
    mesh.apply_translation([0, 0, -thickness / 2])
    mesh.fix_normals()
    return mesh

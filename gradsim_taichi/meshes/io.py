"""Mesh I/O: triangle meshes through trimesh, tet meshes through meshio, and
optional tetrahedralization of closed surfaces through the ``tetgen`` package.

``tetgen`` wraps TetGen, which is AGPL-licensed; it is an opt-in extra
(``pip install gradsim-taichi[mesher-agpl]``) and is imported only when
:func:`tetrahedralize_surface` is called.
"""

from __future__ import annotations

import os

import numpy as np

from gradsim_taichi.meshes.tet_utils import (
    INDEX_DTYPE,
    orient_tets,
    validate_tet_mesh,
    validate_triangle_mesh,
)

__all__ = [
    "load_triangle_mesh",
    "read_tet_mesh",
    "write_tet_mesh",
    "tetrahedralize_surface",
    "TETGEN_INSTALL_HINT",
]

TETGEN_INSTALL_HINT = (
    "tetrahedralize_surface needs the optional 'tetgen' package: install "
    "`gradsim-taichi[mesher-agpl]` (pip install 'gradsim-taichi[mesher-agpl]'). "
    "Note that TetGen is AGPL-licensed, which is why it is not a default dependency."
)


def _require_file(path) -> str:
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"mesh file not found: {path!r}")
    if not os.path.isfile(path):
        raise ValueError(f"mesh path is not a file: {path!r}")
    return path


def load_triangle_mesh(path, merge_vertices: bool = True, validate: bool = True):
    """Load a triangle mesh (OBJ, STL, PLY, ... anything trimesh reads).

    Scenes with several parts are concatenated into one mesh. With
    ``merge_vertices`` trimesh merges duplicated vertices (an OBJ split along UV
    or normal seams becomes one connected mesh) and drops degenerate faces.
    With ``validate`` the result goes through
    :func:`~gradsim_taichi.meshes.tet_utils.validate_triangle_mesh`.

    Returns ``(vertices float64 [N, 3], triangles int32 [F, 3])``. Raises
    ``FileNotFoundError`` for a missing file and ``ValueError`` for a file that
    cannot be parsed or holds no triangles.
    """
    import trimesh

    path = _require_file(path)
    try:
        mesh = trimesh.load(path, force="mesh", process=merge_vertices)
    except Exception as exc:  # trimesh raises many exception types for bad files
        raise ValueError(f"could not read a triangle mesh from {path!r}: {exc}") from exc
    if not isinstance(mesh, trimesh.Trimesh):
        raise ValueError(f"{path!r} holds no triangle mesh (got {type(mesh).__name__})")
    if merge_vertices:
        mesh.update_faces(mesh.nondegenerate_faces())
        mesh.remove_unreferenced_vertices()
    vertices = np.asarray(mesh.vertices, dtype=np.float64)
    triangles = np.asarray(mesh.faces)
    if triangles.ndim != 2 or triangles.shape[0] == 0 or vertices.shape[0] == 0:
        raise ValueError(f"{path!r} holds no triangles")
    triangles = triangles.astype(INDEX_DTYPE)
    if validate:
        try:
            validate_triangle_mesh(vertices, triangles)
        except ValueError as exc:
            raise ValueError(f"invalid triangle mesh in {path!r}: {exc}") from exc
    return vertices, triangles


def read_tet_mesh(path, validate: bool = True):
    """Read a tetrahedral mesh with meshio (.msh, .vtk, .vtu, ...).

    All ``tetra`` cell blocks are concatenated; other cells (boundary
    triangles, lines, ...) are ignored. Vertices used by no tet are dropped
    and the tets renumbered; negatively oriented tets are flipped. With
    ``validate`` the mesh goes through
    :func:`~gradsim_taichi.meshes.tet_utils.validate_tet_mesh`.

    Returns ``(vertices float64 [N, 3], tets int32 [T, 4])``.
    """
    import meshio

    path = _require_file(path)
    # .msh is ambiguous to meshio (ansys or gmsh); when it cannot decide it
    # calls sys.exit, so name the format and catch SystemExit as well.
    file_format = "gmsh" if path.lower().endswith(".msh") else None
    try:
        mesh = meshio.read(path, file_format=file_format)
    except (Exception, SystemExit) as exc:  # ReadError, KeyError, ValueError, sys.exit ...
        raise ValueError(f"could not read a tet mesh from {path!r}: {exc!r}") from exc
    blocks = [np.asarray(c.data) for c in mesh.cells if c.type == "tetra"]
    if not blocks:
        types = sorted({c.type for c in mesh.cells})
        raise ValueError(f"{path!r} holds no 'tetra' cells (cell types found: {types})")
    tets = np.concatenate(blocks, axis=0).astype(np.int64)
    points = np.asarray(mesh.points, dtype=np.float64)
    if points.ndim != 2 or points.shape[1] != 3:
        raise ValueError(f"{path!r}: expected 3D points, got shape {points.shape}")
    if tets.size and (tets.min() < 0 or tets.max() >= points.shape[0]):
        raise ValueError(f"{path!r}: tet indices out of range for {points.shape[0]} points")
    used, inverse = np.unique(tets.ravel(), return_inverse=True)
    vertices = points[used]
    tets = orient_tets(vertices, inverse.reshape(-1, 4))
    if validate:
        try:
            validate_tet_mesh(vertices, tets)
        except ValueError as exc:
            raise ValueError(f"invalid tet mesh in {path!r}: {exc}") from exc
    return vertices, tets.astype(INDEX_DTYPE)


def write_tet_mesh(
    path, vertices, tets, point_data=None, cell_data=None, file_format=None, binary=None
):
    """Write a tet mesh with meshio; the format follows the extension unless
    ``file_format`` names one (any meshio format name).

    ``.msh`` is written as Gmsh 2.2 with every tet tagged 1: ASCII by default,
    binary when ``point_data``/``cell_data`` is given (meshio 5.3 cannot read
    back the data sections of an ASCII .msh) or when ``binary=True``.

    ``point_data`` maps names to ``[N, ...]`` arrays, ``cell_data`` maps names
    to ``[T, ...]`` arrays (one value per tet).
    """
    import meshio

    x, t = validate_tet_mesh(vertices, tets, allow_unreferenced=True, require_positive=False)
    path = os.fspath(path)
    if file_format is None and path.lower().endswith(".msh"):
        file_format = "gmsh22"
    cd = None
    if cell_data:
        cd = {k: [np.asarray(v)] for k, v in cell_data.items()}
        for k, v in cd.items():
            if v[0].shape[0] != t.shape[0]:
                raise ValueError(
                    f"cell_data[{k!r}] has {v[0].shape[0]} rows, expected {t.shape[0]} "
                    "(one per tet)"
                )
    pd = {k: np.asarray(v) for k, v in (point_data or {}).items()}
    for k, v in pd.items():
        if v.shape[0] != x.shape[0]:
            raise ValueError(
                f"point_data[{k!r}] has {v.shape[0]} rows, expected {x.shape[0]} (one per vertex)"
            )
    mesh = meshio.Mesh(x, [("tetra", t)], point_data=pd or None, cell_data=cd)
    if file_format == "gmsh22":
        # Gmsh needs physical/geometrical tags; give every tet tag 1.
        tags = np.ones(t.shape[0], dtype=np.int32)
        mesh.cell_data.setdefault("gmsh:physical", [tags])
        mesh.cell_data.setdefault("gmsh:geometrical", [tags])
        if binary is None:
            binary = bool(point_data) or bool(cell_data)
        meshio.write(path, mesh, file_format=file_format, binary=binary)
    elif binary is not None:
        meshio.write(path, mesh, file_format=file_format, binary=binary)
    else:
        meshio.write(path, mesh, file_format=file_format)


def _import_tetgen():
    try:
        import tetgen
    except ImportError as exc:
        raise ImportError(TETGEN_INSTALL_HINT) from exc
    return tetgen


def tetrahedralize_surface(vertices, triangles, quality: bool = True, **tetgen_kwargs):
    """Tetrahedralize the solid bounded by a closed, manifold triangle surface
    using the optional ``tetgen`` package (TetGen is AGPL-licensed; install
    ``gradsim-taichi[mesher-agpl]``).

    The surface is checked first (closed, manifold, consistently wound).
    ``quality`` asks TetGen for a quality mesh (its ``minratio``/``mindihedral``
    defaults); other keyword arguments go to ``tetgen.TetGen.tetrahedralize``
    (e.g. ``maxvolume=...``). Returns ``(vertices float64, tets int32)``,
    positively oriented and validated.
    """
    tetgen = _import_tetgen()
    x, f = validate_triangle_mesh(vertices, triangles, require_closed=True)
    tg = tetgen.TetGen(x, f.astype(np.int32))
    kwargs = dict(tetgen_kwargs)
    if quality:
        kwargs.setdefault("minratio", 1.5)
        kwargs.setdefault("mindihedral", 10.0)
    result = tg.tetrahedralize(order=1, **kwargs)
    nodes = np.asarray(result[0], dtype=np.float64)
    elems = np.asarray(result[1], dtype=np.int64)
    used, inverse = np.unique(elems.ravel(), return_inverse=True)
    nodes = nodes[used]
    elems = orient_tets(nodes, inverse.reshape(-1, 4))
    nodes, elems = validate_tet_mesh(nodes, elems)
    return nodes, elems.astype(INDEX_DTYPE)

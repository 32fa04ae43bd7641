"""Mesh generation and mesh I/O: plain numpy/scipy/trimesh/meshio, no Taichi.

Vertices are float64 ``[N, 3]``; tets are int32 ``[T, 4]`` with positive
orientation (``det([x1 - x0, x2 - x0, x3 - x0]) > 0``); triangles are int32
``[F, 3]``, wound outward on closed surfaces.
"""

from gradsim_taichi.meshes.io import (
    load_triangle_mesh,
    read_tet_mesh,
    tetrahedralize_surface,
    write_tet_mesh,
)
from gradsim_taichi.meshes.tet_primitives import (
    extrude_profile,
    gear_profile,
    tet_ball,
    tet_beam,
    tet_box,
    tet_gear,
    tet_walker,
    triangulate_polygon,
    walker_profile,
)
from gradsim_taichi.meshes.tet_utils import (
    boundary_surface,
    lumped_masses,
    orient_tets,
    tet_faces,
    tet_volumes,
    triangle_areas,
    validate_tet_mesh,
    validate_triangle_mesh,
)
from gradsim_taichi.meshes.tri_primitives import ClothGrid, cloth_grid, lshape_mesh

__all__ = [
    "ClothGrid",
    "boundary_surface",
    "cloth_grid",
    "extrude_profile",
    "gear_profile",
    "load_triangle_mesh",
    "lshape_mesh",
    "lumped_masses",
    "orient_tets",
    "read_tet_mesh",
    "tet_ball",
    "tet_beam",
    "tet_box",
    "tet_faces",
    "tet_gear",
    "tet_volumes",
    "tet_walker",
    "tetrahedralize_surface",
    "triangle_areas",
    "triangulate_polygon",
    "validate_tet_mesh",
    "validate_triangle_mesh",
    "walker_profile",
    "write_tet_mesh",
]

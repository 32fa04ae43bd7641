"""Mesh generation and mesh I/O (plain numpy/scipy/trimesh/meshio; no Taichi)."""

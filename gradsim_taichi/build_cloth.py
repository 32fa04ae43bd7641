"""ModelBuilder methods for cloth (triangle membranes, bending, aerodynamics).

Mixed into :class:`gradsim_taichi.builder.ModelBuilder`. Methods validate their input,
add particles through ``self.add_particles`` where needed, and register a factory in
``self._force_factories`` (a particle force model) or ``self._system_factories``
(a system of its own) that ``finalize()`` calls with the Model being built.

All cloth pieces of a builder share one force model of each kind (membrane, bending,
aerodynamics): triangles and hinges are collected here and each factory is registered
once, so a scene with many cloths still runs one kernel per kind and has one
``tri_ke`` / ``edge_ke`` / ... parameter covering all of them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gradsim_taichi.checks import (
    check_finite,
    check_shape,
    per_item,
    per_row3,
    placement_rotation,
    stable_default,
)

_PIN_SETS = ("corners", "top_corners", "bottom_corners", "top", "bottom", "left", "right",
             "top_left", "top_right", "bottom_left", "bottom_right")


@dataclass(frozen=True)
class Cloth:
    """What ``add_cloth_*`` added.

    Attributes:
        particles: global particle indices [N] of the cloth's vertices (in vertex order).
        faces: [T, 3] triangles in global particle indices (for rendering).
        triangles: indices [T] of the cloth's triangles in the ``tri_*`` parameters.
        hinges: indices [H] of its hinges in the ``edge_*`` parameters.
        grid: the :class:`~gradsim_taichi.meshes.ClothGrid` for grids, else None.
    """

    particles: np.ndarray
    faces: np.ndarray
    triangles: np.ndarray
    hinges: np.ndarray
    grid: object = None


class _ClothState:
    """Triangles, hinges and aerodynamics collected over all add_cloth_* calls."""

    def __init__(self):
        self.tris: list[tuple] = []  # (faces [T, 3] global, ke, ka, kd)
        self.hinges: list[tuple] = []  # (hinges [H, 4] global, rest angle, ke, kd)
        self.lift = None
        self.drag = None
        self.wind = np.zeros(3)
        self.aero = False
        self.registered: set = set()

    def triangle_count(self) -> int:
        return int(sum(len(t[0]) for t in self.tris))

    def hinge_count(self) -> int:
        return int(sum(len(h[0]) for h in self.hinges))


class ClothBuilderMixin:
    """Cloth methods of :class:`~gradsim_taichi.builder.ModelBuilder`."""

    # ---- public ----------------------------------------------------------------------
    def add_cloth_grid(self, size=(1.0, 1.0), resolution=(16, 16), origin=(0.0, 0.0, 0.0),
                       plane: str = "xz", mass=None, density=None, pinned=None,
                       velocity=(0.0, 0.0, 0.0), tri_ke=None, tri_ka=None, tri_kd=None,
                       edge_ke=None, edge_kd=0.0, lift=None, drag=None,
                       alternate_diagonals: bool = False) -> Cloth:
        """Add a rectangular cloth (see :func:`gradsim_taichi.meshes.cloth_grid`).

        Args:
            size: (width, height) [m]. resolution: (nx, ny) cells of two triangles.
            origin: position of grid corner (0, 0). plane: ``"xz"`` (flat, normal +y) or
                ``"xy"`` (standing, normal +z; "top" is the highest row).
            mass: particle mass [kg], scalar or [N]; or
            density: area density [kg/m^2], lumped to the vertices (default 0.1 when
                neither is given).
            pinned: None, a name or a list of names from ``"corners"``, ``"top_corners"``,
                ``"bottom_corners"``, ``"top"``, ``"bottom"``, ``"left"``, ``"right"``,
                ``"top_left"``, ``"top_right"``, ``"bottom_left"``, ``"bottom_right"``;
                or local vertex indices; or a bool mask [N].
            velocity: initial velocity (3,) or [N, 3] [m/s].
            tri_ke, tri_ka, tri_kd: membrane stretch / area stiffness and area damping,
                scalars or per triangle [T].
            edge_ke, edge_kd: bending stiffness and damping, scalars or per hinge [H].
                Unset (None) stiffness and damping terms get the reference's values
                (tri_ke = tri_ka = 100, tri_kd = 10, edge_ke = 100) or, where this
                cloth's lightest free particle is too light for them, the largest values
                that stay well inside explicit stability at 16 substeps of 60 fps
                (``gradsim_taichi.checks.stable_default``): a light cloth gets a soft,
                lightly damped membrane rather than a NaN. Give values to fix them.
            lift, drag: aerodynamic coefficients; giving either turns aerodynamics on.
                They are global: all cloths share them (conflicting values raise).
            alternate_diagonals: alternate the cell diagonals (symmetric response).
        """
        from gradsim_taichi.meshes import cloth_grid

        grid = cloth_grid(size, resolution, origin, plane, alternate_diagonals)
        pin_mask = self._cloth_pin_mask(pinned, len(grid.vertices), grid)
        return self._add_cloth(grid.vertices, grid.triangles, mass, density, pin_mask,
                               velocity, tri_ke, tri_ka, tri_kd, edge_ke, edge_kd, lift, drag,
                               grid)

    def add_cloth_mesh(self, vertices, triangles, origin=(0.0, 0.0, 0.0), scale=1.0,
                       orientation=None, mass=None, density=None, pinned=None,
                       velocity=(0.0, 0.0, 0.0), tri_ke=None, tri_ka=None, tri_kd=None,
                       edge_ke=None, edge_kd=0.0, lift=None, drag=None,
                       rotation=None) -> Cloth:
        """Add cloth from a triangle mesh: vertices [N, 3] placed at
        ``origin + scale * R @ vertex`` (``orientation``: a quaternion ``(w, x, y, z)`` or
        a 3x3 matrix, as for ``add_rigid_body``; ``rotation``: its deprecated name) and
        triangles [T, 3] (a consistently wound manifold without degenerate triangles or
        unused vertices). ``pinned`` is None, local vertex indices or a bool mask [N];
        other arguments as in :meth:`add_cloth_grid`."""
        from gradsim_taichi.meshes import validate_triangle_mesh

        v, t = validate_triangle_mesh(vertices, triangles, require_manifold=True,
                                      allow_unreferenced=False)
        s = float(np.asarray(scale, dtype=np.float64))
        if not (np.isfinite(s) and s > 0):
            raise ValueError(f"scale must be a finite number > 0; got {scale!r}")
        o = np.asarray(origin, dtype=np.float64)
        if o.shape != (3,) or not np.all(np.isfinite(o)):
            raise ValueError(f"origin must be 3 finite numbers; got {origin!r}")
        r = placement_rotation(orientation, rotation, "add_cloth_mesh")
        pin_mask = self._cloth_pin_mask(pinned, len(v), None)
        return self._add_cloth(o + s * v @ r.T, t, mass, density, pin_mask, velocity, tri_ke,
                               tri_ka, tri_kd, edge_ke, edge_kd, lift, drag, None)

    def add_cloth_from_file(self, path, **kwargs) -> Cloth:
        """Add cloth from a mesh file trimesh reads (OBJ, STL, PLY, ...); keyword arguments
        as in :meth:`add_cloth_mesh`."""
        from gradsim_taichi.meshes import load_triangle_mesh

        vertices, triangles = load_triangle_mesh(path)
        return self.add_cloth_mesh(vertices, triangles, **kwargs)

    def set_wind(self, velocity=(0.0, 0.0, 0.0), lift=None, drag=None) -> None:
        """Set the wind velocity (3,) [m/s] and optionally the global lift / drag
        coefficients; turns aerodynamics on (the ``wind``, ``cloth_lift`` and
        ``cloth_drag`` parameters exist only with aerodynamics)."""
        st = self._cloth_state()
        st.wind = check_shape("wind velocity", check_finite("wind velocity", velocity), (3,))
        for name, value in (("lift", lift), ("drag", drag)):
            if value is not None:
                setattr(st, name, self._cloth_scalar(name, value))
        self._cloth_enable_aero()

    # ---- internals -------------------------------------------------------------------
    def _cloth_state(self) -> _ClothState:
        st = getattr(self, "_cloth", None)
        if st is None:
            st = self._cloth = _ClothState()
        return st

    @staticmethod
    def _cloth_scalar(name, value) -> float:
        arr = np.asarray(value, dtype=np.float64)
        if arr.ndim != 0 or not np.isfinite(arr) or arr < 0:
            raise ValueError(f"{name} must be a finite scalar >= 0; got {value!r}")
        return float(arr)

    @staticmethod
    def _cloth_pin_mask(pinned, n: int, grid) -> np.ndarray:
        mask = np.zeros(n, dtype=bool)
        if pinned is None or pinned is False:
            return mask
        names = [pinned] if isinstance(pinned, str) else None
        if names is None and isinstance(pinned, (list, tuple)) and pinned \
                and all(isinstance(p, str) for p in pinned):
            names = list(pinned)
        if names is not None:
            if grid is None:
                raise ValueError(f"pinned={pinned!r}: named pin sets need a cloth grid; give "
                                 "vertex indices or a bool mask for meshes")
            sets = {
                "corners": grid.corners, "top": grid.edge_top, "bottom": grid.edge_bottom,
                "left": grid.edge_left, "right": grid.edge_right,
                "top_corners": grid.corners[[3, 2]], "bottom_corners": grid.corners[[0, 1]],
                "top_left": grid.corners[[3]], "top_right": grid.corners[[2]],
                "bottom_left": grid.corners[[0]], "bottom_right": grid.corners[[1]],
            }
            for name in names:
                if name not in sets:
                    raise ValueError(f"pinned={name!r} is not a pin set; expected one of "
                                     f"{_PIN_SETS}, vertex indices or a bool mask")
                mask[sets[name]] = True
            return mask
        arr = np.asarray(pinned)
        if arr.dtype == bool:
            if arr.shape != (n,):
                raise ValueError(f"pinned mask must have shape ({n},); got {arr.shape}")
            return arr.copy()
        if not np.issubdtype(arr.dtype, np.integer):
            raise ValueError(f"pinned must be a pin set name, integer vertex indices or a "
                             f"bool mask; got dtype {arr.dtype}")
        arr = arr.ravel()
        bad = arr[(arr < 0) | (arr >= n)]
        if len(bad):
            raise ValueError(f"pinned vertex index {int(bad[0])} is out of range [0, {n})")
        mask[arr] = True
        return mask

    def _add_cloth(self, x, tris, mass, density, pin_mask, velocity, tri_ke, tri_ka, tri_kd,
                   edge_ke, edge_kd, lift, drag, grid) -> Cloth:
        from gradsim_taichi.meshes import triangle_areas
        from gradsim_taichi.solvers.bending import dihedral_angles, mesh_hinges

        tris = np.asarray(tris, dtype=np.int64)
        n, nt = len(x), len(tris)
        if mass is not None and density is not None:
            raise ValueError("give either mass (per particle) or density (per area), not both")
        if mass is None:
            rho = per_item("density", 0.1 if density is None else density, 1, positive=True)[0]
            masses = np.zeros(n)
            np.add.at(masses, tris.ravel(), np.repeat(triangle_areas(x, tris) * rho / 3.0, 3))
            if masses.min() <= 0:
                raise ValueError(f"vertex {int(np.argmin(masses))} belongs to no triangle")
        else:
            masses = per_item("mass", mass, n, positive=True)
        free = np.where(pin_mask, np.inf, masses)
        # a displacement moves a triangle's vertex against tri_ke + tri_ka together
        tri_ke, tri_ka = (stable_default("stiffness", 100.0, free, per_unit=2.0)
                          if value is None else value for value in (tri_ke, tri_ka))
        if tri_kd is None:
            tri_kd = stable_default("damping", 10.0, free)
        ke = per_item("tri_ke", tri_ke, nt, nonnegative=True)
        ka = per_item("tri_ka", tri_ka, nt, positive=True)
        kd = per_item("tri_kd", tri_kd, nt, nonnegative=True)
        local_hinges = mesh_hinges(tris)
        nh = len(local_hinges)
        if edge_ke is None:
            # Bending.stability_terms: edge_ke / L^2 per unit displacement, L the hinge edge
            edge = x[local_hinges[:, 0]] - x[local_hinges[:, 1]] if nh else np.ones((1, 3))
            shortest2 = float((edge ** 2).sum(axis=1).min())
            edge_ke = stable_default("stiffness", 100.0, free, per_unit=1.0 / shortest2)
        eke = per_item("edge_ke", edge_ke, nh, nonnegative=True)
        ekd = per_item("edge_kd", edge_kd, nh, nonnegative=True)
        st = self._cloth_state()
        for name, value in (("lift", lift), ("drag", drag)):
            if value is not None:
                value = self._cloth_scalar(name, value)
                old = getattr(st, name)
                if old is not None and old != value:
                    raise ValueError(f"{name}={value:g} conflicts with {name}={old:g} given "
                                     f"earlier: aerodynamic coefficients are global")
                setattr(st, name, value)
        idx = self.add_particles(x, per_row3("velocity", velocity, n), masses, pin_mask)
        faces = idx[tris]
        first_tri, first_hinge = st.triangle_count(), st.hinge_count()
        st.tris.append((faces, ke, ka, kd))
        if nh:
            st.hinges.append((idx[local_hinges], dihedral_angles(x, local_hinges), eke, ekd))
        self._cloth_register("triangles", self._make_cloth_triangles)
        if nh:
            self._cloth_register("bending", self._make_cloth_bending)
        if lift is not None or drag is not None:
            self._cloth_enable_aero()
        return Cloth(particles=idx, faces=faces, triangles=np.arange(first_tri, first_tri + nt),
                     hinges=np.arange(first_hinge, first_hinge + nh), grid=grid)

    def _cloth_enable_aero(self) -> None:
        self._cloth_state().aero = True
        self._cloth_register("aero", self._make_cloth_aero)

    def _cloth_register(self, kind: str, factory) -> None:
        st = self._cloth_state()
        if kind not in st.registered:
            st.registered.add(kind)
            self._force_factories.append(factory)

    # factories: called by Model.__init__ at finalize(), after every cloth was added
    def _make_cloth_triangles(self, model):
        from gradsim_taichi.solvers.cloth_triangles import ClothTriangles

        faces, ke, ka, kd = (np.concatenate(p) for p in zip(*self._cloth.tris))
        # the rest shape is the configuration the cloth was added in, not its start pose
        return ClothTriangles(faces, self._x_rest, ke, ka, kd)

    def _make_cloth_bending(self, model):
        from gradsim_taichi.solvers.bending import Bending

        return Bending(*(np.concatenate(p) for p in zip(*self._cloth.hinges)))

    def _make_cloth_aero(self, model):
        from gradsim_taichi.solvers.aerodynamics import Aerodynamics

        st = self._cloth
        if not st.tris:
            raise ValueError("aerodynamics (set_wind / lift / drag) needs cloth triangles; "
                             "add a cloth with add_cloth_grid / add_cloth_mesh")
        faces = np.concatenate([t[0] for t in st.tris])
        return Aerodynamics(faces, st.lift or 0.0, st.drag or 0.0, st.wind)

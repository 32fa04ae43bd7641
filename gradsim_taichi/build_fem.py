"""ModelBuilder methods for tetrahedral FEM solids.

Mixed into :class:`gradsim_taichi.builder.ModelBuilder`. Methods validate their input,
add particles through ``self.add_particles`` where needed, and register a factory in
``self._force_factories`` (a particle force model) or ``self._system_factories``
(a system of its own) that ``finalize()`` calls with the Model being built.

All soft meshes of a builder become ONE force model
(:class:`gradsim_taichi.solvers.fem_tets.TetFEM`), so the learnable per-tet
parameters ``tet_mu``, ``tet_lambda``, ``tet_damping``, ``tet_activation`` and
``density`` index the tets of every soft mesh in the order they were added.
"""

from __future__ import annotations

import numpy as np

from gradsim_taichi import runtime
from gradsim_taichi.checks import check_finite, check_shape, per_item, placement_rotation


def _meshes():
    # imported on use: the mesh helpers pull in scipy, matplotlib and trimesh
    from gradsim_taichi import meshes

    return meshes


class SoftBodyBuilderMixin:
    """Builder methods for tetrahedral soft bodies (stable neo-Hookean FEM)."""

    def _soft_state(self) -> dict:
        # The mixin has no __init__ of its own; its state is created on first use.
        if not hasattr(self, "_soft"):
            self._soft = {"tets": [], "mu": [], "lam": [], "kd": [], "rho": [],
                          "surfaces": [], "registered": False}
        return self._soft

    @property
    def soft_surfaces(self) -> list[tuple[int, np.ndarray]]:
        """Boundary surfaces of the soft meshes, for rendering: a list of
        ``(first particle index, triangles [K, 3])`` with triangles indexing the mesh's
        own vertices (add the offset for particle indices), wound outward."""
        return list(self._soft_state()["surfaces"])

    @property
    def soft_tet_count(self) -> int:
        """Number of tets added so far (all soft meshes)."""
        return int(sum(len(t) for t in self._soft_state()["tets"]))

    def add_soft_mesh(self, vertices, tets, density=1000.0, mu=1e4, lam=1e4, damping=0.0,
                      velocity=(0.0, 0.0, 0.0), pinned=None, origin=(0.0, 0.0, 0.0),
                      orientation=None, scale=1.0, rotation=None) -> np.ndarray:
        """Add a tetrahedral solid; returns the particle indices of its vertices.

        Args:
            vertices: ``[N, 3]`` rest positions in the mesh frame [m].
            tets: ``[T, 4]`` vertex indices; tets of either orientation are accepted
                (they are re-oriented); zero-volume tets, out-of-range indices, vertices
                used by no tet and faces shared by more than two tets are rejected.
            density: [kg/m^3], scalar or per tet ``[T]``, > 0; mass is lumped to vertices.
            mu, lam: Lame parameters [Pa], scalars or ``[T]``; ``mu >= 0``,
                ``lam > -2/3 mu`` (positive bulk modulus). E.g. from Young's modulus E
                and Poisson ratio nu: ``mu = E / (2 (1 + nu))``,
                ``lam = E nu / ((1 + nu)(1 - 2 nu))``.
            damping: strain-rate viscosity [Pa s], scalar or ``[T]``, >= 0.
            velocity: initial velocity, ``(3,)`` or ``[N, 3]`` [m/s] (world frame).
            pinned: None, a bool mask ``[N]`` or an array of vertex indices to hold fixed.
            origin, orientation, scale: placement ``x = origin + R (scale * vertices)``;
                ``orientation`` is a quaternion ``(w, x, y, z)`` or a 3x3 matrix (as for
                ``add_rigid_body``); ``scale`` a positive scalar or ``(3,)``.
            rotation: deprecated (a matrix, or a quaternion in ``(x, y, z, w)`` order);
                use ``orientation``.
        """
        x = check_shape("vertices", check_finite("vertices", vertices), (-1, 3))
        t = np.asarray(tets)
        if t.ndim != 2 or t.shape[1] != 4:
            raise ValueError(f"tets must have shape (T, 4); got {t.shape}")
        x, t = _meshes().validate_tet_mesh(x, t, require_positive=False)
        count = len(t)
        scale_v = check_finite("scale", scale)
        if scale_v.shape not in ((), (3,)) or np.any(scale_v <= 0):
            raise ValueError(f"scale must be a positive scalar or 3 positive values; got {scale}")
        origin_v = check_shape("origin", check_finite("origin", origin), (3,))
        rot = placement_rotation(orientation, rotation, "add_soft_mesh")
        world = origin_v + (x * scale_v) @ rot.T
        t = _meshes().orient_tets(world, t).astype(np.int64)

        rho = per_item("density", density, count, positive=True)
        mu_v = per_item("mu", mu, count, nonnegative=True)
        lam_v = per_item("lam", lam, count)
        bad = np.nonzero(lam_v <= -2.0 / 3.0 * mu_v)[0]
        if len(bad):
            i = bad[0]
            raise ValueError(
                f"lam must be > -2/3 mu (positive bulk modulus); got lam={lam_v[i]:.6g} "
                f"with mu={mu_v[i]:.6g} at tet {i}"
            )
        kd = per_item("damping", damping, count, nonnegative=True)
        n = len(x)
        mask = np.zeros(n, dtype=bool)
        if pinned is not None and pinned is not False:
            p = np.asarray(pinned)
            if p.size == 0:
                p = p.astype(np.int64)
            if p.dtype == bool:
                if p.shape != (n,):
                    raise ValueError(f"pinned as a mask must have shape ({n},); got {p.shape}")
                mask = p.copy()
            else:
                idx = np.asarray(p).ravel()
                if not np.issubdtype(idx.dtype, np.integer):
                    raise ValueError("pinned must be a bool mask or an array of vertex indices")
                if idx.size and (idx.min() < 0 or idx.max() >= n):
                    raise ValueError(f"pinned vertex index out of range [0, {n}): {idx.tolist()}")
                mask[idx] = True
        masses = _meshes().lumped_masses(world, t, rho)
        ids = self.add_particles(world, velocities=velocity, mass=masses, pinned=mask)
        offset = int(ids[0])
        state = self._soft_state()
        state["tets"].append(t + offset)
        state["mu"].append(mu_v)
        state["lam"].append(lam_v)
        state["kd"].append(kd)
        state["rho"].append(rho)
        state["surfaces"].append((offset, _meshes().boundary_surface(t, world)))
        if not state["registered"]:
            state["registered"] = True
            self._force_factories.append(self._make_fem)
        return ids

    def _make_fem(self, model):
        from gradsim_taichi.solvers.fem_tets import TetFEM

        s = self._soft_state()
        # the rest shape is the configuration the meshes were added in (not a start pose
        # set with set_particle_positions), in the runtime's precision like the state
        rest = np.asarray(self._x_rest, dtype=runtime.np_dtype())
        fem = TetFEM(np.concatenate(s["tets"]), rest, np.concatenate(s["mu"]),
                     np.concatenate(s["lam"]), np.concatenate(s["kd"]),
                     np.concatenate(s["rho"]), model.particles)
        model.soft_surfaces = list(s["surfaces"])
        model.fem = fem
        return fem

    # ---- conveniences ------------------------------------------------------------------
    def add_soft_box(self, size=(1.0, 1.0, 1.0), resolution=(2, 2, 2), **kwargs) -> np.ndarray:
        """A box ``[0, size]`` (mesh frame; place it with ``origin``/``orientation``/``scale``)
        of ``6 nx ny nz`` tets; other keywords as :meth:`add_soft_mesh`."""
        v, t = _meshes().tet_box(size=size, resolution=resolution)
        return self.add_soft_mesh(v, t, **kwargs)

    def add_soft_beam(self, length=1.0, height=0.1, width=0.1, resolution=(20, 2, 2),
                      clamped: bool = False, **kwargs) -> np.ndarray:
        """A beam along +x of ``length`` x ``height`` (y) x ``width`` (z) starting at the
        mesh-frame origin; ``clamped=True`` pins the vertices of its ``x = 0`` end. Other
        keywords as :meth:`add_soft_mesh`."""
        v, t = _meshes().tet_beam(length, height, width, resolution=resolution)
        if clamped:
            if kwargs.get("pinned") is not None:
                raise ValueError("give either clamped=True or pinned=..., not both")
            kwargs["pinned"] = np.isclose(v[:, 0], 0.0)
        return self.add_soft_mesh(v, t, **kwargs)

    def add_soft_ball(self, radius=1.0, subdivisions=2, shells=None, **kwargs) -> np.ndarray:
        """A ball centred on the mesh-frame origin (icosphere surface, Delaunay interior;
        ~450 tets by default). Other keywords as :meth:`add_soft_mesh`."""
        v, t = _meshes().tet_ball(radius=radius, subdivisions=subdivisions, shells=shells)
        return self.add_soft_mesh(v, t, **kwargs)

    def add_soft_gear(self, teeth=10, inner_radius=0.8, outer_radius=1.0, thickness=0.3,
                      layers=2, spacing=None, **kwargs) -> np.ndarray:
        """A gear in the mesh-frame xy plane, extruded along z (~1k tets by default).
        Other keywords as :meth:`add_soft_mesh`."""
        v, t = _meshes().tet_gear(teeth=teeth, inner_radius=inner_radius,
                               outer_radius=outer_radius, thickness=thickness, layers=layers,
                               spacing=spacing)
        return self.add_soft_mesh(v, t, **kwargs)

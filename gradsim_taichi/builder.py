"""ModelBuilder: describe a scene in plain numpy, then ``finalize()`` it into a Model.

Everything is validated as it is added, so a bad value is reported where it was
made (with the offending index), not deep inside a kernel.
"""

from __future__ import annotations

import numpy as np

from gradsim_taichi.build_cloth import ClothBuilderMixin
from gradsim_taichi.build_fem import SoftBodyBuilderMixin
from gradsim_taichi.build_rigid import RigidBuilderMixin
from gradsim_taichi.checks import (
    check_finite,
    check_ids,
    check_indices,
    check_shape,
    per_item,
    per_row3,
    stable_default,
)
from gradsim_taichi.model import Model


class ModelBuilder(ClothBuilderMixin, SoftBodyBuilderMixin, RigidBuilderMixin):
    """Collects particles, springs and the ground; ``finalize()`` gives a :class:`Model`.

    Args:
        gravity: gravitational acceleration (default (0, -9.8, 0), y up).
        ground: whether the ground plane y = ``ground_height`` is present.
        particle_radius: contact radius of every particle [m].
        contact_ke, contact_kd, contact_kf, contact_mu: the ground's penalty contact
            parameters (normal stiffness, normal damping, friction stiffness, Coulomb mu).
            Unset (None) ``contact_ke`` and ``contact_kf`` are 1e3 or, where the lightest
            free particle is too light for that, the largest values well inside explicit
            stability at 16 substeps of 60 fps (``checks.stable_default``); an unset
            ``contact_kd`` damps the lightest particle's bounce at half the critical
            damping (0 without particles: elastic). All are decided at ``finalize()``.
            Rigid bodies share these parameters: give them for scenes of bodies, or that
            mix bodies and light particles.
        contact_damping_depth: penetration [m] over which the normal damping ramps in.
        contact_elastic_width: penetration [m] over which the elastic force blends in
            (both keep the contact force smooth at first touch; see
            ``gradsim_taichi.solvers.ground_contact``).
    """

    def __init__(
        self,
        gravity=(0.0, -9.8, 0.0),
        ground: bool = True,
        ground_height: float = 0.0,
        particle_radius: float = 0.01,
        contact_ke: float | None = None,
        contact_kd: float | None = None,
        contact_kf: float | None = None,
        contact_mu: float = 0.5,
        contact_damping_depth: float = 1e-3,
        contact_elastic_width: float = 1e-4,
    ):
        self.gravity = check_shape("gravity", check_finite("gravity", gravity), (3,))
        self.ground = bool(ground)
        self.ground_height = float(check_finite("ground_height", ground_height))
        self.particle_radius = float(per_item("particle_radius", particle_radius, 1,
                                              nonnegative=True)[0])
        self.contact = {}
        self.contact_smoothing = dict(
            damping_depth=float(per_item("contact_damping_depth", contact_damping_depth, 1,
                                         positive=True)[0]),
            elastic_width=float(per_item("contact_elastic_width", contact_elastic_width, 1,
                                         positive=True)[0]))
        self.set_ground_contact(contact_ke, contact_kd, contact_kf, contact_mu)
        # Per-particle arrays, one row per particle in index order. ``_x_rest`` is the
        # configuration springs, cloth triangles, hinges and tets take their rest state
        # from; ``_x`` the positions at t = 0 (the same unless set_particle_positions
        # moved them: a start pose that is not the rest pose).
        self._x_rest = np.zeros((0, 3))
        self._x = np.zeros((0, 3))
        self._v = np.zeros((0, 3))
        self._m = np.zeros(0)
        self._pinned = np.zeros(0, dtype=bool)
        self._force = np.zeros((0, 3))
        self._springs: list[tuple] = []
        # Extension points for other solvers' builder methods (cloth, FEM, rigid bodies):
        # callables run at finalize() that return a particle force model / a system.
        self._force_factories: list = []
        self._system_factories: list = []

    # ---- particles ---------------------------------------------------------------------
    @property
    def particle_count(self) -> int:
        """Number of particles added so far (cloth and soft-mesh vertices included)."""
        return len(self._x)

    def add_particles(self, positions, velocities=None, mass=1.0, pinned=False, force=None):
        """Add N particles; returns their indices as an int array.

        Args:
            positions: [N, 3] metres; both the rest and the start (t = 0) positions
                (see :meth:`set_particle_positions` for a start pose of its own).
            velocities: [N, 3] or (3,) m/s (default zero).
            mass: scalar or [N], kg, > 0 (pinned particles too: it is their mass if unpinned).
            pinned: bool or [N] bools; pinned particles stay where they are.
            force: constant external force [N, 3] or (3,) newtons.
        """
        x = check_shape("positions", check_finite("positions", positions), (-1, 3))
        n = len(x)
        v = np.zeros((n, 3)) if velocities is None else per_row3("velocities", velocities, n)
        m = per_item("mass", mass, n, positive=True)
        p = np.broadcast_to(np.asarray(pinned, dtype=bool), (n,)).copy() \
            if np.ndim(pinned) == 0 else np.asarray(pinned, dtype=bool)
        if p.shape != (n,):
            raise ValueError(f"pinned must be a bool or have length {n}; got shape {p.shape}")
        fr = np.zeros((n, 3)) if force is None else per_row3("force", force, n)
        start = self.particle_count
        self._x_rest = np.concatenate([self._x_rest, x])
        self._x = np.concatenate([self._x, x])
        self._v = np.concatenate([self._v, v])
        self._m = np.concatenate([self._m, m])
        self._pinned = np.concatenate([self._pinned, p])
        self._force = np.concatenate([self._force, fr])
        return np.arange(start, start + n)

    def add_particle(self, position, velocity=(0.0, 0.0, 0.0), mass=1.0, pinned=False,
                     force=(0.0, 0.0, 0.0)) -> int:
        """Add one particle; returns its index."""
        return int(self.add_particles(np.reshape(position, (1, 3)), np.reshape(velocity, (1, 3)),
                                      mass, pinned, np.reshape(force, (1, 3)))[0])

    # Reads return copies: editing them changes nothing; use the set_particle_* methods.
    def _ids(self, ids, unique=False) -> np.ndarray:
        if ids is None:
            return np.arange(self.particle_count)
        return check_ids("ids", ids, self.particle_count, unique=unique)

    def particle_positions(self, ids=None) -> np.ndarray:
        """Start positions (t = 0) ``[M, 3]`` [m] of particles ``ids`` (default: all)."""
        return self._x[self._ids(ids)].copy()

    def particle_rest_positions(self, ids=None) -> np.ndarray:
        """Rest positions ``[M, 3]`` [m] of particles ``ids`` (default: all): the
        configuration the particles were added in, which springs, cloth and tets are
        undeformed in."""
        return self._x_rest[self._ids(ids)].copy()

    def particle_velocities(self, ids=None) -> np.ndarray:
        """Initial velocities ``[M, 3]`` [m/s] of particles ``ids`` (default: all)."""
        return self._v[self._ids(ids)].copy()

    def particle_masses(self, ids=None) -> np.ndarray:
        """Masses ``[M]`` [kg] of particles ``ids`` (default: all)."""
        return self._m[self._ids(ids)].copy()

    def particle_pinned(self, ids=None) -> np.ndarray:
        """Bool mask ``[M]``: which of particles ``ids`` (default: all) are pinned."""
        return self._pinned[self._ids(ids)].copy()

    def set_particle_positions(self, ids, positions) -> None:
        """Start the particles ``ids`` at ``positions`` (``[M, 3]`` or one ``(3,)``, m)
        instead of where they were added, *without* changing the rest configuration:
        springs, cloth triangles, hinges and tets built from these particles (before or
        after this call) keep the rest shape they were added with, so a start pose that
        differs from the rest pose is under elastic stress at t = 0."""
        idx = self._ids(ids, unique=True)
        self._x[idx] = per_row3("positions", positions, len(idx))

    def set_particle_velocities(self, ids, velocities) -> None:
        """Initial velocities of the particles ``ids``: ``[M, 3]`` or one ``(3,)`` shared
        by all of them [m/s]."""
        idx = self._ids(ids, unique=True)
        self._v[idx] = per_row3("velocities", velocities, len(idx))

    def set_particle_masses(self, ids, masses) -> None:
        """Masses of the particles ``ids``: a scalar or ``[M]`` [kg], each > 0.

        A soft mesh's learnable ``density`` rewrites the masses of its particles when it
        is set on the Simulation (the last one set wins, as for ``mass``)."""
        idx = self._ids(ids, unique=True)
        self._m[idx] = per_item("masses", masses, len(idx), positive=True)

    # ---- springs -----------------------------------------------------------------------
    def add_springs(self, pairs, stiffness, damping=0.0, rest_length=None):
        """Add springs between particle pairs [S, 2]. ``rest_length`` defaults to the
        distance in the rest configuration (the positions the particles were added with,
        see :meth:`particle_rest_positions`); stiffness, damping and rest length are
        scalars or [S]."""
        n = self.particle_count
        ends = check_indices("spring", pairs, n, 2)
        s = len(ends)
        same = np.nonzero(ends[:, 0] == ends[:, 1])[0]
        if len(same):
            raise ValueError(f"spring {same[0]} joins particle {ends[same[0], 0]} to itself")
        if rest_length is None:
            x = self._x_rest
            rest = np.linalg.norm(x[ends[:, 1]] - x[ends[:, 0]], axis=1)
        else:
            rest = per_item("rest_length", rest_length, s)
        zero = np.nonzero(rest <= 0)[0]
        if len(zero):
            i = zero[0]
            raise ValueError(
                f"spring {i} ({ends[i, 0]}-{ends[i, 1]}) has rest length {rest[i]:.6g}; "
                "it must be > 0 (are the two particles at the same place?)"
            )
        ke = per_item("spring stiffness", stiffness, s, nonnegative=True)
        kd = per_item("spring damping", damping, s, nonnegative=True)
        first = sum(len(e[0]) for e in self._springs)
        self._springs.append((ends, ke, kd, rest))
        return np.arange(first, first + s)

    def add_spring(self, i: int, j: int, stiffness: float, damping: float = 0.0,
                   rest_length: float | None = None) -> int:
        """Add one spring; returns its index."""
        rest = None if rest_length is None else [rest_length]
        return int(self.add_springs([[i, j]], stiffness, damping, rest)[0])

    # ---- ground ------------------------------------------------------------------------
    def set_ground_contact(self, ke=None, kd=None, kf=None, mu=None) -> None:
        """Set the ground's penalty contact parameters (None keeps the current value)."""
        for key, value in (("ke", ke), ("kd", kd), ("kf", kf), ("mu", mu)):
            if value is not None:
                self.contact[key] = float(per_item(f"contact_{key}", value, 1,
                                                   nonnegative=True)[0])

    def _default_contact(self) -> dict:
        """The contact parameters left unset (see the class docstring), for the particles
        added so far."""
        free = np.where(self._pinned, np.inf, self._m)
        ke = self.contact.get("ke", stable_default("stiffness", 1e3, free, ground=True))
        kf = stable_default("damping", 1e3, free, ground=True)
        kd = 0.0
        if np.isfinite(free).any():  # half of critical damping, 2 sqrt(ke m), at most
            kd = stable_default("damping", float(np.sqrt(ke * free.min())), free, ground=True)
        return dict(ke=ke, kd=kd, kf=kf)

    # ---- result ------------------------------------------------------------------------
    def finalize(self) -> Model:
        """Build the Taichi-backed :class:`Model` (needs ``gradsim_taichi.init`` or uses
        its defaults)."""
        if self.particle_count == 0 and not self._system_factories:
            raise ValueError("the model is empty; add particles or bodies before finalize()")
        particles = None
        if self.particle_count:
            particles = dict(
                positions=self._x.copy(),
                velocities=self._v.copy(),
                masses=self._m.copy(),
                pinned=self._pinned.copy(),
                forces=self._force.copy(),
                gravity=self.gravity,
            )
        springs = None
        if self._springs:
            springs = tuple(np.concatenate(parts) for parts in zip(*self._springs))
        ground = None
        if self.ground:
            contact = self._default_contact()
            contact.update(self.contact)
            ground = dict(height=self.ground_height, radius=self.particle_radius,
                          **self.contact_smoothing, **contact)
        return Model(particles, springs=springs, ground=ground,
                     force_factories=self._force_factories,
                     system_factories=self._system_factories,
                     structure=_structure(vars(self)))


def _structure(value, depth: int = 0):
    """What of a builder's state decides the shapes of its model's fields: array shapes,
    lengths, flags, names and types, not the values of numbers. Models whose builders give
    equal structures are built of the same fields, so the field pool hands a rebuilt model
    the fields of one built like it (a preference only: any fields of the right shapes
    are correct)."""
    if depth > 8:  # (builder state is a few levels deep; this stops any cycle)
        return type(value).__name__
    depth += 1
    if isinstance(value, np.ndarray):
        return ("array", value.shape, value.dtype.str)
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, float, np.number)):
        return type(value).__name__
    if isinstance(value, dict):
        return tuple((key, _structure(item, depth)) for key, item in value.items())
    if isinstance(value, (list, tuple)):
        return tuple(_structure(item, depth) for item in value)
    if isinstance(value, (set, frozenset)):
        return tuple(sorted(map(repr, value)))
    if isinstance(value, range):
        return ("range", len(value))
    if callable(value):
        return getattr(value, "__qualname__", type(value).__name__)
    if hasattr(value, "__dict__"):
        return type(value).__name__, _structure(vars(value), depth)
    return type(value).__name__

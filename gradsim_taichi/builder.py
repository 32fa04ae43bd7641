"""ModelBuilder: describe a scene in plain numpy, then ``finalize()`` it into a Model.

Everything is validated as it is added, so a bad value is reported where it was
made (with the offending index), not deep inside a kernel.
"""

from __future__ import annotations

import numpy as np

from gradsim_taichi.build_cloth import ClothBuilderMixin
from gradsim_taichi.build_fem import SoftBodyBuilderMixin
from gradsim_taichi.build_rigid import RigidBuilderMixin
from gradsim_taichi.model import Model


def check_finite(name: str, values) -> np.ndarray:
    """Return ``values`` as float64, raising ValueError if any entry is NaN or inf."""
    arr = np.asarray(values, dtype=np.float64)
    if not np.all(np.isfinite(arr)):
        bad = np.argwhere(~np.isfinite(arr))[:3].tolist()
        raise ValueError(f"{name} contains NaN or inf (at index {bad})")
    return arr


def check_shape(name: str, arr: np.ndarray, shape: tuple) -> np.ndarray:
    """Check ``arr.shape`` against ``shape`` (``-1`` matches any length)."""
    if arr.ndim != len(shape) or any(s != -1 and s != a for s, a in zip(shape, arr.shape)):
        want = "(" + ", ".join("N" if s == -1 else str(s) for s in shape) + ")"
        raise ValueError(f"{name} must have shape {want}; got {arr.shape}")
    return arr


def per_item(name: str, value, count: int, positive=False, nonnegative=False) -> np.ndarray:
    """A scalar or an array of length ``count`` -> float64 array of length ``count``."""
    arr = check_finite(name, value)
    if arr.ndim == 0:
        arr = np.full(count, float(arr))
    elif arr.shape != (count,):
        raise ValueError(f"{name} must be a scalar or have length {count}; got shape {arr.shape}")
    if positive and count and arr.min() <= 0:
        i = int(np.argmin(arr))
        raise ValueError(f"{name} must be > 0; got {arr[i]:.6g} at index {i}")
    if nonnegative and count and arr.min() < 0:
        i = int(np.argmin(arr))
        raise ValueError(f"{name} must be >= 0; got {arr[i]:.6g} at index {i}")
    return arr


def check_indices(name: str, idx, count: int, width: int) -> np.ndarray:
    """Integer index array of shape (M, width) with every entry in [0, count)."""
    arr = np.asarray(idx)
    if arr.size == 0:
        return np.zeros((0, width), dtype=np.int64)
    if not np.issubdtype(arr.dtype, np.integer):
        if not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr)):
            raise ValueError(f"{name} must hold integer indices")
        arr = arr.astype(np.int64)
    arr = check_shape(name, arr.reshape(-1, width) if arr.ndim == 1 else arr, (-1, width))
    bad = np.argwhere((arr < 0) | (arr >= count))
    if len(bad):
        r, c = bad[0]
        raise ValueError(
            f"{name}[{r}] refers to particle {arr[r, c]}, out of range [0, {count})"
        )
    return arr.astype(np.int64)


class ModelBuilder(ClothBuilderMixin, SoftBodyBuilderMixin, RigidBuilderMixin):
    """Collects particles, springs and the ground; ``finalize()`` gives a :class:`Model`.

    Args:
        gravity: gravitational acceleration (default (0, -9.8, 0), y up).
        ground: whether the ground plane y = ``ground_height`` is present.
        particle_radius: contact radius of every particle [m].
        contact_ke, contact_kd, contact_kf, contact_mu: the ground's penalty contact
            parameters (normal stiffness, normal damping, friction stiffness, Coulomb mu).
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
        contact_ke: float = 1e3,
        contact_kd: float = 0.0,
        contact_kf: float = 1e3,
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
        self._x: list[np.ndarray] = []
        self._v: list[np.ndarray] = []
        self._m: list[np.ndarray] = []
        self._pinned: list[np.ndarray] = []
        self._force: list[np.ndarray] = []
        self._springs: list[tuple] = []
        # Extension points for other solvers' builder methods (cloth, FEM, rigid bodies):
        # callables run at finalize() that return a particle force model / a system.
        self._force_factories: list = []
        self._system_factories: list = []

    # ---- particles ---------------------------------------------------------------------
    @property
    def particle_count(self) -> int:
        return int(sum(len(x) for x in self._x))

    def add_particles(self, positions, velocities=None, mass=1.0, pinned=False, force=None):
        """Add N particles; returns their indices as an int array.

        Args:
            positions: [N, 3] metres.
            velocities: [N, 3] m/s (default zero).
            mass: scalar or [N], kg, > 0 (pinned particles too: it is their mass if unpinned).
            pinned: bool or [N] bools; pinned particles stay where they are.
            force: constant external force [N, 3] or (3,) newtons.
        """
        x = check_shape("positions", check_finite("positions", positions), (-1, 3))
        n = len(x)
        v = np.zeros((n, 3)) if velocities is None else check_finite("velocities", velocities)
        v = check_shape("velocities", np.broadcast_to(v, (n, 3)) if v.shape == (3,) else v, (n, 3))
        m = per_item("mass", mass, n, positive=True)
        p = np.broadcast_to(np.asarray(pinned, dtype=bool), (n,)).copy() \
            if np.ndim(pinned) == 0 else np.asarray(pinned, dtype=bool)
        if p.shape != (n,):
            raise ValueError(f"pinned must be a bool or have length {n}; got shape {p.shape}")
        fr = np.zeros((n, 3)) if force is None else check_finite("force", force)
        fr = check_shape("force", np.broadcast_to(fr, (n, 3)) if fr.shape == (3,) else fr, (n, 3))
        start = self.particle_count
        self._x.append(x.copy())
        self._v.append(np.array(v))
        self._m.append(m)
        self._pinned.append(p)
        self._force.append(np.array(fr))
        return np.arange(start, start + n)

    def add_particle(self, position, velocity=(0.0, 0.0, 0.0), mass=1.0, pinned=False,
                     force=(0.0, 0.0, 0.0)) -> int:
        """Add one particle; returns its index."""
        return int(self.add_particles(np.reshape(position, (1, 3)), np.reshape(velocity, (1, 3)),
                                      mass, pinned, np.reshape(force, (1, 3)))[0])

    # ---- springs -----------------------------------------------------------------------
    def add_springs(self, pairs, stiffness, damping=0.0, rest_length=None):
        """Add springs between particle pairs [S, 2]. ``rest_length`` defaults to the
        current distance; stiffness, damping and rest length are scalars or [S]."""
        n = self.particle_count
        ends = check_indices("spring", pairs, n, 2)
        s = len(ends)
        same = np.nonzero(ends[:, 0] == ends[:, 1])[0]
        if len(same):
            raise ValueError(f"spring {same[0]} joins particle {ends[same[0], 0]} to itself")
        if rest_length is None:
            x = np.concatenate(self._x) if self._x else np.zeros((0, 3))
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

    # ---- result ------------------------------------------------------------------------
    def finalize(self) -> Model:
        """Build the Taichi-backed :class:`Model` (needs ``gradsim_taichi.init`` or uses
        its defaults)."""
        if self.particle_count == 0 and not self._system_factories:
            raise ValueError("the model is empty; add particles or bodies before finalize()")
        particles = None
        if self.particle_count:
            particles = dict(
                positions=np.concatenate(self._x),
                velocities=np.concatenate(self._v),
                masses=np.concatenate(self._m),
                pinned=np.concatenate(self._pinned),
                forces=np.concatenate(self._force),
                gravity=self.gravity,
            )
        springs = None
        if self._springs:
            springs = tuple(np.concatenate(parts) for parts in zip(*self._springs))
        ground = None
        if self.ground:
            ground = dict(height=self.ground_height, radius=self.particle_radius,
                          **self.contact_smoothing, **self.contact)
        return Model(particles, springs=springs, ground=ground,
                     force_factories=self._force_factories,
                     system_factories=self._system_factories)

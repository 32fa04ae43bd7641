"""ModelBuilder methods for rigid bodies.

Mixed into :class:`gradsim_taichi.builder.ModelBuilder`. Bodies are closed triangle
meshes; their mass properties come from :func:`gradsim_taichi.mass_properties`. The
first body registers ONE system factory that builds the ``"rigid"`` system
(:class:`gradsim_taichi.solvers.rigid_bodies.RigidBodySystem`) for all bodies at
``finalize()``. Body poses place the *mesh frame* (the coordinates the vertices were
given in) in the world; primitives from trimesh.creation are centred at their mesh
origin except the cone (base at z = 0, tip on +z). Cylinders, cones and capsules
have their axis along the mesh's z axis.

Ground contact uses the model's shared contact parameters; the paper's values for rigid
shapes are ``ModelBuilder(contact_ke=1e5, contact_kd=1e3, contact_kf=1e3)`` (the
builder's defaults are the particle ones). Gravity is the builder's (the learnable
``gravity`` parameter belongs to the particle system).

Example::

    b = gs.ModelBuilder(contact_ke=1e5, contact_kd=1e3, contact_kf=1e3)
    box = b.add_rigid_box((0.2, 0.1, 0.3), mass=1.0, position=(0, 0.5, 0))
    b.add_body_impulse(box, (0.5, 0, 0), point=(0.1, 0, 0), start=0.0, duration=0.05)
    sim = gs.Simulation(b.finalize(), frames=60, substeps=32)
    verts = gs.simulate(sim, {"body_mass": mass})["rigid"]  # [61, 8, 3]
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gradsim_taichi.checks import check_orientation
from gradsim_taichi.mass_properties import mass_properties

_FRAMES = ("world", "body")


def _vec3(name, value) -> np.ndarray:
    arr = np.asarray(value, dtype=np.float64)
    if arr.shape != (3,) or not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be 3 finite numbers; got {value!r}")
    return arr


def _rate(name, value) -> float:
    try:
        rate = float(value)
    except (TypeError, ValueError):
        rate = float("nan")
    if not np.isfinite(rate) or rate < 0:
        raise ValueError(f"{name} must be a finite number >= 0; got {value!r}")
    return rate


def _quaternion(orientation) -> np.ndarray:
    """(w, x, y, z) quaternion or a 3x3 rotation matrix -> unit quaternion (w, x, y, z)."""
    return check_orientation(orientation)


@dataclass(frozen=True)
class RigidBodyInfo:
    """A rigid body as added to the builder (copies: editing them changes nothing).

    Attributes:
        vertices: [N, 3] mesh-frame vertices [m]; faces: [M, 3] triangles.
        mass: [kg]. com: centre of mass (3,), mesh frame [m].
        inertia: (3, 3) inertia tensor about the centre of mass, mesh axes [kg m^2].
        position: world position of the mesh frame's origin at t = 0 [m].
        orientation: unit quaternion (w, x, y, z) at t = 0.
        velocity: centre-of-mass velocity [m/s]; angular_velocity: world [rad/s].
    """

    vertices: np.ndarray
    faces: np.ndarray
    mass: float
    com: np.ndarray
    inertia: np.ndarray
    position: np.ndarray
    orientation: np.ndarray
    velocity: np.ndarray
    angular_velocity: np.ndarray


class RigidBuilderMixin:
    """Rigid bodies from closed triangle meshes, applied forces, torques and impulses."""

    def _rigid(self) -> dict:
        state = getattr(self, "_rigid_state", None)
        if state is None:
            state = self._rigid_state = dict(bodies=[], loads=[], impulses=[], com_forces=[])
            self._system_factories.append(self._make_rigid_system)
        return state

    def _make_rigid_system(self, model):
        from gradsim_taichi.solvers.rigid_bodies import RigidBodySystem

        s = self._rigid_state
        return RigidBodySystem(model.ground, self.gravity, s["bodies"], s["loads"],
                               s["impulses"], s["com_forces"])

    @property
    def rigid_body_count(self) -> int:
        """Number of rigid bodies added so far."""
        state = getattr(self, "_rigid_state", None)
        return 0 if state is None else len(state["bodies"])

    def rigid_body(self, body: int) -> RigidBodyInfo:
        """Mass properties and initial state of rigid body ``body`` (an index returned by
        ``add_rigid_*``), as a read-only :class:`RigidBodyInfo` of copies."""
        index = self._check_body(body)  # before the lookup: a builder may have no bodies
        b = self._rigid_state["bodies"][index]
        return RigidBodyInfo(
            vertices=b["vertices"].copy(), faces=b["faces"].copy(), mass=float(b["mass"]),
            com=b["com"].copy(), inertia=b["inertia_unit"] * b["mass"],
            position=b["position"].copy(), orientation=b["orientation"].copy(),
            velocity=b["velocity"].copy(), angular_velocity=b["angular_velocity"].copy())

    def add_rigid_body(self, mesh, density=None, mass=None, position=(0.0, 0.0, 0.0),
                       orientation=(1.0, 0.0, 0.0, 0.0), velocity=(0.0, 0.0, 0.0),
                       angular_velocity=(0.0, 0.0, 0.0), linear_damping=0.0, linear_drag=0.0,
                       angular_damping=0.0, angular_drag=0.0) -> int:
        """Add a rigid body; returns its index.

        Args:
            mesh: a closed ``trimesh.Trimesh`` or ``(vertices [N, 3], faces [M, 3])``.
            density: kg/m^3 (give this or ``mass``; default density 1000 when neither).
            mass: kg.
            position: world position of the mesh frame's origin at t = 0 [m].
            orientation: quaternion (w, x, y, z) (normalised here) or a 3x3 rotation.
            velocity: velocity of the centre of mass [m/s].
            angular_velocity: world angular velocity [rad/s].
            linear_damping, linear_drag: the body feels the force
                ``-m (linear_damping + linear_drag |v|) v`` (rates [1/s] and [1/m], >= 0):
                alone, ``linear_damping`` makes the speed decay as ``exp(-c t)``.
            angular_damping, angular_drag: likewise the torque
                ``-(angular_damping + angular_drag |w|) L``, ``L`` the angular momentum
                ([1/s] and [1/rad], >= 0).
                All four are 0 by default (a body in vacuum). Air drag is a small
                ``linear_drag``; PyBullet damps every body by default with all four at
                0.04 (its ``linearDamping`` and ``angularDamping``, each used as both
                the linear and the quadratic coefficient).
        """
        if hasattr(mesh, "vertices") and hasattr(mesh, "faces"):
            vertices, faces = mesh.vertices, mesh.faces
        else:
            try:
                vertices, faces = mesh
            except (TypeError, ValueError):
                raise ValueError("mesh must be a trimesh.Trimesh or a (vertices, faces) "
                                 "pair") from None
        vertices = np.array(vertices, dtype=np.float64)
        faces = np.array(faces, dtype=np.int64)
        if density is None and mass is None:
            density = 1000.0
        props = mass_properties(vertices, faces, density=density, mass=mass)
        body = dict(
            vertices=vertices, faces=faces, mass=props.mass, com=props.com,
            inertia_unit=props.inertia / props.mass, position=_vec3("position", position),
            orientation=_quaternion(orientation), velocity=_vec3("velocity", velocity),
            angular_velocity=_vec3("angular_velocity", angular_velocity),
            linear_damping=_rate("linear_damping", linear_damping),
            linear_drag=_rate("linear_drag", linear_drag),
            angular_damping=_rate("angular_damping", angular_damping),
            angular_drag=_rate("angular_drag", angular_drag))
        state = self._rigid()  # only once everything is valid
        state["bodies"].append(body)
        return len(state["bodies"]) - 1

    def add_rigid_box(self, extents=(1.0, 1.0, 1.0), **kwargs) -> int:
        """A box of the given edge lengths [m], centred on its mesh origin (8 vertices)."""
        import trimesh

        ext = _vec3("extents", extents)
        if ext.min() <= 0:
            raise ValueError(f"extents must be > 0; got {tuple(ext)}")
        return self.add_rigid_body(trimesh.creation.box(extents=ext), **kwargs)

    def add_rigid_sphere(self, radius=0.5, subdivisions=2, **kwargs) -> int:
        """An icosphere (``subdivisions`` 2: 162 vertices, 3: 642, 4: 2562)."""
        import trimesh

        _positive("radius", radius)
        if int(subdivisions) != subdivisions or not 0 <= subdivisions <= 6:
            raise ValueError(f"subdivisions must be an integer in [0, 6]; got {subdivisions!r}")
        return self.add_rigid_body(trimesh.creation.icosphere(int(subdivisions), radius),
                                   **kwargs)

    def add_rigid_cylinder(self, radius=0.5, height=1.0, sections=32, **kwargs) -> int:
        """A cylinder along the mesh z axis, centred on the origin."""
        import trimesh

        _positive("radius", radius)
        _positive("height", height)
        return self.add_rigid_body(trimesh.creation.cylinder(radius, height, sections=sections),
                                   **kwargs)

    def add_rigid_cone(self, radius=0.5, height=1.0, sections=32, **kwargs) -> int:
        """A cone along the mesh z axis: base disc at z = 0, tip at z = height."""
        import trimesh

        _positive("radius", radius)
        _positive("height", height)
        return self.add_rigid_body(trimesh.creation.cone(radius, height, sections=sections),
                                   **kwargs)

    def add_rigid_capsule(self, radius=0.25, height=1.0, count=(16, 16), **kwargs) -> int:
        """A capsule along the mesh z axis; ``height`` is between the hemisphere centres."""
        import trimesh

        _positive("radius", radius)
        _positive("height", height)
        return self.add_rigid_body(trimesh.creation.capsule(height, radius, count=list(count)),
                                   **kwargs)

    def add_rigid_from_file(self, path, **kwargs) -> int:
        """A body from any closed mesh file trimesh can load (obj, stl, ply, glb, ...)."""
        import trimesh

        mesh = trimesh.load(path, force="mesh", process=True)
        return self.add_rigid_body(mesh, **kwargs)

    # ---- loads -------------------------------------------------------------------------
    def _check_body(self, body) -> int:
        n = self.rigid_body_count
        if int(body) != body or not 0 <= body < n:
            raise ValueError(f"body={body!r} is not a rigid body index in [0, {n})")
        return int(body)

    def add_body_force(self, body, force, point=None, frame="world", frames=None) -> None:
        """Apply a constant ``force`` [N] to ``body`` during ``frames``.

        Args:
            point: where it acts, mesh-frame coordinates (None: at the centre of mass, no
                torque). Off-COM forces add the torque ``r x F`` with the current ``r``.
            frame: ``"world"`` or ``"body"`` (the force rotates with the body).
            frames: None (every frame), a slice, a range or a list of frame indices
                (checked against the rollout length when a Simulation is built).

        World forces at the COM go into the learnable ``body_force``; the others are
        loads of their own, learnable as ``body_point_force`` [frames, L, 3].
        """
        body = self._check_body(body)
        f = _vec3("force", force)
        if frame not in _FRAMES:
            raise ValueError(f"frame={frame!r}; expected 'world' or 'body'")
        if frames is not None and not isinstance(frames, slice | range):
            frames = [int(k) for k in np.asarray(frames).ravel()]
        spec = dict(body=body, force=f, frames=frames, frame=frame,
                    point=None if point is None else _vec3("point", point))
        state = self._rigid()
        if point is None and frame == "world":
            state["com_forces"].append(spec)
        else:
            state["loads"].append(spec)

    def add_body_impulse(self, body, impulse, point=None, start=0.0, duration=1.0 / 60.0,
                         frame="world") -> int:
        """Apply a known impulse [N s] as a constant force ``impulse / duration`` over the
        time window ``[start, start + duration)`` seconds (substeps straddling the window
        edges get their overlapping share). ``point``/``frame`` as in
        :meth:`add_body_force`. Returns its index in the learnable ``body_impulse`` [K, 3].
        """
        body = self._check_body(body)
        if frame not in _FRAMES:
            raise ValueError(f"frame={frame!r}; expected 'world' or 'body'")
        _positive("duration", duration)
        if not (np.isfinite(start) and start >= 0):
            raise ValueError(f"start must be >= 0 seconds; got {start!r}")
        state = self._rigid()
        state["impulses"].append(dict(body=body, impulse=_vec3("impulse", impulse),
                                      point=None if point is None else _vec3("point", point),
                                      start=float(start), duration=float(duration),
                                      frame=frame))
        return len(state["impulses"]) - 1


def _positive(name, value) -> None:
    if not (np.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be > 0; got {value!r}")

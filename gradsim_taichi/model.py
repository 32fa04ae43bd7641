"""Model: topology and material parameters in Taichi fields, sized once.

A Model holds *systems*, each with its own state and a uniform stepping protocol
that :class:`~gradsim_taichi.simulation.Simulation` drives. Today there is the
particle system, whose force models (springs, ground contact, cloth, FEM) all add
into one particle force field; rigid bodies join as a second system.

The protocol of a system (:class:`System`; e.g.
:class:`~gradsim_taichi.particle_system.ParticleSystem`): ``name``, ``allocate(rows,
frames)``, ``params()``, ``load(frame)``, ``clear_segment()``, ``step(row, frame, dt)``,
``save(frame, row)``, ``begin_backward(grad_frames)``, ``seed_segment(first_frame,
frames_in_segment, substeps)``, ``step_grad(row, frame, dt)``, ``finish_backward()``,
``output()``, ``state_bytes()``; optionally ``velocity_output()`` (then the Simulation
also outputs ``"<name>_velocity"`` and passes its adjoint as ``begin_backward``'s second
argument) and ``row_bytes()`` (the bytes one substep row of stored state costs, for
``Simulation(checkpoint="auto")``; without it "auto" checkpoints). Outputs and output
adjoints are torch tensors of the engine's dtype on its
device (``runtime.torch_dtype()``, ``runtime.torch_device()``; ``kernels.field_to_torch``
and ``torch_to_field`` copy them without leaving the device).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from gradsim_taichi import field_pool, runtime
from gradsim_taichi.params import ParamSet
from gradsim_taichi.particle_system import ParticleSystem
from gradsim_taichi.solvers.ground_contact import GroundParams
from gradsim_taichi.solvers.particles import ParticleState
from gradsim_taichi.solvers.springs import Springs


@runtime_checkable
class System(Protocol):
    """What :class:`~gradsim_taichi.simulation.Simulation` drives: a steppable system with
    its own state (see the module docstring for the order of calls). Optional:
    ``velocity_output()``."""

    name: str

    def allocate(self, rows: int, frames: int) -> None: ...
    def params(self) -> list: ...
    def load(self, frame: int) -> None: ...
    def clear_segment(self) -> None: ...
    def step(self, row: int, frame: int, dt: float) -> None: ...
    def save(self, frame: int, row: int) -> None: ...
    def begin_backward(self, grad_frames) -> None: ...
    def seed_segment(self, first_frame: int, frames_in_segment: int,
                     substeps: int) -> None: ...
    def step_grad(self, row: int, frame: int, dt: float) -> None: ...
    def finish_backward(self) -> None: ...
    def output(self): ...
    def state_bytes(self) -> int: ...


_SYSTEM_MEMBERS = ("name", "allocate", "params", "load", "clear_segment", "step", "save",
                   "begin_backward", "seed_segment", "step_grad", "finish_backward",
                   "output", "state_bytes")


def _check_system(system) -> None:
    """A TypeError naming what ``system`` lacks of :class:`System`."""
    missing = [m for m in _SYSTEM_MEMBERS if not hasattr(system, m)]
    if missing:
        raise TypeError(f"{type(system).__name__} is not a System: it lacks "
                        f"{', '.join(missing)}")


@dataclass(frozen=True)
class RigidMesh:
    """A rigid body's render mesh (see :meth:`Model.rigid_meshes`)."""

    rows: np.ndarray
    faces: np.ndarray
    vertices: np.ndarray


class Model:
    """The systems of a scene (built by ``ModelBuilder.finalize``)."""

    def __init__(self, particles: dict | None, springs=None, ground=None,
                 force_factories=(), system_factories=(), structure=None):
        runtime.ensure_init()
        runtime.check_field_room("a Model")
        self._generation = runtime.generation()
        # fields of a collected model of this structure come back (field_pool; structure:
        # what decides the fields' shapes, from the builder, so that a rebuilt model finds
        # its own released fields first)
        with field_pool.owned_by(self, structure):
            self._build_systems(particles, springs, ground, force_factories,
                                system_factories)

    def _build_systems(self, particles, springs, ground, force_factories,
                       system_factories) -> None:
        # The ground and its learnable contact parameters are shared by all systems.
        self.ground = None if ground is None else GroundParams(**ground)
        self.systems: list = []
        self.particles = None
        self.particle_system = None
        if particles is not None:
            self.particles = ParticleState(**particles, ground=self.ground)
            force_models: list = []
            if springs is not None:
                force_models.append(Springs(*springs))
            for make in force_factories:
                force_models.append(make(self))
            self.particle_system = ParticleSystem(self.particles, force_models)
            self.systems.append(self.particle_system)
        for make in system_factories:
            self.systems.append(make(self))
        for system in self.systems:
            _check_system(system)
        self._allocated = False

    @property
    def particle_count(self) -> int:
        return 0 if self.particles is None else self.particles.n

    def rigid_meshes(self) -> list:
        """Per rigid body, what a renderer needs: ``RigidMesh(rows, faces, vertices)`` with
        ``rows`` its vertices' rows in the simulation's ``"rigid"`` output, ``faces`` into
        those rows (local indices) and ``vertices`` the mesh in the body frame (about its
        geometric centre of mass). Empty without rigid bodies."""
        rigid = next((s for s in self.systems if s.name == "rigid"), None)
        if rigid is None:
            return []
        local = rigid.vlocal.to_numpy()
        out = []
        for offset, faces in rigid.meshes:
            rows = np.arange(offset, offset + int(faces.max()) + 1)
            out.append(RigidMesh(rows, faces.copy(), local[rows].astype(np.float64)))
        return out

    @property
    def forces(self) -> list:
        return [] if self.particle_system is None else self.particle_system.forces

    def add_force(self, force_model) -> None:
        """Attach a particle force model (see
        :class:`~gradsim_taichi.solvers.registry.ForceModel`)."""
        if self._allocated:
            raise RuntimeError("add force models before creating a Simulation on this model")
        self.particle_system.add(force_model)

    def check_alive(self, what: str = "this Model") -> None:
        runtime.check_generation(self._generation, what)

    def allocate(self, rows: int, frames: int) -> ParamSet:
        """Allocate state storage; returns the named parameters (some depend on ``frames``)."""
        self.check_alive()
        if self._allocated:
            raise RuntimeError(
                "this Model already has a Simulation; build a new Model for another one"
            )
        self._allocated = True
        params = ParamSet(self.ground.params() if self.ground is not None else [])
        with field_pool.owned_by(self):
            for system in self.systems:
                system.allocate(rows, frames)
                for p in system.params():
                    params.add(p)
        return params

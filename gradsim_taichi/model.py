"""Model: topology and material parameters in Taichi fields, sized once.

A Model holds *systems*, each with its own state and a uniform stepping protocol
that :class:`~gradsim_taichi.simulation.Simulation` drives. Today there is the
particle system, whose force models (springs, ground contact, cloth, FEM) all add
into one particle force field; rigid bodies join as a second system.

The protocol of a system (see :class:`ParticleSolver`): ``name``, ``allocate(rows,
frames)``, ``params()``, ``load(frame)``, ``clear_segment()``, ``step(row, frame, dt)``,
``save(frame, row)``, ``begin_backward(grad_frames)``, ``seed_segment(first_frame,
frames_in_segment, substeps)``, ``step_grad(row, frame, dt)``, ``finish_backward()``,
``output()``, ``state_bytes()``; optionally ``velocity_output()`` (then the Simulation
also outputs ``"<name>_velocity"`` and passes its adjoint as ``begin_backward``'s second
argument).
"""

from __future__ import annotations

from gradsim_taichi import runtime
from gradsim_taichi.params import ParamSet
from gradsim_taichi.solvers.ground_contact import GroundParams
from gradsim_taichi.solvers.launch import FastKernel
from gradsim_taichi.solvers.particles import ParticleSystem
from gradsim_taichi.solvers.springs import Springs


class ParticleSolver:
    """The particle system plus the force models acting on it, as one steppable system.

    A force model is an object with a Taichi kernel ``apply(x, v, f, row)`` adding its
    forces into ``f[row]`` (so ``apply.grad`` is its adjoint), ``params()`` and
    ``zero_grads()``. Force models may also have ``apply_frame(x, v, f, row, frame)``
    instead of ``apply`` when they depend on per-frame inputs (activations).
    """

    name = "particles"

    def __init__(self, particles: ParticleSystem, forces: list):
        self.particles = particles
        self.forces = forces

    def allocate(self, rows, frames):
        self.particles.allocate(rows, frames)
        for force in self.forces:
            if hasattr(force, "allocate"):
                force.allocate(rows, frames)
        # The substep's kernels, launched through FastKernel (~5 us instead of ~25 us of
        # Python per call); the flag says whether a kernel takes the frame index too.
        self._force_kernels = [
            (FastKernel(force.apply_frame), True) if hasattr(force, "apply_frame")
            else (FastKernel(force.apply), False)
            for force in self.forces
        ]
        self._integrate = FastKernel(self.particles.integrate)

    def params(self):
        out = list(self.particles.params())
        for force in self.forces:
            out += force.params()
        return out

    def load(self, frame):
        self.particles.load(frame)

    def clear_segment(self):
        pass  # load() zeroes the forces of row 0 and the integrator those of row + 1

    def step(self, row, frame, dt):
        p = self.particles
        for kernel, per_frame in self._force_kernels:
            if per_frame:
                kernel(p.x, p.v, p.f, row, frame)
            else:
                kernel(p.x, p.v, p.f, row)
        self._integrate(row, frame, dt)

    def step_grad(self, row, frame, dt):
        p = self.particles
        self._integrate.grad(row, frame, dt)
        for kernel, per_frame in reversed(self._force_kernels):
            if per_frame:
                kernel.grad(p.x, p.v, p.f, row, frame)
            else:
                kernel.grad(p.x, p.v, p.f, row)

    def save(self, frame, row):
        self.particles.save(frame, row)

    def begin_backward(self, grad_frames, grad_velocities=None):
        self.particles.begin_backward(grad_frames, grad_velocities)
        for force in self.forces:
            force.zero_grads()

    def seed_segment(self, first_frame, frames_in_segment, substeps):
        self.particles.seed_segment(first_frame, frames_in_segment, substeps)

    def finish_backward(self):
        self.particles.finish_backward()

    def output(self):
        return self.particles.output()

    def velocity_output(self):
        return self.particles.velocity_output()

    def state_bytes(self):
        return self.particles.state_bytes() + sum(
            force.state_bytes() for force in self.forces if hasattr(force, "state_bytes"))


class Model:
    """The systems of a scene (built by ``ModelBuilder.finalize``)."""

    def __init__(self, particles: dict | None, springs=None, ground=None,
                 force_factories=(), system_factories=()):
        runtime.ensure_init()
        self._generation = runtime.generation()
        # The ground and its learnable contact parameters are shared by all systems.
        self.ground = None if ground is None else GroundParams(**ground)
        self.systems: list = []
        self.particles = None
        self.particle_solver = None
        if particles is not None:
            self.particles = ParticleSystem(**particles, ground=self.ground)
            force_models: list = []
            if springs is not None:
                force_models.append(Springs(*springs))
            for make in force_factories:
                force_models.append(make(self))
            self.particle_solver = ParticleSolver(self.particles, force_models)
            self.systems.append(self.particle_solver)
        for make in system_factories:
            self.systems.append(make(self))
        self._allocated = False

    @property
    def particle_count(self) -> int:
        return 0 if self.particles is None else self.particles.n

    @property
    def forces(self) -> list:
        return [] if self.particle_solver is None else self.particle_solver.forces

    def add_force(self, force_model) -> None:
        """Attach a particle force model (see :class:`ParticleSolver`)."""
        if self._allocated:
            raise RuntimeError("add force models before creating a Simulation on this model")
        self.particle_solver.forces.append(force_model)

    def check_alive(self) -> None:
        runtime.check_generation(self._generation, "this Model")

    def allocate(self, rows: int, frames: int) -> ParamSet:
        """Allocate state storage; returns the named parameters (some depend on ``frames``)."""
        self.check_alive()
        if self._allocated:
            raise RuntimeError(
                "this Model already has a Simulation; build a new Model for another one"
            )
        self._allocated = True
        params = ParamSet(self.ground.params() if self.ground is not None else [])
        for system in self.systems:
            system.allocate(rows, frames)
            for p in system.params():
                params.add(p)
        return params

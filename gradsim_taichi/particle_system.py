"""The particle system: the particle state plus the force models acting on it, stepped as
one system of the :class:`~gradsim_taichi.model.Model`."""

from __future__ import annotations

from gradsim_taichi.kernels import FastKernel
from gradsim_taichi.solvers.particles import ParticleState
from gradsim_taichi.solvers.registry import ForceModel


class ParticleSystem:
    """:class:`~gradsim_taichi.solvers.particles.ParticleState` (storage and integrator)
    and its force models (:class:`~gradsim_taichi.solvers.registry.ForceModel`), as one
    system (:class:`~gradsim_taichi.model.System`).

    Force models of other kinds are accepted when they have ``apply``, ``params`` and
    ``zero_grads`` (``apply_frame`` instead of ``apply``: per frame; ``allocate`` and
    ``state_bytes`` optional).
    """

    name = "particles"

    def __init__(self, particles: ParticleState, forces: list):
        self.particles = particles
        self.forces = []
        for force in forces:
            self.add(force)

    def add(self, force) -> None:
        """Attach a force model."""
        missing = [m for m in ("params", "zero_grads") if not hasattr(force, m)]
        if not (hasattr(force, "apply") or hasattr(force, "apply_frame")):
            missing.insert(0, "apply")
        if missing:
            raise TypeError(f"{type(force).__name__} is not a force model: it lacks "
                            f"{', '.join(missing)} (see gradsim_taichi.solvers.registry)")
        self.forces.append(force)

    @staticmethod
    def _kernel(force):
        """(forward kernel, whether it takes the frame index)."""
        if isinstance(force, ForceModel):
            return force.apply, force.per_frame
        if hasattr(force, "apply_frame"):
            return force.apply_frame, True
        return force.apply, False

    def allocate(self, rows, frames):
        self.particles.allocate(rows, frames)
        for force in self.forces:
            if hasattr(force, "allocate"):
                force.allocate(rows, frames)
        # The substep's kernels, launched through FastKernel (~5 us instead of ~25 us of
        # Python per call); the flag says whether a kernel takes the frame index too.
        self._force_kernels = []
        for force in self.forces:
            kernel, per_frame = self._kernel(force)
            self._force_kernels.append((FastKernel(kernel), per_frame))
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

    def row_bytes(self):
        """Bytes of state one substep row adds (values and adjoints of x, v, f and the force
        models' per-substep values); None when a force model does not say (``row_bytes``)."""
        total = self.particles.row_bytes()
        for force in self.forces:
            per_row = getattr(force, "row_bytes", None)
            if per_row is None:
                return None
            total += per_row()
        return total

    def state_bytes(self):
        return self.particles.state_bytes() + sum(
            force.state_bytes() for force in self.forces if hasattr(force, "state_bytes"))

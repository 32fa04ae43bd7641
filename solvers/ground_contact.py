"""Penalty contact of particles with the ground plane y = height (gradSim's model).

Normal: ``fn = -(ke c + kd min(vn, 0))`` for penetration depth ``c < 0`` (pushes out,
damps only approach, never pulls). Friction: an isotropic Coulomb cone,
``ft = min(kf |vt|, mu fn)`` opposite the tangential velocity ``vt``. The viscous branch
needs no division by ``|vt|``, so a particle at rest has finite gradients.
"""

import taichi as ti

from gradsim_taichi import runtime
from gradsim_taichi.params import Param, field_param


@ti.data_oriented
class GroundParams:
    """The ground plane and its contact parameters, shared by every system that touches it
    (particles and rigid bodies read the same learnable fields)."""

    def __init__(self, height, radius, ke, kd, kf, mu):
        real = runtime.real()
        self.height = float(height)
        self.radius = float(radius)  # contact radius of particles
        self.ke = ti.field(real, (), needs_grad=True)
        self.kd = ti.field(real, (), needs_grad=True)
        self.kf = ti.field(real, (), needs_grad=True)
        self.mu = ti.field(real, (), needs_grad=True)
        self.ke[None], self.kd[None], self.kf[None], self.mu[None] = ke, kd, kf, mu

    def params(self) -> list[Param]:
        return [
            field_param("contact_ke", self.ke, "ground contact stiffness [N/m]", nonnegative=True),
            field_param("contact_kd", self.kd, "ground contact damping [N s/m]", nonnegative=True),
            field_param("contact_kf", self.kf, "ground friction stiffness [N s/m]",
                        nonnegative=True),
            field_param("contact_mu", self.mu, "ground Coulomb friction coefficient",
                        nonnegative=True),
        ]

    def zero_grads(self) -> None:
        for field in (self.ke, self.kd, self.kf, self.mu):
            field.grad.fill(0)

    @ti.func
    def force(self, c, vel):
        """Contact force on a point at signed distance ``c`` (< 0: penetrating) from the
        ground, moving with velocity ``vel``; zero when not in contact."""
        out = ti.Vector([0.0, 0.0, 0.0])
        if c < 0.0:
            vn = vel[1]
            fn = -(self.ke[None] * c + self.kd[None] * ti.min(vn, 0.0))
            vt = ti.Vector([vel[0], 0.0, vel[2]])
            vt2 = vt.dot(vt)
            cap = self.mu[None] * fn
            friction = ti.Vector([0.0, 0.0, 0.0])
            if self.kf[None] * self.kf[None] * vt2 < cap * cap:
                friction = -self.kf[None] * vt  # viscous (sticking) branch
            elif vt2 > 0.0:
                friction = -(cap / ti.sqrt(vt2)) * vt  # saturated Coulomb branch
            out = ti.Vector([0.0, fn, 0.0]) + friction
        return out


@ti.data_oriented
class GroundContact:
    """Particle force model: every particle of radius ``ground.radius`` against the ground."""

    def __init__(self, n_particles, ground: GroundParams):
        self.n = n_particles
        self.ground = ground

    def params(self) -> list[Param]:
        return []  # the ground's parameters are registered once by the Model

    def zero_grads(self) -> None:
        pass  # the Simulation zeroes the shared ground parameters' gradients

    @ti.kernel
    def apply(self, x: ti.template(), v: ti.template(), f: ti.template(), row: ti.i32):
        for i in range(self.n):
            c = x[row, i][1] - self.ground.radius - self.ground.height
            f[row, i] += self.ground.force(c, v[row, i])

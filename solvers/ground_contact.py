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
class GroundContact:
    def __init__(self, n_particles, height, radius, ke, kd, kf, mu):
        real = runtime.real()
        self.n = n_particles
        self.height = float(height)
        self.radius = float(radius)
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

    @ti.kernel
    def apply(self, x: ti.template(), v: ti.template(), f: ti.template(), row: ti.i32):
        for i in range(self.n):
            c = x[row, i][1] - self.radius - self.height
            if c < 0.0:
                vel = v[row, i]
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
                f[row, i] += ti.Vector([0.0, fn, 0.0]) + friction

"""The ground contact force's hand-written adjoint (fused into the integrator's adjoint)
against float64 central differences, in every regime of the force."""

import numpy as np
import pytest
import taichi as ti
from runtime_arch import TEST_ARCH

import gradsim_taichi as gs
from gradsim_taichi.solvers.ground_contact import GroundParams


@pytest.fixture(autouse=True)
def _init():
    gs.init(arch=TEST_ARCH, precision="f64")


@ti.data_oriented
class Probe:
    """Evaluates force(c, vel) and its adjoint for a batch of (c, vel, g)."""

    def __init__(self, ground, n):
        self.ground = ground
        self.n = n
        self.c = ti.field(ti.f64, n)
        self.vel = ti.Vector.field(3, ti.f64, n)
        self.g = ti.Vector.field(3, ti.f64, n)
        self.force = ti.Vector.field(3, ti.f64, n)
        self.g_c = ti.field(ti.f64, n)
        self.g_vel = ti.Vector.field(3, ti.f64, n)
        self.g_par = ti.Vector.field(4, ti.f64, n)

    @ti.kernel
    def run(self):
        for i in range(self.n):
            self.force[i] = self.ground.force(self.c[i], self.vel[i])
            g_c, g_vel, g_par = self.ground.force_adjoint(self.c[i], self.vel[i], self.g[i])
            self.g_c[i] = g_c
            self.g_vel[i] = g_vel
            self.g_par[i] = g_par

    def evaluate(self, c, vel, g):
        self.c.from_numpy(c)
        self.vel.from_numpy(vel)
        self.g.from_numpy(g)
        self.run()
        return self.force.to_numpy()


# (penetration c, velocity): inside the cubic elastic blend (c > -1e-4), inside the damping
# ramp (-1e-3 < c), deep; approaching (vy < 0) and separating; friction in the series
# branch (slow sliding, q < 1e-4) and the tanh branch; out of contact (c > 0)
CASES = [
    (-5e-5, (0.3, -0.2, 0.1)),
    (-5e-4, (0.5, -0.3, -0.2)),
    (-4e-3, (1.2, -0.5, 0.4)),
    (-4e-3, (0.8, 0.3, -0.6)),
    (-2e-3, (2e-4, -0.1, 1e-4)),
    (-3e-3, (0.02, 0.05, -0.03)),
    (1e-3, (0.5, -0.5, 0.5)),
]


def test_contact_adjoint_matches_central_differences():
    ground = GroundParams(height=0.0, radius=0.0, ke=2e3, kd=15.0, kf=40.0, mu=0.6)
    n = len(CASES)
    probe = Probe(ground, n)
    c = np.array([k[0] for k in CASES])
    vel = np.array([k[1] for k in CASES])
    g = np.random.default_rng(0).standard_normal((n, 3))
    probe.evaluate(c, vel, g)
    g_c, g_vel, g_par = (probe.g_c.to_numpy(), probe.g_vel.to_numpy(), probe.g_par.to_numpy())

    def loss(c_, vel_):
        return (g * probe.evaluate(c_, vel_, g)).sum(axis=1)

    eps = 1e-8
    fd_c = (loss(c + eps, vel) - loss(c - eps, vel)) / (2 * eps)
    np.testing.assert_allclose(g_c, fd_c, rtol=1e-6, atol=1e-6 * np.abs(fd_c).max())
    for k in range(3):
        dv = np.zeros_like(vel)
        dv[:, k] = 1e-7
        fd_v = (loss(c, vel + dv) - loss(c, vel - dv)) / 2e-7
        np.testing.assert_allclose(g_vel[:, k], fd_v, rtol=1e-6,
                                   atol=1e-6 * np.abs(fd_v).max(), err_msg=f"velocity {k}")
    for k, field in enumerate(ground.fields()):
        value = field[None]
        h = 1e-6 * value
        field[None] = value + h
        lp = loss(c, vel)
        field[None] = value - h
        lm = loss(c, vel)
        field[None] = value
        fd = (lp - lm) / (2 * h)
        np.testing.assert_allclose(g_par[:, k], fd, rtol=1e-6, atol=1e-6 * np.abs(fd).max(),
                                   err_msg=["ke", "kd", "kf", "mu"][k])
    assert np.all(g_par[-1] == 0) and g_c[-1] == 0  # out of contact: no force, no adjoint
    assert np.abs(g_par[:-1]).min(axis=0).max() > 0  # the parameters matter in contact

"""Penalty contact of particles with the ground plane y = height (gradSim's model).

Normal: ``fn = ke p - kd min(vn, 0)`` for penetration ``p = -c > 0``: pushes out, damps
only approach, never pulls. Friction: the Coulomb cone, ``|ft| <= mu fn`` opposite the
tangential velocity with slope ``kf`` at rest.

Smoothness (where this differs from the reference on purpose): the reference's force
steps at first touch (its damping term) and kinks where friction saturates. Each such
event puts a jump into the derivative of the rollout with respect to the parameters,
and a contact-rich rollout has thousands: the loss landscape becomes rough at the
1e-4 scale and gradient descent cannot settle. Here the elastic force blends in with a
cubic over the first ``elastic_width`` (0.1 mm) of penetration (exactly ``ke p`` beyond),
the damping ramps in with a smoothstep over ``damping_depth`` (1 mm), and friction
saturates with ``mu fn tanh(kf |vt| / (mu fn))``, so the contact force is C1. The
friction is written without a square root at ``vt = 0``: a particle at rest has finite
gradients.
"""

import taichi as ti

from gradsim_taichi.params import Learnable


@ti.data_oriented
class GroundParams(Learnable):
    """The ground plane and its contact parameters, shared by every system that touches it
    (particles and rigid bodies read the same learnable fields)."""

    def __init__(self, height, radius, ke, kd, kf, mu, damping_depth=1e-3, elastic_width=1e-4):
        self.height = float(height)
        self.damping_depth = max(float(damping_depth), 1e-12)
        self.elastic_width = max(float(elastic_width), 1e-12)
        self.radius = float(radius)  # contact radius of particles
        self.ke = self.learnable("contact_ke", ke, "ground contact stiffness [N/m]",
                                 nonnegative=True)
        self.kd = self.learnable("contact_kd", kd, "ground contact damping [N s/m]",
                                 nonnegative=True)
        self.kf = self.learnable("contact_kf", kf, "ground friction stiffness [N s/m]",
                                 nonnegative=True)
        self.mu = self.learnable("contact_mu", mu, "ground Coulomb friction coefficient",
                                 nonnegative=True)
        self.fill_learnables()

    def fields(self) -> tuple:
        """The learnable fields, in the order (ke, kd, kf, mu)."""
        return self.ke, self.kd, self.kf, self.mu

    @ti.func
    def force(self, c, vel):
        """Contact force on a point at signed distance ``c`` (< 0: penetrating) from the
        ground, moving with velocity ``vel``; zero when not in contact."""
        out = ti.Vector([0.0, 0.0, 0.0])
        if c < 0.0:
            pen = -c
            # elastic: ke * pen, with a cubic blend over the first `elastic_width` so the
            # force's slope is continuous at first touch (identical beyond it)
            elastic = self.ke[None] * pen
            w = self.elastic_width
            if pen < w:
                t = pen / w
                elastic = self.ke[None] * w * (2.0 * t * t - t * t * t)
            # damping of approach only, ramped in (smoothstep) over `damping_depth`
            ramp = 1.0
            if pen < self.damping_depth:
                t = pen / self.damping_depth
                ramp = t * t * (3.0 - 2.0 * t)
            vn = vel[1]
            fn = elastic - self.kd[None] * ti.min(vn, 0.0) * ramp
            # friction: the Coulomb cone min(kf |vt|, mu fn), saturated smoothly with tanh
            # (slope kf at rest, limit mu fn when sliding)
            # friction = -cap tanh(x) vt / |vt| = -kf (tanh(x) / x) vt with x = kf |vt| / cap;
            # tanh(x) / x is written without a square root at x = 0 (finite gradients)
            vt = ti.Vector([vel[0], 0.0, vel[2]])
            cap = self.mu[None] * fn
            friction = ti.Vector([0.0, 0.0, 0.0])
            if cap > 0.0:
                x2 = self.kf[None] * self.kf[None] * vt.dot(vt) / (cap * cap)
                factor = 1.0 - x2 / 3.0 + 2.0 * x2 * x2 / 15.0
                if x2 > 1e-4:
                    x = ti.sqrt(x2)
                    factor = ti.tanh(x) / x
                friction = -self.kf[None] * factor * vt
            out = ti.Vector([0.0, fn, 0.0]) + friction
        return out

    @ti.func
    def force_adjoint(self, c, vel, g):
        """Adjoint of :meth:`force` (hand-written, so that the integrator can fuse contact
        into its own loop): for dL/dF = ``g`` returns dL/dc, dL/dvel and the gradients of
        (ke, kd, kf, mu) as a 4-vector. Zero when not in contact."""
        g_c = 0.0
        g_vel = ti.Vector([0.0, 0.0, 0.0])
        g_par = ti.Vector([0.0, 0.0, 0.0, 0.0])
        if c < 0.0:
            ke = self.ke[None]
            kd = self.kd[None]
            kf = self.kf[None]
            mu = self.mu[None]
            pen = -c
            # elastic(pen, ke) and its partials
            elastic = ke * pen
            d_elastic_pen = ke
            d_elastic_ke = pen
            w = self.elastic_width
            if pen < w:
                t = pen / w
                d_elastic_ke = w * (2.0 * t * t - t * t * t)
                elastic = ke * d_elastic_ke
                d_elastic_pen = ke * (4.0 * t - 3.0 * t * t)
            ramp = 1.0
            d_ramp_pen = 0.0
            if pen < self.damping_depth:
                t = pen / self.damping_depth
                ramp = t * t * (3.0 - 2.0 * t)
                d_ramp_pen = 6.0 * t * (1.0 - t) / self.damping_depth
            vn = vel[1]
            approach = ti.min(vn, 0.0)
            fn = elastic - kd * approach * ramp
            g_fn = g[1]
            # friction = -kf phi(q) vt, q = kf^2 |vt|^2 / cap^2, cap = mu fn
            vt = ti.Vector([vel[0], 0.0, vel[2]])
            cap = mu * fn
            g_vt = ti.Vector([0.0, 0.0, 0.0])
            g_kf = 0.0
            g_mu = 0.0
            if cap > 0.0:
                vt2 = vt.dot(vt)
                q = kf * kf * vt2 / (cap * cap)
                phi = 1.0 - q / 3.0 + 2.0 * q * q / 15.0
                d_phi = -1.0 / 3.0 + 4.0 * q / 15.0
                if q > 1e-4:
                    x = ti.sqrt(q)
                    th = ti.tanh(x)
                    phi = th / x
                    d_phi = ((1.0 - th * th) * x - th) / (2.0 * q * x)  # dphi/dq
                gt = ti.Vector([g[0], 0.0, g[2]])
                g_phi = -kf * gt.dot(vt)
                g_q = g_phi * d_phi
                g_vt = -kf * phi * gt + (2.0 * g_q * kf * kf / (cap * cap)) * vt
                g_kf = -phi * gt.dot(vt) + 2.0 * g_q * kf * vt2 / (cap * cap)
                g_cap = -2.0 * g_q * q / cap
                g_mu = g_cap * fn
                g_fn += g_cap * mu
            g_c = -g_fn * (d_elastic_pen - kd * approach * d_ramp_pen)
            g_vel = ti.Vector([g_vt[0], 0.0, g_vt[2]])
            if vn < 0.0:
                g_vel[1] = -g_fn * kd * ramp
            g_par = ti.Vector([g_fn * d_elastic_ke, -g_fn * approach * ramp, g_kf, g_mu])
        return g_c, g_vel, g_par

"""Aerodynamic lift and drag on cloth triangles (the reference's ``eval_triangles`` terms),
relative to a uniform wind velocity.

For a triangle of current area ``A`` and unit normal ``n`` moving with the mean velocity
of its vertices ``v``, the air velocity relative to it is ``u = v - wind`` and

    drag = -kd_air A |n . u| u
    lift = -kl_air A asin(n . u_hat) |u|^2 n

The same force is added to each of the triangle's three vertices, as in the reference
(so its coefficients carry over unchanged; the total force on a triangle is three times
the expression above). The angle of attack ``asin(n . u_hat)`` is computed as
``atan2(n . u, |n x u|)``, whose gradient stays finite when the air hits the triangle
head-on (``acos``/``asin`` have infinite slope there) and when ``u = 0``.
"""

import numpy as np
import taichi as ti

from gradsim_taichi import field_pool
from gradsim_taichi.solvers.registry import ForceModelBase
from gradsim_taichi.solvers.scatter import Scatter


@ti.data_oriented
class Aerodynamics(ForceModelBase):
    """Particle force model: lift and drag of triangles [T, 3] in a wind.

    Args:
        triangles: [T, 3] particle indices.
        lift: lift coefficient (global scalar, >= 0).
        drag: drag coefficient (global scalar, >= 0).
        wind: wind velocity (3,) [m/s].

    Learnable: ``cloth_lift``, ``cloth_drag`` (scalars) and ``wind`` (3,).
    """

    def __init__(self, triangles, lift, drag, wind):
        tris = np.asarray(triangles, dtype=np.int32).reshape(-1, 3)
        self.count = len(tris)
        # atomic adds when parallel: Taichi generates this model's adjoint
        self.scatter = Scatter(tris, ns_per_item=40.0)
        self.tris = field_pool.vector(3, ti.i32, shape=self.count)
        self.lift = self.learnable("cloth_lift", lift,
                                   "cloth aerodynamic lift coefficient [kg/m^3]", nonnegative=True)
        self.drag = self.learnable("cloth_drag", drag,
                                   "cloth aerodynamic drag coefficient [kg/m^3]", nonnegative=True)
        self.wind = self.learnable("wind", wind, "wind velocity [m/s], (3,)", n=3)
        self.fill_learnables([(self.tris, tris)])

    @ti.kernel
    def apply(self, x: ti.template(), v: ti.template(), f: ti.template(), row: ti.i32):
        ti.loop_config(serialize=self.scatter.serial)
        for t in range(self.count):
            i = self.tris[t][0]
            j = self.tris[t][1]
            k = self.tris[t][2]
            p = x[row, i]
            n = (x[row, j] - p).cross(x[row, k] - p)
            nlen = ti.sqrt(n.dot(n) + 1e-30)  # floor keeps a collapsed triangle finite
            area = 0.5 * nlen
            nh = n / nlen
            u = (v[row, i] + v[row, j] + v[row, k]) / 3.0 - self.wind[None]
            un = nh.dot(u)
            side = nh.cross(u)
            # angle of attack asin(n . u_hat), finite-gradient form; 0 when u = 0
            attack = ti.atan2(un, ti.sqrt(side.dot(side) + 1e-30))
            fa = (self.drag[None] * area * ti.abs(un)) * u \
                + (self.lift[None] * area * attack * u.dot(u)) * nh
            self.scatter.add(0, f, row, i, t, 0, -fa)
            self.scatter.add(0, f, row, j, t, 1, -fa)
            self.scatter.add(0, f, row, k, t, 2, -fa)

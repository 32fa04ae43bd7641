"""Triangle membrane FEM for cloth: the reference's (dFlex ``eval_triangles``) model.

Per triangle with rest area ``A0``, inverse rest matrix ``Dm`` (2x2, from an in-plane
basis of the rest triangle) and deformation gradient ``F = [x1 - x0, x2 - x0] Dm``
(3x2), the elastic energy is

    E = A0 (ke / 2 |F|^2 + ka / 2 (J - alpha + a)^2),   J = area / A0,  alpha = 1 + ke / ka

a neo-Hookean-like membrane that is stress free at rest (``alpha`` cancels the
``|F|^2`` term's pull at ``J = 1``). ``a`` is the triangle's activation of the current
frame: it moves the area term's target from ``alpha`` to ``alpha - a`` (a > 0
contracts the triangle, as in the reference). Damping acts on the area rate:
``f = -kd A0 (dJ/dt) dJ/dx``. Both terms are invariant under rigid motion and use
relative velocities only.

Compression and inversion: the area uses the unsigned cross product with a tiny
floor (``|n| = sqrt(n.n + 1e-30)``) and the unit normal is ``n / |n|``, so a triangle
squashed to a line or a point gives finite forces (the area term then vanishes and the
linear ``ke`` term plus the neighbours restore it). A triangle flipped in 3D is a
rotated triangle, so it is at rest.
"""

import numpy as np
import taichi as ti

from gradsim_taichi import field_pool, runtime
from gradsim_taichi.kernels import WithAdjoint, read_fields
from gradsim_taichi.solvers.registry import ForceModelBase
from gradsim_taichi.solvers.scatter import Scatter


def triangle_rest_pose(x0: np.ndarray, x1: np.ndarray, x2: np.ndarray):
    """Inverse rest matrices ``Dm`` [T, 2, 2] and rest areas [T] of triangles with
    vertices ``x0, x1, x2`` (each [T, 3]), as the reference computes them: the rest
    edges ``x1 - x0`` and ``x2 - x0`` expressed in the basis ``e1 = normalize(x1 - x0)``,
    ``e2 = n x e1``."""
    qp = np.asarray(x1, dtype=np.float64) - x0
    rp = np.asarray(x2, dtype=np.float64) - x0
    n = np.cross(qp, rp)
    nlen = np.linalg.norm(n, axis=1)
    qlen = np.linalg.norm(qp, axis=1)
    bad = np.nonzero((nlen <= 0) | (qlen <= 0))[0]
    if len(bad):
        raise ValueError(f"triangle {bad[0]} has zero rest area; every triangle needs area > 0")
    n = n / nlen[:, None]
    e1 = qp / qlen[:, None]
    e2 = np.cross(n, e1)
    d = np.empty((len(qp), 2, 2))
    d[:, 0, 0] = np.einsum("ij,ij->i", e1, qp)
    d[:, 0, 1] = np.einsum("ij,ij->i", e1, rp)
    d[:, 1, 0] = np.einsum("ij,ij->i", e2, qp)
    d[:, 1, 1] = np.einsum("ij,ij->i", e2, rp)
    return np.linalg.inv(d), 0.5 * nlen


@ti.data_oriented
class ClothTriangles(ForceModelBase):
    """Particle force model: membrane elasticity, area damping and activation of triangles.

    Args:
        triangles: [T, 3] particle indices.
        rest_positions: particle positions [N, 3] defining the rest shape.
        ke: stretch stiffness (the reference's ``tri_ke``, a Lame mu per unit area) [T].
        ka: area stiffness (``tri_ka``, a Lame lambda) [T], > 0.
        kd: area damping (``tri_kd``) [T].

    Learnable: ``tri_ke``, ``tri_ka``, ``tri_kd`` [T] and ``tri_activation`` [frames, T].
    """

    per_frame = True  # apply(x, v, f, row, frame): activations are per frame

    def __init__(self, triangles, rest_positions, ke, ka, kd):
        real = runtime.real()
        tris = np.asarray(triangles, dtype=np.int64).reshape(-1, 3)
        x = np.asarray(rest_positions, dtype=np.float64)
        dm, area = triangle_rest_pose(x[tris[:, 0]], x[tris[:, 1]], x[tris[:, 2]])
        self.count = len(tris)
        # atomic adds when parallel: Taichi generates this model's adjoint
        self.scatter = Scatter(tris, ns_per_item=40.0)
        self.tris = field_pool.vector(3, ti.i32, shape=self.count)
        self.pose = field_pool.matrix(2, 2, real, shape=self.count)
        self.rest_area = field_pool.field(real, self.count)
        self.ke = self.learnable("tri_ke", ke, "cloth stretch stiffness [N/m], per triangle",
                                 nonnegative=True)
        self.ka = self.learnable("tri_ka", ka, "cloth area stiffness [N/m], per triangle",
                                 positive=True)
        self.kd = self.learnable("tri_kd", kd, "cloth area damping [N s/m], per triangle",
                                 nonnegative=True)
        self.fill_learnables([(self.tris, tris), (self.pose, dm), (self.rest_area, area)])
        self.frames = 0
        self.act = None
        self.apply_frame = WithAdjoint(self._forces, self._forces_adjoint)
        self.apply = self.apply_frame  # the ForceModel name; apply_frame: takes the frame

    def stability_terms(self, x0) -> list:
        """Membrane stiffness (``tri_ke + tri_ka``, a vertex's stiffness for an
        in-plane displacement, up to a factor of order one) and damping per triangle."""
        tris, ke, ka, kd = read_fields([self.tris, self.ke, self.ka, self.kd])
        return [("tri_ke + tri_ka", "stiffness", ke + ka, tris), ("tri_kd", "damping", kd, tris)]

    def allocate(self, rows: int, frames: int) -> None:
        """Per-frame activations ``[frames, T]`` (zero: the rest shape)."""
        self.frames = frames
        self.act = self.learnable("tri_activation", np.zeros((frames, self.count)),
                                  "cloth triangle activation (area target shift), (frames, T)")
        self.fill_learnables()

    # ---- kernels (the adjoint is hand-written: Taichi's generated one cost 2.3x the
    # forward, and atomics in it when parallel) --------------------------------------
    @ti.func
    def _triangle(self, x: ti.template(), v: ti.template(), row, t):
        """Corner ids, edges ``qp, rp`` from the first corner, relative velocities, the
        inverse rest matrix and the rest area of triangle ``t``."""
        i = self.tris[t][0]
        j = self.tris[t][1]
        k = self.tris[t][2]
        p = x[row, i]
        vp = v[row, i]
        return (i, j, k, x[row, j] - p, x[row, k] - p, v[row, j] - vp, v[row, k] - vp,
                self.pose[t], self.rest_area[t])

    @ti.kernel
    def _forces(self, x: ti.template(), v: ti.template(), f: ti.template(), row: ti.i32,
                frame: ti.i32):
        ti.loop_config(serialize=self.scatter.serial)
        for t in range(self.count):
            i, j, k, qp, rp, vq, vr, dm, a0 = self._triangle(x, v, row, t)
            k_mu = self.ke[t] * a0
            k_lambda = self.ka[t] * a0
            k_damp = self.kd[t] * a0
            # F = [qp, rp] Dm; the ke term's force is k_mu F Dm^T
            f1 = qp * dm[0, 0] + rp * dm[1, 0]
            f2 = qp * dm[0, 1] + rp * dm[1, 1]
            fq = (f1 * dm[0, 0] + f2 * dm[0, 1]) * k_mu
            fr = (f1 * dm[1, 0] + f2 * dm[1, 1]) * k_mu
            alpha = 1.0 + self.ke[t] / self.ka[t]
            n = qp.cross(rp)
            nlen = ti.sqrt(n.dot(n) + 1e-30)  # floor keeps a collapsed triangle finite
            nh = n / nlen
            c = 0.5 * nlen / a0 - alpha + self.act[frame, t]
            dcdq = rp.cross(nh) * (0.5 / a0)
            dcdr = nh.cross(qp) * (0.5 / a0)
            s = k_lambda * c + k_damp * (dcdq.dot(vq) + dcdr.dot(vr))
            fq += dcdq * s
            fr += dcdr * s
            # fq, fr are dE/dx of the second and third vertex; forces are their negatives
            self.scatter.add(0, f, row, i, t, 0, fq + fr)
            self.scatter.add(0, f, row, j, t, 1, -fq)
            self.scatter.add(0, f, row, k, t, 2, -fr)

    @ti.kernel
    def _forces_adjoint(self, x: ti.template(), v: ti.template(), f: ti.template(),
                        row: ti.i32, frame: ti.i32):
        # L = Gq . fq + Gr . fr with Gq = g_i - g_j, Gr = g_i - g_k (g = f.grad).
        # Elastic: fq_e = k_mu (F Dm^T)_q is linear in (qp, rp): the adjoint is the same
        # map applied to (Gq, Gr). Area: fq_a = s dcdq, fr_a = s dcdr, so with
        # Gs = Gq . dcdq + Gr . dcdr: dL/ds = Gs, dL/d(dcdq) = s Gq + Gs k_damp vq =: Pq
        # (Pr alike); dcdq = h rp x nh, dcdr = h nh x qp (h = 0.5 / a0) give
        # dL/drp = h nh x Pq, dL/dqp = h Pr x nh, dL/dnh = h (Pq x rp + qp x Pr); then
        # through nh = n / |n|, |n| (in c) and n = qp x rp.
        ti.loop_config(serialize=self.scatter.serial)
        for t in range(self.count):
            i, j, k, qp, rp, vq, vr, dm, a0 = self._triangle(x, v, row, t)
            gi = f.grad[row, i]
            gq = gi - f.grad[row, j]
            gr = gi - f.grad[row, k]
            ke = self.ke[t]
            ka = self.ka[t]
            k_mu = ke * a0
            k_lambda = ka * a0
            k_damp = self.kd[t] * a0
            h = 0.5 / a0
            # elastic: fq = k_mu (A qp + B rp), fr = k_mu (B qp + C rp), M = Dm Dm^T
            m_a = dm[0, 0] * dm[0, 0] + dm[0, 1] * dm[0, 1]
            m_b = dm[0, 0] * dm[1, 0] + dm[0, 1] * dm[1, 1]
            m_c = dm[1, 0] * dm[1, 0] + dm[1, 1] * dm[1, 1]
            eq = m_a * gq + m_b * gr
            er = m_b * gq + m_c * gr
            g_qp = k_mu * eq
            g_rp = k_mu * er
            g_kmu = eq.dot(qp) + er.dot(rp)
            # area term
            n = qp.cross(rp)
            nlen = ti.sqrt(n.dot(n) + 1e-30)
            nh = n / nlen
            c = h * nlen - (1.0 + ke / ka) + self.act[frame, t]
            dcdq = rp.cross(nh) * h
            dcdr = nh.cross(qp) * h
            rate = dcdq.dot(vq) + dcdr.dot(vr)
            s = k_lambda * c + k_damp * rate
            gs = gq.dot(dcdq) + gr.dot(dcdr)
            g_c = gs * k_lambda
            pq = s * gq + (gs * k_damp) * vq
            pr = s * gr + (gs * k_damp) * vr
            g_rp += h * nh.cross(pq)
            g_qp += h * pr.cross(nh)
            g_nh = h * (pq.cross(rp) + qp.cross(pr))
            g_n = (g_nh - g_nh.dot(nh) * nh) / nlen + (g_c * h) * nh
            g_qp += rp.cross(g_n)
            g_rp += g_n.cross(qp)
            g_vq = (gs * k_damp) * dcdq
            g_vr = (gs * k_damp) * dcdr
            # parameters: alpha = 1 + ke / ka is in c
            self.ke.grad[t] += a0 * g_kmu - g_c / ka
            self.ka.grad[t] += a0 * gs * c + g_c * ke / (ka * ka)
            self.kd.grad[t] += a0 * gs * rate
            self.act.grad[frame, t] += g_c
            self.scatter.add(0, x.grad, row, i, t, 0, -(g_qp + g_rp))
            self.scatter.add(0, x.grad, row, j, t, 1, g_qp)
            self.scatter.add(0, x.grad, row, k, t, 2, g_rp)
            self.scatter.add(0, v.grad, row, i, t, 0, -(g_vq + g_vr))
            self.scatter.add(0, v.grad, row, j, t, 1, g_vq)
            self.scatter.add(0, v.grad, row, k, t, 2, g_vr)

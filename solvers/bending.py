"""Dihedral bending between adjacent triangles (the reference's ``eval_bending``).

A hinge ``(o0, o1, v0, v1)`` is an interior edge ``v0 -> v1`` with the opposite
vertices ``o0`` (of the face that runs ``v0 -> v1``) and ``o1`` (of the face that runs
``v1 -> v0``). With face normals ``n1 = (x_v0 - x_o0) x (x_v1 - x_o0)`` and
``n2 = (x_v1 - x_o1) x (x_v0 - x_o1)``, edge ``e = x_v1 - x_v0``, the signed dihedral angle is

    theta = atan2((n2 x n1) . e_hat, n1 . n2)        (0 on a flat sheet)

and the force on vertex ``a`` is ``-|e| (ke (theta - theta0) + kd dtheta/dt) dtheta/dx_a``
with the gradients of Bridson et al. (2003): ``dtheta/dx_o0 = |e| n1 / |n1|^2`` etc.

Robustness: atan2 of the (unnormalised) sine and cosine is finite at any angle, flat
(``theta = 0``) and fully folded (``theta = +-pi``) included; a hinge whose edge has
zero length or whose wing is collinear with the edge (no normal) exerts no force.
"""

import numpy as np
import taichi as ti

from gradsim_taichi import field_pool, runtime
from gradsim_taichi.kernels import WithAdjoint, read_fields
from gradsim_taichi.solvers.registry import ForceModelBase
from gradsim_taichi.solvers.scatter import Scatter


def dihedral_angles(x: np.ndarray, hinges: np.ndarray) -> np.ndarray:
    """The signed dihedral angle of every hinge [H, 4] at positions ``x`` [N, 3] (numpy,
    same formula as the kernel; used for rest angles and in tests)."""
    x = np.asarray(x, dtype=np.float64)
    h = np.asarray(hinges, dtype=np.int64).reshape(-1, 4)
    x1, x2, x3, x4 = (x[h[:, c]] for c in range(4))
    n1 = np.cross(x3 - x1, x4 - x1)
    n2 = np.cross(x4 - x2, x3 - x2)
    e = x4 - x3
    e_hat = e / np.maximum(np.linalg.norm(e, axis=1), 1e-300)[:, None]
    sin = np.einsum("ij,ij->i", np.cross(n2, n1), e_hat)
    cos = np.einsum("ij,ij->i", n1, n2)
    return np.arctan2(sin, cos)


def mesh_hinges(triangles: np.ndarray) -> np.ndarray:
    """Hinges ``(o0, o1, v0, v1)`` [H, 4] of every edge shared by exactly two triangles of a
    consistently wound mesh [T, 3] (boundary edges have no hinge)."""
    tris = np.asarray(triangles, dtype=np.int64).reshape(-1, 3)
    if len(tris) == 0:
        return np.zeros((0, 4), dtype=np.int64)
    # directed edges (a -> b) with the opposite vertex of their triangle
    a = tris[:, [0, 1, 2]].ravel()
    b = tris[:, [1, 2, 0]].ravel()
    o = tris[:, [2, 0, 1]].ravel()
    key = np.minimum(a, b) * (int(tris.max()) + 1) + np.maximum(a, b)
    order = np.argsort(key, kind="stable")
    key, a, b, o = key[order], a[order], b[order], o[order]
    starts = np.nonzero(np.r_[True, key[1:] != key[:-1]])[0]
    counts = np.diff(np.r_[starts, len(key)])
    first = starts[counts == 2]
    second = first + 1
    if np.any(a[first] == a[second]):
        raise ValueError("triangles are not consistently wound: two triangles traverse a "
                         "shared edge in the same direction")
    return np.stack([o[first], o[second], a[first], b[first]], axis=1)


@ti.data_oriented
class Bending(ForceModelBase):
    """Particle force model: dihedral-angle springs on hinges.

    Args:
        hinges: [H, 4] particle indices ``(o0, o1, v0, v1)`` (see the module doc).
        rest_angle: [H] rest dihedral angles (radians).
        ke: bending stiffness (``edge_ke``) [H].
        kd: bending damping (``edge_kd``) [H].

    Learnable: ``edge_ke``, ``edge_kd`` [H].
    """

    def __init__(self, hinges, rest_angle, ke, kd):
        real = runtime.real()
        h = np.asarray(hinges, dtype=np.int32).reshape(-1, 4)
        self.count = len(h)
        self.scatter = Scatter(h, ns_per_item=60.0)  # atomic adds when parallel
        self.hinges = field_pool.vector(4, ti.i32, shape=self.count)
        self.rest = field_pool.field(real, self.count)
        self.ke = self.learnable("edge_ke", ke, "cloth bending stiffness [N m/rad], per hinge",
                                 nonnegative=True)
        self.kd = self.learnable("edge_kd", kd, "cloth bending damping [N m s/rad], per hinge",
                                 nonnegative=True)
        self.fill_learnables([(self.hinges, h), (self.rest, rest_angle)])
        # theta of every hinge at every substep of the segment, from the forward pass: the
        # adjoint reads it instead of calling atan2 again (~20 ns a call on the CPU)
        self.angle = field_pool.field(real, shape=(1, self.count))
        self.apply = WithAdjoint(self._forces, self._forces_adjoint)

    def stability_terms(self, x0) -> list:
        """Bending stiffness and damping as forces per unit displacement: ``edge_ke / L^2``
        (a displacement d turns the hinge by about d / L, its torque acts through L)."""
        h, ke, kd = read_fields([self.hinges, self.ke, self.kd])
        length2 = np.maximum(((x0[h[:, 0]] - x0[h[:, 1]]) ** 2).sum(axis=1), 1e-18)
        return [("edge_ke", "stiffness", ke / length2, h),
                ("edge_kd", "damping", kd / length2, h)]

    def allocate(self, rows: int, frames: int) -> None:
        self.angle = field_pool.field(runtime.real(), shape=(rows, self.count))

    def row_bytes(self) -> int:
        return self.count * np.dtype(runtime.np_dtype()).itemsize

    def state_bytes(self) -> int:
        """Bytes of per-substep values kept for the adjoint (the angles)."""
        return self.angle.shape[0] * self.count * np.dtype(runtime.np_dtype()).itemsize

    # ---- kernels (the adjoint is hand-written: Taichi's generated one was 2x the forward's
    # cost again, and bending is the costliest cloth force) --------------------------
    @ti.func
    def _geometry(self, x1, x2, x3, x4):
        """Hinge geometry: validity, |e|, e_hat, dtheta/dx_a (a = 1..4), the normals,
        1 / |n|^2 and the edge projections a3, b3, a4, b4 of d3, d4 (not theta)."""
        n1 = (x3 - x1).cross(x4 - x1)
        n2 = (x4 - x2).cross(x3 - x2)
        e = x4 - x3
        n1sq = n1.dot(n1)
        n2sq = n2.dot(n2)
        esq = e.dot(e)
        # No normal or no edge: the angle is undefined, skip (also keeps atan2(0, 0) out).
        tol = 1e-24 * esq * esq
        valid = esq > 1e-30 and n1sq > tol and n2sq > tol
        e_len = ti.sqrt(esq)
        inv1 = 0.0
        inv2 = 0.0
        e_hat = ti.Vector([0.0, 0.0, 0.0])
        if valid:
            inv1 = 1.0 / n1sq
            inv2 = 1.0 / n2sq
            e_hat = e * (1.0 / e_len)
        a3 = (x1 - x4).dot(e_hat)
        b3 = (x2 - x4).dot(e_hat)
        a4 = (x3 - x1).dot(e_hat)
        b4 = (x3 - x2).dot(e_hat)
        d1 = n1 * (e_len * inv1)
        d2 = n2 * (e_len * inv2)
        d3 = n1 * (a3 * inv1) + n2 * (b3 * inv2)
        d4 = n1 * (a4 * inv1) + n2 * (b4 * inv2)
        return valid, e_len, e_hat, d1, d2, d3, d4, n1, n2, inv1, inv2, a3, b3, a4, b4

    @ti.func
    def _wing_adjoint(self, n, inv, e_len, s3, s4, c_edge, c3, c4, a, b):
        """Adjoint of one wing's term u . C of sum_a c_a . d_a, u = n / |n|^2, n = a x b,
        C = |e| c_edge + s3 c3 + s4 c4: returns dL/da, dL/db (through the normal) and the
        weights u . c_edge, u . c3, u . c4 of |e| and of the wing's two edge projections
        s3, s4 (so u . C is their weighted sum)."""
        u = n * inv
        w_e = u.dot(c_edge)
        w3 = u.dot(c3)
        w4 = u.dot(c4)
        h = (e_len * c_edge + s3 * c3 + s4 * c4) * inv \
            - (2.0 * (e_len * w_e + s3 * w3 + s4 * w4)) * u
        return b.cross(h), h.cross(a), w_e, w3, w4

    @ti.kernel
    def _forces(self, x: ti.template(), v: ti.template(), f: ti.template(), row: ti.i32):
        ti.loop_config(serialize=self.scatter.serial)
        for h in range(self.count):
            i = self.hinges[h][0]
            j = self.hinges[h][1]
            k = self.hinges[h][2]
            m = self.hinges[h][3]
            valid, e_len, e_hat, d1, d2, d3, d4, n1, n2, _, _, _, _, _, _ = self._geometry(
                x[row, i], x[row, j], x[row, k], x[row, m])
            if valid:
                angle = ti.atan2(n2.cross(n1).dot(e_hat), n1.dot(n2))
                self.angle[row, h] = angle
                rate = (d1.dot(v[row, i]) + d2.dot(v[row, j]) + d3.dot(v[row, k])
                        + d4.dot(v[row, m]))
                s = -e_len * (self.ke[h] * (angle - self.rest[h]) + self.kd[h] * rate)
                self.scatter.add(0, f, row, i, h, 0, d1 * s)
                self.scatter.add(0, f, row, j, h, 1, d2 * s)
                self.scatter.add(0, f, row, k, h, 2, d3 * s)
                self.scatter.add(0, f, row, m, h, 3, d4 * s)

    @ti.kernel
    def _forces_adjoint(self, x: ti.template(), v: ti.template(), f: ti.template(),
                        row: ti.i32):
        # f_a = s d_a, s = -|e| B, B = ke (theta - theta0) + kd rate, rate = sum d_a . v_a,
        # d_a = dtheta/dx_a. With g_a = f.grad_a and G = sum g_a . d_a, L = s G:
        #   dL/dv_a = cv d_a with cv = -G |e| kd;  dL/dke = -G |e| (theta - theta0),
        #   dL/dkd = -G |e| rate;  dL/dx = -G |e| ke dtheta/dx - G B d|e|/dx
        #   + d/dx sum_a c_a . d_a(x) for fixed c_a = s g_a + cv v_a.
        # sum c_a . d_a = (n1 . C1) / |n1|^2 + (n2 . C2) / |n2|^2 with
        # C1 = |e| c1 + a3 c3 + a4 c4, C2 = |e| c2 + b3 c3 + b4 c4; each term is
        # differentiated through its normal (a cross product) and its scalars |e|, a3, ...
        ti.loop_config(serialize=self.scatter.serial)
        for h in range(self.count):
            i = self.hinges[h][0]
            j = self.hinges[h][1]
            k = self.hinges[h][2]
            m = self.hinges[h][3]
            x1 = x[row, i]
            x2 = x[row, j]
            x3 = x[row, k]
            x4 = x[row, m]
            valid, e_len, e_hat, d1, d2, d3, d4, n1, n2, inv1, inv2, a3, b3, a4, b4 = \
                self._geometry(x1, x2, x3, x4)
            if valid:
                angle = self.angle[row, h]  # written by the forward pass
                v1 = v[row, i]
                v2 = v[row, j]
                v3 = v[row, k]
                v4 = v[row, m]
                g1 = f.grad[row, i]
                g2 = f.grad[row, j]
                g3 = f.grad[row, k]
                g4 = f.grad[row, m]
                ke = self.ke[h]
                kd = self.kd[h]
                rate = d1.dot(v1) + d2.dot(v2) + d3.dot(v3) + d4.dot(v4)
                bend = ke * (angle - self.rest[h]) + kd * rate
                s = -e_len * bend
                G = g1.dot(d1) + g2.dot(d2) + g3.dot(d3) + g4.dot(d4)
                self.ke.grad[h] += -G * e_len * (angle - self.rest[h])
                self.kd.grad[h] += -G * e_len * rate
                cv = -G * e_len * kd
                self.scatter.add(1, v.grad, row, i, h, 0, cv * d1)
                self.scatter.add(1, v.grad, row, j, h, 1, cv * d2)
                self.scatter.add(1, v.grad, row, k, h, 2, cv * d3)
                self.scatter.add(1, v.grad, row, m, h, 3, cv * d4)
                c1 = s * g1 + cv * v1
                c2 = s * g2 + cv * v2
                c3 = s * g3 + cv * v3
                c4 = s * g4 + cv * v4
                # through theta
                w_theta = -G * e_len * ke
                gx1 = w_theta * d1
                gx2 = w_theta * d2
                gx3 = w_theta * d3
                gx4 = w_theta * d4
                w_len = -G * bend
                # wing 1: n1 = (x3 - x1) x (x4 - x1); wing 2: n2 = (x4 - x2) x (x3 - x2)
                p1, q1, w_len1, w_a3, w_a4 = self._wing_adjoint(
                    n1, inv1, e_len, a3, a4, c1, c3, c4, x3 - x1, x4 - x1)
                gx3 += p1
                gx4 += q1
                gx1 -= p1 + q1
                p2, q2, w_len2, w_b3, w_b4 = self._wing_adjoint(
                    n2, inv2, e_len, b3, b4, c2, c3, c4, x4 - x2, x3 - x2)
                gx4 += p2
                gx3 += q2
                gx2 -= p2 + q2
                w_len += w_len1 + w_len2
                # a3 = (x1 - x4) . e_hat, b3 = (x2 - x4) . e_hat, a4 = (x3 - x1) . e_hat,
                # b4 = (x3 - x2) . e_hat: the positions directly, then e_hat (e = x4 - x3)
                gx1 += (w_a3 - w_a4) * e_hat
                gx2 += (w_b3 - w_b4) * e_hat
                gx3 += (w_a4 + w_b4) * e_hat
                gx4 -= (w_a3 + w_b3) * e_hat
                proj = (w_a3 * (x1 - x4) + w_b3 * (x2 - x4) + w_a4 * (x3 - x1)
                        + w_b4 * (x3 - x2))
                along = w_a3 * a3 + w_b3 * b3 + w_a4 * a4 + w_b4 * b4
                ge = (proj - along * e_hat) * (1.0 / e_len) + w_len * e_hat
                gx4 += ge
                gx3 -= ge
                self.scatter.add(0, x.grad, row, i, h, 0, gx1)
                self.scatter.add(0, x.grad, row, j, h, 1, gx2)
                self.scatter.add(0, x.grad, row, k, h, 2, gx3)
                self.scatter.add(0, x.grad, row, m, h, 3, gx4)

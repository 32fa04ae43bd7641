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

from gradsim_taichi import runtime
from gradsim_taichi.params import Param, field_param


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
class Bending:
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
        dtype = runtime.np_dtype()
        self.count = len(h)
        self.serial = runtime.serial(self.count, ns_per_item=60.0)  # short loops run serially (see runtime.serial)
        self.hinges = ti.Vector.field(4, ti.i32, shape=self.count)
        self.rest = ti.field(real, self.count)
        self.ke = ti.field(real, self.count, needs_grad=True)
        self.kd = ti.field(real, self.count, needs_grad=True)
        self.hinges.from_numpy(h)
        self.rest.from_numpy(np.asarray(rest_angle, dtype=dtype))
        self.ke.from_numpy(np.asarray(ke, dtype=dtype))
        self.kd.from_numpy(np.asarray(kd, dtype=dtype))

    def params(self) -> list[Param]:
        return [
            field_param("edge_ke", self.ke, "cloth bending stiffness [N m/rad], per hinge",
                        nonnegative=True),
            field_param("edge_kd", self.kd, "cloth bending damping [N m s/rad], per hinge",
                        nonnegative=True),
        ]

    def zero_grads(self) -> None:
        for field in (self.ke, self.kd):
            field.grad.fill(0)

    @ti.kernel
    def apply(self, x: ti.template(), v: ti.template(), f: ti.template(), row: ti.i32):
        ti.loop_config(serialize=self.serial)
        for h in range(self.count):
            i = self.hinges[h][0]
            j = self.hinges[h][1]
            k = self.hinges[h][2]
            m = self.hinges[h][3]
            x1 = x[row, i]
            x2 = x[row, j]
            x3 = x[row, k]
            x4 = x[row, m]
            n1 = (x3 - x1).cross(x4 - x1)
            n2 = (x4 - x2).cross(x3 - x2)
            e = x4 - x3
            n1sq = n1.dot(n1)
            n2sq = n2.dot(n2)
            esq = e.dot(e)
            # No normal or no edge: the angle is undefined, skip (also keeps atan2(0, 0) and
            # its NaN gradient out of the tape).
            tol = 1e-24 * esq * esq
            if esq > 1e-30 and n1sq > tol and n2sq > tol:
                e_len = ti.sqrt(esq)
                e_hat = e / e_len
                angle = ti.atan2(n2.cross(n1).dot(e_hat), n1.dot(n2))
                d1 = n1 * (e_len / n1sq)
                d2 = n2 * (e_len / n2sq)
                d3 = n1 * ((x1 - x4).dot(e_hat) / n1sq) + n2 * ((x2 - x4).dot(e_hat) / n2sq)
                d4 = n1 * ((x3 - x1).dot(e_hat) / n1sq) + n2 * ((x3 - x2).dot(e_hat) / n2sq)
                rate = (d1.dot(v[row, i]) + d2.dot(v[row, j]) + d3.dot(v[row, k])
                        + d4.dot(v[row, m]))
                s = -e_len * (self.ke[h] * (angle - self.rest[h]) + self.kd[h] * rate)
                f[row, i] += d1 * s
                f[row, j] += d2 * s
                f[row, k] += d3 * s
                f[row, m] += d4 * s

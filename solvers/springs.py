"""Damped springs between particle pairs."""

import numpy as np
import taichi as ti

from gradsim_taichi import field_pool, runtime
from gradsim_taichi.kernels import WithAdjoint, read_fields
from gradsim_taichi.solvers.registry import ForceModelBase
from gradsim_taichi.solvers.scatter import Scatter


@ti.data_oriented
class Springs(ForceModelBase):
    """Hooke springs with dashpot damping along the spring:
    ``f = (ke (l - rest) + kd (v_rel . d)) d`` on the first end, the opposite on the second.

    ``apply(x, v, f, row)`` adds the forces into ``f[row]``; ``apply.grad(x, v, f, row)`` is
    its hand-written adjoint (reads ``f.grad[row]``, adds into ``x.grad[row]``,
    ``v.grad[row]`` and the per-spring parameter gradients).

    No float atomics: serially one loop over the springs adds into both ends; in parallel
    a gathered :class:`~gradsim_taichi.solvers.scatter.Scatter`. Either way the summation
    order is fixed (spring order): results do not depend on the thread count.
    """

    def __init__(self, ends, stiffness, damping, rest_length):
        real = runtime.real()
        ends = np.asarray(ends, dtype=np.int64).reshape(-1, 2)
        self.count = len(ends)
        self.ends = field_pool.vector(2, ti.i32, shape=self.count)
        self.ke = self.learnable("spring_stiffness", stiffness,
                                 "spring stiffness [N/m], per spring", nonnegative=True)
        self.kd = self.learnable("spring_damping", damping,
                                 "spring damping [N s/m], per spring", nonnegative=True)
        self.rest = self.learnable("spring_rest_length", rest_length,
                                   "spring rest length [m], per spring", positive=True)
        self.fill_learnables([(self.ends, ends)])
        # length and 1 / length of every spring at every substep of the segment, from the
        # forward pass: the adjoint reads them instead of a square root and a division
        self.lengths = field_pool.vector(2, real, shape=(1, self.count))
        # in parallel: per-spring buffers of end values (forces; adjoints of x and v)
        self.scatter = Scatter(ends, ns_per_item=10.0, channels=2)
        self.apply = WithAdjoint(self._forces, self._forces_adjoint)

    def allocate(self, rows: int, frames: int) -> None:
        self.lengths = field_pool.vector(2, runtime.real(), shape=(rows, self.count))

    def row_bytes(self) -> int:
        return self.count * 2 * np.dtype(runtime.np_dtype()).itemsize

    def state_bytes(self) -> int:
        """Bytes of per-substep values kept for the adjoint (the lengths)."""
        return self.lengths.shape[0] * self.count * 2 * np.dtype(runtime.np_dtype()).itemsize

    def stability_terms(self, x0) -> list:
        """``(name, "stiffness" | "damping", value per spring, ends)`` for the explicit
        stability check (see :meth:`Simulation._warn_if_unstable`)."""
        ends, ke, kd = read_fields([self.ends, self.ke, self.kd])
        return [("spring_stiffness", "stiffness", ke, ends),
                ("spring_damping", "damping", kd, ends)]

    # No kernel here is differentiated by Taichi (the adjoints are hand-written), so two
    # top-level loops per kernel are fine. The dynamic inner loops accumulate scalars only.

    @ti.func
    def _force(self, x: ti.template(), v: ti.template(), row, s):
        """Force of spring ``s`` on its first end (the second end gets the opposite)."""
        i = self.ends[s][0]
        j = self.ends[s][1]
        d = x[row, j] - x[row, i]
        length = ti.sqrt(d.dot(d) + 1e-30)  # the tiny term keeps coincident ends finite
        inv_length = 1.0 / length
        self.lengths[row, s] = ti.Vector([length, inv_length])
        direction = d * inv_length
        speed = (v[row, j] - v[row, i]).dot(direction)
        magnitude = self.ke[s] * (length - self.rest[s]) + self.kd[s] * speed
        return magnitude * direction

    @ti.func
    def _adjoint(self, x: ti.template(), v: ti.template(), f: ti.template(), row, s):
        """Adjoint of spring ``s``: adds its parameter gradients and returns the adjoints
        of its second end's position and velocity (the first end gets the opposite).
        Reads the spring's length from the forward pass of ``row``.

        F = m u on end 0 (-F on end 1), u = d / l, l = sqrt(d.d + eps), d = x_j - x_i,
        m = ke (l - rest) + kd (w . u), w = v_j - v_i. With g = f.grad_i - f.grad_j and
        gm = g . u:
          dl/dd = (m / l) g + (kd gm / l) w + gm (ke - (m + kd (w . u)) / l) / l d,
          dl/dw = (kd gm / l) d,
          dl/dke = (l - rest) gm,  dl/dkd = (w . u) gm,  dl/drest = -ke gm
        (dl/du = m g + kd gm w projected off u, divided by l, written without the
        projection's extra dot product: a shorter dependency chain)."""
        i = self.ends[s][0]
        j = self.ends[s][1]
        d = x[row, j] - x[row, i]
        w = v[row, j] - v[row, i]
        g = f.grad[row, i] - f.grad[row, j]
        length = self.lengths[row, s][0]  # from the forward pass of this row
        inv_length = self.lengths[row, s][1]
        speed = d.dot(w) * inv_length
        gm = d.dot(g) * inv_length
        ke = self.ke[s]
        kd = self.kd[s]
        stretch = length - self.rest[s]
        magnitude = ke * stretch + kd * speed
        # one spring per iteration: plain stores, no atomics
        self.ke.grad[s] = self.ke.grad[s] + stretch * gm
        self.kd.grad[s] = self.kd.grad[s] + speed * gm
        self.rest.grad[s] = self.rest.grad[s] - ke * gm
        c_w = kd * gm * inv_length
        c_d = gm * (ke - (magnitude + kd * speed) * inv_length) * inv_length
        return (magnitude * inv_length) * g + c_w * w + c_d * d, c_w * d

    # One kernel pair; serial and parallel differ only inside the Scatter (see scatter.py).
    @ti.kernel
    def _forces(self, x: ti.template(), v: ti.template(), f: ti.template(), row: ti.i32):
        ti.loop_config(serialize=self.scatter.serial)
        for s in range(self.count):
            force = self._force(x, v, row, s)
            self.scatter.add(0, f, row, self.ends[s][0], s, 0, force)
            self.scatter.add(0, f, row, self.ends[s][1], s, 1, -force)
        self.scatter.gather(0, f, row)

    @ti.kernel
    def _forces_adjoint(self, x: ti.template(), v: ti.template(), f: ti.template(),
                        row: ti.i32):
        ti.loop_config(serialize=self.scatter.serial)
        for s in range(self.count):
            gx, gv = self._adjoint(x, v, f, row, s)
            i = self.ends[s][0]
            j = self.ends[s][1]
            self.scatter.add(0, x.grad, row, j, s, 1, gx)
            self.scatter.add(0, x.grad, row, i, s, 0, -gx)
            self.scatter.add(1, v.grad, row, j, s, 1, gv)
            self.scatter.add(1, v.grad, row, i, s, 0, -gv)
        self.scatter.gather(0, x.grad, row)
        self.scatter.gather(1, v.grad, row)

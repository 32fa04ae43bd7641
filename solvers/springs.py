"""Damped springs between particle pairs."""

import numpy as np
import taichi as ti

from gradsim_taichi import runtime
from gradsim_taichi.params import Param, field_param
from gradsim_taichi.solvers.custom_adjoint import WithAdjoint
from gradsim_taichi.solvers.gather import SlotGather


@ti.data_oriented
class Springs:
    """Hooke springs with dashpot damping along the spring:
    ``f = (ke (l - rest) + kd (v_rel . d)) d`` on the first end, the opposite on the second.

    ``apply(x, v, f, row)`` adds the forces into ``f[row]``; ``apply.grad(x, v, f, row)`` is
    its hand-written adjoint (reads ``f.grad[row]``, adds into ``x.grad[row]``,
    ``v.grad[row]`` and the per-spring parameter gradients).

    No float atomics. Serially (short loops on the CPU), one loop over the springs adds
    into both ends. In parallel, each spring writes its force (or its endpoint adjoints)
    into a per-spring buffer, then each particle sums the springs incident to it through a
    CSR list (particle -> 2 s + end, in spring order). Either way the summation order is
    fixed: results do not depend on the thread count, and both paths give the same sums.
    """

    def __init__(self, ends, stiffness, damping, rest_length):
        real = runtime.real()
        ends = np.asarray(ends, dtype=np.int64).reshape(-1, 2)
        self.count = len(ends)
        self.ends = ti.Vector.field(2, ti.i32, shape=self.count)
        self.ke = ti.field(real, self.count, needs_grad=True)
        self.kd = ti.field(real, self.count, needs_grad=True)
        self.rest = ti.field(real, self.count, needs_grad=True)
        self.ends.from_numpy(ends.astype(np.int32))
        self.ke.from_numpy(np.asarray(stiffness, dtype=runtime.np_dtype()))
        self.kd.from_numpy(np.asarray(damping, dtype=runtime.np_dtype()))
        self.rest.from_numpy(np.asarray(rest_length, dtype=runtime.np_dtype()))
        # length and 1 / length of every spring at every substep of the segment, from the
        # forward pass: the adjoint reads them instead of a square root and a division
        self.lengths = ti.Vector.field(2, real, shape=(1, self.count))
        # Short loops run serially on the CPU (see runtime.serial): then one loop adds
        # straight into the particles, in spring order, with no buffers.
        if runtime.serial(self.count):
            self.apply = WithAdjoint(self._scatter_forces, self._scatter_adjoint)
            return
        # Parallel: per spring, its force on end 0 (forward) or the adjoints of end 1's
        # position and velocity (backward; end 0 gets the opposite), then each particle
        # sums its slots 2 s + end.
        gather = SlotGather(ends)
        self.n_gather, self.gather_ids = gather.n, gather.ids
        self.gather_ptr, self.gather_slot = gather.ptr, gather.slot
        self.buf_a = ti.Vector.field(3, real, shape=self.count)
        self.buf_b = ti.Vector.field(3, real, shape=self.count)
        self.apply = WithAdjoint(self._forces, self._forces_adjoint)

    def allocate(self, rows: int, frames: int) -> None:
        self.lengths = ti.Vector.field(2, runtime.real(), shape=(rows, self.count))

    def state_bytes(self) -> int:
        """Bytes of per-substep values kept for the adjoint (the lengths)."""
        return self.lengths.shape[0] * self.count * 2 * np.dtype(runtime.np_dtype()).itemsize

    def params(self) -> list[Param]:
        return [
            field_param("spring_stiffness", self.ke, "spring stiffness [N/m], per spring",
                        nonnegative=True),
            field_param("spring_damping", self.kd, "spring damping [N s/m], per spring",
                        nonnegative=True),
            field_param("spring_rest_length", self.rest, "spring rest length [m], per spring",
                        positive=True),
        ]

    def zero_grads(self) -> None:
        for field in (self.ke, self.kd, self.rest):
            field.grad.fill(0)

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

    # ---- serial: one loop adding straight into the particles (plain adds, no atomics) --
    @ti.kernel
    def _scatter_forces(self, x: ti.template(), v: ti.template(), f: ti.template(),
                        row: ti.i32):
        ti.loop_config(serialize=True)
        for s in range(self.count):
            force = self._force(x, v, row, s)
            i = self.ends[s][0]
            j = self.ends[s][1]
            f[row, i] = f[row, i] + force
            f[row, j] = f[row, j] - force

    @ti.kernel
    def _scatter_adjoint(self, x: ti.template(), v: ti.template(), f: ti.template(),
                         row: ti.i32):
        ti.loop_config(serialize=True)
        for s in range(self.count):
            gx, gv = self._adjoint(x, v, f, row, s)
            i = self.ends[s][0]
            j = self.ends[s][1]
            x.grad[row, j] = x.grad[row, j] + gx
            x.grad[row, i] = x.grad[row, i] - gx
            v.grad[row, j] = v.grad[row, j] + gv
            v.grad[row, i] = v.grad[row, i] - gv

    # ---- parallel: per-spring buffers, then a per-particle gather --------------------
    @ti.kernel
    def _forces(self, x: ti.template(), v: ti.template(), f: ti.template(), row: ti.i32):
        for s in range(self.count):
            self.buf_a[s] = self._force(x, v, row, s)

        # second loop (after an implicit barrier): each particle sums its springs' forces
        for p in range(self.n_gather):
            a0 = 0.0
            a1 = 0.0
            a2 = 0.0
            for q in range(self.gather_ptr[p], self.gather_ptr[p + 1]):
                slot = self.gather_slot[q]
                s = slot >> 1
                if slot & 1 == 0:
                    a0 += self.buf_a[s][0]
                    a1 += self.buf_a[s][1]
                    a2 += self.buf_a[s][2]
                else:
                    a0 -= self.buf_a[s][0]
                    a1 -= self.buf_a[s][1]
                    a2 -= self.buf_a[s][2]
            k = self.gather_ids[p]
            f[row, k] = f[row, k] + ti.Vector([a0, a1, a2])

    @ti.kernel
    def _forces_adjoint(self, x: ti.template(), v: ti.template(), f: ti.template(),
                        row: ti.i32):
        for s in range(self.count):
            gx, gv = self._adjoint(x, v, f, row, s)
            self.buf_a[s] = gx
            self.buf_b[s] = gv

        for p in range(self.n_gather):
            a0 = 0.0
            a1 = 0.0
            a2 = 0.0
            b0 = 0.0
            b1 = 0.0
            b2 = 0.0
            for q in range(self.gather_ptr[p], self.gather_ptr[p + 1]):
                slot = self.gather_slot[q]
                s = slot >> 1
                if slot & 1 == 1:
                    a0 += self.buf_a[s][0]
                    a1 += self.buf_a[s][1]
                    a2 += self.buf_a[s][2]
                    b0 += self.buf_b[s][0]
                    b1 += self.buf_b[s][1]
                    b2 += self.buf_b[s][2]
                else:
                    a0 -= self.buf_a[s][0]
                    a1 -= self.buf_a[s][1]
                    a2 -= self.buf_a[s][2]
                    b0 -= self.buf_b[s][0]
                    b1 -= self.buf_b[s][1]
                    b2 -= self.buf_b[s][2]
            k = self.gather_ids[p]
            x.grad[row, k] = x.grad[row, k] + ti.Vector([a0, a1, a2])
            v.grad[row, k] = v.grad[row, k] + ti.Vector([b0, b1, b2])

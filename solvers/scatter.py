"""How a loop over elements adds per-corner values into per-particle fields: the one
place where the CPU-serial and the parallel code paths differ.

Every force model and the rigid bodies loop over their elements (springs, triangles,
hinges, tets, mesh vertices) and add a value per element corner into a field indexed
``[row, particle]`` (forces, or adjoints of positions and velocities). The policy is
:func:`gradsim_taichi.runtime.serial`; a :class:`Scatter` applies it:

- serial (short loops on the CPU): one thread in element order, ``target += value``
  (Taichi demotes atomics in a single-threaded loop to plain adds);
- parallel, *gathered* (``channels > 0``; springs and FEM): atomic-free and
  deterministic. Each corner's value goes to a per-element buffer, then a loop over the
  particles sums their slots in element order (a CSR list). The buffers are overwritten
  on every launch, which only a hand-written adjoint allows;
- parallel, *atomic* (``channels == 0``): ``target += value`` as atomic adds, for kernels
  whose adjoint Taichi generates.

A kernel over the elements reads::

    ti.loop_config(serialize=self.scatter.serial)
    for e in range(self.count):
        ...
        self.scatter.add(0, f, row, particle, e, corner, value)
    self.scatter.gather(0, f, row)  # nothing unless gathered

Keep ``gather`` out of kernels Taichi differentiates (use ``channels=0`` there).
"""

import numpy as np
import taichi as ti

from gradsim_taichi import field_pool, runtime
from gradsim_taichi.kernels import write_fields


@ti.data_oriented
class Scatter:
    """The serial/parallel choice for a loop over ``elements [E, k]`` (particle ids, corner
    ``c`` of element ``e`` adding into ``elements[e, c]``) of ``ns_per_item`` each, with
    ``channels`` gather buffers when parallel (0: atomic adds)."""

    def __init__(self, elements, ns_per_item: float, channels: int = 0):
        elements = np.asarray(elements, dtype=np.int64)
        if elements.ndim == 1:
            elements = elements[:, None]
        self.count, self.corners = elements.shape
        self.serial = runtime.serial(self.count, ns_per_item)
        self.gathered = channels > 0 and not self.serial
        self.bufs = []
        if not self.gathered:
            return
        # particle -> slots k e + c in element order; ids[p] is the p-th particle that appears
        flat = elements.ravel()
        order = np.argsort(flat, kind="stable")
        counts = np.bincount(flat)
        ids = np.nonzero(counts)[0]
        ptr = np.concatenate([[0], np.cumsum(counts[ids])])
        self.n_gather = len(ids)
        self.ids = field_pool.field(ti.i32, self.n_gather)
        self.ptr = field_pool.field(ti.i32, self.n_gather + 1)
        self.slot = field_pool.field(ti.i32, len(flat))
        self.bufs = [field_pool.vector(3, runtime.real(), shape=(self.count, self.corners))
                     for _ in range(channels)]
        write_fields([(self.ids, ids), (self.ptr, ptr), (self.slot, order)])

    @classmethod
    def items(cls, count: int, ns_per_item: float) -> "Scatter":
        """For a loop over ``count`` items that each write only their own entries."""
        return cls(np.arange(count), ns_per_item)

    @ti.func
    def add(self, ch: ti.template(), target: ti.template(), row, p, e, c, value):
        """Add ``value`` (a 3-vector) of corner ``c`` of element ``e`` into
        ``target[row, p]``, or into buffer ``ch`` for :meth:`gather`."""
        if ti.static(self.gathered):
            self.bufs[ch][e, c] = value
        else:
            target[row, p] += value

    @ti.func
    def gather(self, ch: ti.template(), target: ti.template(), row):
        """When gathered: add every particle's slots of buffer ``ch`` into ``target[row]``
        (call at the kernel's top level, after the element loop). Scalar sums: vector
        locals in a dynamic inner loop break Taichi's generated adjoints."""
        if ti.static(self.gathered):
            for j in range(self.n_gather):
                a0 = 0.0
                a1 = 0.0
                a2 = 0.0
                for q in range(self.ptr[j], self.ptr[j + 1]):
                    e = self.slot[q] // self.corners
                    c = self.slot[q] % self.corners
                    a0 += self.bufs[ch][e, c][0]
                    a1 += self.bufs[ch][e, c][1]
                    a2 += self.bufs[ch][e, c][2]
                k = self.ids[j]
                target[row, k] = target[row, k] + ti.Vector([a0, a1, a2])  # one j per particle

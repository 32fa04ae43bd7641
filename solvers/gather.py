"""Atomic-free accumulation for the parallel paths: which element slots name a particle.

A force model over elements (springs, tets) writes one value per element vertex into a
buffer; a second loop over the particles sums the slots that name each particle. The
order is fixed (element order), so results do not depend on the thread count.
"""

import numpy as np
import taichi as ti


class SlotGather:
    """CSR from particles to slots of ``elements [E, k]`` (particle ids): slot ``k e + c``
    is corner ``c`` of element ``e``. ``ids[p]`` is the p-th particle that appears, and its
    slots are ``slot[ptr[p]:ptr[p + 1]]`` in element order."""

    def __init__(self, elements):
        flat = np.asarray(elements, dtype=np.int64).ravel()
        order = np.argsort(flat, kind="stable")
        counts = np.bincount(flat)
        ids = np.nonzero(counts)[0]
        ptr = np.concatenate([[0], np.cumsum(counts[ids])])
        self.n = len(ids)
        self.ids = ti.field(ti.i32, self.n)
        self.ptr = ti.field(ti.i32, self.n + 1)
        self.slot = ti.field(ti.i32, len(flat))
        self.ids.from_numpy(ids.astype(np.int32))
        self.ptr.from_numpy(ptr.astype(np.int32))
        self.slot.from_numpy(order.astype(np.int32))

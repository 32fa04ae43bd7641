"""Damped springs between particle pairs."""

import numpy as np
import taichi as ti

from gradsim_taichi import runtime
from gradsim_taichi.params import Param, field_param


@ti.data_oriented
class Springs:
    """Hooke springs with dashpot damping along the spring:
    ``f = (ke (l - rest) + kd (v_rel . d)) d`` on the first end, the opposite on the second."""

    def __init__(self, ends, stiffness, damping, rest_length):
        real = runtime.real()
        self.count = len(ends)
        self.ends = ti.Vector.field(2, ti.i32, shape=self.count)
        self.ke = ti.field(real, self.count, needs_grad=True)
        self.kd = ti.field(real, self.count, needs_grad=True)
        self.rest = ti.field(real, self.count, needs_grad=True)
        self.ends.from_numpy(np.asarray(ends, dtype=np.int32))
        self.ke.from_numpy(np.asarray(stiffness, dtype=runtime.np_dtype()))
        self.kd.from_numpy(np.asarray(damping, dtype=runtime.np_dtype()))
        self.rest.from_numpy(np.asarray(rest_length, dtype=runtime.np_dtype()))

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

    @ti.kernel
    def apply(self, x: ti.template(), v: ti.template(), f: ti.template(), row: ti.i32):
        for s in range(self.count):
            i = self.ends[s][0]
            j = self.ends[s][1]
            d = x[row, j] - x[row, i]
            length = ti.sqrt(d.dot(d) + 1e-30)  # the tiny term keeps coincident ends finite
            direction = d / length
            speed = (v[row, j] - v[row, i]).dot(direction)
            magnitude = self.ke[s] * (length - self.rest[s]) + self.kd[s] * speed
            f[row, i] += magnitude * direction
            f[row, j] -= magnitude * direction

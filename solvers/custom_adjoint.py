"""Kernels with hand-written adjoints, callable like Taichi kernels with ``.grad``.

The Simulation runs ``kernel(...)`` forward and ``kernel.grad(...)`` backward. Where
Taichi's generated adjoint is slow (atomic adds into shared gradients) or does not
compile, a model pairs its forward kernel with an adjoint kernel of the same arguments.
"""


class WithAdjoint:
    """``forward(*args)`` when called; ``adjoint(*args)`` as ``.grad(*args)``."""

    def __init__(self, forward, adjoint):
        self._forward = forward
        self.grad = adjoint

    def __call__(self, *args):
        self._forward(*args)

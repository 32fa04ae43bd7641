"""Kernel launching: fast launches of the kernels a time loop calls thousands of times,
and kernels with hand-written adjoints (:class:`WithAdjoint`).

A Taichi kernel call costs ~25 us of Python work before the kernel runs (argument
mapping, template lookup, compile-cache lookup), more than many of a substep's kernels
take to run. A :class:`Launcher` does that work once per set of template arguments and
afterwards only sets the scalar arguments and launches: ~5 us per call. The first call
with new template arguments goes through Taichi's normal path (compiling, error
messages); so does every call in debug mode, where Taichi checks after each launch.
"""

import os

from taichi.lang import impl
from taichi.lang.kernel_impl import Kernel, _BoundedDifferentiableMethod
from taichi.types import primitive_types
from taichi.types.annotations import Template

from gradsim_taichi import runtime

# GRADSIM_TAICHI_SLOW_LAUNCH=1 sends every call through Taichi's normal path.
_DISABLED = os.environ.get("GRADSIM_TAICHI_SLOW_LAUNCH", "") not in ("", "0")


class Launcher:
    """``Launcher(kernel, owner)(*args)`` runs ``kernel`` like ``owner.kernel(*args)``.

    Only fields / data-oriented objects (template arguments) and int / float scalars are
    supported as arguments; a kernel with other argument kinds always takes the normal
    path.
    """

    def __init__(self, kernel: Kernel, owner=None):
        self.kernel = kernel
        self.prefix = () if owner is None else (owner,)
        self.template_pos = []
        self.scalars = []  # (argument position, setter name)
        supported = True
        for pos, arg in enumerate(kernel.arguments):
            ann = arg.annotation
            if isinstance(ann, Template):
                self.template_pos.append(pos)
            elif id(ann) in primitive_types.real_type_ids or ann is float:
                self.scalars.append((pos, "set_arg_float"))
            elif id(ann) in primitive_types.integer_type_ids or ann is int:
                self.scalars.append((pos, "set_arg_int"))
            else:
                supported = False
        self.fast = supported and not _DISABLED
        self._cache: dict = {}

    def __call__(self, *args):
        full = self.prefix + args
        if not self.fast or runtime.debug():
            return self.kernel(*full)
        key = tuple(id(full[p]) for p in self.template_pos)
        entry = self._cache.get(key)
        if entry is None:
            self.kernel(*full)  # compiles and runs through Taichi's own path
            self._cache[key] = self._prepare(full)
            return None
        t_kernel, compiled, _keepalive = entry
        ctx = t_kernel.make_launch_context()
        for index, (pos, setter) in enumerate(self.scalars):
            getattr(ctx, setter)((index,), full[pos])
        impl.get_runtime().prog.launch_kernel(compiled, ctx)
        return None

    def _prepare(self, full):
        prog = impl.get_runtime().prog
        key = self.kernel.ensure_compiled(*full)
        t_kernel = self.kernel.compiled_kernels[key]
        compiled = prog.compile_kernel(prog.config(), prog.get_device_caps(), t_kernel)
        # keep the template arguments alive: the cache is keyed by their ids
        return t_kernel, compiled, tuple(full[p] for p in self.template_pos)


class WithAdjoint:
    """``forward(*args)`` when called; ``adjoint(*args)`` as ``.grad(*args)``: a kernel
    with a hand-written adjoint, callable like a Taichi kernel with ``.grad``. Where
    Taichi's generated adjoint is slow (atomic adds into shared gradients) or does not
    compile, a model pairs its forward kernel with an adjoint kernel of the same arguments.
    """

    def __init__(self, forward, adjoint):
        self._forward = forward
        self.grad = adjoint

    def __call__(self, *args):
        self._forward(*args)


class FastKernel:
    """A kernel callable with ``.grad``, both launched through :class:`Launcher`s.

    Wraps a bound kernel of a data-oriented object (its ``.grad`` being Taichi's
    generated adjoint) or a :class:`WithAdjoint` pair (its hand-written adjoint)."""

    def __init__(self, kernel):
        if isinstance(kernel, WithAdjoint):
            forward, adjoint = kernel._forward, kernel.grad
            self._forward = _launcher(forward)
            self.grad = _launcher(adjoint)
        elif isinstance(kernel, _BoundedDifferentiableMethod):
            owner = kernel._kernel_owner
            self._forward = Launcher(kernel._primal, owner)
            self.grad = Launcher(kernel._adjoint, owner)
        else:
            raise TypeError(f"cannot launch {kernel!r} fast: not a Taichi kernel")

    def __call__(self, *args):
        self._forward(*args)


def _launcher(bound):
    if isinstance(bound, _BoundedDifferentiableMethod):
        return Launcher(bound._primal, bound._kernel_owner)
    return bound  # anything else (a plain function) is called as it is

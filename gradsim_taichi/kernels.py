"""Kernel launching: fast launches of the kernels a time loop calls thousands of times,
kernels with hand-written adjoints (:class:`WithAdjoint`), and copies between fields and
torch tensors that stay on the engine's device (:func:`field_to_torch`,
:func:`torch_to_field`).

A Taichi kernel call costs ~25 us of Python work before the kernel runs (argument
mapping, template lookup, compile-cache lookup), more than many of a substep's kernels
take to run. A :class:`Launcher` does that work once per set of template arguments and
afterwards only sets the scalar arguments and launches: ~5 us per call. The first call
with new template arguments goes through Taichi's normal path (compiling, error
messages); so does every call in debug mode, where Taichi checks after each launch.
"""

import os

import numpy as np
import taichi as ti
import torch
from taichi.lang import impl
from taichi.lang.kernel_impl import Kernel, _BoundedDifferentiableMethod
from taichi.lang.util import to_numpy_type, to_pytorch_type
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


# ---- torch <-> field copies -----------------------------------------------------------
# Taichi's own field.to_torch() / from_torch() call ti.sync() after the copy (a host
# wait on CUDA); these copy through a kernel with the tensor as an ndarray argument
# (zero-copy: the kernel reads or writes the tensor's memory on its device, CPU or CUDA)
# and do not wait. Scalar and vector fields; a tensor has the field's shape (plus the
# vector axis), a 0-d scalar field is copied through a tensor of shape (1,).

@ti.kernel
def _field_to_array(field: ti.template(), arr: ti.types.ndarray()):
    if ti.static(len(field.shape) == 0 and not hasattr(field, "n")):
        arr[0] = field[None]
    else:
        for I in ti.grouped(field):
            if ti.static(hasattr(field, "n")):
                for j in ti.static(range(field.n)):
                    arr[I, j] = field[I][j]
            else:
                arr[I] = field[I]


@ti.kernel
def _array_to_field(arr: ti.types.ndarray(), field: ti.template()):
    if ti.static(len(field.shape) == 0 and not hasattr(field, "n")):
        field[None] = arr[0]
    else:
        for I in ti.grouped(field):
            if ti.static(hasattr(field, "n")):
                for j in ti.static(range(field.n)):
                    field[I][j] = arr[I, j]
            else:
                field[I] = arr[I]


def field_shape(field) -> tuple:
    """The shape of a scalar or vector field as a tensor: ``field.shape`` plus the vector
    axis."""
    if getattr(field, "m", 1) != 1:
        raise TypeError(f"matrix fields are not supported here (got {field.n}x{field.m})")
    return tuple(field.shape) + ((field.n,) if hasattr(field, "n") else ())


def _array_shape(field) -> tuple:
    shape = field_shape(field)
    return shape if shape else (1,)


def field_to_torch(field) -> torch.Tensor:
    """A new tensor on the engine's device (:func:`runtime.torch_device`) holding the
    values of ``field`` (:func:`field_shape`), copied by a kernel, no host round trip."""
    out = torch.empty(_array_shape(field), dtype=to_pytorch_type(field.dtype),
                      device=runtime.torch_device())
    _field_to_array(field, out)
    return out.reshape(field_shape(field))


def torch_to_field(values: torch.Tensor, field) -> None:
    """Write ``values`` (the field's dtype and :func:`field_shape`, on the engine's device)
    into ``field`` with a kernel, no host round trip."""
    shape = field_shape(field)
    if tuple(values.shape) != shape:
        raise ValueError(f"a tensor of shape {tuple(values.shape)} does not fit a field of "
                         f"shape {shape}")
    dtype = to_pytorch_type(field.dtype)
    if values.dtype != dtype:
        raise TypeError(f"a tensor of dtype {values.dtype} does not fit a field of {dtype}")
    # (detached: Taichi gives a tensor that requires grad a .grad of zeros)
    _array_to_field(values.detach().contiguous().reshape(_array_shape(field)), field)


# ---- many fields in one kernel --------------------------------------------------------
# Taichi's field.fill / from_numpy compile a kernel for each field they touch (~70 ms
# each on a cold kernel cache; a rigid model has some 40 fields). These do the same for a
# whole set of fields in one kernel, compiled once per set (~20 ms a field): the set's
# owner (a model, its gradients) keeps it, so later calls only launch.

@ti.func
def _flat_index(I, shape: ti.template()):
    index = 0
    for d in ti.static(range(len(shape))):
        index = index * shape[d] + I[d]
    return index


@ti.kernel
def _zero(fields: ti.template()):
    for k in ti.static(range(len(fields))):
        for I in ti.grouped(fields[k]):
            fields[k][I] = ti.zero(fields[k][I])


@ti.kernel
def _write(fields: ti.template(), starts: ti.template(), flat: ti.types.ndarray()):
    for k in ti.static(range(len(fields))):
        for I in ti.grouped(fields[k]):
            if ti.static(_components(fields[k]) == 0):  # a scalar field
                fields[k][I] = flat[starts[k] + _flat_index(I, fields[k].shape)]
            else:
                at = starts[k] + _flat_index(I, fields[k].shape) * ti.static(_components(fields[k]))
                if ti.static(fields[k].ndim == 1):
                    for j in ti.static(range(fields[k].n)):
                        fields[k][I][j] = flat[at + j]
                else:
                    for i, j in ti.static(ti.ndrange(fields[k].n, fields[k].m)):
                        fields[k][I][i, j] = flat[at + i * fields[k].m + j]


@ti.kernel
def _read(fields: ti.template(), starts: ti.template(), flat: ti.types.ndarray()):
    for k in ti.static(range(len(fields))):
        for I in ti.grouped(fields[k]):
            if ti.static(_components(fields[k]) == 0):
                flat[starts[k] + _flat_index(I, fields[k].shape)] = fields[k][I]
            else:
                at = starts[k] + _flat_index(I, fields[k].shape) * ti.static(_components(fields[k]))
                if ti.static(fields[k].ndim == 1):
                    for j in ti.static(range(fields[k].n)):
                        flat[at + j] = fields[k][I][j]
                else:
                    for i, j in ti.static(ti.ndrange(fields[k].n, fields[k].m)):
                        flat[at + i * fields[k].m + j] = fields[k][I][i, j]


def _components(field) -> int:
    """Values per element of a vector or matrix field; 0 for a scalar field."""
    return field.n * field.m if hasattr(field, "n") else 0


# fields per kernel: Taichi warns past 32 unrolled iterations of a static loop
FIELDS_PER_KERNEL = 32


def _batches(items, dtype_of):
    """``items`` in lists of at most FIELDS_PER_KERNEL that share ``dtype_of(item)``."""
    groups: dict = {}
    for item in items:
        groups.setdefault(dtype_of(item), []).append(item)
    for dtype, group in groups.items():
        for k in range(0, len(group), FIELDS_PER_KERNEL):
            yield dtype, group[k:k + FIELDS_PER_KERNEL]


def zero_fields(fields) -> None:
    """Set every field of ``fields`` (scalar, vector or matrix fields) to zero, with one
    kernel per 32 fields."""
    for _, batch in _batches(fields, lambda f: None):
        _zero(tuple(batch))


def _array_shape_of(field) -> tuple:
    """What ``field.to_numpy()`` gives: the field's shape plus its vector or matrix axes."""
    return tuple(field.shape) + ((field.n,) if hasattr(field, "n") else ()) + (
        (field.m,) if getattr(field, "ndim", 1) == 2 else ())


def _starts(sizes) -> tuple:
    return tuple(np.cumsum([0, *sizes[:-1]]).tolist())


def read_fields(fields) -> list[np.ndarray]:
    """``[field.to_numpy() for field in fields]``, with one kernel per field dtype and 32
    fields."""
    fields = list(fields)
    out: list = [None] * len(fields)
    dtype_of = lambda k: to_numpy_type(fields[k].dtype)  # noqa: E731
    for dtype, ks in _batches(range(len(fields)), dtype_of):
        shapes = [_array_shape_of(fields[k]) for k in ks]
        sizes = [int(np.prod(shape, dtype=np.int64)) for shape in shapes]
        starts = _starts(sizes)
        flat = np.empty(sum(sizes), dtype=dtype)
        _read(tuple(fields[k] for k in ks), starts, flat)
        for k, at, size, shape in zip(ks, starts, sizes, shapes):
            out[k] = flat[at:at + size].reshape(shape)
    return out


def write_fields(pairs) -> None:
    """Write each ``(field, values)`` of ``pairs`` (values: an array of the field's shape,
    plus its vector or matrix axes), as ``field.from_numpy(values)`` does, with one kernel
    per field dtype and 32 fields."""
    checked = []
    for field, values in pairs:
        values = np.asarray(values)
        want = _array_shape_of(field)
        if values.shape != want and not (values.size == 1 and want in ((), (1,))):
            raise ValueError(f"values of shape {values.shape} do not fit a field of shape "
                             f"{want}")
        checked.append((field, values))
    for dtype, batch in _batches(checked, lambda pair: to_numpy_type(pair[0].dtype)):
        flat = np.concatenate([np.asarray(v, dtype=dtype).ravel() for _, v in batch])
        _write(tuple(f for f, _ in batch), _starts([v.size for _, v in batch]), flat)

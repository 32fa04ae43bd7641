"""Learnable parameters by name: one ``Param`` per named quantity of a model.

A ``Param`` knows its full shape, how to write values into the Taichi fields that
hold it and how to read back the gradient a backward pass accumulated there. Values and
gradients cross as torch tensors on the engine's device (``runtime.torch_device()``,
``runtime.torch_dtype()``), copied by kernels: no numpy, no host round trip.
Broadcasting (a global mass for every particle, one stiffness for every spring)
is done in torch before the values reach the engine, so torch's autograd sums
the per-element gradients back to the shape the user gave.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import field as dataclass_field

import numpy as np
import torch

from gradsim_taichi import field_pool, runtime
from gradsim_taichi.kernels import (
    field_shape,
    field_to_torch,
    torch_to_field,
    write_fields,
    zero_fields,
)


@dataclass
class Param:
    """A named, learnable model quantity.

    Attributes:
        name: the public name (``"mass"``, ``"contact_mu"``, ...).
        shape: the full shape the engine stores (e.g. ``(N,)`` for per-particle mass).
        doc: one line saying what it is, with units.
        setter: writes values of ``shape`` into the engine: a torch tensor of the engine's
            dtype and device (array-likes are converted, see :func:`engine_tensor`).
        getter: reads the current value, a tensor of ``shape`` on the engine's device.
        grad_getter: reads the gradient of the last backward pass, likewise.
        positive: values must be > 0 (masses, stiffnesses, lengths).
        nonnegative: values must be >= 0 (damping, friction).
        owner: the object whose fields hold the values (made inside
            :func:`~gradsim_taichi.field_pool.owned_by`), kept alive while the Param is:
            its fields then go to no other model.
    """

    name: str
    shape: tuple
    doc: str
    setter: Callable[[torch.Tensor], None]
    getter: Callable[[], torch.Tensor]
    grad_getter: Callable[[], torch.Tensor]
    positive: bool = False
    nonnegative: bool = False
    owner: object = dataclass_field(default_factory=field_pool.current_owner, repr=False,
                                    compare=False)

    def check_values(self, values: torch.Tensor) -> None:
        """Raise ValueError for NaN/inf, or for signs the parameter does not allow.

        One host sync when the values are good (a single flag is read back); the message
        is worked out only when they are not."""
        ok = torch.isfinite(values).all()
        if (self.positive or self.nonnegative) and values.numel():
            ok = ok & (values.min() > 0 if self.positive else values.min() >= 0)
        if bool(ok):
            return
        finite = torch.isfinite(values)
        if not bool(finite.all()):
            bad = torch.nonzero(~finite)[:3].tolist()
            raise ValueError(f"parameter '{self.name}' contains NaN or inf (at {bad})")
        low = values.min().item()
        if self.positive:
            raise ValueError(
                f"parameter '{self.name}' must be > 0 everywhere; got minimum {low:.6g}"
            )
        raise ValueError(
            f"parameter '{self.name}' must be >= 0 everywhere; got minimum {low:.6g}"
        )


def engine_tensor(values) -> torch.Tensor:
    """``values`` (a tensor, array or number) as a tensor of the engine's dtype on its
    device; a tensor already there is returned as it is (no copy)."""
    return torch.as_tensor(values, dtype=runtime.torch_dtype(), device=runtime.torch_device())


def field_param(name, field, doc, shape=None, positive=False, nonnegative=False) -> Param:
    """A Param stored in one Taichi field with ``needs_grad=True``."""
    full = tuple(shape) if shape is not None else field_shape(field)
    stored = field_shape(field)

    def setter(values):
        torch_to_field(engine_tensor(values).reshape(stored), field)

    def getter():
        return field_to_torch(field).reshape(full)

    def grad_getter():
        return field_to_torch(field.grad).reshape(full)

    return Param(name, full, doc, setter, getter, grad_getter, positive, nonnegative)


class Learnable:
    """Mixin for a class holding learnable quantities: each is declared once, where its
    field is made, and :meth:`params` / :meth:`zero_grads` come from the declarations (in
    declaration order)."""

    def learnable(self, name, values, doc, n=None, positive=False, nonnegative=False):
        """A new ``needs_grad`` field of the current precision for ``values`` (``n``: a
        vector field whose last axis is ``values``' last axis), declared as the parameter
        ``name``. Returns the field; it holds ``values`` after :meth:`fill_learnables`.

        Create every field of an object before filling any: Taichi places the fields
        made before a kernel launch (``from_numpy`` is one) in one tree, and a kernel over
        fields scattered across many trees ran 40% slower (FEM adjoint, 1200 tets)."""
        values = np.asarray(values, dtype=runtime.np_dtype())
        if n is None:
            field = field_pool.field(runtime.real(), values.shape, needs_grad=True)
        else:
            field = field_pool.vector(n, runtime.real(), values.shape[:-1], needs_grad=True)
        self.__dict__.setdefault("_unfilled", []).append((field, values))
        return self.learnable_field(name, field, doc, positive=positive,
                                    nonnegative=nonnegative)

    def fill_learnables(self, others=()) -> None:
        """Write the values of the fields :meth:`learnable` made since the last call, and
        the ``(field, values)`` pairs ``others``, in one kernel per field dtype
        (:func:`~gradsim_taichi.kernels.write_fields`)."""
        write_fields([*self.__dict__.pop("_unfilled", []), *others])

    def learnable_field(self, name, field, doc, shape=None, positive=False,
                        nonnegative=False):
        """Declare an existing ``needs_grad`` field as the parameter ``name``; returns it."""
        self.declare(field_param(name, field, doc, shape, positive, nonnegative), field)
        return field

    def declare(self, param: Param, field=None) -> None:
        """Declare a parameter; ``field``: the field whose ``.grad`` :meth:`zero_grads`
        clears (None for parameters whose gradient is computed elsewhere). Declaring a
        name again (a re-allocation) replaces it in place."""
        if "_learnables" not in self.__dict__:
            self._learnables = {}
        self._learnables[param.name] = (param, field)

    def params(self) -> list[Param]:
        return [p for p, _ in self.__dict__.get("_learnables", {}).values()]

    def learnable_fields(self) -> list:
        return [f for _, f in self.__dict__.get("_learnables", {}).values() if f is not None]

    def learnable_grads(self) -> list:
        """The gradient fields :meth:`zero_grads` clears."""
        return [f.grad for f in self.learnable_fields()]

    def zero_grads(self) -> None:
        zero_fields(self.learnable_grads())


class ParamSet:
    """The named parameters of a simulation, with helpful errors for unknown names."""

    def __init__(self, params: list[Param] | None = None):
        self._params: dict[str, Param] = {}
        for p in params or []:
            self.add(p)

    def add(self, param: Param) -> None:
        if param.name in self._params:
            raise ValueError(f"parameter name '{param.name}' is registered twice")
        self._params[param.name] = param

    def names(self) -> list[str]:
        return list(self._params)

    def __contains__(self, name) -> bool:
        return name in self._params

    def __getitem__(self, name: str) -> Param:
        if name not in self._params:
            raise KeyError(
                f"unknown parameter '{name}'; valid names: {', '.join(sorted(self._params))}"
            )
        return self._params[name]

    def __iter__(self):
        return iter(self._params.values())

    def describe(self) -> str:
        """A table of name, shape and doc for every parameter."""
        rows = [f"{p.name:<24} {str(p.shape):<16} {p.doc}" for p in self]
        return "\n".join(rows)


def as_full_tensor(param: Param, value) -> torch.Tensor:
    """Check dtype/device and broadcast ``value`` to the parameter's full shape (in torch,
    so autograd reduces the gradient back to the user's shape)."""
    dtype, device = runtime.torch_dtype(), runtime.torch_device()
    if not isinstance(value, torch.Tensor):
        value = torch.as_tensor(value, dtype=dtype, device=device)
    if value.dtype != dtype:
        raise TypeError(
            f"parameter '{param.name}' has dtype {value.dtype}, but the engine runs in "
            f"{dtype} (gradsim_taichi.init(precision=...)); convert it with .to({dtype})"
        )
    if value.device.type != device.type:
        raise TypeError(
            f"parameter '{param.name}' is on {value.device}, but the engine expects tensors "
            f"on {device}"
        )
    try:
        return value.expand(param.shape)
    except RuntimeError:
        raise ValueError(
            f"parameter '{param.name}' has shape {tuple(value.shape)}, which does not "
            f"broadcast to its full shape {param.shape}"
        ) from None

"""The contract of a particle force model and the registry of the engine's force models.

Every registered force model gets the parametrised tests of tests/test_force_models.py
(forward against a small numpy reference, adjoint against float64 central differences,
serial and parallel), which fail for a model without a reference there.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any, Protocol, runtime_checkable

from gradsim_taichi.params import Learnable


@runtime_checkable
class ForceModel(Protocol):
    """A particle force model: adds its forces into the shared particle force field.

    ``apply(x, v, f, row)`` (or ``apply(x, v, f, row, frame)`` when ``per_frame``) is a
    kernel adding the forces of substep ``row`` into ``f[row]``; ``apply.grad`` with the
    same arguments is its adjoint (Taichi's or a
    :class:`~gradsim_taichi.kernels.WithAdjoint`). Loops over elements add through a
    :class:`~gradsim_taichi.solvers.scatter.Scatter` (``scatter``), which picks the serial
    or parallel path. ``params`` / ``zero_grads`` come from
    :class:`~gradsim_taichi.params.Learnable`.
    """

    per_frame: bool
    apply: Any
    scatter: Any

    def allocate(self, rows: int, frames: int) -> None:
        """Size per-substep / per-frame storage (called once, before the first rollout)."""

    def state_bytes(self) -> int:
        """Bytes of per-substep values kept for the adjoint (optional: ``row_bytes``, the
        bytes per substep row, lets ``Simulation(checkpoint="auto")`` size full storage)."""

    def params(self) -> list:
        """The learnable parameters (:class:`~gradsim_taichi.params.Param`)."""

    def zero_grads(self) -> None:
        """Zero the gradients of the learnable fields."""


class ForceModelBase(Learnable):
    """Defaults of the :class:`ForceModel` members a force model may not need."""

    per_frame = False

    def allocate(self, rows: int, frames: int) -> None:
        pass

    def state_bytes(self) -> int:
        return 0

    def row_bytes(self) -> int:
        return 0


FORCE_MODELS = {
    "springs": "gradsim_taichi.solvers.springs:Springs",
    "cloth_triangles": "gradsim_taichi.solvers.cloth_triangles:ClothTriangles",
    "bending": "gradsim_taichi.solvers.bending:Bending",
    "aerodynamics": "gradsim_taichi.solvers.aerodynamics:Aerodynamics",
    "fem_tets": "gradsim_taichi.solvers.fem_tets:TetFEM",
}


def force_models() -> dict[str, type]:
    """The registered force model classes by name (imported on demand)."""
    out = {}
    for name, where in FORCE_MODELS.items():
        module, cls = where.split(":")
        out[name] = getattr(import_module(module), cls)
    return out

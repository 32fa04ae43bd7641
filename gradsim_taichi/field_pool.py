"""The fields of a garbage-collected model, handed to the next model of the same structure.

Taichi compiles a kernel for the very fields it reads (their ids are in its IR and so in
its compile-cache key) and never frees a field. A model built again with the same
structure (the next test, batch item or restart, a scene built again after a change) got
new fields and compiled every kernel again: ~1.5 s per small rigid model with a warm
kernel cache, ~10 s with a cold one, where its simulation takes milliseconds.

Fields made with :func:`field`, :func:`vector` and :func:`matrix` inside
``with owned_by(owner):`` belong to ``owner`` (a :class:`~gradsim_taichi.model.Model`).
When the owner is garbage-collected they go back to the pool, in the order they were made;
the next owner that asks for fields of the same kind, dtype, shape and gradient, in the
same order, gets those fields back, zeroed with their gradients, so its kernels are the
ones already compiled. An owner of a known ``structure`` (what :func:`owned_by` was
given: a model's builder says what decides its fields' shapes) takes the newest released
list of its own structure, else one of no known structure, and never one of another
structure: such a list would match only up to where the two differ (a few per-body
fields, too few to spare a compile), and the model it was made for, built again, would
find it split. Its first request that differs ends the reuse for that owner: its
remaining fields are new (and share one field tree, as without the pool). Outside an
owner, and with ``GRADSIM_TAICHI_NO_FIELD_POOL=1``, these functions are Taichi's own.

Whatever must not outlive the owner's fields holds the owner: a
:class:`~gradsim_taichi.params.Param` made inside ``owned_by`` keeps its owner alive.
"""

from __future__ import annotations

import gc
import os
import weakref
from contextlib import contextmanager

import taichi as ti

from gradsim_taichi import kernels, runtime

_DISABLED = os.environ.get("GRADSIM_TAICHI_NO_FIELD_POOL", "") not in ("", "0")

# the fields of dead owners, newest last: (runtime generation, structure, [(key, field),
# ...]); a list of an earlier Taichi (before the last init) is never taken: its fields
# are gone
_released: list = []
_owners: list = []  # the owners allocating now (innermost last) and their records
_records = weakref.WeakSet()  # the records of owners not collected yet (live or garbage)


class _Record:
    """An owner's fields in the order made, and the released list it is reusing."""

    def __init__(self, structure):
        self.structure = structure
        self.generation = runtime.generation()
        self.fields: list = []
        self.reused: list | None = None
        self.cursor = 0
        self.reusing = True


@contextmanager
def owned_by(owner, structure=None):
    """Fields made inside (with this module's functions) belong to ``owner`` and return to
    the pool when it is garbage-collected. ``owner`` may enter several times (a model's
    constructor, then its ``allocate``): its fields form one sequence. ``structure`` (any
    hashable, given at the first entry; None: unknown) names what decides the fields'
    shapes: owners of equal structures are handed each other's fields first."""
    record = owner.__dict__.get("_field_pool_record")
    if record is None:
        record = owner._field_pool_record = _Record(structure)
        _records.add(record)
        weakref.finalize(owner, _release, runtime.generation(), structure, record.fields)
    _owners.append((owner, record))
    try:
        yield
    finally:
        _owners.pop()


def current_owner():
    """The innermost owner allocating now, or None."""
    return _owners[-1][0] if _owners else None


def field(dtype, shape, needs_grad: bool = False):
    """``ti.field(dtype, shape, needs_grad=...)``, from the pool inside :func:`owned_by`."""
    return _make(("scalar", str(dtype), _shape(shape), needs_grad),
                 lambda: ti.field(dtype, shape, needs_grad=needs_grad))


def vector(n: int, dtype, shape, needs_grad: bool = False):
    """``ti.Vector.field(n, dtype, shape, needs_grad=...)``, from the pool inside
    :func:`owned_by`."""
    return _make(("vector", n, str(dtype), _shape(shape), needs_grad),
                 lambda: ti.Vector.field(n, dtype, shape, needs_grad=needs_grad))


def matrix(n: int, m: int, dtype, shape, needs_grad: bool = False):
    """``ti.Matrix.field(n, m, dtype, shape, needs_grad=...)``, from the pool inside
    :func:`owned_by`."""
    return _make(("matrix", n, m, str(dtype), _shape(shape), needs_grad),
                 lambda: ti.Matrix.field(n, m, dtype, shape, needs_grad=needs_grad))


def _shape(shape) -> tuple:
    return (int(shape),) if isinstance(shape, int) else tuple(int(s) for s in shape)


def _make(key, new):
    if _DISABLED or not _owners:
        return new()
    record = _owners[-1][1]
    made = _reuse(record, key)
    if made is None:
        made = new()
    record.fields.append((key, made))
    return made


def _reuse(record: _Record, key):
    """The next field of the released list ``record`` reuses when it is of ``key``; None
    (and no reuse for the rest of this owner) otherwise."""
    if not record.reusing:
        return None
    if record.reused is None:
        record.reused = _take_released(key, record.structure)
        if record.reused is None:
            record.reusing = False
            return None
        _zero_all(record.reused)
    if record.cursor >= len(record.reused) or record.reused[record.cursor][0] != key:
        record.reusing = False
        rest = record.reused[record.cursor:]
        if rest:  # still dead fields: another owner may start with them
            _released.append((runtime.generation(), None, rest))
        return None
    made = record.reused[record.cursor][1]
    record.cursor += 1
    return made


def _zero_all(released: list) -> None:
    """Zero a released list's fields and their gradients, as new fields are
    (:func:`kernels.zero_fields`: 32 to a kernel): all of them, before the owner writes
    into the first (the few it may not take go back to the pool and are zeroed again when
    taken)."""
    fields = []
    for _, made in released:
        fields.append(made)
        grad = getattr(made, "grad", None)
        if grad is not None and grad.snode.ptr is not None:  # else never placed, so zero
            fields.append(grad)
    kernels.zero_fields(fields)


def _take_released(first_key, structure):
    """The newest released list that starts with ``first_key``, removed from the pool: for
    an owner of a known ``structure`` one released by an owner of that structure, else one
    of no known structure; for an owner of no known structure any."""
    for attempt in range(2):
        generation = runtime.generation()
        _released[:] = [r for r in _released if r[0] == generation]
        starts = [k for k, r in enumerate(_released) if r[2][0][0] == first_key
                  and (structure is None or r[1] in (None, structure))]
        same = [k for k in starts if structure is not None and _released[k][1] == structure]
        if same or starts:
            return _released.pop((same or starts)[-1])[2]
        if attempt == 0 and _collectable(generation, first_key, structure):
            # dead models sit in reference cycles (kernels bound to their systems) until
            # the cycle collector runs: run it now (0.1-0.2 s) rather than compile again
            # (seconds), but only when an owner not collected yet made such a list
            gc.collect()
    return None


def _collectable(generation, first_key, structure) -> bool:
    """Whether an owner not yet collected (alive, or garbage in a reference cycle) made
    fields that, released, ``_take_released`` would take."""
    return any(r.generation == generation and r.fields and r.fields[0][0] == first_key
               and (structure is None or r.structure in (None, structure))
               for r in list(_records))


def _release(generation: int, structure, fields: list) -> None:
    """An owner was collected: its fields (of a live Taichi) go back to the pool."""
    if fields and generation == runtime.generation():
        _released.append((generation, structure, list(fields)))

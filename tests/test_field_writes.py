"""kernels.write_fields / read_fields / zero_fields: many fields written, read or zeroed by
one kernel give what Taichi's own from_numpy / to_numpy / fill give, field by field."""

import numpy as np
import pytest
import taichi as ti

import gradsim_taichi as gs
from gradsim_taichi.kernels import read_fields, write_fields, zero_fields


def fields_and_values(real, rng):
    fields = [ti.field(real, ()), ti.field(real, (5,)), ti.Vector.field(3, real, (4, 2)),
              ti.Matrix.field(3, 2, real, (2,)), ti.field(ti.i32, (6,)),
              ti.Vector.field(4, real, ()), ti.Vector.field(2, real, (3,), needs_grad=True)]
    values = [rng.normal(size=()), rng.normal(size=5), rng.normal(size=(4, 2, 3)),
              rng.normal(size=(2, 3, 2)), rng.integers(-9, 9, size=6), rng.normal(size=4),
              rng.normal(size=(3, 2))]
    return fields, values


@pytest.mark.parametrize("precision", [pytest.param(p, marks=pytest.mark.precision(p))
                                       for p in ("f64", "f32")])
def test_written_fields_hold_what_from_numpy_writes(precision):
    assert gs.info()["precision"] == precision
    real = gs.runtime.real()
    rng = np.random.default_rng(3)
    ours, values = fields_and_values(real, rng)
    theirs, _ = fields_and_values(real, rng)
    write_fields(zip(ours, values))
    for field, v in zip(theirs, values):
        if field.shape == ():  # (Taichi's from_numpy takes no 0-d fields)
            field[None] = v.tolist()
        else:
            field.from_numpy(np.asarray(v, dtype=field.to_numpy().dtype))
    for a, b, read in zip(ours, theirs, read_fields(ours), strict=True):
        np.testing.assert_array_equal(a.to_numpy(), b.to_numpy())
        assert a.to_numpy().any()
        assert read.dtype == b.to_numpy().dtype
        np.testing.assert_array_equal(read, b.to_numpy())
    ours[-1].grad.fill(1.0)
    zero_fields([*ours, ours[-1].grad])
    for field in [*ours, ours[-1].grad]:
        assert not field.to_numpy().any()


def test_values_that_do_not_fit_are_named():
    field = ti.Vector.field(3, gs.runtime.real(), (4,))
    with pytest.raises(ValueError, match=r"values of shape \(4, 2\) do not fit a field of "
                                         r"shape \(4, 3\)"):
        write_fields([(field, np.zeros((4, 2)))])


def test_more_fields_than_one_kernel_takes(recwarn):
    from gradsim_taichi.kernels import FIELDS_PER_KERNEL

    n = FIELDS_PER_KERNEL + 5
    fields = [ti.field(gs.runtime.real(), (k + 1,)) for k in range(n)]
    write_fields((f, np.arange(1.0, k + 2.0)) for k, f in enumerate(fields))
    for k, (f, got) in enumerate(zip(fields, read_fields(fields), strict=True)):
        np.testing.assert_array_equal(got, np.arange(1.0, k + 2.0))
        np.testing.assert_array_equal(f.to_numpy(), got)
    zero_fields(fields)
    assert not any(f.to_numpy().any() for f in fields)
    assert not [w for w in recwarn if "unroll" in str(w.message)]

"""Tensors in and out of the engine: parameters, outputs and gradients cross as tensors on
the engine's device and dtype (``runtime.torch_device()`` / ``torch_dtype()``), copied by
kernels, never through numpy; the parameter checks read back one flag per parameter."""

import numpy as np
import pytest
import taichi as ti
import torch
from taichi.lang.field import Field, ScalarField
from taichi.lang.matrix import MatrixField

import gradsim_taichi as gs
from gradsim_taichi import runtime
from gradsim_taichi.kernels import field_to_torch, torch_to_field


def _model():
    """Particles on springs, a soft tet and a rigid box over the ground: every kind of
    parameter setter (fields, initial state, lumped density, quaternions)."""
    b = gs.ModelBuilder(contact_ke=1e3, contact_kd=5.0, contact_kf=10.0, contact_mu=0.5)
    ids = b.add_particles([[0.0, 0.03, 0.0], [0.1, 0.05, 0.0], [0.0, 0.04, 0.1]],
                          velocities=[0.2, -0.5, 0.1], mass=0.05)
    b.add_springs([(ids[0], ids[1]), (ids[1], ids[2])], stiffness=30.0, damping=0.1)
    tet = ([[0.5, 0.02, 0.0], [0.6, 0.02, 0.0], [0.5, 0.12, 0.0], [0.5, 0.02, 0.1]],
           [[0, 1, 2, 3]])
    b.add_soft_mesh(*tet, density=2000.0, mu=500.0, lam=500.0, damping=1.0)
    b.add_rigid_box((0.1, 0.1, 0.1), mass=0.5, position=(-0.5, 0.06, 0.0),
                    orientation=(0.98, 0.1, 0.15, 0.05), velocity=(0.3, -0.5, 0.1))
    return b.finalize()


def _params(sim, requires_grad=True):
    dtype, device = runtime.torch_dtype(), runtime.torch_device()
    values = {name: torch.as_tensor(sim.get_param(name), dtype=dtype, device=device)
              for name in ("mass", "initial_position", "initial_velocity", "gravity",
                           "contact_mu", "spring_stiffness", "density", "body_mass",
                           "body_orientation", "body_velocity")}
    return {k: v.clone().requires_grad_(requires_grad) for k, v in values.items()}


def _loss(out):
    return sum((o * (1.0 + torch.arange(o.numel(), dtype=o.dtype, device=o.device)
                     .reshape(o.shape) % 7)).sum() for o in out.values())


@pytest.mark.cuda
# (f64 outputs and gradients on the engine's device are every other test's; f32 is this one's)
@pytest.mark.parametrize("precision", [
    pytest.param("f64", marks=[pytest.mark.precision("f64"), pytest.mark.slow]),
    pytest.param("f32", marks=pytest.mark.precision("f32"))])
def test_outputs_and_gradients_follow_the_engine(precision):
    assert gs.info()["precision"] == precision
    sim = gs.Simulation(_model(), frames=3, substeps=8)
    params = _params(sim)
    out = gs.simulate(sim, params)
    assert set(out) == {"particles", "particles_velocity", "rigid"}
    for name, o in out.items():
        assert o.device == runtime.torch_device(), name
        assert o.dtype == runtime.torch_dtype(), name
        assert o.requires_grad, name
    _loss(out).backward()
    for name, p in params.items():
        assert p.grad is not None, name
        assert p.grad.device == runtime.torch_device() and p.grad.dtype == runtime.torch_dtype()
        assert p.grad.shape == p.shape, name
        assert torch.isfinite(p.grad).all() and p.grad.abs().max() > 0, name
    # the tensor forms of the Simulation API on the engine's device as well
    outs = sim.forward_tensors()
    assert all(o.device == runtime.torch_device() and o.dtype == runtime.torch_dtype()
               for o in outs.values())
    sim.backward({k: torch.ones_like(v) for k, v in outs.items()})
    g = sim.param_grad_tensor("body_mass")
    assert g.device == runtime.torch_device() and g.dtype == runtime.torch_dtype()
    np.testing.assert_array_equal(sim.param_grad("body_mass"), g.cpu().numpy())


@pytest.mark.slow  # a guard on the transfer path; the transfers' results: the tests above
def test_a_rollout_does_not_go_through_numpy(monkeypatch):
    """Forward and backward through ``simulate``: no numpy conversion, no Taichi copy that
    waits (``to_torch`` / ``from_torch`` call ``ti.sync()``), no Python-scope field access,
    and exactly one host read per parameter check (one flag; the quaternion check one
    more)."""
    sim = gs.Simulation(_model(), frames=2, substeps=8)
    params = _params(sim)
    _loss(gs.simulate(sim, params)).backward()  # compiles every kernel first
    want = {name: p.grad.clone() for name, p in params.items()}

    def forbidden(what):
        def fail(*args, **kwargs):
            raise AssertionError(f"{what} on the per-rollout path")
        return fail

    for cls, names in ((torch.Tensor, ("numpy", "cpu", "__array__", "item", "tolist",
                                       "__float__", "__int__")),
                       (Field, ("to_numpy", "from_numpy", "to_torch", "from_torch")),
                       (ScalarField, ("to_numpy", "from_numpy", "__getitem__",
                                      "__setitem__")),
                       (MatrixField, ("to_numpy", "from_numpy", "to_torch", "from_torch",
                                      "__getitem__", "__setitem__"))):
        for name in names:
            monkeypatch.setattr(cls, name, forbidden(f"{cls.__name__}.{name}"))
    monkeypatch.setattr(torch, "from_numpy", forbidden("torch.from_numpy"))
    for fn in ("as_tensor", "tensor"):
        real = getattr(torch, fn)

        def no_arrays(data, *args, _real=real, _fn=fn, **kwargs):
            assert not isinstance(data, np.ndarray), f"torch.{_fn}(numpy array)"
            return _real(data, *args, **kwargs)
        monkeypatch.setattr(torch, fn, no_arrays)
    reads = []
    real_bool = torch.Tensor.__bool__
    monkeypatch.setattr(torch.Tensor, "__bool__",
                        lambda t: reads.append(1) or real_bool(t))

    for p in params.values():
        p.grad = None
    _loss(gs.simulate(sim, params)).backward()
    monkeypatch.undo()
    assert len(reads) == len(params) + 1  # the checks' flags (+ the quaternions' norms)
    for name, p in params.items():
        torch.testing.assert_close(p.grad, want[name], rtol=0, atol=0, msg=name)


def test_simulate_checks_every_parameter_before_writing_any():
    sim = gs.Simulation(_model(), frames=1, substeps=8)
    mass = sim.get_param("mass")
    dtype, device = runtime.torch_dtype(), runtime.torch_device()
    bad = {"mass": torch.full((len(mass),), 0.3, dtype=dtype, device=device),
           "contact_mu": torch.tensor(float("nan"), dtype=dtype, device=device)}
    with pytest.raises(ValueError, match=r"parameter 'contact_mu' contains NaN or inf"):
        gs.simulate(sim, bad)
    np.testing.assert_array_equal(sim.get_param("mass"), mass)  # not written
    with pytest.raises(ValueError, match="parameter 'body_mass' must be > 0 everywhere; "
                                         "got minimum -1"):
        gs.simulate(sim, {"body_mass": torch.tensor(-1.0, dtype=dtype, device=device)})
    with pytest.raises(ValueError, match=r"body_orientation\[0\] has norm 0"):
        gs.simulate(sim, {"body_orientation": torch.zeros(4, dtype=dtype, device=device)})


def test_set_param_takes_numbers_arrays_and_tensors_of_any_device_and_dtype():
    sim = gs.Simulation(_model(), frames=1, substeps=8)
    n = len(sim.get_param("mass"))
    sim.set_param("mass", 0.07)
    np.testing.assert_array_equal(sim.get_param("mass"), np.full(n, 0.07))
    sim.set_param("mass", np.linspace(0.1, 0.2, n))
    np.testing.assert_array_equal(sim.get_param("mass"), np.linspace(0.1, 0.2, n))
    sim.set_param("mass", torch.linspace(0.3, 0.4, n, dtype=torch.float32))  # cpu, f32
    np.testing.assert_array_equal(sim.get_param("mass"),
                                  torch.linspace(0.3, 0.4, n, dtype=torch.float32).double())
    x0 = np.arange(3 * n, dtype=np.float64).reshape(n, 3) / 10
    sim.set_param("initial_position", x0)
    x0[:] = 0  # the engine kept its own copy
    assert sim.get_param("initial_position")[1, 0] == 0.3
    assert isinstance(sim.get_param("density"), np.ndarray)
    with pytest.raises(ValueError, match=r"parameter 'mass' must be > 0 everywhere"):
        sim.set_param("mass", np.zeros(n))
    with pytest.raises(ValueError, match=r"parameter 'mass' contains NaN or inf \(at \[\[1\]\]"):
        sim.set_param("mass", [0.1, np.nan] + [0.1] * (n - 2))
    with pytest.raises(ValueError, match=r"does not broadcast to its full shape"):
        sim.set_param("mass", np.ones(n + 1))


@pytest.mark.parametrize("shape,n", [((), None), ((), 3), ((5,), None), ((4, 6), 3)])
def test_field_torch_copies_are_exact(shape, n):
    real = runtime.real()
    field = ti.field(real, shape) if n is None else ti.Vector.field(n, real, shape)
    full = shape + (() if n is None else (n,))
    values = torch.randn(full, dtype=runtime.torch_dtype(),
                         generator=torch.Generator().manual_seed(1)).to(runtime.torch_device())
    torch_to_field(values, field)
    np.testing.assert_array_equal(field.to_numpy(), values.cpu().numpy())
    back = field_to_torch(field)
    assert back.device == runtime.torch_device() and back.shape == values.shape
    assert torch.equal(back, values)
    with pytest.raises(ValueError, match="does not fit a field of shape"):
        torch_to_field(values.reshape(-1, 1), field)
    with pytest.raises(TypeError, match="does not fit a field of"):
        torch_to_field(values.to(torch.float16), field)

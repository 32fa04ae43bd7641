"""Bad input gets a clear error naming the problem."""

import numpy as np
import pytest
import torch
from runtime_arch import TEST_ARCH

import gradsim_taichi as gs


def one_spring():
    b = gs.ModelBuilder()
    b.add_particles([[0.0, 1.0, 0.0], [0.2, 1.0, 0.0]], mass=1.0)
    b.add_spring(0, 1, 10.0)
    return b


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(positions=[[0.0, 1.0, 0.0]], mass=-1.0), "mass must be > 0"),
        (dict(positions=[[0.0, 1.0, 0.0]], mass=0.0), "mass must be > 0"),
        (dict(positions=[[0.0, np.nan, 0.0]]), "positions contains NaN"),
        (dict(positions=[[0.0, 1.0, 0.0]], velocities=[[np.inf, 0, 0]]), "velocities contains"),
        (dict(positions=[[0.0, 1.0]]), r"positions must have shape \(N, 3\)"),
        (dict(positions=[[0.0, 1.0, 0.0]] * 2, mass=[1.0, 2.0, 3.0]), "mass must be a scalar"),
        (dict(positions=[[0.0, 1.0, 0.0]] * 2, pinned=[True]), "pinned must be"),
    ],
)
def test_bad_particles(kwargs, match):
    with pytest.raises(ValueError, match=match):
        gs.ModelBuilder().add_particles(**kwargs)


def test_bad_springs():
    b = gs.ModelBuilder()
    b.add_particles([[0.0, 1.0, 0.0], [0.0, 1.0, 0.0], [1.0, 1.0, 0.0]])
    with pytest.raises(ValueError, match="out of range"):
        b.add_spring(0, 3, 1.0)
    with pytest.raises(ValueError, match="out of range"):
        b.add_spring(-1, 1, 1.0)
    with pytest.raises(ValueError, match="rest length 0"):
        b.add_spring(0, 1, 1.0)
    with pytest.raises(ValueError, match="to itself"):
        b.add_spring(2, 2, 1.0)
    with pytest.raises(ValueError, match="stiffness must be >= 0"):
        b.add_spring(0, 2, -1.0)
    with pytest.raises(ValueError, match="length 2"):
        b.add_springs([[0, 2], [1, 2]], stiffness=[1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="empty"):
        gs.ModelBuilder().finalize()


def test_bad_simulation_settings():
    with pytest.raises(ValueError, match="frames must be a positive integer"):
        gs.Simulation(one_spring().finalize(), frames=0)
    with pytest.raises(ValueError, match="substeps"):
        gs.Simulation(one_spring().finalize(), frames=2, substeps=0)
    with pytest.raises(ValueError, match="dt must be > 0"):
        gs.Simulation(one_spring().finalize(), frames=2, dt=-1.0)


def test_bad_parameters_to_simulate():
    sim = gs.Simulation(one_spring().finalize(), frames=2, substeps=32)  # stable contact
    with pytest.raises(KeyError, match="valid names: .*contact_ke"):
        gs.simulate(sim, {"masss": torch.tensor(1.0, dtype=torch.float64)})
    with pytest.raises(TypeError, match="dtype torch.float32"):
        gs.simulate(sim, {"mass": torch.tensor(1.0)})
    with pytest.raises(ValueError, match=r"does not broadcast to its full shape \(2,\)"):
        gs.simulate(sim, {"mass": torch.ones(3, dtype=torch.float64)})
    with pytest.raises(ValueError, match="NaN"):
        gs.simulate(sim, {"mass": torch.tensor(float("nan"), dtype=torch.float64)})
    with pytest.raises(ValueError, match="'mass' must be > 0"):
        gs.simulate(sim, {"mass": torch.tensor(-1.0, dtype=torch.float64)})
    with pytest.raises(ValueError, match="'contact_mu' must be >= 0"):
        sim.set_param("contact_mu", -0.1)


def test_model_used_after_reinit_is_a_clear_error():
    model = one_spring().finalize()
    gs.init(arch=TEST_ARCH, precision="f64")
    with pytest.raises(RuntimeError, match="built before the last gradsim_taichi.init"):
        gs.Simulation(model, frames=2)


def test_init_rejects_unknown_choices():
    with pytest.raises(ValueError, match="arch="):
        gs.init(arch="gpu")
    with pytest.raises(ValueError, match="precision="):
        gs.init(precision="f16")


def test_explicitly_unstable_contact_is_reported():
    b = gs.ModelBuilder(contact_kf=1e3)
    b.add_particle((0.0, 1.0, 0.0), mass=0.02)
    with pytest.warns(UserWarning, match=r"contact_kf: a damping of 1e\+03 .* c dt / m = 83"):
        gs.Simulation(b.finalize(), frames=2, substeps=10)

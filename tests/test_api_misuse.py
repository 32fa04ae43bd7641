"""API misuse gets an error that says what is wrong (issue: a list for a dict, objects
used after a later init)."""

import pytest
import torch
from runtime_arch import TEST_ARCH

import gradsim_taichi as gs


def _sim():
    b = gs.ModelBuilder()
    b.add_particle((0.0, 1.0, 0.0), mass=1.0)
    return gs.Simulation(b.finalize(), frames=2, substeps=32)


def test_simulate_wants_a_dict_of_named_tensors():
    sim = _sim()
    with pytest.raises(TypeError, match="params must be a dict .name: tensor.; got list "
                                        r"\(valid names: .*mass"):
        gs.simulate(sim, [torch.tensor(1.0, dtype=torch.float64)])
    with pytest.raises(TypeError, match="sim must be a gradsim_taichi.Simulation; got dict"):
        gs.simulate({"mass": 1.0})


def test_a_simulation_from_before_a_later_init_says_to_rebuild():
    sim = _sim()
    gs.init(arch=TEST_ARCH, precision="f64")
    with pytest.raises(RuntimeError, match="built before the last gradsim_taichi.init"):
        gs.simulate(sim, {"mass": torch.tensor(2.0, dtype=torch.float64)})


def test_every_simulation_method_after_a_later_init_says_to_rebuild():
    sim = _sim()
    gs.init(arch=TEST_ARCH, precision="f64")
    for call in (lambda: sim.set_param("mass", 2.0), lambda: sim.get_param("mass"),
                 lambda: sim.param_grad("mass"), sim.forward):
        with pytest.raises(RuntimeError, match="this Simulation .and its Model. was built "
                                               "before the last gradsim_taichi.init"):
            call()

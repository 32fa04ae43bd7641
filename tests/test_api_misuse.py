"""API misuse gets an error that says what is wrong (issue: a list for a dict, objects
used after a later init)."""

import numpy as np
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


def test_backward_needs_the_last_forward_with_its_parameters():
    """backward() back-propagates the last forward(): without one it would run on absent
    checkpoints (NaN gradients), after a set_param on stale ones."""
    sim = _sim()
    w = {"particles": np.ones((sim.frames + 1, 1, 3))}
    with pytest.raises(RuntimeError, match="none has run on this Simulation yet"):
        sim.backward(w)
    sim.forward()
    sim.set_param("mass", 2.0)
    with pytest.raises(RuntimeError, match="a parameter was set after it"):
        sim.backward(w)
    sim.forward()
    sim.backward(w)
    sim.backward(w)  # again after the same forward: the same gradient
    # in free flight x(frame k) = x0 + v0 k substeps dt (semi-implicit Euler: exactly
    # linear in v0)
    expected = sum(range(sim.frames + 1)) * sim.substeps * sim.dt
    np.testing.assert_allclose(sim.param_grad("initial_velocity"), [[expected] * 3],
                               rtol=1e-12)


def test_backward_names_a_wrong_gradient():
    """Not a dict, a name that is no output, a shape or more rows than the last forward
    returned: each named (the unknown name was ignored: a zero gradient, silently)."""
    sim = _sim()
    sim.forward(frames=1)
    rows = np.ones((2, 1, 3))
    with pytest.raises(TypeError, match=r"grad_outputs must be a dict .* got list "
                                        r"\(outputs: particles, particles_velocity\)"):
        sim.backward([rows])
    with pytest.raises(KeyError, match="no output of this Simulation: 'particle' "
                                       r"\(outputs: particles"):
        sim.backward({"particle": rows})
    with pytest.raises(ValueError, match=r"grad_outputs\['particles'\] has shape \(3, 1, 3\); "
                                         r"the last forward returned \(2, 1, 3\)"):
        sim.backward({"particles": np.ones((3, 1, 3))})
    with pytest.raises(ValueError, match=r"grad_outputs\['particles_velocity'\] has shape "
                                         r"\(2, 2, 3\)"):
        sim.backward({"particles_velocity": np.ones((2, 2, 3))})
    sim.backward({"particles": rows})  # free flight: x(frame 1) = x0 + v0 substeps dt
    np.testing.assert_allclose(sim.param_grad("initial_velocity"),
                               [[sim.substeps * sim.dt] * 3], rtol=1e-12)

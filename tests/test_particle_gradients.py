"""Gradients of particle rollouts: finite differences, checkpointing, torch bridge."""

import numpy as np
import pytest
import torch
from gradcheck_utils import fd_check_params

import gradsim_taichi as gs
from gradsim_taichi.solvers.springs import Springs

ALL_PARTICLE_PARAMS = [
    "mass", "gravity", "initial_position", "initial_velocity", "external_force",
    "spring_stiffness", "spring_damping", "spring_rest_length",
    "contact_ke", "contact_kd", "contact_kf", "contact_mu",
]


def chain_builder():
    """Three particles joined by springs, thrown sideways so they land and slide."""
    b = gs.ModelBuilder(contact_ke=2e3, contact_kd=20.0, contact_kf=50.0, contact_mu=0.4,
                        particle_radius=0.02)
    b.add_particles(
        [[0.0, 0.12, 0.0], [0.15, 0.15, 0.02], [0.3, 0.13, -0.03]],
        velocities=[[1.0, 0.0, 0.3], [1.2, 0.1, 0.2], [0.9, -0.2, 0.4]],
        mass=[0.5, 0.7, 0.6],
        force=[0.0, 0.0, 0.5],
    )
    b.add_springs([[0, 1], [1, 2], [0, 2]], stiffness=[200.0, 150.0, 100.0],
                  damping=[0.5, 0.3, 0.2])
    return b


def weights(sim, seed=1):
    n = sim.model.particle_count
    return np.random.default_rng(seed).standard_normal((sim.frames + 1, n, 3))


@pytest.mark.parametrize("checkpoint", [True, False])
def test_every_parameter_matches_finite_differences_through_contact(checkpoint):
    sim = gs.Simulation(chain_builder().finalize(), frames=12, substeps=8, dt=1.0 / 480,
                        checkpoint=checkpoint)
    out = sim.forward()["particles"]
    # the rollout must actually touch the ground and slide, or the test proves little
    assert out[:, :, 1].min() < 0.02
    assert set(ALL_PARTICLE_PARAMS) <= set(sim.params.names())
    fd_check_params(sim, ALL_PARTICLE_PARAMS, weights(sim))


def test_checkpointed_and_full_storage_gradients_agree():
    sims = [gs.Simulation(chain_builder().finalize(), frames=10, substeps=8, dt=1.0 / 480,
                          checkpoint=c) for c in (True, False)]
    grads = []
    for sim in sims:
        sim.forward()
        sim.backward({"particles": weights(sim)})
        grads.append({n: sim.param_grad(n) for n in ALL_PARTICLE_PARAMS})
    for n in ALL_PARTICLE_PARAMS:
        np.testing.assert_allclose(grads[0][n], grads[1][n], rtol=1e-12, atol=1e-12, err_msg=n)
    # stored state: checkpointed grows with frames + substeps, full with frames * substeps
    n = sims[0].model.particle_count
    itemsize = 8
    per_state = n * 3 * itemsize
    rows_ckpt, rows_full = 8 + 1, 10 * 8 + 1
    per_lengths = springs_of(sims[0]).count * 2 * itemsize  # per row, kept for the adjoint
    assert sims[0].stored_state_bytes() == per_state * (6 * rows_ckpt + 2 * 11) \
        + per_lengths * rows_ckpt
    assert sims[1].stored_state_bytes() == per_state * (6 * rows_full + 2 * 11) \
        + per_lengths * rows_full


def springs_of(sim):
    (springs,) = [f for f in sim.model.forces if isinstance(f, Springs)]
    return springs


def test_stored_state_grows_with_frames_plus_substeps_when_checkpointed():
    sizes = {}
    for frames in (10, 20):
        for checkpoint in (True, False):
            sim = gs.Simulation(chain_builder().finalize(), frames=frames, substeps=16,
                                checkpoint=checkpoint)
            sizes[frames, checkpoint] = sim.stored_state_bytes()
    # doubling frames adds 2 states per extra frame when checkpointed, 6*16 when full
    # (plus, when full, the springs' lengths of 16 more rows)
    per_state = 3 * 3 * 8
    per_lengths = springs_of(sim).count * 2 * 8
    assert sizes[20, True] - sizes[10, True] == 10 * 2 * per_state
    assert sizes[20, False] - sizes[10, False] == 10 * ((6 * 16 + 2) * per_state
                                                        + 16 * per_lengths)


def test_gradcheck_on_the_autograd_function():
    sim = gs.Simulation(chain_builder().finalize(), frames=4, substeps=4, dt=1.0 / 240)

    def f(mass, mu, v0):
        return gs.simulate(sim, {"mass": mass, "contact_mu": mu,
                                 "initial_velocity": v0})["particles"]

    mass = torch.tensor([0.5, 0.7, 0.6], dtype=torch.float64, requires_grad=True)
    mu = torch.tensor(0.4, dtype=torch.float64, requires_grad=True)
    v0 = torch.tensor(sim.get_param("initial_velocity"), requires_grad=True)
    assert torch.autograd.gradcheck(f, (mass, mu, v0), eps=1e-6, atol=1e-7, rtol=1e-5)


def test_scalar_parameter_broadcasts_and_gradient_sums():
    sim = gs.Simulation(chain_builder().finalize(), frames=6, substeps=4, dt=1.0 / 240)
    m = torch.tensor(0.6, dtype=torch.float64, requires_grad=True)
    out = gs.simulate(sim, {"mass": m})["particles"]
    out[-1, :, 0].sum().backward()
    m_full = torch.full((3,), 0.6, dtype=torch.float64, requires_grad=True)
    out = gs.simulate(sim, {"mass": m_full})["particles"]
    out[-1, :, 0].sum().backward()
    assert torch.allclose(m.grad, m_full.grad.sum(), rtol=1e-12)


def test_backward_after_another_forward_uses_its_own_parameters():
    sim = gs.Simulation(chain_builder().finalize(), frames=6, substeps=4, dt=1.0 / 240)
    m1 = torch.tensor(0.6, dtype=torch.float64, requires_grad=True)
    out1 = gs.simulate(sim, {"mass": m1})["particles"]
    m2 = torch.tensor(1.3, dtype=torch.float64, requires_grad=True)
    gs.simulate(sim, {"mass": m2})  # overwrites the checkpoints
    out1[-1].sum().backward()
    m3 = torch.tensor(0.6, dtype=torch.float64, requires_grad=True)
    gs.simulate(sim, {"mass": m3})["particles"][-1].sum().backward()
    assert torch.allclose(m1.grad, m3.grad, rtol=1e-12)


def test_torch_optimiser_recovers_spring_stiffness_from_trajectory():
    b = gs.ModelBuilder(ground=False, gravity=(0.0, -9.8, 0.0))
    b.add_particle((0.0, 1.0, 0.0), pinned=True)
    b.add_particle((0.0, 0.8, 0.0), mass=0.2)
    b.add_spring(0, 1, stiffness=30.0, damping=0.0)
    sim = gs.Simulation(b.finalize(), frames=10, substeps=8)
    target = gs.simulate(sim, {"spring_stiffness": torch.tensor(30.0, dtype=torch.float64)})
    target = target["particles"].detach()
    module = gs.SimulationModule(sim, {"spring_stiffness": torch.tensor(15.0)
                                       .to(torch.float64)})
    opt = torch.optim.Adam(module.parameters(), lr=1.0)
    for _ in range(80):
        opt.zero_grad()
        loss = ((module()["particles"] - target) ** 2).mean()
        loss.backward()
        opt.step()
    assert abs(module.values["spring_stiffness"].item() - 30.0) < 0.3


def test_velocity_output_gradients_match_finite_differences():
    """Frame-by-frame stepping needs velocities out: dL/d(velocities) flows back too."""
    sim = gs.Simulation(chain_builder().finalize(), frames=5, substeps=8, dt=1.0 / 480)
    w = torch.tensor(np.random.default_rng(2).standard_normal((6, 3, 3)))

    def loss(mass, v0):
        out = gs.simulate(sim, {"mass": mass, "initial_velocity": v0})
        return (out["particles_velocity"] * w).sum() + out["particles"][-1].sum()

    mass = torch.tensor([0.5, 0.7, 0.6], dtype=torch.float64, requires_grad=True)
    v0 = torch.tensor(sim.get_param("initial_velocity"), requires_grad=True)
    loss(mass, v0).backward()
    for x, grad in ((mass, mass.grad), (v0, v0.grad)):
        d = torch.randn_like(x)
        h = 1e-6
        with torch.no_grad():
            x += h * d
            lp = loss(mass, v0).item()
            x -= 2 * h * d
            lm = loss(mass, v0).item()
            x += h * d
        numeric = (lp - lm) / (2 * h)
        assert abs((grad * d).sum().item() - numeric) < 1e-5 * abs(numeric)


def test_auto_storage_stores_small_rollouts_and_checkpoints_large_ones(monkeypatch):
    """checkpoint="auto" stores every substep while the stored state stays within
    AUTO_STORE_BYTES (row_bytes predicts what full storage adds per substep row) and
    checkpoints beyond; its gradients are the checkpointed ones."""
    from gradsim_taichi import simulation

    full = gs.Simulation(chain_builder().finalize(), frames=10, substeps=8, checkpoint=False)
    short = gs.Simulation(chain_builder().finalize(), frames=9, substeps=8, checkpoint=False)
    per_row = full.model.particle_system.row_bytes()
    # 8 more rows cost 8 row_bytes plus one frame's checkpoints (2 states of x, v)
    assert full.stored_state_bytes() - short.stored_state_bytes() == 8 * per_row + 2 * 3 * 3 * 8
    rows = 10 * 8 + 1
    monkeypatch.setattr(simulation, "AUTO_STORE_BYTES", per_row * rows)
    auto = gs.Simulation(chain_builder().finalize(), frames=10, substeps=8, checkpoint="auto")
    assert not auto.checkpoint
    monkeypatch.setattr(simulation, "AUTO_STORE_BYTES", per_row * rows - 1)
    ckpt = gs.Simulation(chain_builder().finalize(), frames=10, substeps=8, checkpoint="auto")
    assert ckpt.checkpoint
    grads = []
    for sim in (auto, ckpt):
        sim.forward()
        sim.backward({"particles": weights(sim)})
        grads.append({n: sim.param_grad(n) for n in ALL_PARTICLE_PARAMS})
    for n in ALL_PARTICLE_PARAMS:
        np.testing.assert_allclose(grads[0][n], grads[1][n], rtol=1e-12, atol=1e-12, err_msg=n)


def test_auto_storage_checkpoints_when_a_force_model_does_not_say_its_row_bytes(monkeypatch):
    from gradsim_taichi import simulation

    monkeypatch.setattr(Springs, "row_bytes", None)
    monkeypatch.setattr(simulation, "AUTO_STORE_BYTES", 2**40)
    assert gs.Simulation(chain_builder().finalize(), frames=2, substeps=4,
                         checkpoint="auto").checkpoint


def test_checkpoint_must_be_a_bool_or_auto():
    with pytest.raises(ValueError, match="checkpoint must be True, False or 'auto'"):
        gs.Simulation(chain_builder().finalize(), frames=2, substeps=4, checkpoint="yes")

"""A rollout of the first k frames (``simulate(..., frames=k)``): what an estimation's
horizon stages run. Its positions are the full rollout's first k + 1 frames and its
gradients those of the full rollout under a loss that ignores the later frames; the
backward pass starts at frame k."""

import numpy as np
import pytest
import torch
from runtime_arch import TEST_ARCH

import gradsim_taichi as gs


@pytest.fixture(autouse=True)
def _runtime():
    gs.init(arch=TEST_ARCH, precision="f64", threads=1)


def rigid_sim(checkpoint=True):
    b = gs.ModelBuilder(contact_ke=2e3, contact_kd=10.0, contact_kf=50.0, contact_mu=0.5)
    body = b.add_rigid_box((0.2, 0.1, 0.15), mass=1.0, position=(0.0, 0.12, 0.0),
                           orientation=(0.95, 0.1, 0.2, 0.05), velocity=(1.0, -0.5, 0.0),
                           angular_velocity=(0.5, 2.0, 0.3))
    b.add_body_impulse(body, (0.5, 0.2, 0.0), point=(0.05, 0.0, 0.0), start=0.02)
    return gs.Simulation(b.finalize(), frames=12, substeps=16, checkpoint=checkpoint), "rigid"


def cloth_sim(checkpoint=True):
    b = gs.ModelBuilder(contact_ke=1e3, contact_kd=1.0, contact_kf=1.0, contact_mu=0.5)
    b.add_cloth_grid((0.3, 0.3), (3, 3), origin=(0.0, 0.05, 0.0), density=1.0,
                     velocity=(0.5, -1.0, 0.2), tri_ke=20.0, tri_ka=20.0, tri_kd=0.05,
                     edge_ke=0.01)
    return gs.Simulation(b.finalize(), frames=12, substeps=16, checkpoint=checkpoint), "particles"


PARAMS = {"rigid": ("body_mass", "contact_ke", "body_velocity"),
          "particles": ("mass", "contact_kd", "initial_velocity")}


# (stored substeps (checkpoint=False) of the rigid bodies: slow tier; of the cloth: default)
@pytest.mark.parametrize("make, checkpoint", [
    (rigid_sim, True), pytest.param(rigid_sim, False, marks=pytest.mark.slow),
    (cloth_sim, True), (cloth_sim, False)])
def test_the_first_k_frames_and_their_gradients_equal_the_full_rollouts(make, checkpoint):
    sim, out = make(checkpoint)
    names = PARAMS[out]
    base = {n: torch.tensor(sim.get_param(n)) for n in names}
    full = gs.simulate(sim, base)[out].detach()
    k = 5
    weights = torch.tensor(np.random.default_rng(0).normal(size=tuple(full.shape)))
    weights[k + 1:] = 0.0

    def grads(frames):
        leaves = {n: v.clone().requires_grad_(True) for n, v in base.items()}
        x = gs.simulate(sim, leaves, frames=frames)[out]
        (x * weights[: len(x)]).sum().backward()
        return x.detach(), {n: leaves[n].grad for n in names}

    part, g_part = grads(k)
    assert part.shape[0] == k + 1
    np.testing.assert_allclose(part.numpy(), full[: k + 1].numpy(), rtol=0, atol=1e-14)
    assert float((full[k + 1:] - full[k]).abs().max()) > 1e-3  # later frames differ
    _, g_full = grads(None)
    for n in names:
        assert float(g_full[n].abs().max()) > 0, n
        np.testing.assert_allclose(g_part[n].numpy(), g_full[n].numpy(), rtol=1e-12,
                                   atol=1e-12 * float(g_full[n].abs().max()), err_msg=n)


def test_a_rollout_in_between_is_redone_with_the_same_frames():
    """Backward of a k-frame rollout after another rollout ran on the same Simulation."""
    sim, _ = rigid_sim()
    m = torch.tensor(1.0, dtype=torch.float64, requires_grad=True)
    x = gs.simulate(sim, {"body_mass": m}, frames=4)["rigid"]
    loss = x[-1, :, 0].sum()
    gs.simulate(sim, {"body_mass": torch.tensor(2.0, dtype=torch.float64)})  # all 12
    loss.backward()
    m2 = torch.tensor(1.0, dtype=torch.float64, requires_grad=True)
    gs.simulate(sim, {"body_mass": m2}, frames=4)["rigid"][-1, :, 0].sum().backward()
    assert float(m.grad) == pytest.approx(float(m2.grad), rel=1e-13) and float(m.grad) != 0


@pytest.mark.parametrize("frames", [0, 13, 2.5, True])
def test_a_frame_count_out_of_range_is_named(frames):
    sim, _ = rigid_sim()
    with pytest.raises(ValueError, match=r"frames must be an integer in \[1, 12\]"):
        gs.simulate(sim, {}, frames=frames)


# (the partial sums themselves: test_serial_parallel.py; here their row size, slow tier)
# (checkpoint="auto" choosing full storage by row_bytes: test_particle_gradients.py in the
# default run)
@pytest.mark.slow
@pytest.mark.parametrize("slots", ["1", "4"])
def test_rigid_row_bytes_size_full_storage(monkeypatch, slots):
    """A rigid body says what one stored substep row costs (``row_bytes``), so
    ``checkpoint="auto"`` stores a short rigid rollout; its gradients are the
    checkpointed ones. With per-slot partial sums (GRADSIM_REDUCTION_SLOTS) too."""
    from gradsim_taichi import simulation

    monkeypatch.setenv("GRADSIM_REDUCTION_SLOTS", slots)

    def sim(frames, checkpoint):
        b = gs.ModelBuilder(contact_ke=2e3, contact_kd=10.0, contact_kf=50.0)
        b.add_rigid_box((0.2, 0.1, 0.15), mass=1.0, position=(0.0, 0.12, 0.0),
                        orientation=(0.95, 0.1, 0.2, 0.05), velocity=(1.0, -0.5, 0.0))
        return gs.Simulation(b.finalize(), frames=frames, substeps=16, checkpoint=checkpoint)

    full, short = sim(12, False), sim(11, False)
    per_row = full.model.systems[0].row_bytes()
    # 16 more rows, plus one more frame's checkpoint (x, v, w, q: 13 values, no adjoints)
    assert full.stored_state_bytes() - short.stored_state_bytes() == 16 * per_row + 13 * 8
    monkeypatch.setattr(simulation, "AUTO_STORE_BYTES", per_row * (12 * 16 + 1))
    stored = sim(12, "auto")
    assert not stored.checkpoint
    monkeypatch.setattr(simulation, "AUTO_STORE_BYTES", per_row * (12 * 16 + 1) - 1)
    checkpointed = sim(12, "auto")
    assert checkpointed.checkpoint
    grads = []
    for s in (stored, checkpointed):
        leaves = {n: torch.tensor(s.get_param(n)).requires_grad_(True)
                  for n in ("body_mass", "contact_ke", "body_velocity")}
        x = gs.simulate(s, leaves)["rigid"]
        (x * torch.linspace(-1.0, 1.0, x.numel(), dtype=x.dtype).reshape(x.shape)).sum().backward()
        grads.append({n: t.grad for n, t in leaves.items()})
    for n in grads[0]:
        assert float(grads[0][n].abs().max()) > 0, n
        np.testing.assert_allclose(grads[0][n].numpy(), grads[1][n].numpy(), rtol=1e-12,
                                   atol=1e-12 * float(grads[1][n].abs().max()), err_msg=n)

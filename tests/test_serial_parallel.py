"""The parallel code paths (taken on CUDA and for large models on the CPU) against the
serial ones the CPU takes for small models: same trajectories and gradients."""

import numpy as np
import pytest

import gradsim_taichi as gs
from gradsim_taichi import runtime


@pytest.fixture(autouse=True)
def _init():
    gs.init(arch="cpu", precision="f64", threads=2)


def springs_and_cloth(b):
    rng = np.random.default_rng(0)
    ids = b.add_particles(rng.uniform(-0.1, 0.1, (6, 3)) + [0, 0.05, 0], mass=0.05)
    pairs = [(ids[i], ids[j]) for i in range(6) for j in range(i + 1, 6)]
    b.add_springs(pairs, stiffness=50.0, damping=0.2)
    b.add_cloth_grid(size=(0.3, 0.3), resolution=(3, 3), origin=(0.3, 0.04, 0.0), mass=0.02,
                     tri_ke=100.0, tri_ka=150.0, tri_kd=0.2, edge_ke=0.05, edge_kd=0.01,
                     lift=0.2, drag=0.3, velocity=(0.2, -0.8, 0.1))


def soft_box(b):
    b.add_soft_box(size=0.2, resolution=2, origin=(-0.5, 0.02, 0.0), density=1000.0,
                   mu=2e3, lam=3e3, damping=1.0, velocity=(0.5, -1.0, 0.0))


@pytest.mark.parametrize("add", [springs_and_cloth, soft_box])
def test_parallel_paths_match_serial(add, monkeypatch):
    results = []
    for work_ns in (runtime.SERIAL_WORK_NS, 0.0):  # default (serial here), then parallel
        monkeypatch.setattr(runtime, "SERIAL_WORK_NS", work_ns)
        # contact damping and friction well inside explicit stability (k dt / m < 0.2), so
        # rounding differences between the paths are not amplified
        b = gs.ModelBuilder(contact_kd=2.0, contact_kf=2.0)
        add(b)
        sim = gs.Simulation(b.finalize(), frames=5, substeps=16)
        serial = sim.model.particles.loop.serial
        x = sim.forward()["particles"]
        w = np.random.default_rng(1).standard_normal(x.shape)
        sim.backward({"particles": w})
        names = [n for n in sim.params.names() if n != "external_force"]
        results.append((x, {n: sim.param_grad(n) for n in names}, serial))
    (xs, gs_, serial_a), (xp, gp, serial_b) = results
    assert serial_a and not serial_b  # the two runs did take different paths
    assert xs[:, :, 1].min() < 0.02  # the ground is touched
    np.testing.assert_allclose(xp, xs, rtol=0, atol=1e-12)
    for name, g in gs_.items():
        scale = max(np.abs(g).max(), 1e-30)
        np.testing.assert_allclose(gp[name], g, rtol=0, atol=1e-10 * scale, err_msg=name)

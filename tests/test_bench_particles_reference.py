"""The particle benchmark's PyTorch reference runs the same model as the engine: same
trajectory and gradients on a tiny grid that lands on the ground (so the reference the
benchmark times cannot silently drift from the engine)."""

import os
import sys

import numpy as np
import pytest
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, "benchmarks"))

import bench_particles as bp  # noqa: E402
from runtime_arch import TEST_ARCH  # noqa: E402
from torch_particles_reference import (  # noqa: E402
    TorchParticles,
    cloth_grid,
    scene_from_simulation,
)

import gradsim_taichi as gs  # noqa: E402


def tiny_case(precision):
    # 4x4 grid 2 cm above contact, with random velocities: it wrinkles and lands
    b = bp.make_builder(4, height=0.03, width=0.1)
    sim = gs.Simulation(b.finalize(), frames=4, substeps=24)  # friction k dt / m < 1
    dtype = torch.float64 if precision == "f64" else torch.float32
    ref = TorchParticles(scene_from_simulation(sim), dtype=dtype)
    return sim, ref, bp.loss_weights(sim.frames, sim.model.particle_count)


@pytest.fixture(scope="module")
def case_f64():
    """Built once for the f64 tests (each new Model compiles its kernels again)."""
    if gs.info().get("precision") != "f64":
        gs.init(arch=TEST_ARCH, precision="f64")  # what the autouse fixture would do
    return tiny_case("f64")


def test_grid_springs():
    pos, pairs = cloth_grid(64)
    assert pos.shape == (4096, 3) and np.allclose(pos[:, 1], 0.5)
    assert len(pairs) == 2 * 64 * 63 + 2 * 63 * 63 + 2 * 64 * 62 == 23938
    assert len(np.unique(np.sort(pairs, axis=1), axis=0)) == len(pairs)


def test_reference_matches_engine_f64(case_f64):
    sim, ref, w = case_f64
    errors = bp.compare(sim, ref, w, "f64")  # raises when they disagree
    assert max(errors.values()) < 1e-9
    # the case exercises springs and contact: the compared gradients are not zero
    for name in bp.GRAD_NAMES:
        assert np.abs(sim.param_grad(name)).max() > 0, name
    assert sim.forward()["particles"][-1, :, 1].min() < 0.01 + 1e-3  # it reached the ground


@pytest.mark.parametrize("change", ["dt", "contact_mu", "spring_damping"])
def test_check_catches_a_drifted_reference(case_f64, change):
    sim, ref, w = case_f64
    ref = TorchParticles({**ref.scene}, dtype=torch.float64)
    if change == "dt":
        ref.dt *= 1.0 + 1e-6
    else:
        ref.scene[change] = ref.scene[change] * 1.01
    with pytest.raises(AssertionError, match="disagree"):
        bp.compare(sim, ref, w, "f64")


@pytest.mark.precision("f32")
def test_reference_matches_engine_f32():
    sim, ref, w = tiny_case("f32")
    errors = bp.compare(sim, ref, w, "f32")
    assert max(errors.values()) < 1e-3


def test_stored_substeps_give_the_checkpointed_gradients():
    """bench_particles times the stored-substeps backward against the bandwidth floor:
    it must be the checkpointed one's result, and the check must catch a difference."""
    sim, _, w = tiny_case("f64")  # (the module's case may predate the f32 test's init)
    b = bp.make_builder(4, height=0.03, width=0.1)  # the same model
    stored = gs.Simulation(b.finalize(), frames=sim.frames, substeps=sim.substeps,
                           checkpoint=False)
    bp.check_stored(sim, stored, w)  # raises when they disagree
    stored.set_param("contact_mu", stored.get_param("contact_mu") * 1.01)
    with pytest.raises(AssertionError, match="stored and checkpointed backward disagree"):
        bp.check_stored(sim, stored, w)

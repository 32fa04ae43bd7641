"""Every explicit stiffness and damping term is checked against its lightest particle and
the substep when a Simulation is built: an unstable one is named in a warning."""

import warnings

import numpy as np
import pytest

import gradsim_taichi as gs


def _warnings_of(builder, substeps=32):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sim = gs.Simulation(builder.finalize(), frames=3, substeps=substeps)
    return sim, [str(w.message) for w in caught if issubclass(w.category, UserWarning)]


@pytest.mark.parametrize("ground", [True, False])
def test_the_small_default_cloth_is_named(ground):
    """0.2 m, 3x3 cells, density 0.1 with the builder's cloth defaults: NaN from frame 1;
    the warning names the membrane damping and the bending stiffness (with or without
    the ground)."""
    b = gs.ModelBuilder(ground=ground)
    b.add_cloth_grid((0.2, 0.2), (3, 3), density=0.1)
    sim, messages = _warnings_of(b)
    assert any(m.startswith("tri_kd: a damping of 10") for m in messages), messages
    assert any(m.startswith("edge_ke: a stiffness") for m in messages), messages
    assert any(m.startswith("contact_kf") for m in messages) == ground
    assert not np.isfinite(sim.forward()["particles"]).all()  # the warning was right


def test_springs_and_tets_are_checked_and_stable_ones_pass():
    b = gs.ModelBuilder(ground=False)
    ids = b.add_particles([[0, 1, 0], [0.1, 1, 0]], mass=1e-3)
    b.add_spring(ids[0], ids[1], stiffness=1e5, damping=0.0)
    _, messages = _warnings_of(b)
    assert len(messages) == 1 and messages[0].startswith("spring_stiffness: a stiffness of 1e+05")
    b = gs.ModelBuilder(ground=False)
    ids = b.add_particles([[0, 1, 0], [0.1, 1, 0]], mass=1e-3)
    b.add_spring(ids[0], ids[1], stiffness=10.0, damping=1e-3)
    assert _warnings_of(b)[1] == []
    b = gs.ModelBuilder(ground=False)
    b.add_soft_box(size=0.1, resolution=1, density=100.0, mu=1e7, lam=1e7, damping=0.0)
    _, messages = _warnings_of(b)
    assert len(messages) == 1 and messages[0].startswith("tet_mu, tet_lambda: a stiffness")
    b = gs.ModelBuilder(ground=False)
    b.add_soft_box(size=0.1, resolution=1, density=100.0, mu=1e3, lam=1e3, damping=1.0)
    assert _warnings_of(b)[1] == []


def test_pinned_particles_do_not_count():
    b = gs.ModelBuilder(ground=False)
    ids = b.add_particles([[0, 1, 0], [0.1, 1, 0]], mass=[1e-6, 1.0], pinned=[True, False])
    b.add_spring(ids[0], ids[1], stiffness=100.0)
    assert _warnings_of(b)[1] == []  # 100 dt^2 / 1 kg: stable; the 1 mg end never moves

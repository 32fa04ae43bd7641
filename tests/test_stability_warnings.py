"""Every explicit stiffness and damping term is checked against its lightest particle and
the substep when a Simulation is built: an unstable one is named in a warning."""

import warnings

import numpy as np
import pytest

import gradsim_taichi as gs


def _warnings_of(builder, substeps=32, frames=3):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sim = gs.Simulation(builder.finalize(), frames=frames, substeps=substeps)
    return sim, [str(w.message) for w in caught if issubclass(w.category, UserWarning)]


REFERENCE_CLOTH = dict(tri_ke=100.0, tri_ka=100.0, tri_kd=10.0, edge_ke=100.0)
REFERENCE_CONTACT = dict(contact_ke=1e3, contact_kd=0.0, contact_kf=1e3)


@pytest.mark.parametrize("ground", [True, False])
def test_an_unstable_light_cloth_is_named(ground):
    """0.2 m, 3x3 cells, density 0.1 with the reference's stiffness and damping (the
    builder's defaults before they became stable): NaN from frame 1; the warning names
    the membrane damping and the bending stiffness (with or without the ground)."""
    b = gs.ModelBuilder(ground=ground, **REFERENCE_CONTACT)
    b.add_cloth_grid((0.2, 0.2), (3, 3), density=0.1, **REFERENCE_CLOTH)
    sim, messages = _warnings_of(b)
    assert any(m.startswith("tri_kd: a damping of 10") for m in messages), messages
    assert any(m.startswith("edge_ke: a stiffness") for m in messages), messages
    assert any(m.startswith("contact_kf") for m in messages) == ground
    assert not np.isfinite(sim.forward()["particles"]).all()  # the warning was right


@pytest.mark.parametrize("substeps", [16, 32])
@pytest.mark.parametrize("size,resolution", [((0.2, 0.2), (3, 3)), ((1.0, 1.0), (16, 16))])
def test_default_cloth_is_stable_and_lands(size, resolution, substeps):
    """The builder's defaults at the sizes its docstring suggests (and the small cloth
    above): no warning, finite, and dropped on the ground it comes to lie on it: every
    particle within 3 cm of y = 0 after 2 s, its energy mostly gone."""
    b = gs.ModelBuilder()
    b.add_cloth_grid(size, resolution, origin=(0.0, 0.2, 0.0))
    sim, messages = _warnings_of(b, substeps, frames=120)
    assert messages == []
    out = sim.forward()
    x, v = out["particles"], out["particles_velocity"]
    assert np.isfinite(x).all() and np.isfinite(v).all()
    assert x[-1][:, 1].max() < 0.03 and x[-1][:, 1].min() > -0.005
    # it hit the ground at sqrt(2 g 0.2) = 2 m/s; the light cloth's soft contact and
    # membrane are lightly damped, so it still quivers, but far slower
    assert np.linalg.norm(v[-1], axis=1).mean() < 0.25
    # the membrane holds the cloth together: its extent within 1% of the rest size
    assert np.ptp(x[-1][:, 0]) == pytest.approx(size[0], rel=1e-2)


def test_default_hanging_cloth_is_stable():
    """Pinned by its top corners with no ground: finite, no warning, and it stretches
    under its own weight by less than 20% of its height."""
    b = gs.ModelBuilder(ground=False)
    b.add_cloth_grid(plane="xy", origin=(0.0, 0.5, 0.0), pinned="top_corners")
    sim, messages = _warnings_of(b, 16, frames=60)
    assert messages == []
    x = sim.forward()["particles"]
    assert np.isfinite(x).all()
    assert x[:, :, 1].min() > 0.5 - 0.2


def test_automatic_defaults_keep_heavy_cloth_and_given_values():
    """Defaults fall below the reference's values only for particles too light for them;
    values given are kept as given."""
    heavy = gs.ModelBuilder()
    heavy.add_cloth_grid((1.0, 1.0), (4, 4), mass=5.0)
    light = gs.ModelBuilder()
    light.add_cloth_grid((1.0, 1.0), (16, 16), density=0.1)
    given = gs.ModelBuilder(contact_ke=7.0)
    given.add_cloth_grid((1.0, 1.0), (16, 16), density=0.1, tri_kd=3.0, edge_ke=2.0)
    values = {}
    for name, b in (("heavy", heavy), ("light", light), ("given", given)):
        sim = gs.Simulation(b.finalize(), frames=1, substeps=16)
        values[name] = {n: float(np.asarray(sim.get_param(n)).ravel()[0])
                        for n in ("tri_ke", "tri_ka", "tri_kd", "edge_ke", "contact_ke",
                                  "contact_kf")}
    assert values["heavy"] == dict(tri_ke=100.0, tri_ka=100.0, tri_kd=10.0, edge_ke=100.0,
                                   contact_ke=1e3, contact_kf=1e3)
    assert all(values["light"][n] < values["heavy"][n] for n in values["heavy"])
    assert values["given"]["tri_kd"] == 3.0 and values["given"]["edge_ke"] == 2.0
    assert values["given"]["contact_ke"] == 7.0


def test_stable_default_is_a_fraction_of_the_limit():
    """The automatic value sits at a third of the stiffness limit and a quarter of the
    damping limit for the lightest free particle (pinned ones, inf, do not count)."""
    from gradsim_taichi.checks import DEFAULT_STEP, STABILITY_LIMITS, stable_default

    mass = np.array([np.inf, 2e-4, 1e-3])
    k = stable_default("stiffness", 1e9, mass)
    c = stable_default("damping", 1e9, mass, ground=True)
    assert k * DEFAULT_STEP ** 2 / 2e-4 == pytest.approx(STABILITY_LIMITS["stiffness"] / 3)
    assert c * DEFAULT_STEP / 2e-4 == pytest.approx(2 * STABILITY_LIMITS["damping"] / 4)
    assert stable_default("stiffness", 5.0, mass) == 5.0
    assert stable_default("damping", 5.0, np.array([np.inf])) == 5.0


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

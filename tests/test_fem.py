"""Tetrahedral stable neo-Hookean FEM: invariances, conservation, analytic statics,
robustness to inverted tets, builder validation and float64 finite-difference gradients."""

import numpy as np
import pytest
import taichi as ti
import torch
from gradcheck_utils import fd_check_params
from scipy.spatial.transform import Rotation

import gradsim_taichi as gs
from gradsim_taichi.solvers.fem_tets import smith_parameters

ONE_TET = (np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]) * 0.3,
           np.array([[0, 1, 2, 3]]))


def lame(E, nu):
    return E / (2 * (1 + nu)), E * nu / ((1 + nu) * (1 - 2 * nu))


def internal_forces(model, x, v, frame=0):
    """The FEM force model's forces [N, 3] at positions x and velocities v (row 0)."""
    p, fem = model.particles, model.fem
    X, V = p.x.to_numpy(), p.v.to_numpy()
    X[0], V[0] = x, v
    p.x.from_numpy(X)
    p.v.from_numpy(V)
    p.f.fill(0)
    fem.apply_frame(p.x, p.v, p.f, 0, frame)
    return p.f.to_numpy()[0]


def free_box(**kw):
    b = gs.ModelBuilder(ground=False, gravity=(0.0, 0.0, 0.0))
    b.add_soft_box(size=(0.4, 0.3, 0.5), resolution=(2, 2, 2), density=100.0, **kw)
    return b


@ti.data_oriented
class Drag:
    """Test-only force model: ``f = -c m v``, to let a structure settle to its static state
    (drag on absolute velocity leaves the static equilibrium unchanged)."""

    def __init__(self, particles, c):
        self.p, self.c = particles, float(c)

    def params(self):
        return []

    def zero_grads(self):
        pass

    @ti.kernel
    def apply(self, x: ti.template(), v: ti.template(), f: ti.template(), row: ti.i32):
        for i in range(self.p.n):
            f[row, i] += -self.c * self.p.mass[i] * v[row, i]


@pytest.mark.filterwarnings("ignore:.*where explicit integration rings")  # not its subject
def test_invariances_momentum_and_energy_consistency():
    """Rest state, rigid rotations and rigid velocities give no force; internal forces carry
    no net force or torque; forces are minus the gradient of the elastic energy."""
    b = free_box(mu=2e3, lam=3e3, damping=7.0)
    model = b.finalize()
    sim = gs.Simulation(model, frames=1, substeps=1)  # allocates the state rows
    fem = model.fem
    rng = np.random.default_rng(3)
    x0 = sim.get_param("initial_position").astype(np.float64)
    zero = np.zeros_like(x0)
    scale = np.abs(internal_forces(model, x0 + 0.02 * rng.standard_normal(x0.shape), zero)).max()
    assert scale > 1.0  # a small deformation gives forces of this size

    assert np.abs(internal_forces(model, x0, zero)).max() < 1e-12 * scale
    for seed in range(3):
        R = Rotation.random(random_state=seed).as_matrix()
        xr = (x0 - 0.2) @ R.T + rng.standard_normal(3)
        assert np.abs(internal_forces(model, xr, zero)).max() < 1e-10 * max(scale, 1.0)

    # Random deformations and velocities: sum of forces and of torques vanish.
    for _ in range(3):
        x = x0 + 0.1 * rng.standard_normal(x0.shape)
        v = rng.standard_normal(x0.shape)
        f = internal_forces(model, x, v)
        total = np.abs(f).sum()
        assert np.abs(f.sum(axis=0)).max() < 1e-12 * total
        assert np.abs(np.cross(x, f).sum(axis=0)).max() < 1e-12 * (np.abs(x).max() * total)

    # Damping alone (mu = lam = 0): zero for uniform translation and rigid rotation
    # velocities, of a rest and of a deformed body, and non-zero for a shearing velocity.
    mu, lam = fem.mu.to_numpy(), fem.lam.to_numpy()
    fem.mu.fill(0.0)
    fem.lam.fill(0.0)
    x = x0 + 0.05 * rng.standard_normal(x0.shape)
    w, u = rng.standard_normal(3), rng.standard_normal(3)
    shear = np.stack([x0[:, 1], 0 * x0[:, 1], 0 * x0[:, 1]], axis=1)
    fd_scale = np.abs(internal_forces(model, x0, shear)).max()
    assert fd_scale > 0.1
    for pos in (x0, x):
        assert np.abs(internal_forces(model, pos, np.broadcast_to(u, x0.shape))).max() == 0.0
        rigid = u + np.cross(w, pos)
        assert np.abs(internal_forces(model, pos, rigid)).max() < 1e-12 * fd_scale
    fem.mu.from_numpy(mu)
    fem.lam.from_numpy(lam)
    fem.kd.fill(0.0)

    # Elastic forces = -dE/dx (central differences of the numpy energy), with activation.
    act = 0.1 * rng.standard_normal(fem.count)
    fem.act.from_numpy(act[None, :])
    x = x0 + 0.03 * rng.standard_normal(x0.shape)
    f = internal_forces(model, x, zero)
    grad = np.zeros_like(x)
    h = 1e-6
    for i in range(len(x)):
        for k in range(3):
            xp, xm = x.copy(), x.copy()
            xp[i, k] += h
            xm[i, k] -= h
            grad[i, k] = (fem.elastic_energy(xp, act) - fem.elastic_energy(xm, act)) / (2 * h)
    np.testing.assert_allclose(f, -grad, atol=1e-7 * np.abs(f).max())


def test_linearisation_matches_lame_parameters():
    """Small homogeneous strains store the linear-elastic energy of the given Lame
    parameters: V (mu |eps|^2 + lam/2 tr(eps)^2)."""
    mu, lam = 3e3, 5e3
    b = gs.ModelBuilder(ground=False)
    b.add_soft_mesh(*ONE_TET, mu=mu, lam=lam)
    model = b.finalize()
    fem = model.fem
    X = model.particles._x0.astype(np.float64)
    volume = float(fem.vol.to_numpy()[0])
    rng = np.random.default_rng(0)
    for _ in range(3):
        G = rng.standard_normal((3, 3))
        eps = 1e-5
        eps_sym = 0.5 * (G + G.T) * eps
        expected = volume * (mu * np.sum(eps_sym**2) + 0.5 * lam * np.trace(eps_sym) ** 2)
        got = fem.elastic_energy(X @ (np.eye(3) + eps * G).T)
        assert got == pytest.approx(expected, rel=1e-3)
    mu_s, lam_s = smith_parameters(mu, lam)
    assert (mu_s, lam_s) == pytest.approx((4 / 3 * mu, lam + 5 / 6 * mu))


def test_cantilever_matches_euler_bernoulli():
    """A beam clamped at x = 0 sags under its weight; the settled tip deflection matches
    w = q L^4 / (8 E I) within 5% (linear tets need ~8 layers through the height)."""
    L, h, E, nu, rho = 1.0, 0.1, 1e6, 0.0, 1000.0
    g = 0.005 * E * h**2 / (1.5 * rho * L**3)  # tip deflection 0.5% of the length
    mu, lam = lame(E, nu)
    res = (80, 8, 1)
    b = gs.ModelBuilder(ground=False, gravity=(0.0, -g, 0.0))
    b.add_soft_beam(L, h, h, resolution=res, clamped=True, density=rho, mu=mu, lam=lam)
    model = b.finalize()
    # Critically damp the first bending mode with drag so the beam settles fast.
    w1 = 1.875**2 * np.sqrt(E * h**2 / (12 * rho * L**4))
    model.add_force(Drag(model.particles, 2.0 * w1))
    cp = np.sqrt((lam + 2 * mu) / rho)
    dt = 0.5 * (h / res[1]) / cp
    frames = 20
    substeps = int(np.ceil(8.0 / w1 / frames / dt))
    sim = gs.Simulation(model, frames=frames, substeps=substeps, dt=dt)
    out = sim.forward()["particles"]
    tip = np.isclose(out[0, :, 0], L)
    deflection = -(out[:, tip, 1] - out[0, tip, 1]).mean(axis=1)
    q = rho * g * h * h
    w_eb = q * L**4 / (8 * E * h**4 / 12)
    assert abs(deflection[-1] - deflection[-2]) < 2e-3 * w_eb  # settled
    assert deflection[-1] == pytest.approx(w_eb, rel=0.05)


def test_undamped_energy_is_conserved():
    """An oscillating block without damping keeps its total energy within 1% over 1 s."""
    b = free_box(mu=1e3, lam=1e3, damping=0.0)
    model = b.finalize()
    sim = gs.Simulation(model, frames=50, substeps=20, dt=1e-3)
    x0 = sim.get_param("initial_position").astype(np.float64)
    c = x0.mean(axis=0)
    v0 = 0.4 * np.stack([x0[:, 1] - c[1], -(x0[:, 2] - c[2]), x0[:, 0] - c[0]], axis=1)
    sim.set_param("initial_velocity", v0)
    xs = sim.forward()["particles"]
    vs = model.particles.vc.to_numpy()
    m = model.particles.mass.to_numpy()
    energy = np.array([0.5 * np.sum(m[:, None] * v**2) + model.fem.elastic_energy(x)
                       for x, v in zip(xs, vs)])
    elastic = np.array([model.fem.elastic_energy(x) for x in xs])
    assert elastic.max() > 0.3 * energy[0]  # it really oscillates
    assert np.abs(energy - energy[0]).max() < 0.01 * energy[0]


def test_inverted_and_collapsed_tets_stay_finite_and_recover():
    """Forces stay finite for a tet collapsed to a point (where they vanish: an unstable
    equilibrium), and an inverted, a flat and a 99.9%-compressed inverted tet return to
    their rest shape."""
    b = gs.ModelBuilder(ground=False, gravity=(0.0, 0.0, 0.0))
    b.add_soft_mesh(*ONE_TET, density=100.0, mu=1e3, lam=1e3, damping=40.0)
    model = b.finalize()
    sim = gs.Simulation(model, frames=60, substeps=20, dt=5e-4)
    X = sim.get_param("initial_position").astype(np.float64)
    zero = np.zeros_like(X)
    collapsed = np.broadcast_to(X.mean(axis=0), X.shape).copy()
    assert np.all(np.isfinite(internal_forces(model, collapsed, zero)))
    c = X.mean(axis=0)
    inverted = X.copy()
    inverted[3, 2] = -0.3  # through the opposite face
    flat = X.copy()
    flat[3, 2] = 0.0
    tiny = c + 0.1 * (X - c) @ np.diag([1.0, -1.0, 1.0])  # 99.9% compressed and inverted
    for start in (inverted, flat, tiny):
        f = internal_forces(model, start, zero)
        assert np.all(np.isfinite(f)) and np.abs(f).max() > 0
        sim.set_param("initial_position", start)
        out = sim.forward()["particles"]
        assert np.all(np.isfinite(out))
        F = model.fem.deformation(out[-1])[0]
        # recovered up to a rotation: F^T F ~ I
        assert np.linalg.det(F) == pytest.approx(1.0, abs=0.02)
        assert np.abs(F.T @ F - np.eye(3)).max() < 0.02


def test_builder_merges_meshes_and_rejects_bad_input():
    b = gs.ModelBuilder()
    ids_a = b.add_soft_box(size=0.2, resolution=1, origin=(0, 0.5, 0), density=50.0)
    b.add_particle((3.0, 1.0, 0.0))
    R = Rotation.from_euler("xyz", [0.3, 0.2, 0.1]).as_matrix()
    ids_b = b.add_soft_mesh(*ONE_TET, orientation=R, scale=(1.0, 2.0, 1.0), origin=(1, 1, 1),
                            density=np.array([30.0]), mu=5.0, lam=1.0, velocity=(1, 0, 0),
                            pinned=[0])
    model = b.finalize()
    assert len(model.forces) == 1  # ONE fem model (ground contact is in the integrator)
    assert model.particles.has_ground
    assert model.fem.count == 7 and b.soft_tet_count == 7
    m = model.particles.mass.to_numpy()
    assert m[ids_a].sum() == pytest.approx(50.0 * 0.2**3)
    assert m[ids_b].sum() == pytest.approx(30.0 * 2 * 0.3**3 / 6)
    assert model.particles.pinned.to_numpy()[ids_b].tolist() == [1, 0, 0, 0]
    assert model.fem.mu.to_numpy().tolist() == [1e4] * 6 + [5.0]
    # surfaces: offsets, closed and wound outward (divergence theorem gives +volume)
    x = model.particles._x0.astype(np.float64)
    assert [o for o, _ in model.soft_surfaces] == [ids_a[0], ids_b[0]]
    for (offset, tris), vol in zip(model.soft_surfaces, (0.2**3, 2 * 0.3**3 / 6)):
        p = x[tris + offset]
        signed = np.einsum("ij,ij->i", p[:, 0], np.cross(p[:, 1], p[:, 2])).sum() / 6
        assert signed == pytest.approx(vol)
    assert len(b.soft_surfaces[0][1]) == 12

    verts, tets = ONE_TET
    bad = [
        (dict(vertices=np.vstack([verts, [[5, 5, 5]]]), tets=tets), "referenced by no tet"),
        (dict(vertices=verts, tets=[[0, 1, 2, 4]]), "out-of-range"),
        (dict(vertices=verts * [1, 1, 0], tets=tets), "zero or near-zero volume"),
        (dict(vertices=verts, tets=[[0, 1, 2]]), "shape"),
        (dict(vertices=verts, tets=tets, density=-1.0), "density"),
        (dict(vertices=verts, tets=tets, mu=1.0, lam=-1.0), "lam must be > -2/3 mu"),
        (dict(vertices=verts, tets=tets, damping=np.array([1.0, 2.0])), "damping"),
        (dict(vertices=verts, tets=tets, orientation=np.ones((3, 3))), "rotation"),
        (dict(vertices=verts, tets=tets, scale=0.0), "scale"),
        (dict(vertices=verts, tets=tets, pinned=[7]), "pinned"),
        (dict(vertices=verts, tets=tets, pinned=np.array([True])), "pinned"),
    ]
    for kwargs, message in bad:
        with pytest.raises(ValueError, match=message):
            gs.ModelBuilder().add_soft_mesh(**kwargs)
    with pytest.raises(ValueError, match="not both"):
        gs.ModelBuilder().add_soft_beam(clamped=True, pinned=[0])


def _contact_box_sim():
    b = gs.ModelBuilder(contact_ke=5e3, contact_kd=5.0, contact_kf=5.0, contact_mu=0.4)
    b.add_soft_box(size=0.2, resolution=1, origin=(0.0, 0.0137, 0.0), density=80.0, mu=800.0,
                   lam=1200.0, damping=2.0, velocity=(0.8, -1.0, 0.3))
    model = b.finalize()
    sim = gs.Simulation(model, frames=4, substeps=10)
    rng = np.random.default_rng(1)
    t = model.fem.count
    sim.set_param("tet_mu", 800.0 * (1 + 0.2 * rng.random(t)))
    sim.set_param("tet_lambda", 1200.0 * (1 + 0.2 * rng.random(t)))
    sim.set_param("tet_damping", 2.0 * (1 + 0.2 * rng.random(t)))
    sim.set_param("tet_activation", 0.05 * rng.standard_normal((4, t)))
    sim.set_param("density", 80.0 * (1 + 0.2 * rng.random(t)))
    return model, sim


def test_gradients_match_finite_differences_through_ground_contact():
    model, sim = _contact_box_sim()
    out = sim.forward()["particles"]
    assert out[:, :, 1].min() < 0.01  # the box does reach into the contact band
    weights = np.random.default_rng(2).standard_normal(out.shape)
    names = ["tet_mu", "tet_lambda", "tet_damping", "tet_activation", "density",
             "initial_velocity", "initial_position"]
    fd_check_params(sim, names, weights)

    # Through torch: a global mu broadcasts, and its gradient is the per-tet sum.
    mu = torch.tensor(850.0, dtype=torch.float64, requires_grad=True)
    rho = torch.tensor(90.0, dtype=torch.float64, requires_grad=True)
    xs = gs.simulate(sim, {"tet_mu": mu, "density": rho})["particles"]
    (xs * torch.from_numpy(weights)).sum().backward()
    assert mu.grad.item() == pytest.approx(sim.param_grad("tet_mu").sum(), rel=1e-12)
    assert rho.grad.item() == pytest.approx(sim.param_grad("density").sum(), rel=1e-12)
    # density drives the particle masses: lumped, total = rho * volume
    assert model.particles.mass.to_numpy().sum() == pytest.approx(90.0 * 0.2**3)

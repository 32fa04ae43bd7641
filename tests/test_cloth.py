"""Cloth: triangle membranes, dihedral bending, aerodynamics and the cloth builders.

Physics against analytic results (energy gradients, the Bridson angle gradients, a
terminal velocity), invariants (momentum, rest states), robustness (flat, fully folded
and degenerate hinges, collapsed triangles) and float64 finite-difference checks of
every learnable cloth parameter through rollouts with ground contact.
"""

import numpy as np
import pytest
import taichi as ti
import torch

import gradsim_taichi as gs
from gradsim_taichi import runtime
from gradsim_taichi.meshes import cloth_grid, triangle_areas
from gradsim_taichi.solvers.aerodynamics import Aerodynamics
from gradsim_taichi.solvers.bending import Bending, dihedral_angles, mesh_hinges
from gradsim_taichi.solvers.cloth_triangles import ClothTriangles, triangle_rest_pose

# ---- helpers ------------------------------------------------------------------------


class Fields:
    """State fields of one row for evaluating a force model directly."""

    def __init__(self, n):
        real = runtime.real()
        self.x = ti.Vector.field(3, real, shape=(1, n), needs_grad=True)
        self.v = ti.Vector.field(3, real, shape=(1, n), needs_grad=True)
        self.f = ti.Vector.field(3, real, shape=(1, n), needs_grad=True)

    def forces(self, model, x, v=None):
        self.x.from_numpy(np.asarray(x, dtype=np.float64)[None])
        self.v.from_numpy((np.zeros_like(x) if v is None else np.asarray(v, np.float64))[None])
        self.f.fill(0)
        if hasattr(model, "apply_frame"):
            model.apply_frame(self.x, self.v, self.f, 0, 0)
        else:
            model.apply(self.x, self.v, self.f, 0)
        return self.f.to_numpy()[0]

    def input_grads(self, model, f_grad):
        """Adjoint of the force kernel: dL/dx, dL/dv for dL/df = f_grad."""
        for fl in (self.x, self.v, self.f):
            fl.grad.fill(0)
        self.f.grad.from_numpy(np.asarray(f_grad, dtype=np.float64)[None])
        model.apply.grad(self.x, self.v, self.f, 0)
        return self.x.grad.to_numpy()[0], self.v.grad.to_numpy()[0]


def fd_gradient(fn, x, eps=1e-6):
    """Central differences of a scalar function of an array."""
    g = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[idx] += eps
        xm[idx] -= eps
        g[idx] = (fn(xp) - fn(xm)) / (2 * eps)
    return g


def random_rotation(rng):
    q, r = np.linalg.qr(rng.standard_normal((3, 3)))
    q *= np.sign(np.diag(r))
    return q if np.linalg.det(q) > 0 else -q


def hinge_positions(phi, h1=0.4, h2=0.3, length=1.0):
    """Hinge of two triangles (0, 1, 2) and (1, 0, 3) along the x axis, wing 3 rotated
    about the edge by ``phi`` out of the flat (xz) configuration."""
    x = np.array([[0.0, 0.0, 0.0], [length, 0.0, 0.0], [0.4, 0.0, -h1], [0.5, 0.0, h2]])
    x[3] = [0.5, h2 * np.sin(phi), h2 * np.cos(phi)]
    return x


HINGE_TRIS = np.array([[0, 1, 2], [1, 0, 3]])


# ---- bending ------------------------------------------------------------------------


def test_bending_flat_zero_restoring_analytic_and_folded_finite():
    hinges = mesh_hinges(HINGE_TRIS)
    assert hinges.tolist() == [[2, 3, 0, 1]]
    ke, kd = 0.7, 0.05
    bend = Bending(hinges, [0.0], [ke], [kd])
    fl = Fields(4)
    rng = np.random.default_rng(0)

    # flat (rest angle 0): no force, also with in-plane velocities
    x = hinge_positions(0.0)
    assert abs(dihedral_angles(x, hinges)[0]) < 1e-15
    v_plane = rng.standard_normal((4, 3)) * [1, 0, 1]
    assert np.abs(fl.forces(bend, x, v_plane)).max() < 1e-12

    # bent: f_a = -|e| (ke theta + kd dtheta/dt) dtheta/dx_a, angle gradients by FD
    for phi in (0.3, -1.1, 2.5):
        x = hinge_positions(phi)
        theta = dihedral_angles(x, hinges)[0]
        assert abs(abs(theta) - abs(phi)) < 1e-12
        dtheta = fd_gradient(lambda y: dihedral_angles(y, hinges)[0], x)
        v = rng.standard_normal((4, 3))
        rate = float((dtheta * v).sum())
        f = fl.forces(bend, x, v)
        np.testing.assert_allclose(f, -1.0 * (ke * theta + kd * rate) * dtheta, atol=1e-8)
        # the wing force of the elastic part alone: ke |theta| |e| / h1 (h1 = wing height)
        fe = fl.forces(bend, x)
        assert abs(np.linalg.norm(fe[2]) - ke * abs(theta) / 0.4) < 1e-10
        # restoring: a small step along the elastic force reduces |theta|
        theta2 = dihedral_angles(x + 1e-4 * fe / np.abs(fe).max(), hinges)[0]
        assert abs(theta2) < abs(theta)

    # fully folded (theta = +-pi), degenerate wing and zero-length edge: finite values and
    # finite adjoints
    folded = hinge_positions(np.pi)
    flat_wing = hinge_positions(0.3)
    flat_wing[2] = [0.3, 0.0, 0.0]  # on the edge line: no normal
    no_edge = hinge_positions(0.3)
    no_edge[1] = no_edge[0]
    for x, expect_zero in ((folded, False), (flat_wing, True), (no_edge, True)):
        f = fl.forces(bend, x, rng.standard_normal((4, 3)))
        assert np.all(np.isfinite(f))
        assert (np.abs(f).max() == 0.0) == expect_zero
        gx, gv = fl.input_grads(bend, rng.standard_normal((4, 3)))
        assert np.all(np.isfinite(gx)) and np.all(np.isfinite(gv))
    f = fl.forces(bend, folded)
    assert abs(np.linalg.norm(f[2]) - ke * np.pi / 0.4) < 1e-9


def test_bending_adjoint_matches_finite_differences():
    """The hand-written adjoint: dL/dx, dL/dv and the parameter gradients of L = g . f(x, v)
    against central differences, at bent, nearly flat and nearly folded hinges."""
    hinges = mesh_hinges(HINGE_TRIS)
    rng = np.random.default_rng(5)
    for phi in (0.7, -2.9, 1e-3):
        check_bending_adjoint(hinges, hinge_positions(phi) + 0.05 * rng.standard_normal((4, 3)),
                              rng.standard_normal((4, 3)), rng.standard_normal((4, 3)), phi)


def check_bending_adjoint(hinges, x, v, g, label):
    bend = Bending(hinges, [0.2], [0.7], [0.05])
    fl = Fields(4)
    fd_x = fd_gradient(lambda y: float((g * fl.forces(bend, y, v)).sum()), x)
    fd_v = fd_gradient(lambda y: float((g * fl.forces(bend, x, y)).sum()), v)
    fl.forces(bend, x, v)  # the adjoint reads the state (and angle) of the last evaluation
    gx, gv = fl.input_grads(bend, g)
    np.testing.assert_allclose(gx, fd_x, atol=1e-6 * np.abs(fd_x).max())
    np.testing.assert_allclose(gv, fd_v, atol=1e-6 * np.abs(fd_v).max())
    for field, value in ((bend.ke, 0.7), (bend.kd, 0.05)):
        def loss(val, field=field, value=value):
            field[0] = val
            out = float((g * fl.forces(bend, x, v)).sum())
            field[0] = value
            return out
        fd = (loss(value + 1e-7) - loss(value - 1e-7)) / 2e-7
        assert abs(field.grad[0] - fd) <= 1e-6 * max(abs(fd), 1e-3), (label, fd)


# ---- membrane -----------------------------------------------------------------------


def membrane_energy(x, tris, dm, a0, ke, ka, act):
    """E = A0 (ke/2 |F|^2 + ka/2 (J - alpha + a)^2) summed over triangles (numpy)."""
    p, q, r = x[tris[:, 0]], x[tris[:, 1]], x[tris[:, 2]]
    f = np.stack([q - p, r - p], axis=2) @ dm  # [T, 3, 2]
    j = 0.5 * np.linalg.norm(np.cross(q - p, r - p), axis=1) / a0
    alpha = 1.0 + ke / ka
    return float((a0 * (0.5 * ke * (f**2).sum((1, 2)) + 0.5 * ka * (j - alpha + act) ** 2)).sum())


def area_ratio(x, tris, a0):
    p, q, r = x[tris[:, 0]], x[tris[:, 1]], x[tris[:, 2]]
    return 0.5 * np.linalg.norm(np.cross(q - p, r - p), axis=1) / a0


def test_membrane_energy_gradient_damping_rest_and_momentum():
    rng = np.random.default_rng(1)
    grid = cloth_grid((1.0, 0.8), (3, 2), plane="xz")
    x0, tris = grid.vertices, grid.triangles.astype(np.int64)
    nt, n = len(tris), len(x0)
    ke, ka, kd = rng.uniform(50, 150, nt), rng.uniform(80, 200, nt), rng.uniform(0.5, 2, nt)
    membrane = ClothTriangles(tris, x0, ke, ka, kd)
    membrane.allocate(1, 1)
    act = rng.uniform(-0.2, 0.2, (1, nt))
    membrane.act.from_numpy(act)
    hinges = mesh_hinges(tris)
    bend = Bending(hinges, dihedral_angles(x0, hinges), rng.uniform(0.1, 1, len(hinges)),
                   rng.uniform(0.01, 0.1, len(hinges)))
    dm, a0 = triangle_rest_pose(x0[tris[:, 0]], x0[tris[:, 1]], x0[tris[:, 2]])
    fl = Fields(n)

    # elastic force = -dE/dx at a random deformation, with activation
    x = x0 + 0.1 * rng.standard_normal((n, 3))
    f = fl.forces(membrane, x)
    grad = fd_gradient(lambda y: membrane_energy(y, tris, dm, a0, ke, ka, act[0]), x)
    np.testing.assert_allclose(f, -grad, atol=1e-7 * np.abs(grad).max())

    # damping: f_d = -kd A0 (dJ/dt) dJ/dx per triangle
    v = rng.standard_normal((n, 3))
    fd = fl.forces(membrane, x, v) - f
    expect = np.zeros((n, 3))
    for t in range(nt):
        tri = tris[t:t + 1]
        dj = fd_gradient(lambda y, tri=tri, t=t: area_ratio(y, tri, a0[t:t + 1])[0], x)
        expect -= kd[t] * a0[t] * (dj * v).sum() * dj
    np.testing.assert_allclose(fd, expect, atol=1e-7 * np.abs(expect).max())

    # rest shape moved rigidly (rotation + translation, rigid velocity): no force
    membrane.act.fill(0)
    rot = random_rotation(rng)
    xr = x0 @ rot.T + rng.standard_normal(3)
    omega, lin = rng.standard_normal(3), rng.standard_normal(3)
    vr = np.cross(omega, xr) + lin
    assert np.abs(fl.forces(membrane, xr, vr)).max() < 1e-12 * ke.max()
    assert np.abs(fl.forces(bend, xr, vr)).max() < 1e-12

    # internal forces of a random deformation: zero net force and zero net torque
    membrane.act.from_numpy(act)
    for seed in range(3):
        r = np.random.default_rng(10 + seed)
        x = x0 + 0.3 * r.standard_normal((n, 3))
        v = r.standard_normal((n, 3))
        for model in (membrane, bend):
            f = fl.forces(model, x, v)
            scale = np.abs(f).sum()
            assert scale > 1e-3
            assert np.abs(f.sum(0)).max() < 1e-12 * scale
            assert np.abs(np.cross(x, f).sum(0)).max() < 1e-12 * scale * np.abs(x).max()

    # a triangle squashed to a line or a point: finite forces
    for squash in (x0 * [1.0, 0.0, 0.0], np.zeros_like(x0)):
        assert np.all(np.isfinite(fl.forces(membrane, squash, v)))


def test_stretched_and_compressed_triangle_return_to_rest():
    """A free equilateral triangle (no gravity) scaled up, or squashed to 1% of its area,
    returns to its rest size (its motion is a pure area mode, which tri_kd damps)."""
    side = 0.1
    tri = np.array([[0.0, 0.0, 0.0], [side, 0.0, 0.0], [side / 2, 0.0, side * 3**0.5 / 2]])
    b = gs.ModelBuilder(gravity=(0.0, 0.0, 0.0), ground=False)
    b.add_cloth_mesh(tri, [[0, 2, 1]], mass=0.01, tri_ke=100.0, tri_ka=100.0, tri_kd=1.0)
    sim = gs.Simulation(b.finalize(), frames=60, substeps=20)
    centre = tri.mean(0)

    def edge_lengths(x):
        return np.linalg.norm(x - np.roll(x, 1, axis=0), axis=1)

    for scale in (1.3, 0.1):
        x0 = centre + scale * (tri - centre)
        sim.set_param("initial_position", x0)
        out = sim.forward()["particles"]
        assert np.all(np.isfinite(out))
        np.testing.assert_allclose(edge_lengths(out[-1]), side, rtol=1e-3)
        assert abs(edge_lengths(out[1])[0] - side) < abs(edge_lengths(x0)[0] - side)


# ---- whole-cloth behaviour ------------------------------------------------------------


def test_hanging_cloth_comes_to_rest():
    """A cloth hanging from two corners sags under gravity, oscillates and comes to rest.
    (The reference's damping acts on area rates and hinge angles only, so it starts in
    its hanging plane: a swing about the pins is a rigid motion that only air drag,
    quadratic in speed, would damp.)"""
    b = gs.ModelBuilder(ground=False)
    cloth = b.add_cloth_grid(size=(1.0, 1.0), resolution=(4, 4), origin=(0.0, 0.0, 0.0),
                             plane="xy", mass=0.02, pinned="top_corners", tri_ke=300.0,
                             tri_ka=300.0, tri_kd=4.0, edge_ke=0.01, edge_kd=0.01)
    sim = gs.Simulation(b.finalize(), frames=300, substeps=20)
    out = sim.forward()["particles"]
    speed = np.abs(sim.model.particles.vc.to_numpy()).max(axis=(1, 2))
    pins = cloth.grid.corners[[3, 2]]
    np.testing.assert_array_equal(out[-1, pins], out[0, pins])
    assert speed[:60].max() > 0.05  # it did move
    assert speed[-30:].max() < 5e-4  # and is at rest over the last half second
    sag = out[0, :, 1] - out[-1, :, 1]
    assert sag.max() > 5e-3 and sag[pins].max() == 0.0

    # inverted in-plane: an interior vertex pushed past its neighbours flips two
    # triangles; the forces stay finite and every triangle regains its rest area
    x0 = sim.get_param("initial_position")
    x0[cloth.grid.index(1, 2), 0] += 0.6
    tris = cloth.grid.triangles
    assert (np.cross(x0[tris[:, 1]] - x0[tris[:, 0]], x0[tris[:, 2]] - x0[tris[:, 0]])[:, 2]
            < 0).sum() == 2
    sim.set_param("initial_position", x0)
    out = sim.forward()["particles"]
    assert np.all(np.isfinite(out))
    np.testing.assert_allclose(triangle_areas(out[-1], tris),
                               triangle_areas(cloth.grid.vertices, tris), rtol=0.05)


@pytest.mark.parametrize("precision",
                         ["f64", pytest.param("f32", marks=pytest.mark.precision("f32"))])
def test_aerodynamics_terminal_velocity_and_wind(precision):
    """A flat sheet with area-lumped mass falls flat; with drag and lift its terminal
    speed is sqrt(rho g / (3 (kd + kl pi / 2))) (the force on each vertex is the
    triangle's, as in the reference); in vacuum it falls freely; a horizontal wind drags
    it along until it moves with the wind."""
    rho, drag, lift, g = 0.1, 0.5, 0.2, 9.8
    b = gs.ModelBuilder(ground=False)
    b.add_cloth_grid(size=(0.4, 0.4), resolution=(2, 2), origin=(0.0, 1.0, 0.0),
                     density=rho, tri_ke=50.0, tri_ka=50.0, tri_kd=0.1, edge_ke=1e-3, drag=drag,
                     lift=lift)
    b.set_wind((0.0, 0.0, 0.0))
    sim = gs.Simulation(b.finalize(), frames=60, substeps=10)
    out = sim.forward()["particles"]
    v = sim.model.particles.vc.to_numpy()
    u_t = np.sqrt(rho * g / (3.0 * (drag + lift * np.pi / 2)))
    f32 = precision == "f32"
    assert gs.info()["precision"] == precision
    np.testing.assert_allclose(v[-1, :, 1], -u_t, rtol=1e-3 if f32 else 1e-4)
    assert np.ptp(out[-1, :, 1]) < (1e-5 if f32 else 1e-9)  # stayed flat
    drop_aero = out[0, 0, 1] - out[-1, 0, 1]

    sim.set_param("cloth_drag", 0.0)
    sim.set_param("cloth_lift", 0.0)
    out = sim.forward()["particles"]
    steps, dt = sim.frames * sim.substeps, sim.dt
    drop_vacuum = out[0, 0, 1] - out[-1, 0, 1]
    # semi-implicit Euler free fall: g dt^2 n (n + 1) / 2
    np.testing.assert_allclose(drop_vacuum, g * dt**2 * steps * (steps + 1) / 2,
                               rtol=1e-4 if f32 else 1e-12)
    assert drop_aero < 0.5 * drop_vacuum

    sim.set_param("cloth_drag", drag)
    sim.set_param("cloth_lift", lift)
    sim.set_param("wind", [0.7, 0.0, -0.2])
    sim.forward()
    v = sim.model.particles.vc.to_numpy()
    np.testing.assert_allclose(v[-1, :, 0], 0.7, rtol=1e-3)
    np.testing.assert_allclose(v[-1, :, 2], -0.2, rtol=1e-3)


# ---- gradients ------------------------------------------------------------------------

GRAD_PARAMS = ("tri_ke", "tri_ka", "tri_kd", "tri_activation", "edge_ke", "edge_kd",
               "cloth_lift", "cloth_drag", "wind", "mass", "initial_velocity")


def test_cloth_gradients_match_finite_differences_through_ground_contact():
    rng = np.random.default_rng(2)
    # friction stiffness inside explicit stability (kf dt / m = 0.4 for these 20 g
    # particles at 600 Hz; the default 1000 is 83, where gradients go wrong first)
    b = gs.ModelBuilder(contact_kd=1.0, contact_kf=5.0)
    cloth = b.add_cloth_grid(size=(0.3, 0.3), resolution=(2, 2), origin=(0.0, 0.03, 0.0),
                             mass=0.02, tri_ke=200.0, tri_ka=300.0, tri_kd=0.5, edge_ke=0.05,
                             edge_kd=0.002, lift=0.3, drag=0.5)
    b.set_wind((1.0, 0.5, -0.5))
    sim = gs.Simulation(b.finalize(), frames=4, substeps=10)
    n, nt = sim.model.particle_count, len(cloth.faces)
    assert set(GRAD_PARAMS) <= set(sim.params.names())
    sim.set_param("initial_velocity", [0.3, -1.0, 0.2] + 0.5 * rng.standard_normal((n, 3)))
    sim.set_param("tri_activation", 0.1 * rng.standard_normal((4, nt)))
    sim.set_param("tri_ke", 200.0 * rng.uniform(0.8, 1.2, nt))
    sim.set_param("edge_ke", 0.05 * rng.uniform(0.8, 1.2, len(cloth.hinges)))
    w = rng.standard_normal((5, n, 3))

    def loss():
        return float((w * sim.forward()["particles"]).sum())

    loss()
    out = sim.model.particles.output()
    assert out[:, :, 1].min() < sim.model.ground.radius  # in contact with the ground
    sim.backward({"particles": w})
    for name in GRAD_PARAMS:
        p0 = sim.get_param(name).astype(np.float64)
        grad = sim.param_grad(name)
        d = rng.standard_normal(p0.shape)
        eps = 1e-6 * max(np.abs(p0).max(), 1e-2)
        sim.set_param(name, p0 + eps * d)
        lp = loss()
        sim.set_param(name, p0 - eps * d)
        lm = loss()
        sim.set_param(name, p0)
        fd = (lp - lm) / (2 * eps)
        analytic = float((grad * d).sum())
        assert abs(fd) > 1e-8, name  # the parameter matters
        assert abs(analytic - fd) <= 1e-5 * abs(fd), (name, analytic, fd)

    # the same through the torch bridge, for global parameters given as tensors
    drag = torch.tensor(0.5, dtype=torch.float64, requires_grad=True)
    wind = torch.tensor([1.0, 0.5, -0.5], dtype=torch.float64, requires_grad=True)
    x = gs.simulate(sim, {"cloth_drag": drag, "wind": wind})["particles"]
    (x * torch.as_tensor(w)).sum().backward()
    sim.forward()
    sim.backward({"particles": w})
    np.testing.assert_allclose(drag.grad.numpy(), sim.param_grad("cloth_drag"), rtol=1e-12)
    np.testing.assert_allclose(wind.grad.numpy(), sim.param_grad("wind"), rtol=1e-12)


# ---- builders -----------------------------------------------------------------------


def test_cloth_builders_merge_pin_and_load(tmp_path):
    import trimesh

    b = gs.ModelBuilder()
    a = b.add_cloth_grid(resolution=(2, 3), pinned=["top_left", "bottom_right"], density=0.2)
    assert a.particles.tolist() == list(range(12))
    assert a.faces.shape == (12, 3) and len(a.hinges) == 2 * 2 + 1 * 3 + 2 * 3
    pinned = b.particle_pinned()
    assert sorted(np.nonzero(pinned)[0].tolist()) == sorted(a.grid.corners[[3, 1]].tolist())
    # area-lumped mass: total = density * area
    assert abs(b.particle_masses().sum() - 0.2) < 1e-12

    mesh = trimesh.creation.icosphere(subdivisions=1)
    path = tmp_path / "ball.obj"
    mesh.export(path)
    c = b.add_cloth_from_file(path, origin=(0, 2, 0), scale=0.5, mass=0.01, pinned=[0],
                              tri_ke=[1.0] * len(mesh.faces))
    assert c.particles[0] == 12 and len(c.particles) == len(mesh.vertices)
    assert len(c.hinges) == len(mesh.edges_unique)  # closed surface: every edge is a hinge
    np.testing.assert_allclose(b.particle_positions(c.particles).mean(0), [0, 2, 0], atol=1e-9)
    assert c.triangles[0] == 12 and c.hinges[0] == len(a.hinges)

    model = b.finalize()
    kinds = [type(f) for f in model.forces]
    assert kinds.count(ClothTriangles) == 1 and kinds.count(Bending) == 1
    assert Aerodynamics not in kinds  # no lift / drag / wind: no aerodynamics
    tri = next(f for f in model.forces if isinstance(f, ClothTriangles))
    assert tri.count == 12 + len(mesh.faces)
    np.testing.assert_array_equal(tri.tris.to_numpy()[12:], c.faces)


@pytest.mark.parametrize("kwargs, message", [
    (dict(pinned="middle"), "pinned='middle'"),
    (dict(pinned=[0, 99]), "out of range"),
    (dict(tri_ka=0.0), "tri_ka must be > 0"),
    (dict(tri_ke=[1.0, 2.0]), "tri_ke must be a scalar or have length 8"),
    (dict(mass=0.1, density=1.0), "either mass"),
    (dict(edge_kd=-1.0), "edge_kd must be >= 0"),
    (dict(drag=-0.5), "drag must be a finite scalar >= 0"),
])
def test_cloth_grid_rejects_bad_input(kwargs, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("[", r"\[")):
        gs.ModelBuilder().add_cloth_grid(resolution=(2, 2), **kwargs)


def test_cloth_mesh_rejects_bad_meshes():
    b = gs.ModelBuilder()
    x = np.array([[0, 0, 0], [1, 0, 0], [0, 0, 1], [1, 0, 1], [0, 1, 0]], dtype=float)
    with pytest.raises(ValueError, match="inconsistent winding"):
        b.add_cloth_mesh(x[:4], [[0, 1, 2], [1, 2, 3]])
    with pytest.raises(ValueError, match="non-manifold"):
        b.add_cloth_mesh(np.r_[x[[0, 1, 2, 4]], [[0, -1, 0]]], [[0, 1, 2], [1, 0, 3], [0, 1, 4]])
    with pytest.raises(ValueError, match="zero or near-zero area"):
        b.add_cloth_mesh([[0, 0, 0], [1, 0, 0], [2, 0, 0]], [[0, 1, 2]])
    with pytest.raises(ValueError, match="named pin sets need a cloth grid"):
        b.add_cloth_mesh(x[:3], [[0, 1, 2]], pinned="corners")
    with pytest.raises(ValueError, match="rotation"):
        b.add_cloth_mesh(x[:3], [[0, 1, 2]], orientation=2 * np.eye(3))
    b.add_cloth_grid(resolution=(1, 1), drag=0.5)
    with pytest.raises(ValueError, match="conflicts"):
        b.add_cloth_grid(resolution=(1, 1), drag=0.7)
    assert b.particle_count == 4
    with pytest.raises(ValueError, match="needs cloth triangles"):
        nb = gs.ModelBuilder()
        nb.add_particle((0, 1, 0))
        nb.set_wind((1, 0, 0))
        nb.finalize()

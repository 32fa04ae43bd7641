"""Rigid bodies: closed-form motion, conservation, contact behaviour, applied loads and
float64 finite-difference checks of every learnable parameter.

Models are cached per Taichi generation (compiling the rigid kernels is the slow part),
so tests reuse a few Simulations and change their parameters."""

import numpy as np
import pytest
import torch

import gradsim_taichi as gs
from gradsim_taichi import runtime

G = 9.8
BOX = (0.4, 0.2, 0.3)  # asymmetric: three different principal moments
_cache: dict = {}


def cached(key, make):
    """A Simulation built once per Taichi generation (a re-init frees its fields)."""
    hit = _cache.get(key)
    if hit is None or hit[0] != runtime.generation():
        hit = _cache[key] = (runtime.generation(), make())
    return hit[1]


def free_sim():
    """A box and a sphere, no ground; on the box a point load (world), a body-frame load
    and an impulse."""
    b = gs.ModelBuilder(ground=False)
    b.add_rigid_box(BOX, mass=2.0)
    b.add_rigid_sphere(0.3, 1, density=100.0)
    b.add_body_force(0, (0.0, 0.0, 0.0), point=(0.2, 0.1, 0.0), frames=[0])
    b.add_body_force(0, (0.0, 0.0, 0.0), point=(0.0, 0.1, 0.15), frame="body", frames=[0])
    b.add_body_impulse(0, (0.0, 0.0, 0.0), start=0.004, duration=0.021)
    return gs.Simulation(b.finalize(), frames=60, substeps=32)


def ground_sim():
    b = gs.ModelBuilder(contact_ke=1e4, contact_kd=100.0, contact_kf=1e3, contact_mu=0.3)
    b.add_rigid_box(BOX, mass=1.0)
    return gs.Simulation(b.finalize(), frames=60, substeps=32)


def run(sim, **params):
    """Set parameters (others reset to neutral defaults), run, return the body states."""
    defaults = dict(body_position=0.0, body_orientation=(1.0, 0, 0, 0), body_velocity=0.0,
                    body_angular_velocity=0.0, body_force=0.0, body_torque=0.0,
                    body_com_offset=0.0, body_inertia_scale=1.0, body_linear_damping=0.0,
                    body_linear_drag=0.0, body_angular_damping=0.0, body_angular_drag=0.0)
    for name in sim.params.names():
        if name.startswith("body_point_force") or name == "body_impulse":
            defaults[name] = 0.0
    for name, value in {**defaults, **params}.items():
        sim.set_param(name, value)
    out = sim.forward()
    return out["rigid"], sim.model.systems[-1].body_states()


def rotation(q):
    w, x, y, z = q
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                     [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                     [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])


def box_inertia(m, e=BOX):
    a, b, c = e
    return np.diag([b * b + c * c, a * a + c * c, a * a + b * b]) * m / 12


def momentum(states, inertia):
    return np.array([rotation(q) @ inertia @ rotation(q).T @ w
                     for q, w in zip(states["orientation"][:, 0],
                                     states["angular_velocity"][:, 0])])


def test_projectile_and_output_vertices():
    sim = cached("free", free_sim)
    q0 = np.array([0.9, 0.3, -0.2, 0.1])
    x0, v0 = np.array([0.1, 2.0, -0.3]), np.array([1.5, 4.0, 0.5])
    verts, st = run(sim, body_position=x0, body_velocity=v0, body_orientation=q0,
                    body_angular_velocity=(0.5, -1.0, 2.0))
    t = np.arange(61) / 60.0
    dt = 1.0 / (60 * 32)
    g = np.array([0.0, -G, 0.0])
    # symplectic Euler's exact discrete solution, and the closed form within O(dt)
    discrete = x0 + v0 * t[:, None] + 0.5 * g * (t * (t + dt))[:, None]
    np.testing.assert_allclose(st["position"][:, 0], discrete, atol=1e-10)
    exact = x0 + v0 * t[:, None] + 0.5 * g * (t * t)[:, None]
    assert np.abs(st["position"][:, 0] - exact).max() < 0.6 * G * dt
    np.testing.assert_allclose(st["velocity"][:, 0], v0 + g * t[:, None], atol=1e-10)
    # rendered vertices = COM + R (p - com); at t = 0 the mesh is placed by the pose
    import trimesh

    p = trimesh.creation.box(BOX).vertices
    r0 = rotation(q0 / np.linalg.norm(q0))
    np.testing.assert_allclose(verts[0, :8], x0 + p @ r0.T, atol=1e-12)
    r = rotation(st["orientation"][-1, 0])
    np.testing.assert_allclose(verts[-1, :8], st["position"][-1, 0] + p @ r.T, atol=1e-12)
    # the second body: its vertices follow the box's in the output, same free flight
    system = sim.model.systems[-1]
    assert [o for o, _ in system.meshes] == [0, 8] and verts.shape == (61, 8 + 42, 3)
    assert system.faces.shape == (12 + 80, 3) and system.faces[12:].min() == 8
    np.testing.assert_allclose(st["position"][:, 1], discrete, atol=1e-10)
    sphere = trimesh.creation.icosphere(1, 0.3).vertices
    r = rotation(st["orientation"][-1, 1])
    np.testing.assert_allclose(verts[-1, 8:], st["position"][-1, 1] + sphere @ r.T, atol=1e-12)


def test_torque_free_spin_conserves_angular_momentum():
    sim = cached("free", free_sim)
    # spin mostly about the intermediate axis (z): strongly unstable, w changes a lot
    _, st = run(sim, body_angular_velocity=(0.3, 0.4, 15.0), body_position=(0, 5.0, 0))
    L = momentum(st, box_inertia(2.0))
    assert np.abs(L - L[0]).max() / np.linalg.norm(L[0]) < 1e-6
    norms = np.linalg.norm(st["orientation"][:, 0], axis=1)
    assert np.abs(norms - 1.0).max() < 1e-12
    w = st["angular_velocity"][:, 0]
    assert np.abs(w - w[0]).max() > 0.3 * np.linalg.norm(w[0])  # it really tumbles
    inertia = box_inertia(2.0)
    energy = [0.5 * wi @ rotation(q) @ inertia @ rotation(q).T @ wi
              for q, wi in zip(st["orientation"][:, 0], w)]
    assert abs(energy[-1] - energy[0]) / energy[0] < 0.01


def test_damping_decays_momentum_and_angular_momentum_at_their_rates():
    """Force -m c v and torque -c' L, nothing else: after n substeps of dt the momentum
    is p0 (1 - c dt)^n and the angular momentum L0 (1 - c' dt)^n (the integrator's exact
    discrete decay; exp(-c t) as dt -> 0), while the body tumbles."""
    sim = cached("free", free_sim)
    c_lin, c_ang = 0.8, 1.7
    _, st = run(sim, body_velocity=(1.5, -0.4, 0.3), body_angular_velocity=(0.3, 0.4, 15.0),
                body_position=(0, 5.0, 0), body_linear_damping=c_lin,
                body_angular_damping=c_ang)
    G_free = np.array([0.0, -G, 0.0])
    n = np.arange(sim.frames + 1) * sim.substeps
    # the box (body 0) under gravity: v_k = (v0 - g/c)(1 - c dt)^k + g/c
    v = st["velocity"][:, 0]
    decay = (1 - c_lin * sim.dt) ** n
    want = (np.array([1.5, -0.4, 0.3]) - G_free / c_lin) * decay[:, None] + G_free / c_lin
    np.testing.assert_allclose(v, want, rtol=0, atol=1e-12)
    L = momentum(st, box_inertia(2.0))
    np.testing.assert_allclose(L, L[0] * ((1 - c_ang * sim.dt) ** n)[:, None], rtol=0,
                               atol=1e-9 * np.linalg.norm(L[0]))
    t = n * sim.dt  # and close to the continuous exp(-c t)
    assert np.abs(decay / np.exp(-c_lin * t) - 1).max() < 1e-3
    w = st["angular_velocity"][:, 0]
    assert np.abs(w - w[0]).max() > 0.3 * np.linalg.norm(w[0])  # it really tumbles


def test_quadratic_damping_follows_the_closed_form_speed():
    """Force -m (c + c2 |v|) v alone along a line: v(t) = c v0 e^(-ct) / (c + c2 v0 (1 -
    e^(-ct))); the angular twin -(d + d2 |w|) L about a principal axis, the same form."""
    sim = cached("free", free_sim)
    c, c2, d, d2, v0, w0 = 0.6, 0.9, 0.4, 0.05, 3.0, 12.0
    gravity = sim.model.systems[-1].gravity
    g = gravity.to_numpy()
    gravity.from_numpy(np.zeros(3, dtype=g.dtype))
    try:
        _, st = run(sim, body_velocity=(v0, 0.0, 0.0), body_angular_velocity=(0.0, 0.0, w0),
                    body_linear_damping=c, body_linear_drag=c2, body_angular_damping=d,
                    body_angular_drag=d2)
    finally:
        gravity.from_numpy(g)
    t = np.arange(sim.frames + 1) * sim.substeps * sim.dt

    def closed(rate, quad, s0):
        return rate * s0 * np.exp(-rate * t) / (rate + quad * s0 * (1 - np.exp(-rate * t)))

    v, w = st["velocity"][:, 0], st["angular_velocity"][:, 0]
    np.testing.assert_allclose(v[:, 0], closed(c, c2, v0), rtol=2e-3)
    np.testing.assert_allclose(w[:, 2], closed(d, d2, w0), rtol=2e-3)
    assert v[-1, 0] < 0.5 * v0 and w[-1, 2] < 0.8 * w0  # both really decay
    assert np.abs(v[:, 1:]).max() < 1e-12 and np.abs(w[:, :2]).max() < 1e-9


def test_off_com_force_gives_r_cross_f_and_impulse_momentum():
    sim = cached("free", free_sim)
    f = np.array([0.0, 0.0, 1e-4])  # tiny: the box barely turns during the frame
    pf = np.zeros((60, 2, 3))
    pf[0, 0] = f
    _, st = run(sim, body_point_force=pf)
    r = np.array([0.2, 0.1, 0.0])
    L = momentum(st, box_inertia(2.0))
    np.testing.assert_allclose(L[1], np.cross(r, f) / 60.0, rtol=1e-6, atol=1e-18)
    np.testing.assert_allclose(st["velocity"][1, 0] - st["velocity"][0, 0],
                               f / 60.0 / 2.0 + np.array([0, -G / 60, 0]), atol=1e-14)
    # a body-frame force on a rotated body acts along R f, at R p
    q = np.array([np.cos(0.4), 0.0, np.sin(0.4), 0.0])
    pf[0] = 0.0
    pf[0, 1] = f
    _, st = run(sim, body_point_force=pf, body_orientation=q)
    R = rotation(q)
    L = momentum(st, R.T @ R @ box_inertia(2.0))
    torque = np.cross(R @ np.array([0.0, 0.1, 0.15]), R @ f)
    np.testing.assert_allclose(L[1], torque / 60.0, rtol=1e-6, atol=1e-18)
    # an impulse whose window does not align with substeps still transfers exactly J
    J = np.array([0.3, 0.2, -0.1])
    _, st = run(sim, body_impulse=J[None])
    dv = st["velocity"][3, 0] - st["velocity"][0, 0] - np.array([0, -G * 3 / 60, 0])
    np.testing.assert_allclose(dv, J / 2.0, atol=1e-12)


def test_box_settles_at_expected_penetration():
    sim = cached("ground", ground_sim)
    ke, m = 1e4, 1.0
    _, st = run(sim, body_position=(0.0, 0.1 + 0.01, 0.0), contact_ke=ke, contact_kd=100.0)
    depth = m * G / (4 * ke)  # four bottom vertices share the weight
    y = st["position"][-10:, 0, 1]
    np.testing.assert_allclose(y, 0.1 - depth, rtol=0, atol=1e-3 * depth)


def test_box_slides_with_deceleration_mu_g():
    sim = cached("ground", ground_sim)
    mu, ke = 0.3, 1e4
    y = 0.1 - 1.0 * G / (4 * ke)  # start at rest height
    _, st = run(sim, body_position=(0.0, y, 0.0), body_velocity=(2.0, 0.0, 1.0),
                contact_mu=mu, contact_ke=ke, contact_kd=100.0, contact_kf=1e3)
    v = st["velocity"][:, 0]
    speed = np.linalg.norm(v[:, [0, 2]], axis=1)
    t = np.arange(61) / 60.0
    sliding = (t > 0.1) & (speed > 0.2)
    assert sliding.sum() > 20
    decel = -np.polyfit(t[sliding], speed[sliding], 1)[0]
    assert abs(decel - mu * G) / (mu * G) < 0.02, decel
    # the direction of travel stays (friction is isotropic)
    d = v[sliding][:, [0, 2]] / speed[sliding, None]
    np.testing.assert_allclose(d, np.tile([2.0, 1.0], (sliding.sum(), 1)) / np.sqrt(5),
                               atol=1e-3)


def test_higher_damping_bounces_lower():
    sim = cached("ground", ground_sim)
    heights = []
    for kd in (1.0, 30.0):
        _, st = run(sim, body_position=(0.0, 0.4, 0.0), contact_kd=kd, contact_ke=1e4,
                    contact_mu=0.3)
        y = st["position"][:, 0, 1]
        first_low = int(np.argmin(y[:40]))
        heights.append(y[first_low:].max())
    assert heights[0] > 0.1 + 0.01 and heights[1] < heights[0] - 0.01, heights


def test_builder_errors():
    b = gs.ModelBuilder()
    import trimesh

    box = trimesh.creation.box()
    with pytest.raises(ValueError, match="not watertight"):
        b.add_rigid_body((box.vertices, box.faces[:-2]))
    with pytest.raises(ValueError, match="orientation"):
        b.add_rigid_box((1, 1, 1), orientation=(1, 0, 0))
    with pytest.raises(ValueError, match="extents must be > 0"):
        b.add_rigid_box((1, -1, 1))
    with pytest.raises(ValueError, match="angular_drag must be a finite number >= 0"):
        b.add_rigid_box((1, 1, 1), angular_drag=-0.5)
    with pytest.raises(ValueError, match="linear_damping must be a finite number >= 0"):
        b.add_rigid_box((1, 1, 1), linear_damping=float("nan"))
    with pytest.raises(ValueError, match="body=3"):
        b.add_body_force(3, (1, 0, 0))
    i = b.add_rigid_sphere(0.2, 1, density=500.0)
    with pytest.raises(ValueError, match="frame='side'"):
        b.add_body_force(i, (1, 0, 0), frame="side")
    with pytest.raises(ValueError, match="duration must be > 0"):
        b.add_body_impulse(i, (1, 0, 0), duration=0.0)
    b.add_body_force(i, (1, 0, 0), point=(0, 0.2, 0), frames=[5])
    with pytest.raises(ValueError, match="outside the simulation's frames"):
        gs.Simulation(b.finalize(), frames=3, substeps=2)


def test_add_rigid_from_file(tmp_path):
    import trimesh

    path = tmp_path / "cone.stl"
    trimesh.creation.cone(0.2, 0.5, sections=24).export(path)
    b = gs.ModelBuilder()
    assert b.add_rigid_from_file(path, density=300.0) == 0
    assert b.rigid_body(0).mass == pytest.approx(300.0 * trimesh.load(path).volume, rel=1e-9)


# ---- gradients ---------------------------------------------------------------------------
def fd_sim():
    b = gs.ModelBuilder(contact_ke=1e4, contact_kd=10.0, contact_kf=50.0, contact_mu=0.5)
    b.add_rigid_box(BOX, mass=1.0)
    b.add_body_force(0, (0.3, 0.0, 0.2), point=(0.1, 0.05, 0.0), frames=range(0, 5))
    b.add_body_impulse(0, (0.2, 0.1, 0.0), point=(0.1, 0.0, 0.1), start=0.01, duration=0.03,
                       frame="body")
    return gs.Simulation(b.finalize(), frames=20, substeps=8)


SCENES = {
    "bounce": dict(contact_kd=10.0,
                   body_position=(0.0, 0.25, 0.0), body_orientation=(0.9, 0.1, 0.2, 0.05),
                   body_velocity=(1.0, 0.0, 0.0), body_angular_velocity=(0.5, 2.0, 0.3)),
    # sliding throughout (saturated Coulomb friction), and creeping (viscous branch only):
    # a stick/slip switch inside the rollout would put a kink under the FD step, and so
    # would the one-sided damping kd min(vn, 0) of a box rocking on its face (kd = 0 here)
    "slide": dict(contact_kd=0.0, contact_mu=0.4,
                  body_position=(0.0, 0.1 - G / 4e4, 0.0), body_orientation=(1.0, 0, 0, 0),
                  body_velocity=(2.0, 0.0, 1.0), body_angular_velocity=(0.0, 0.3, 0.0)),
    "creep": dict(contact_kd=0.0, contact_mu=0.5,
                  body_position=(0.0, 0.1 - G / 4e4, 0.0), body_orientation=(1.0, 0, 0, 0),
                  body_velocity=(0.004, 0.0, -0.003), body_angular_velocity=(0.0, 0.02, 0.0)),
}


DAMPING = dict(body_linear_damping=0.3, body_linear_drag=0.2, body_angular_damping=0.7,
               body_angular_drag=0.1)

# parameters not checked in a scene (each is checked in another): saturated friction
# ignores kf, viscous friction ignores mu, kd = 0 sits on its bound in the resting scenes,
# and a creeping box's spin (0.02 rad/s) hardly feels the quadratic angular damping (its
# gradient, 4e-5, is at the central difference's rounding level there)
UNUSED = {"bounce": {"contact_kf"}, "slide": {"contact_kf", "contact_kd"},
          "creep": {"contact_mu", "contact_kd", "body_angular_drag"}}


@pytest.mark.parametrize("scene", sorted(SCENES))
def test_gradients_match_finite_differences(scene):
    sim = cached("fd", fd_sim)
    for name, value in SCENES[scene].items():
        sim.set_param(name, value)
    sim.set_param("body_com_offset", (0.01, -0.02, 0.005))
    sim.set_param("body_inertia_scale", 1.1)
    for name, value in DAMPING.items():  # > 0: the FD steps stay in the range
        sim.set_param(name, value)
    names = sim.params.names()
    base = {n: torch.tensor(sim.get_param(n)) for n in names}
    weights = torch.tensor(np.random.default_rng(3).normal(size=(21, 8, 3)))

    def loss(values):
        return (gs.simulate(sim, values)["rigid"] * weights).sum()

    leaves = {n: v.clone().requires_grad_(True) for n, v in base.items()}
    loss(leaves).backward()
    states = sim.model.systems[-1].body_states()
    low = states["position"][:, 0, 1].min()
    assert low < 0.1, "the box must touch the ground"
    for name in names:
        if name in UNUSED[scene]:
            continue
        grad = leaves[name].grad.numpy().ravel()
        assert np.all(np.isfinite(grad))
        k = int(np.argmax(np.abs(grad)))
        v0 = base[name].numpy().ravel()
        # Contact onsets and stick/slip switches make the loss piecewise smooth: when the
        # 1e-6 step straddles one, a 10x smaller step (still well above round-off) is used.
        # A small gradient (the creeping box's angular damping, 1.5e-4 against a loss of
        # 6.2) is at the 1e-6 step's round-off: the loss's last digits differ between runs
        # and machines (seen: this gradient and its difference quotient 6e-6 off their
        # values of another run, 1.05e-5 apart), so a 10x larger step is tried last.
        err, fd = np.inf, 0.0
        for rel in (1e-6, 1e-7, 1e-5):
            h = rel * max(1.0, abs(v0[k]))
            vals = []
            for sign in (1, -1):
                v = v0.copy()
                v[k] += sign * h
                with torch.no_grad():
                    vals.append(loss({**base, name: torch.tensor(v.reshape(base[name].shape))}))
            fd_h = float(vals[0] - vals[1]) / (2 * h)
            if abs(grad[k] - fd_h) < err * abs(fd_h):
                err, fd = abs(grad[k] - fd_h) / abs(fd_h), fd_h
            if err <= 1e-5:
                break
        assert abs(fd) * max(1.0, abs(v0[k])) > 1e-6, (name, fd)  # a gradient to check
        assert abs(grad[k] - fd) <= 1e-5 * abs(fd), (name, grad[k], fd)


def test_torch_reference_matches_engine():
    """benchmarks/torch_rigid_reference.py is the same model: trajectory and gradients."""
    import os
    import sys

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
    from torch_rigid_reference import from_system

    sim = cached("fd", fd_sim)
    for name, value in {**SCENES["bounce"], "body_point_force": 0.0, "body_impulse": 0.0,
                        "body_com_offset": (0.01, -0.02, 0.005), **DAMPING}.items():
        sim.set_param(name, value)
    weights = np.random.default_rng(5).normal(size=(21, 8, 3))
    out = sim.forward()["rigid"]
    sim.backward({"rigid": weights})
    ref, params = from_system(sim.model.systems[-1], sim)
    checked = ["body_mass", "body_com_offset", "contact_ke", "contact_kd", "contact_mu",
               "body_angular_velocity", *DAMPING]
    leaves = {n: v.clone().requires_grad_(n in checked) for n, v in params.items()}
    ref_out = ref.rollout(leaves, sim.frames, sim.substeps, sim.dt)
    np.testing.assert_allclose(ref_out.detach().numpy(), out, atol=1e-10)
    (ref_out * torch.from_numpy(weights)).sum().backward()
    for name in checked:
        theirs = leaves[name].grad.numpy()
        np.testing.assert_allclose(sim.param_grad(name), theirs,
                                   atol=1e-8 * np.abs(theirs).max(), err_msg=name)


def test_rigid_meshes_give_the_render_rows_faces_and_body_frame_vertices():
    b = gs.ModelBuilder(ground=False, gravity=(0.0, 0.0, 0.0))
    b.add_rigid_box((0.4, 0.2, 0.2), mass=1.0, position=(1.0, 2.0, 3.0))
    b.add_rigid_sphere(0.1, subdivisions=1, mass=1.0, position=(-1.0, 0.5, 0.0))
    model = b.finalize()
    meshes = model.rigid_meshes()
    assert len(meshes) == 2 and meshes[0].rows[0] == 0
    assert meshes[1].rows[0] == len(meshes[0].rows)
    sim = gs.Simulation(model, frames=1, substeps=2)
    first = sim.forward()["rigid"][0]
    for m, centre in zip(meshes, ([1.0, 2.0, 3.0], [-1.0, 0.5, 0.0])):
        assert m.faces.max() == len(m.rows) - 1 and m.faces.min() == 0
        # identity orientation at t=0: world vertices = body-frame vertices + the centre
        np.testing.assert_allclose(first[m.rows], m.vertices + centre, atol=1e-12)
    particles_only = gs.ModelBuilder()
    particles_only.add_particle((0.0, 1.0, 0.0))
    assert particles_only.finalize().rigid_meshes() == []

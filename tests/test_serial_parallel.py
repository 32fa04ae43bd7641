"""The parallel code paths (taken on CUDA and for large models on the CPU) against the
serial ones the CPU takes for small models: same trajectories and gradients, for every
force model, the particle integrator with ground contact, and the rigid bodies."""

import numpy as np
import pytest
from runtime_arch import TEST_ARCH, cpu_only

import gradsim_taichi as gs
from gradsim_taichi import runtime
from gradsim_taichi.solvers.registry import force_models
from gradsim_taichi.solvers.scatter import Scatter


@pytest.fixture(autouse=True)
def _init():
    gs.init(arch=TEST_ARCH, precision="f64", threads=2)


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


def rigid_bodies(b):
    b.add_rigid_box((0.2, 0.1, 0.15), mass=1.0, position=(0.0, 0.06, 0.0),
                    orientation=(0.98, 0.1, 0.15, 0.05), velocity=(0.3, -0.5, 0.1),
                    angular_velocity=(1.0, -2.0, 0.5))
    b.add_rigid_sphere(0.1, 1, density=500.0, position=(0.5, 0.11, 0.0),
                       velocity=(0.0, -1.0, 0.4))
    b.add_body_force(0, (0.5, 0.0, 0.2), point=(0.1, 0.05, 0.0), frames=[0, 1])


def scatters(model) -> list[Scatter]:
    """Every Scatter of the model's systems and force models (their serial flags say which
    path each loop compiled)."""
    owners = list(model.systems) + list(model.forces) + [model.particles]
    return [v for o in owners if o is not None for v in vars(o).values()
            if isinstance(v, Scatter)]


@cpu_only
# (the tets' parallel loops are those of the cloth's force models: soft_box is the slow tier)
@pytest.mark.parametrize("add", [springs_and_cloth, pytest.param(soft_box, marks=pytest.mark.slow),
                                 rigid_bodies])
def test_parallel_paths_match_serial(add, monkeypatch):
    results = []
    for work_ns in (runtime.SERIAL_WORK_NS, 0.0):  # default (serial here), then parallel
        monkeypatch.setattr(runtime, "SERIAL_WORK_NS", work_ns)
        # contact damping and friction well inside explicit stability (k dt / m < 0.2), so
        # rounding differences between the paths are not amplified
        b = gs.ModelBuilder(contact_kd=2.0, contact_kf=2.0)
        add(b)
        model = b.finalize()
        sim = gs.Simulation(model, frames=5, substeps=16)
        flags = [s.serial for s in scatters(model)]
        gathered = [s.gathered for s in scatters(model)]
        out = sim.forward()
        grads_in = {k: np.random.default_rng(1).standard_normal(v.shape)
                    for k, v in out.items() if not k.endswith("_velocity")}
        sim.backward(grads_in)
        names = [n for n in sim.params.names() if n != "external_force"]
        results.append((out, {n: sim.param_grad(n) for n in names}, flags, gathered, model))
    (xs, gs_, flags_s, gath_s, model), (xp, gp, flags_p, gath_p, _) = results
    # every loop of every model did take the other path (not only the integrator's)
    assert all(flags_s) and not any(flags_p) and not any(gath_s)
    kinds = {type(f).__name__ for f in model.forces}
    kinds |= {type(s).__name__ for s in model.systems}
    expected = {springs_and_cloth: {"Springs", "ClothTriangles", "Bending", "Aerodynamics"},
                soft_box: {"TetFEM"}, rigid_bodies: {"RigidBodySystem"}}[add]
    assert expected <= kinds
    # the models with hand-written adjoints gather in parallel (atomic-free)
    assert any(gath_p) == (add is not rigid_bodies)
    for name in xs:
        assert name in xp
        if not name.endswith("_velocity"):
            assert xs[name][:, :, 1].min() < 0.02  # the ground is touched
        np.testing.assert_allclose(xp[name], xs[name], rtol=0, atol=1e-12, err_msg=name)
    for name, g in gs_.items():
        scale = max(np.abs(g).max(), 1e-30)
        np.testing.assert_allclose(gp[name], g, rtol=0, atol=1e-10 * scale, err_msg=name)


def test_every_registered_force_model_is_covered():
    covered = {"Springs", "ClothTriangles", "Bending", "Aerodynamics", "TetFEM"}
    missing = {cls.__name__ for cls in force_models().values()} - covered
    assert not missing, f"add a scene with {missing} to test_parallel_paths_match_serial"


def _rigid_rollout(slots, monkeypatch):
    """The rigid scene above built with ``slots`` partial sums per body: the model, its
    vertex trajectories, and the gradients of a fixed random linear loss of them."""
    monkeypatch.setenv("GRADSIM_REDUCTION_SLOTS", str(slots))
    b = gs.ModelBuilder(contact_kd=2.0, contact_kf=2.0)
    rigid_bodies(b)
    sim = gs.Simulation(b.finalize(), frames=4, substeps=16)
    system = sim.model.systems[-1]
    assert system.slots == slots
    assert system.contact.serial == (runtime.SERIAL_WORK_NS > 0 and TEST_ARCH == "cpu")
    out = sim.forward()["rigid"]
    weights = np.random.default_rng(2).standard_normal(out.shape)
    sim.backward({"rigid": weights})
    names = [n for n in sim.params.names() if n != "external_force"]
    return sim, weights, out, {n: sim.param_grad(n) for n in names}


@pytest.mark.cuda
# (the parallel rigid loops against serial: test_parallel_paths_match_serial; slow tier)
@pytest.mark.parametrize("parallel", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_rigid_partial_sums_match_one_sum(parallel, monkeypatch):
    """Vertex contact summed through 16 partial sums per body (CUDA's path, here on the
    CPU) gives the trajectories and float64 gradients of the one sum per body (the CPU's),
    and its gradients match central finite differences; with the loops serial (the CPU's
    default for this small scene) and parallel."""
    if parallel:
        monkeypatch.setattr(runtime, "SERIAL_WORK_NS", 0.0)
    _, _, x1, g1 = _rigid_rollout(1, monkeypatch)
    sim, weights, x16, g16 = _rigid_rollout(16, monkeypatch)
    assert sim.model.systems[-1].nv > 16 * 2  # several vertices per slot (box + sphere)
    assert x1[:, :, 1].min() < 0.0  # vertices are in contact
    np.testing.assert_allclose(x16, x1, rtol=0, atol=1e-12)
    assert set(g16) == set(g1)
    for name, g in g1.items():
        scale = max(np.abs(g).max(), 1e-30)
        np.testing.assert_allclose(g16[name], g, rtol=0, atol=1e-12 * scale, err_msg=name)

    def loss():
        return float((sim.forward()["rigid"] * weights).sum())

    for name in ("body_velocity", "body_angular_velocity", "body_com_offset", "body_mass",
                 "contact_ke", "contact_mu"):
        base = np.array(sim.get_param(name), dtype=np.float64)
        grad = g16[name].ravel()
        k = int(np.argmax(np.abs(grad)))
        # a contact onset under the 1e-6 step puts a kink there: then a 10x smaller one
        err = np.inf
        for rel in (1e-6, 1e-7):
            h = rel * max(1.0, abs(base.ravel()[k]))
            vals = []
            for sign in (1, -1):
                v = base.copy().ravel()
                v[k] += sign * h
                sim.set_param(name, v.reshape(base.shape))
                vals.append(loss())
            sim.set_param(name, base)
            fd = (vals[0] - vals[1]) / (2 * h)
            err = min(err, abs(grad[k] - fd) / abs(fd))
            if err <= 1e-5:
                break
        assert abs(fd) > 1e-6, (name, fd)
        assert err <= 1e-5, (name, grad[k], fd)

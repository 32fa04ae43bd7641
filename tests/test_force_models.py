"""Every registered force model (gradsim_taichi.solvers.registry) on a few particles, in
serial and in parallel mode: its forward against a small numpy reference written from
the model's docstring, and its adjoint (``apply.grad``) against float64 central
differences of its own forward, for positions, velocities and every learnable parameter.

A force model added to the registry gets these tests; without a case in ``CASES`` here
its test fails.
"""

from types import SimpleNamespace

import numpy as np
import pytest
import taichi as ti
from runtime_arch import TEST_ARCH, cpu_only

import gradsim_taichi as gs
from gradsim_taichi import runtime
from gradsim_taichi.solvers.registry import FORCE_MODELS, ForceModel, force_models


@pytest.fixture(autouse=True)
def _init():
    gs.init(arch=TEST_ARCH, precision="f64", threads=2)


# ---- numpy references ------------------------------------------------------------------


def springs_reference(x, v, p):
    f = np.zeros_like(x)
    for (i, j), ke, kd, rest in zip(p["ends"], p["ke"], p["kd"], p["rest"]):
        d = x[j] - x[i]
        length = np.linalg.norm(d)
        u = d / length
        force = (ke * (length - rest) + kd * (v[j] - v[i]) @ u) * u
        f[i] += force
        f[j] -= force
    return f


def triangles_reference(x, v, p):
    """E = A0 (ke/2 |F|^2 + ka/2 (J - alpha + a)^2), damping -kd A0 Jdot dJ/dx."""
    f = np.zeros_like(x)
    for t, (i, j, k) in enumerate(p["tris"]):
        X = p["rest"]
        e1, e2 = X[j] - X[i], X[k] - X[i]
        # an orthonormal basis of the rest plane (any one: |F|^2 does not depend on it)
        q, _ = np.linalg.qr(np.stack([e1, e2], axis=1))
        dm_inv = np.linalg.inv(q.T @ np.stack([e1, e2], axis=1))
        a0 = 0.5 * np.linalg.norm(np.cross(e1, e2))
        ds = np.stack([x[j] - x[i], x[k] - x[i]], axis=1)
        ke, ka, kd, act = p["ke"][t], p["ka"][t], p["kd"][t], p["act"][0, t]
        g = a0 * ke * ds @ dm_inv @ dm_inv.T  # dE_mu/dDs
        n = np.cross(ds[:, 0], ds[:, 1])
        nh = n / np.linalg.norm(n)
        J = 0.5 * np.linalg.norm(n) / a0
        dj_q = np.cross(ds[:, 1], nh) / (2 * a0)
        dj_r = np.cross(nh, ds[:, 0]) / (2 * a0)
        jdot = dj_q @ (v[j] - v[i]) + dj_r @ (v[k] - v[i])
        s = a0 * ka * (J - (1.0 + ke / ka) + act) + a0 * kd * jdot
        gq, gr = g[:, 0] + s * dj_q, g[:, 1] + s * dj_r
        f[j] -= gq
        f[k] -= gr
        f[i] += gq + gr
    return f


def _theta(x1, x2, x3, x4):
    n1 = np.cross(x3 - x1, x4 - x1)
    n2 = np.cross(x4 - x2, x3 - x2)
    e = x4 - x3
    return np.arctan2(np.cross(n2, n1) @ (e / np.linalg.norm(e)), n1 @ n2)


def bending_reference(x, v, p):
    """f_a = -|e| (ke (theta - theta0) + kd dtheta/dt) dtheta/dx_a (dtheta/dx numerically)."""
    f = np.zeros_like(x)
    for h, ids in enumerate(p["hinges"]):
        pts = x[ids].copy()
        grad = np.zeros((4, 3))
        for a in range(4):
            for c in range(3):
                hi, lo = pts.copy(), pts.copy()
                hi[a, c] += 1e-6
                lo[a, c] -= 1e-6
                grad[a, c] = (_theta(*hi) - _theta(*lo)) / 2e-6
        rate = np.sum(grad * v[ids])
        e_len = np.linalg.norm(pts[3] - pts[2])
        s = -e_len * (p["ke"][h] * (_theta(*pts) - p["theta0"][h]) + p["kd"][h] * rate)
        f[ids] += s * grad
    return f


def aerodynamics_reference(x, v, p):
    f = np.zeros_like(x)
    for i, j, k in p["tris"]:
        n = np.cross(x[j] - x[i], x[k] - x[i])
        area = 0.5 * np.linalg.norm(n)
        nh = n / np.linalg.norm(n)
        u = (v[i] + v[j] + v[k]) / 3.0 - p["wind"]
        drag = -p["drag"] * area * abs(nh @ u) * u
        lift = -p["lift"] * area * np.arcsin(nh @ u / np.linalg.norm(u)) * (u @ u) * nh
        f[[i, j, k]] += drag + lift
    return f


def fem_reference(x, v, p):
    """Stable neo-Hookean P (Smith et al. 2018) with damping; f_1..3 = -V P Dm^-T."""
    f = np.zeros_like(x)
    X = p["rest"]
    for t, ids in enumerate(p["tets"]):
        dm = np.stack([X[ids[c]] - X[ids[0]] for c in (1, 2, 3)], axis=1)
        dm_inv = np.linalg.inv(dm)
        vol = abs(np.linalg.det(dm)) / 6.0
        F = np.stack([x[ids[c]] - x[ids[0]] for c in (1, 2, 3)], axis=1) @ dm_inv
        Fdot = np.stack([v[ids[c]] - v[ids[0]] for c in (1, 2, 3)], axis=1) @ dm_inv
        mu_s = 4.0 / 3.0 * p["mu"][t]
        lam_s = p["lam"][t] + 5.0 / 6.0 * p["mu"][t]
        kd, act = p["kd"][t], p["act"][0, t]
        J = np.linalg.det(F)
        cof = J * np.linalg.inv(F).T
        ic = np.sum(F * F)
        alpha = 1.0 + 0.75 * mu_s / lam_s
        ftf = F.T @ Fdot
        P = (mu_s * (1.0 - 1.0 / (ic + 1.0)) * F + lam_s * (J - alpha + act) * cof
             + kd * F @ (0.5 * (ftf + ftf.T)) + kd * np.sum(cof * Fdot) * cof)
        H = -vol * P @ dm_inv.T
        for c in (1, 2, 3):
            f[ids[c]] += H[:, c - 1]
        f[ids[0]] -= H.sum(axis=1)
    return f


# ---- cases: (small model, its parameters as numpy, positions, velocities) --------------


def springs_case(cls, rng):
    x = rng.uniform(-0.3, 0.3, (4, 3))
    ends = np.array([[0, 1], [1, 2], [2, 3], [3, 0], [0, 2]])
    p = dict(ends=ends, ke=rng.uniform(10, 50, 5), kd=rng.uniform(0.1, 1, 5),
             rest=rng.uniform(0.1, 0.3, 5))
    return cls(ends, p["ke"], p["kd"], p["rest"]), p, x, rng.standard_normal((4, 3))


def triangles_case(cls, rng):
    rest = np.array([[0, 0, 0], [0.3, 0, 0], [0, 0, 0.3], [0.3, 0.05, 0.3]])
    tris = np.array([[0, 1, 2], [1, 3, 2]])
    p = dict(tris=tris, rest=rest, ke=rng.uniform(50, 100, 2), ka=rng.uniform(100, 200, 2),
             kd=rng.uniform(0.1, 1, 2), act=rng.uniform(-0.2, 0.2, (1, 2)))
    model = cls(tris, rest, p["ke"], p["ka"], p["kd"])
    model.allocate(1, 1)
    model.act.from_numpy(p["act"])
    return model, p, rest + 0.03 * rng.standard_normal(rest.shape), rng.standard_normal((4, 3))


def bending_case(cls, rng):
    x = np.array([[0, 0, 0.3], [0.3, 0.1, 0.0], [0, 0, 0], [0.3, 0, 0.3], [0.4, 0.2, 0.5]])
    x = x + 0.03 * rng.standard_normal(x.shape)
    hinges = np.array([[0, 1, 2, 3], [1, 4, 3, 2]])
    p = dict(hinges=hinges, theta0=rng.uniform(-0.3, 0.3, 2), ke=rng.uniform(0.1, 1, 2),
             kd=rng.uniform(0.01, 0.1, 2))
    return cls(hinges, p["theta0"], p["ke"], p["kd"]), p, x, rng.standard_normal((5, 3))


def aerodynamics_case(cls, rng):
    x = np.array([[0, 0, 0], [0.3, 0, 0], [0, 0.05, 0.3], [0.3, 0.1, 0.3]])
    x = x + 0.03 * rng.standard_normal(x.shape)
    tris = np.array([[0, 1, 2], [1, 3, 2]])
    p = dict(tris=tris, lift=0.3, drag=0.2, wind=np.array([0.5, -0.2, 0.3]))
    model = cls(tris, p["lift"], p["drag"], p["wind"])
    return model, p, x, rng.standard_normal((4, 3))


def fem_case(cls, rng):
    rest = np.array([[0, 0, 0], [0.2, 0, 0], [0, 0.2, 0], [0, 0, 0.2], [0.2, 0.2, 0.2]])
    tets = np.array([[0, 1, 2, 3], [1, 4, 2, 3]])
    p = dict(tets=tets, rest=rest, mu=rng.uniform(1e3, 2e3, 2), lam=rng.uniform(1e3, 3e3, 2),
             kd=rng.uniform(1, 5, 2), act=rng.uniform(-0.1, 0.1, (1, 2)))
    mass = ti.field(runtime.real(), 5, needs_grad=True)  # for the density parameter only
    model = cls(tets, rest, p["mu"], p["lam"], p["kd"], np.full(2, 1e3),
                SimpleNamespace(n=5, mass=mass))
    model.allocate(1, 1)
    model.act.from_numpy(p["act"])
    return model, p, rest + 0.02 * rng.standard_normal(rest.shape), rng.standard_normal((5, 3))


CASES = {
    "springs": (springs_case, springs_reference),
    "cloth_triangles": (triangles_case, triangles_reference),
    "bending": (bending_case, bending_reference),
    "aerodynamics": (aerodynamics_case, aerodynamics_reference),
    "fem_tets": (fem_case, fem_reference),
}


class Row:
    """One row of state fields and the model's forward / adjoint on it."""

    def __init__(self, model, n):
        real = runtime.real()
        self.model = model
        self.x, self.v, self.f = (ti.Vector.field(3, real, shape=(1, n), needs_grad=True)
                                  for _ in range(3))

    def _args(self):
        return (self.x, self.v, self.f, 0) + ((0,) if self.model.per_frame else ())

    def forces(self, x, v):
        self.x.from_numpy(x[None])
        self.v.from_numpy(v[None])
        self.f.fill(0)
        self.model.apply(*self._args())
        return self.f.to_numpy()[0]

    def loss(self, x, v, w):
        return float(np.sum(w * self.forces(x, v)))

    def adjoint(self, x, v, w):
        """dL/dx, dL/dv and dL/d(parameter) for L = sum(w * f)."""
        self.forces(x, v)  # some adjoints read values of their forward pass
        for field in (self.x, self.v, self.f):
            field.grad.fill(0)
        self.model.zero_grads()
        self.f.grad.from_numpy(w[None])
        self.model.apply.grad(*self._args())
        return (self.x.grad.to_numpy()[0], self.v.grad.to_numpy()[0],
                {p.name: p.grad_getter().cpu().numpy() for p in self.model.params()})


def central(fn, value, rel=1e-6):
    """Central differences of the scalar ``fn`` at array ``value`` (float64)."""
    value = np.asarray(value, dtype=np.float64)
    out = np.zeros_like(value)
    for idx in np.ndindex(value.shape):
        h = rel * max(1.0, abs(value[idx]))
        hi, lo = value.copy(), value.copy()
        hi[idx] += h
        lo[idx] -= h
        out[idx] = (fn(hi) - fn(lo)) / (2 * h)
    return out


def build(name, mode, monkeypatch):
    if name not in CASES:
        pytest.fail(f"force model {name!r} is registered but has no reference case in "
                    "tests/test_force_models.py")
    # parallel: every loop counts as long (runtime.serial says no)
    monkeypatch.setattr(runtime, "SERIAL_WORK_NS", runtime.SERIAL_WORK_NS if mode == "serial"
                        else 0.0)
    make, reference = CASES[name]
    model, p, x, v = make(force_models()[name], np.random.default_rng(7))
    assert isinstance(model, ForceModel)
    assert model.scatter.serial == (mode == "serial")  # the mode really switched
    return model, p, x, v, reference


# the serial path exists on the CPU only (runtime.serial is never serial on CUDA)
MODES = [pytest.param("serial", marks=cpu_only), "parallel"]


@pytest.mark.cuda
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", sorted(FORCE_MODELS))
def test_forward_matches_reference(name, mode, monkeypatch):
    model, p, x, v, reference = build(name, mode, monkeypatch)
    got = Row(model, len(x)).forces(x, v)
    want = reference(x, v, p)
    assert np.abs(want).max() > 1e-3  # the state is away from rest: the check has teeth
    scale = np.abs(want).max()
    # the bending reference differentiates theta numerically (~1e-9 relative)
    np.testing.assert_allclose(got, want, rtol=0, atol=(1e-7 if name == "bending" else 1e-11)
                               * scale)


@pytest.mark.cuda
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", sorted(FORCE_MODELS))
def test_adjoint_matches_central_differences(name, mode, monkeypatch):
    model, _, x, v, _ = build(name, mode, monkeypatch)
    row = Row(model, len(x))
    w = np.random.default_rng(3).standard_normal(x.shape)
    gx, gv, gp = row.adjoint(x, v, w)
    checks = [("x", gx, central(lambda y: row.loss(y, v, w), x)),
              ("v", gv, central(lambda y: row.loss(x, y, w), v))]
    for param in model.params():
        base = param.getter().cpu().numpy().astype(np.float64)

        def at(value, param=param):
            param.setter(value)
            return row.loss(x, v, w)

        fd = central(at, base)
        param.setter(base)
        checks.append((param.name, gp[param.name], fd))
    assert np.abs(gx).max() > 1e-6  # the adjoint is not trivially zero
    for label, got, fd in checks:
        scale = max(np.abs(fd).max(), 1e-12)
        np.testing.assert_allclose(got, fd, rtol=0, atol=1e-6 * scale,
                                   err_msg=f"{name} {mode}: d/d{label}")

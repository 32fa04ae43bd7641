"""A vectorized plain-PyTorch implementation of the engine's cloth model.

The reference the cloth benchmark times the engine against, and the check that it
measures the same model: the maths is copied from ``solvers/cloth_triangles.py``
(membrane with area term, area damping, activation), ``solvers/bending.py``
(dihedral angle springs with Bridson gradients), ``solvers/aerodynamics.py`` (lift and
drag relative to the wind), ``solvers/ground_contact.py`` and the semi-implicit Euler
integrator of ``solvers/particles.py``. Per-element forces are scattered to particles
with ``index_add``; the backward pass is torch autograd.

Depends only on numpy and torch; :func:`scene_from_simulation` reads the arrays of a
``gradsim_taichi.Simulation`` so that both run the very same data.
"""

from __future__ import annotations

import numpy as np
import torch

PARAM_NAMES = (
    "mass", "gravity", "initial_position", "initial_velocity",
    "contact_ke", "contact_kd", "contact_kf", "contact_mu",
    "tri_ke", "tri_ka", "tri_kd", "tri_activation", "edge_ke", "edge_kd",
    "cloth_lift", "cloth_drag", "wind",
)


def scene_from_simulation(sim) -> dict:
    """Parameters (by name, as float64 numpy) and topology of an engine Simulation whose
    model has cloth triangles, bending and (optionally) aerodynamics and ground."""
    from gradsim_taichi.solvers.aerodynamics import Aerodynamics
    from gradsim_taichi.solvers.bending import Bending
    from gradsim_taichi.solvers.cloth_triangles import ClothTriangles

    model = sim.model
    scene = {name: np.array(sim.get_param(name), dtype=np.float64)
             for name in PARAM_NAMES if name in sim.params}
    forces = {type(f): f for f in model.forces}
    tri, bend = forces[ClothTriangles], forces[Bending]
    scene["triangles"] = tri.tris.to_numpy().astype(np.int64)
    scene["pose"] = tri.pose.to_numpy().astype(np.float64)
    scene["rest_area"] = tri.rest_area.to_numpy().astype(np.float64)
    scene["hinges"] = bend.hinges.to_numpy().astype(np.int64)
    scene["rest_angle"] = bend.rest.to_numpy().astype(np.float64)
    scene["aero"] = Aerodynamics in forces
    scene["pinned"] = model.particles.pinned.to_numpy().astype(bool)
    scene["ground"] = model.ground is not None
    if model.ground is not None:
        scene["ground_height"] = model.ground.height
        scene["radius"] = model.ground.radius
        for attr in ("elastic_width", "damping_depth"):  # the smooth contact model's widths
            if hasattr(model.ground, attr):
                scene[attr] = float(getattr(model.ground, attr))
    scene["dt"], scene["frames"], scene["substeps"] = sim.dt, sim.frames, sim.substeps
    return scene


def _dot(a, b):
    return (a * b).sum(-1)


class TorchCloth:
    """The engine's cloth model in vectorized PyTorch.

    :meth:`rollout` maps a dict of parameter tensors (any of ``PARAM_NAMES``; the others
    come from ``scene``) to positions at frame boundaries ``[F + 1, N, 3]``.
    """

    def __init__(self, scene: dict, dtype=torch.float64):
        self.dtype, self.scene = dtype, scene

        def ints(a):
            return torch.as_tensor(a, dtype=torch.int64)

        def reals(a):
            return torch.as_tensor(np.asarray(a), dtype=dtype)

        t = scene["triangles"]
        self.ti, self.tj, self.tk = (ints(t[:, c]).contiguous() for c in range(3))
        self.pose = reals(scene["pose"])
        self.rest_area = reals(scene["rest_area"])
        h = scene["hinges"]
        self.h = [ints(h[:, c]).contiguous() for c in range(4)]
        self.rest_angle = reals(scene["rest_angle"])
        self.pinned = torch.as_tensor(scene["pinned"], dtype=torch.bool)
        self.any_pinned = bool(self.pinned.any())
        self.dt, self.frames, self.substeps = scene["dt"], scene["frames"], scene["substeps"]
        self.n = len(scene["mass"])
        self.tangential = reals([1.0, 0.0, 1.0])
        self.unit_y = reals([0.0, 1.0, 0.0])

    def tensor(self, name: str, requires_grad: bool = False) -> torch.Tensor:
        """A fresh leaf tensor holding the scene's value of parameter ``name``."""
        return torch.tensor(self.scene[name], dtype=self.dtype).requires_grad_(requires_grad)

    # ---- force models ------------------------------------------------------------------
    def triangle_forces(self, x, v, ke, ka, kd, act):
        """``solvers/cloth_triangles.py``."""
        i, j, k = self.ti, self.tj, self.tk
        p = x.index_select(0, i)
        qp, rp = x.index_select(0, j) - p, x.index_select(0, k) - p
        vp = v.index_select(0, i)
        vq, vr = v.index_select(0, j) - vp, v.index_select(0, k) - vp
        dm, a0 = self.pose, self.rest_area
        d00, d01, d10, d11 = (dm[:, a, b, None] for a, b in ((0, 0), (0, 1), (1, 0), (1, 1)))
        k_mu, k_lambda, k_damp = (ke * a0)[:, None], ka * a0, kd * a0
        f1 = qp * d00 + rp * d10
        f2 = qp * d01 + rp * d11
        fq = (f1 * d00 + f2 * d01) * k_mu
        fr = (f1 * d10 + f2 * d11) * k_mu
        alpha = 1.0 + ke / ka
        n = torch.cross(qp, rp, dim=1)
        nlen = torch.sqrt(_dot(n, n) + 1e-30)
        nh = n / nlen[:, None]
        c = 0.5 * nlen / a0 - alpha + act
        dcdq = torch.cross(rp, nh, dim=1) * (0.5 / a0)[:, None]
        dcdr = torch.cross(nh, qp, dim=1) * (0.5 / a0)[:, None]
        s = (k_lambda * c + k_damp * (_dot(dcdq, vq) + _dot(dcdr, vr)))[:, None]
        fq = fq + dcdq * s
        fr = fr + dcdr * s
        f = torch.zeros_like(x)
        return f.index_add(0, i, fq + fr).index_add(0, j, -fq).index_add(0, k, -fr)

    def bending_forces(self, x, v, ke, kd):
        """``solvers/bending.py`` (degenerate hinges masked out with safe denominators)."""
        i, j, k, m = self.h
        x1, x2, x3, x4 = (x.index_select(0, a) for a in (i, j, k, m))
        n1 = torch.cross(x3 - x1, x4 - x1, dim=1)
        n2 = torch.cross(x4 - x2, x3 - x2, dim=1)
        e = x4 - x3
        n1sq, n2sq, esq = _dot(n1, n1), _dot(n2, n2), _dot(e, e)
        tol = 1e-24 * esq * esq
        ok = (esq > 1e-30) & (n1sq > tol) & (n2sq > tol)
        one = torch.ones_like(esq)
        esq, n1sq, n2sq = (torch.where(ok, a, one) for a in (esq, n1sq, n2sq))
        e_len = torch.sqrt(esq)
        e_hat = e / e_len[:, None]
        angle = torch.atan2(_dot(torch.cross(n2, n1, dim=1), e_hat), _dot(n1, n2))
        d1 = n1 * (e_len / n1sq)[:, None]
        d2 = n2 * (e_len / n2sq)[:, None]
        d3 = n1 * (_dot(x1 - x4, e_hat) / n1sq)[:, None] \
            + n2 * (_dot(x2 - x4, e_hat) / n2sq)[:, None]
        d4 = n1 * (_dot(x3 - x1, e_hat) / n1sq)[:, None] \
            + n2 * (_dot(x3 - x2, e_hat) / n2sq)[:, None]
        rate = sum(_dot(d, v.index_select(0, a)) for d, a in ((d1, i), (d2, j), (d3, k), (d4, m)))
        s = torch.where(ok, -e_len * (ke * (angle - self.rest_angle) + kd * rate),
                        torch.zeros_like(esq))[:, None]
        f = torch.zeros_like(x)
        for d, a in ((d1, i), (d2, j), (d3, k), (d4, m)):
            f = f.index_add(0, a, d * s)
        return f

    def aero_forces(self, x, v, lift, drag, wind):
        """``solvers/aerodynamics.py``."""
        i, j, k = self.ti, self.tj, self.tk
        p = x.index_select(0, i)
        n = torch.cross(x.index_select(0, j) - p, x.index_select(0, k) - p, dim=1)
        nlen = torch.sqrt(_dot(n, n) + 1e-30)
        nh = n / nlen[:, None]
        area = 0.5 * nlen
        u = (v.index_select(0, i) + v.index_select(0, j) + v.index_select(0, k)) / 3.0 - wind
        un = _dot(nh, u)
        side = torch.cross(nh, u, dim=1)
        attack = torch.atan2(un, torch.sqrt(_dot(side, side) + 1e-30))
        fa = (drag * area * un.abs())[:, None] * u \
            + (lift * area * attack * _dot(u, u))[:, None] * nh
        f = torch.zeros_like(x)
        return f.index_add(0, i, -fa).index_add(0, j, -fa).index_add(0, k, -fa)

    def contact_forces(self, x, v, cke, ckd, ckf, cmu):
        """``solvers/ground_contact.py``. Two versions of the engine's model: the smooth
        one (cubic elastic blend over ``elastic_width``, smoothstep damping ramp over
        ``damping_depth``, tanh-saturated friction) when the engine's ground has those
        attributes, else the plain penalty model with a clamped Coulomb cone."""
        c = x[:, 1] - self.scene["radius"] - self.scene["ground_height"]
        vt = v * self.tangential
        vt2 = _dot(vt, vt)
        zero = torch.zeros_like(c)
        one = torch.ones_like(c)
        if "elastic_width" in self.scene:
            pen = torch.clamp(-c, min=0.0)
            w, depth = self.scene["elastic_width"], self.scene["damping_depth"]
            t = pen / w
            elastic = torch.where(pen < w, cke * w * (2.0 * t * t - t * t * t), cke * pen)
            t = pen / depth
            ramp = torch.where(pen < depth, t * t * (3.0 - 2.0 * t), one)
            fn = elastic - ckd * torch.clamp(v[:, 1], max=0.0) * ramp
            cap = cmu * fn
            pos = cap > 0.0
            x2 = ckf * ckf * vt2 / torch.where(pos, cap * cap, one)
            big = x2 > 1e-4
            xs = torch.sqrt(torch.where(big, x2, one))
            factor = torch.where(big, torch.tanh(xs) / xs, 1.0 - x2 / 3.0 + 2.0 * x2 * x2 / 15.0)
            scale = torch.where(pos, ckf * factor, zero)
        else:
            fn = -(cke * c + ckd * torch.clamp(v[:, 1], max=0.0))
            cap = cmu * fn
            sticking = ckf * ckf * vt2 < cap * cap
            sliding = (~sticking) & (vt2 > 0.0)
            inv = cap / torch.sqrt(torch.where(sliding, vt2, one))
            scale = torch.where(sticking, ckf.expand_as(vt2), torch.where(sliding, inv, zero))
        force = fn[:, None] * self.unit_y - scale[:, None] * vt
        return torch.where((c < 0.0)[:, None], force, torch.zeros_like(force))

    # ---- time loop ---------------------------------------------------------------------
    def step(self, x, v, p, frame):
        f = self.triangle_forces(x, v, p["tri_ke"], p["tri_ka"], p["tri_kd"],
                                 p["tri_activation"][frame])
        f = f + self.bending_forces(x, v, p["edge_ke"], p["edge_kd"])
        if self.scene["aero"]:
            f = f + self.aero_forces(x, v, p["cloth_lift"], p["cloth_drag"], p["wind"])
        if self.scene["ground"]:
            f = f + self.contact_forces(x, v, p["contact_ke"], p["contact_kd"],
                                        p["contact_kf"], p["contact_mu"])
        v1 = v + self.dt * (f / p["mass"][:, None] + p["gravity"])
        x1 = x + self.dt * v1
        if self.any_pinned:
            pin = self.pinned[:, None]
            v1 = torch.where(pin, torch.zeros_like(v1), v1)
            x1 = torch.where(pin, x, x1)
        return x1, v1

    def rollout(self, params: dict | None = None) -> torch.Tensor:
        """Positions at frame boundaries ``[frames + 1, N, 3]`` (differentiable)."""
        params = params or {}
        p = {name: params[name] if name in params else torch.as_tensor(
            self.scene[name], dtype=self.dtype) for name in PARAM_NAMES if name in self.scene}
        nt, nh = len(self.ti), len(self.h[0])
        p["mass"] = p["mass"].expand(self.n)
        for name in ("tri_ke", "tri_ka", "tri_kd"):
            p[name] = p[name].expand(nt)
        p["tri_activation"] = p["tri_activation"].expand(self.frames, nt)
        for name in ("edge_ke", "edge_kd"):
            p[name] = p[name].expand(nh)
        x = p["initial_position"].expand(self.n, 3)
        v = p["initial_velocity"].expand(self.n, 3)
        out = [x]
        for frame in range(self.frames):
            for _ in range(self.substeps):
                x, v = self.step(x, v, p, frame)
            out.append(x)
        return torch.stack(out)

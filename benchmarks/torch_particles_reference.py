"""A vectorized plain-PyTorch implementation of the engine's particle model.

It is the reference the particle benchmark times the engine against, and the
check that the benchmark measures the same model: the maths is copied from
``solvers/particles.py`` (semi-implicit Euler, pinned particles held still),
``solvers/springs.py`` (damped Hooke springs along the spring direction) and
``solvers/ground_contact.py`` (penalty normal force, Coulomb cone friction with a
viscous sticking branch). Scatter of spring forces to particles uses
``index_add``; the backward pass is torch autograd.

The module depends only on numpy and torch; :func:`scene_from_simulation` reads
the arrays of a ``gradsim_taichi.Simulation`` so both run the very same data.
"""

from __future__ import annotations

import numpy as np
import torch

PARAM_NAMES = (
    "mass", "gravity", "initial_position", "initial_velocity", "external_force",
    "spring_stiffness", "spring_damping", "spring_rest_length",
    "contact_ke", "contact_kd", "contact_kf", "contact_mu",
)


def cloth_grid(n: int, width: float = 1.0, height: float = 0.5):
    """An ``n x n`` grid of particles in the xz plane at ``y = height``, ``width`` metres
    across, with structural (axis neighbours), shear (diagonals) and bend (two apart)
    springs. Returns ``(positions [n*n, 3], pairs [S, 2])``; for n = 64 S = 23,938."""
    u = np.linspace(-0.5 * width, 0.5 * width, n)
    gx, gz = np.meshgrid(u, u, indexing="ij")
    pos = np.stack([gx.ravel(), np.full(n * n, float(height)), gz.ravel()], axis=1)
    idx = np.arange(n * n).reshape(n, n)
    pairs = [
        np.stack([idx[:-1, :].ravel(), idx[1:, :].ravel()], 1),    # structural
        np.stack([idx[:, :-1].ravel(), idx[:, 1:].ravel()], 1),
        np.stack([idx[:-1, :-1].ravel(), idx[1:, 1:].ravel()], 1),  # shear
        np.stack([idx[1:, :-1].ravel(), idx[:-1, 1:].ravel()], 1),
        np.stack([idx[:-2, :].ravel(), idx[2:, :].ravel()], 1),    # bend
        np.stack([idx[:, :-2].ravel(), idx[:, 2:].ravel()], 1),
    ]
    return pos, np.concatenate(pairs).astype(np.int64)


def scene_from_simulation(sim) -> dict:
    """Every array the reference needs, read (as float64 numpy) from an engine Simulation:
    the learnable parameters by name plus topology (spring ends, pinned flags) and the
    ground's fixed height and particle radius."""
    from gradsim_taichi.solvers.springs import Springs

    model = sim.model
    scene = {name: np.array(sim.get_param(name), dtype=np.float64) for name in PARAM_NAMES}
    springs = [f for f in model.forces if isinstance(f, Springs)]
    if len(springs) != 1:
        raise ValueError("the reference supports models with exactly one spring set")
    scene["ends"] = springs[0].ends.to_numpy().astype(np.int64)
    scene["pinned"] = model.particles.pinned.to_numpy().astype(bool)
    scene["ground_height"] = model.ground.height
    scene["radius"] = model.ground.radius
    # the smoothed contact (C1 at first touch and at friction saturation), when the
    # engine's ground has it; None selects the original gradSim contact
    smooth = hasattr(model.ground, "elastic_width")
    scene["elastic_width"] = float(model.ground.elastic_width) if smooth else None
    scene["damping_depth"] = float(model.ground.damping_depth) if smooth else None
    scene["dt"] = sim.dt
    scene["frames"] = sim.frames
    scene["substeps"] = sim.substeps
    return scene


class TorchParticles:
    """The particle model of the engine in vectorized PyTorch.

    Args:
        scene: the dict of :func:`scene_from_simulation`.
        dtype: torch dtype of the rollout (the engine's precision).

    :meth:`rollout` maps a dict of parameter tensors (any of ``PARAM_NAMES``; the
    others come from ``scene``) to positions at frame boundaries ``[F + 1, N, 3]``.
    """

    def __init__(self, scene: dict, dtype=torch.float64):
        self.dtype = dtype
        self.scene = scene
        ends = torch.as_tensor(scene["ends"], dtype=torch.int64)
        self.i = ends[:, 0].contiguous()
        self.j = ends[:, 1].contiguous()
        self.pinned = torch.as_tensor(scene["pinned"], dtype=torch.bool)
        self.any_pinned = bool(self.pinned.any())
        self.ground_height = float(scene["ground_height"])
        self.radius = float(scene["radius"])
        self.elastic_width = scene.get("elastic_width")
        self.damping_depth = scene.get("damping_depth")
        self.dt = float(scene["dt"])
        self.frames = int(scene["frames"])
        self.substeps = int(scene["substeps"])
        self.n = len(scene["mass"])
        # (1, 0, 1): keeps the tangential part of a velocity (y is the ground normal)
        self.tangential = torch.tensor([1.0, 0.0, 1.0], dtype=dtype)
        self.unit_y = torch.tensor([0.0, 1.0, 0.0], dtype=dtype)

    def tensor(self, name: str, requires_grad: bool = False) -> torch.Tensor:
        """A fresh leaf tensor holding the scene's value of parameter ``name``."""
        t = torch.tensor(self.scene[name], dtype=self.dtype)
        return t.requires_grad_(requires_grad)

    def _get(self, params: dict, name: str) -> torch.Tensor:
        if name in params:
            return params[name]
        return torch.as_tensor(self.scene[name], dtype=self.dtype)

    def spring_forces(self, x, v, ke, kd, rest):
        """``solvers/springs.py``: f = (ke (l - rest) + kd (v_rel . d)) d on end i, -f on j."""
        i, j = self.i, self.j
        d = x.index_select(0, j) - x.index_select(0, i)
        length = torch.sqrt((d * d).sum(1) + 1e-30)
        direction = d / length[:, None]
        speed = ((v.index_select(0, j) - v.index_select(0, i)) * direction).sum(1)
        fs = (ke * (length - rest) + kd * speed)[:, None] * direction
        f = torch.zeros_like(x)
        return f.index_add(0, i, fs).index_add(0, j, -fs)

    def contact_forces(self, x, v, cke, ckd, ckf, cmu):
        """``solvers/ground_contact.py``, for penetration p = -c > 0 (c the signed distance).

        Original (gradSim): fn = ke p - kd min(vn, 0); friction -kf vt while
        kf |vt| < mu fn, else -(mu fn / |vt|) vt (zero when vt = 0).
        Smoothed (when the scene has ``elastic_width``): the elastic term blends in with
        ke w (2 t^2 - t^3), t = p / w, below p = w; the damping is scaled by the smoothstep
        t^2 (3 - 2 t), t = p / damping_depth, below p = damping_depth; friction is
        -kf (tanh(s) / s) vt with s = kf |vt| / (mu fn) (series 1 - s^2/3 + 2 s^4/15 for
        s^2 <= 1e-4), zero when mu fn <= 0.
        """
        c = x[:, 1] - self.radius - self.ground_height
        vn_neg = torch.clamp(v[:, 1], max=0.0)
        vt = v * self.tangential
        vt2 = (vt * vt).sum(1)
        one = torch.ones_like(vt2)
        # where() everywhere below picks values whose unselected branch stays finite with
        # finite gradients (0 * inf = NaN in autograd), hence the "safe" denominators
        if self.elastic_width is None:
            fn = -(cke * c + ckd * vn_neg)
            cap = cmu * fn
            sticking = ckf * ckf * vt2 < cap * cap
            sliding = (~sticking) & (vt2 > 0.0)
            inv = cap / torch.sqrt(torch.where(sliding, vt2, one))
            scale = torch.where(sticking, ckf.expand_as(vt2),
                                torch.where(sliding, inv, torch.zeros_like(vt2)))
        else:
            pen = -c
            w, dd = self.elastic_width, self.damping_depth
            t = pen / w
            elastic = torch.where(pen < w, cke * w * (2.0 * t * t - t * t * t), cke * pen)
            t = pen / dd
            ramp = torch.where(pen < dd, t * t * (3.0 - 2.0 * t), one)
            fn = elastic - ckd * vn_neg * ramp
            cap = cmu * fn
            active = cap > 0.0
            x2 = ckf * ckf * vt2 / torch.where(active, cap * cap, one)
            big = x2 > 1e-4
            s = torch.sqrt(torch.where(big, x2, one))
            factor = torch.where(big, torch.tanh(s) / s, 1.0 - x2 / 3.0 + 2.0 * x2 * x2 / 15.0)
            scale = torch.where(active, ckf * factor, torch.zeros_like(vt2))
        force = fn[:, None] * self.unit_y - scale[:, None] * vt
        return torch.where((c < 0.0)[:, None], force, torch.zeros_like(force))

    def step(self, x, v, ext, p):
        """One semi-implicit Euler substep (``solvers/particles.py``)."""
        f = self.spring_forces(x, v, p["spring_stiffness"], p["spring_damping"],
                               p["spring_rest_length"])
        f = f + self.contact_forces(x, v, p["contact_ke"], p["contact_kd"], p["contact_kf"],
                                    p["contact_mu"])
        acc = (f + ext) / p["mass"][:, None] + p["gravity"]
        v1 = v + self.dt * acc
        x1 = x + self.dt * v1
        if self.any_pinned:
            pin = self.pinned[:, None]
            v1 = torch.where(pin, torch.zeros_like(v1), v1)
            x1 = torch.where(pin, x, x1)
        return x1, v1

    def rollout(self, params: dict | None = None) -> torch.Tensor:
        """Positions at frame boundaries ``[frames + 1, N, 3]`` (differentiable)."""
        params = params or {}
        p = {name: self._get(params, name) for name in PARAM_NAMES}
        # scalars / globals at the engine's full shapes (autograd reduces them back)
        p["mass"] = p["mass"].expand(self.n)
        for name in ("spring_stiffness", "spring_damping", "spring_rest_length"):
            p[name] = p[name].expand(len(self.i))
        x = p["initial_position"].expand(self.n, 3)
        v = p["initial_velocity"].expand(self.n, 3)
        ext = p["external_force"].expand(self.frames, self.n, 3)
        out = [x]
        for frame in range(self.frames):
            e = ext[frame]
            for _ in range(self.substeps):
                x, v = self.step(x, v, e, p)
            out.append(x)
        return torch.stack(out)

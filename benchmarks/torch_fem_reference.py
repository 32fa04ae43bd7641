"""Vectorized plain-PyTorch implementation of the same tet FEM particle model as
``gradsim_taichi.solvers.fem_tets`` + the particle integrator (no ground contact):
stable neo-Hookean with Lame reparametrisation, strain-rate and volume-rate damping,
per-tet activation per frame, semi-implicit Euler with pinned particles.

Used by ``bench_fem.py`` as the speed reference and to check our results."""

import torch


class TorchFEM:
    """The reference model on tensors (all of one dtype).

    Args:
        tets: [T, 4] long; dm_inv: [T, 3, 3]; vol: [T]; mass: [N]; pinned: [N] bool;
        gravity: [3]; dt: substep; substeps: per frame.
    """

    def __init__(self, tets, dm_inv, vol, mass, pinned, gravity, dt, substeps):
        self.tets, self.dm_inv, self.vol = tets, dm_inv, vol
        self.mass, self.pinned, self.gravity = mass, pinned, gravity
        self.dt, self.substeps = dt, substeps
        self.flat = tets.reshape(-1).contiguous()
        # contiguous index columns: indexing with a strided column of tets is ~100x slower
        self.cols = [tets[:, k].contiguous() for k in range(4)]

    def forces(self, x, v, mu, lam, kd, act):
        xs = [x.index_select(0, c) for c in self.cols]
        vs = [v.index_select(0, c) for c in self.cols]
        ds = torch.stack([xs[k] - xs[0] for k in (1, 2, 3)], dim=2)
        dv = torch.stack([vs[k] - vs[0] for k in (1, 2, 3)], dim=2)
        F = ds @ self.dm_inv
        Fdot = dv @ self.dm_inv
        c0, c1, c2 = F[:, :, 0], F[:, :, 1], F[:, :, 2]
        cof = torch.stack([torch.linalg.cross(c1, c2), torch.linalg.cross(c2, c0),
                           torch.linalg.cross(c0, c1)], dim=2)
        J = (c0 * torch.linalg.cross(c1, c2)).sum(-1)
        ic = (F * F).sum((1, 2))
        mu_s = 4.0 / 3.0 * mu
        lam_s = lam + 5.0 / 6.0 * mu
        jdot = (cof * Fdot).sum((1, 2))
        ftf = F.transpose(1, 2) @ Fdot
        strain_rate = 0.5 * (ftf + ftf.transpose(1, 2))
        pressure = lam_s * (J - 1.0 + act) - 0.75 * mu_s + kd * jdot
        P = ((mu_s * (1.0 - 1.0 / (ic + 1.0)))[:, None, None] * F + pressure[:, None, None] * cof
             + kd[:, None, None] * (F @ strain_rate))
        H = -self.vol[:, None, None] * (P @ self.dm_inv.transpose(1, 2))
        f123 = H.transpose(1, 2)  # [T, vertex 1..3, xyz]
        fv = torch.cat([-f123.sum(1, keepdim=True), f123], dim=1)
        return torch.zeros_like(x).index_add(0, self.flat, fv.reshape(-1, 3))

    def rollout(self, x, v, mu, lam, kd, act, frames):
        """Positions at frame boundaries [frames + 1, N, 3]; ``act`` is [frames, T]."""
        free = (~self.pinned)[:, None]
        out = [x]
        for frame in range(frames):
            for _ in range(self.substeps):
                f = self.forces(x, v, mu, lam, kd, act[frame])
                v1 = v + self.dt * (f / self.mass[:, None] + self.gravity)
                v = torch.where(free, v1, torch.zeros_like(v1))
                x = torch.where(free, x + self.dt * v1, x)
            out.append(x)
        return torch.stack(out)

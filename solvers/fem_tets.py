"""Tetrahedral FEM solids: stable neo-Hookean elasticity (Smith et al. 2018) with
Galilean- and rotation-invariant damping and per-tet activation.

Per tet, with rest edge matrix ``Dm = [X1-X0, X2-X0, X3-X0]``, rest volume ``V``,
deformation gradient ``F = Ds Dm^-1`` and its rate ``Fdot = [v1-v0, v2-v0, v3-v0] Dm^-1``
(relative velocities only, so a uniformly moving body feels no damping):

    Psi(F) = mu'/2 (Ic - 3) - mu'/2 log((Ic + 1) / 4) + lam'/2 (J - alpha + a)^2
    P      = mu' (1 - 1/(Ic + 1)) F + lam' (J - alpha + a) cof(F)              (elastic)
           + kd F sym(F^T Fdot) + kd Jdot cof(F)                               (damping)

with ``Ic = tr(F^T F)`` (the full invariant: the reference engine used only the
diagonal of F, so rotated tets felt stress), ``J = det F``, ``cof(F) = dJ/dF``,
``Jdot = cof(F) : Fdot`` and ``alpha = 1 + 3 mu' / (4 lam')`` (the rest state is
stress free). The forces are ``[f1 f2 f3] = -V P Dm^-T``, ``f0 = -(f1 + f2 + f3)``.

Parameters are the *Lame* parameters ``mu, lam`` of linear elasticity: the model
uses ``mu' = 4/3 mu`` and ``lam' = lam + 5/6 mu`` (Smith et al., Sec. 3.4), whose
linearisation at rest is exactly ``P = mu (G + G^T) + lam tr(G) I`` for ``F = I + G``.
So Young's modulus is ``E = mu (3 lam + 2 mu) / (lam + mu)`` and Poisson's ratio
``nu = lam / (2 (lam + mu))``, as in linear elasticity.

Damping dissipates the strain rate ``sym(F^T Fdot)`` (zero for any rigid motion,
translation or rotation) and the volume rate ``Jdot`` (the reference used absolute
velocities there, damping a uniformly moving block). ``kd`` is a viscosity [Pa s].

Activation ``a`` (per tet and frame) shifts the preferred volume ratio to about
``1 - a``: positive values contract a tet, negative ones expand it.

Every term stays finite for inverted (``J < 0``) and fully collapsed (``F = 0``)
tets: there is no division by J or by a rest quantity at run time.
"""

import numpy as np
import taichi as ti
import torch

from gradsim_taichi import field_pool, runtime
from gradsim_taichi.kernels import WithAdjoint, field_to_torch, read_fields, torch_to_field
from gradsim_taichi.params import Param, engine_tensor
from gradsim_taichi.solvers.registry import ForceModelBase
from gradsim_taichi.solvers.scatter import Scatter


def smith_parameters(mu, lam):
    """Lame ``(mu, lam)`` -> the stable neo-Hookean model's ``(mu', lam')``."""
    mu = np.asarray(mu, dtype=np.float64)
    return 4.0 / 3.0 * mu, np.asarray(lam, dtype=np.float64) + 5.0 / 6.0 * mu


def rest_shape(vertices, tets):
    """Inverse rest edge matrices ``[T, 3, 3]`` and rest volumes ``[T]`` (float64)."""
    x = np.asarray(vertices, dtype=np.float64)
    t = np.asarray(tets, dtype=np.int64)
    dm = np.stack([x[t[:, k]] - x[t[:, 0]] for k in (1, 2, 3)], axis=2)  # columns are edges
    det = np.linalg.det(dm)
    return np.linalg.inv(dm), np.abs(det) / 6.0


@ti.func
def _col(M, k: ti.template()):
    return ti.Vector([M[0, k], M[1, k], M[2, k]])


@ti.func
def _cofactor(F):
    """cof(F) = dJ/dF: columns c1 x c2, c2 x c0, c0 x c1 of F's columns."""
    c0, c1, c2 = _col(F, 0), _col(F, 1), _col(F, 2)
    return ti.Matrix.cols([c1.cross(c2), c2.cross(c0), c0.cross(c1)])


@ti.func
def _dcofactor(F, M):
    """d(cof(F) : M)/dF for a fixed matrix M."""
    c0, c1, c2 = _col(F, 0), _col(F, 1), _col(F, 2)
    m0, m1, m2 = _col(M, 0), _col(M, 1), _col(M, 2)
    return ti.Matrix.cols([m1.cross(c2) + c1.cross(m2), c2.cross(m0) + m2.cross(c0),
                           m0.cross(c1) + c0.cross(m1)])


@ti.data_oriented
class TetFEM(ForceModelBase):
    """Particle force model for tetrahedral solids (see the module docstring).

    Args:
        tets: ``[T, 4]`` particle indices (into the shared particle system).
        rest_positions: ``[N, 3]`` rest positions of *all* particles (only those used
            by tets are read); the rest shape is fixed when the model is built.
        mu, lam: Lame parameters [Pa], per tet ``[T]``.
        damping: viscosity [Pa s], per tet ``[T]``.
        density: per tet ``[T]`` [kg/m^3]; only used by the ``density`` parameter.
        particles: the :class:`~gradsim_taichi.solvers.particles.ParticleState` whose
            mass field the ``density`` parameter writes.

    Learnable parameters: ``tet_mu``, ``tet_lambda``, ``tet_damping`` ([T]),
    ``tet_activation`` ([frames, T]) and ``density`` ([T]).
    """

    per_frame = True  # apply(x, v, f, row, frame): activations are per frame

    def __init__(self, tets, rest_positions, mu, lam, damping, density, particles):
        real = runtime.real()
        tets = np.asarray(tets, dtype=np.int64)
        self.count = len(tets)
        self.particles = particles
        self._tets = tets
        dm_inv, vol = rest_shape(rest_positions, tets)
        self._dm_inv, self._vol = dm_inv, vol
        self._density = np.asarray(density, dtype=np.float64).copy()
        self._soft_ids = np.unique(tets.ravel())  # particles whose mass density drives
        self.tets = field_pool.vector(4, ti.i32, shape=self.count)
        self.dm_inv = field_pool.matrix(3, 3, real, shape=self.count)
        self.vol = field_pool.field(real, self.count)
        self.mu = self.learnable("tet_mu", mu, "Lame mu of each tet [Pa], per tet",
                                 nonnegative=True)
        self.lam = self.learnable("tet_lambda", lam, "Lame lambda of each tet [Pa], per tet")
        self.kd = self.learnable("tet_damping", damping,
                                 "tet strain-rate viscosity [Pa s], per tet", nonnegative=True)
        self.fill_learnables([(self.tets, tets), (self.dm_inv, dm_inv), (self.vol, vol)])
        self.declare(self._density_param())
        self.act = None
        self.frames = 0
        # In parallel, per-tet corner buffers (forces; adjoints of x and v) gathered per
        # particle: float atomics were the bottleneck on the CPU, and this is deterministic.
        self.scatter = Scatter(tets, ns_per_item=150.0, channels=2)
        self.apply_frame = WithAdjoint(self._forces, self._forces_adjoint)
        self.apply = self.apply_frame

    def stability_terms(self, x0) -> list:
        """A tet's stiffness and damping per unit displacement of a corner: ``(2 mu +
        lambda) a`` and ``damping a`` with ``a`` its edge length (force ~ modulus x
        area x strain = modulus a^2 (d / a))."""
        edge = 2.04 * np.cbrt(np.abs(self._vol))  # a regular tet of volume V has edge 2.04 V^(1/3)
        mu, lam, kd = read_fields([self.mu, self.lam, self.kd])
        return [("tet_mu, tet_lambda", "stiffness", (2 * mu + np.maximum(lam, 0.0)) * edge,
                 self._tets),
                ("tet_damping", "damping", kd * edge, self._tets)]

    # ---- storage and parameters --------------------------------------------------------
    def allocate(self, rows: int, frames: int) -> None:
        """Per-frame activations ``[frames, T]`` (zero)."""
        self.frames = frames
        self.act = self.learnable("tet_activation", np.zeros((frames, self.count)),
                                  "tet activation (preferred volume ratio ~ 1 - a), "
                                  "(frames, T)")
        self.fill_learnables()

    def lumped_masses(self, density) -> np.ndarray:
        """Particle masses ``[N]`` of the particle system from per-tet ``density``: each
        tet's ``density * V`` split equally over its 4 vertices (0 for non-tet particles)."""
        m = np.zeros(self.particles.n)
        np.add.at(m, self._tets.ravel(), np.repeat(density * self._vol / 4.0, 4))
        return m

    def _density_param(self) -> Param:
        t = self.count
        mass = self.particles.mass
        device, f64 = runtime.torch_device(), torch.float64
        tets = torch.as_tensor(self._tets, device=device)
        corners = tets.reshape(-1)
        vol = torch.as_tensor(self._vol, dtype=f64, device=device)
        soft = torch.as_tensor(self._soft_ids, device=device)
        self._density = engine_tensor(self._density).expand(t).clone()

        def set_density(values):
            # lumped masses (see lumped_masses) in float64, on the engine's device
            self._density = engine_tensor(values).reshape(t).clone()
            share = (self._density.to(f64) * vol / 4.0).repeat_interleave(4)
            lumped = torch.zeros(mass.shape[0], dtype=f64, device=device)
            lumped.index_add_(0, corners, share)
            m = field_to_torch(mass).to(f64)
            m[soft] = lumped[soft]
            torch_to_field(m.to(runtime.torch_dtype()), mass)

        def density_grad():
            # dL/drho_t = sum over the tet's vertices of dL/dm_i * V_t / 4
            gm = field_to_torch(mass.grad).to(f64)
            return (gm[tets].sum(dim=1) * vol / 4.0).to(runtime.torch_dtype())

        return Param("density", (t,),
                     "tet mass density [kg/m^3], per tet; writes the lumped masses of the "
                     "tets' particles into the same field as 'mass' (the last one set wins)",
                     set_density, lambda: self._density.clone(), density_grad, positive=True)

    # ---- forces ------------------------------------------------------------------------
    # ``apply_frame(x, v, f, row, frame)`` is the forward kernel, ``apply_frame.grad`` its
    # hand-written adjoint (see gradsim_taichi.kernels): Taichi's generated
    # adjoint of this matrix-heavy kernel took minutes to compile.

    @ti.func
    def _tet(self, x: ti.template(), v: ti.template(), row, t):
        """Deformation gradient, its rate, cofactor and the model's scalars of tet ``t``."""
        i0 = self.tets[t][0]
        x0 = x[row, i0]
        v0 = v[row, i0]
        ds = ti.Matrix.cols([x[row, self.tets[t][1]] - x0, x[row, self.tets[t][2]] - x0,
                             x[row, self.tets[t][3]] - x0])
        dv = ti.Matrix.cols([v[row, self.tets[t][1]] - v0, v[row, self.tets[t][2]] - v0,
                             v[row, self.tets[t][3]] - v0])
        F = ds @ self.dm_inv[t]
        Fdot = dv @ self.dm_inv[t]
        return F, Fdot, _cofactor(F)

    @ti.kernel
    def _forces(self, x: ti.template(), v: ti.template(), f: ti.template(), row: ti.i32,
                frame: ti.i32):
        # Not differentiated by Taichi (hand-written adjoint below): the Scatter may gather.
        ti.loop_config(serialize=self.scatter.serial)
        for t in range(self.count):
            F, Fdot, cof = self._tet(x, v, row, t)
            J = _col(F, 0).dot(_col(F, 1).cross(_col(F, 2)))
            ic = (F * F).sum()
            mu_s = 4.0 / 3.0 * self.mu[t]
            lam_s = self.lam[t] + 5.0 / 6.0 * self.mu[t]
            kd = self.kd[t]
            ftf = F.transpose() @ Fdot
            S = 0.5 * (ftf + ftf.transpose())  # strain rate, zero for rigid motion
            # lam' (J - alpha + a) + kd Jdot, written without dividing by lam' (may be 0)
            p = lam_s * (J - 1.0 + self.act[frame, t]) - 0.75 * mu_s + kd * (cof * Fdot).sum()
            P = (mu_s * (1.0 - 1.0 / (ic + 1.0))) * F + p * cof + kd * (F @ S)
            H = (-self.vol[t]) * (P @ self.dm_inv[t].transpose())
            fsum = ti.Vector([0.0, 0.0, 0.0])
            for k in ti.static(range(3)):
                fk = _col(H, k)
                fsum += fk
                self.scatter.add(0, f, row, self.tets[t][k + 1], t, k + 1, fk)
            self.scatter.add(0, f, row, self.tets[t][0], t, 0, -fsum)
        self.scatter.gather(0, f, row)

    @ti.kernel
    def _forces_adjoint(self, x: ti.template(), v: ti.template(), f: ti.template(),
                        row: ti.i32, frame: ti.i32):
        # l = sum_k f.grad_k . f_k = P : Gh with Gh = -V [g1-g0, g2-g0, g3-g0] Dm^-1, and
        # P = a(Ic) F + p cof(F) + kd F S. With K = sym(F^T Gh), gp = cof : Gh:
        #   dl/dF    = a Gh + 2 a'(Ic) (F:Gh) F + p dcof(F, Gh)
        #              + gp (lam' cof + kd dcof(F, Fdot)) + kd (Gh S + Fdot K)
        #   dl/dFdot = kd (gp cof + F K),  dl/dDs = dl/dF Dm^-T (same for velocities)
        # where dcof(F, M) = d(cof(F) : M)/dF. Checked against finite differences.
        ti.loop_config(serialize=self.scatter.serial)
        for t in range(self.count):
            F, Fdot, cof = self._tet(x, v, row, t)
            B = self.dm_inv[t]
            g0 = f.grad[row, self.tets[t][0]]
            G = ti.Matrix.cols([f.grad[row, self.tets[t][1]] - g0,
                                f.grad[row, self.tets[t][2]] - g0,
                                f.grad[row, self.tets[t][3]] - g0])
            Gh = (-self.vol[t]) * (G @ B)
            J = _col(F, 0).dot(_col(F, 1).cross(_col(F, 2)))
            ic = (F * F).sum()
            mu_s = 4.0 / 3.0 * self.mu[t]
            lam_s = self.lam[t] + 5.0 / 6.0 * self.mu[t]
            kd = self.kd[t]
            act = self.act[frame, t]
            jdot = (cof * Fdot).sum()
            ftf = F.transpose() @ Fdot
            S = 0.5 * (ftf + ftf.transpose())
            p = lam_s * (J - 1.0 + act) - 0.75 * mu_s + kd * jdot
            a = mu_s * (1.0 - 1.0 / (ic + 1.0))
            FG = (F * Gh).sum()
            gp = (cof * Gh).sum()  # dl/dp
            FtG = F.transpose() @ Gh
            K = 0.5 * (FtG + FtG.transpose())
            # parameters
            dl_dmu_s = (1.0 - 1.0 / (ic + 1.0)) * FG - 0.75 * gp
            dl_dlam_s = (J - 1.0 + act) * gp
            self.mu.grad[t] += 4.0 / 3.0 * dl_dmu_s + 5.0 / 6.0 * dl_dlam_s
            self.lam.grad[t] += dl_dlam_s
            self.kd.grad[t] += jdot * gp + (S * K).sum()
            self.act.grad[frame, t] += lam_s * gp
            # state
            # (dcof is linear in its second argument: one call for both cofactor terms)
            dF = (a * Gh + (2.0 * mu_s / ((ic + 1.0) * (ic + 1.0)) * FG) * F
                  + _dcofactor(F, p * Gh + (gp * kd) * Fdot) + (gp * lam_s) * cof
                  + kd * (Gh @ S + Fdot @ K))
            dFdot = kd * (gp * cof + F @ K)
            dX = dF @ B.transpose()
            dV = dFdot @ B.transpose()
            sx = ti.Vector([0.0, 0.0, 0.0])
            sv = ti.Vector([0.0, 0.0, 0.0])
            for k in ti.static(range(3)):
                sx += _col(dX, k)
                sv += _col(dV, k)
                i = self.tets[t][k + 1]
                self.scatter.add(0, x.grad, row, i, t, k + 1, _col(dX, k))
                self.scatter.add(1, v.grad, row, i, t, k + 1, _col(dV, k))
            i0 = self.tets[t][0]
            self.scatter.add(0, x.grad, row, i0, t, 0, -sx)
            self.scatter.add(1, v.grad, row, i0, t, 0, -sv)
        self.scatter.gather(0, x.grad, row)
        self.scatter.gather(1, v.grad, row)

    # ---- inspection (numpy, for tests and diagnostics) ---------------------------------
    def deformation(self, positions) -> np.ndarray:
        """Deformation gradients ``[T, 3, 3]`` of all tets for particle ``positions [N, 3]``."""
        x = np.asarray(positions, dtype=np.float64)
        t = self._tets
        ds = np.stack([x[t[:, k]] - x[t[:, 0]] for k in (1, 2, 3)], axis=2)
        return ds @ self._dm_inv

    def elastic_energy(self, positions, activation=None) -> float:
        """Total elastic energy [J] at ``positions [N, 3]`` (zero at rest without
        activation); ``activation`` is a scalar or ``[T]`` (default 0)."""
        F = self.deformation(positions)
        mu_s, lam_s = smith_parameters(*read_fields([self.mu, self.lam]))
        a = np.zeros(self.count) if activation is None else np.broadcast_to(activation,
                                                                            (self.count,))
        ic = np.einsum("tij,tij->t", F, F)
        J = np.linalg.det(F)
        alpha = 1.0 + 0.75 * mu_s / lam_s
        psi = (0.5 * mu_s * (ic - 3.0) - 0.5 * mu_s * np.log((ic + 1.0) / 4.0)
               + 0.5 * lam_s * ((J - alpha + a) ** 2 - (1.0 - alpha) ** 2))
        return float(np.sum(self._vol * psi))

"""The peers benchmark's models (:mod:`bench_peers`): the shared topology, generated in
numpy, and each engine's build of it (ours, warp.sim, Newton), imported only inside the
engine's own worker process. The models' parameters and what differs between the
engines are documented in ``bench_peers.py``."""

from __future__ import annotations

import itertools
import os

import numpy as np

FPS = 60.0
# tri_kd = 0: the peers damp dF/dt with it besides the area rate, ours the area rate only
# (with 0.01 the free-flight gradients differ by 20%; the cost is the same)
CLOTH = dict(mass=1e-3, tri_ke=100.0, tri_ka=100.0, tri_kd=0.0, edge_ke=0.01, edge_kd=1e-4,
             height=0.025, radius=0.01)
CLOTH_CONTACT = dict(ke=1e3, kd=0.5, kf=0.5, mu=0.5)
FEM = dict(size=0.5, height=0.02, E=5e4, nu=0.3, density=1000.0, damping=2.0, radius=0.0)
FEM_CONTACT = dict(ke=1e4, kd=10.0, kf=10.0, mu=0.5)
PLAIN_CONTACT = 1e-6  # [m] ours' contact smoothing widths in this benchmark (see Ours)


# ---- the shared topology (numpy only) ---------------------------------------------------
def cloth_topology(cells: int = 64) -> dict:
    """A flat square cloth of ``cells`` x ``cells`` cells in the xz plane.

    Returns ``x`` [(cells+1)^2, 3] (vertex ``(i, j)`` is ``j (cells+1) + i``), ``tris``
    [2 cells^2, 3] wound with normal +y, ``hinges`` [H, 4] as ``(o0, o1, v0, v1)``: the
    interior edge ``v0 -> v1`` of the triangle with opposite vertex ``o0`` (the other
    triangle, opposite ``o1``, runs it ``v1 -> v0``)."""
    n = cells + 1
    g = np.arange(n) / cells - 0.5
    gx, gz = np.meshgrid(g, g, indexing="xy")
    x = np.stack([gx.ravel(), np.full(n * n, CLOTH["height"]), gz.ravel()], axis=1)
    i, j = np.meshgrid(np.arange(cells), np.arange(cells), indexing="xy")
    a = (j * n + i).ravel()
    b, c, d = a + 1, a + n + 1, a + n
    tris = np.concatenate([np.stack([a, d, c], 1), np.stack([a, c, b], 1)])
    return dict(x=x, tris=tris, hinges=triangle_hinges(tris))


def triangle_hinges(tris: np.ndarray) -> np.ndarray:
    """Hinges ``(o0, o1, v0, v1)`` [H, 4] of every edge shared by two triangles."""
    tris = np.asarray(tris, dtype=np.int64)
    a, b, o = (tris[:, list(p)].ravel() for p in ((0, 1, 2), (1, 2, 0), (2, 0, 1)))
    key = np.minimum(a, b) * (tris.max() + 1) + np.maximum(a, b)
    order = np.argsort(key, kind="stable")
    key, a, b, o = key[order], a[order], b[order], o[order]
    first = np.nonzero(key[:-1] == key[1:])[0]
    return np.stack([o[first], o[first + 1], a[first], b[first]], axis=1)


def box_topology(cells: int = 12) -> dict:
    """A cube of ``cells^3`` cells, each split into 6 positively oriented tets (Kuhn).

    Returns ``x`` [(cells+1)^3, 3] (vertex ``(i, j, k)`` is ``i + n (j + n k)``,
    ``n = cells + 1``), ``tets`` [6 cells^3, 4] and ``mass`` [N] (density times volume,
    a quarter to each vertex of a tet)."""
    n = cells + 1
    s = FEM["size"]
    g = np.arange(n) / cells * s
    gz, gy, gx = np.meshgrid(g, g, g, indexing="ij")
    x = np.stack([gx.ravel() - s / 2, gy.ravel() + FEM["height"], gz.ravel() - s / 2], 1)
    ci, cj, ck = (c.ravel() for c in np.meshgrid(*[np.arange(cells)] * 3, indexing="ij"))
    tets = []
    for perm in itertools.permutations(range(3)):
        step = np.zeros((3, len(ci)), dtype=np.int64)
        corners = [ci + n * (cj + n * ck)]
        for axis in perm:
            step[axis] += 1
            corners.append(ci + step[0] + n * (cj + step[1] + n * (ck + step[2])))
        tets.append(np.stack(corners, axis=1))
    tets = np.concatenate(tets)
    vol = tet_volumes(x, tets)
    tets[vol < 0] = tets[vol < 0][:, [0, 2, 1, 3]]
    mass = np.zeros(len(x))
    np.add.at(mass, tets.ravel(), np.repeat(np.abs(vol) * FEM["density"] / 4.0, 4))
    return dict(x=x, tets=tets, mass=mass)


def tet_volumes(x: np.ndarray, tets: np.ndarray) -> np.ndarray:
    """Signed volumes [T] of tets [T, 4] at positions x [N, 3]."""
    e = [x[tets[:, k]] - x[tets[:, 0]] for k in (1, 2, 3)]
    return np.einsum("ij,ij->i", e[0], np.cross(e[1], e[2])) / 6.0


def lame(E: float, nu: float) -> tuple[float, float]:
    """Lame parameters (mu, lambda) of Young's modulus E and Poisson ratio nu."""
    return E / (2 * (1 + nu)), E * nu / ((1 + nu) * (1 - 2 * nu))


# ---- the engines (each imported only inside its worker process) -------------------------
class Ours:
    """gradsim_taichi: ModelBuilder -> Simulation (``checkpoint="auto"``)."""

    def __init__(self, scene, data, frames, substeps, threads=None, precision=None,
                 smooth=False):
        """Initialise the runtime at ``threads`` and ``precision`` (None: keep the
        current one) and build the ``scene`` model from ``data``; ``smooth``: our default
        smoothed contact instead of the peers' plain law."""
        os.environ.setdefault("TI_SKIP_VERSION_CHECK", "ON")
        os.environ.setdefault("ENABLE_TAICHI_HEADER_PRINT", "0")
        import gradsim_taichi as gs

        if threads is not None:  # the CPU, like the peers (warp's CPU kernels: one thread)
            gs.init(arch="cpu", threads=threads, precision=precision)
        self.gs, self.scene, self.data = gs, scene, data
        # ours' C1 contact (gradSim's law smoothed over 0.1 / 1 mm) shrunk to the plain law
        # the peers run, unless smooth: the same kernels, so the same speed
        self.smoothing = {} if smooth else dict(contact_damping_depth=PLAIN_CONTACT,
                                                contact_elastic_width=PLAIN_CONTACT)
        self.sim = self.make(frames, substeps)
        g = np.zeros((frames + 1, len(data["x"]), 3))
        g[-1] = data["w"]
        self.grad = {"particles": g.astype(gs.runtime.np_dtype())}

    def make(self, frames, substeps):
        gs, d = self.gs, self.data
        if self.scene == "cloth":
            ct = CLOTH_CONTACT
            b = gs.ModelBuilder(particle_radius=CLOTH["radius"], contact_ke=ct["ke"],
                                contact_kd=ct["kd"], contact_kf=ct["kf"], contact_mu=ct["mu"],
                                **self.smoothing)
            cloth = b.add_cloth_mesh(d["x"], d["tris"], mass=CLOTH["mass"], velocity=d["v"],
                                     **{k: CLOTH[k] for k in ("tri_ke", "tri_ka", "tri_kd",
                                                              "edge_ke", "edge_kd")})
            from gradsim_taichi.solvers.bending import mesh_hinges

            ours = {tuple(h) for h in cloth.particles[mesh_hinges(d["tris"])].tolist()}
            if ours != {tuple(h) for h in d["hinges"].tolist()}:
                raise AssertionError("our builder's hinges differ from the shared topology's")
        else:
            ct = FEM_CONTACT
            b = gs.ModelBuilder(particle_radius=FEM["radius"], contact_ke=ct["ke"],
                                contact_kd=ct["kd"], contact_kf=ct["kf"], contact_mu=ct["mu"],
                                **self.smoothing)
            mu, lam = lame(FEM["E"], FEM["nu"])
            b.add_soft_mesh(d["x"], d["tets"], density=FEM["density"], mu=mu, lam=lam,
                            damping=FEM["damping"], velocity=d["v"])
        # "auto": the timed rollouts (4 x 16 substeps, 23 MB) store every substep like the
        # peers' tapes; the memory run (60 x 32) is over the budget and checkpoints
        return gs.Simulation(b.finalize(), frames=frames, substeps=substeps,
                             dt=1.0 / (FPS * substeps), checkpoint="auto")

    def forward(self):
        return self.sim.forward()["particles"][-1]

    def forward_backward(self):
        self.sim.forward()
        self.sim.backward(self.grad)

    def grad_v0(self) -> np.ndarray:
        """dL/d(initial velocities) [N, 3] of a forward + backward."""
        self.forward_backward()
        return self.sim.param_grad("initial_velocity").reshape(-1, 3)


class WarpPeer:
    """warp.sim (warp-lang 1.9) or Newton: the same topology, semi-implicit Euler, tapes."""

    def __init__(self, engine, scene, data, frames, substeps):
        import warp as wp

        wp.config.quiet = True
        wp.init()
        self.wp, self.engine, self.scene, self.data = wp, engine, scene, data
        self.steps, self.dt = frames * substeps, 1.0 / (FPS * substeps)
        self.model = self.build()
        n = len(data["x"])
        self.q0 = wp.array(data["x"].astype(np.float32), dtype=wp.vec3)
        self.qd0 = wp.array(data["v"].astype(np.float32), dtype=wp.vec3)
        self.w = wp.array(data["w"].astype(np.float32), dtype=wp.vec3)
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)
        self.pair = [self.model.state() for _ in range(2)]
        self.tape_states = None
        self.n = n

        @wp.kernel
        def weighted_sum(x: wp.array(dtype=wp.vec3), w: wp.array(dtype=wp.vec3),
                         loss: wp.array(dtype=float)):
            i = wp.tid()
            wp.atomic_add(loss, 0, wp.dot(w[i], x[i]))

        self.weighted_sum = weighted_sum

    def build(self):
        d = self.data
        cloth = self.scene == "cloth"
        ct = CLOTH_CONTACT if cloth else FEM_CONTACT
        mass = np.full(len(d["x"]), CLOTH["mass"]) if cloth else d["mass"]
        radius = CLOTH["radius"] if cloth else FEM["radius"]
        if self.engine == "newton":
            import newton

            b = newton.ModelBuilder(up_axis=newton.Axis.Y, gravity=(0.0, -9.8, 0.0))
            b.add_particles(d["x"].tolist(), d["v"].tolist(), mass.tolist(),
                            [radius] * len(mass))
        else:
            import warp.sim

            b = warp.sim.ModelBuilder(up_vector=(0.0, 1.0, 0.0), gravity=-9.8)
            for p, v, m in zip(d["x"], d["v"], mass):
                b.add_particle(tuple(p), tuple(v), float(m), radius=radius)
        if cloth:
            t, h = d["tris"], d["hinges"]
            nt, nh = len(t), len(h)
            b.add_triangles(t[:, 0], t[:, 1], t[:, 2], tri_ke=[CLOTH["tri_ke"]] * nt,
                            tri_ka=[CLOTH["tri_ka"]] * nt, tri_kd=[CLOTH["tri_kd"]] * nt,
                            tri_drag=[0.0] * nt, tri_lift=[0.0] * nt)
            ke, kd = np.full(nh, CLOTH["edge_ke"]), np.full(nh, CLOTH["edge_kd"])
            if self.engine == "newton":  # unit normals: scale to equal forces at rest
                x = d["x"]
                n1 = np.cross(x[h[:, 2]] - x[h[:, 0]], x[h[:, 3]] - x[h[:, 0]])
                n2 = np.cross(x[h[:, 3]] - x[h[:, 1]], x[h[:, 2]] - x[h[:, 1]])
                scale = 2.0 / (np.linalg.norm(n1, axis=1) + np.linalg.norm(n2, axis=1))
                ke, kd = ke * scale, kd * scale**2
            b.add_edges(h[:, 0], h[:, 1], h[:, 2], h[:, 3], rest=np.zeros(nh), edge_ke=ke,
                        edge_kd=kd)
        else:
            mu, lam = lame(FEM["E"], FEM["nu"])
            k_mu, k_lambda = 4.0 / 3.0 * mu, lam + 5.0 / 6.0 * mu  # ours' Smith parameters
            for i, j, k, m in d["tets"].tolist():
                b.add_tetrahedron(i, j, k, m, k_mu=k_mu, k_lambda=k_lambda,
                                  k_damp=FEM["damping"])
        if self.engine == "newton":
            import newton

            cfg = newton.ModelBuilder.ShapeConfig(ke=ct["ke"], kd=ct["kd"], kf=ct["kf"],
                                                  mu=ct["mu"])
            b.add_ground_plane(cfg=cfg)
            model = b.finalize(device="cpu", requires_grad=True)
            model.particle_grid = None  # no particle-particle contact
            self.solver = newton.solvers.SolverSemiImplicit(model, enable_tri_contact=False)
            self.pipeline = newton.CollisionPipeline(model, broad_phase="explicit",
                                                     requires_grad=True)
            self.contacts = self.pipeline.contacts()
        else:
            import warp.sim

            b.set_ground_plane(normal=(0.0, 1.0, 0.0), offset=0.0)
            model = b.finalize(device="cpu", requires_grad=True)
            model.ground = True
            model.particle_max_radius = 0.0  # no particle-particle contact
            model.enable_tri_collisions = False
            self.solver = warp.sim.SemiImplicitIntegrator()
        model.soft_contact_ke, model.soft_contact_kd = ct["ke"], ct["kd"]
        model.soft_contact_kf, model.soft_contact_mu = ct["kf"], ct["mu"]
        model.particle_ke, model.particle_kd = ct["ke"], ct["kd"]
        self.control = model.control()
        return model

    def reset(self, state):
        state.particle_q.assign(self.q0)
        state.particle_qd.assign(self.qd0)

    def step(self, s_in, s_out):
        s_in.clear_forces()
        if self.engine == "newton":
            self.pipeline.collide(s_in, self.contacts)
            self.solver.step(s_in, s_out, self.control, self.contacts, self.dt)
        else:
            self.solver.simulate(self.model, s_in, s_out, self.dt, self.control)

    def forward(self):
        a, b = self.pair
        self.reset(a)
        for _ in range(self.steps):
            self.step(a, b)
            a, b = b, a
        return a.particle_q.numpy()

    def allocate_tape_states(self):
        if self.tape_states is None:
            self.tape_states = [self.model.state(requires_grad=True)
                                for _ in range(self.steps + 1)]

    def grad_v0(self) -> np.ndarray:
        """dL/d(initial velocities) [N, 3] of a forward + backward."""
        return self.forward_backward(keep=True)

    def forward_backward(self, keep=False):
        wp = self.wp
        self.allocate_tape_states()
        s = self.tape_states
        self.reset(s[0])
        self.loss.zero_()
        tape = wp.Tape()
        with tape:
            for k in range(self.steps):
                self.step(s[k], s[k + 1])
            wp.launch(self.weighted_sum, dim=self.n, inputs=[s[-1].particle_q, self.w],
                      outputs=[self.loss])
        tape.backward(self.loss)
        g = s[0].particle_qd.grad.numpy().copy() if keep else None
        tape.zero()
        return g


def make_engine(engine, scene, data, frames, substeps, smooth=False):
    if engine.startswith("ours"):
        threads = 1 if "-1t" in engine else 2
        return Ours(scene, data, frames, substeps, threads,
                    "f64" if engine.endswith("f64") else "f32", smooth)
    return WarpPeer(engine, scene, data, frames, substeps)

"""Rigid bodies: a system with its own state, stepped by one kernel per substep.

State per body and buffer row: centre-of-mass position ``x``, orientation quaternion
``q`` (w, x, y, z), linear velocity ``v`` and world angular velocity ``w``. The
integrator is semi-implicit and works on the world angular momentum, which makes the
gyroscopic term exact: ``L = R I R^T w``; ``L' = L + dt tau``; the orientation moves
with ``w* = R I^-1 R^T L'`` (``q' = normalise(q + dt/2 [0, w*] q)``) and the new angular
velocity is ``w' = R' I^-1 R'^T L'``. A torque-free body therefore conserves ``L`` to
round-off while its ``w`` precesses. Inertia ``I = mass * inertia_scale * I_unit``
(``I_unit``: the mesh's inertia per unit mass about its centre of mass).

Frames: every body has a *mesh frame* (the coordinates its vertices were given in).
``body_position`` / ``body_orientation`` place the mesh frame in the world at t = 0;
the centre of mass sits at the mesh's geometric centre of mass plus
``body_com_offset`` (mesh frame; the inertia about the COM is unchanged by it).
Segment buffers and checkpoints follow :mod:`gradsim_taichi.solvers.particles`.

Loads: ``body_force`` / ``body_torque`` [frames, B, 3] act at the COM in world axes
(the builder's world COM forces are folded into ``body_force``). Forces at points or
in body axes keep their own per-frame field ``body_point_force`` [frames, L, 3]: their
torque ``r x F`` uses the *current* lever arm and rotation, which a per-frame torque
fixed at build time could not. Impulses ``body_impulse`` [K, 3] act as the force
``J / duration`` over their time window, each substep taking its overlapping share.
"""

import numpy as np
import taichi as ti
import torch

from gradsim_taichi import field_pool, runtime
from gradsim_taichi.kernels import (
    FastKernel,
    field_to_torch,
    read_fields,
    torch_to_field,
    write_fields,
    zero_fields,
)
from gradsim_taichi.params import Learnable, Param, engine_tensor, field_param
from gradsim_taichi.solvers.rigid_contact import vertex_contact
from gradsim_taichi.solvers.scatter import Scatter


@ti.func
def quat_to_mat(q):
    """Rotation matrix of a unit quaternion (w, x, y, z)."""
    w, x, y, z = q[0], q[1], q[2], q[3]
    return ti.Matrix([
        [1.0 - 2.0 * (y * y + z * z), 2.0 * (x * y - w * z), 2.0 * (x * z + w * y)],
        [2.0 * (x * y + w * z), 1.0 - 2.0 * (x * x + z * z), 2.0 * (y * z - w * x)],
        [2.0 * (x * z - w * y), 2.0 * (y * z + w * x), 1.0 - 2.0 * (x * x + y * y)],
    ])


@ti.func
def mv(a, v):
    """a @ v for a 3x3 matrix, written out: Taichi's ``@`` builds the product in a mutable
    local, whose adjoint compiles slowly and warns about reading unset variables."""
    return ti.Vector([a[0, 0] * v[0] + a[0, 1] * v[1] + a[0, 2] * v[2],
                      a[1, 0] * v[0] + a[1, 1] * v[1] + a[1, 2] * v[2],
                      a[2, 0] * v[0] + a[2, 1] * v[1] + a[2, 2] * v[2]])


@ti.func
def mtv(a, v):
    """a^T @ v for a 3x3 matrix."""
    return ti.Vector([a[0, 0] * v[0] + a[1, 0] * v[1] + a[2, 0] * v[2],
                      a[0, 1] * v[0] + a[1, 1] * v[1] + a[2, 1] * v[2],
                      a[0, 2] * v[0] + a[1, 2] * v[1] + a[2, 2] * v[2]])


@ti.func
def omega_times_quat(o, q):
    """The quaternion product [0, o] * q."""
    return ti.Vector([
        -o[0] * q[1] - o[1] * q[2] - o[2] * q[3],
        o[0] * q[0] + o[1] * q[3] - o[2] * q[2],
        o[1] * q[0] + o[2] * q[1] - o[0] * q[3],
        o[2] * q[0] + o[0] * q[2] - o[1] * q[1],
    ])


def _field_bytes(*fields) -> int:
    total = 0
    for f in fields:
        n = int(np.prod(f.shape)) * getattr(f, "n", 1) * getattr(f, "m", 1)
        total += n
    return total * np.dtype(runtime.np_dtype()).itemsize


@ti.data_oriented
class RigidBodySystem(Learnable):
    """All rigid bodies of a model as one system (name ``"rigid"``).

    Built by :class:`gradsim_taichi.build_rigid.RigidBuilderMixin`; see the module doc
    for the state and the integrator. ``meshes`` lists ``(vertex_offset, faces)`` per
    body (faces index the body's own vertices) and ``faces`` holds all faces indexing
    the concatenated output vertices, for renderers.
    """

    name = "rigid"

    def __init__(self, ground, gravity, bodies: list, loads: list, impulses: list,
                 com_forces: list = ()):
        real = runtime.real()
        dtype = runtime.np_dtype()
        self.ground = ground
        self.has_ground = ground is not None
        self.nb = nb = len(bodies)
        counts = [len(b["vertices"]) for b in bodies]
        offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        self.nv = nv = int(offsets[-1])
        # vertex contact adds into the bodies (atomic adds when parallel: Taichi generates
        # the step's adjoint); the integrator's loop writes each body's own state
        self.contact = Scatter(np.repeat(np.arange(nb), counts), ns_per_item=100.0)
        # with slots > 1 (CUDA) vertex i adds into partial sum i mod slots of its body, not
        # into the body's one sum, and reads its body's state from that slot's copy, so
        # neither the forward nor the adjoint has one hot atomic (runtime.reduction_slots)
        self.slots = runtime.reduction_slots() if self.has_ground and nv else 1
        self.slot_loop = Scatter.items(nb * self.slots, ns_per_item=20.0)
        self.body_loop = Scatter.items(nb, ns_per_item=200.0)
        self.meshes = [(int(offsets[i]), np.asarray(b["faces"], dtype=np.int64))
                       for i, b in enumerate(bodies)]
        self.faces = np.concatenate([f + o for o, f in self.meshes])
        self.vertex_body = np.repeat(np.arange(nb), counts)
        self._loads_spec, self._impulse_spec = loads, impulses
        self._com_force_spec = list(com_forces)
        self.gravity = field_pool.vector(3, real, shape=())
        # per body
        stack = lambda key: np.asarray([b[key] for b in bodies], dtype=dtype)  # noqa: E731
        self.mass = self.learnable("body_mass", stack("mass"), "rigid body mass [kg], [B]",
                                   positive=True)
        self.iscale = self.learnable("body_inertia_scale", np.ones(nb),
                                     "factor on each body's inertia tensor, [B]", positive=True)
        self.com_off = self.learnable(
            "body_com_offset", np.zeros((nb, 3)),
            "centre-of-mass shift from the mesh's, mesh frame [m], [B, 3]", n=3)
        self.pos0 = self.learnable(
            "body_position", stack("position"),
            "world position of each mesh frame's origin at t=0 [m], [B, 3]", n=3)
        self.quat0 = field_pool.vector(4, real, nb, needs_grad=True)
        self.declare(_quat_param(self.quat0, nb), self.quat0)
        self.vel0 = self.learnable("body_velocity", stack("velocity"),
                                   "centre-of-mass velocity at t=0 [m/s], [B, 3]", n=3)
        self.omega0 = self.learnable("body_angular_velocity", stack("angular_velocity"),
                                     "world angular velocity at t=0 [rad/s], [B, 3]", n=3)
        # velocity damping, force -m (c + c2 |v|) v and torque -(d + d2 |w|) L (see
        # add_rigid_body): air drag, or another engine's (PyBullet's) damping
        self.lin_damp = self.learnable(
            "body_linear_damping", stack("linear_damping"),
            "linear velocity damping rate c of each body [1/s], [B]", nonnegative=True)
        self.lin_drag = self.learnable(
            "body_linear_drag", stack("linear_drag"),
            "quadratic velocity damping c2 of each body [1/m], [B]", nonnegative=True)
        self.ang_damp = self.learnable(
            "body_angular_damping", stack("angular_damping"),
            "angular velocity damping rate d of each body [1/s], [B]", nonnegative=True)
        self.ang_drag = self.learnable(
            "body_angular_drag", stack("angular_drag"),
            "quadratic angular velocity damping d2 of each body [1/rad], [B]",
            nonnegative=True)
        self.com_geom = field_pool.vector(3, real, nb)
        self.i_unit = field_pool.matrix(3, 3, real, nb)
        self.i_unit_inv = field_pool.matrix(3, 3, real, nb)
        i_unit = stack("inertia_unit")
        writes = [(self.gravity, np.asarray(gravity, dtype=dtype)),
                  (self.quat0, stack("orientation")), (self.com_geom, stack("com")),
                  (self.i_unit, i_unit), (self.i_unit_inv, np.linalg.inv(i_unit))]
        # per vertex: position relative to the geometric COM (mesh frame) and body id
        self.vlocal = field_pool.vector(3, real, max(nv, 1))
        self.vbody = field_pool.field(ti.i32, max(nv, 1))
        if nv:
            writes += [(self.vlocal, np.concatenate([b["vertices"] - b["com"] for b in bodies])),
                       (self.vbody, self.vertex_body)]
        # point loads (forces at points or in the body frame) and impulses
        self.nl, self.nk = len(loads), len(impulses)
        self.load_body = field_pool.field(ti.i32, max(self.nl, 1))
        self.load_point = field_pool.vector(3, real, max(self.nl, 1))
        self.load_flags = field_pool.vector(2, real, max(self.nl, 1))  # (at point, body frame)
        self.imp_body = field_pool.field(ti.i32, max(self.nk, 1))
        self.imp_point = field_pool.vector(3, real, max(self.nk, 1))
        self.imp_flags = field_pool.vector(2, real, max(self.nk, 1))
        self.imp_window = field_pool.vector(2, real, max(self.nk, 1))  # (start, duration) [s]
        self.impulse = field_pool.vector(3, real, max(self.nk, 1), needs_grad=True)
        for spec, body, point, flags in ((loads, self.load_body, self.load_point,
                                          self.load_flags),
                                         (impulses, self.imp_body, self.imp_point,
                                          self.imp_flags)):
            if spec:
                writes += [
                    (body, [s["body"] for s in spec]),
                    (point, [np.zeros(3) if s["point"] is None
                             else s["point"] - bodies[s["body"]]["com"] for s in spec]),
                    (flags, [[s["point"] is not None, s["frame"] == "body"] for s in spec])]
        if impulses:
            writes += [(self.imp_window, [[s["start"], s["duration"]] for s in impulses]),
                       (self.impulse, [s["impulse"] for s in impulses])]
        self.fill_learnables(writes)  # after every field is made (see Learnable.learnable)
        self.rows = self.frames = 0
        self._first = 0

    # ---- storage -------------------------------------------------------------------
    def allocate(self, rows: int, frames: int) -> None:
        """Segment buffers of ``rows`` substeps, ``frames + 1`` checkpoints, per-frame loads."""
        real = runtime.real()
        nb = self.nb
        self.rows, self.frames = rows, frames
        self._step_launch = FastKernel(self._step)  # ~5 us a launch instead of ~25 us
        vec = lambda n, shape, grad=True: field_pool.vector(n, real, shape, needs_grad=grad)  # noqa
        self.x, self.v, self.w = (vec(3, (rows, nb)) for _ in range(3))
        self.q = vec(4, (rows, nb))
        self.fsum, self.tsum = vec(3, (rows, nb)), vec(3, (rows, nb))
        self.partial = []
        if self.slots > 1:  # per (row, body * slots + slot): the body's state and partial sums
            ns = nb * self.slots
            self.xs, self.vs, self.ws, self.cs = (vec(3, (rows, ns)) for _ in range(4))
            self.qs = vec(4, (rows, ns))
            self.fpart, self.tpart = vec(3, (rows, ns)), vec(3, (rows, ns))
            self.partial = [self.xs, self.vs, self.ws, self.cs, self.qs, self.fpart, self.tpart]
        self.xc, self.vc, self.wc = (vec(3, (frames + 1, nb), False) for _ in range(3))
        self.qc = vec(4, (frames + 1, nb), False)
        self.ext_f, self.ext_t = vec(3, (frames, nb)), vec(3, (frames, nb))
        self.load_force = vec(3, (frames, max(self.nl, 1)))
        self.verts = vec(3, (frames + 1, max(self.nv, 1)))
        ext = np.zeros((frames, nb, 3))
        lf = np.zeros((frames, max(self.nl, 1), 3))
        for l, s in enumerate(self._loads_spec):
            lf[_frame_indices(s["frames"], frames), l] += s["force"]
        for s in self._com_force_spec:
            ext[_frame_indices(s["frames"], frames), s["body"]] += s["force"]
        write_fields([(self.ext_f, ext), (self.load_force, lf)])
        self.learnable_field("body_force", self.ext_f,
                             "world force at the centre of mass per frame [N], [frames, B, 3]")
        self.learnable_field("body_torque", self.ext_t,
                             "world torque per frame [N m], [frames, B, 3]")
        if self.nl:
            self.learnable_field("body_point_force", self.load_force,
                                 "per-frame force of each add_body_force load (its own point "
                                 "and frame) [N], [frames, L, 3]", shape=(frames, self.nl, 3))
        if self.nk:
            self.learnable_field("body_impulse", self.impulse,
                                 "impulse of each add_body_impulse [N s], [K, 3]",
                                 shape=(self.nk, 3))

    def row_bytes(self) -> int:
        """Bytes one substep row of the buffers adds (values and adjoints): each body's
        x, v, w, q, force and torque sums, and with per-slot partial sums (the ground
        contact's reduction) each (body, slot)'s state and partial sums
        (``Simulation(checkpoint="auto")`` sizes full storage with it)."""
        per_body = 3 + 3 + 3 + 4 + 3 + 3
        per_slot = (3 + 3 + 3 + 3 + 4 + 3 + 3) * self.slots if self.slots > 1 else 0
        return 2 * (per_body + per_slot) * self.nb * np.dtype(runtime.np_dtype()).itemsize

    def state_bytes(self) -> int:
        """Bytes of stored state (values and adjoints) of the buffers and checkpoints."""
        buffers = _field_bytes(self.x, self.v, self.w, self.q, self.fsum, self.tsum,
                               *self.partial)
        return 2 * buffers + _field_bytes(self.xc, self.vc, self.wc, self.qc)

    # ---- forward ---------------------------------------------------------------------
    @ti.kernel
    def _init_state(self):
        """Row 0 from the initial-state parameters (differentiable)."""
        for b in range(self.nb):
            q = self.quat0[b].normalized()
            rot = quat_to_mat(q)
            self.x[0, b] = self.pos0[b] + mv(rot, self.com_geom[b] + self.com_off[b])
            self.q[0, b] = q
            self.v[0, b] = self.vel0[b]
            self.w[0, b] = self.omega0[b]

    @ti.kernel
    def _begin_segment(self, frame: ti.i32, from_checkpoint: ti.i32):
        for b in range(self.nb):
            if from_checkpoint:
                self.x[0, b] = self.xc[frame, b]
                self.q[0, b] = self.qc[frame, b]
                self.v[0, b] = self.vc[frame, b]
                self.w[0, b] = self.wc[frame, b]
            else:
                self.xc[0, b] = self.x[0, b]
                self.qc[0, b] = self.q[0, b]
                self.vc[0, b] = self.v[0, b]
                self.wc[0, b] = self.w[0, b]
        for r, b in ti.ndrange(self.rows, self.nb):  # force accumulators start at zero
            self.fsum[r, b] = ti.Vector([0.0, 0.0, 0.0])
            self.tsum[r, b] = ti.Vector([0.0, 0.0, 0.0])
        if ti.static(self.slots > 1):
            for r, k in ti.ndrange(self.rows, self.nb * self.slots):
                self.fpart[r, k] = ti.Vector([0.0, 0.0, 0.0])
                self.tpart[r, k] = ti.Vector([0.0, 0.0, 0.0])

    def load(self, frame: int) -> None:
        """Start a segment at ``frame``: frame 0 comes from the parameters, later frames
        from their checkpoints. Also clears the segment's force accumulators."""
        self._first = int(frame)
        if frame == 0:
            self._init_state()
            self._begin_segment(0, 0)
        else:
            self._begin_segment(frame, 1)

    def clear_segment(self) -> None:
        pass  # done by load(), saving a kernel launch per frame

    def _time(self, row: int, dt: float) -> float:
        # Segments hold one frame of rows-1 substeps (checkpointing) or start at frame 0.
        return (self._first * (self.rows - 1) + row) * dt

    def step(self, row: int, frame: int, dt: float) -> None:
        self._step_launch(row, frame, dt, self._time(row, dt))

    def step_grad(self, row: int, frame: int, dt: float) -> None:
        self._step_launch.grad(row, frame, dt, self._time(row, dt))

    @ti.kernel
    def _step(self, row: ti.i32, frame: ti.i32, dt: float, t: float):
        """Contact, loads and impulses (atomic adds into the bodies), then integration.
        Top-level loops only: the adjoint kernel runs them in reverse order."""
        if ti.static(self.has_ground and self.nv > 0 and self.slots == 1):
            ti.loop_config(serialize=self.contact.serial)
            for i in range(self.nv):
                b = self.vbody[i]
                rot = quat_to_mat(self.q[row, b])
                f, tau = vertex_contact(self.ground, self.x[row, b], rot, self.v[row, b],
                                        self.w[row, b], self.vlocal[i] - self.com_off[b])
                self.contact.add(0, self.fsum, row, b, i, 0, f)
                self.contact.add(0, self.tsum, row, b, i, 0, tau)
        if ti.static(self.has_ground and self.nv > 0 and self.slots > 1):
            # each body's state copied per slot (the adjoint: slots adds per body) ...
            ti.loop_config(serialize=self.slot_loop.serial)
            for k in range(self.nb * self.slots):
                b = k // self.slots
                self.xs[row, k] = self.x[row, b]
                self.qs[row, k] = self.q[row, b]
                self.vs[row, k] = self.v[row, b]
                self.ws[row, k] = self.w[row, b]
                self.cs[row, k] = self.com_off[b]
            # ... vertex i reads and adds into slot i mod slots of its body ...
            ti.loop_config(serialize=self.contact.serial)
            for i in range(self.nv):
                k = self.vbody[i] * self.slots + i % self.slots
                rot = quat_to_mat(self.qs[row, k])
                f, tau = vertex_contact(self.ground, self.xs[row, k], rot, self.vs[row, k],
                                        self.ws[row, k], self.vlocal[i] - self.cs[row, k])
                self.contact.add(0, self.fpart, row, k, i, 0, f)
                self.contact.add(0, self.tpart, row, k, i, 0, tau)
            # ... and the partial sums add into the body (the adjoint: a broadcast)
            ti.loop_config(serialize=self.slot_loop.serial)
            for k in range(self.nb * self.slots):
                b = k // self.slots
                self.fsum[row, b] += self.fpart[row, k]
                self.tsum[row, b] += self.tpart[row, k]
        if ti.static(self.nl > 0):
            ti.loop_config(serialize=True)  # a handful of loads
            for l in range(self.nl):
                b = self.load_body[l]
                rot = quat_to_mat(self.q[row, b])
                flags = self.load_flags[l]
                f_in = self.load_force[frame, l]
                f = flags[1] * mv(rot, f_in) + (1.0 - flags[1]) * f_in
                r = flags[0] * mv(rot, self.load_point[l] - self.com_off[b])
                self.fsum[row, b] += f
                self.tsum[row, b] += r.cross(f)
        if ti.static(self.nk > 0):
            ti.loop_config(serialize=True)
            for k in range(self.nk):
                b = self.imp_body[k]
                rot = quat_to_mat(self.q[row, b])
                flags = self.imp_flags[k]
                start, length = self.imp_window[k][0], self.imp_window[k][1]
                overlap = ti.max(0.0, ti.min(t + dt, start + length) - ti.max(t, start))
                f_in = self.impulse[k] * (overlap / (dt * length))
                f = flags[1] * mv(rot, f_in) + (1.0 - flags[1]) * f_in
                r = flags[0] * mv(rot, self.imp_point[k] - self.com_off[b])
                self.fsum[row, b] += f
                self.tsum[row, b] += r.cross(f)
        ti.loop_config(serialize=self.body_loop.serial)
        for b in range(self.nb):
            m = self.mass[b]
            ms = m * self.iscale[b]
            q = self.q[row, b]
            rot = quat_to_mat(q)
            v0 = self.v[row, b]
            w0 = self.w[row, b]
            # |v| with a floor far below any speed: finite gradients at rest
            damp = self.lin_damp[b] + self.lin_drag[b] * ti.sqrt(v0.dot(v0) + 1e-30)
            force = (self.fsum[row, b] + self.ext_f[frame, b] + m * self.gravity[None]
                     - (m * damp) * v0)
            v1 = v0 + (dt / m) * force
            self.v[row + 1, b] = v1
            self.x[row + 1, b] = self.x[row, b] + dt * v1
            ang = mv(rot, ms * mv(self.i_unit[b], mtv(rot, w0)))
            spin = self.ang_damp[b] + self.ang_drag[b] * ti.sqrt(w0.dot(w0) + 1e-30)
            torque = self.tsum[row, b] + self.ext_t[frame, b] - spin * ang
            ang1 = ang + dt * torque
            inv = self.i_unit_inv[b] / ms
            w_mid = mv(rot, mv(inv, mtv(rot, ang1)))
            q1 = (q + (0.5 * dt) * omega_times_quat(w_mid, q)).normalized()
            rot1 = quat_to_mat(q1)
            self.q[row + 1, b] = q1
            self.w[row + 1, b] = mv(rot1, mv(inv, mtv(rot1, ang1)))

    @ti.kernel
    def save(self, frame: ti.i32, row: ti.i32):
        """Buffer ``row`` -> checkpoint ``frame``."""
        for b in range(self.nb):
            self.xc[frame, b] = self.x[row, b]
            self.qc[frame, b] = self.q[row, b]
            self.vc[frame, b] = self.v[row, b]
            self.wc[frame, b] = self.w[row, b]

    @ti.kernel
    def _emit_row(self, frame: ti.i32, row: ti.i32):
        """World vertices of buffer ``row`` -> output ``frame`` (its adjoint seeds the
        state's adjoint from dL/d(vertices))."""
        for i in range(self.nv):
            b = self.vbody[i]
            rot = quat_to_mat(self.q[row, b])
            self.verts[frame, i] = self.x[row, b] + mv(rot, self.vlocal[i] - self.com_off[b])

    @ti.kernel
    def _emit_checkpoints(self):
        for f, i in ti.ndrange(self.frames + 1, self.nv):
            b = self.vbody[i]
            rot = quat_to_mat(self.qc[f, b])
            self.verts[f, i] = self.xc[f, b] + mv(rot, self.vlocal[i] - self.com_off[b])

    def output(self) -> torch.Tensor:
        """World vertex positions at every frame boundary, ``[frames + 1, V, 3]`` (engine
        device)."""
        self._emit_checkpoints()
        return field_to_torch(self.verts)[:, : self.nv]

    def body_states(self) -> dict:
        """Checkpointed states ``{"position" (COM), "orientation", "velocity",
        "angular_velocity"}``, each ``[frames + 1, B, k]``."""
        names = ("position", "orientation", "velocity", "angular_velocity")
        return dict(zip(names, read_fields([self.xc, self.qc, self.vc, self.wc])))

    # ---- backward --------------------------------------------------------------------
    def begin_backward(self, grad_frames) -> None:
        """Zero all adjoints; ``grad_frames`` is dL/d(vertex positions) [frames + 1, V, 3]."""
        grads = [f.grad for f in (self.x, self.v, self.w, self.q, self.fsum, self.tsum,
                                  self.ext_f, self.ext_t, self.load_force, self.impulse,
                                  self.quat0)]
        grads += [g for g in self.learnable_grads() if all(g is not h for h in grads)]
        if not self.nv:
            grads.append(self.verts.grad)
        zero_fields(grads)  # with every declared parameter's field
        if self.nv:
            torch_to_field(grad_frames, self.verts.grad)

    @ti.kernel
    def _seed(self, last: ti.i32):
        for b in range(self.nb):
            cx, cq = self.x.grad[0, b], self.q.grad[0, b]
            cv, cw = self.v.grad[0, b], self.w.grad[0, b]
            for r in range(last + 1):
                self.x.grad[r, b] = ti.Vector([0.0, 0.0, 0.0])
                self.q.grad[r, b] = ti.Vector([0.0, 0.0, 0.0, 0.0])
                self.v.grad[r, b] = ti.Vector([0.0, 0.0, 0.0])
                self.w.grad[r, b] = ti.Vector([0.0, 0.0, 0.0])
                self.fsum.grad[r, b] = ti.Vector([0.0, 0.0, 0.0])
                self.tsum.grad[r, b] = ti.Vector([0.0, 0.0, 0.0])
            self.x.grad[last, b] = cx
            self.q.grad[last, b] = cq
            self.v.grad[last, b] = cv
            self.w.grad[last, b] = cw
        if ti.static(self.slots > 1):
            for r, k in ti.ndrange(last + 1, self.nb * self.slots):
                for field in ti.static(self.partial):
                    field.grad[r, k] = ti.zero(field.grad[r, k])

    def seed_segment(self, first_frame: int, frames_in_segment: int, substeps: int) -> None:
        """Carry the adjoint of the later segment's row 0 to this segment's last row and
        add dL/d(vertices) of each frame boundary inside the segment."""
        self._seed(frames_in_segment * substeps)
        for k in range(1, frames_in_segment + 1):
            self._emit_row.grad(first_frame + k, k * substeps)

    def finish_backward(self) -> None:
        """Row 0 now holds dL/d(initial state): add frame 0's output, map to parameters."""
        self._emit_row.grad(0, 0)
        self._init_state.grad()


def _quat_param(field, nb) -> Param:
    p = field_param("body_orientation", field,
                    "orientation at t=0, quaternion (w, x, y, z), normalised in use, [B, 4]")
    setter = p.setter

    def checked(values):
        norms = torch.linalg.vector_norm(engine_tensor(values).reshape(nb, 4), dim=1)
        if nb and bool(norms.min() < 1e-12):  # (one host sync)
            i = int(torch.argmin(norms))
            raise ValueError(f"body_orientation[{i}] has norm {norms[i].item():.3g}; a "
                             "quaternion must be nonzero")
        setter(values)

    p.setter = checked
    return p


def _frame_indices(frames, count: int) -> np.ndarray:
    """Frame indices of a load: None (all), a slice, a range or a list of ints."""
    if frames is None:
        return np.arange(count)
    if isinstance(frames, slice):
        return np.arange(count)[frames]
    idx = np.asarray(list(frames), dtype=np.int64)
    bad = idx[(idx < 0) | (idx >= count)]
    if len(bad):
        raise ValueError(f"load frames include {int(bad[0])}, outside the simulation's "
                         f"frames [0, {count})")
    return idx

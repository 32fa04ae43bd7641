"""Particle state: storage, checkpoints and the semi-implicit Euler integrator.

State lives in *segment buffers* ``x[row, i]``, ``v[row, i]``, ``f[row, i]``: one row
per substep of the frames being simulated now, so that every value is written
once (Taichi's autodiff rule). Frame-boundary states are kept as checkpoints
``xc[frame, i]`` / ``vc[frame, i]``; the backward pass recomputes a segment from its
checkpoint. Force models (springs, cloth, FEM) add into ``f[row]``; the integrator
reads it and adds ground contact itself (one loop over the particles instead of two).
"""

import numpy as np
import taichi as ti
import torch

from gradsim_taichi import field_pool, runtime
from gradsim_taichi.kernels import (
    WithAdjoint,
    field_to_torch,
    torch_to_field,
    write_fields,
    zero_fields,
)
from gradsim_taichi.params import Learnable, Param, engine_tensor
from gradsim_taichi.solvers.scatter import Scatter


@ti.data_oriented
class ParticleState(Learnable):
    """Particle state storage and the integrator: particles with mass, a pinned flag,
    gravity and per-frame external forces (the force models live in
    :class:`gradsim_taichi.particle_system.ParticleSystem`).

    Pinned particles never move: their velocity is held at zero (the reference engine
    let them drift with their initial velocity). With a ``ground``
    (:class:`~gradsim_taichi.solvers.ground_contact.GroundParams`), every unpinned
    particle of radius ``ground.radius`` has contact with it.
    """

    def __init__(self, positions, velocities, masses, pinned, forces, gravity, ground=None):
        self.n = len(positions)
        self.loop = Scatter.items(self.n, ns_per_item=10.0)  # each particle writes its own
        self.mass = self.learnable("mass", masses, "particle mass [kg], per particle",
                                   positive=True)
        self.gravity = self.learnable("gravity", gravity,
                                      "gravitational acceleration [m/s^2], (3,)", n=3)
        self.pinned = field_pool.field(ti.i32, self.n)
        self.fill_learnables([(self.pinned, np.asarray(pinned))])
        self._x0 = np.asarray(positions, dtype=runtime.np_dtype())
        self._v0 = np.asarray(velocities, dtype=runtime.np_dtype())
        self._f_const = np.asarray(forces, dtype=runtime.np_dtype())
        self.ground = ground
        self.has_ground = ground is not None
        self.rows = 0
        self.frames = 0
        self.integrate = WithAdjoint(self._integrate, self._integrate_adjoint)

    # ---- storage -------------------------------------------------------------------
    def allocate(self, rows: int, frames: int) -> None:
        """Allocate segment buffers of ``rows`` substep states and ``frames + 1`` checkpoints."""
        real = runtime.real()
        n = self.n
        self.rows, self.frames = rows, frames
        self.x = field_pool.vector(3, real, shape=(rows, n), needs_grad=True)
        self.v = field_pool.vector(3, real, shape=(rows, n), needs_grad=True)
        self.f = field_pool.vector(3, real, shape=(rows, n), needs_grad=True)
        self.xc = field_pool.vector(3, real, shape=(frames + 1, n))
        self.vc = field_pool.vector(3, real, shape=(frames + 1, n))
        self.ext = field_pool.vector(3, real, shape=(frames, n), needs_grad=True)
        self.out_grad = field_pool.vector(3, real, shape=(frames + 1, n))
        self.out_grad_v = field_pool.vector(3, real, shape=(frames + 1, n))
        self.gravity_acc = field_pool.vector(3, real, shape=n)  # dL/dg per particle
        self.contact_acc = field_pool.vector(4, real, shape=n)  # dL/d(ke, kd, kf, mu) per particle
        self.substeps = field_pool.field(ti.i32, shape=())  # of the segment the adjoint runs
        self._substeps = 0
        write_fields([(self.ext, np.broadcast_to(self._f_const, (frames, n, 3)))])
        self._fill_loop = Scatter.items((frames + 1) * n, ns_per_item=2.0)
        self._x0 = engine_tensor(self._x0).reshape(n, 3).contiguous()
        self._v0 = engine_tensor(self._v0).reshape(n, 3).contiguous()
        self._fill_frames(self.xc, self._x0)
        self._fill_frames(self.vc, self._v0)
        self._x0_grad = torch.zeros_like(self._x0)
        self._v0_grad = torch.zeros_like(self._v0)

        def set_x0(values):
            self._x0 = engine_tensor(values).reshape(n, 3).clone()
            self._fill_frames(self.xc, self._x0)

        def set_v0(values):
            self._v0 = engine_tensor(values).reshape(n, 3).clone()
            self._fill_frames(self.vc, self._v0)

        self.declare(Param("initial_position", (n, 3), "particle positions at t=0 [m]",
                           set_x0, lambda: self._x0.clone(), lambda: self._x0_grad.clone()))
        self.declare(Param("initial_velocity", (n, 3), "particle velocities at t=0 [m/s]",
                           set_v0, lambda: self._v0.clone(), lambda: self._v0_grad.clone()))
        self.learnable_field("external_force", self.ext, "force on each particle, constant "
                             "within a frame [N], (frames, N, 3)")

    def row_bytes(self) -> int:
        """Bytes of one substep row of the buffers: x, v, f and their adjoints."""
        return self.n * 3 * np.dtype(runtime.np_dtype()).itemsize * 3 * 2

    def state_bytes(self) -> int:
        """Bytes of stored state (values and adjoints) of the buffers and checkpoints."""
        itemsize = np.dtype(runtime.np_dtype()).itemsize
        per_row = self.n * 3 * itemsize
        return per_row * (3 * 2 * self.rows + 2 * (self.frames + 1))

    @ti.kernel
    def _fill_frames(self, field: ti.template(), values: ti.types.ndarray()):
        """Every checkpoint of ``field`` <- ``values`` [N, 3] (the initial state)."""
        ti.loop_config(serialize=self._fill_loop.serial)
        for f, i in ti.ndrange(field.shape[0], self.n):
            field[f, i] = ti.Vector([values[i, 0], values[i, 1], values[i, 2]])

    # ---- forward ---------------------------------------------------------------------
    @ti.kernel
    def load(self, frame: ti.i32):
        """Checkpoint ``frame`` -> buffer row 0."""
        ti.loop_config(serialize=self.loop.serial)
        for i in range(self.n):
            self.x[0, i] = self.xc[frame, i]
            self.v[0, i] = self.vc[frame, i]
            self.f[0, i] = ti.Vector([0.0, 0.0, 0.0])

    @ti.kernel
    def save(self, frame: ti.i32, row: ti.i32):
        """Buffer ``row`` -> checkpoint ``frame``."""
        ti.loop_config(serialize=self.loop.serial)
        for i in range(self.n):
            self.xc[frame, i] = self.x[row, i]
            self.vc[frame, i] = self.v[row, i]

    @ti.func
    def _contact_distance(self, row, i):
        """Signed distance of particle ``i``'s surface from the ground (< 0: penetrating)."""
        return self.x[row, i][1] - self.ground.radius - self.ground.height

    @ti.kernel
    def _integrate(self, row: ti.i32, frame: ti.i32, dt: float):
        """Semi-implicit Euler: v' = v + dt (f / m + g),  x' = x + dt v', with f the force
        models' forces plus ground contact (the total is written back to ``f[row]``)."""
        ti.loop_config(serialize=self.loop.serial)
        for i in range(self.n):
            if self.pinned[i] == 0:
                force = self.f[row, i]
                if ti.static(self.has_ground):
                    force += self.ground.force(self._contact_distance(row, i), self.v[row, i])
                    self.f[row, i] = force
                acc = (force + self.ext[frame, i]) / self.mass[i] + self.gravity[None]
                v1 = self.v[row, i] + dt * acc
                self.v[row + 1, i] = v1
                self.x[row + 1, i] = self.x[row, i] + dt * v1
            else:
                self.v[row + 1, i] = ti.Vector([0.0, 0.0, 0.0])
                self.x[row + 1, i] = self.x[row, i]
            self.f[row + 1, i] = ti.Vector([0.0, 0.0, 0.0])  # the next substep adds into it

    @ti.kernel
    def _integrate_adjoint(self, row: ti.i32, frame: ti.i32, dt: float):
        """Adjoint of :meth:`_integrate` (hand-written: Taichi's generated one was ~4x the
        memory traffic). With gx1, gv1 the adjoints of row + 1 (plus dL/dx, dL/dv of the
        frame boundary when row + 1 is one):
        gx = gx1; gv1' = gv1 + dt gx1; gv = gv1'; ga = dt gv1';
        gf = ga / m; gext += ga / m; gm -= ga . (f + ext) / m^2; gg += ga;
        then ground contact's adjoint (from gf) into gx, gv and the contact parameters.
        It is the first adjoint kernel of a substep, so it *assigns* the adjoints of row:
        nothing has to be zeroed between substeps; the force models then add into them."""
        boundary = (row + 1) % self.substeps[None] == 0
        ti.loop_config(serialize=self.loop.serial)
        for i in range(self.n):
            gx1 = self.x.grad[row + 1, i]
            gv1 = self.v.grad[row + 1, i]
            if boundary:
                gx1 += self.out_grad[frame + 1, i]
                gv1 += self.out_grad_v[frame + 1, i]
            gx = gx1
            if self.pinned[i] == 0:
                gv = gv1 + dt * gx1
                ga = dt * gv
                m = self.mass[i]
                gf = ga / m
                self.f.grad[row, i] = gf
                self.ext.grad[frame, i] += gf
                self.mass.grad[i] -= ga.dot(self.f[row, i] + self.ext[frame, i]) / (m * m)
                self.gravity_acc[i] += ga  # per particle: no contended atomics
                if ti.static(self.has_ground):
                    g_c, g_vel, g_par = self.ground.force_adjoint(
                        self._contact_distance(row, i), self.v[row, i], gf)
                    gx[1] += g_c
                    gv += g_vel
                    self.contact_acc[i] += g_par
                self.v.grad[row, i] = gv
            else:
                self.v.grad[row, i] = ti.Vector([0.0, 0.0, 0.0])
                self.f.grad[row, i] = ti.Vector([0.0, 0.0, 0.0])
            self.x.grad[row, i] = gx

    # ---- backward --------------------------------------------------------------------
    def begin_backward(self, grad_frames, grad_velocities=None) -> None:
        """Zero the adjoints; ``grad_frames`` / ``grad_velocities`` are dL/d(positions) and
        dL/d(velocities) at the frame boundaries (None: zero). Of the buffers' adjoints only
        row 0's x and v are read before they are written (:meth:`seed_segment` carries
        them to the last row; the integrator's adjoint assigns every other row), so only
        they are zeroed: with every substep stored the buffers are the rollout's size."""
        self._clear_row0_grads()
        zeroed = [*self.learnable_grads(), self.gravity_acc, self.contact_acc]
        zero_fields(zeroed + ([self.out_grad_v] if grad_velocities is None else []))
        torch_to_field(grad_frames, self.out_grad)
        if grad_velocities is not None:
            torch_to_field(grad_velocities, self.out_grad_v)

    def seed_segment(self, first_frame: int, frames_in_segment: int, substeps: int) -> None:
        """Prepare adjoints for the reverse pass of one segment: the adjoint that reached
        row 0 of the later segment becomes the adjoint of this segment's last row. (The
        integrator's adjoint adds dL/dx, dL/dv of the frame boundaries and assigns every
        other row, so nothing is zeroed.)"""
        if self._substeps != substeps:
            self.substeps[None] = substeps
            self._substeps = substeps
        self._carry(frames_in_segment * substeps)

    @ti.kernel
    def _clear_row0_grads(self):
        ti.loop_config(serialize=self.loop.serial)
        for i in range(self.n):
            self.x.grad[0, i] = ti.Vector([0.0, 0.0, 0.0])
            self.v.grad[0, i] = ti.Vector([0.0, 0.0, 0.0])

    @ti.kernel
    def _carry(self, last: ti.i32):
        ti.loop_config(serialize=self.loop.serial)
        for i in range(self.n):
            self.x.grad[last, i] = self.x.grad[0, i]
            self.v.grad[last, i] = self.v.grad[0, i]

    def finish_backward(self) -> None:
        """Row 0 of the first segment now holds dL/d(initial state)."""
        self._x0_grad = torch.empty_like(self._x0)
        self._v0_grad = torch.empty_like(self._v0)
        self._finish(self._x0_grad, self._v0_grad)

    @ti.kernel
    def _finish(self, gx: ti.types.ndarray(), gv: ti.types.ndarray()):
        """dL/d(initial state) into ``gx``, ``gv`` [N, 3]; the per-particle sums of the
        gravity and ground-contact adjoints into their parameters' gradients (the ground's
        shared by every system that touches it: added to)."""
        ti.loop_config(serialize=self.loop.serial)
        for i in range(self.n):
            a = self.x.grad[0, i] + self.out_grad[0, i]
            b = self.v.grad[0, i] + self.out_grad_v[0, i]
            for j in ti.static(range(3)):
                gx[i, j] = a[j]
                gv[i, j] = b[j]
            self.gravity.grad[None] += self.gravity_acc[i]
            if ti.static(self.has_ground):
                for k, field in ti.static(enumerate(self.ground.fields())):
                    field.grad[None] += self.contact_acc[i][k]

    def output(self) -> torch.Tensor:
        """Positions at every frame boundary, ``[frames + 1, N, 3]`` (engine device)."""
        return field_to_torch(self.xc)

    def velocity_output(self) -> torch.Tensor:
        """Velocities at every frame boundary, ``[frames + 1, N, 3]`` (engine device)."""
        return field_to_torch(self.vc)

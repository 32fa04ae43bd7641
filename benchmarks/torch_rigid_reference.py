"""Vectorized plain-PyTorch reference of the rigid-body model of
``gradsim_taichi.solvers.rigid_bodies`` (same integrator, same vertex ground contact),
for benchmarks and cross-checks. Autograd gives its backward pass."""

from __future__ import annotations

import torch


def quat_to_mat(q: torch.Tensor) -> torch.Tensor:
    """[B, 4] unit quaternions (w, x, y, z) -> [B, 3, 3] rotations."""
    w, x, y, z = q.unbind(-1)
    return torch.stack([
        1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
        2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
        2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y),
    ], -1).reshape(q.shape[:-1] + (3, 3))


def omega_times_quat(o: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """The quaternion product [0, o] * q, batched."""
    w, x, y, z = q.unbind(-1)
    a, b, c = o.unbind(-1)
    return torch.stack([-a * x - b * y - c * z, a * w + b * z - c * y,
                        b * w + c * x - a * z, c * w + a * y - b * x], -1)


def ground_force(c, vel, ke, kd, kf, mu):
    """GroundParams.force for a batch of points (zero rows where c >= 0)."""
    vn = vel[:, 1]
    fn = -(ke * c + kd * torch.clamp(vn, max=0.0))
    vt = vel * torch.tensor([1.0, 0.0, 1.0], dtype=vel.dtype)
    vt2 = (vt * vt).sum(1)
    cap = mu * fn
    sticking = kf * kf * vt2 < cap * cap
    safe = torch.sqrt(torch.where(sticking | (vt2 <= 0), torch.ones_like(vt2), vt2))
    slide = torch.where(vt2 > 0, cap / safe, torch.zeros_like(vt2))
    friction = torch.where(sticking[:, None], -kf * vt, -slide[:, None] * vt)
    normal = torch.stack([torch.zeros_like(fn), fn, torch.zeros_like(fn)], 1)
    return torch.where((c < 0)[:, None], normal + friction, torch.zeros_like(vel))


def smooth_ground_force(c, vel, ke, kd, kf, mu, elastic_width, damping_depth):
    """The C1 variant of GroundParams.force (cubic elastic blend, smoothstep damping ramp,
    tanh friction saturation), for engines whose ground has ``elastic_width``."""
    contact = c < 0
    pen = torch.where(contact, -c, torch.zeros_like(c))
    t = pen / elastic_width
    elastic = torch.where(pen < elastic_width, ke * elastic_width * (2 * t * t - t * t * t),
                          ke * pen)
    s = pen / damping_depth
    ramp = torch.where(pen < damping_depth, s * s * (3 - 2 * s), torch.ones_like(s))
    fn = elastic - kd * torch.clamp(vel[:, 1], max=0.0) * ramp
    vt = vel * torch.tensor([1.0, 0.0, 1.0], dtype=vel.dtype)
    cap = mu * fn
    ok = contact & (cap > 0)
    safe_cap = torch.where(ok, cap, torch.ones_like(cap))
    x2 = torch.where(ok, kf * kf * (vt * vt).sum(1) / (safe_cap * safe_cap),
                     torch.zeros_like(cap))
    big = x2 > 1e-4
    x = torch.sqrt(torch.where(big, x2, torch.ones_like(x2)))
    factor = torch.where(big, torch.tanh(x) / x, 1 - x2 / 3 + 2 * x2 * x2 / 15)
    friction = torch.where(ok[:, None], -kf * factor[:, None] * vt, torch.zeros_like(vt))
    normal = torch.stack([torch.zeros_like(fn), fn, torch.zeros_like(fn)], 1)
    return torch.where(contact[:, None], normal + friction, torch.zeros_like(vel))


class TorchRigid:
    """The rigid model on torch tensors.

    Args:
        vlocal: [V, 3] vertices relative to their body's geometric COM (mesh frame).
        vbody: [V] body index of each vertex.
        com_geom: [B, 3]; i_unit: [B, 3, 3] inertia per unit mass about the COM.
        gravity: (3,); height: ground height (None: no ground).
    """

    def __init__(self, vlocal, vbody, com_geom, i_unit, gravity, height=0.0, smooth=None):
        self.vlocal, self.vbody = vlocal, vbody
        self.com_geom, self.i_unit = com_geom, i_unit
        self.i_unit_inv = torch.linalg.inv(i_unit)
        self.gravity = gravity
        self.height = height
        self.smooth = smooth  # (elastic_width, damping_depth) of a C1 contact law, or None
        self.nb = com_geom.shape[0]

    def initial_state(self, p):
        q = p["body_orientation"] / p["body_orientation"].norm(dim=1, keepdim=True)
        rot = quat_to_mat(q)
        x = p["body_position"] + (rot @ (self.com_geom + p["body_com_offset"])[..., None])[..., 0]
        return x, q, p["body_velocity"], p["body_angular_velocity"]

    def vertices(self, x, q, com_off):
        rot = quat_to_mat(q)[self.vbody]
        rel = self.vlocal - com_off[self.vbody]
        return x[self.vbody] + (rot @ rel[..., None])[..., 0]

    def step(self, state, p, frame, dt):
        x, q, v, w = state
        m = p["body_mass"]
        ms = m * p["body_inertia_scale"]
        rot = quat_to_mat(q)
        force = p["body_force"][frame] + m[:, None] * self.gravity
        torque = p["body_torque"][frame]
        if self.height is not None:
            rv = rot[self.vbody]
            r = (rv @ (self.vlocal - p["body_com_offset"][self.vbody])[..., None])[..., 0]
            c = x[self.vbody, 1] + r[:, 1] - self.height
            vel = v[self.vbody] + torch.cross(w[self.vbody], r, dim=1)
            k = (p["contact_ke"], p["contact_kd"], p["contact_kf"], p["contact_mu"])
            if self.smooth is None:
                f = ground_force(c, vel, *k)
            else:
                f = smooth_ground_force(c, vel, *k, *self.smooth)
            force = force.index_add(0, self.vbody, f)
            torque = torque.index_add(0, self.vbody, torch.cross(r, f, dim=1))
        speed = torch.sqrt((v * v).sum(1) + 1e-30)
        spin = torch.sqrt((w * w).sum(1) + 1e-30)
        damp = p["body_linear_damping"] + p["body_linear_drag"] * speed
        force = force - (m * damp)[:, None] * v
        v1 = v + dt / m[:, None] * force
        x1 = x + dt * v1
        rt = rot.transpose(1, 2)
        mv = lambda a, b: (a @ b[..., None])[..., 0]  # noqa: E731
        ang = mv(rot, ms[:, None] * mv(self.i_unit, mv(rt, w)))
        spin = p["body_angular_damping"] + p["body_angular_drag"] * spin
        ang1 = ang + dt * (torque - spin[:, None] * ang)
        inv = self.i_unit_inv / ms[:, None, None]
        w_mid = mv(rot, mv(inv, mv(rt, ang1)))
        q1 = q + 0.5 * dt * omega_times_quat(w_mid, q)
        q1 = q1 / q1.norm(dim=1, keepdim=True)
        rot1 = quat_to_mat(q1)
        w1 = mv(rot1, mv(inv, mv(rot1.transpose(1, 2), ang1)))
        return x1, q1, v1, w1

    def rollout(self, p, frames, substeps, dt):
        """World vertices at frame boundaries [frames + 1, V, 3]."""
        state = self.initial_state(p)
        out = [self.vertices(state[0], state[1], p["body_com_offset"])]
        for frame in range(frames):
            for _ in range(substeps):
                state = self.step(state, p, frame, dt)
            out.append(self.vertices(state[0], state[1], p["body_com_offset"]))
        return torch.stack(out)


def from_system(system, sim):
    """A TorchRigid and its parameter tensors matching a RigidBodySystem in ``sim``."""
    from gradsim_taichi import runtime

    dtype = runtime.torch_dtype()
    t = lambda a: torch.as_tensor(a, dtype=dtype)  # noqa: E731
    ground = system.ground
    smooth = None
    if ground is not None and hasattr(ground, "elastic_width"):  # the C1 contact law
        smooth = (ground.elastic_width, ground.damping_depth)
    ref = TorchRigid(t(system.vlocal.to_numpy()[: system.nv]),
                     torch.as_tensor(system.vbody.to_numpy()[: system.nv], dtype=torch.long),
                     t(system.com_geom.to_numpy()), t(system.i_unit.to_numpy()),
                     t(system.gravity.to_numpy()),
                     None if ground is None else ground.height, smooth)
    params = {n: t(sim.get_param(n)) for n in sim.params.names()}
    return ref, params

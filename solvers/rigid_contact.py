"""Penalty contact of rigid-body mesh vertices with the ground plane y = height.

Each vertex of a body's mesh is a contact point with the ground law of
:class:`~gradsim_taichi.solvers.ground_contact.GroundParams` (normal ``ke``/``kd``,
Coulomb cone with ``kf``/``mu``), evaluated at the vertex's world position and velocity
``v + w x r``. The force acts at the vertex, so the body receives the force and the
torque ``r x f`` about its centre of mass. The loop over vertices lives in the rigid
body step kernel (vertices of all bodies in the outer parallel loop, atomic adds into
the bodies): a Taichi func here, so one kernel launch per substep does everything.
"""

import taichi as ti


@ti.func
def vertex_contact(ground: ti.template(), com, rot, vel, omega, r_body):
    """Contact force and torque (about the COM) of one body vertex.

    Args:
        ground: the shared GroundParams.
        com: world position of the body's centre of mass.
        rot: body rotation matrix.
        vel, omega: linear velocity of the COM and world angular velocity.
        r_body: the vertex relative to the COM, body frame.

    Returns:
        (force, torque), both zero when the vertex is above the ground.
    """
    r = ti.Vector([rot[0, 0] * r_body[0] + rot[0, 1] * r_body[1] + rot[0, 2] * r_body[2],
                   rot[1, 0] * r_body[0] + rot[1, 1] * r_body[1] + rot[1, 2] * r_body[2],
                   rot[2, 0] * r_body[0] + rot[2, 1] * r_body[1] + rot[2, 2] * r_body[2]])
    c = com[1] + r[1] - ground.height
    force = ti.Vector([0.0, 0.0, 0.0])
    torque = ti.Vector([0.0, 0.0, 0.0])
    if c < 0.0:
        f = ground.force(c, vel + omega.cross(r))
        force = f
        torque = r.cross(f)
    return force, torque

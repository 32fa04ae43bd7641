"""Rigid primitives (box, sphere, cone, cylinder) thrown with a spin, tumbling onto the ground.

The bodies touch the ground only (the engine has no body-body contact), so they are
thrown side by side. Rigid bodies report vertex positions but no velocities, so this
demo does not step frame by frame: it simulates a whole throw (``--seconds``, one
``Simulation.forward()``) and plays it back; every new throw sets ``body_position``,
``body_orientation``, ``body_velocity`` and ``body_angular_velocity`` on the same
Simulation and runs it again.

    python demos/rigid_tumble.py               # window: throws again when a throw ends
    python demos/rigid_tumble.py --headless    # one throw -> PNG frames and GIF

Keys: SPACE = pause, T = throw again (new random spins), ESC = quit.
"""

from __future__ import annotations

import numpy as np
from _common import (
    Camera3D,
    Recorder,
    draw_ground,
    draw_hud,
    draw_meshes,
    key_presses,
    make_gui,
    parse_args,
    start_engine,
)

RES = (640, 480)
COLORS = np.array([(0.85, 0.35, 0.2), (0.25, 0.5, 0.85), (0.95, 0.75, 0.2), (0.4, 0.7, 0.4)])
HINTS = ["SPACE: pause   T: throw again", "ESC: quit"]


def build(frames: int, substeps: int = 32):
    """Four bodies in a Simulation of ``frames`` frames; returns ``(sim, meshes)`` with
    meshes ``[(first vertex of the body in the "rigid" output, faces [K, 3])]``."""
    gs = start_engine("f64")
    # contact stiff enough to look rigid, soft enough for 32 substeps at 60 Hz
    b = gs.ModelBuilder(contact_ke=5e3, contact_kd=100.0, contact_kf=100.0, contact_mu=0.4)
    b.add_rigid_box((0.3, 0.2, 0.25), mass=1.0)
    b.add_rigid_sphere(0.14, subdivisions=2, mass=1.0)
    b.add_rigid_cone(0.15, 0.35, sections=20, mass=1.0)
    b.add_rigid_cylinder(0.12, 0.35, sections=20, mass=1.0)
    sim = gs.Simulation(b.finalize(), frames=frames, substeps=substeps, fps=60.0)
    return sim, [(int(m.rows[0]), m.faces) for m in sim.model.rigid_meshes()]


def throw(sim, rng: np.random.Generator) -> np.ndarray:
    """New random start poses, velocities and spins; returns the vertex trajectory
    ``[frames + 1, V, 3]``."""
    n = sim.get_param("body_mass").shape[0]
    x = np.stack([np.linspace(-0.9, 0.9, n), rng.uniform(0.7, 1.1, n),
                  rng.uniform(-0.2, 0.2, n)], axis=1)
    q = rng.normal(size=(n, 4))
    sim.set_param("body_position", x)
    sim.set_param("body_orientation", q / np.linalg.norm(q, axis=1, keepdims=True))
    sim.set_param("body_velocity", np.stack([rng.uniform(-0.3, 0.3, n),
                                             rng.uniform(0.5, 1.5, n), np.zeros(n)], axis=1))
    sim.set_param("body_angular_velocity", rng.uniform(-8.0, 8.0, (n, 3)))
    out = sim.forward()["rigid"]
    if not np.all(np.isfinite(out)):
        raise FloatingPointError("the rigid-body rollout diverged")
    return out


def main(argv=None) -> int:
    """Run the demo (see the module docstring); returns 0."""

    def extra(p):
        p.add_argument("--seconds", type=float, default=2.5, help="length of one throw")
        p.add_argument("--seed", type=int, default=1, help="random throws")

    args = parse_args("rigid_tumble", __doc__.splitlines()[0], argv, extra=extra)
    import taichi as ti

    frames = max(1, int(round(args.seconds * 60)))
    if args.headless:
        frames = min(frames, args.frames)  # do not simulate more than is shown
    sim, meshes = build(frames)
    rng = np.random.default_rng(args.seed)
    traj, k, paused, throws = throw(sim, rng), 0, False, 1
    cam = Camera3D(eye=(0.0, 1.0, 2.6), target=(0.0, 0.35, 0.0), fov_y_deg=45.0,
                   aspect=RES[0] / RES[1])
    gui = make_gui("gradsim-taichi: rigid tumble", RES, args.headless)
    rec = Recorder(gui, args, "rigid_tumble")
    while rec.running:
        for key in key_presses(gui):
            if key == ti.GUI.SPACE:
                paused = not paused
            elif key in ("t", "T"):
                k = len(traj)
            elif key == ti.GUI.ESCAPE:
                gui.running = False
        if k >= len(traj):
            traj, k, throws = throw(sim, rng), 0, throws + 1
        x = traj[k]
        draw_ground(gui, cam, extent=(-2.0, 2.0, -2.5, 1.2))
        parts = []
        for body, (offset, faces) in enumerate(meshes):
            ids = np.arange(offset, offset + faces.max() + 1)
            c = x[ids].mean(axis=0)
            gui.circle(cam.project(np.array([[c[0], 0.0, c[2]]]))[0][0],
                       radius=max(4.0, 16.0 - 12.0 * c[1]), color=0x9AA096)
            parts.append((x[ids], faces, COLORS[body % len(COLORS)]))
        draw_meshes(gui, cam, parts, two_sided=False)
        t = k / 60.0
        draw_hud(gui, HINTS + [f"throw {throws}   t = {t:.2f} s"
                               + ("   (paused)" if paused else "")], rec.frame)
        rec.show()
        if not paused:
            k += 1
    rec.finish()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

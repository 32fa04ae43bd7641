"""Soft FEM jellies (a box and a ball, stable neo-Hookean tets) dropped onto the ground.

The Simulation is stepped one frame at a time (a one-frame rollout whose
``initial_position`` / ``initial_velocity`` are the previous frame's output), so keys
can kick the jellies between frames.

    python demos/jelly.py               # window
    python demos/jelly.py --headless    # drop, bounce and a jump at frame 70 -> PNG + GIF

Keys: SPACE = jump (kick both jellies up with a spin), LEFT / RIGHT = push,
R = drop again, ESC = quit.
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
YOUNG, POISSON = 3e4, 0.3  # [Pa]: soft enough to wobble visibly
HINTS = ["SPACE: jump   LEFT/RIGHT: push", "R: drop again   ESC: quit"]
COLORS = [(0.3, 0.75, 0.35), (0.85, 0.3, 0.45)]


def build(substeps=32):
    """A soft box and a soft ball above the ground in a one-frame Simulation; returns
    ``(sim, surfaces)`` with surfaces ``[(particle ids [V], triangles [K, 3])]``."""
    gs = start_engine("f64")
    from gradsim_taichi.scenes.fem import lame

    mu, lam = lame(YOUNG, POISSON)
    b = gs.ModelBuilder(contact_ke=2e3, contact_kd=20.0, contact_kf=20.0, contact_mu=0.6)
    kw = dict(density=500.0, mu=mu, lam=lam, damping=0.5)
    tilt = np.array([np.cos(0.2), 0.0, 0.0, np.sin(0.2)])  # quaternion (w, x, y, z)
    b.add_soft_box((0.3, 0.3, 0.3), resolution=(4, 4, 4), origin=(-0.45, 0.55, -0.15),
                   orientation=tilt, **kw)
    b.add_soft_ball(0.17, subdivisions=2, origin=(0.35, 0.85, 0.0), velocity=(-0.3, 0, 0),
                    **kw)
    surfaces = [(offset + np.arange(tris.max() + 1), np.asarray(tris))
                for offset, tris in b.soft_surfaces]
    sim = gs.Simulation(b.finalize(), frames=1, substeps=substeps, fps=60.0)
    return sim, surfaces


class Stepper:
    """Frame-by-frame stepping with kicks between frames."""

    def __init__(self, sim, surfaces):
        self.sim, self.surfaces = sim, surfaces
        self.x0 = sim.get_param("initial_position")
        self.v0 = sim.get_param("initial_velocity")
        self.reset()

    def reset(self) -> None:
        self.x, self.v = self.x0.copy(), self.v0.copy()

    def kick(self, dv, spin=0.0) -> None:
        """Add velocity ``dv`` and a spin [rad/s] about z through each body's centre."""
        for ids, _ in self.surfaces:
            r = self.x[ids] - self.x[ids].mean(axis=0)
            self.v[ids] += np.asarray(dv) + spin * np.stack(
                [-r[:, 1], r[:, 0], np.zeros(len(r))], axis=1)

    def step(self) -> None:
        self.sim.set_param("initial_position", self.x)
        self.sim.set_param("initial_velocity", self.v)
        out = self.sim.forward()
        self.x = out["particles"][-1].copy()
        self.v = out["particles_velocity"][-1].copy()


def main(argv=None) -> int:
    """Run the demo (see the module docstring); returns 0."""
    args = parse_args("jelly", __doc__.splitlines()[0], argv)
    import taichi as ti

    sim, surfaces = build()
    st = Stepper(sim, surfaces)
    cam = Camera3D(eye=(0.0, 0.9, 2.4), target=(0.0, 0.4, 0.0), fov_y_deg=45.0,
                   aspect=RES[0] / RES[1])
    gui = make_gui("gradsim-taichi: jelly", RES, args.headless)
    rec = Recorder(gui, args, "jelly")
    while rec.running:
        if args.headless:
            if rec.frame == 70:
                st.kick((0.0, 2.2, 0.0), spin=3.0)
        else:
            for key in key_presses(gui):
                if key == ti.GUI.SPACE:
                    st.kick((0.0, 2.2, 0.0), spin=3.0)
                elif key == ti.GUI.LEFT:
                    st.kick((-1.5, 0.8, 0.0))
                elif key == ti.GUI.RIGHT:
                    st.kick((1.5, 0.8, 0.0))
                elif key in ("r", "R"):
                    st.reset()
                elif key == ti.GUI.ESCAPE:
                    gui.running = False
        st.step()
        if not np.all(np.isfinite(st.x)):
            print("jelly: the simulation diverged; dropping again")
            st.reset()
        draw_ground(gui, cam, extent=(-2.0, 2.0, -2.5, 1.0))
        for ids, _ in surfaces:  # a shadow that shrinks with height
            c = st.x[ids].mean(axis=0)
            gui.circle(cam.project(np.array([[c[0], 0.0, c[2]]]))[0][0],
                       radius=max(6.0, 22.0 - 14.0 * c[1]), color=0x9AA096)
        draw_meshes(gui, cam, [(st.x[ids], tris, col)
                               for (ids, tris), col in zip(surfaces, COLORS)],
                    two_sided=False)
        draw_hud(gui, HINTS, rec.frame)
        rec.show()
    rec.finish()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

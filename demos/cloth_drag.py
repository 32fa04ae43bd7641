"""Cloth pinned at its two top corners: grab it with the mouse and drag it; W toggles wind.

The engine's Simulation is a fixed-length rollout, so the demo steps a one-frame
Simulation again and again, feeding each frame's final positions and velocities back in
as the next frame's ``initial_position`` / ``initial_velocity``. The grabbed particle
is made heavy (``mass`` 1e3 kg: the cloth's pull no longer moves it), given the velocity
that carries it to the mouse within the frame, and an ``external_force`` that cancels
its weight, so it follows the mouse exactly and drags the cloth along.

    python demos/cloth_drag.py               # window: drag with the left mouse button
    python demos/cloth_drag.py --headless    # scripted drag + wind -> PNG frames and GIF

Keys: left mouse drag = pull the cloth, W = wind on/off, R = reset, ESC = quit.
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
WIND = np.array([1.0, 0.0, -3.0])  # [m/s], blows the cloth away from the camera
GRAB_MASS = 1e3  # [kg]: heavy enough that the cloth's forces do not move the handle
MAX_SPEED = 6.0  # [m/s]: the handle's speed limit (keeps the explicit step stable)
HINTS = ["drag: left mouse", "W: wind on/off", "R: reset   ESC: quit"]


def build(resolution=16, substeps=32):
    """The model and a one-frame Simulation; returns ``(sim, faces)``."""
    gs = start_engine("f64")
    b = gs.ModelBuilder(contact_ke=1e3, contact_kd=0.5, contact_kf=1.0, contact_mu=0.5)
    cloth = b.add_cloth_grid((1.0, 1.0), (resolution, resolution), origin=(-0.5, 0.35, 0.0),
                             plane="xy", pinned="top_corners", density=1.0, tri_ke=300.0,
                             tri_ka=300.0, tri_kd=1.0, edge_ke=0.5, edge_kd=0.0)
    b.set_wind((0.0, 0.0, 0.0), lift=0.5, drag=1.5)
    sim = gs.Simulation(b.finalize(), frames=1, substeps=substeps, fps=60.0)
    return sim, np.asarray(cloth.faces)


class ClothStepper:
    """Frame-by-frame stepping of the one-frame Simulation, with a mouse handle."""

    def __init__(self, sim):
        self.sim = sim
        self.x0 = sim.get_param("initial_position")
        self.mass = sim.get_param("mass")
        self.gravity = sim.get_param("gravity")
        self.reset()

    def reset(self) -> None:
        self.x = self.x0.copy()
        self.v = np.zeros_like(self.x)
        self.grab = None  # particle index held by the mouse

    def set_wind(self, on: bool) -> None:
        self.sim.set_param("wind", WIND if on else np.zeros(3))

    def step(self, target=None) -> None:
        """One frame; ``target`` is where the grabbed particle should be at its end
        (None: let go of it)."""
        mass, force = self.mass.copy(), np.zeros((1,) + self.x.shape)
        v = self.v.copy()
        if self.grab is not None and target is not None:
            i = self.grab
            vel = (np.asarray(target) - self.x[i]) / self.sim.frame_dt
            speed = np.linalg.norm(vel)
            v[i] = vel * min(1.0, MAX_SPEED / max(speed, 1e-12))
            mass[i] = GRAB_MASS
            force[0, i] = -GRAB_MASS * self.gravity
        self.sim.set_param("mass", mass)
        self.sim.set_param("external_force", force)
        self.sim.set_param("initial_position", self.x)
        self.sim.set_param("initial_velocity", v)
        out = self.sim.forward()
        self.x = out["particles"][-1].copy()
        self.v = out["particles_velocity"][-1].copy()
        if self.grab is not None and target is None:
            self.v[self.grab] = 0.0  # released: do not fling it at the handle's speed
            self.grab = None


def scripted_input(frame: int, x0: np.ndarray, corner: int):
    """Headless script: grab the bottom-right corner at frame 15, swing it in a circle,
    let go at frame 75; wind blows from frame 45 on. Returns (target or None, wind)."""
    wind = frame >= 45
    if 15 <= frame < 75:
        t = (frame - 15) / 30.0 * np.pi
        c = x0[corner] + np.array([0.15, 0.45, 0.2])
        return c + 0.35 * np.array([np.cos(t + np.pi), np.sin(t + np.pi), 0.4 * np.sin(t)]), wind
    return None, wind


def main(argv=None) -> int:
    """Run the demo (see the module docstring); returns 0."""
    args = parse_args("cloth_drag", __doc__.splitlines()[0], argv)
    import taichi as ti

    sim, faces = build()
    stepper = ClothStepper(sim)
    cam = Camera3D(eye=(0.0, 1.0, 2.6), target=(0.0, 0.65, 0.0), fov_y_deg=45.0,
                   aspect=RES[0] / RES[1])
    gui = make_gui("gradsim-taichi: cloth drag", RES, args.headless)
    rec = Recorder(gui, args, "cloth_drag")
    corner = int(np.argmin(stepper.x0[:, 1] - stepper.x0[:, 0]))  # bottom right
    wind, depth = False, 1.0
    while rec.running:
        target = None
        if args.headless:
            target, want = scripted_input(rec.frame, stepper.x0, corner)
            if want != wind:
                wind = want
                stepper.set_wind(wind)
            if target is not None:
                stepper.grab = corner
        else:
            for key in key_presses(gui):
                if key in ("w", "W"):
                    wind = not wind
                    stepper.set_wind(wind)
                elif key in ("r", "R"):
                    stepper.reset()
                elif key == ti.GUI.ESCAPE:
                    gui.running = False
            if gui.is_pressed(ti.GUI.LMB):
                mouse = np.asarray(gui.get_cursor_pos(), dtype=np.float64)
                if stepper.grab is None:
                    uv, z = cam.project(stepper.x)
                    i = int(np.argmin(np.linalg.norm(uv - mouse, axis=1)))
                    if np.linalg.norm(uv[i] - mouse) < 0.05:
                        stepper.grab, depth = i, float(z[i])
                if stepper.grab is not None:
                    target = cam.unproject(mouse, depth)
        stepper.step(target)
        draw_ground(gui, cam, extent=(-2.0, 2.0, -2.5, 1.2))
        draw_meshes(gui, cam, [(stepper.x, faces, (0.85, 0.55, 0.2))])
        if stepper.grab is not None:
            uv, _ = cam.project(stepper.x[[stepper.grab]])
            gui.circle(uv[0], radius=6, color=0xD02020)
        pins = np.nonzero(np.isclose(stepper.x0[:, 1], stepper.x0[:, 1].max()))[0][[0, -1]]
        gui.circles(cam.project(stepper.x[pins])[0], radius=5, color=0x303040)
        draw_hud(gui, HINTS + [f"wind: {'ON' if wind else 'off'}"], rec.frame)
        rec.show()
    rec.finish()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

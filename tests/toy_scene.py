"""A small particle scene for testing the estimation machinery on its own: a sheet of
particles joined by springs, thrown onto the ground."""

from dataclasses import dataclass, field

import numpy as np

import gradsim_taichi as gs
from gradsim_taichi.render import Mesh
from gradsim_taichi.scenes import ParamSpec, RenderPart, Scene, ground_part


def _params():
    return {
        "velocity": ParamSpec("initial_velocity", np.array([1.0, 0.5, -0.5]), -1.5, 1.5,
                              shape=(3,), positive=False, doc="shared initial velocity [m/s]"),
        "mass": ParamSpec("mass", 0.05, 0.02, 0.2, doc="mass per particle [kg]"),
    }


@dataclass
class SpringSheet(Scene):
    name: str = "spring-sheet"
    frames: int = 8
    substeps: int = 8
    fps: float = 30.0
    width: int = 32
    height: int = 32
    n: int = 4
    params: dict = field(default_factory=_params)
    default_params: tuple = ("velocity",)
    camera_eye: tuple = (0.3, 1.2, 2.0)
    camera_target: tuple = (0.3, 0.2, 0.0)
    sigma: float = 3e-4

    def build_model(self):
        b = gs.ModelBuilder(contact_ke=1e3, contact_kd=5.0, contact_kf=10.0, contact_mu=0.5)
        u, w = np.meshgrid(np.linspace(0, 0.4, self.n), np.linspace(0, 0.4, self.n),
                           indexing="ij")
        pos = np.stack([u, 0.3 + 0 * u, w - 0.2], -1).reshape(-1, 3)
        b.add_particles(pos, velocities=self.params["velocity"].true,
                        mass=self.params["mass"].true)
        idx = np.arange(self.n * self.n).reshape(self.n, self.n)
        pairs = np.concatenate([
            np.stack([idx[:-1, :], idx[1:, :]], -1).reshape(-1, 2),
            np.stack([idx[:, :-1], idx[:, 1:]], -1).reshape(-1, 2),
            np.stack([idx[:-1, :-1], idx[1:, 1:]], -1).reshape(-1, 2)])
        b.add_springs(pairs, stiffness=50.0, damping=0.1)
        a, c = idx[:-1, :-1].ravel(), idx[1:, 1:].ravel()
        self._tris = np.concatenate([np.stack([a, idx[:-1, 1:].ravel(), c], 1),
                                     np.stack([a, c, idx[1:, :-1].ravel()], 1)])
        return b

    def render_parts(self, model):
        return [RenderPart(Mesh(self._tris, color=(0.8, 0.2, 0.2), two_sided=True),
                           output="particles"),
                ground_part()]

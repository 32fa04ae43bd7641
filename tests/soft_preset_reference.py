"""The soft presets as their Python classes built them (before they became the shipped
scene files fem-beam.toml, fem-ball.toml, cloth-velocity.toml): the reference that
tests/test_soft_preset_files.py compares the files with. Built directly through
ModelBuilder calls."""

from dataclasses import dataclass, field

import numpy as np

from gradsim_taichi.builder import ModelBuilder
from gradsim_taichi.render import Mesh
from gradsim_taichi.scenes.base import (
    ParamSpec,
    RenderPart,
    Scene,
    affine_basis,
    ground_part,
    ramp_colors,
    soft_parts,
)
from gradsim_taichi.scenes.fem import lame

BEAM_MU, BEAM_LAM = lame(1e6, 0.3)


def _beam_params():
    return {
        "mu": ParamSpec("tet_mu", BEAM_MU, BEAM_MU / 2, BEAM_MU * 2, doc="Lame mu [Pa]"),
        "lambda": ParamSpec("tet_lambda", BEAM_LAM, BEAM_LAM / 2, BEAM_LAM * 2,
                            doc="Lame lambda [Pa]"),
        "density": ParamSpec("density", 1000.0, 500.0, 2000.0, doc="density [kg/m^3]"),
    }


@dataclass
class FemBeamReference(Scene):
    """A soft beam clamped at one end sags and oscillates; a known upward push on its tip
    in the first frames makes its mass visible apart from its stiffness (under gravity
    alone only stiffness / density would be)."""

    name: str = "fem-beam"
    summary = "soft beam clamped at one end, sagging and oscillating; unknown mu, lambda, density"
    frames: int = 40
    substeps: int = 48  # explicit stability with 2x stiffer, 2x lighter initial guesses
    width: int = 64
    height: int = 64
    params: dict = field(default_factory=_beam_params)
    default_params: tuple = ("mu", "lambda", "density")
    camera_eye: tuple = (0.05, 0.55, 1.0)
    camera_target: tuple = (0.05, 0.4, 0.0)
    resolution: tuple = (8, 2, 2)
    tip_force: tuple = (0.0, 60.0, 0.0)  # total [N] over the tip vertices
    tip_torque: float = 1.0  # [N m] about the beam's axis: twist shows mu apart from E
    ramp: float = 0.3  # colour ramp over the rest shape (0: uniform colour)
    push_frames: int = 3
    # The push and the first sag, then the first swing, then everything. With the twist
    # and the colour ramp this recovers mu, lambda, density to 1e-14 on the four
    # paper-table instances (without them, 15 iterations of all frames: mu 0.13-0.15,
    # lambda 0.5-1.2 on two).
    warmup: tuple = ((5, 10), (5, 20))
    iters: int = 40
    lr: float = 1.0
    optimizer: str = "lbfgs+lm"

    def build_model(self):
        t = {k: s.true for k, s in self.params.items()}
        b = ModelBuilder(contact_ke=2e3, contact_kd=5.0, contact_kf=10.0, contact_mu=0.5)
        self._ids = b.add_soft_beam(0.6, 0.1, 0.1, resolution=self.resolution, clamped=True,
                                    origin=(-0.25, 0.45, -0.05), density=t["density"],
                                    mu=t["mu"], lam=t["lambda"], damping=2.0)
        return b

    def configure(self, sim):
        x0 = sim.get_param("initial_position")
        tip = self._ids[np.isclose(x0[self._ids, 0], x0[self._ids, 0].max())]
        force = np.zeros(sim.params["external_force"].shape)
        force[: self.push_frames, tip] = np.asarray(self.tip_force) / len(tip)
        # a couple about the x axis: f_i = T e_x x r_i / sum |r_i|^2 (r_i from the tip's
        # centre, in the cross-section) has zero sum and moment T
        r = x0[tip] - x0[tip].mean(axis=0)
        r[:, 0] = 0.0
        twist = np.cross([1.0, 0.0, 0.0], r) * self.tip_torque / (r ** 2).sum()
        force[: self.push_frames, tip] += twist
        sim.set_param("external_force", force)

    def render_parts(self, model):
        rest = self.sim.get_param("initial_position")
        # the ground ends in front of the camera (z = 1): faces crossing the near plane
        # are not drawn, and pixels that see no surface make the loss jump
        return (soft_parts(model, (0.2, 0.45, 0.8), rest, self.ramp)
                + [ground_part(extent=(-3.0, 3.0, -3.0, 0.5))])


BALL_MU, BALL_LAM = lame(4e4, 0.3)


def _ball_params():
    return {
        "mass": ParamSpec("mass", None, 75.0, 300.0, shape=(-1,), draw_shape=(),
                          doc="mass of each particle [kg]; guesses: a uniform density "
                              "drawn from [75, 300] kg/m^3 times each particle's volume"),
        "mu": ParamSpec("tet_mu", BALL_MU, BALL_MU / 2, BALL_MU * 2, doc="Lame mu [Pa]"),
        "lambda": ParamSpec("tet_lambda", BALL_LAM, BALL_LAM / 2, BALL_LAM * 2,
                            doc="Lame lambda [Pa]"),
    }


@dataclass
class FemBallReference(Scene):
    """A soft ball thrown onto the ground; unknown per-particle mass and mu, lambda."""

    name: str = "fem-ball"
    summary = "soft ball thrown onto the ground; unknown per-particle mass, mu, lambda"
    frames: int = 40
    substeps: int = 32
    width: int = 64
    height: int = 64
    params: dict = field(default_factory=_ball_params)
    default_params: tuple = ("mass", "mu", "lambda")
    camera_eye: tuple = (0.0, 0.6, 1.6)
    camera_target: tuple = (0.0, 0.2, 0.0)
    density: float = 150.0
    ramp: float = 0.3  # colour ramp over the rest shape (0: uniform): rotation shows
    # L-BFGS on density, mu, lambda, then on every mass too (before the density stage
    # and L-BFGS: Adam then L-BFGS for 120 iterations left mass 0.40, mu 0.078, lambda
    # 0.025 off). Growing horizons (None: from the throw): the first bounce, then a
    # little more, then the whole video. Fitting the whole video at once, a wrong basin
    # (mass and mu too high, lambda -> 0, loss 1.2e-5 against 0 at the truth) caught a
    # paper-table instance (mass 0.10, mu 0.57, lambda 1.0 off); the horizons take it
    # to 1e-15.
    warmup: tuple | None = None
    coarse_iters: int = 40
    iters: int = 70
    lr: float = 1.0
    optimizer: str = "lbfgs"
    radius = 0.15
    start = (-0.35, 0.35, 0.0)
    throw = (1.2, 0.5, 0.0)

    def __post_init__(self):
        if self.warmup is None:
            contact = self.first_contact_frame()
            self.warmup = ((10, int(contact) + 5), (10, int(contact) + 11))

    def first_contact_frame(self) -> float:
        """When the thrown ball first touches the ground, in frames (free flight)."""
        g, height, vy = 9.8, self.start[1] - self.radius, self.throw[1]
        return (vy + np.sqrt(vy ** 2 + 2 * g * height)) / g * self.fps

    def build_model(self):
        t = {k: s.true for k, s in self.params.items()}
        b = ModelBuilder(contact_ke=2e3, contact_kd=10.0, contact_kf=20.0, contact_mu=0.5)
        ids = b.add_soft_ball(self.radius, subdivisions=1, origin=self.start,
                              density=self.density, mu=t["mu"], lam=t["lambda"], damping=1.0,
                              velocity=self.throw)
        self._ids = ids
        return b

    def derived_params(self, b):
        # ground truth: the lumped masses of the mesh. Guesses are uniform densities
        # (each particle's lumped volume share), and the first iterations learn that
        # density alone (log-masses move together); then every particle's mass is free.
        # Element by element the video barely constrains the masses (from a per-particle
        # random guess: error 0.64 -> 0.40 in 120 steps).
        masses = b.particle_masses(self._ids)
        return {"mass": dict(true=masses, shape=masses.shape,
                             draw_pattern=masses / self.density,
                             basis=np.full((len(masses), 1), 1.0 / np.sqrt(len(masses))))}

    def render_parts(self, model):
        rest = self.sim.get_param("initial_position")
        return soft_parts(model, (0.85, 0.35, 0.25), rest, self.ramp) + [ground_part()]


def _cloth_params():
    return {
        "velocity": ParamSpec("initial_velocity", None, -1.0, 1.0, shape=(-1, 3),
                              positive=False, draw_shape=(3,),
                              doc="initial velocity of every particle [m/s]"),
    }


@dataclass
class ClothVelocityReference(Scene):
    """A cloth thrown with a spinning initial velocity field falls onto the ground; each
    particle's initial velocity is unknown (initial guess: one random velocity shared by
    all particles)."""

    name: str = "cloth-velocity"
    summary = "falling cloth; unknown per-particle initial velocity"
    frames: int = 30
    substeps: int = 32
    width: int = 64
    height: int = 64
    params: dict = field(default_factory=_cloth_params)
    default_params: tuple = ("velocity",)
    camera_eye: tuple = (0.0, 1.1, 1.6)
    camera_target: tuple = (0.0, 0.25, 0.0)
    resolution: tuple = (8, 8)
    base_velocity: tuple = (0.6, 0.8, -0.3)
    spin: float = 2.0  # rad/s about the vertical axis through the cloth's centre
    # Growing horizons (the first frames have overlapping silhouettes whatever the guess)
    # and the affine fields first: a stiff cloth absorbs in-plane velocity differences
    # within substeps, so element by element they barely show. Relative error on the
    # paper-table instances: 0.22-0.25 before; 0.006-0.05 with 40 affine iterations,
    # 0.004-0.006 with 70 (3D supervision: 0.29 before, 4e-5-4e-4).
    warmup: tuple = ((8, 6), (8, 12), (8, 20))
    coarse_iters: int = 70
    iters: int = 120
    lr: float = 1.0
    optimizer: str = "lbfgs"

    def build_model(self):
        # light particles (3 g): contact damping and friction stiffness per particle stay
        # well inside explicit stability (k dt / m < 0.2 at 60 Hz x 32)
        b = ModelBuilder(contact_ke=1e3, contact_kd=0.5, contact_kf=1.0, contact_mu=0.5)
        size = 0.5
        cloth = b.add_cloth_grid((size, size), self.resolution, origin=(-0.45, 0.3, -0.25),
                                 density=1.0, tri_ke=200.0, tri_ka=200.0, tri_kd=1.0,
                                 edge_ke=0.5, edge_kd=0.0, lift=0.5, drag=1.0)
        spec = self.params["velocity"]
        v = spec.true
        if v is None:  # the default truth: a translation plus a spin about the centre
            x = b.particle_positions(cloth.particles)
            r = x - x.mean(axis=0)
            v = np.asarray(self.base_velocity) + self.spin * np.stack(
                [r[:, 2], np.zeros(len(r)), -r[:, 0]], axis=1)
        b.set_particle_velocities(cloth.particles, v)
        self._faces = cloth.faces
        self._cloth_ids = cloth.particles
        return b

    def derived_params(self, b):
        # the truth is what was built; the coarse stage moves within the affine fields
        v = b.particle_velocities(self._cloth_ids)
        x = b.particle_rest_positions(self._cloth_ids)
        return {"velocity": dict(true=v, shape=v.shape, basis=affine_basis(x))}

    def render_parts(self, model):
        colors = ramp_colors(self.sim.get_param("initial_position"), (0.75, 0.6, 0.3))
        return [RenderPart(Mesh(self._faces, vertex_colors=colors, two_sided=True),
                           output="particles"), ground_part()]

"""Control task presets (paper section 5): reach a goal given as ONE image.

Each task is a :class:`~gradsim_taichi.scenes.base.Scene` (model, camera, soft
rasterizer, ground stage) plus what control needs:

- the *actions* a policy outputs and how they drive the engine (:meth:`ControlTask.engine_params`),
- a goal configuration and the target image rendered from it (:attr:`target_image`),
- the centre of mass (mass-weighted mean of the particles) and its goal, for the metric,
- a default policy (open loop: phase-shifted sinusoids of time -> linear -> tanh, the
  paper's architecture; closed loop: the current state -> linear -> tanh),
- random actions for the random-actuation baseline.

Tasks: ``gear`` (soft FEM gear, per-tet activation, roll sideways to a translated copy
of itself), ``cloth`` (one initial velocity shared by all particles of a cloth under
lift and drag, so that it lands where a hidden throw landed) and ``walker`` (soft
walker, activation of its leg tets, walk to a translated copy of itself).

Units are SI (metres, seconds). Distances are centre-of-mass distances in metres; each
task also states its start distance so errors can be compared relative to it (the
paper's gear: 0.107 from 4.47, cloth: 0.199 from 7.9).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from gradsim_taichi import runtime
from gradsim_taichi.builder import ModelBuilder
from gradsim_taichi.objectives import image_loss
from gradsim_taichi.policies import ConstantPolicy, SinePolicy, StatePolicy, time_features
from gradsim_taichi.render import Mesh
from gradsim_taichi.scenes.base import RenderPart, Scene, ground_part, soft_parts
from gradsim_taichi.scenes.fem import lame
from gradsim_taichi.scenes.registry import register_task


# ---- tasks -----------------------------------------------------------------------------
@dataclass
class ControlTask(Scene):
    """Base of the control tasks. Subclasses implement ``build_model``, ``render_parts``,
    :meth:`n_actions`, :meth:`engine_params`, :meth:`goal_positions`,
    :meth:`default_policy` and :meth:`random_actions`."""

    name: str = "task"
    reg: float = 0.0  # weight of mean(actions^2) in the loss
    action_scale: float = 0.3
    goal_offset: tuple = (0.3, 0.0, 0.0)
    reach_fraction: float = 0.25  # "reached": final distance below this x start distance
    observation: str = "state"  # closed-loop policy input: "state" or "image"
    pool: int = 8  # image observations are pooled to pool x pool
    paper: dict = None  # the paper's numbers (gradSim, 3D baseline, random, start)
    iters: int = 30
    lr: float = 0.05

    # ---- to implement --------------------------------------------------------------------
    def n_actions(self) -> int:
        raise NotImplementedError

    def engine_params(self, actions: torch.Tensor) -> dict:
        """Engine parameters ``{name: tensor}`` of a whole rollout from the actions."""
        raise NotImplementedError

    def step_params(self, action: torch.Tensor) -> dict:
        """Engine parameters of one frame from a closed-loop policy's action."""
        raise NotImplementedError(f"task {self.name!r} has no closed-loop form")

    def goal_positions(self) -> np.ndarray:
        """Particle positions ``[N, 3]`` of the goal configuration."""
        raise NotImplementedError

    def default_policy(self, closed_loop: bool = False, seed: int = 0) -> nn.Module:
        raise NotImplementedError

    def random_actions(self, rng: np.random.Generator) -> torch.Tensor:
        raise NotImplementedError

    # ---- machinery ----------------------------------------------------------------------
    def build(self) -> None:
        """Model, Simulation, renderer, masses, the goal and its target image."""
        if self.observation not in ("state", "image"):
            raise ValueError(f"observation must be 'state' or 'image'; got {self.observation!r}")
        super().build()
        dtype = runtime.torch_dtype()
        self.masses = torch.as_tensor(self.sim.get_param("mass"), dtype=dtype,
                                      device=runtime.torch_device())
        self.x_init = torch.as_tensor(self.sim.get_param("initial_position"),
                                      dtype=dtype, device=runtime.torch_device())
        goal = torch.as_tensor(self.goal_positions(), dtype=dtype, device=runtime.torch_device())
        self.goal = goal
        self.goal_com = self.com(goal)
        with torch.no_grad():
            self.target_image = self.render_positions(goal)
        self.start_distance = float((self.com(self.x_init) - self.goal_com).norm())
        self._stepper = None

    def _make_renderers(self) -> None:
        super()._make_renderers()
        if getattr(self, "_generation", None) == runtime.generation():
            # (the render mode of a built task changed: its goal's image with it)
            with torch.no_grad():
                self.target_image = self.render_positions(self.goal)

    def com(self, x: torch.Tensor) -> torch.Tensor:
        """Centre of mass of positions ``[..., N, 3]`` -> ``[..., 3]``."""
        w = self.masses / self.masses.sum()
        return (x * w[:, None]).sum(dim=-2)

    def distance(self, x: torch.Tensor) -> float:
        """Centre-of-mass distance [m] of positions ``[N, 3]`` to the goal."""
        return float((self.com(x.detach()) - self.goal_com).norm())

    def render_positions(self, x: torch.Tensor) -> torch.Tensor:
        """RGBA image ``[H, W, 4]`` of the particles at positions ``[N, 3]``."""
        return self.render({"particles": x[None]})[0]

    def features(self) -> torch.Tensor:
        """Open-loop policy input: ``[frames, 8]`` time features."""
        return time_features(self.frames, self.fps)

    def observation_size(self) -> int:
        """Length of :meth:`observe`'s vector."""
        return 14 if self.observation == "state" else 8 + self.pool * self.pool

    def observe(self, k: int, x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Closed-loop policy input at frame ``k``. ``observation="state"``: centre of mass
        relative to the goal, mean velocity and the time features of frame ``k`` (14
        numbers). ``observation="image"``: the current frame rendered by the task's camera,
        grey, average-pooled to ``pool x pool``, minus the target image pooled the same way,
        plus the time features (differentiable through the renderer)."""
        t = time_features(self.frames, self.fps)[k]
        if self.observation == "image":
            img = self.render_positions(x)[..., :3].mean(dim=-1)
            return torch.cat([self._pool(img) - self._pool(self.target_image[..., :3]
                                                           .mean(dim=-1)), t])
        w = self.masses / self.masses.sum()
        vel = (v * w[:, None]).sum(dim=0)
        return torch.cat([self.com(x) - self.goal_com, vel, t])

    def _pool(self, img: torch.Tensor) -> torch.Tensor:
        pooled = torch.nn.functional.adaptive_avg_pool2d(img[None, None], self.pool)
        return pooled.reshape(-1)

    def stepper(self):
        """The :class:`~gradsim_taichi.frame_stepper.FrameStepper` of this task (built once)."""
        from gradsim_taichi.frame_stepper import FrameStepper

        self.ensure_built()
        if self._stepper is None:
            model = self.build_model().finalize()
            self._stepper = FrameStepper(model, substeps=self.substeps, fps=self.fps)
        return self._stepper

    def rollout(self, policy: nn.Module) -> dict:
        """Run the policy: ``{"particles": [F + 1, N, 3], "actions": tensor}``."""
        self.ensure_built()
        if getattr(policy, "closed_loop", False):
            actions = []

            def control(k, x, v):
                a = policy(self.observe(k, x, v))
                actions.append(a)
                return self.step_params(a)

            xs, _ = self.stepper().rollout(self.frames, control)
            return {"particles": xs, "actions": torch.stack(actions)}
        actions = policy(self.features())
        return self.rollout_actions(actions)

    def rollout_actions(self, actions: torch.Tensor) -> dict:
        """Open-loop rollout of given actions."""
        self.ensure_built()
        out = self.simulate_engine(self.engine_params(actions))
        return {"particles": out["particles"], "actions": actions}

    def simulate_engine(self, params: dict) -> dict:
        from gradsim_taichi.torch_bridge import simulate

        return simulate(self.sim, params)

    def loss(self, rollout: dict) -> tuple[torch.Tensor, torch.Tensor]:
        """Pixel MSE of the rendered last frame against the target image, plus
        ``reg * mean(actions^2)``. Returns ``(loss, rendered last frame)``."""
        image = self.render_positions(rollout["particles"][-1])
        return image_loss(image, self.target_image, rollout["actions"], self.reg), image

    def reached(self, distance: float) -> bool:
        return distance < self.reach_fraction * self.start_distance


class _TetActuated:
    """Shared by the gear and the walker: the actions are activations of *actuators*,
    each a prism column of the extruded mesh (the tets stacked along z over one triangle
    of the 2D profile), optionally restricted to some columns (the walker's legs). Every
    tet of a column gets its column's activation, so the actuation is mirror-symmetric
    in z and the body moves in the image plane instead of tipping over."""

    def _set_actuators(self, tets_per_layer: int, columns=None) -> None:
        """Tets of an ``extrude_profile`` mesh: index = layer * 3K + split * K + column."""
        k = tets_per_layer
        column = np.arange(self.tet_count) % k
        cols = np.arange(k) if columns is None else np.asarray(columns)
        index = {c: j for j, c in enumerate(cols)}
        rows = [t for t in range(self.tet_count) if column[t] in index]
        m = np.zeros((self.tet_count, len(cols)))
        for t in rows:
            m[t, index[column[t]]] = 1.0
        self.actuator_map = torch.as_tensor(m, dtype=runtime.torch_dtype(),
                                            device=runtime.torch_device())

    def n_actions(self) -> int:
        return self.actuator_map.shape[1]

    def _full(self, actions: torch.Tensor) -> torch.Tensor:
        return actions @ self.actuator_map.T

    def engine_params(self, actions):
        return {"tet_activation": self._full(actions)}

    def step_params(self, action):
        return {"tet_activation": self._full(action)[None]}

    def goal_positions(self):
        return self.x_init.cpu().numpy() + np.asarray(self.goal_offset)

    def default_policy(self, closed_loop=False, seed=0):
        torch.manual_seed(seed)
        if closed_loop:
            return StatePolicy(self.observation_size(), self.n_actions(), self.action_scale,
                               init_std=0.01)
        return SinePolicy(8, self.n_actions(), self.action_scale, init_std=0.01)

    def random_actions(self, rng):
        a = rng.uniform(-self.action_scale, self.action_scale, (self.frames, self.n_actions()))
        return torch.as_tensor(a, dtype=runtime.torch_dtype(), device=runtime.torch_device())


GEAR_MU, GEAR_LAM = lame(5e4, 0.3)


@register_task
@dataclass
class GearTask(_TetActuated, ControlTask):
    """A soft FEM gear standing on the ground (1200 tets, radius 0.5 m) rolls sideways:
    per-tet activations from a policy, goal = the gear translated by ``goal_offset``."""

    name: str = "gear"
    summary = "soft FEM gear (1200 tets), per-tet activation, roll to a translated copy"
    frames: int = 30
    substeps: int = 48
    fps: float = 30.0
    width: int = 64
    height: int = 64
    radius: float = 0.5
    goal_offset: tuple = (0.2, 0.0, 0.0)
    action_scale: float = 0.3
    camera_eye: tuple = (0.15, 0.55, 2.6)
    camera_target: tuple = (0.15, 0.4, 0.0)
    iters: int = 40
    lr: float = 0.05
    reg: float = 0.0
    paper: dict = None

    def __post_init__(self):
        if self.paper is None:
            self.paper = {"gradsim": 0.107, "gradsim_std": 0.135, "3d": 0.082,
                          "random": 3.50, "start": 4.47, "iters": 40}

    def build_model(self):
        b = ModelBuilder(contact_ke=1e4, contact_kd=2.0, contact_kf=10.0, contact_mu=0.8)
        s = self.radius
        b.add_soft_gear(outer_radius=s, inner_radius=0.8 * s, thickness=0.3 * s, layers=2,
                        spacing=0.18 * s, origin=(0.0, s + 0.005, 0.0), density=400.0,
                        mu=GEAR_MU, lam=GEAR_LAM, damping=2.0)
        self.tet_count = b.soft_tet_count
        self._set_actuators(self.tet_count // (3 * 2))
        return b

    def render_parts(self, model):
        return soft_parts(model, (0.85, 0.45, 0.2)) + [ground_part()]


@register_task
@dataclass
class WalkerTask(_TetActuated, ControlTask):
    """A soft walker (body on two legs, tet mesh) walks forward: the policy actuates the
    tets of its legs; goal = the walker translated by ``goal_offset``."""

    name: str = "walker"
    summary = "soft walker, leg-tet activation, walk to a translated copy"
    frames: int = 30
    substeps: int = 48
    fps: float = 30.0
    width: int = 64
    height: int = 64
    goal_offset: tuple = (0.15, 0.0, 0.0)
    action_scale: float = 0.3
    camera_eye: tuple = (0.3, 0.6, 2.4)
    camera_target: tuple = (0.3, 0.25, 0.0)
    iters: int = 30
    lr: float = 0.3
    paper: dict = None

    def __post_init__(self):
        if self.paper is None:
            self.paper = {"solved_within_iters": 3}

    def build_model(self):
        from gradsim_taichi.meshes import tet_walker

        b = ModelBuilder(contact_ke=1e4, contact_kd=2.0, contact_kf=10.0, contact_mu=0.8)
        v, t = tet_walker(body_length=0.6, body_height=0.15, leg_length=0.2, leg_width=0.1,
                          thickness=0.15, layers=2, spacing=0.06)
        b.add_soft_mesh(v, t, origin=(-0.3, 0.005, 0.0), density=400.0, mu=GEAR_MU,
                        lam=GEAR_LAM, damping=2.0)
        self.tet_count = b.soft_tet_count
        k = self.tet_count // (3 * 2)
        legs = np.nonzero(v[t[:k]].mean(axis=1)[:, 1] < 0.2)[0]  # columns below the body
        self._set_actuators(k, legs)
        return b

    def render_parts(self, model):
        return soft_parts(model, (0.3, 0.55, 0.85)) + [ground_part()]


@register_task
@dataclass
class ClothTask(ControlTask):
    """A cloth thrown with one initial velocity shared by all particles flies under lift
    and drag and lands on the ground; the goal is where a throw with a hidden velocity
    (``goal_velocity``) landed, given as one image of its last frame."""

    name: str = "cloth"
    summary = "cloth under lift and drag, shared initial velocity, land on a target"
    frames: int = 20
    substeps: int = 64
    fps: float = 30.0
    width: int = 64
    height: int = 64
    resolution: tuple = (8, 8)
    goal_velocity: tuple = (1.0, 0.8, -0.5)
    velocity_range: float = 1.5  # initial guesses / random baseline: uniform per axis
    camera_eye: tuple = (0.3, 1.4, 2.0)
    camera_target: tuple = (0.3, 0.1, -0.3)
    iters: int = 50
    lr: float = 0.1
    paper: dict = None

    def __post_init__(self):
        if self.paper is None:
            self.paper = {"gradsim": 0.199, "gradsim_std": 0.280, "3d": 1.84, "random": 8.07,
                          "start": 7.9, "iters": 50}

    def build_model(self):
        b = ModelBuilder(contact_ke=1e3, contact_kd=0.1, contact_kf=0.2, contact_mu=0.5)
        c = b.add_cloth_grid((0.5, 0.5), self.resolution, origin=(-0.25, 0.3, -0.25),
                             density=0.2, tri_ke=200.0, tri_ka=200.0, tri_kd=0.1, edge_ke=0.5,
                             lift=0.5, drag=1.0)
        self._faces = c.faces
        return b

    def render_parts(self, model):
        return [RenderPart(Mesh(self._faces, color=(0.85, 0.7, 0.2), two_sided=True),
                           output="particles"), ground_part()]

    def n_actions(self):
        return 3

    def engine_params(self, actions):
        return {"initial_velocity": actions}

    def goal_positions(self):
        v = torch.as_tensor(self.goal_velocity, dtype=runtime.torch_dtype(),
                            device=runtime.torch_device())
        with torch.no_grad():
            return self.simulate_engine(self.engine_params(v))["particles"][-1].cpu().numpy()

    def features(self):
        return None

    def default_policy(self, closed_loop=False, seed=0):
        if closed_loop:
            raise ValueError("the cloth task has no closed-loop form: its only input is the "
                             "initial velocity")
        return ConstantPolicy(self.random_actions(np.random.default_rng(seed)))

    def random_actions(self, rng):
        v = rng.uniform(-self.velocity_range, self.velocity_range, 3)
        v[1] = abs(v[1])  # thrown upwards or flat
        return torch.as_tensor(v, dtype=runtime.torch_dtype(), device=runtime.torch_device())

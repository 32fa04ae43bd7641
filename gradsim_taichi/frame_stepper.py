"""Closed-loop stepping: advance a model one frame at a time, differentiably.

A :class:`FrameStepper` owns a one-frame :class:`~gradsim_taichi.simulation.Simulation`
of a model. ``step(x, v, inputs)`` runs that frame through :func:`gradsim_taichi.simulate`
with ``initial_position = x`` and ``initial_velocity = v`` (torch tensors, possibly the
outputs of the previous step) plus per-frame inputs such as ``tet_activation [1, T]``
and returns the state at the end of the frame. Autograd chains across the steps, so a
policy can be called between frames on the current state or on a rendered image of it,
and the loss at the end back-propagates through every frame and every policy call.

The same Simulation serves every frame: the torch bridge notices that a later frame
ran on it since a step's forward pass and re-runs that step's frame before its
backward pass (one extra forward frame per step; memory stays one frame's worth).
"""

from __future__ import annotations

import torch

from gradsim_taichi import runtime
from gradsim_taichi.simulation import Simulation
from gradsim_taichi.torch_bridge import simulate


class FrameStepper:
    """One-frame differentiable steps of a model.

    Args:
        model: a fresh :class:`~gradsim_taichi.model.Model` (it gets its own storage).
        substeps, fps: as for :class:`Simulation` (one frame lasts ``1 / fps`` seconds).
    """

    def __init__(self, model, substeps: int = 32, fps: float = 60.0):
        self.sim = Simulation(model, frames=1, substeps=substeps, fps=fps)
        dtype = runtime.torch_dtype()
        self.x0 = torch.as_tensor(self.sim.get_param("initial_position"), dtype=dtype,
                                  device=runtime.torch_device())
        self.v0 = torch.as_tensor(self.sim.get_param("initial_velocity"), dtype=dtype,
                                  device=runtime.torch_device())

    @property
    def frame_dt(self) -> float:
        return self.sim.frame_dt

    def initial_state(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Positions and velocities ``[N, 3]`` the model was built with."""
        return self.x0.clone(), self.v0.clone()

    def step(self, x: torch.Tensor, v: torch.Tensor, inputs: dict | None = None):
        """Advance one frame from state ``(x, v)`` (``[N, 3]`` each) with per-frame
        ``inputs`` (``{parameter name: tensor}``, e.g. ``tet_activation`` of shape
        ``[1, T]`` or ``[T]``). Returns ``(x, v)`` at the end of the frame."""
        params = {"initial_position": x, "initial_velocity": v}
        params.update(inputs or {})
        out = simulate(self.sim, params)
        return out["particles"][1], out["particles_velocity"][1]

    def rollout(self, frames: int, control, x=None, v=None):
        """``frames`` steps; before each, ``control(k, x, v)`` returns the inputs of frame
        ``k`` (a dict as for :meth:`step`). Returns positions and velocities
        ``[frames + 1, N, 3]`` (initial state included), differentiable end to end."""
        if x is None or v is None:
            x0, v0 = self.initial_state()
            x = x0 if x is None else x
            v = v0 if v is None else v
        xs, vs = [x], [v]
        for k in range(frames):
            x, v = self.step(x, v, control(k, x, v))
            xs.append(x)
            vs.append(v)
        return torch.stack(xs), torch.stack(vs)

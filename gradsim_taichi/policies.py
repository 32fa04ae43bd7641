"""Torch policies for the control tasks (paper section 5).

Open loop: phase-shifted sinusoids of time -> linear -> tanh (the paper's architecture);
closed loop: an observation of the current state -> linear -> tanh; and a learnable
constant (the cloth task's shared initial velocity).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from gradsim_taichi import runtime


def time_features(frames: int, fps: float, count: int = 8, period: float = 1.0,
                  dtype=None) -> torch.Tensor:
    """``[frames, count]`` phase-shifted sinusoids ``sin(2 pi t / period + 2 pi k / count)``
    at the start time of each frame (the paper's open-loop policy input)."""
    dtype = dtype or runtime.torch_dtype()
    t = torch.arange(frames, dtype=dtype)[:, None] / fps
    phase = 2 * math.pi * torch.arange(count, dtype=dtype)[None, :] / count
    return torch.sin(2 * math.pi * t / period + phase)


class SinePolicy(nn.Module):
    """Open loop: time features ``[frames, n_in]`` -> ``scale * tanh(linear)`` ->
    ``[frames, n_out]`` (the paper's gear policy)."""

    closed_loop = False

    def __init__(self, n_in: int, n_out: int, scale: float = 1.0, init_std: float = 0.0):
        super().__init__()
        self.scale = float(scale)
        self.linear = nn.Linear(n_in, n_out, dtype=runtime.torch_dtype())
        with torch.no_grad():
            if init_std > 0:
                self.linear.weight.normal_(0.0, init_std)
            else:
                self.linear.weight.zero_()
            self.linear.bias.zero_()

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.scale * torch.tanh(self.linear(features))


class StatePolicy(SinePolicy):
    """Closed loop: an observation vector (e.g. centre of mass relative to the goal,
    mean velocity and time features of the current frame) -> ``scale * tanh(linear)``."""

    closed_loop = True


class ConstantPolicy(nn.Module):
    """A learnable vector returned as is (the cloth's shared initial velocity)."""

    closed_loop = False

    def __init__(self, init):
        super().__init__()
        self.value = nn.Parameter(torch.as_tensor(init, dtype=runtime.torch_dtype(),
                                                  device=runtime.torch_device()).detach().clone())

    def forward(self, features=None) -> torch.Tensor:
        return self.value

"""Torch bridge, the simulate half: parameter tensors -> positions at frame boundaries.

``simulate(sim, {"mass": m, "contact_mu": mu})`` returns ``{system: [F+1, V, 3]}`` and
back-propagates into every tensor that requires grad. Parameters not given keep
their current values in the model.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from gradsim_taichi import runtime
from gradsim_taichi.params import as_full_tensor


class _SimulateFunction(torch.autograd.Function):
    """Parameters, outputs and their gradients cross between torch and the engine as
    tensors on the engine's device, copied by kernels (no numpy, no host round trip);
    the parameter checks read one flag back per parameter."""

    @staticmethod
    def forward(ctx, sim, names, frames, *values):
        for name, value in zip(names, values):
            sim._write_param(name, value.detach())  # checked by simulate()
        outputs = sim.forward_tensors(frames)
        ctx.sim, ctx.names, ctx.frames, ctx.run_id = sim, names, frames, sim._run_id
        ctx.save_for_backward(*values)
        return tuple(outputs[n] for n in sim.output_names)

    @staticmethod
    def backward(ctx, *grad_outputs):
        sim, names = ctx.sim, ctx.names
        values = ctx.saved_tensors
        if sim._run_id != ctx.run_id:
            # Another rollout ran on this Simulation since our forward: restore our
            # parameters and checkpoints before back-propagating.
            for name, value in zip(names, values):
                sim._write_param(name, value)
            sim.forward_tensors(ctx.frames)
        grads = {name: g.detach() for name, g in zip(sim.output_names, grad_outputs)
                 if g is not None}
        sim.backward(grads)
        out = []
        for k, name in enumerate(names):
            if ctx.needs_input_grad[3 + k]:
                g = sim.param_grad_tensor(name)
                out.append(g.to(dtype=values[k].dtype, device=values[k].device))
            else:
                out.append(None)
        return (None, None, None, *out)


def simulate(sim, params: dict | None = None, frames: int | None = None
             ) -> dict[str, torch.Tensor]:
    """Differentiable rollout of ``sim`` with the given parameter tensors.

    Args:
        sim: a :class:`~gradsim_taichi.simulation.Simulation`.
        params: ``{name: tensor}``; each tensor broadcasts to the parameter's full shape
            (a scalar mass for all particles, a [N] per-particle one, ...), has the
            engine's dtype (``gradsim_taichi.init(precision=...)``) and device.
        frames: simulate only the first ``frames`` frames (default: all of them); the
            cost falls with it (see :meth:`Simulation.forward`).

    Returns:
        ``{system name: positions at frame boundaries [frames + 1, V, 3]}``; for a
        particle model the key is ``"particles"``.
    """
    if not all(hasattr(sim, a) for a in ("params", "output_names", "forward", "backward")):
        raise TypeError(f"simulate(sim, params): sim must be a gradsim_taichi.Simulation; "
                        f"got {type(sim).__name__}")
    if params is not None and not isinstance(params, dict):
        raise TypeError(f"simulate(sim, params): params must be a dict "
                        f"{{name: tensor}}; got {type(params).__name__} (valid names: "
                        f"{', '.join(sim.params.names())})")
    sim._check_alive()
    params = params or {}
    names, values = [], []
    for name, value in params.items():
        p = sim.params[name]  # KeyError listing valid names
        full = as_full_tensor(p, value)
        p.check_values(full.detach())  # all checked before any is written
        names.append(name)
        values.append(full.contiguous())
    frames = sim._frame_count(frames)
    outputs = _SimulateFunction.apply(sim, tuple(names), frames, *values)
    return dict(zip(sim.output_names, outputs))


class SimulationModule(nn.Module):
    """An ``nn.Module`` holding learnable parameters of a Simulation as ``nn.Parameter``s.

    Args:
        sim: the Simulation.
        learn: names of the parameters to learn, or ``{name: initial value}``; names
            without a value start from the model's current value (full shape).

    ``module()`` runs the rollout and returns ``{system name: [F + 1, V, 3]}``.
    Parameters are reachable as ``module.values[name]``.
    """

    def __init__(self, sim, learn):
        super().__init__()
        self.sim = sim
        if not isinstance(learn, dict):
            learn = {name: None for name in learn}
        self.values = nn.ParameterDict()
        dtype, device = runtime.torch_dtype(), runtime.torch_device()
        for name, init in learn.items():
            p = sim.params[name]
            value = p.getter() if init is None else init
            if not isinstance(value, torch.Tensor):
                value = np.asarray(value)
            self.values[name] = nn.Parameter(torch.as_tensor(value, dtype=dtype,
                                                             device=device).clone())

    def forward(self) -> dict[str, torch.Tensor]:
        return simulate(self.sim, dict(self.values.items()))

"""Simulation: the one place that owns the time loop, forward and backward.

Storage. With ``checkpoint=True`` (default) the state at every frame boundary is
kept, and a buffer holds the substeps of one frame; the backward pass walks the
frames in reverse, recomputes each frame's substeps from its checkpoint and runs
the adjoint kernels through them. Peak memory grows like ``frames * N +
substeps * N``. With ``checkpoint=False`` every substep of the rollout is stored
(``frames * substeps * N``): no recomputation, so forward + backward costs one forward
less per frame. ``checkpoint="auto"`` stores every substep when that state (values and
adjoints, :meth:`Simulation.stored_state_bytes`) stays within
:data:`AUTO_STORE_BYTES`, and checkpoints otherwise (or when a system cannot say what a
substep row costs: ``row_bytes``).
"""

from __future__ import annotations

import warnings

import numpy as np
import torch
from tqdm.auto import tqdm

from gradsim_taichi import runtime
from gradsim_taichi.checks import STABILITY_LIMITS
from gradsim_taichi.kernels import read_fields
from gradsim_taichi.model import Model
from gradsim_taichi.params import ParamSet, engine_tensor

# checkpoint="auto" stores every substep up to this much state (values and adjoints): a
# 64x64 cloth's 4 frames x 16 substeps in float32 take 23 MB, its 60 x 32 take 700 MB.
AUTO_STORE_BYTES = 64 * 2**20


class Simulation:
    """Rollouts of a :class:`Model` over ``frames`` frames of ``substeps`` substeps each.

    Args:
        model: the model (a fresh one per Simulation: storage is sized here).
        frames: number of frames; outputs have ``frames + 1`` entries (t = 0 included).
        substeps: integrator substeps per frame.
        fps: frames per second; the substep is ``dt = 1 / (fps * substeps)``.
        dt: substep length in seconds (overrides ``fps``).
        checkpoint: recompute frames in the backward pass (True), store every substep
            (False), or ``"auto"``: store every substep when that takes at most
            :data:`AUTO_STORE_BYTES`, else recompute. ``self.checkpoint`` says which.
        progress: show a tqdm bar for rollouts of at least this many frames (None: never).
    """

    def __init__(self, model: Model, frames: int, substeps: int = 32, fps: float = 60.0,
                 dt: float | None = None, checkpoint: bool | str = True,
                 progress: int | None = None):
        if int(frames) != frames or frames < 1:
            raise ValueError(f"frames must be a positive integer; got {frames!r}")
        if int(substeps) != substeps or substeps < 1:
            raise ValueError(f"substeps must be a positive integer; got {substeps!r}")
        if dt is None:
            if not (np.isfinite(fps) and fps > 0):
                raise ValueError(f"fps must be > 0; got {fps!r}")
            dt = 1.0 / (fps * substeps)
        if not (np.isfinite(dt) and dt > 0):
            raise ValueError(f"dt must be > 0; got {dt!r}")
        self.model = model
        self.frames = int(frames)
        self.substeps = int(substeps)
        self.dt = float(dt)
        if checkpoint == "auto":
            checkpoint = not _store_fits(model, self.frames * self.substeps + 1)
        elif not isinstance(checkpoint, (bool, np.bool_)):
            raise ValueError(f"checkpoint must be True, False or 'auto'; got {checkpoint!r}")
        self.checkpoint = bool(checkpoint)
        self.progress = progress
        self.frames_per_segment = 1 if self.checkpoint else self.frames
        rows = self.frames_per_segment * self.substeps + 1
        self.params: ParamSet = model.allocate(rows, self.frames)
        self.systems = model.systems
        self._warn_if_unstable()
        self._run_id = 0  # bumps on every forward; the autograd bridge checks it
        self._forward_run = None  # _run_id after the last forward (backward checks it)
        self._frames_run = self.frames  # how many frames the last forward simulated
        self._output_shapes: dict = {}  # each system's full output shape
        self._buffer_segment = None  # first frame of the segment the buffers hold

    def _warn_if_unstable(self) -> None:
        """Every force is integrated explicitly: between two particles of mass m a
        stiffness k is stable up to k dt^2 / m = 2 and a damping c up to c dt / m = 1 (twice
        that for the ground, which acts on one particle); beyond, the motion rings and
        diverges, the gradients going wrong first. Warn, naming the term, at 3/4 of the
        stiffness limit and at the damping limit, for the term's lightest unpinned
        particle (each force model's ``stability_terms`` turns its parameters into forces
        per unit displacement or velocity, up to factors of order one)."""
        particles = self.model.particles
        if particles is None:
            return
        mass, pinned = read_fields([particles.mass, particles.pinned])
        mass = mass.astype(np.float64)
        mass[pinned.astype(bool)] = np.inf  # pinned: never moves
        free = np.isfinite(mass)
        if not free.any():
            return
        x0 = np.asarray(self.get_param("initial_position"), dtype=np.float64)
        # (name, "stiffness" | "damping", value per element, element particles, limit of
        # k dt^2 / m or c dt / m): a pair of particles halves the single-particle limits
        limits = STABILITY_LIMITS
        terms = []
        ground = self.model.ground
        if ground is not None:
            every = np.nonzero(free)[0][:, None]
            terms += [(name, kind, np.full(len(every), value), every, 2 * limits[kind])
                      for name, kind, value in (("contact_ke", "stiffness", ground.ke[None]),
                                                ("contact_kd", "damping", ground.kd[None]),
                                                ("contact_kf", "damping", ground.kf[None]))]
        for force in self.model.forces:
            if hasattr(force, "stability_terms"):
                terms += [(*term, limits[term[1]]) for term in force.stability_terms(x0)]
        for name, kind, values, elements, limit in terms:
            if len(elements) == 0:
                continue
            m = mass[np.asarray(elements)].min(axis=1)
            ratio = np.asarray(values, dtype=np.float64) * (
                self.dt ** 2 if kind == "stiffness" else self.dt) / m
            worst = int(np.argmax(ratio))
            if ratio[worst] > limit:
                what = "k dt^2 / m" if kind == "stiffness" else "c dt / m"
                warnings.warn(
                    f"{name}: a {kind} of {values[worst]:.3g} on a {m[worst]:.3g} kg particle "
                    f"with dt={self.dt:.3g} s gives {what} = {ratio[worst]:.2f}, above "
                    f"{limit:g}, where explicit integration rings and diverges (wrong "
                    "gradients first, then NaN). Use more substeps, a smaller value or "
                    "heavier particles.",
                    stacklevel=3)

    @property
    def frame_dt(self) -> float:
        return self.dt * self.substeps

    @property
    def output_names(self) -> list[str]:
        names = []
        for s in self.systems:
            names.append(s.name)
            if hasattr(s, "velocity_output"):
                names.append(s.name + "_velocity")
        return names

    # ---- parameters ------------------------------------------------------------------
    def set_param(self, name: str, value) -> None:
        """Write a parameter (a torch tensor, numpy array or number, broadcastable to its
        full shape). Tensors on another device or of another dtype are converted; a tensor
        of the engine's dtype on its device goes to the engine without leaving it."""
        self._check_alive()
        p = self.params[name]
        if isinstance(value, torch.Tensor):
            value = value.detach().to(dtype=runtime.torch_dtype(),
                                      device=runtime.torch_device())
        else:
            value = engine_tensor(np.asarray(value, dtype=np.float64))
        try:
            value = value.expand(p.shape)
        except RuntimeError:
            raise ValueError(
                f"parameter '{name}' has shape {tuple(value.shape)}, which does not "
                f"broadcast to its full shape {p.shape}"
            ) from None
        p.check_values(value)
        self._write_param(name, value)

    def _write_param(self, name: str, value: torch.Tensor) -> None:
        """Write checked values of the full shape, engine dtype and device (the torch
        bridge checks every parameter of a rollout before it writes any)."""
        self.params[name].setter(value.detach().contiguous())
        self._run_id += 1  # outputs and checkpoints of earlier runs are now stale
        self._buffer_segment = None

    def get_param(self, name: str) -> np.ndarray:
        """The current value of a parameter, at its full shape (numpy)."""
        self._check_alive()
        return self.params[name].getter().cpu().numpy()

    def param_grad(self, name: str) -> np.ndarray:
        """dL/d(parameter) from the last :meth:`backward`, at the full shape (numpy; see
        :meth:`param_grad_tensor`)."""
        return self.param_grad_tensor(name).cpu().numpy()

    def param_grad_tensor(self, name: str) -> torch.Tensor:
        """dL/d(parameter) from the last :meth:`backward`, at the full shape: a tensor of
        the engine's dtype on its device."""
        self._check_alive()
        return self.params[name].grad_getter()

    def _check_alive(self) -> None:
        self.model.check_alive("this Simulation (and its Model)")

    # ---- time loop -------------------------------------------------------------------
    def _segment_frames(self, first_frame: int) -> int:
        """Frames the segment starting at ``first_frame`` runs: all of it, or (one segment
        holding every frame) up to the frame count of the last forward."""
        return min(self.frames_per_segment, self._frames_run - first_frame)

    def _run_segment(self, first_frame: int) -> None:
        steps = self._segment_frames(first_frame) * self.substeps
        for system in self.systems:
            system.load(first_frame)
            system.clear_segment()
        for row in range(steps):
            frame = first_frame + row // self.substeps
            for system in self.systems:
                system.step(row, frame, self.dt)
        self._buffer_segment = first_frame

    def _segments(self, frames: int | None = None):
        """The first frame of each segment that simulating ``frames`` frames runs (without
        checkpoints: one segment)."""
        return range(0, self.frames if frames is None else frames, self.frames_per_segment)

    def _frame_count(self, frames) -> int:
        if frames is None:
            return self.frames
        if isinstance(frames, bool) or int(frames) != frames or not 1 <= frames <= self.frames:
            raise ValueError(f"frames must be an integer in [1, {self.frames}] (this "
                             f"Simulation's frame count); got {frames!r}")
        return int(frames)

    def _bar(self, iterable, desc):
        show = self.progress is not None and self.frames >= self.progress
        return tqdm(iterable, desc=desc, leave=False, disable=not show)

    def forward(self, frames: int | None = None) -> dict[str, np.ndarray]:
        """Run the rollout; returns ``{system name: positions [frames + 1, V, 3]}``, plus
        ``{name}_velocity`` for systems that report velocities (particles), as numpy
        arrays (:meth:`forward_tensors` returns torch tensors on the engine's device).

        ``frames``: simulate only the first ``frames`` frames (default: all), e.g. for a
        loss over the early frames of the video; the time
        loop stops there, and :meth:`backward` starts there."""
        return {k: v.cpu().numpy() for k, v in self.forward_tensors(frames).items()}

    def forward_tensors(self, frames: int | None = None) -> dict[str, torch.Tensor]:
        """:meth:`forward`, returning tensors of the engine's dtype on its device (copied
        from the engine by kernels, no host round trip)."""
        self._check_alive()
        frames = self._frame_count(frames)
        self._frames_run = frames
        for first in self._bar(self._segments(frames), "simulate"):
            self._run_segment(first)
            for k in range(1, self._segment_frames(first) + 1):
                for system in self.systems:
                    system.save(first + k, k * self.substeps)
        self._run_id += 1
        self._forward_run = self._run_id
        out = {}
        for s in self.systems:
            full = engine_tensor(s.output())  # (a tensor there already: as it is)
            self._output_shapes[s.name] = tuple(full.shape)  # (backward pads to it)
            out[s.name] = full[: frames + 1]
            if hasattr(s, "velocity_output"):
                out[s.name + "_velocity"] = engine_tensor(s.velocity_output())[: frames + 1]
        return out

    def backward(self, grad_outputs: dict) -> None:
        """Back-propagate dL/d(outputs) of the last :meth:`forward` (as many frames as it
        returned; numpy arrays or torch tensors, moved to the engine's device and dtype);
        afterwards :meth:`param_grad` gives the gradient of every parameter. A
        RuntimeError if no forward has run, or a parameter was set after the last one."""
        self._check_alive()
        if self._forward_run != self._run_id:  # it would run on absent or stale checkpoints
            raise RuntimeError(
                "backward() back-propagates the last forward(), and "
                + ("none has run on this Simulation yet" if self._forward_run is None else
                   "a parameter was set after it")
                + ": call forward() (again) first")
        if not isinstance(grad_outputs, dict):
            raise TypeError("grad_outputs must be a dict {output name: dL/d(output)}; got "
                            f"{type(grad_outputs).__name__} (outputs: "
                            f"{', '.join(self.output_names)})")
        unknown = sorted(set(grad_outputs) - set(self.output_names), key=str)
        if unknown:
            raise KeyError(f"grad_outputs names no output of this Simulation: {unknown[0]!r} "
                           f"(outputs: {', '.join(self.output_names)})")
        frames = self._frames_run
        shapes = {s.name: self._output_shapes.get(s.name) or tuple(s.output().shape)
                  for s in self.systems}
        grads = {name: _padded(name, grad, shapes[name.removesuffix("_velocity")], frames)
                 for name, grad in grad_outputs.items() if grad is not None}
        if self.model.ground is not None:
            self.model.ground.zero_grads()
        for system in self.systems:
            g = grads.get(system.name)
            if g is None:
                g = _padded(system.name, None, shapes[system.name], frames)
            if hasattr(system, "velocity_output"):
                system.begin_backward(g, grads.get(system.name + "_velocity"))
            else:
                system.begin_backward(g)
        # segments after the last simulated frame get no gradient and pass none back
        for first in self._bar(reversed(self._segments(frames)), "backward"):
            if self._buffer_segment != first:
                self._run_segment(first)
            count = self._segment_frames(first)
            steps = count * self.substeps
            for system in self.systems:
                system.seed_segment(first, count, self.substeps)
            for row in reversed(range(steps)):
                frame = first + row // self.substeps
                for system in reversed(self.systems):
                    system.step_grad(row, frame, self.dt)
            self._buffer_segment = None  # adjoint kernels leave primal values intact, but
            # the next segment to process is an earlier one anyway
        for system in self.systems:
            system.finish_backward()

    def stored_state_bytes(self) -> int:
        """Bytes of state (values and adjoints) kept for forward and backward."""
        return int(sum(s.state_bytes() for s in self.systems))

    def rollout(self, **params) -> dict[str, torch.Tensor]:
        """Differentiable rollout: keyword torch tensors (or numbers) by parameter name ->
        ``{system name: positions [frames + 1, V, 3]}`` (see :func:`gradsim_taichi.simulate`)."""
        from gradsim_taichi.torch_bridge import simulate

        return simulate(self, params)


def _store_fits(model: Model, rows: int) -> bool:
    """Whether storing ``rows`` substep rows of every system (values and adjoints) takes at
    most :data:`AUTO_STORE_BYTES`; False when a system does not say (no ``row_bytes``)."""
    total = 0
    for system in model.systems:
        per_row = getattr(system, "row_bytes", None)
        per_row = None if per_row is None else per_row()
        if per_row is None:
            return False
        total += per_row * rows
    return total <= AUTO_STORE_BYTES


def _padded(name: str, grad, shape, frames: int) -> torch.Tensor:
    """dL/d(output ``name``) of the ``frames + 1`` rows a rollout returned (fewer: the
    rest zero), zero for the rows after them: a contiguous tensor of ``shape``, the
    engine's dtype, on its device (the gradient itself when it covers every row)."""
    if grad is None:
        return torch.zeros(shape, dtype=runtime.torch_dtype(), device=runtime.torch_device())
    grad = engine_tensor(grad)
    if grad.dim() != len(shape) or tuple(grad.shape[1:]) != tuple(shape[1:]) \
            or not 1 <= len(grad) <= frames + 1:
        raise ValueError(
            f"grad_outputs[{name!r}] has shape {tuple(grad.shape)}; the last forward "
            f"returned {(frames + 1, *shape[1:])} (up to that many rows)")
    if tuple(grad.shape) == tuple(shape):
        return grad.contiguous()
    out = torch.zeros(shape, dtype=grad.dtype, device=grad.device)
    out[: len(grad)] = grad
    return out

"""What a run compares, and how: targets, stages and frame selection, blur, losses.

- :func:`check_target`: a target video (or 3D positions) checked against a scene.
- :class:`Stages`: growing horizons (which frames each iteration fits) and the coarse
  stage (the first iterations within a parameter basis).
- :func:`blur_frames`: a Gaussian blur of both videos before the loss.
- :data:`LOSSES` / :func:`get_loss`: the losses by name (``"mse"``), or a callable.
- :func:`image_loss`: the control tasks' loss (last-frame pixel MSE plus an action
  regulariser).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from gradsim_taichi import runtime


# ---- losses ---------------------------------------------------------------------------
def mse(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean squared error over every element."""
    return ((pred - target) ** 2).mean()


LOSSES = {"mse": mse}


def get_loss(loss):
    """A loss by name (one of :data:`LOSSES`) or a callable ``loss(pred, target)``."""
    if callable(loss):
        return loss
    if loss in LOSSES:
        return LOSSES[loss]
    raise ValueError(f"loss must be one of {tuple(LOSSES)} or a callable; got {loss!r}")


def image_loss(image: torch.Tensor, target: torch.Tensor, actions: torch.Tensor | None = None,
               reg: float = 0.0) -> torch.Tensor:
    """Pixel MSE of ``image`` against ``target`` plus ``reg * mean(actions^2)``."""
    value = mse(image, target)
    if reg > 0 and actions is not None:
        value = value + reg * (actions ** 2).mean()
    return value


# ---- targets --------------------------------------------------------------------------
def check_target(scene, target, supervision: str) -> torch.Tensor:
    """Validate a target video ``[F + 1, H, W, 3|4]`` (or positions ``[F + 1, V, 3]`` for
    3D supervision) against the scene; errors say what does not fit."""
    if not isinstance(target, torch.Tensor):
        target = torch.as_tensor(np.asarray(target))
    target = target.to(dtype=runtime.torch_dtype(), device=runtime.torch_device())
    if supervision == "3d":
        want = (scene.frames + 1, sum(p.mesh.faces.max().item() + 1 for p in scene.parts
                                      if p.static_vertices is None), 3)
        if tuple(target.shape) != want:
            raise ValueError(f"3D target must have shape {want} (frames + 1, tracked "
                             f"vertices, 3); got {tuple(target.shape)}")
        if not torch.isfinite(target).all():
            raise ValueError("3D target contains NaN or inf")
        return target
    if target.ndim != 4 or target.shape[-1] not in (3, 4):
        raise ValueError(f"target video must be [frames, height, width, 3 or 4]; "
                         f"got shape {tuple(target.shape)}")
    frames, h, w = target.shape[:3]
    if frames != scene.frames + 1:
        raise ValueError(f"target video has {frames} frames; scene '{scene.name}' renders "
                         f"{scene.frames + 1} (frames + the initial state)")
    if (h, w) != (scene.height, scene.width):
        raise ValueError(f"target video is {w}x{h} pixels; scene '{scene.name}' renders "
                         f"{scene.width}x{scene.height} (no silent resize)")
    if not torch.isfinite(target).all():
        raise ValueError("target video contains NaN or inf")
    return target


# ---- stages and frames ----------------------------------------------------------------
class Stages:
    """Which frames each iteration fits, and when the objective changes.

    Growing horizons (``warmup``): ``(iterations, last_frame)`` or a list of them, run in
    order, then all frames. A tumbling body's flight before it touches the ground has a
    single minimum; later frames can make the full-video loss multimodal. The coarse
    stage: the first ``coarse_iters`` iterations move parameters that have a basis only
    within it. Frames are every ``frame_stride``-th of ``0..frames``.
    """

    def __init__(self, frames: int, warmup=(0, 0), coarse_iters: int = 0,
                 frame_stride: int = 1):
        if int(frame_stride) != frame_stride or frame_stride < 1:
            raise ValueError(f"frame_stride must be a positive integer; got {frame_stride!r}")
        if int(coarse_iters) != coarse_iters or coarse_iters < 0:
            raise ValueError(f"coarse_iters must be an integer >= 0; got {coarse_iters!r}")
        self.all_ids = torch.arange(0, frames + 1, frame_stride)
        self.horizons = parse_warmup(warmup)
        self.ends = np.cumsum([n for n, _ in self.horizons]).tolist()
        self.coarse_iters = int(coarse_iters)

    def frame_ids(self, iteration: int) -> torch.Tensor:
        """The frames fitted at ``iteration``."""
        for end, (_, last) in zip(self.ends, self.horizons):
            if iteration < end:
                return self.all_ids[self.all_ids <= last]
        return self.all_ids

    def coarse(self, iteration: int) -> bool:
        return iteration < self.coarse_iters

    def final(self, iteration: int) -> bool:
        """Whether ``iteration`` fits the final objective (every horizon and the coarse
        stage behind it)."""
        return iteration >= max(self.ends[-1] if self.ends else 0, self.coarse_iters)

    def starts_new_objective(self, iteration: int) -> bool:
        """A horizon or the coarse stage ends here: optimiser memory of the old objective
        misleads, and the loss scale is measured again."""
        return iteration > 0 and (iteration in self.ends or iteration == self.coarse_iters)


def parse_warmup(warmup) -> list:
    """``(iters, last_frame)`` or a sequence of them -> list of stages with iters > 0."""
    stages = [warmup] if len(warmup) == 2 and np.isscalar(warmup[0]) else list(warmup)
    out = []
    for stage in stages:
        if len(stage) != 2:
            raise ValueError(f"warmup stages are (iterations, last frame) pairs; got {stage!r}")
        n, last = stage
        if int(n) != n or n < 0 or int(last) != last or last < 0:
            raise ValueError(f"warmup stages are (iterations >= 0, last frame >= 0); "
                             f"got {stage!r}")
        if n > 0:
            out.append((int(n), int(last)))
    return out


# ---- blur -----------------------------------------------------------------------------
def check_blur(blur) -> float:
    if not (isinstance(blur, (int, float)) and math.isfinite(blur) and blur >= 0):
        raise ValueError(f"blur must be a number of pixels >= 0; got {blur!r}")
    return float(blur)


def blur_frames(frames: torch.Tensor, sigma: float) -> torch.Tensor:
    """Gaussian blur of ``[F, H, W, C]`` frames, ``sigma`` in pixels (0: unchanged), with
    the border pixels repeated outwards (separable, differentiable)."""
    if sigma <= 0:
        return frames
    _, h, w, _ = frames.shape
    # as two small dense matrices (rows, columns): much faster than conv2d in float64
    rows, cols = (_blur_matrix(n, sigma, frames.dtype) for n in (h, w))
    img = frames.permute(0, 3, 1, 2)
    return (rows @ img @ cols.T).permute(0, 2, 3, 1)


def _blur_matrix(n: int, sigma: float, dtype) -> torch.Tensor:
    """``[n, n]``: row i holds the Gaussian weights of pixel i's neighbours, the weights
    beyond the border added to the border pixel."""
    radius = max(1, int(math.ceil(3 * sigma)))
    offsets = np.arange(-radius, radius + 1)
    weights = np.exp(-0.5 * (offsets / sigma) ** 2)
    weights /= weights.sum()
    m = np.zeros((n, n))
    for i in range(n):
        np.add.at(m[i], np.clip(i + offsets, 0, n - 1), weights)
    return torch.as_tensor(m, dtype=dtype, device=runtime.torch_device())

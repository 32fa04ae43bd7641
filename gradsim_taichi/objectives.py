"""What a run compares, and how: targets, masks, stages and frame selection, blur,
losses.

- :func:`check_target`, :func:`check_mask`: a target video (or 3D positions) and a
  target mask checked against a scene.
- :func:`mask_from_video`, :func:`mask_from_plate`: target masks from a mask video or by
  difference keying against a background plate.
- :class:`Stages`: growing horizons (which frames each iteration fits), the frame
  range, the pre-contact stage (:func:`first_contact`) and the coarse stage.
- :func:`blur_frames`: a Gaussian blur of both videos before the loss;
  :func:`heat_blur_frames`, one of a learned width (the camera's, ``fit="blur"``).
- :data:`LOSSES` / :func:`get_loss`: the losses by name (``"mse"``, ``"robust"``,
  ``"silhouette"``, ``"masked"``), or a callable.
- :func:`relative_spread`: how far apart the estimates of several restarts are.
- :func:`image_loss`: the control tasks' loss (last-frame pixel MSE plus an action
  regulariser).
"""

from __future__ import annotations

import functools
import math

import numpy as np
import torch

from gradsim_taichi import runtime

# ---- losses ---------------------------------------------------------------------------
# The mask losses (``needs_mask = True``) read channel 3 of both videos as the object's
# coverage: in the rendered frames the coverage of the simulated objects alone (ground
# and backdrop excluded; ``Scene.render(..., coverage=True)``), in the target the target
# mask in [0, 1] (1: object). Channels 0..2 are RGB.

# Charbonnier scale of the "robust" loss, in pixel units ([0, 1] images): residuals well
# below it are penalised quadratically (r^2 / 2 eps), well above it linearly (|r|), so a
# shadow or a highlight the model cannot draw pulls with a bounded force. 1e-2 is above
# 8-bit quantisation (1/255) and typical compression noise, below any real mismatch.
ROBUST_EPS = 1e-2
# soft IoU: added to intersection and union, so a frame where neither video shows the
# object costs nothing (and nothing divides by zero); in pixels
IOU_SMOOTH = 1e-6
# weight of the silhouette term in the "masked" loss (see masked_loss). 0 by default:
# measured on rigid-mass (64 px, a soft shadow the model cannot draw, the true binary
# mask), the colours inside the mask alone recover the mass to 1e-14 from 2 and from
# 12 kg, while a silhouette weight of 1e-3 already costs 1e-4 (0.1: 5e-4): a binary
# mask's outline is only good to a pixel, so its soft IoU is best slightly off the truth
MASKED_SILHOUETTE_WEIGHT = 0.0


def mse(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean squared error over every element."""
    return ((pred - target) ** 2).mean()


def robust(pred: torch.Tensor, target: torch.Tensor, eps: float = ROBUST_EPS) -> torch.Tensor:
    """Charbonnier loss, the mean of ``sqrt(r^2 + eps^2) - eps`` over every element
    (``r = pred - target``; ``eps``: :data:`ROBUST_EPS`, pixel units): quadratic for
    small residuals, linear for large ones (outliers such as shadows pull less than in
    the MSE)."""
    return (robust_residual(pred - target, eps) ** 2).mean()


def robust_residual(r: torch.Tensor, eps: float = ROBUST_EPS) -> torch.Tensor:
    """Residuals whose squares are :func:`robust`'s terms, ``r / sqrt(sqrt(r^2 + eps^2)
    + eps)`` (smooth, odd, ``r / sqrt(2 eps)`` near 0): Levenberg-Marquardt fits the
    Charbonnier loss as least squares of these. Written so that ``sqrt(r^2 + eps^2) -
    eps`` never cancels for ``|r| << eps`` (which rounded a nearly converged loss to
    exactly 0 while its gradient was not)."""
    return r / torch.sqrt(torch.sqrt(r * r + eps * eps) + eps)


# how Levenberg-Marquardt turns ``pred - target`` into residuals whose mean square is the
# loss (the losses it fits: LM_LOSSES, below)
LM_RESIDUALS = {mse: lambda r: r, robust: robust_residual}


def lm_residual(loss_fn):
    """Levenberg-Marquardt's residuals of ``loss_fn`` (:data:`LM_RESIDUALS`); None for a
    loss it cannot fit."""
    return LM_RESIDUALS.get(loss_fn)


def silhouette(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """``1 - soft IoU`` of the object's coverage (``pred[..., 3]``) against the target
    mask (``target[..., 3]``), averaged over frames: per frame
    ``I = sum(a m)``, ``U = sum(a + m - a m)``, ``1 - (I + s) / (U + s)`` (``s``:
    :data:`IOU_SMOOTH`). Colour is ignored."""
    a, m = pred[..., 3], target[..., 3]
    inter = (a * m).flatten(1).sum(1)
    union = (a + m - a * m).flatten(1).sum(1)
    return (1.0 - (inter + IOU_SMOOTH) / (union + IOU_SMOOTH)).mean()


def masked(pred: torch.Tensor, target: torch.Tensor,
           silhouette_weight: float | None = None) -> torch.Tensor:
    """RGB mean squared error over the target mask's pixels (weighted by the mask, per
    channel), plus ``silhouette_weight`` (default :data:`MASKED_SILHOUETTE_WEIGHT`)
    times :func:`silhouette`: the backdrop (shadows, occlusion, bounce light that the
    model cannot draw) does not count; with a weight, the outline does too."""
    weight = MASKED_SILHOUETTE_WEIGHT if silhouette_weight is None else silhouette_weight
    m = target[..., 3:4]
    sq = ((pred[..., :3] - target[..., :3]) ** 2 * m).sum()
    inside = sq / (3.0 * m.sum()).clamp_min(1.0)
    return inside + weight * silhouette(pred, target) if weight else inside


def masked_loss(silhouette_weight: float):
    """The ``"masked"`` loss with its own silhouette weight (>= 0), for ``estimate(loss=)``."""
    if not (isinstance(silhouette_weight, (int, float)) and math.isfinite(silhouette_weight)
            and silhouette_weight >= 0):
        raise ValueError(f"silhouette weight must be a number >= 0; got {silhouette_weight!r}")

    def loss(pred, target):
        return masked(pred, target, float(silhouette_weight))

    loss.__name__, loss.needs_mask = "masked", True
    return loss


for _loss in (silhouette, masked):
    _loss.needs_mask = True

LOSSES = {"mse": mse, "robust": robust, "silhouette": silhouette, "masked": masked}
# the losses Levenberg-Marquardt fits, by name (see LM_RESIDUALS)
LM_LOSSES = tuple(name for name, fn in LOSSES.items() if fn in LM_RESIDUALS)


def get_loss(loss):
    """A loss by name (one of :data:`LOSSES`) or a callable ``loss(pred, target)``."""
    if callable(loss):
        return loss
    if loss in LOSSES:
        return LOSSES[loss]
    raise ValueError(f"loss must be one of {tuple(LOSSES)} or a callable; got {loss!r}")


def needs_mask(loss_fn) -> bool:
    """Whether a loss reads the object's coverage and the target mask (channel 3)."""
    return bool(getattr(loss_fn, "needs_mask", False))


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


# ---- target masks ---------------------------------------------------------------------
# difference keying: a pixel is the object where some channel differs from the
# background plate by more than this ([0, 1] pixels). Above compression noise and the
# plate's own noise (a few 1/255), below the contrast of an object against its backdrop.
KEY_THRESHOLD = 0.1
# mask_from_plate(shadows=True): a pixel darker than the plate by the same factor in
# every channel (within this much) is a shadow on the backdrop, not the object
SHADOW_CHROMA_TOL = 0.05


def mask_from_video(video) -> torch.Tensor:
    """A target mask ``[F, H, W]`` (0 or 1) from a mask video ``[F, H, W, C]`` in [0, 1]:
    a pixel is the object where any channel is above 0.5 (white, or any colour, on
    black)."""
    video = torch.as_tensor(np.asarray(video) if not isinstance(video, torch.Tensor) else video)
    if video.ndim != 4:
        raise ValueError(f"mask video must be [frames, height, width, channels]; got shape "
                         f"{tuple(video.shape)}")
    return (video[..., :3] > 0.5).any(-1).to(runtime.torch_dtype())


def mask_from_plate(frames, plate, threshold: float = KEY_THRESHOLD,
                    cleanup: int = 0, shadows: bool = False) -> torch.Tensor:
    """A target mask ``[F, H, W]`` (0 or 1) by difference keying: a pixel of ``frames``
    ``[F, H, W, C]`` is the object where any RGB channel differs from the background
    ``plate`` ``[H, W, C]`` (the same camera without the objects) by more than
    ``threshold`` (:data:`KEY_THRESHOLD`). ``cleanup`` > 0: a morphological opening then
    closing with a ``(2 cleanup + 1)``-pixel square removes specks and fills pinholes
    (it also removes object parts thinner than that). Shadows the objects cast on the
    backdrop differ from the plate too: ``shadows=True`` leaves out pixels that are the
    plate darkened by one factor in every channel (the factors within
    :data:`SHADOW_CHROMA_TOL`; an object of the backdrop's own hue, darker, is then lost
    too), or give a mask video."""
    frames = torch.as_tensor(frames).to(runtime.torch_dtype())
    plate = torch.as_tensor(plate).to(runtime.torch_dtype())
    if plate.ndim == 4 and plate.shape[0] == 1:
        plate = plate[0]
    if frames.ndim != 4 or plate.ndim != 3:
        raise ValueError(f"background plate: frames must be [F, H, W, C] and the plate "
                         f"[H, W, C]; got {tuple(frames.shape)} and {tuple(plate.shape)}")
    if tuple(plate.shape[:2]) != tuple(frames.shape[1:3]):
        raise ValueError(f"background plate is {plate.shape[1]}x{plate.shape[0]} pixels; "
                         f"the target video is {frames.shape[2]}x{frames.shape[1]}")
    if not (math.isfinite(threshold) and 0 < threshold < 1):
        raise ValueError(f"key threshold must be in (0, 1); got {threshold!r}")
    if int(cleanup) != cleanup or cleanup < 0:
        raise ValueError(f"cleanup must be an integer >= 0 (pixels); got {cleanup!r}")
    diff = (frames[..., :3] - plate[None, ..., :3]).abs().amax(-1)
    keyed = diff > threshold
    if shadows:
        ratio = frames[..., :3] / plate[None, ..., :3].clamp_min(1e-3)
        keyed &= ~((ratio.amax(-1) < 1.0)
                   & (ratio.amax(-1) - ratio.amin(-1) < SHADOW_CHROMA_TOL))
    mask = keyed.to(frames.dtype)
    if cleanup:
        def dilate(m):
            return 1.0 - erode_mask(1.0 - m, int(cleanup))

        mask = erode_mask(dilate(dilate(erode_mask(mask, int(cleanup)))), int(cleanup))
        # (an opening, erode then dilate; then a closing, dilate then erode)
    return mask


def erode_mask(mask: torch.Tensor, pixels: int) -> torch.Tensor:
    """``mask`` ``[F, H, W]`` shrunk by ``pixels`` (a square neighbourhood): the pixels
    whose every neighbour within that distance is the object. Edge pixels mix the
    object's colour with the backdrop's (and its shadows); an eroded mask keeps the
    ``"masked"`` loss on pure object colour. 0: unchanged."""
    if int(pixels) != pixels or pixels < 0:
        raise ValueError(f"mask erosion must be an integer >= 0 (pixels); got {pixels!r}")
    if pixels == 0:
        return mask
    k = 2 * int(pixels) + 1
    pooled = torch.nn.functional.max_pool2d((1.0 - mask)[:, None], k, 1, k // 2)[:, 0]
    return 1.0 - pooled


def check_mask(scene, mask) -> torch.Tensor:
    """A target mask ``[frames + 1, H, W]`` in [0, 1] checked against the scene."""
    mask = torch.as_tensor(np.asarray(mask) if not isinstance(mask, torch.Tensor) else mask)
    mask = mask.to(runtime.torch_dtype())
    if mask.ndim != 3:
        raise ValueError(f"target mask must be [frames, height, width]; got shape "
                         f"{tuple(mask.shape)}")
    if mask.shape[0] != scene.frames + 1:
        raise ValueError(f"target mask has {mask.shape[0]} frames; scene '{scene.name}' "
                         f"renders {scene.frames + 1} (frames + the initial state)")
    if tuple(mask.shape[1:]) != (scene.height, scene.width):
        raise ValueError(f"target mask is {mask.shape[2]}x{mask.shape[1]} pixels; scene "
                         f"'{scene.name}' renders {scene.width}x{scene.height}")
    if not torch.isfinite(mask).all() or mask.min() < 0 or mask.max() > 1:
        raise ValueError("target mask must hold values in [0, 1]")
    return mask


# ---- stages and frames ----------------------------------------------------------------
class Stages:
    """Which frames each iteration fits, and when the objective changes.

    Growing horizons (``warmup``): ``(iterations, last_frame)`` or a list of them, run in
    order, then all frames. A tumbling body's flight before it touches the ground has a
    single minimum; later frames can make the full-video loss multimodal. The coarse
    stage: the first ``coarse_iters`` iterations move parameters that have a basis only
    within it. A stage whose estimate has converged ends early
    (:meth:`end_objective_after`): the later stages start sooner. Frames are every
    ``frame_stride``-th of ``first..last`` (``frame_range``, inclusive; default
    ``0..frames``); a horizon that selects none of them is dropped.
    """

    def __init__(self, frames: int, warmup=(0, 0), coarse_iters: int = 0,
                 frame_stride: int = 1, frame_range=None):
        if int(frame_stride) != frame_stride or frame_stride < 1:
            raise ValueError(f"frame_stride must be a positive integer; got {frame_stride!r}")
        if int(coarse_iters) != coarse_iters or coarse_iters < 0:
            raise ValueError(f"coarse_iters must be an integer >= 0; got {coarse_iters!r}")
        first, last = check_frame_range(frame_range, frames)
        self.range = (first, last)
        self.all_ids = torch.arange(first, last + 1, frame_stride)
        self.horizons = [(n, end) for n, end in parse_warmup(warmup) if end >= first]
        self.ends = np.cumsum([n for n, _ in self.horizons]).tolist()
        self.coarse_iters = int(coarse_iters)  # as planned
        self.coarse_end = self.coarse_iters  # when it ends (earlier if it converged)

    def frame_ids(self, iteration: int) -> torch.Tensor:
        """The frames fitted at ``iteration``."""
        for end, (_, last) in zip(self.ends, self.horizons):
            if iteration < end:
                return self.all_ids[self.all_ids <= last]
        return self.all_ids

    def coarse(self, iteration: int) -> bool:
        return iteration < self.coarse_end

    def every_frame(self, iteration: int) -> bool:
        """Whether ``iteration`` fits every frame (the horizons are behind it)."""
        return iteration >= (self.ends[-1] if self.ends else 0)

    def final(self, iteration: int) -> bool:
        """Whether ``iteration`` fits the final objective (every horizon and the coarse
        stage behind it)."""
        return self.every_frame(iteration) and not self.coarse(iteration)

    def starts_new_objective(self, iteration: int) -> bool:
        """A horizon or the coarse stage ends here: optimiser memory of the old objective
        misleads, and the loss scale is measured again."""
        return iteration > 0 and (iteration in self.ends or iteration == self.coarse_end)

    def end_objective_after(self, iteration: int) -> tuple[int, int]:
        """End the objective fitted at ``iteration`` (not the final one) there: the next
        iteration starts the next one, and every later boundary moves as much earlier.
        Returns ``(boundary, shift)``: boundaries at or after ``boundary`` moved by
        ``shift`` iterations (0 when there was nothing to move)."""
        later = [b for b in (*self.ends, self.coarse_end) if b > iteration]
        if not later or self.final(iteration):
            return iteration + 1, 0
        boundary = min(later)
        shift = boundary - (iteration + 1)
        self.ends = [e - shift if e >= boundary else e for e in self.ends]
        if self.coarse_end >= boundary:
            self.coarse_end -= shift
        return boundary, shift

    def stage_of(self, iteration: int) -> dict:
        """The frames fitted at ``iteration`` as ``{"first_frame", "last_frame"}``."""
        ids = self.frame_ids(iteration)
        return {"first_frame": int(ids[0]), "last_frame": int(ids[-1])}


def check_frame_range(frame_range, frames: int) -> tuple:
    """``(first, last)`` frames to fit, inclusive, within ``0..frames`` (None: all)."""
    if frame_range is None:
        return 0, int(frames)
    try:
        first, last = (int(x) for x in frame_range)
        ok = tuple(frame_range) == (first, last)
    except (TypeError, ValueError):
        ok = False
    if not ok or not 0 <= first < last <= frames:
        raise ValueError(f"frame range must be (first, last) frames with 0 <= first < last "
                         f"<= {frames} (the scene's frame count); got {frame_range!r}")
    return first, last


def first_contact(positions: torch.Tensor, level: float, tol: float | None = None):
    """The first frame at which some vertex of ``positions`` ``[F + 1, V, 3]`` (y up) is
    within ``tol`` of the ground height ``level`` (or below it); None if none is.
    ``tol`` default: 1% of the vertices' extent at frame 0 (the diagonal of their box),
    so a body that is about to land counts as landed one frame early rather than late.
    """
    positions = torch.as_tensor(positions).detach()
    if tol is None:
        p0 = positions[0]
        tol = 0.01 * float((p0.amax(0) - p0.amin(0)).norm())
    low = positions[..., 1].amin(-1)
    hits = torch.nonzero(low <= level + tol)
    return None if len(hits) == 0 else int(hits[0, 0])


# restarts: estimates whose relative spread is above this disagree (the loss has more
# than one minimum within the guesses' range, or the runs did not converge)
SPREAD_TOL = 1e-2


def relative_spread(estimates: list) -> float:
    """How far apart several estimates of one parameter are: the largest element-wise
    ``max - min`` over the restarts, divided by the mean magnitude of all the values."""
    values = np.stack([np.asarray(e, dtype=np.float64).reshape(-1) for e in estimates])
    scale = max(float(np.abs(values).mean()), 1e-12)
    return float((values.max(0) - values.min(0)).max() / scale)


# with fit: the fewest iterations of each of the scene's warm-up horizons (at most half
# the run's). The nuisance parameters move with the physics and a preset's 4 iterations
# end mid-way: a path-traced 9 kg L-shape's flight stopped at 9.41 kg and the full video
# then held it in a local minimum of the tumble at 9.48 (5.4e-2; four guesses with 12:
# 5.3e-4-6.1e-4). A horizon that converges sooner ends early.
FIT_WARMUP_ITERS = 12


def fit_warmup(horizons: list, iters: int) -> list:
    """The warm-up ``horizons`` (:func:`parse_warmup`'s) of an estimation that fits
    nuisance parameters: at least :data:`FIT_WARMUP_ITERS` iterations each, together at
    most half of ``iters`` (never fewer than given)."""
    least = min(FIT_WARMUP_ITERS, int(iters) // (2 * max(len(horizons), 1)))
    return [(max(n, least), last) for n, last in horizons]


def parse_warmup(warmup) -> list:
    """``(iters, last_frame)`` or a sequence of them -> list of stages with iters > 0."""
    stages = [warmup] if len(warmup) == 2 and np.isscalar(warmup[0]) else list(warmup)
    out = []
    for stage in stages:
        if np.ndim(stage) != 1 or len(stage) != 2:
            raise ValueError(f"warmup stages are (iterations, last frame) pairs; got {stage!r}"
                             f" in {warmup!r}")
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
    return _separable(frames, _blur_matrix(h, sigma, frames.dtype),
                      _blur_matrix(w, sigma, frames.dtype))


def _separable(frames: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
    """``[F, H, W, C]`` frames filtered along columns by ``rows [H, H]`` and along rows
    by ``cols [W, W]``: two small dense matrices, much faster than conv2d in float64."""
    img = frames.permute(0, 3, 1, 2)
    return (rows @ img @ cols.T).permute(0, 2, 3, 1)


def heat_blur_frames(frames: torch.Tensor, variance: torch.Tensor) -> torch.Tensor:
    """``[F, H, W, C]`` frames blurred by the discrete Gaussian kernel of ``variance``
    (pixels squared, a 0-d tensor >= 0) along rows and columns: the heat equation's
    kernel on the pixel grid, ``exp(variance / 2 * L)`` with ``L`` the second difference
    (reflecting borders: no light lost). Unlike a sampled Gaussian its variance is exact
    at every width and it is smooth in it down to 0 (the identity), where its
    derivative is ``L / 2``: a learned blur can start sharp (``nuisance`` kind
    ``blur``)."""
    _, h, w, _ = frames.shape
    return _separable(frames, _heat_matrix(h, variance, frames),
                      _heat_matrix(w, variance, frames))


def _heat_matrix(n: int, variance: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """``[n, n]``: ``exp(variance / 2 * L)``, ``L`` the second difference
    ``u[i-1] - 2 u[i] + u[i+1]`` with a border pixel's missing neighbour taken as
    itself. The DCT-II basis diagonalises that ``L`` (eigenvalues ``-4 sin^2(pi k /
    2n)``), so the exponential is the basis times the exponentials of the eigenvalues:
    no matrix exponential, and a cheap derivative in the variance."""
    dt, dev = like.dtype, like.device
    k = torch.arange(n, dtype=dt, device=dev)
    basis = torch.cos(math.pi * (k[:, None] + 0.5) * k[None, :] / n) * math.sqrt(2.0 / n)
    basis[:, 0] = math.sqrt(1.0 / n)
    decay = torch.exp(-2.0 * variance.to(dt) * torch.sin(math.pi * k / (2 * n)) ** 2)
    return (basis * decay) @ basis.T


def _blur_matrix(n: int, sigma: float, dtype) -> torch.Tensor:
    """``[n, n]``: row i holds the Gaussian weights of pixel i's neighbours, the weights
    beyond the border added to the border pixel (built once per size, width, type and
    device: a frame-0 calibration blurs thousands of frames with three widths)."""
    return _built_blur_matrix(n, float(sigma), dtype, runtime.torch_device())


@functools.lru_cache(maxsize=64)
def _built_blur_matrix(n: int, sigma: float, dtype, device) -> torch.Tensor:
    radius = max(1, int(math.ceil(3 * sigma)))
    offsets = np.arange(-radius, radius + 1)
    weights = np.exp(-0.5 * (offsets / sigma) ** 2)
    weights /= weights.sum()
    m = np.zeros((n, n))
    for i in range(n):
        np.add.at(m[i], np.clip(i + offsets, 0, n - 1), weights)
    return torch.as_tensor(m, dtype=dtype, device=device)


# ---- a video codec's colour -------------------------------------------------------------
# Y, Cb, Cr of RGB (BT.601, full range): what H.264 / H.265 clips store
_YCBCR = ((0.299, 0.587, 0.114), (-0.168736, -0.331264, 0.5), (0.5, -0.418688, -0.081312))
CHROMA = ("full", "420")
# the suffixes of video containers: their clips are 4:2:0 in practice (--chroma auto)
VIDEO_SUFFIXES = (".mp4", ".mov", ".mkv", ".avi", ".webm", ".m4v")


def check_chroma(chroma) -> str:
    if chroma not in CHROMA:
        raise ValueError(f"chroma must be one of {', '.join(CHROMA)}; got {chroma!r}")
    return chroma


def chroma_420(frames: torch.Tensor, encoded: bool = False) -> torch.Tensor:
    """``[F, H, W, 3|4]`` RGB frames as a 4:2:0 video codec keeps them: luma (Y) per
    pixel, the two chroma channels (Cb, Cr; BT.601) once per 2 x 2 block, repeated into
    each (an odd last row or column pads itself); a fourth channel (a mask) is kept.
    An H.264 clip stores only that much colour, and its decoder's upsampled chroma at a
    coloured edge is not the scene's: compared in RGB, that difference biased a path-traced
    L-shape's mass by 1.7e-3, compared this way 4.7e-4 (2e-4 from the clip before encoding).

    A block's chroma is its four pixels' mean, which is what a decoded clip holds (each
    stored sample repeated over its block); with ``encoded`` it is what ffmpeg's encoder
    stores for the block instead (:func:`_encoder_chroma`): the model's frames are
    compared with a decoded clip that way. Linear, so differentiable."""
    m = torch.tensor(_YCBCR, dtype=frames.dtype, device=frames.device)
    ycc = frames[..., :3] @ m.T
    _, h, w, _ = frames.shape
    c = ycc[..., 1:].permute(0, 3, 1, 2)
    c = torch.nn.functional.pad(c, (0, w % 2, 0, h % 2), mode="replicate")
    if encoded:
        c = _encoder_chroma(c)
    else:
        c = torch.nn.functional.avg_pool2d(c, 2)
    c = c.repeat_interleave(2, 2).repeat_interleave(2, 3)
    out = torch.cat([ycc[..., :1], c[:, :, :h, :w].permute(0, 2, 3, 1)], -1)
    return torch.cat([out, frames[..., 3:]], -1)


def _encoder_chroma(c: torch.Tensor) -> torch.Tensor:
    """The chroma ``[F, 2, H/2, W/2]`` that ffmpeg's encoder (libswscale's default
    conversion of RGB to yuv420p: imageio, OpenCV and most renderers' video writers) stores
    for ``[F, 2, H, W]`` full-resolution chroma (H, W even): each pair of columns averaged,
    then the rows filtered by the bicubic kernel (B = 0, C = 0.6) stretched to the halved
    rate, centred between the block's two rows, over 8 rows (the border rows repeated).
    Measured by least squares on random frames through our writer: taps -0.014, -0.042,
    0.120, 0.438 (each side), as this kernel gives. Against the block mean, the mass of
    a tumbling cylinder from an MP4 of our own render came 4.7e-4 -> 1.8e-4 off (decoded
    from the planes both times). Another encoder (a camera's) may filter otherwise."""
    c = 0.5 * (c[..., 0::2] + c[..., 1::2])
    rows = _encoder_rows(c.shape[2], c.dtype, c.device)
    return torch.einsum("bh,fchw->fcbw", rows, c)


@functools.lru_cache(maxsize=16)
def _encoder_rows(n: int, dtype, device) -> torch.Tensor:
    """``[n/2, n]``: row i holds block row i's weights of the ``n`` chroma rows (built once
    per size, type and device)."""
    def cubic(x):  # Mitchell-Netravali B = 0, C = 0.6: libswscale's "bicubic"
        x = abs(x)
        if x < 1:
            return 1.4 * x ** 3 - 2.4 * x ** 2 + 1.0
        return -0.6 * x ** 3 + 3.0 * x ** 2 - 4.8 * x + 2.4 if x < 2 else 0.0

    offsets = np.arange(-3, 5)  # rows 2i-3 .. 2i+4 around the block's centre 2i + 1/2
    taps = np.array([cubic((k - 0.5) / 2) for k in offsets])
    taps /= taps.sum()
    m = np.zeros((n // 2, n))
    for i in range(n // 2):
        np.add.at(m[i], np.clip(2 * i + offsets, 0, n - 1), taps)
    return torch.as_tensor(m, dtype=dtype, device=device)

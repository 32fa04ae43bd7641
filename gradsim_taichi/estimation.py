"""System identification from video: simulate -> render -> loss -> backward -> step.

``estimate(scene, target_frames, params=[...])`` learns the named physical parameters
of a scene preset so that its rendered video matches the target video (or, with
``supervision="3d"``, so that simulated positions match target positions: the paper's
DiffPhysics baseline). Positive quantities are learned as ``log(value)``.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from gradsim_taichi import runtime
from gradsim_taichi.optimisers import KINDS, Optimiser
from gradsim_taichi.scenes.base import Scene


class EstimationError(RuntimeError):
    """The run could not go on (NaN loss or gradient, bad target); the last good state
    is kept (``error.result``)."""

    def __init__(self, message, result=None):
        super().__init__(message)
        self.result = result


@dataclass
class EstimationResult:
    """What :func:`estimate` found.

    Attributes:
        params: ``{name: estimate}`` (numpy arrays at the parameter's shape).
        init: the initial guesses.
        true: the ground truth where the scene knows it.
        history: per iteration ``{"iter", "loss", name: value...}`` (scalars, or the mean
            for vector parameters).
        iterations, seconds, status (``"done"`` or the reason it stopped).
    """

    params: dict
    init: dict
    true: dict
    history: list = field(default_factory=list)
    iterations: int = 0
    seconds: float = 0.0
    status: str = "done"

    def errors(self) -> dict:
        """Per parameter: mean absolute error and mean absolute relative error."""
        out = {}
        for name, est in self.params.items():
            if name in self.true:
                t = np.asarray(self.true[name], dtype=np.float64)
                e = np.asarray(est, dtype=np.float64)
                abs_err = float(np.mean(np.abs(e - t)))
                rel_err = float(np.mean(np.abs(e - t) / np.maximum(np.abs(t), 1e-12)))
                out[name] = {"abs_err": abs_err, "rel_err": rel_err}
        return out


def _to_param(spec, value) -> torch.Tensor:
    v = torch.as_tensor(np.asarray(value, dtype=np.float64), dtype=runtime.torch_dtype())
    return (torch.log(v) if spec.positive else v).detach().clone().requires_grad_(True)


def _from_param(spec, u: torch.Tensor) -> torch.Tensor:
    return torch.exp(u) if spec.positive else u


def check_target(scene: Scene, target: torch.Tensor, supervision: str) -> torch.Tensor:
    """Validate a target video ``[F + 1, H, W, 3|4]`` (or positions for 3D supervision)
    against the scene; errors say what does not fit."""
    if not isinstance(target, torch.Tensor):
        target = torch.as_tensor(np.asarray(target))
    target = target.to(runtime.torch_dtype())
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


def render_target(scene: Scene, supervision: str = "video") -> torch.Tensor:
    """The target from the scene's ground truth: RGBA video or positions."""
    scene.ensure_built()
    with torch.no_grad():
        out = scene.simulate(scene.true_values(scene.params))
        if supervision == "3d":
            return scene.tracked_positions(out)
        return scene.render(out)


def estimate(
    scene: Scene,
    target_frames: torch.Tensor,
    params=None,
    iters: int | None = None,
    lr: float | None = None,
    optimizer: str | None = None,
    frame_stride: int = 1,
    loss: str = "mse",
    supervision: str = "video",
    init: dict | None = None,
    seed: int = 0,
    callback=None,
    out_dir=None,
    resume: bool = False,
    save_every: int = 5,
    progress: bool = True,
    warmup: tuple | None = None,
    coarse_iters: int | None = None,
    blur: float | None = None,
) -> EstimationResult:
    """Estimate physical parameters of ``scene`` from ``target_frames``.

    Args:
        scene: a scene preset (see :func:`gradsim_taichi.scenes.make_scene`).
        target_frames: target RGBA/RGB video ``[frames + 1, H, W, 4|3]`` in [0, 1], or
            target positions ``[frames + 1, V, 3]`` with ``supervision="3d"``.
        params: names of the parameters to estimate (default: the scene's).
        iters: optimisation steps (> 0); default: the scene's.
        lr: learning rate (> 0) of the optimiser, on log-values for positive parameters;
            for ``"lm"`` the largest change of any value in one step. Default: the
            scene's.
        optimizer: ``"adam"`` (learning rate decays 100x over the run), ``"lbfgs"``,
            ``"adam+lbfgs"`` (Adam for 60% of the iterations, then L-BFGS polishing), or
            ``"lm"`` (Levenberg-Marquardt with a finite-difference Jacobian: for at most
            32 unknowns and the MSE loss; each iteration runs two simulations per
            unknown, without back-propagation).
        frame_stride: compare every k-th frame (rendering fewer frames is cheaper).
        loss: ``"mse"`` or a callable ``loss(rendered, target) -> scalar tensor``.
        supervision: ``"video"`` (pixels) or ``"3d"`` (positions: DiffPhysics baseline).
        init: ``{name: initial value}``; missing names are drawn from the scene's range
            with ``seed``.
        callback: called as ``callback(iteration, loss, values, rendered)`` after each step,
            with the loss, parameter values and frames of that step's evaluation (before
            the update; ``rendered`` is None in 3D supervision).
        out_dir: where to save ``state.pt`` every ``save_every`` iterations (for resume).
        resume: continue from ``out_dir/state.pt`` if it exists.
        progress: show a tqdm bar with the current loss.
        warmup: ``(iterations, last_frame)``: fit frames up to ``last_frame`` first, or a
            list of such stages run in order (growing horizons); then all frames.
            Default: the scene's ``warmup``; ``(0, 0)`` for none.
        coarse_iters: the first iterations move parameters that have a ``basis`` (e.g.
            per-particle velocities: the affine fields) only within it, then every
            element is free (default: the scene's ``coarse_iters``). A field that the
            video barely constrains element by element (a stiff cloth absorbs in-plane
            velocity differences within a few substeps) is found as a whole first.
        blur: standard deviation in pixels of a Gaussian blur applied to the rendered
            and the target frames before the loss (video supervision; default: the
            scene's ``blur``). Edges are sharper than a pixel, so away from the answer
            the pixel loss is rough at the pixel scale and its local slope can point
            away from the truth; blurred, its basin is as wide as the blur. The minimum
            does not move (equal videos blur equally).
    """
    names = list(params) if params else list(scene.default_params)
    iters = scene.iters if iters is None else iters
    lr = scene.lr if lr is None else lr
    optimizer = scene.optimizer if optimizer is None else optimizer
    unknown = [n for n in names if n not in scene.params]
    if unknown:
        raise KeyError(f"scene '{scene.name}' has no parameter {unknown[0]!r}; "
                       f"valid: {', '.join(scene.params)}")
    if int(iters) != iters or iters < 1:
        raise ValueError(f"iters must be a positive integer; got {iters!r}")
    if not (isinstance(lr, (int, float)) and math.isfinite(lr) and lr > 0):
        raise ValueError(f"lr must be a positive number; got {lr!r}")
    if int(frame_stride) != frame_stride or frame_stride < 1:
        raise ValueError(f"frame_stride must be a positive integer; got {frame_stride!r}")
    if supervision not in ("video", "3d"):
        raise ValueError(f"supervision must be 'video' or '3d'; got {supervision!r}")
    coarse_iters = scene.coarse_iters if coarse_iters is None else coarse_iters
    if int(coarse_iters) != coarse_iters or coarse_iters < 0:
        raise ValueError(f"coarse_iters must be an integer >= 0; got {coarse_iters!r}")
    if optimizer not in KINDS:
        raise ValueError(f"optimizer must be one of {KINDS}; got {optimizer!r}")
    blur = scene.blur if blur is None else blur
    if not (isinstance(blur, (int, float)) and math.isfinite(blur) and blur >= 0):
        raise ValueError(f"blur must be a number of pixels >= 0; got {blur!r}")
    if optimizer == "lm" and loss != "mse":
        raise ValueError("optimizer 'lm' fits the residuals of the MSE; it cannot use a "
                         "custom loss")
    scene.ensure_built()
    target = check_target(scene, target_frames, supervision)
    if supervision == "3d":
        blur = 0.0
    compared = blur_frames(target, blur)
    all_ids = torch.arange(0, scene.frames + 1, frame_stride)
    stages = _warmup_stages(scene.warmup if warmup is None else warmup)
    stage_ends = np.cumsum([n for n, _ in stages]).tolist()

    def frames_at(iteration):
        # Warm-up: the first iterations fit only the early frames (e.g. a body's flight
        # before it tumbles on the ground, where the loss has a single minimum), then
        # longer and longer horizons, then all frames.
        for end, (_, last) in zip(stage_ends, stages):
            if iteration < end:
                return all_ids[all_ids <= last]
        return all_ids

    loss_fn = _mse if loss == "mse" else loss
    if not callable(loss_fn):
        raise ValueError(f"loss must be 'mse' or a callable; got {loss!r}")

    rng = np.random.default_rng(seed)
    init = dict(init or {})
    for n in names:
        if n not in init:
            init[n] = scene.params[n].draw(rng)
        init[n] = np.asarray(init[n], dtype=np.float64)
        if scene.params[n].positive and np.any(init[n] <= 0):
            raise ValueError(f"initial value of '{n}' must be > 0; got {init[n]}")
    u = {n: _to_param(scene.params[n], init[n]) for n in names}
    opt = Optimiser(optimizer, list(u.values()), lr, iters)
    history: list = []
    start_iter, seconds_before, scale = 0, 0.0, None
    state_path = Path(out_dir) / "state.pt" if out_dir is not None else None
    if resume and state_path is not None and state_path.exists():
        try:
            state = torch.load(state_path, weights_only=False)
        except Exception as e:
            raise ValueError(f"cannot resume from {state_path}: {type(e).__name__}: {e}; "
                             "delete it to start over") from None
        if state["names"] != names:
            raise ValueError(f"{state_path} was saved for parameters {state['names']}, "
                             f"not {names}")
        for n in names:
            with torch.no_grad():
                u[n].copy_(state["u"][n])
        opt.load_state_dict(state["optimizer"])
        history, start_iter = state["history"], state["iteration"]
        init = state["init"]
        seconds_before = state["seconds"]
        scale = state["loss_scale"]

    # coarse stage: projectors onto each basis (orthonormal columns), anchored at the
    # values the stage starts from
    dtype = runtime.torch_dtype()
    bases = {n: torch.as_tensor(scene.params[n].basis, dtype=dtype) for n in names
             if scene.params[n].basis is not None and coarse_iters > 0}
    anchor = {n: u[n].detach().clone() for n in bases}
    if bases and optimizer == "lm":
        raise ValueError(f"coarse_iters with optimizer 'lm': {', '.join(bases)} would need "
                         "a coarse stage; use coarse_iters=0 or another optimizer")

    def project(x, n):
        q = bases[n]
        return (q @ (q.T @ x.reshape(-1))).reshape(x.shape)

    def values():
        return {n: _from_param(scene.params[n], u[n]) for n in names}

    def out_of_domain(vals) -> bool:
        """A trial step so long that exp() of a log-parameter overflowed or underflowed."""
        return any(not torch.isfinite(v).all() or (scene.params[n].positive and (v <= 0).any())
                   for n, v in vals.items())

    def predict(frame_ids):
        """Frames (or tracked positions) at the current values; None where the values
        are out of range or the explicit integrator blew up at them."""
        vals = values()
        out = None if out_of_domain(vals) else scene.simulate(vals)
        if out is None or not all(torch.isfinite(x).all() for x in out.values()):
            return None
        if supervision == "3d":
            return scene.tracked_positions(out)[frame_ids]
        pred = scene.render(out, frame_ids)
        return pred[..., :3] if target.shape[-1] == 3 else pred

    def objective():
        frame_ids = frames_at(it)
        pred = predict(frame_ids)
        if pred is None:
            # A trial step went too far (out of range, or too stiff for the substep): a
            # large loss with zero gradient sends a line search back; it is not the NaN
            # stop, which is for the current point.
            penalty = 1e6 / scale if scale is not None else 1e6
            # (zero gradient through the optimised tensors, which stay finite: exp() of
            # them may not be)
            return sum(t.sum() for t in u.values()) * 0.0 + penalty, None
        return loss_fn(blur_frames(pred, blur), compared[frame_ids]), pred

    def residual():
        # Levenberg-Marquardt: residuals scaled like the loss (their mean square is the
        # normalised MSE); the first call of a step is at the current values
        nonlocal rendered, scale, fresh
        frame_ids = frames_at(it)
        with torch.no_grad():
            pred = predict(frame_ids)
        if pred is None:
            return None
        r = (blur_frames(pred, blur) - compared[frame_ids]).reshape(-1)
        if scale is None:
            scale = 1.0 / max(float((r * r).mean()), 1e-300)
        if fresh:
            rendered, fresh = pred, False
        return r * math.sqrt(scale)

    t0 = time.perf_counter()
    status = "done"
    bar = tqdm(range(start_iter, iters), desc=f"estimate {scene.name}", disable=not progress,
               initial=start_iter, total=iters)
    rendered, fresh = None, True
    it = start_iter
    for it in bar:
        before = {n: u[n].detach().clone() for n in names}
        if (it in stage_ends or it == coarse_iters) and it > 0:
            opt.restart()  # a new objective: curvature memory of the old one misleads
            scale = None

        def closure(coarse=it < coarse_iters):
            # The loss is divided by its first value: L-BFGS's curvature test uses an
            # absolute threshold (1e-10) that tiny pixel losses would never pass.
            nonlocal rendered, scale
            for t in u.values():
                t.grad = None
            value, rendered = objective()
            if scale is None:
                scale = 1.0 / max(float(value.detach()), 1e-300)
            value = value * scale
            value.backward()
            if coarse:
                for n in bases:
                    u[n].grad = project(u[n].grad, n)
            return value

        fresh = True
        value, finite = opt.step(residual if optimizer == "lm" else closure)
        if it < coarse_iters:
            with torch.no_grad():  # exact for L-BFGS already; Adam's steps leave the span
                for n in bases:
                    u[n].copy_(anchor[n] + project(u[n] - anchor[n], n))
        if not finite:
            with torch.no_grad():
                for n in names:
                    u[n].copy_(before[n])
            what = "loss" if not torch.isfinite(value).all() else "gradient"
            status = (f"stopped at iteration {it}: the {what} became NaN/inf; "
                      "kept the last good estimate")
            break
        value = value / scale
        record = {"iter": it, "loss": float(value)}
        for n in names:
            record[n] = float(_from_param(scene.params[n], before[n]).mean())
        history.append(record)
        bar.set_postfix(loss=f"{float(value):.3e}")
        done = it + 1
        if state_path is not None and (done % save_every == 0 or done == iters):
            _save_state(state_path, names, u, opt, history, done, init,
                        seconds_before + time.perf_counter() - t0, scale)
        if callback is not None:
            at = {n: _from_param(scene.params[n], before[n]) for n in names}
            callback(it, float(value), at, rendered)
    bar.close()
    final = {n: v.detach().cpu().numpy() for n, v in values().items()}
    result = EstimationResult(
        params=final,
        init={n: np.asarray(init[n]) for n in names},
        true={n: np.asarray(scene.params[n].true) for n in names},
        history=history,
        iterations=len(history),
        seconds=seconds_before + time.perf_counter() - t0,
        status=status,
    )
    if status != "done":
        raise EstimationError(status, result)
    return result


def _warmup_stages(warmup) -> list:
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
    return torch.as_tensor(m, dtype=dtype)


def _mse(pred, target):
    return ((pred - target) ** 2).mean()


def _save_state(path: Path, names, u, opt, history, iteration, init, seconds, scale):
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {
        "names": names,
        "u": {n: u[n].detach().clone() for n in names},
        "optimizer": opt.state_dict(),
        "history": history,
        "iteration": iteration,
        "init": init,
        "seconds": seconds,
        "loss_scale": scale,
    }
    tmp = path.with_suffix(".tmp")
    torch.save(state, tmp)
    tmp.replace(path)  # atomic: an interrupted save never corrupts the last state


def write_report(path, scene: Scene, result: EstimationResult, settings: dict) -> Path:
    """``report.json``: per parameter true/init/estimate/abs_err/rel_err, the loss history,
    iterations, seconds, runtime and all settings."""
    info = runtime.info()
    errors = result.errors()
    per_param = {}
    for n, est in result.params.items():
        entry = {"init": _jsonable(result.init[n]), "estimate": _jsonable(est)}
        if n in result.true:
            entry["true"] = _jsonable(result.true[n])
            entry.update(errors[n])
        per_param[n] = entry
    report = {
        "scene": scene.name,
        "status": result.status,
        "params": per_param,
        "loss_history": [h["loss"] for h in result.history],
        "history": result.history,
        "iterations": result.iterations,
        "seconds": result.seconds,
        "arch": info.get("arch"),
        "precision": info.get("precision"),
        "threads": info.get("threads"),
        "settings": settings,
        "seed": settings.get("seed"),
    }
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2))
    return path


def _jsonable(x):
    arr = np.asarray(x, dtype=np.float64)
    return float(arr) if arr.ndim == 0 else arr.tolist()

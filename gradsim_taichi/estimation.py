"""System identification from video: simulate -> render -> loss -> backward -> step.

``estimate(scene, target_frames, params=[...])`` learns the named physical parameters
of a scene preset so that its rendered video matches the target video (or, with
``supervision="3d"``, so that simulated positions match target positions: the paper's
DiffPhysics baseline). Positive quantities are learned as ``log(value)``. What is
compared, over which frames, lives in :mod:`gradsim_taichi.objectives`; the iterations,
resume state and NaN stop in :mod:`gradsim_taichi.run_loop`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from gradsim_taichi import run_loop, runtime
from gradsim_taichi.errors import EstimationError
from gradsim_taichi.estimation_warnings import (
    camera_limits,
    contact_pull,
    finished_run_warnings,
    short,
)
from gradsim_taichi.fit import Fit, plain_values
from gradsim_taichi.nuisance import Nuisance, parse_fit, unknowns
from gradsim_taichi.objectives import (
    LM_LOSSES,
    ROBUST_EPS,
    SPREAD_TOL,
    Stages,
    blur_frames,
    check_blur,
    check_chroma,
    check_frame_range,
    check_mask,
    check_target,
    first_contact,
    fit_warmup,
    get_loss,
    needs_mask,
    parse_warmup,
    relative_spread,
)
from gradsim_taichi.optimisers import KINDS, LM_MAX_UNKNOWNS
from gradsim_taichi.scenes.base import Scene
from gradsim_taichi.uncertainty import local_uncertainty

__all__ = ["estimate", "render_target", "check_target", "blur_frames",
           "EstimationResult", "EstimationError"]


@dataclass
class EstimationResult:
    """What :func:`estimate` found.

    Attributes:
        params: ``{name: estimate}`` (numpy arrays at the parameter's shape).
        init: the initial guesses.
        true: the ground truth where known (see ``estimate(true=...)``).
        history: per iteration ``{"iter", "loss", name: value...}`` (scalars, or the mean
            for vector parameters).
        iterations, seconds.
        status: ``"done"``, ``"stopped"`` (NaN/inf) or ``"diverged"`` (see
            :mod:`gradsim_taichi.run_loop`); message: why the run ended.
        warnings: what a person should know about the run (it ended inside a warm-up
            stage, a parameter never moved).
        settings: every setting the run used (defaults resolved).
        uncertainty: per parameter ``std`` and ``ci95`` and the weak directions (see
            :func:`gradsim_taichi.uncertainty.local_uncertainty`), or None.
        loss: the loss at the estimate over every fitted frame (the final objective).
        stages: per stage of the run (horizons, the pre-contact stage, the coarse stage,
            then the final objective) ``{"first_frame", "last_frame", "end_iteration",
            "params"}``: the estimate when it ended.
        restarts: with ``restarts > 1``, per restart ``{"seed", "params", "loss",
            "status", "iterations"}`` (this result is the one with the lowest loss);
            spread: per parameter the restarts' relative spread
            (:func:`gradsim_taichi.objectives.relative_spread`).
        nuisance: with ``fit``, the nuisance parameters' estimates
            (:meth:`gradsim_taichi.nuisance.Nuisance.report`); background: the
            background image ``[H, W, 3]`` of fit ``"background"``.
    """

    params: dict
    init: dict
    true: dict
    history: list = field(default_factory=list)
    iterations: int = 0
    seconds: float = 0.0
    status: str = "done"
    message: str = "done"
    warnings: list = field(default_factory=list)
    settings: dict = field(default_factory=dict)
    uncertainty: dict | None = None
    loss: float | None = None
    stages: list = field(default_factory=list)
    restarts: list = field(default_factory=list)
    spread: dict = field(default_factory=dict)
    nuisance: dict = field(default_factory=dict)
    background: object = None  # the fitted background image [H, W, 3] (fit "background")
    render: object = None  # the render with the fitted nuisance parameters (fit=...)

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


def render_target(scene: Scene, supervision: str = "video") -> torch.Tensor:
    """The target from the scene's ground truth: RGBA video or positions."""
    scene.ensure_built()
    with torch.no_grad():
        out = scene.simulate(scene.true_values(scene.params))
        if supervision == "3d":
            return scene.tracked_positions(out)
        return scene.render(out)


def render_target_mask(scene: Scene) -> torch.Tensor:
    """The target mask ``[frames + 1, H, W]`` of a target from :func:`render_target`: 1
    where the simulated objects cover more than half of a pixel at the scene's ground
    truth, else 0 (binary, like a mask from a video)."""
    scene.ensure_built()
    with torch.no_grad():
        coverage = scene.render(scene.simulate(scene.true_values(scene.params)),
                                coverage=True)[..., 3]
    return (coverage > 0.5).to(coverage.dtype)


def estimate(
    scene: Scene,
    target_frames: torch.Tensor,
    params=None,
    iters: int | None = None,
    lr: float | None = None,
    optimizer: str | None = None,
    frame_stride: int = 1,
    loss="mse",
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
    chroma: str = "full",
    tol: float = 1e-10,
    true: dict | None = None,
    uncertainty: bool = True,
    mask=None,
    frame_range=None,
    stage_contact: int = 0,
    hold_flight: bool = False,
    restarts: int = 1,
    fit=None,
    background=None,
    _calibrations: dict | None = None,
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
            32 unknowns and the MSE loss; each iteration runs one simulation per
            unknown, without back-propagation), or ``"lbfgs+lm"`` (L-BFGS through the
            warm-up horizons, then Levenberg-Marquardt). Default: the scene's, or
            ``"lm"`` when ``fit`` learns camera or appearance parameters with the MSE
            (if they fit), or ``"lbfgs"`` for a scene's ``"lbfgs+lm"`` when
            Levenberg-Marquardt cannot fit (another loss, more unknowns). With the MSE a
            coarse stage fits every frame with Levenberg-Marquardt in the bases'
            coordinates (when they are few enough).
        frame_stride: compare every k-th frame (rendering fewer frames is cheaper).
        loss: a loss of :data:`gradsim_taichi.objectives.LOSSES` by name (``"mse"``) or
            a callable ``loss(rendered, target) -> scalar tensor``.
        supervision: ``"video"`` (pixels) or ``"3d"`` (positions: DiffPhysics baseline).
        init: ``{name: initial value}``; missing names are drawn from the scene's range
            with ``seed``.
        callback: called as ``callback(iteration, loss, values, rendered)`` after each step,
            with the loss, parameter values and frames of that step's evaluation (before
            the update; ``rendered`` is None in 3D supervision).
        out_dir: where to save ``state.pt`` every ``save_every`` iterations (for resume;
            see :mod:`gradsim_taichi.run_loop`).
        resume: continue from ``out_dir/state.pt`` if it exists.
        progress: show a tqdm bar with the current loss.
        warmup: ``(iterations, last_frame)``: fit frames up to ``last_frame`` first, or a
            list of such stages run in order (growing horizons); then all frames.
            Default: the scene's ``warmup``, with ``fit`` at least
            :data:`~gradsim_taichi.objectives.FIT_WARMUP_ITERS` iterations per horizon
            (at most half of ``iters`` less ``stage_contact`` in all; a horizon that
            converges ends early); ``(0, 0)`` for none.
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
        chroma: ``"full"`` (compare RGB) or ``"420"``: compare both videos as a 4:2:0
            codec (H.264, H.265: almost every MP4) keeps them, luma per pixel and colour
            per 2 x 2 block (:func:`~gradsim_taichi.objectives.chroma_420`; the model's
            frames as ffmpeg's encoder filters their colour), for a target decoded from
            such a clip (the CLI's ``--chroma auto``).
        tol: stop early, once every stage has begun, when for
            :data:`gradsim_taichi.fit.CONVERGED_PATIENCE` iterations in a row no learned
            value (log-values for positive parameters) moved by more than
            ``tol * max(1, |value|)`` and the loss changed by less than ``tol`` times its
            value at the start of the stage or of the run, whichever is larger
            (the optimiser has nothing left to do). 0: always run every iteration.
        true: ``{name: value}`` the truth to report errors against; None (default): the
            scene's own ground truth, right for targets rendered from it
            (:func:`render_target`); ``{}`` for a video whose truth is unknown.
        uncertainty: at the end, the local Gauss-Newton uncertainty of the estimate and
            the parameter combinations the video does not determine
            (:mod:`gradsim_taichi.uncertainty`; two simulations per unknown).
        mask: the target mask ``[frames + 1, H, W]`` in [0, 1] (1: object) for the mask
            losses (``"silhouette"``, ``"masked"``), which compare it with the objects'
            rendered coverage; see :func:`gradsim_taichi.objectives.mask_from_video`,
            :func:`~gradsim_taichi.objectives.mask_from_plate`, :func:`render_target_mask`.
        frame_range: ``(first, last)``: fit only these frames (inclusive; the simulation
            still starts at frame 0). Default: every frame.
        stage_contact: > 0: a first stage of this many iterations on the frames before
            the first contact with the ground, found in the simulation at the initial
            guess (:func:`gradsim_taichi.objectives.first_contact`); the flight shows
            the pushed body's mass without the contact model's mismatch. ``stages`` in
            the result shows the estimate after it and after the full video. The
            stage ends before the earliest first contact among the initial guess and
            each scalar unknown at either end of its guess range (the others at the
            guess), so that no plausible trajectory touches the ground within it.
        hold_flight: with ``stage_contact``: the unknowns the flight shows (all but the
            ground contact's ``contact_*``) keep their pre-contact estimates, and the
            frames with contact fit only the contact parameters (and the nuisance
            ones); without unknown contact parameters the run ends after the
            pre-contact stage (the nuisance ones keep their flight estimates). For a
            video whose contact the model may not match (another engine's, a real
            floor): its contact frames then cannot pull the estimate away.
        restarts: run this many estimations from initial guesses drawn with seeds
            ``seed .. seed + restarts - 1`` (names in ``init`` keep their value) and
            return the one with the lowest final loss, each run's estimate and loss in
            ``restarts`` and their spread in ``spread``; when some parameter's relative
            spread is above :data:`gradsim_taichi.objectives.SPREAD_TOL` a warning says
            the guesses disagree (several minima, or runs that did not converge).
            With ``out_dir``, restart k keeps its resume state in ``out_dir/restart-k``.
        fit: nuisance parameters learned with the physical ones, a comma-separated
            string or list from ``"camera"`` (a small pose correction), ``"background"``
            (a static background image behind the objects instead of the stage) and
            ``"appearance"`` (object albedo gain, ambient and directional light),
            ``"shadow"`` (the objects' cast shadow and ground occlusion),
            ``"bounce"`` (a learned map of each body's other light on the ground
            around it: bounce light, the contact's crevice), ``"blur"``
            (the camera's Gaussian blur, its width) and ``"response"`` (the camera's
            response, ``(1 + c) x^(1/gamma) - c``); see
            :mod:`gradsim_taichi.nuisance`; here the whole list (the ``estimate``
            command adds the names to its default for a video the engine did not make,
            see :func:`gradsim_taichi.estimation_outputs.fit_for`). Their estimates are
            in ``nuisance``. Camera
            and appearance are first calibrated on frame 0; with a gradient optimiser
            (not ``"lm"``) the calibrated camera is then held until every frame is
            fitted.
        background: with ``fit`` including ``"background"``: a fixed background image
            ``[H, W, 3]`` (a plate of the empty scene) instead of the one solved per
            pixel.
        _calibrations: (internal) the frame-0 calibrations of earlier restarts of the
            same call, reused where a restart's frame 0 is the same (see
            :meth:`gradsim_taichi.fit.Fit.calibrate`).
    """
    if isinstance(restarts, bool) or int(restarts) != restarts or restarts < 1:
        raise ValueError(f"restarts must be a positive integer; got {restarts!r}")
    if restarts > 1:
        return _estimate_restarts(
            scene, target_frames, int(restarts), seed, out_dir, callback,
            dict(params=params, iters=iters, lr=lr, optimizer=optimizer,
                 frame_stride=frame_stride, loss=loss, supervision=supervision, init=init,
                 resume=resume, save_every=save_every, progress=progress, warmup=warmup,
                 coarse_iters=coarse_iters, blur=blur, chroma=chroma, tol=tol, true=true,
                 uncertainty=uncertainty, mask=mask, frame_range=frame_range,
                 stage_contact=stage_contact, hold_flight=hold_flight, fit=fit,
                 background=background, _calibrations={}))
    names = scene.check_params(params if params else scene.default_params)
    iters = scene.iters if iters is None else iters
    lr = scene.lr if lr is None else lr
    if optimizer is None:
        optimizer = _default_optimizer(scene, fit, loss, params)
    if isinstance(iters, bool) or int(iters) != iters or iters < 1:
        raise ValueError(f"iters must be a positive integer; got {iters!r}")
    if not (isinstance(lr, (int, float)) and math.isfinite(lr) and lr > 0):
        raise ValueError(f"lr must be a positive number; got {lr!r}")
    if supervision not in ("video", "3d"):
        raise ValueError(f"supervision must be 'video' or '3d'; got {supervision!r}")
    if optimizer not in KINDS:
        raise ValueError(f"optimizer must be one of {KINDS}; got {optimizer!r}")
    if isinstance(stage_contact, bool) or int(stage_contact) != stage_contact or stage_contact < 0:
        raise ValueError(f"stage_contact must be an integer >= 0 (iterations); got "
                         f"{stage_contact!r}")
    if hold_flight and not stage_contact:
        raise ValueError("hold_flight holds the pre-contact stage's estimates: give "
                         "stage_contact (its iterations) too")
    kinds = parse_fit(fit)
    if "bounce" in kinds and optimizer.endswith("lm"):
        raise ValueError(f"fit 'bounce' learns {unknowns(['bounce'])} values per moving "
                         f"body, too many for optimizer {optimizer!r} (Levenberg-Marquardt: "
                         "a Jacobian column each); use 'lbfgs', or take it out (-bounce)")
    if warmup is None:
        # (the pre-contact stage's iterations come first)
        warmup = (fit_warmup(parse_warmup(scene.warmup), iters - int(stage_contact))
                  if kinds else scene.warmup)
    warmup = parse_warmup(warmup)
    coarse_iters = scene.coarse_iters if coarse_iters is None else coarse_iters
    Stages(scene.frames, warmup, coarse_iters, frame_stride, frame_range)  # checks
    blur = 0.0 if supervision == "3d" else check_blur(scene.blur if blur is None else blur)
    chroma = check_chroma(chroma)
    if chroma != "full" and supervision == "3d":
        raise ValueError(f"chroma {chroma!r} compares video frames; 3D supervision has none")
    if optimizer in ("lm", "lbfgs+lm") and loss not in LM_LOSSES:
        raise ValueError(f"optimizer {optimizer!r} fits residuals ({' or '.join(LM_LOSSES)}); "
                         f"it cannot use loss {loss if isinstance(loss, str) else 'custom'!r}")
    if not (isinstance(tol, (int, float)) and math.isfinite(tol) and tol >= 0):
        raise ValueError(f"tol must be a number >= 0; got {tol!r}")
    loss_fn = get_loss(loss)
    if background is not None and "background" not in kinds:
        raise ValueError("background= is the fixed image of fit 'background'; add "
                         "'background' to fit")
    if kinds and supervision == "3d":
        raise ValueError(f"fit {','.join(kinds)}: nuisance parameters of the image; 3D "
                         "supervision has none")
    scene.ensure_built()
    target = check_target(scene, target_frames, supervision)
    target = _with_mask(scene, target, mask, loss_fn, loss, supervision)
    init = _initial_values(scene, names, init, seed)
    truth = _truth(scene, names, true)
    contact_note, hold = None, None
    if stage_contact:
        warmup, contact_note = _contact_stage(scene, names, init, stage_contact, warmup,
                                              check_frame_range(frame_range, scene.frames))
        if hold_flight and contact_note is None:
            hold = (int(stage_contact), [n for n in names if not n.startswith("contact_")])
    stages = Stages(scene.frames, warmup, coarse_iters, frame_stride, frame_range)
    nuisance = Nuisance(scene, kinds, target, background,
                        robust_eps=ROBUST_EPS if loss == "robust" else None) if kinds else None
    clash = sorted(set(nuisance.params if nuisance else ()) & set(names))
    if clash:
        raise ValueError(f"parameter names {clash} are both physical and nuisance ones")
    job = Fit(scene, target, names, init, optimizer, lr, iters, stages, blur, supervision,
              loss_fn, tol, nuisance, hold, chroma, coarse_lm=loss == "mse")

    calibration = job.calibrate(cache=_calibrations) if not (resume and out_dir is not None
                                          and (Path(out_dir) / "state.pt").exists()) else None
    if calibration is not None:
        job.stage_log.append(calibration)

    def after_step(it, record):
        if callback is not None:
            callback(it, record["loss"], job.evaluated, job.rendered)

    run = run_loop.run(job, iters, out_dir=out_dir, resume=resume, save_every=save_every,
                       progress=progress, callback=after_step, desc=f"estimate {scene.name}")
    result = EstimationResult(
        params={n: v.detach().cpu().numpy() for n, v in job.values().items()},
        init={n: np.asarray(job.init[n]) for n in names},
        true=truth,
        history=run.history,
        iterations=run.iterations,
        seconds=run.seconds,
        status=run.status,
        message=run.message,
        settings=dict(params=names, iters=iters, lr=lr, optimizer=optimizer,
                      frame_stride=frame_stride, loss=loss if isinstance(loss, str)
                      else getattr(loss, "__name__", "custom"), supervision=supervision,
                      seed=seed, warmup=stages.horizons, coarse_iters=stages.coarse_iters,
                      blur=blur, chroma=chroma, tol=tol, frame_range=list(stages.range),
                      stage_contact=stage_contact, hold_flight=bool(hold_flight),
                      fit=list(kinds)),
    )
    if nuisance is not None:
        result.nuisance = nuisance.report()
        result.background = nuisance.background
        result.render = nuisance.render
    # (a run that hold_flight ended after the pre-contact stage is complete)
    ended = hold is not None and not set(job.free()) & set(names)
    result.warnings = [] if ended else finished_run_warnings(result, stages)
    result.warnings += camera_limits(result.nuisance if nuisance is not None else None,
                                     nuisance.bounds if nuisance is not None else None)
    if contact_note:
        result.warnings.append(contact_note)
    result.stages = job.stage_log + [dict(stages.stage_of(max(run.iterations - 1, 0)),
                                          end_iteration=run.iterations,
                                          params=plain_values(result.params))]
    flight = next((s for s in job.stage_log if stage_contact and contact_note is None
                   and s["end_iteration"] == stages.ends[0]), None)
    # (only when the run went on to frames with contact)
    if flight is not None and result.stages[-1]["last_frame"] > flight["last_frame"]:
        result.warnings += contact_pull(flight, result.stages[-1])
    if uncertainty:
        with runtime.job_torch_threads():  # simulations and renders, like the iterations
            result.uncertainty = local_uncertainty(job)
        result.warnings += result.uncertainty.get("warnings", [])
    # one more evaluation, after the uncertainty: benchmarks/profile_estimation.py counts
    # the iterations' share of the time up to the uncertainty
    result.loss = job.final_loss()
    if run.stopped:
        raise EstimationError(run.message, result)
    return result


def _default_optimizer(scene, fit, loss, params) -> str:
    """The optimiser when none is given: the scene's, except that Levenberg-Marquardt
    fits the MSE of at most :data:`~gradsim_taichi.optimisers.LM_MAX_UNKNOWNS` unknowns:
    ``"lm"`` when ``fit`` learns camera or appearance parameters and they fit, and
    ``"lbfgs"`` for a scene's ``"lbfgs+lm"`` when they do not (another loss, more
    unknowns). A scene's own ``"lm"`` (rigid-contact: contact parameters that trade
    against each other) also fits the robust loss, through its residuals; with more
    unknowns or another loss it becomes ``"lbfgs"``."""
    kinds = parse_fit(fit)
    names = params if params else scene.default_params
    size = sum(int(np.prod(np.shape(scene.params[n].true))) for n in names
               if n in scene.params)
    size += unknowns(kinds)
    lm_fits = loss == "mse" and size <= LM_MAX_UNKNOWNS
    if lm_fits and {"camera", "appearance"} & set(kinds):
        # camera and light trade against each other and against the physics along
        # narrow valleys: L-BFGS wanders along them, Levenberg-Marquardt does not (3%
        # camera offset, rigid-mass box: L-BFGS 8e-3, LM 6e-13)
        return "lm"
    if scene.optimizer == "lm":
        return "lm" if loss in LM_LOSSES and size <= LM_MAX_UNKNOWNS else "lbfgs"
    # (with the robust loss, "lbfgs+lm" scenes keep L-BFGS throughout: what was measured
    # on path-traced clips; optimizer="lbfgs+lm" asks for the robust LM polish)
    return "lbfgs" if scene.optimizer == "lbfgs+lm" and not lm_fits else scene.optimizer


def _with_mask(scene, target, mask, loss_fn, loss, supervision):
    """The target with the mask as channel 3, for the mask losses."""
    name = loss if isinstance(loss, str) else getattr(loss, "__name__", "custom")
    if not needs_mask(loss_fn):
        if mask is not None:
            raise ValueError(f"a target mask is compared only by the mask losses "
                             f"('silhouette', 'masked'); loss {name!r} does not use it")
        return target
    if supervision == "3d":
        raise ValueError(f"loss {name!r} compares images; 3D supervision has none")
    if mask is None:
        raise ValueError(f"loss {name!r} compares the objects' coverage with a target "
                         "mask: give one (mask=...; the CLI's --mask or "
                         "--background-plate)")
    return torch.cat([target[..., :3], check_mask(scene, mask)[..., None]], -1)


def _contact_stage(scene, names, init, iters, warmup, frame_range):
    """The horizons with the pre-contact stage first, and a note when there is none."""
    ground = scene.sim.model.ground
    if ground is None:
        return warmup, "stage_contact: the scene has no ground; no pre-contact stage"
    contacts = []
    for k, values in enumerate(_guess_corners(scene, names, init)):
        with torch.no_grad():
            out = scene.simulate({n: torch.as_tensor(v, dtype=runtime.torch_dtype(),
                                                     device=runtime.torch_device())
                                  for n, v in values.items()})
            positions = scene.tracked_positions(out)
        if not torch.isfinite(positions).all():
            if k == 0:
                return warmup, "stage_contact: the initial guess's simulation is not finite"
            continue  # a range end too stiff for the substeps: not plausible
        contacts.append(first_contact(positions, ground.height + ground.radius))
    if contacts[0] is None:
        return warmup, ("stage_contact: nothing touches the ground at the initial guess; "
                        "no pre-contact stage")
    contact = min(c for c in contacts if c is not None)
    last = contact - 1
    if last < frame_range[0] + 1:
        return warmup, (f"stage_contact: the first contact (frame {contact}, the earliest "
                        f"over the guesses) leaves too few frames before it; no pre-contact stage")
    return [(int(iters), last)] + list(warmup), None


def _guess_corners(scene, names, init) -> list:
    """The initial guess, then for each scalar unknown the guess with it at either end of
    its range (where the earliest touch of a plausible trajectory is looked for)."""
    out = [dict(init)]
    for n in names:
        spec = scene.params[n]
        if np.ndim(init[n]) == 0 and getattr(spec, "draw_pattern", None) is None:
            out += [{**init, n: np.float64(v)} for v in (spec.low, spec.high)]
    return out


def _estimate_restarts(scene, target_frames, restarts, seed, out_dir, callback, kw):
    """``estimate`` from ``restarts`` seeds; the lowest final loss, every run recorded."""
    runs = []
    for k in range(restarts):
        sub = None if out_dir is None else Path(out_dir) / f"restart-{k}"
        try:
            r = estimate(scene, target_frames, seed=seed + k, out_dir=sub,
                         callback=callback, **kw)
        except EstimationError as e:
            r = e.result
        runs.append(r)
    ok = [r for r in runs if r.status != "stopped" and r.loss is not None
          and math.isfinite(r.loss)]
    best = min(ok or runs, key=lambda r: r.loss if r in ok else math.inf)
    best.restarts = [dict(seed=seed + k, params=plain_values(r.params), loss=r.loss,
                          status=r.status, iterations=r.iterations)
                     for k, r in enumerate(runs)]
    best.spread = {n: relative_spread([r.params[n] for r in ok]) for n in best.params} \
        if len(ok) > 1 else {}
    best.seconds = sum(r.seconds for r in runs)
    best.settings = {**best.settings, "seed": seed, "restarts": restarts,
                     "best_seed": seed + runs.index(best)}
    apart = {n: v for n, v in best.spread.items() if v > SPREAD_TOL}
    if apart:
        what = "; ".join(
            f"{n}: relative spread {v:.2e}, estimates "
            + ", ".join(short(r.params[n]) for r in ok) for n, v in apart.items())
        best.warnings.append(
            f"the {restarts} restarts disagree beyond {SPREAD_TOL:g} ({what}): the loss has "
            f"more than one minimum within the guesses' range, or the runs did not "
            f"converge; the lowest loss (seed {seed + runs.index(best)}) is reported but "
            "may be the wrong minimum")
    if len(ok) < len(runs):
        best.warnings.append(f"{len(runs) - len(ok)} of {restarts} restarts stopped early "
                             "(NaN/inf) and were not compared")
    if not ok:
        raise EstimationError(best.message, best)
    return best


def _truth(scene, names, true) -> dict:
    """The truth to report errors against (see ``estimate(true=...)``)."""
    if true is None:
        return {n: np.asarray(scene.params[n].true) for n in names}
    out = {}
    for n, value in true.items():
        if n not in names:
            raise KeyError(f"true: {n!r} is not estimated here; estimated: {', '.join(names)}")
        value = np.asarray(value, dtype=np.float64)
        if not np.all(np.isfinite(value)):
            raise ValueError(f"true: the value of {n!r} is not finite: {value}")
        out[n] = value
    return out


def _initial_values(scene, names, init, seed) -> dict:
    """The given initial values, the missing ones drawn from the scene's ranges."""
    rng = np.random.default_rng(seed)
    init = dict(init or {})
    for n in names:
        if n not in init:
            init[n] = scene.params[n].draw(rng)
        init[n] = np.asarray(init[n], dtype=np.float64)
        if scene.params[n].positive and np.any(init[n] <= 0):
            raise ValueError(f"initial value of '{n}' must be > 0; got {init[n]}")
    return init

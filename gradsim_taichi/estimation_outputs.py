"""What one estimation leaves in its folder, and one estimation as the ``estimate``
command (and each ``estimate-batch`` item) runs it: :func:`write_report`
(``report.json``), :func:`write_outputs` (the report, ``loss.png``, the compare videos,
``background.png``), :func:`render_for` (the render mode of a run) and
:func:`estimate_into`."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from gradsim_taichi import runtime
from gradsim_taichi.errors import EstimationError
from gradsim_taichi.estimation import EstimationResult, estimate, render_target
from gradsim_taichi.objectives import VIDEO_SUFFIXES
from gradsim_taichi.reports import jsonable, plot_history, save_compare_videos, save_image
from gradsim_taichi.reports import write_report as _write_report
from gradsim_taichi.scenes.base import Scene


def write_report(path, scene: Scene, result: EstimationResult, settings: dict | None = None):
    """``report.json``: per parameter init/estimate (true/abs_err/rel_err where the truth
    is known), status, message and warnings, the loss history, iterations, seconds, the
    runtime, and every setting (the run's own, updated by ``settings``)."""
    errors = result.errors()
    per_param = {}
    spread = (result.uncertainty or {}).get("params", {})
    for n, est in result.params.items():
        entry = {"init": jsonable(result.init[n]), "estimate": jsonable(est), **spread.get(n, {})}
        if n in result.spread:  # the restarts' estimates, next to the local interval
            runs = np.array([np.asarray(r["params"][n], dtype=np.float64)
                             for r in result.restarts if n in r["params"]])
            entry["restarts_spread"] = result.spread[n]
            entry["restarts_range"] = [jsonable(runs.min(axis=0)), jsonable(runs.max(axis=0))]
        if n in result.true:
            entry["true"] = jsonable(result.true[n])
            entry.update(errors[n])
        per_param[n] = entry
    body = {"scene": scene.name, "status": result.status, "message": result.message,
            "warnings": result.warnings, "params": per_param,
            "uncertainty": {k: v for k, v in (result.uncertainty or {}).items()
                            if k != "params"},
            "loss": result.loss, "stages": result.stages,
            **({"restarts": result.restarts, "spread": result.spread} if result.restarts
               else {}),
            **({"nuisance": result.nuisance} if result.nuisance else {}),
            "loss_history": [h["loss"] for h in result.history], "history": result.history,
            "iterations": result.iterations, "seconds": result.seconds}
    return _write_report(path, body, {**result.settings, **(settings or {})})


def write_outputs(out_dir, scene: Scene, result: EstimationResult, target,
                  settings: dict | None = None) -> dict:
    """Everything an estimation leaves in ``out_dir``: ``report.json`` (see
    :func:`write_report`), ``loss.png`` (the loss and every parameter per iteration, the
    truth dashed) and ``compare.mp4`` / ``compare.gif`` at the scene's frame rate (target |
    estimate | difference | initial guess, labelled; pixels also for a 3D-supervised
    run); with a fitted background, ``background.png``. Returns ``{kind: path}``."""
    report = write_report(Path(out_dir) / "report.json", scene, result, settings)
    extra = {}
    if result.background is not None:
        extra["background"] = save_image(Path(out_dir) / "background.png", result.background)
    plot = plot_history(Path(out_dir) / "loss.png", result.history, result.true,
                        title=scene.name)
    dtype = runtime.torch_dtype()
    with torch.no_grad():
        video, initial = (render(scene.simulate(
            {n: torch.as_tensor(v, dtype=dtype, device=runtime.torch_device())
             for n, v in values.items()}))
            for values, render in ((result.params, result.render or scene.render),
                                   (result.init, scene.render)))
        pixels = target if result.settings.get("supervision") != "3d" else render_target(scene)
    mp4, gif = save_compare_videos(out_dir, pixels, video, fps=scene.fps, initial=initial)
    return {"report": report, "plot": plot, "video": mp4, "gif": gif, **extra}


def load_target(path, scene: Scene) -> torch.Tensor:
    """A user's clip for ``scene`` (:func:`gradsim_taichi.render.load_video`), checked
    against the scene's frame rate where the container declares one (a ValueError naming
    both), an odd-sized scene's MP4 cropped back from the even size H.264 pads it to."""
    from gradsim_taichi.render.video import load_video, video_fps

    video = load_video(path)
    fps = video_fps(path)
    if fps is not None and abs(fps - scene.fps) > 0.01 * scene.fps:
        raise ValueError(f"{path} plays at {fps:g} frames per second; the scene's frames "
                         f"are 1/{scene.fps:g} s apart: give the scene file fps = {fps:g}, "
                         f"or re-encode the clip at {scene.fps:g} fps")
    H, W = scene.height, scene.width
    if fps is not None and (H % 2 or W % 2) and tuple(video.shape[1:3]) == (H + H % 2,
                                                                            W + W % 2):
        # (the writers repeat the last row and column: the scene's pixels are the rest)
        video = video[:, :H, :W]
    return video


def render_for(own_video: bool, render: str | None = None) -> str | None:
    """The render mode of an estimation: ``render`` if given, ``"antialias"`` for a video
    the engine did not make (it looks like an ordinary renderer's or a camera's), else
    None (the scene's own: its targets are its own renders)."""
    return render or ("antialias" if own_video else None)


def chroma_for(target_path, chroma: str = "auto") -> str:
    """The colour the loss compares (``estimate(chroma=...)``): ``chroma`` if given,
    else ``"420"`` for a target read from a video container (:data:`VIDEO_SUFFIXES`:
    H.264 / H.265 clips keep colour per 2 x 2 block) and ``"full"`` otherwise (image
    folders, GIFs, a preset's own render)."""
    if chroma != "auto":
        return chroma
    suffix = Path(str(target_path)).suffix.lower() if target_path is not None else ""
    return "420" if suffix in VIDEO_SUFFIXES else "full"


# initial guesses of an estimation from a video the engine did not make: its loss can
# have several minima (a path-traced cone had two), which only disagreeing restarts show
OWN_VIDEO_RESTARTS = 3


# the fewest iterations an estimation from a video the engine did not make gets by
# default: its nuisance parameters and a foreign image need more than a preset's own
# target (a path-traced L-shape's mass: 5.9e-4 after rigid-mass's 12, 3.8e-4 after 30)
OWN_VIDEO_MIN_ITERS = 30
# ... and when it learns the camera, the camera's blur and response (fit camera, blur or
# response): L-BFGS converged in 32-62 iterations with a moved camera, 26-80 with the
# blur and response (path-traced box 4 kg 6.5e-4 after 30, 2.2e-4 after 80; 6 kg
# cylinder 2.9e-3 and 2.1e-3). A run stops early once converged, so the cap costs
# nothing then
LEARNED_VIEW_MIN_ITERS = 80
# the kinds of fit that learn how the scene is seen (see LEARNED_VIEW_MIN_ITERS)
VIEW_KINDS = {"camera", "appearance", "blur", "response"}
# ... and when it learns the lights too (fit appearance): 57-160 iterations with the
# defaults (a path-traced cone under lights brighter than the scene's: 1.36e-3 after
# 80, 8.5e-4 converged after 119)
APPEARANCE_MIN_ITERS = 160


def iters_for(own_video: bool, scene_iters: int, iters: int | None = None,
              fit=None) -> int:
    """The iterations of an estimation: ``iters`` if given, at least
    :data:`OWN_VIDEO_MIN_ITERS` for a video the engine did not make
    (:data:`LEARNED_VIEW_MIN_ITERS` when ``fit`` learns how the scene is seen,
    :data:`VIEW_KINDS`; :data:`APPEARANCE_MIN_ITERS` when it learns the lights), else
    the scene's."""
    if iters is not None:
        return iters
    if not own_video:
        return scene_iters
    from gradsim_taichi.nuisance import parse_fit

    kinds = set(parse_fit(fit))
    least = (APPEARANCE_MIN_ITERS if "appearance" in kinds else
             LEARNED_VIEW_MIN_ITERS if VIEW_KINDS & kinds else OWN_VIDEO_MIN_ITERS)
    return max(scene_iters, least)


# what an estimation from a video the engine did not make learns and compares by
# default (without a mask): the backdrop, the bodies' shadow, the camera's blur and its
# response, under the robust loss. Path-traced clips of rigid-mass
# (docs/own_video_measurements.md): the mass 1.7e-2 off (box) with the plain model and
# the MSE, 2e-4-9e-4 with the backdrop and the shadow; our own render blurred by 1 px
# 4.7e-3 (box) without the blur, 6e-6 with it (a sharp clip's calibration sets it to 0); the
# blur only with the response: on an sRGB clip the blur alone ran to its bound and
# lost the mass (1.0), the response took it to 8e-5 (1.2e-3 with neither); and the
# lights, which another renderer's or a room's are not the scene's (a path-traced cone
# and L-shape under a sun 1.4x and an ambient 0.7x the scene's: 1.27e-3 and 1.18e-3
# without, 8.5e-4 and 4.7e-4 with; 8 of 10 clips under the scene's own lights better)
OWN_VIDEO_FIT = ("background", "appearance", "shadow", "bounce", "blur", "response")
OWN_VIDEO_LOSS = "robust"


def fit_for(own_video: bool, fit, scene: Scene, masked: bool) -> tuple:
    """The nuisance kinds of an estimation: the default with ``fit``'s changes (names
    add to it, ``-kind`` takes one out, ``"none"`` drops it; see
    :func:`~gradsim_taichi.nuisance.parse_fit`). The default: for a video the engine did
    not make and no mask :data:`OWN_VIDEO_FIT` (the appearance where the built
    ``scene`` is lit by an ambient and a directional light, the shadow where it has a
    directional light and a ground to cast it on), else none.

    Names add rather than replace because the default draws what another renderer's or
    a camera's image has and ours lacks: ``--fit camera`` alone on path-traced clips
    seen from an eye moved by 3% left the mass 7.2e-3 (cylinder) and 1.5e-3 (L-shape)
    off, the default with the camera 5.8e-4 and 4.6e-4."""
    from gradsim_taichi.nuisance import casts_shadows, has_ground, lit_by_ambient_and_sun, parse_fit

    default = ()
    if own_video and not masked:
        # (bounce: hundreds of values, where a gradient optimiser runs anyway; a scene
        # fitted by Levenberg-Marquardt, a Jacobian column per value, goes without it)
        drawable = {"shadow": casts_shadows(scene),
                    "appearance": lit_by_ambient_and_sun(scene),
                    "bounce": has_ground(scene) and scene.optimizer != "lm"}
        default = tuple(k for k in OWN_VIDEO_FIT if drawable.get(k, True))
    return parse_fit(fit, default)


def loss_for(own_video: bool, loss: str | None, masked: bool) -> str:
    """The loss of an estimation: ``loss`` if given, ``"masked"`` with a mask,
    :data:`OWN_VIDEO_LOSS` for a video the engine did not make, else the MSE."""
    return loss or ("masked" if masked else OWN_VIDEO_LOSS if own_video else "mse")


def restarts_for(own_video: bool, restarts: int | None = None) -> int:
    """The restarts of an estimation: ``restarts`` if given, :data:`OWN_VIDEO_RESTARTS`
    for a video the engine did not make, else 1."""
    return restarts if restarts is not None else (OWN_VIDEO_RESTARTS if own_video else 1)


def estimate_into(out_dir, scene: Scene, target=None, settings: dict | None = None,
                  supervision: str = "video", render: str | None = None, **options):
    """One estimation as the ``estimate`` command runs it: the target (``None``: rendered
    from the scene's truth, :func:`render_target`), :func:`estimate` with its resume
    state in ``out_dir`` and ``options`` (its keyword arguments), then
    :func:`write_outputs` there, also for a run that stopped early (NaN/inf) or diverged.

    ``render``: the model's image (``Scene.render_mode``; see :func:`render_for`), None
    for the scene's own. Recorded in the settings as ``render``.

    Returns ``(result, paths, stop)``: ``stop`` is the :class:`EstimationError` of a run
    that stopped early, else None. A ValueError for bad options or a bad target."""
    if render is not None:
        scene.render_mode = render
    settings = {**(settings or {}), "render": scene.render_mode}
    scene.ensure_built()
    if target is None:
        target = render_target(scene, supervision)
    else:
        target = torch.as_tensor(target).to(torch.float64)
    stop = None
    try:
        result = estimate(scene, target, supervision=supervision, out_dir=out_dir, **options)
    except EstimationError as e:
        result, stop = e.result, e
    return result, write_outputs(out_dir, scene, result, target, settings), stop

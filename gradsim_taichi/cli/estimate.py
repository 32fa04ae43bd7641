"""``gradsim-taichi estimate SCENE``: the main job, estimation from video, headless.

Writes ``report.json``, ``loss.png``, ``compare.mp4`` and ``compare.gif`` in ``--out``,
plus ``state.pt`` every few iterations so that ``--resume`` continues an interrupted run.
"""

import math

from gradsim_taichi.cli.common import (
    CLIError,
    add_run_args,
    add_scene_args,
    check_run_args,
    init_runtime,
    make_preset,
    output_dir,
)


def add_estimate_parser(sub, help_line: str) -> None:
    from gradsim_taichi.objectives import KEY_THRESHOLD, LOSSES
    from gradsim_taichi.optimisers import KINDS
    from gradsim_taichi.scenes import SCENES

    p = sub.add_parser(
        "estimate",
        help=help_line,
        description="Estimate physical parameters from video. Scenes: "
                    + "; ".join(f"{k}: {v.summary}" for k, v in SCENES.items()),
    )
    p.add_argument("scene", nargs="?", default=None,
                   help=f"one of: {', '.join(SCENES)} (or --scene FILE)")
    p.add_argument("--scene", dest="scene_file", metavar="FILE", default=None,
                   help="a TOML scene file describing your own clip instead of a preset "
                        "(`gradsim-taichi scene show rigid-mass` prints one to start from)")
    p.add_argument("--params", default=None,
                   help="comma-separated parameters to estimate (default: the scene's)")
    p.add_argument("--target", default=None,
                   help="target video (MP4, GIF or a folder of PNGs) with the preset's "
                        "camera, stage, shape and push; default: rendered from the "
                        "preset's ground truth")
    p.add_argument("--true", action="append", default=[], metavar="NAME=VALUE",
                   help="the known truth of a parameter, to report errors against "
                        "(repeatable); with --target only these and a scene file's own "
                        "`true` values are")
    p.add_argument("--optimizer", choices=KINDS, default=None)
    p.add_argument("--frame-stride", type=int, default=1)
    p.add_argument("--blur", type=float, default=None,
                   help="Gaussian blur (pixels) of both videos before the loss; widens the "
                        "basin, keeps the minimum (default: the scene's). A clip blurred by "
                        "its camera: --fit blur learns that blur for the model's image")
    p.add_argument("--chroma", choices=["auto", "420", "full"], default="auto",
                   help="colour as the loss compares it: 420 (luma per pixel, colour per "
                        "2 x 2 block, as an H.264/H.265 clip stores it; the model's as "
                        "ffmpeg's encoder filters it), full (RGB); auto: 420 for a --target "
                        "video file (.mp4, .mov, ...), else full")
    p.add_argument("--supervision", choices=["video", "3d"], default="video")
    p.add_argument("--loss", choices=list(LOSSES), default=None,
                   help="mse (the default for a preset's own target); robust: Charbonnier, "
                        "scale 0.01 of the pixel range (the default with --target); "
                        "silhouette: 1 - soft IoU of the body's coverage and the target "
                        "mask; masked: RGB inside the mask, plus the silhouette times "
                        "--silhouette-weight (default with --mask or --background-plate)")
    p.add_argument("--silhouette-weight", type=float, default=None, metavar="W",
                   help="weight of the silhouette term in --loss masked (default 0: a "
                        "binary mask's outline biases the estimate by ~1e-4)")
    p.add_argument("--mask", default=None, metavar="VIDEO",
                   help="target mask video, as many frames as the target (a pixel with any "
                        "channel > 0.5 is the object)")
    p.add_argument("--background-plate", default=None, metavar="IMAGE",
                   help="an image of the stage without the objects, same camera: the mask "
                        "is where the target differs from it by more than --key-threshold")
    p.add_argument("--key-threshold", type=float, default=None,
                   help=f"difference keying threshold in [0, 1] pixel units (default "
                        f"{KEY_THRESHOLD})")
    p.add_argument("--ignore-shadows", action="store_true",
                   help="with --background-plate: pixels that are the plate darkened by one "
                        "factor in every channel are shadows, not the object")
    p.add_argument("--mask-erode", type=int, default=0, metavar="N",
                   help="shrink the target mask by N pixels: --loss masked then compares "
                        "only pure object colour (edge pixels mix in the backdrop and its "
                        "shadows)")
    p.add_argument("--frame-range", default=None, metavar="A:B",
                   help="fit only frames A..B (inclusive; frame 0 is the initial state; "
                        "the simulation still starts there)")
    p.add_argument("--stage-contact", type=int, nargs="?", const=-1, default=0, metavar="N",
                   help="a first stage of N iterations (default: a third of --iters) on the "
                        "frames before the first ground contact at the initial guess")
    p.add_argument("--hold-flight", action="store_true",
                   help="with --stage-contact: keep the pre-contact stage's estimates of "
                        "everything but the contact parameters; the frames with contact "
                        "fit only those (for a video whose contact the model may not "
                        "match: another engine's, a real floor)")
    p.add_argument("--restarts", type=int, default=None, metavar="K",
                   help="K estimations from guesses drawn with seeds SEED..SEED+K-1: the "
                        "lowest loss is reported, all are recorded, and a warning says "
                        "when they disagree (default: 3 with --target, else 1)")
    p.add_argument("--fit", default=None, metavar="KINDS",
                   help="nuisance parameters learned with the physical ones, added to the "
                        "default (below), comma-separated: "
                        "camera (a small pose correction), background (a static image behind "
                        "the objects instead of the stage: solved per pixel, or "
                        "--background-plate), appearance (object albedo, ambient and "
                        "directional light), shadow (the objects' shadow on the ground along "
                        "the light, and their ambient occlusion of the ground: the two "
                        "strengths), bounce (a learned map of what each moving body "
                        "does to the ground's light around it beyond that: its bounce "
                        "light, the crevice along its contact), blur (the camera's: a "
                        "Gaussian's width in pixels, 0 "
                        "for a sharp clip), response (the camera's: (1 + c) x^(1/gamma) - c, "
                        "gamma 1 and c 0 linear, about 2.4 and 0.055 for sRGB files); "
                        "-KIND takes one out of the default, none drops it (none: only the "
                        "physical ones; none,camera: the camera alone). "
                        "Default with --target and no mask: "
                        "background,appearance,shadow,bounce,blur,response (appearance "
                        "where the scene has an ambient and a directional light, shadow "
                        "where it has a directional light and a ground, bounce where it "
                        "has a ground and is not fitted by Levenberg-Marquardt), else none")
    p.add_argument("--render", choices=["soft", "antialias"], default=None,
                   help="the model's image: antialias (the nearest surface wins, edges "
                        "anti-aliased, like an ordinary renderer or a camera; the default "
                        "with --target) or soft (SoftRas blending; the default for a preset's "
                        "own target)")
    p.add_argument("--damping", default=None, metavar="D",
                   help="every rigid body's velocity damping, as the scene file's keys "
                        "linear_damping, linear_drag, angular_damping, angular_drag: "
                        "pybullet (PyBullet's default, 0.04 in all four: give it for a "
                        "clip PyBullet made), one number for all four, or four "
                        "comma-separated (default: the scene's; the presets' 0)")
    add_scene_args(p)
    add_run_args(p, "results/SCENE")
    p.set_defaults(func=cmd_estimate)


def cmd_estimate(args) -> int:
    from gradsim_taichi.estimation import render_target, render_target_mask
    from gradsim_taichi.estimation_outputs import (
        chroma_for,
        estimate_into,
        fit_for,
        iters_for,
        loss_for,
        render_for,
        restarts_for,
    )

    check_run_args(args)
    frame_range = _parse_frame_range(args.frame_range)
    if args.restarts is not None and args.restarts < 1:
        raise CLIError(f"--restarts must be a positive integer; got {args.restarts}")
    if args.stage_contact < -1:  # (-1: the flag without a number)
        raise CLIError(f"--stage-contact must be a positive number of iterations; got "
                       f"{args.stage_contact}")
    if args.mask and args.background_plate:
        raise CLIError("give --mask or --background-plate, not both")
    if (args.key_threshold is not None or args.ignore_shadows) and not args.background_plate:
        raise CLIError("--key-threshold and --ignore-shadows go with --background-plate")
    from gradsim_taichi.nuisance import parse_fit

    try:
        # (the names given: they join the default once the scene is built)
        named = parse_fit(args.fit) if args.fit is not None else None  # None: the default
    except ValueError as e:
        raise CLIError(f"--fit: {e}") from None
    # with --fit background a plate is the background itself, not a source of masks
    plate_as_background = "background" in (named or ()) and args.background_plate is not None
    keyed = args.background_plate is not None and not plate_as_background
    masked = bool(args.mask or keyed)
    loss = loss_for(args.target is not None, args.loss, masked)
    loss_fn = loss
    if args.silhouette_weight is not None:
        from gradsim_taichi.objectives import masked_loss

        if loss != "masked":
            raise CLIError("--silhouette-weight goes with --loss masked")
        try:
            loss_fn = masked_loss(args.silhouette_weight)
        except ValueError as e:
            raise CLIError(f"--silhouette-weight: {e}") from None
    if args.frame_stride < 1:
        raise CLIError(f"--frame-stride must be a positive integer; got {args.frame_stride}")
    if args.blur is not None and not args.blur >= 0:
        raise CLIError(f"--blur must be >= 0 pixels; got {args.blur}")
    names = tuple(n.strip() for n in (args.params or "").split(",") if n.strip())
    if (args.scene is None) == (args.scene_file is None):
        raise CLIError("give a preset SCENE or --scene FILE (exactly one)")
    if args.scene_file is not None:
        from gradsim_taichi.cli.scene import load_scene_arg

        scene = load_scene_arg(args, names, need_truth=args.target is None)
        args.scene = scene.name
    else:
        scene = make_preset(args, names)
    if args.damping is not None:
        from gradsim_taichi.scenes.scene_file_schema import parse_damping, with_damping

        try:
            scene.spec = with_damping(scene.spec, parse_damping(args.damping))
        except ValueError as e:
            raise CLIError(f"--damping: {e}") from None
    names = names or scene.default_params
    truth = _parse_truth(args.true, names)
    if args.scene_file is not None and args.target is not None:  # the file's true values
        from_file = {n: float(scene.params[n].true) for n in names
                     if scene.truth_given[n] and n not in truth}
        if from_file and not args.quiet:
            print("gradsim-taichi: errors are reported against the scene file's true "
                  f"values ({', '.join(f'{n} = {v:g}' for n, v in from_file.items())}); "
                  "delete `true` there if they are not this clip's")
        truth = {**from_file, **truth}
    if args.target is None and truth:
        raise CLIError("--true goes with --target: without one the target is rendered from "
                       "the preset's own ground truth")
    target_video = None
    if args.target is not None:
        if args.supervision == "3d":
            raise CLIError("--target is a video; 3D supervision uses the scene's ground truth")
        from gradsim_taichi.estimation_outputs import load_target

        try:
            target_video = load_target(args.target, scene)
        except (FileNotFoundError, ValueError) as e:
            raise CLIError(str(e)) from None
    if named and args.supervision == "3d":
        raise CLIError("--fit learns image nuisances; 3D supervision has no image")
    mask_source = _load_mask_source(args)
    out = output_dir(args.out or f"results/{args.scene}")
    if args.resume and not args.quiet and not any(out.rglob("state.pt")):
        print(f"gradsim-taichi: --resume: no saved state in {out}; starting from the beginning")
    from gradsim_taichi.run_loop import locked

    with locked(out):  # one run per output folder, outputs included
        init_runtime(args)
        # (the estimation records its own settings; these are the scene's)
        settings = dict(scene=args.scene, target=args.target, true=truth,
                        frames=scene.frames, substeps=scene.substeps, fps=scene.fps,
                        width=scene.width, height=scene.height,
                        shape=getattr(scene, "shape", None), mask=args.mask,
                        background_plate=args.background_plate,
                        silhouette_weight=args.silhouette_weight,
                        mask_erode=args.mask_erode, ignore_shadows=args.ignore_shadows,
                        damping=args.damping)
        if args.scene_file is not None:
            settings["scene_file"] = args.scene_file
        try:
            scene.ensure_built()  # (a scene file's camera and stage checked)
        except ValueError as e:
            raise CLIError(str(e)) from None
        fit = fit_for(target_video is not None, args.fit, scene, masked)
        if target_video is not None and not args.quiet:
            if args.fit != ",".join(fit) or args.loss is None:
                print(f"gradsim-taichi: a video the engine did not make: --fit "
                      f"{','.join(fit) or 'none'} --loss {loss} (--fit none --loss mse: the "
                      "plain model)")
        mode = render_for(target_video is not None, args.render)
        if mode is not None:
            scene.render_mode = mode
        target = (render_target(scene, args.supervision) if target_video is None
                  else target_video)
        iters = iters_for(target_video is not None, scene.iters, args.iters, fit)
        stage_contact = args.stage_contact
        if args.hold_flight and not stage_contact:
            raise CLIError("--hold-flight holds the pre-contact stage's estimates: give "
                           "--stage-contact too")
        if stage_contact == -1:
            stage_contact = max(2, iters // 3)
        try:
            mask = _target_mask(None if plate_as_background else mask_source, target, args,
                                loss, scene, render_target_mask)
            result, paths, stop = estimate_into(
                out, scene, target, settings, supervision=args.supervision, render=mode,
                params=names, iters=iters, lr=args.lr, optimizer=args.optimizer,
                frame_stride=args.frame_stride, blur=args.blur, seed=args.seed,
                chroma=chroma_for(args.target if args.supervision == "video" else None,
                                  args.chroma),
                resume=args.resume, progress=not args.quiet,
                true=truth if args.target is not None else None,
                loss=loss_fn, mask=mask, frame_range=frame_range,
                stage_contact=stage_contact, hold_flight=args.hold_flight,
                restarts=restarts_for(target_video is not None, args.restarts),
                fit=fit or None,
                background=mask_source[0, ..., :3] if plate_as_background else None)
        except ValueError as e:
            raise CLIError(str(e)) from None
        status = 0
        if stop is not None:
            print(f"gradsim-taichi: {stop}")
            status = 3
        for warning in result.warnings:
            print(f"gradsim-taichi: warning: {warning}")
        import numpy as np

        errors = result.errors()
        spread = (result.uncertainty or {}).get("params", {})
        for n, est in result.params.items():
            line = f"{n:>14}: estimate {_fmt(est)}"
            std = spread.get(n, {}).get("std")
            if std is not None and np.isnan(np.asarray(std, dtype=float)).all():
                line += " (undetermined by the video: see the warning)"
            elif spread.get(n, {}).get("ci95") is not None:
                low, high = spread[n]["ci95"]
                line += f" +- {_fmt(std)} (95%: {_fmt(low)}..{_fmt(high)})"
            line += f"  init {_fmt(result.init[n])}"
            if n in errors:
                line += f"  true {_fmt(result.true[n])}  rel.err {errors[n]['rel_err']:.2e}"
            print(line)
        for k, run in enumerate(result.restarts):
            values = ", ".join(f"{n} {_fmt(v)}" for n, v in run["params"].items())
            print(f"restart {k} (seed {run['seed']}): {values}  loss {run['loss']:.4g}"
                  f"  {run['status']}")
        print(f"report: {paths['report']}\nplot:   {paths['plot']}\n"
              f"video:  {paths['video']} (and {paths['gif'].name})")
        return status


def _parse_frame_range(text):
    if text is None:
        return None
    first, sep, last = text.partition(":")
    try:
        if not sep:
            raise ValueError
        return int(first), int(last)
    except ValueError:
        raise CLIError(f"--frame-range {text!r}: expected A:B, two frame numbers (e.g. "
                       "0:12)") from None


def _load_mask_source(args):
    """The mask video or the background plate as read from disk (or None)."""
    from gradsim_taichi.render import load_video

    path = args.mask or args.background_plate
    if path is None:
        return None
    flag = "--mask" if args.mask else "--background-plate"
    try:
        video = load_video(path)
    except (FileNotFoundError, ValueError) as e:
        raise CLIError(f"{flag}: {e}") from None
    if args.background_plate and video.shape[0] != 1:
        raise CLIError(f"--background-plate {path}: expected one image; it has "
                       f"{video.shape[0]} frames")
    return video


def _target_mask(source, target, args, loss, scene, render_target_mask):
    """The target mask for the mask losses, from --mask, --background-plate or (target
    rendered from the preset) the preset's own coverage; None for the other losses."""
    from gradsim_taichi.objectives import (
        KEY_THRESHOLD,
        LOSSES,
        erode_mask,
        mask_from_plate,
        mask_from_video,
        needs_mask,
    )

    if not needs_mask(LOSSES[loss]):
        if source is not None or args.mask_erode:
            raise CLIError(f"--loss {loss} does not use a mask; drop --mask / "
                           "--background-plate / --mask-erode or use --loss masked or "
                           "silhouette")
        return None
    if args.supervision == "3d":
        raise CLIError(f"--loss {loss} compares images; not with --supervision 3d")
    if source is None:
        if args.target is not None:
            raise CLIError(f"--loss {loss} needs the object's mask in the target: give "
                           "--mask VIDEO or --background-plate IMAGE")
        return erode_mask(render_target_mask(scene), args.mask_erode)
    if args.mask:
        if source.shape[0] != target.shape[0] or source.shape[1:3] != target.shape[1:3]:
            raise CLIError(f"--mask {args.mask}: {source.shape[0]} frames of "
                           f"{source.shape[2]}x{source.shape[1]} pixels; the target has "
                           f"{target.shape[0]} frames of {target.shape[2]}x{target.shape[1]}")
        mask, origin = mask_from_video(source), f"--mask {args.mask}"
    else:
        threshold = KEY_THRESHOLD if args.key_threshold is None else args.key_threshold
        mask = mask_from_plate(target[..., :3], source[0].to(target.dtype), threshold,
                               shadows=args.ignore_shadows)
        origin = f"the mask keyed from --background-plate {args.background_plate}"
    mask = erode_mask(mask, args.mask_erode)
    # (an empty mask leaves the loss nothing to compare: the guess would come back
    # unchanged, with a tight interval)
    if not bool((mask > 0).any()):
        raise CLIError(f"{origin} is empty{' after --mask-erode' if args.mask_erode else ''}"
                       ": no pixel of the object in any frame")
    return mask


def _parse_truth(items, names) -> dict:
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or name not in names:
            raise CLIError(f"--true {item!r}: expected NAME=VALUE with NAME one of the "
                           f"estimated parameters ({', '.join(names)})")
        try:
            out[name] = float(value)
        except ValueError:
            raise CLIError(f"--true {item!r}: {value!r} is not a number") from None
        if not math.isfinite(out[name]):
            raise CLIError(f"--true {item!r}: the value must be finite")
    return out


def _fmt(x) -> str:
    import numpy as np

    x = np.asarray(x, dtype=np.float64)
    return f"{float(x):.6g}" if x.ndim == 0 else f"mean {x.mean():.6g}"

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
                        "(repeatable); with --target nothing else is taken as true")
    p.add_argument("--optimizer", choices=KINDS, default=None)
    p.add_argument("--frame-stride", type=int, default=1)
    p.add_argument("--blur", type=float, default=None,
                   help="Gaussian blur (pixels) of both videos before the loss; widens the "
                        "basin, keeps the minimum (default: the scene's)")
    p.add_argument("--supervision", choices=["video", "3d"], default="video")
    add_scene_args(p)
    add_run_args(p, "results/SCENE")
    p.set_defaults(func=cmd_estimate)


def cmd_estimate(args) -> int:
    import torch

    from gradsim_taichi.errors import EstimationError
    from gradsim_taichi.estimation import estimate, render_target, write_outputs

    check_run_args(args)
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
    names = names or scene.default_params
    truth = _parse_truth(args.true, names)
    if args.scene_file is not None and args.target is not None:  # the file's true values
        truth = {**{n: float(scene.params[n].true) for n in names if scene.truth_given[n]},
                 **truth}
    if args.target is None and truth:
        raise CLIError("--true goes with --target: without one the target is rendered from "
                       "the preset's own ground truth")
    target_video = None
    if args.target is not None:
        if args.supervision == "3d":
            raise CLIError("--target is a video; 3D supervision uses the scene's ground truth")
        from gradsim_taichi.render import load_video

        try:
            target_video = load_video(args.target)
        except (FileNotFoundError, ValueError) as e:
            raise CLIError(str(e)) from None
    out = output_dir(args.out or f"results/{args.scene}")
    from gradsim_taichi.run_loop import locked

    with locked(out):  # one run per output folder, outputs included
        init_runtime(args)
        # (the estimation records its own settings; these are the scene's)
        settings = dict(scene=args.scene, scene_file=args.scene_file, target=args.target,
                        true=truth,
                        frames=scene.frames, substeps=scene.substeps, fps=scene.fps,
                        width=scene.width, height=scene.height)
        scene.ensure_built()
        if target_video is None:
            target = render_target(scene, args.supervision)
        else:
            target = target_video.to(torch.float64)
        status = 0
        try:
            result = estimate(scene, target, params=names, iters=args.iters, lr=args.lr,
                              optimizer=args.optimizer, frame_stride=args.frame_stride,
                              blur=args.blur,
                              supervision=args.supervision, seed=args.seed, out_dir=out,
                              resume=args.resume, progress=not args.quiet,
                              true=truth if args.target is not None else None)
        except ValueError as e:
            raise CLIError(str(e)) from None
        except EstimationError as e:
            print(f"gradsim-taichi: {e}")
            result, status = e.result, 3
        paths = write_outputs(out, scene, result, target, settings)
        for warning in result.warnings:
            print(f"gradsim-taichi: warning: {warning}")
        errors = result.errors()
        spread = (result.uncertainty or {}).get("params", {})
        for n, est in result.params.items():
            line = f"{n:>14}: estimate {_fmt(est)}"
            if spread.get(n, {}).get("ci95") is not None:
                low, high = spread[n]["ci95"]
                line += f" +- {_fmt(spread[n]['std'])} (95%: {_fmt(low)}..{_fmt(high)})"
            line += f"  init {_fmt(result.init[n])}"
            if n in errors:
                line += f"  true {_fmt(result.true[n])}  rel.err {errors[n]['rel_err']:.2e}"
            print(line)
        print(f"report: {paths['report']}\nplot:   {paths['plot']}\n"
              f"video:  {paths['video']} (and {paths['gif'].name})")
        return status


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

"""``gradsim-taichi landscape SCENE --param NAME --range A:B``: the loss along one or two
parameters around the truth (or an estimate), as ``landscape.png`` and ``landscape.csv``.
"""

import json
import math

from gradsim_taichi.cli.common import (
    CLIError,
    add_runtime_args,
    add_scene_args,
    init_runtime,
    make_preset,
    output_dir,
)


def add_landscape_parser(sub, help_line: str) -> None:
    from gradsim_taichi.scenes import SCENES

    p = sub.add_parser("landscape", help=help_line,
                       description="The estimation loss on a grid of one or two parameters "
                                   "(a curve or a heat map), the others at the truth or at "
                                   "an estimate. Scenes: " + ", ".join(SCENES))
    p.add_argument("scene", help=f"one of: {', '.join(SCENES)}")
    p.add_argument("--param", action="append", required=True, metavar="NAME",
                   help="a parameter to sweep (once or twice)")
    p.add_argument("--range", action="append", default=[], metavar="A:B",
                   help="its range in physical units, one per --param (default: the range "
                        "initial guesses are drawn from)")
    p.add_argument("--points", type=int, default=25, help="grid points per parameter")
    p.add_argument("--around", default=None, metavar="REPORT",
                   help="hold the other parameters at the estimates of this report.json "
                        "(default: at the truth)")
    add_scene_args(p)
    p.add_argument("--out", default=None, help="output folder (default: results/landscape-SCENE)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_runtime_args(p)
    p.set_defaults(func=cmd_landscape)


def cmd_landscape(args) -> int:
    from gradsim_taichi.estimation import render_target
    from gradsim_taichi.landscape import loss_landscape, write_landscape

    if not 1 <= len(args.param) <= 2:
        raise CLIError("give --param once (a curve) or twice (a heat map)")
    if args.range and len(args.range) != len(args.param):
        raise CLIError(f"give one --range per --param ({len(args.param)}), or none")
    if args.points < 2:
        raise CLIError(f"--points must be >= 2; got {args.points}")
    scene = make_preset(args, args.param)
    ranges = {}
    for k, name in enumerate(args.param):
        spec = scene.params[name]
        ranges[name] = _range(args.range[k]) if args.range else (spec.low, spec.high)
    base = _estimates(args.around) if args.around else None
    out = output_dir(args.out or f"results/landscape-{args.scene}")
    init_runtime(args)
    try:
        result = loss_landscape(scene, render_target(scene), ranges, args.points, base=base,
                                progress=not args.quiet)
    except (KeyError, ValueError) as e:
        raise CLIError(str(e).strip("'\"")) from None
    truth = {n: scene.params[n].true for n in args.param}
    paths = write_landscape(out, result, truth, title=f"{args.scene}: loss")
    print(f"csv:  {paths['csv']}\nplot: {paths['plot']}")
    return 0


def _range(text: str) -> tuple:
    low, sep, high = text.partition(":")
    try:
        low, high = float(low), float(high)
    except ValueError:
        raise CLIError(f"--range {text!r}: expected A:B with two numbers") from None
    if not sep or not (math.isfinite(low) and math.isfinite(high) and low < high):
        raise CLIError(f"--range {text!r}: expected A:B, finite, with A < B")
    return low, high


def _estimates(path) -> dict:
    try:
        report = json.loads(open(path).read())
        return {n: entry["estimate"] for n, entry in report["params"].items()}
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise CLIError(f"--around {path}: not a readable report.json ({e})") from None

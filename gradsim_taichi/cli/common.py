"""What every command shares: the user-facing error, runtime flags, output folders."""

import math
import tempfile
from pathlib import Path


class CLIError(Exception):
    """A user-facing error: printed as one line without a traceback, exit status 2."""


def add_runtime_args(p) -> None:
    p.add_argument("--arch", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument("--precision", default="f64", choices=["f64", "f32"])
    p.add_argument("--threads", type=int, default=None)


def init_runtime(args) -> dict:
    """``gradsim_taichi.init`` from the runtime flags; prints what it chose."""
    import gradsim_taichi as gs

    if args.threads is not None and args.threads < 1:
        raise CLIError(f"--threads must be a positive integer; got {args.threads}")
    info = gs.init(arch=args.arch, precision=args.precision, threads=args.threads,
                   seed=getattr(args, "seed", None))
    print(f"gradsim-taichi {info['gradsim_taichi']}: arch={info['arch']} "
          f"precision={info['precision']} threads={info['threads']}")
    return info


def output_dir(path) -> Path:
    """Create the output folder ``path`` (and its parents) and check that files can be
    written there; a path under an existing file or an unwritable place is a
    :class:`CLIError` naming it."""
    out = Path(path)
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out):
            pass
    except (FileExistsError, NotADirectoryError):
        raise CLIError(f"--out {path}: it or a folder above it is an existing file; "
                       "choose another output folder") from None
    except OSError as e:
        raise CLIError(f"--out {path}: cannot write there ({e.strerror or e}); choose "
                       "another output folder") from None
    return out


def add_run_args(p, default_out: str) -> None:
    """The flags every optimisation run takes (estimate, control), then the runtime's."""
    p.add_argument("--iters", type=int, default=None, help="iterations (default: the preset's)")
    p.add_argument("--lr", type=float, default=None,
                   help="learning rate (default: the preset's)")
    p.add_argument("--seed", type=int, default=0,
                   help="draws the initial guess / initialises the policy")
    p.add_argument("--out", default=None, help=f"output folder (default: {default_out})")
    p.add_argument("--resume", action="store_true",
                   help="continue an interrupted run from OUT/state.pt")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_runtime_args(p)


def check_run_args(args) -> None:
    """Errors for the flags of :func:`add_run_args` that argparse cannot check."""
    if args.iters is not None and args.iters < 1:
        raise CLIError(f"--iters must be a positive integer; got {args.iters}")
    if args.lr is not None and not (math.isfinite(args.lr) and args.lr > 0):
        raise CLIError(f"--lr must be > 0; got {args.lr}")


def add_scene_args(p) -> None:
    """The flags that scale a preset (estimate, landscape)."""
    p.add_argument("--frames", type=int, default=None,
                   help="override the scene's frame count (default: the preset's)")
    p.add_argument("--resolution", type=int, default=None,
                   help="override the rendered image size, square (default: the preset's)")
    p.add_argument("--shape", default=None,
                   help="the body's shape, for presets that offer shapes (rigid-mass, "
                        "rigid-contact: box, cone, cylinder, lshape) or a name of a "
                        "--scene file's [shapes] table")


def make_preset(args, names=()):
    """The preset ``args.scene`` with the overrides of :func:`add_scene_args`, checked, and
    ``names`` checked against its parameters."""
    from gradsim_taichi.scenes import SCENES
    from gradsim_taichi.scenes import make_preset as make

    overrides = {}
    shape = getattr(args, "shape", None)
    if shape is not None and args.scene in SCENES:
        offered = SCENES[args.scene].shapes
        if not offered:
            with_shapes = ", ".join(k for k, v in SCENES.items() if v.shapes)
            raise CLIError(f"--shape: scene {args.scene!r} offers no shapes; presets with "
                           f"shapes: {with_shapes}")
        if shape not in offered:
            raise CLIError(f"--shape {shape!r}: scene {args.scene!r} offers "
                           f"{', '.join(offered)}")
        overrides["shape"] = shape
    try:
        scene = make(args.scene, frames=args.frames, resolution=args.resolution,
                     **overrides)
        scene.check_params(names)
    except KeyError as e:
        raise CLIError(e.args[0]) from None
    except ValueError as e:
        raise CLIError(f"--{e}") from None
    return scene

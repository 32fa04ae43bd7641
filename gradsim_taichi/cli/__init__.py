"""The ``gradsim-taichi`` command line (also ``python -m gradsim_taichi``).

    gradsim-taichi estimate SCENE   parameters from video (cli/estimate.py); or --scene FILE
    gradsim-taichi estimate-batch MANIFEST  many estimations, here or on Ray (cli/estimate_batch.py)
    gradsim-taichi control TASK     a policy from one target image (cli/control.py)
    gradsim-taichi landscape SCENE  the loss along one or two parameters (cli/landscape.py)
    gradsim-taichi simulate         the built-in spring net (cli/simulate.py)
    gradsim-taichi scene show PRESET  a preset as a scene file; scene check FILE (cli/scene.py)
    gradsim-taichi info             versions and what the runtime picks

Parsing and printing only: the work is done by the package's modules. Exit status: 0
done; 2 bad input (:class:`CLIError`, a ``ValueError`` the jobs raise, a damaged resume
state, an output folder another run holds), printed as one line without a traceback;
3 a run that stopped early (NaN/inf) or diverged, its outputs written with the last
good (NaN) or the best (divergence) state (estimate-batch: an item failed); 130 interrupted.
"""

import argparse
import sys

from gradsim_taichi.cli.common import CLIError, add_runtime_args, init_runtime
from gradsim_taichi.version import __version__

__all__ = ["main", "build_parser", "CLIError"]


def cmd_info(args) -> int:
    import gradsim_taichi as gs

    if args.init:
        init_runtime(args)
    for key, value in gs.info().items():
        print(f"{key:>16}: {value}")
    return 0


# subcommand -> (one line of help, module, function adding its parser). Only the
# command being run gets its full parser (which imports torch and Taichi for the presets'
# names); the others stay stubs, so that `gradsim-taichi --help` is quick.
COMMANDS = {
    "estimate": ("estimate physical parameters of a scene preset from video",
                 "gradsim_taichi.cli.estimate", "add_estimate_parser"),
    "estimate-batch": ("estimate parameters for every item of a manifest (JSON Lines or "
                       "CSV), in this process or on Ray workers",
                       "gradsim_taichi.cli.estimate_batch", "add_estimate_batch_parser"),
    "control": ("train a policy through the simulator and renderer to reach a target image",
                "gradsim_taichi.cli.control", "add_control_parser"),
    "landscape": ("the loss along one or two parameters of a preset (curve or heat map)",
                  "gradsim_taichi.cli.landscape", "add_landscape_parser"),
    "simulate": ("run the built-in spring-net scene; write .npz + GIF",
                 "gradsim_taichi.cli.simulate", "add_simulate_parser"),
    "scene": ("scene files: `scene show PRESET` prints a preset as one",
              "gradsim_taichi.cli.scene", "add_scene_parser"),
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser; with ``command`` None every subcommand is complete, else only that
    one (the rest are stubs with their help line)."""
    import importlib

    parser = argparse.ArgumentParser(
        prog="gradsim-taichi",
        description="Differentiable physics and rendering: estimate physical parameters "
                    "from video.")
    parser.add_argument("--version", action="version",
                        version=f"gradsim-taichi {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("info", help="versions, and the arch/precision the runtime picks")
    add_runtime_args(p)
    p.add_argument("--no-init", dest="init", action="store_false",
                   help="do not initialise Taichi, only print versions")
    p.set_defaults(func=cmd_info)
    for name, (help_line, module, add) in COMMANDS.items():
        if command is None or command == name:
            getattr(importlib.import_module(module), add)(sub, help_line)
        else:
            sub.add_parser(name, help=help_line)
    return parser


def main(argv=None) -> int:
    from gradsim_taichi.errors import OutputLockedError

    words = sys.argv[1:] if argv is None else argv
    command = next((w for w in words if not w.startswith("-")), "")
    args = build_parser(command).parse_args(argv)
    try:
        return args.func(args)
    except (CLIError, OutputLockedError) as e:
        print(f"gradsim-taichi: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("gradsim-taichi: interrupted", file=sys.stderr)
        return 130

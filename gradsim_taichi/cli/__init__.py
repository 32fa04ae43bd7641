"""The ``gradsim-taichi`` command line (also ``python -m gradsim_taichi``).

    gradsim-taichi estimate SCENE   parameters from video (cli/estimate.py)
    gradsim-taichi control TASK     a policy from one target image (cli/control.py)
    gradsim-taichi simulate         the built-in spring net (cli/simulate.py)
    gradsim-taichi info             versions and what the runtime picks

Parsing and printing only: the work is done by the package's modules. Exit status: 0
done; 2 bad input (:class:`CLIError`, a ``ValueError`` the jobs raise, a damaged resume
state, an output folder another run holds), printed as one line without a traceback;
3 a run that stopped early (NaN/inf) or diverged, its outputs written with the last
good (NaN) or the best (divergence) state; 130 interrupted.
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


def build_parser() -> argparse.ArgumentParser:
    from gradsim_taichi.cli.control import add_control_parser
    from gradsim_taichi.cli.estimate import add_estimate_parser
    from gradsim_taichi.cli.simulate import add_simulate_parser

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
    add_simulate_parser(sub)
    add_estimate_parser(sub)
    add_control_parser(sub)
    return parser


def main(argv=None) -> int:
    from gradsim_taichi.errors import OutputLockedError

    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (CLIError, OutputLockedError) as e:
        print(f"gradsim-taichi: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("gradsim-taichi: interrupted", file=sys.stderr)
        return 130

"""The ``gradsim-taichi`` command line.

    gradsim-taichi info
    gradsim-taichi simulate [--frames N] [--out DIR]
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np


class CLIError(Exception):
    """A user-facing error: printed without a traceback, exit status 2."""


def _runtime_args(p):
    p.add_argument("--arch", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument("--precision", default="f64", choices=["f64", "f32"])
    p.add_argument("--threads", type=int, default=None)


def _init(args) -> dict:
    import gradsim_taichi as gs

    info = gs.init(arch=args.arch, precision=args.precision, threads=args.threads,
                   seed=getattr(args, "seed", None))
    print(f"gradsim-taichi {info['gradsim_taichi']}: arch={info['arch']} "
          f"precision={info['precision']} threads={info['threads']}")
    return info


def cmd_info(args) -> int:
    import gradsim_taichi as gs

    if args.init:
        _init(args)
    for key, value in gs.info().items():
        print(f"{key:>16}: {value}")
    return 0


def spring_net_builder(n: int = 10, size: float = 0.5, height: float = 0.6):
    """The built-in demo scene: an n x n net of particles and springs, tilted, falling onto
    the ground."""
    import gradsim_taichi as gs

    b = gs.ModelBuilder(contact_ke=3e3, contact_kd=5.0, contact_kf=5.0, contact_mu=0.5)
    u, w = np.meshgrid(np.linspace(0, size, n), np.linspace(0, size, n), indexing="ij")
    pos = np.stack([u, height + 0.3 * u, w], axis=-1).reshape(-1, 3)
    b.add_particles(pos, velocities=(0.5, 0.0, 0.0), mass=0.02)
    idx = np.arange(n * n).reshape(n, n)
    pairs = [np.stack([idx[:-1, :], idx[1:, :]], -1), np.stack([idx[:, :-1], idx[:, 1:]], -1),
             np.stack([idx[:-1, :-1], idx[1:, 1:]], -1), np.stack([idx[1:, :-1], idx[:-1, 1:]], -1)]
    pairs = np.concatenate([p.reshape(-1, 2) for p in pairs])
    b.add_springs(pairs, stiffness=200.0, damping=0.2)
    return b, pairs


def cmd_simulate(args) -> int:
    import gradsim_taichi as gs
    from gradsim_taichi.preview import save_particles_gif

    if args.frames < 1 or args.substeps < 1:
        raise CLIError("--frames and --substeps must be positive integers")
    _init(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    builder, pairs = spring_net_builder()
    sim = gs.Simulation(builder.finalize(), frames=args.frames, substeps=args.substeps,
                        progress=1)
    t0 = time.perf_counter()
    positions = sim.forward()["particles"]
    seconds = time.perf_counter() - t0
    np.savez(out / "trajectory.npz", positions=positions, springs=pairs, dt=sim.dt,
             substeps=sim.substeps, frame_dt=sim.frame_dt)
    gif = save_particles_gif(out / "trajectory.gif", positions, pairs)
    print(f"simulated {args.frames} frames x {args.substeps} substeps of "
          f"{sim.model.particle_count} particles in {seconds:.2f} s")
    print(f"trajectory: {out / 'trajectory.npz'}\npreview:    {gif}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gradsim-taichi",
        description="Differentiable physics and rendering: estimate physical parameters "
                    "from video.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("info", help="versions, and the arch/precision the runtime picks")
    _runtime_args(p)
    p.add_argument("--no-init", dest="init", action="store_false",
                   help="do not initialise Taichi, only print versions")
    p.set_defaults(func=cmd_info)

    p = sub.add_parser("simulate", help="run the built-in spring-net scene; write .npz + GIF")
    _runtime_args(p)
    p.add_argument("--frames", type=int, default=60)
    p.add_argument("--substeps", type=int, default=32)
    p.add_argument("--out", default="results/simulate")
    p.set_defaults(func=cmd_simulate)

    try:
        from gradsim_taichi.cli_estimate import add_estimate_parser
    except ImportError:
        pass
    else:
        add_estimate_parser(sub, _runtime_args)
    try:
        from gradsim_taichi.cli_control import add_control_parser
    except ImportError:
        pass
    else:
        add_control_parser(sub, _runtime_args)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except CLIError as e:
        print(f"gradsim-taichi: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("gradsim-taichi: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

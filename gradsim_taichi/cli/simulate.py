"""``gradsim-taichi simulate``: the built-in spring-net scene -> ``trajectory.npz`` + GIF."""

import time

from gradsim_taichi.cli.common import CLIError, add_runtime_args, init_runtime, output_dir


def add_simulate_parser(sub, help_line: str) -> None:
    p = sub.add_parser("simulate", help=help_line)
    add_runtime_args(p)
    p.add_argument("--frames", type=int, default=60)
    p.add_argument("--substeps", type=int, default=32)
    p.add_argument("--out", default="results/simulate")
    p.set_defaults(func=cmd_simulate)


def cmd_simulate(args) -> int:
    import numpy as np

    import gradsim_taichi as gs
    from gradsim_taichi.reports import save_particles_gif
    from gradsim_taichi.scenes.spring_net import spring_net_builder

    if args.frames < 1 or args.substeps < 1:
        raise CLIError("--frames and --substeps must be positive integers")
    out = output_dir(args.out)
    init_runtime(args)
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

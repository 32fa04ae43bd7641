"""``gradsim-taichi control TASK``: train a policy to reach a goal given as one image.

Writes ``report.json``, ``progress.png``, ``rollout.mp4`` and ``rollout.gif`` (the final
policy's rollout beside the target image) in ``--out``, plus ``state.pt`` every few
iterations so that ``--resume`` continues an interrupted run.
"""

from pathlib import Path

from gradsim_taichi.cli.common import (
    CLIError,
    add_run_args,
    check_run_args,
    init_runtime,
    output_dir,
)


def add_control_parser(sub, help_line: str) -> None:
    from gradsim_taichi.scenes import TASKS

    p = sub.add_parser(
        "control",
        help=help_line,
        description="Visuomotor control from one target image. Tasks: "
                    + "; ".join(f"{k}: {v.summary}" for k, v in TASKS.items()),
    )
    p.add_argument("task", help=f"one of: {', '.join(TASKS)}")
    p.add_argument("--policy", choices=["open", "closed", "closed-image"], default="open",
                   help="open loop (time features), closed loop on the state, or closed "
                        "loop on the rendered frame (the policy runs between frames)")
    p.add_argument("--frames", type=int, default=None, help="horizon (default: task's)")
    p.add_argument("--size", type=int, default=None, help="image width = height in pixels")
    add_run_args(p, "results/control-TASK")
    p.set_defaults(func=cmd_control)


def cmd_control(args) -> int:
    from gradsim_taichi.control import random_baseline, train, write_outputs
    from gradsim_taichi.errors import ControlError
    from gradsim_taichi.scenes import TASKS, make_task

    if args.task not in TASKS:
        raise CLIError(f"unknown control task {args.task!r}; choose one of: {', '.join(TASKS)}")
    check_run_args(args)
    if args.frames is not None and args.frames < 1:
        raise CLIError(f"--frames must be a positive integer; got {args.frames}")
    if args.size is not None and not 8 <= args.size <= 1024:
        raise CLIError(f"--size must be between 8 and 1024 pixels; got {args.size}")
    if args.task == "cloth" and args.policy != "open":
        raise CLIError("the cloth task has only an open-loop form (its action is the "
                       "initial velocity); drop --policy closed")
    out = Path(args.out or f"results/control-{args.task}")
    if args.resume and not (out / "state.pt").exists():
        raise CLIError(f"--resume: no saved state at {out / 'state.pt'}")
    overrides = {}
    if args.policy == "closed-image":
        overrides["observation"] = "image"
    if args.frames is not None:
        overrides["frames"] = args.frames
    if args.size is not None:
        overrides["width"] = overrides["height"] = args.size
    out = output_dir(out)
    from gradsim_taichi.run_loop import locked

    with locked(out):  # one run per output folder, outputs included
        init_runtime(args)
        task = make_task(args.task, **overrides)
        iters = args.iters or task.iters
        lr = args.lr or task.lr
        settings = dict(task=args.task, iters=iters, lr=lr, optimizer="adam", lr_decay=0.1,
                        seed=args.seed,
                        policy=args.policy, frames=task.frames, substeps=task.substeps,
                        fps=task.fps, width=task.width, height=task.height,
                        goal_offset=list(getattr(task, "goal_offset", ())))
        status = 0
        try:
            result = train(task, iters=iters, lr=lr, seed=args.seed, out_dir=out,
                           resume=args.resume, progress=not args.quiet,
                           closed_loop=args.policy != "open")
        except ValueError as e:
            raise CLIError(str(e)) from None
        except ControlError as e:
            print(f"gradsim-taichi: {e}")
            result, status = e.result, 3
        settings["random_baseline_distance"] = random_baseline(task, seed=args.seed)
        paths = write_outputs(out, task, result, settings)
        print(f"{args.task}: centre-of-mass distance {result.start_distance:.4f} m -> "
              f"{result.final_distance:.4f} m after {result.iterations} iterations "
              f"({result.seconds:.1f} s); random actuation: "
              f"{settings['random_baseline_distance']:.4f} m")
        print(f"report: {paths['report']}\nplot:   {paths['plot']}")
        if "video" in paths:
            print(f"video:  {paths['video']} (and {paths['gif'].name})")
        else:
            print("video:  none (the final rollout is not finite)")
        return status

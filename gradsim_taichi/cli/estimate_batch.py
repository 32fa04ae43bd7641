"""``gradsim-taichi estimate-batch MANIFEST``: many estimations, one per manifest item.

Each item is run as ``estimate`` runs it, into ``OUT/items/ID/``; ``OUT/summary.csv``,
``summary.json`` and ``summary.png`` sum them up. More than one worker (or
``--address``) runs on Ray (``pip install 'gradsim-taichi[cluster]'``). The manifest's
format: :mod:`gradsim_taichi.batch`.
"""

import os

from gradsim_taichi.cli.common import CLIError, add_runtime_args, output_dir


def add_estimate_batch_parser(sub, help_line: str) -> None:
    p = sub.add_parser(
        "estimate-batch", help=help_line,
        description="Estimate physical parameters for every item of a manifest (JSON Lines "
                    "or CSV; keys: id, scene, shape, seed, target, truth, iters, lr, "
                    "optimizer, frames, resolution, params, blur, frame_stride, loss, fit, "
                    "render; scene: a preset or a scene file NAME.toml, relative to the "
                    "manifest), each into "
                    "OUT/items/ID/ as `estimate` does, then OUT/summary.csv, summary.json "
                    "and summary.png. Several workers run on Ray.")
    p.add_argument("manifest", help="the items: a .jsonl file (one JSON object a line) or "
                                    "a .csv file with a header row")
    p.add_argument("--out", default="results/batch", help="output folder "
                                                         "(default: results/batch)")
    p.add_argument("--workers", type=int, default=None,
                   help="items run at once (default: one per core, or every CPU of the "
                        "cluster with --address); 1 without --address: in this process, "
                        "without Ray")
    p.add_argument("--address", default=None,
                   help="a running Ray cluster (started with `ray start --head`), e.g. "
                        "HOST:6379 or 'auto'; default: Ray on this machine")
    p.add_argument("--resume", action="store_true",
                   help="skip the items already done; resume the others from their state")
    p.add_argument("--retries", type=int, default=2,
                   help="times an item is retried after its worker was lost (default 2)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_runtime_args(p)
    p.set_defaults(func=cmd_estimate_batch)


def cmd_estimate_batch(args) -> int:
    from gradsim_taichi.batch import RayMissingError, read_manifest, run_batch

    if args.workers is not None and args.workers < 1:
        raise CLIError(f"--workers must be a positive integer; got {args.workers}")
    if args.retries < 0:
        raise CLIError(f"--retries must be >= 0; got {args.retries}")
    if args.threads is not None and args.threads < 1:
        raise CLIError(f"--threads must be a positive integer; got {args.threads}")
    try:
        items = read_manifest(args.manifest)
    except ValueError as e:
        raise CLIError(str(e)) from None
    workers = args.workers
    if workers is None and args.address is None:
        workers = os.cpu_count() or 1
    out = output_dir(args.out)
    settings = dict(arch=args.arch, precision=args.precision, threads=args.threads)
    try:
        summary = run_batch(items, out, workers=workers, address=args.address,
                            resume=args.resume, retries=args.retries, settings=settings,
                            progress=not args.quiet)
    except RayMissingError as e:
        raise CLIError(str(e)) from None
    for failure in summary["failures"]:
        print(f"gradsim-taichi: {failure['id']} failed: {failure['message']}")
    for name, s in summary["params"].items():
        print(f"{name:>14}: relative error mean {s['mean_rel_err']:.3g}  median "
              f"{s['median_rel_err']:.3g}  max {s['max_rel_err']:.3g}  ({s['count']} items)")
    print(f"{summary['done']} of {summary['items']} items done, {summary['failed']} failed")
    print(f"summary: {out / 'summary.csv'} (and summary.json, summary.png)\n"
          f"items:   {out / 'items'}")
    return 0 if summary["failed"] == 0 else 3

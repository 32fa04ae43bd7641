"""estimate-batch's scaling on this machine: the same small rigid-mass items in this
process (``--workers 1``), on Ray with one worker, and on Ray with two.

    python benchmarks/bench_batch.py [--items 8] [--json out.json]

Prints items per minute for each (Ray's start-up timed apart), and the per-item overhead
of the Ray path against the in-process one: (Ray, 1 worker - in process) / items, both
including Taichi's initialisation once per worker (kernels loaded from Taichi's disk cache,
filled by a warm-up item first); torch on one thread in each.
"""

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

from gradsim_taichi.batch import RayMissingError, import_ray, parse_item, run_batch

SMALL = dict(scene="rigid-mass", frames=8, resolution=24, iters=3)
SHAPES = ("box", "cone", "cylinder", "lshape")


def items(n):
    return [parse_item(dict(SMALL, id=f"i{k}", shape=SHAPES[k % 4], seed=k,
                            truth={"mass": 2.0 + 10.0 * k / max(n - 1, 1)}))
            for k in range(n)]


def run(todo, backend, workers, arch):
    """Seconds for the batch (Ray already started) and the mean of its items' own
    estimation seconds (what each report says)."""
    with tempfile.TemporaryDirectory() as out:
        t0 = time.perf_counter()
        summary = run_batch(todo, Path(out), workers=workers, backend=backend,
                            settings=dict(arch=arch, precision="f64", threads=1),
                            progress=False, plot=False)
        seconds = time.perf_counter() - t0
    if summary["failed"]:
        raise RuntimeError(f"items failed: {summary['failures']}")
    return seconds, sum(r["seconds"] for r in summary["rows"]) / len(todo)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--items", type=int, default=8)
    p.add_argument("--arch", default="cpu", choices=["cpu", "cuda", "auto"])
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    try:
        ray = import_ray()
    except RayMissingError:  # the benchmark times Ray: say so, no traceback
        print("bench_batch times Ray's workers, and Ray is not installed: "
              "pip install 'gradsim-taichi[cluster]'", file=sys.stderr)
        return 2
    todo = items(args.items)
    cases, item_s = {}, {}
    # Taichi caches compiled kernels on disk: compile them once first, so that no case
    # pays for compilation the others skip
    run(todo[:1], "process", 1, args.arch)
    # one torch thread, as in Ray's workers (Ray sets OMP_NUM_THREADS=1 for a 1-CPU actor)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    cases["in process"], item_s["in process"] = run(todo, "process", 1, args.arch)
    torch.set_num_threads(threads)
    for workers in (1, 2):
        t0 = time.perf_counter()
        ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False,
                 object_store_memory=100 * 1024 ** 2)
        start = time.perf_counter() - t0
        try:
            name = f"ray, {workers} worker{'s' * (workers > 1)}"
            cases[name], item_s[name] = run(todo, "ray", workers, args.arch)
        finally:
            ray.shutdown()
        cases[f"ray start ({workers})"] = start
    print(f"{args.items} items (rigid-mass, {SMALL['resolution']} px, {SMALL['frames']} "
          f"frames, {SMALL['iters']} iterations)")
    rows = []
    for name, seconds in cases.items():
        if name.startswith("ray start"):
            continue
        rate = 60.0 * args.items / seconds
        rows.append(dict(case=name, seconds=seconds, items_per_min=rate,
                         item_estimation_s=item_s[name]))
        print(f"{name:>16}: {seconds:6.1f} s  {rate:6.1f} items/min  (each item's "
              f"estimation {item_s[name]:.1f} s)")
    overhead = (cases["ray, 1 worker"] - cases["in process"]) / args.items
    print(f"Ray start-up: {cases['ray start (1)']:.1f} s (1 CPU), "
          f"{cases['ray start (2)']:.1f} s (2 CPUs)")
    print(f"per-item overhead, Ray (1 worker) vs in process: {overhead:+.2f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(dict(cases=rows, overhead_s=overhead,
                                                   ray_start_s=cases["ray start (1)"]),
                                              indent=2))


if __name__ == "__main__":
    sys.exit(main())

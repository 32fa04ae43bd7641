"""Re-run the gradSim paper's Tables 1-3 on this machine and print our rows beside the
paper's, for video (pixels only) and 3D supervision (the DiffPhysics baseline).

    python benchmarks/paper_tables.py [--instances 4] [--seed 0] [--json out.json]

Each instance draws a ground truth and an initial guess from the preset's documented
ranges (``gradsim_taichi.scenes``), renders the target from the truth and estimates.
Table 1: mean absolute error (kg) and mean absolute relative error of the mass.
Table 2: mean absolute relative error of mass, k_d, k_e, k_f, mu.
Table 3: relative mean absolute error of solid mass, mu, lambda (beam and ball) and of
the cloth's initial velocity. Scenes are scaled (64 px, 50 frames or fewer); the default
of 4 instances (each rigid shape once; 40 estimations: five scenes, two supervisions, the
presets' default iterations) takes about 3 minutes on 2 idle CPU cores, two estimations at a
time (``--jobs``). ``--quick`` is a smoke run (48 px, 20 frames, 8 iterations), not a
measurement.

    python benchmarks/paper_tables.py --batch DIR --instances 100 [--workers 2]
        [--address HOST:6379] [--resume]

runs Table 1 only (video supervision) through ``gradsim-taichi estimate-batch``
(:mod:`gradsim_taichi.batch`): ``--instances`` rigid-mass items, each a random shape of
the preset's list and a mass uniform in [2, 12] kg, written as ``DIR/manifest.jsonl`` and
estimated into ``DIR/items/`` (on Ray with more than one worker or ``--address``), then
prints the mean, median and max relative error of the mass (``DIR/summary.*``).
"""

import argparse
import json
import multiprocessing
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

import gradsim_taichi as gs
from gradsim_taichi.estimation import estimate, render_target
from gradsim_taichi.scenes import make_scene
from gradsim_taichi.scenes.rigid import SHAPES

PAPER = {
    "table1": {"gradSim": {"mass_abs": 2.36e-5, "mass_rel": 9.01e-5},
               "DiffPhysics": {"mass_abs": 1.35e-9, "mass_rel": 5.17e-9}},
    "table2": {"gradSim": {"mass": 2.87e-4, "contact_kd": 0.400, "contact_ke": 0.003,
                           "contact_kf": 0.001, "contact_mu": 0.007},
               "DiffPhysics": {"mass": 1.70e-8, "contact_kd": 0.036, "contact_ke": 0.002,
                               "contact_kf": 0.001, "contact_mu": 0.011}},
    "table3": {"gradSim": {"solid_mass": 0.048, "mu": 0.0054, "lambda": 0.0056,
                           "cloth_velocity": 0.026},
               "DiffPhysics": {"solid_mass": 0.032, "mu": 0.0025, "lambda": 0.0024,
                               "cloth_velocity": 0.127}},
}


def rel_mae(est, true) -> float:
    """Relative mean absolute error: mean |e - t| / mean |t|."""
    est, true = np.asarray(est, dtype=float), np.asarray(true, dtype=float)
    return float(np.mean(np.abs(est - true)) / max(np.mean(np.abs(true)), 1e-12))


def run_instance(name, overrides, truth_rng, seed, supervision, iters=None):
    scene = make_scene(name, **overrides)
    # a fresh ground truth inside the documented range (new specs: declared ones are
    # never changed)
    scene.set_truth({n: float(np.exp(truth_rng.uniform(np.log(spec.low), np.log(spec.high))))
                     for n, spec in scene.params.items()
                     if spec.true is not None and np.ndim(spec.true) == 0})
    scene.build()
    target = render_target(scene, supervision)
    t0 = time.perf_counter()
    result = estimate(scene, target, supervision=supervision, seed=seed, iters=iters,
                      progress=False)
    errors = {n: rel_mae(result.params[n], result.true[n]) for n in result.params}
    abs_errors = {n: float(np.mean(np.abs(result.params[n] - result.true[n])))
                  for n in result.params}
    return dict(scene=name, overrides={k: v for k, v in overrides.items()},
                supervision=supervision, seed=seed, rel=errors, abs=abs_errors,
                seconds=time.perf_counter() - t0, iterations=result.iterations)


def _tasks(instances, seed, supervisions, quick):
    """Every estimation as (table, run_instance arguments), truth seeds drawn in order."""
    rng = np.random.default_rng(seed)
    small = dict(width=48, height=48, frames=20) if quick else {}
    short = None if not quick else 8
    tasks = []
    for k in range(instances):
        for sup in supervisions:
            s = seed + k
            shape = SHAPES[k % len(SHAPES)]
            for table, name, iters in (("table1", "rigid-mass", None),
                                       ("table2", "rigid-contact", short),
                                       ("table3", "fem-beam", short),
                                       ("table3", "fem-ball", short),
                                       ("table3", "cloth-velocity", short)):
                overrides = dict(small, shape=shape) if name.startswith("rigid") else small
                tasks.append((table, (name, overrides, int(rng.integers(1 << 31)), s, sup,
                                      iters)))
    return tasks


def _worker_init(threads):
    gs.init(arch="auto", precision="f64", threads=threads)


def _run(task):
    table, (name, overrides, truth_seed, s, sup, iters) = task
    return table, run_instance(name, overrides, np.random.default_rng(truth_seed), s, sup,
                               iters)


def tables(instances, seed, supervisions, quick, jobs=1, threads=None):
    """Run every estimation, ``jobs`` at a time in worker processes (each with ``threads``
    CPU threads; the small scenes run their kernels serially, so one process keeps about
    one core busy)."""
    tasks = _tasks(instances, seed, supervisions, quick)
    if jobs == 1:
        _worker_init(threads)
        return _collect(map(_run, tasks), instances, supervisions)
    ctx = multiprocessing.get_context("spawn")  # Taichi does not survive fork
    with ProcessPoolExecutor(jobs, mp_context=ctx, initializer=_worker_init,
                             initargs=(threads or 1,)) as pool:
        return _collect(pool.map(_run, tasks), instances, supervisions)


def _collect(results, instances, supervisions) -> list:
    runs = []
    for table, run in results:
        runs.append((table, run))
        if len(runs) % 5 == 0:
            k, sup = (len(runs) // 5 - 1) // len(supervisions), run["supervision"]
            print(f"instance {k + 1}/{instances} ({sup}) done", file=sys.stderr, flush=True)
    return runs


def summarise(runs) -> dict:
    out = {}
    for sup in sorted({r["supervision"] for _, r in runs}):
        rows = [r for _, r in runs if r["supervision"] == sup]
        t1 = [r for r in rows if r["scene"] == "rigid-mass"]
        t2 = [r for r in rows if r["scene"] == "rigid-contact"]
        fem = [r for r in rows if r["scene"] in ("fem-beam", "fem-ball")]
        cloth = [r for r in rows if r["scene"] == "cloth-velocity"]

        def mean(values):
            return float(np.mean(values)) if values else float("nan")

        out[sup] = {
            "table1": {"mass_abs": mean([r["abs"]["mass"] for r in t1]),
                       "mass_rel": mean([r["rel"]["mass"] for r in t1])},
            "table2": {k: mean([r["rel"][k] for r in t2])
                       for k in ("mass", "contact_kd", "contact_ke", "contact_kf",
                                 "contact_mu")},
            "table3": {"solid_mass": mean([r["rel"][k] for r in fem for k in ("mass", "density")
                                           if k in r["rel"]]),
                       "mu": mean([r["rel"]["mu"] for r in fem]),
                       "lambda": mean([r["rel"]["lambda"] for r in fem]),
                       "cloth_velocity": mean([r["rel"]["velocity"] for r in cloth])},
        }
    return out


def print_tables(summary):
    names = {"video": "ours, video (gradSim setting)", "3d": "ours, 3D (DiffPhysics setting)"}
    cols = {"table1": ["mass_abs", "mass_rel"],
            "table2": ["mass", "contact_kd", "contact_ke", "contact_kf", "contact_mu"],
            "table3": ["solid_mass", "mu", "lambda", "cloth_velocity"]}
    titles = {"table1": "Table 1: rigid mass (mean abs error kg, abs relative error)",
              "table2": "Table 2: rigid mass + contact (abs relative error)",
              "table3": "Table 3: FEM and cloth (relative mean absolute error)"}
    for t, keys in cols.items():
        widths = [max(12, len(k)) + 2 for k in keys]
        print(f"\n{titles[t]}")
        print(f"{'method':<34}" + "".join(f"{k:>{w}}" for k, w in zip(keys, widths)))
        for method, row in PAPER[t].items():
            print(f"{'paper: ' + method:<34}"
                  + "".join(f"{row[k]:>{w}.3g}" for k, w in zip(keys, widths)))
        for sup, s in summary.items():
            print(f"{names[sup]:<34}"
                  + "".join(f"{s[t][k]:>{w}.3g}" for k, w in zip(keys, widths)))


def table1_manifest(instances, seed, quick) -> list:
    """Table 1's items for estimate-batch: random shapes, masses uniform in [2, 12] kg."""
    rng = np.random.default_rng(seed)
    small = dict(frames=20, resolution=48, iters=8) if quick else {}
    return [dict(id=f"rigid-mass-{k:05d}", scene="rigid-mass", shape=str(rng.choice(SHAPES)),
                 seed=seed + k, truth={"mass": float(rng.uniform(2.0, 12.0))}, **small)
            for k in range(instances)]


def table1_batch(args) -> dict:
    """Table 1 through the estimate-batch path; prints and returns its summary."""
    from pathlib import Path

    from gradsim_taichi.batch import read_manifest, run_batch

    out = Path(args.batch)
    out.mkdir(parents=True, exist_ok=True)
    manifest = out / "manifest.jsonl"
    records = table1_manifest(args.instances, args.seed, args.quick)
    manifest.write_text("".join(json.dumps(r) + "\n" for r in records))
    t0 = time.perf_counter()
    summary = run_batch(read_manifest(manifest), out, workers=args.workers,
                        address=args.address, resume=args.resume,
                        settings=dict(arch="auto", precision="f64", threads=args.threads))
    mass = summary["params"].get("mass")
    print(f"\nTable 1 on estimate-batch: {summary['done']} of {summary['items']} rigid-mass "
          f"instances done ({summary['failed']} failed) in {time.perf_counter() - t0:.0f} s")
    paper = PAPER["table1"]["gradSim"]["mass_rel"]
    if mass:
        print(f"mass relative error: mean {mass['mean_rel_err']:.3g}  median "
              f"{mass['median_rel_err']:.3g}  max {mass['max_rel_err']:.3g}  "
              f"(paper, gradSim: mean {paper:.3g})")
    print(f"summary: {out / 'summary.csv'}")
    return summary


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--instances", type=int, default=4)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--supervision", choices=["video", "3d", "both"], default="both")
    p.add_argument("--quick", action="store_true", help="smaller images, fewer frames")
    p.add_argument("--json", default=None, help="write the numbers here")
    p.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1),
                   help="estimations run at once, in worker processes (default: 2 or "
                        "the number of cores if fewer)")
    p.add_argument("--threads", type=int, default=None,
                   help="CPU threads per estimation (default: all with --jobs 1, else 1)")
    p.add_argument("--batch", metavar="DIR", default=None,
                   help="Table 1 only, through estimate-batch into DIR (random shapes, "
                        "masses uniform in [2, 12] kg)")
    p.add_argument("--workers", type=int, default=1,
                   help="with --batch: items at once (more than 1: on Ray)")
    p.add_argument("--address", default=None, help="with --batch: a Ray cluster")
    p.add_argument("--resume", action="store_true",
                   help="with --batch: skip the items done, resume the others")
    args = p.parse_args(argv)
    if args.instances < 1:
        p.error("--instances must be >= 1")
    if args.batch is not None:
        if args.workers < 1:
            p.error("--workers must be >= 1")
        table1_batch(args)
        return
    if args.jobs < 1:
        p.error("--jobs must be >= 1")
    sups = ["video", "3d"] if args.supervision == "both" else [args.supervision]
    t0 = time.perf_counter()
    runs = tables(args.instances, args.seed, sups, args.quick, args.jobs, args.threads)
    if args.jobs != 1:
        _worker_init(1)  # for gs.info(): the workers' settings
    info = gs.info()
    summary = summarise(runs)
    print_tables(summary)
    print(f"\n{len(runs)} estimations in {time.perf_counter() - t0:.0f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"summary": summary, "paper": PAPER, "runs": [r for _, r in runs],
                       "settings": vars(args), "runtime": info}, f, indent=2)


if __name__ == "__main__":
    main()

"""Seconds per whole estimation (preset defaults), against the same estimation as it ran
before each speed-up, measured in the same run.

    python benchmarks/bench_estimation.py [--scenes rigid-mass,rigid-contact] [--repeats 1]
                                          [--json out.json]

What a user waits for is a whole estimation, not a substep. Each preset's target is
rendered from its truth, kernels are compiled by a one-iteration run, and then the
preset's estimation runs with its defaults (iterations, optimiser, stages, early stop)
twice, interleaved:

- ``ours``: as the engine runs it;
- ``reference``: the engine as before the speed-ups: every rollout simulates the whole
  video even when a horizon stage compares only its first frames;
  Levenberg-Marquardt builds its Jacobian from central differences (two simulations per
  unknown, not one); the renderer's backward pass visits every face, the static ground
  and backdrop included.

Both must reach the same estimate (printed: the largest relative difference); the ratio
is reference / ours.

``--against PYTHON``: the reference is instead the engine as it really was, installed in
another environment (e.g. the commit before the speed work, 5538fa7:
``git worktree add ../before 5538fa7 && python3 -m venv ../before/.venv &&
../before/.venv/bin/pip install torch==2.13.0 -e ../before``, then
``--against ../before/.venv/bin/python``). Each side then runs in its own process (one
process per preset and side, alternating), with only the API both versions have:
``make_scene``, ``render_target`` and ``estimate``.
"""

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time

import numpy as np
from profile_estimation import preset_names  # benchmarks/ is the script's folder
from timing import ARCH

import gradsim_taichi as gs
from gradsim_taichi import estimation
from gradsim_taichi.optimisers import LevenbergMarquardt, fd_jacobian
from gradsim_taichi.render import rasterizer
from gradsim_taichi.scenes import make_scene
from gradsim_taichi.scenes.base import Scene


@contextlib.contextmanager
def reference_engine():
    """Every rollout simulates every frame (then drops the frames not asked for); LM's
    Jacobian from central differences; no face skipped in the render's backward pass."""
    simulate, jacobian = Scene.simulate, LevenbergMarquardt.jacobian
    raster = rasterizer.SoftRasterFunction

    def full(self, values, frames=None):
        out = simulate(self, values)
        return out if frames is None else {k: v[: frames + 1] for k, v in out.items()}

    def central(self, residual, x, r0):
        jac = fd_jacobian(lambda y: self._eval(residual, y), x, r0, self.directions,
                          central=True)
        self._set(x)
        return jac

    class EveryFace:
        @staticmethod
        def apply(*args):
            return raster.apply(*args[:9])

    Scene.simulate, LevenbergMarquardt.jacobian = full, central
    rasterizer.SoftRasterFunction = EveryFace
    try:
        yield
    finally:
        Scene.simulate, LevenbergMarquardt.jacobian = simulate, jacobian
        rasterizer.SoftRasterFunction = raster


def run(scene, target, seed):
    t = time.perf_counter()
    result = estimation.estimate(scene, target, seed=seed, progress=False, uncertainty=False)
    return time.perf_counter() - t, result


def bench(name: str, repeats: int, seed: int) -> dict:
    scene = make_scene(name)
    scene.build()
    target = estimation.render_target(scene)
    estimation.estimate(scene, target, iters=1, seed=seed, progress=False, uncertainty=False)
    ours, ref = [], []
    for _ in range(repeats):
        t, a = run(scene, target, seed)
        ours.append(t)
        with reference_engine():
            t, b = run(scene, target, seed)
        ref.append(t)
    diff = max(float(np.max(np.abs(a.params[n] - b.params[n]) / np.abs(b.params[n])))
               for n in a.params)
    errors = {n: e["rel_err"] for n, e in a.errors().items()}
    return {"case": name, "ours_s": min(ours), "reference_s": min(ref),
            "speedup": min(ref) / min(ours), "iterations": a.iterations,
            "max_rel_difference": diff, "rel_err": errors}


def worker(name: str, seed: int, repeats: int) -> None:
    """One side of ``--against``, in this process's engine: prints one JSON line."""
    gs.init(arch=ARCH, precision="f64")
    scene = make_scene(name)
    scene.build()
    target = estimation.render_target(scene)
    estimation.estimate(scene, target, iters=1, seed=seed, progress=False, uncertainty=False)
    times = []
    for _ in range(repeats):
        t, r = run(scene, target, seed)
        times.append(t)
    print(json.dumps({"s": min(times), "iterations": r.iterations,
                      "params": {n: np.asarray(v).tolist() for n, v in r.params.items()},
                      "rel_err": {n: float(np.max(e["rel_err"]))
                                  for n, e in r.errors().items()}}))


def bench_against(name: str, python: str, repeats: int, seed: int) -> dict:
    """This engine and the one ``python`` imports, each in its own process."""
    out = {}
    for side, exe in (("ours", sys.executable), ("reference", python)):
        cmd = [exe, os.path.abspath(__file__), "--worker", name, "--seed", str(seed),
               "--repeats", str(repeats)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"{side} ({exe}) failed on {name}:\n{proc.stderr[-2000:]}")
        out[side] = json.loads(proc.stdout.strip().splitlines()[-1])
    a, b = out["ours"], out["reference"]
    diff = max(float(np.max(np.abs(np.subtract(a["params"][n], b["params"][n]))
                            / np.abs(b["params"][n]))) for n in a["params"])
    return {"case": name, "ours_s": a["s"], "reference_s": b["s"],
            "speedup": b["s"] / a["s"], "iterations": a["iterations"],
            "reference_iterations": b["iterations"], "max_rel_difference": diff,
            "rel_err": a["rel_err"], "reference_rel_err": b["rel_err"]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scenes", default="rigid-mass,rigid-contact,fem-ball")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", help="also write the cases to this file")
    ap.add_argument("--against", metavar="PYTHON",
                    help="the reference: the engine this interpreter imports (see above)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        worker(args.worker, args.seed, args.repeats)
        return 0
    names = preset_names(args.scenes)
    if names is None:
        return 2
    if args.against and not os.access(args.against, os.X_OK):
        print(f"--against: {args.against} is not an executable Python", file=sys.stderr)
        return 2
    if not args.against:
        gs.init(arch=ARCH, precision="f64")
    cases = []
    print(f"{'preset':<16}{'ours':>9}{'reference':>11}{'ratio':>7}{'iters':>7}"
          f"{'same estimate':>15}  rel. error")
    for name in names:
        c = (bench_against(name, args.against, args.repeats, args.seed) if args.against
             else bench(name, args.repeats, args.seed))
        cases.append(c)
        err = ", ".join(f"{n} {e:.1e}" for n, e in c["rel_err"].items())
        print(f"{name:<16}{c['ours_s']:8.1f}s{c['reference_s']:10.1f}s{c['speedup']:6.2f}x"
              f"{c['iterations']:7d}{c['max_rel_difference']:15.1e}  {err}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"cases": cases}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

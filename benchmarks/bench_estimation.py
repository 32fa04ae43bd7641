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
"""

import argparse
import contextlib
import json
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
        jac = fd_jacobian(lambda y: self._eval(residual, y), x, r0, central=True)
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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scenes", default="rigid-mass,rigid-contact,fem-ball")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", help="also write the cases to this file")
    args = ap.parse_args(argv)
    names = preset_names(args.scenes)
    if names is None:
        return 2
    gs.init(arch=ARCH, precision="f64")
    cases = []
    print(f"{'preset':<16}{'ours':>9}{'reference':>11}{'ratio':>7}{'iters':>7}"
          f"{'same estimate':>15}  rel. error")
    for name in names:
        c = bench(name, args.repeats, args.seed)
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

"""Where an estimation's time goes: one table per preset.

    python benchmarks/profile_estimation.py [--scenes rigid-mass,fem-beam] [--iters 4]
                                            [--json out.json]

For each preset, a target is rendered from the truth, one iteration compiles the kernels,
and then ``estimate`` runs ``--iters`` iterations (early stop off) with the preset's
optimiser, stages and blur. The engine's
entry points are wrapped with timers (nothing else changes):

- ``sim forward`` / ``sim backward``: ``Simulation.forward_tensors`` /
  ``Simulation.backward`` (Taichi kernels and their launches, the outputs' and output
  gradients' copies between tensors and fields);
- ``bridge``: the torch <-> Taichi side of the simulation autograd Function around them
  (parameter checks and writes, parameter gradients back);
- ``render forward``: ``SoftRasterizer.__call__`` (projection and shading in torch, tile
  binning, the raster kernel); ``render backward``: the raster kernel's adjoint;
- ``loss + blur``: the blur matrices and the loss;
- ``rest``: everything else in the iterations: torch autograd of the projection and
  shading, the optimiser (L-BFGS line search bookkeeping, LM's linear algebra), Python.

The table gives seconds per iteration for each part, its share, and the number of
simulations (forward rollouts) per iteration: an L-BFGS iteration with a line search or
an LM iteration with a finite-difference Jacobian runs several. The uncertainty at the
end of a run (two simulations per unknown) is timed apart. Times are wall-clock on a
shared machine: compare shares and counts, not absolute seconds across runs.
"""

import argparse
import contextlib
import json
import sys
import time
from collections import defaultdict

import numpy as np
from timing import ARCH  # benchmarks/ is the script's folder: on sys.path

import gradsim_taichi as gs
from gradsim_taichi import estimation, objectives, simulation, torch_bridge
from gradsim_taichi.render import raster_autograd, rasterizer
from gradsim_taichi.scenes import make_scene

PRESETS = ("rigid-mass", "rigid-contact", "fem-beam", "fem-ball", "cloth-velocity")
PARTS = ("sim forward", "sim backward", "bridge", "render forward", "render backward",
         "loss + blur", "rest")


class Timers:
    """Wall-clock totals and call counts per name (a nested timer's time is also in its
    outer one's: ``table`` subtracts it)."""

    def __init__(self):
        self.total = defaultdict(float)
        self.calls = defaultdict(int)
        self.frozen = None  # totals when the iterations ended (the uncertainty began)

    def freeze(self):
        self.frozen = (defaultdict(float, self.total), defaultdict(int, self.calls))

    @contextlib.contextmanager
    def time(self, name):
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.total[name] += time.perf_counter() - t0
            self.calls[name] += 1

    def wrap(self, owner, attr, name, static=False):
        """Replace ``owner.attr`` by a timed call; returns a function that undoes it."""
        original = owner.__dict__[attr]
        fn = original.__func__ if isinstance(original, staticmethod) else original
        timers = self

        def timed(*args, **kwargs):
            with timers.time(name):
                return fn(*args, **kwargs)

        setattr(owner, attr, staticmethod(timed) if static else timed)
        return lambda: setattr(owner, attr, original)


def instrument(timers: Timers):
    """Wrap the engine's entry points; returns the undo functions."""
    return [
        # (the bridge calls forward_tensors; Simulation.forward goes through it too)
        timers.wrap(simulation.Simulation, "forward_tensors", "sim forward"),
        timers.wrap(simulation.Simulation, "backward", "sim backward"),
        timers.wrap(torch_bridge._SimulateFunction, "forward", "bridge forward", static=True),
        timers.wrap(torch_bridge._SimulateFunction, "backward", "bridge backward",
                    static=True),
        timers.wrap(rasterizer.SoftRasterizer, "__call__", "render forward"),
        timers.wrap(raster_autograd.SoftRasterFunction, "backward", "render backward",
                    static=True),
        # estimation imported these by name: wrap them there
        _wrap_module_fn(timers, estimation, "blur_frames", "blur"),
        _wrap_module_fn(timers, estimation, "local_uncertainty", "uncertainty",
                        before=timers.freeze),
    ]


def _wrap_module_fn(timers, module, attr, name, before=None):
    original = getattr(module, attr)

    def timed(*args, **kwargs):
        if before is not None:
            before()
        with timers.time(name):
            return original(*args, **kwargs)

    setattr(module, attr, timed)
    return lambda: setattr(module, attr, original)


def profile(name: str, iters: int, seed: int) -> dict:
    scene = make_scene(name)
    scene.build()
    target = estimation.render_target(scene)
    # warm-up: compile every kernel (forward and adjoint) outside the timed run
    estimation.estimate(scene, target, iters=1, tol=0.0, seed=seed, progress=False,
                        uncertainty=False)
    timers = Timers()
    undo = instrument(timers)
    # the loss function the estimation looks up by name
    original_get_loss = estimation.get_loss

    def timed_get_loss(loss):
        fn = original_get_loss(loss)

        def timed(*args, **kwargs):
            with timers.time("loss"):
                return fn(*args, **kwargs)

        # Levenberg-Marquardt looks its residuals up by the loss function: the wrapper's too
        if fn in objectives.LM_RESIDUALS:
            objectives.LM_RESIDUALS[timed] = objectives.LM_RESIDUALS[fn]
            undo.append(lambda: objectives.LM_RESIDUALS.pop(timed, None))
        return timed

    estimation.get_loss = timed_get_loss
    try:
        t0 = time.perf_counter()
        result = estimation.estimate(scene, target, iters=iters, tol=0.0, seed=seed,
                                     progress=False)
        wall = time.perf_counter() - t0
    finally:
        estimation.get_loss = original_get_loss
        for u in undo:
            u()
    return table(name, result, timers, wall)


def table(name, result, timers: Timers, wall: float) -> dict:
    uq = timers.total["uncertainty"]
    # the iterations' share: the totals when the uncertainty began
    t, n = timers.frozen if timers.frozen is not None else (timers.total, timers.calls)
    iters_time = result.seconds
    parts = {
        "sim forward": t["sim forward"],
        "sim backward": t["sim backward"],
        "bridge": (t["bridge forward"] - t["sim forward"])
        + (t["bridge backward"] - t["sim backward"]),
        "render forward": t["render forward"],
        "render backward": t["render backward"],
        "loss + blur": t["loss"] + t["blur"],
    }
    parts["rest"] = max(0.0, iters_time - sum(parts.values()))
    it = max(result.iterations, 1)
    row = {
        "scene": name,
        "iterations": result.iterations,
        "optimizer": result.settings["optimizer"],
        "seconds_per_iteration": iters_time / it,
        "parts_per_iteration": {k: v / it for k, v in parts.items()},
        "share": {k: v / max(iters_time, 1e-12) for k, v in parts.items()},
        "simulations_per_iteration": n["sim forward"] / it,
        "uncertainty_seconds": uq,
        "wall_seconds": wall,
    }
    return row


def print_table(rows) -> None:
    head = f"{'part':<16}" + "".join(f"{r['scene']:>16}" for r in rows)
    print(head)
    print("-" * len(head))
    for p in PARTS:
        cells = "".join(f"{r['parts_per_iteration'][p]:9.3f}s {100 * r['share'][p]:4.0f}%"
                        for r in rows)
        print(f"{p:<16}{cells}")
    print("-" * len(head))
    print(f"{'s / iteration':<16}" + "".join(f"{r['seconds_per_iteration']:15.3f}s"
                                               for r in rows))
    print(f"{'sims / iter.':<16}" + "".join(f"{r['simulations_per_iteration']:16.1f}"
                                              for r in rows))
    print(f"{'optimizer':<16}" + "".join(f"{r['optimizer']:>16}" for r in rows))
    print(f"{'uncertainty':<16}" + "".join(f"{r['uncertainty_seconds']:15.2f}s"
                                             for r in rows))


def preset_names(text: str):
    """Comma-separated preset names, checked; None (after saying why) if one is unknown."""
    names = [s for s in text.split(",") if s]
    unknown = sorted(set(names) - set(PRESETS))
    if unknown:
        print(f"unknown presets {unknown}; expected some of {PRESETS}", file=sys.stderr)
        return None
    return names


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scenes", default=",".join(PRESETS),
                    help="comma-separated presets (default: all five)")
    ap.add_argument("--iters", type=int, default=4, help="iterations per preset")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--json", help="also write the rows to this file")
    args = ap.parse_args(argv)
    names = preset_names(args.scenes)
    if names is None:
        return 2
    gs.init(arch=ARCH, precision="f64", threads=args.threads)
    rows = []
    for name in names:
        print(f"profiling {name} ...", file=sys.stderr, flush=True)
        rows.append(profile(name, args.iters, args.seed))
    print_table(rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    np.set_printoptions(precision=3)
    sys.exit(main())

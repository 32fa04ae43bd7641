"""Benchmark: a preset scene built again in the same process (the next batch item, test or
restart of the same structure), with the fields of the collected model reused
(``gradsim_taichi/field_pool.py``) against new fields (``GRADSIM_TAICHI_NO_FIELD_POOL=1``).

    python benchmarks/bench_rebuild.py [--presets rigid-mass,fem-ball] [--builds 3]
                                       [--json PATH]

Each preset and mode runs in a process of its own with an empty Taichi kernel cache of its
own (a fresh machine, as CI is): the scene is built ``--builds`` times, each time
simulated, rendered and differentiated once, and dropped. Prints the seconds of the first
build (compiles everything either way) and the median of the later ones, per mode, their
ratio, and whether every build's loss and gradients were equal across the modes.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from timing import ARCH  # benchmarks/ is the script's folder: on sys.path

MODES = {"reused": "0", "new fields": "1"}


def child(preset: str, builds: int) -> dict:
    import gc
    import time

    import torch

    import gradsim_taichi as gs
    from gradsim_taichi.scenes import make_preset

    gs.init(arch=ARCH, precision="f64")
    seconds, results = [], []
    for _ in range(builds):
        start = time.perf_counter()
        scene = make_preset(preset, frames=6, resolution=32)
        scene.build()
        names = [n for n, p in scene.params.items() if p.true is not None]
        values = {k: v.clone().requires_grad_(True)
                  for k, v in scene.true_values(names).items()}
        loss = scene.render(scene.simulate(values)).square().mean()
        loss.backward()
        seconds.append(time.perf_counter() - start)
        results.append([float(loss)] + [v.grad.sum().item() for v in values.values()])
        del scene, values, loss
        gc.collect()
    return {"seconds": seconds, "results": results, "torch": torch.__version__}


def run_child(preset: str, builds: int, cache: str, **env) -> dict:
    """:func:`child` in a fresh process, with Taichi's kernel cache in ``cache`` and the
    environment variables ``env``; a RuntimeError with its stderr if it fails."""
    env = dict(os.environ, TI_OFFLINE_CACHE_FILE_PATH=cache, ENABLE_TAICHI_HEADER_PRINT="0",
               **env)
    done = subprocess.run([sys.executable, __file__, "--child", preset, "--builds",
                           str(builds)], env=env, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(done.stderr[-2000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--presets", default="rigid-mass,fem-ball")
    ap.add_argument("--builds", type=int, default=3)
    ap.add_argument("--json", default=None)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:  # (benchmarks/bench_compile.py runs one build)
        print(json.dumps(child(args.child, args.builds)))
        return 0
    if args.builds < 2:
        ap.error("--builds must be >= 2 (the first build compiles either way)")

    rows = []
    print(f"{'preset':<16}{'mode':<12}{'first (s)':>10}{'later (s)':>10}")
    for preset in args.presets.split(","):
        runs = {}
        for mode, flag in MODES.items():
            with tempfile.TemporaryDirectory() as cache:
                try:
                    runs[mode] = run_child(preset, args.builds, cache,
                                           GRADSIM_TAICHI_NO_FIELD_POOL=flag)
                except RuntimeError as e:
                    print(e, file=sys.stderr)
                    return 1
            first, later = runs[mode]["seconds"][0], statistics.median(
                runs[mode]["seconds"][1:])
            print(f"{preset:<16}{mode:<12}{first:>10.2f}{later:>10.2f}")
        later = {m: statistics.median(r["seconds"][1:]) for m, r in runs.items()}
        equal = runs["reused"]["results"] == runs["new fields"]["results"]
        ratio = later["new fields"] / later["reused"]
        print(f"{preset:<16}later builds {ratio:.1f}x faster with the fields reused; "
              f"losses and gradients {'equal' if equal else 'DIFFER'}")
        rows.append({"preset": preset, "runs": runs, "ratio_later": ratio, "equal": equal})
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0 if all(r["equal"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark: time to a preset's first gradient (build, simulate, render, backward: where
an estimation's first iteration compiles its kernels), with the engine's compile path
(``gradsim_taichi/taichi_frontend.py``: Taichi's front end cached, every kernel but
Taichi's generated adjoints compiled without its ``cfg_optimization`` passes) against
Taichi's own (``GRADSIM_TAICHI_NO_FRONTEND_CACHE=1``).

    python benchmarks/bench_compile.py [--presets rigid-mass,fem-ball] [--repeats 2]
                                       [--json PATH]

Each preset, mode and repeat runs in a process of its own: first with an empty Taichi
kernel cache ("cold": a fresh machine, as CI is), then again on the cache that run filled
("warm": a user's next run). Modes alternate within a repeat. Prints the median seconds
per mode, their ratio, and whether the losses and gradients agree across modes (to
:data:`AGREE`, relative, or of the loss: LLVM and Taichi's passes may order a sum
differently).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile

import numpy as np
from bench_rebuild import run_child  # benchmarks/ is the script's folder: on sys.path

MODES = {"cached": "0", "Taichi's own": "1"}
AGREE = 1e-12  # relative


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--presets", default="rigid-mass,fem-ball")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    if args.repeats < 1:
        ap.error("--repeats must be >= 1")

    rows = []
    print(f"{'preset':<16}{'cache':<7}" + "".join(f"{m + ' (s)':>18}" for m in MODES)
          + f"{'ratio':>8}")
    for preset in args.presets.split(","):
        seconds = {(m, c): [] for m in MODES for c in ("cold", "warm")}
        results = {m: [] for m in MODES}
        for _ in range(args.repeats):
            for mode, flag in MODES.items():
                with tempfile.TemporaryDirectory() as cache:
                    for kind in ("cold", "warm"):
                        try:
                            run = run_child(preset, 1, cache,
                                            GRADSIM_TAICHI_NO_FRONTEND_CACHE=flag)
                        except RuntimeError as e:
                            print(e, file=sys.stderr)
                            return 1
                        seconds[mode, kind].append(run["seconds"][0])
                        results[mode].append(run["results"][0])
        # [loss, each parameter's gradient summed]; a sum that cancels to ~1e-16 of the
        # loss (fem-ball's per-tet moduli) is noise: AGREE of the loss is its floor
        ref = results["cached"][0]
        equal = all(np.allclose(r, ref, rtol=AGREE, atol=AGREE * abs(ref[0]))
                    for rs in results.values() for r in rs)
        for kind in ("cold", "warm"):
            med = {m: statistics.median(seconds[m, kind]) for m in MODES}
            ratio = med["Taichi's own"] / med["cached"]
            print(f"{preset:<16}{kind:<7}" + "".join(f"{med[m]:>18.2f}" for m in MODES)
                  + f"{ratio:>7.2f}x")
            rows.append({"preset": preset, "cache": kind, "seconds": med,
                         "runs": {m: seconds[m, kind] for m in MODES}, "ratio": ratio,
                         "equal": equal})
        print(f"{preset:<16}losses and gradients {'agree' if equal else 'DIFFER'} "
              f"(to {AGREE:g}, relative or of the loss)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0 if all(r["equal"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())

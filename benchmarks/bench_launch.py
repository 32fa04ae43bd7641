"""Launch-cost benchmark: what a kernel launch and a parallel loop cost on this machine.

Two measurements behind choices in the engine:

1. Serial vs parallel loops (``runtime.serial``). A loop of ``n`` items of ~50 ns each,
   run by Taichi's thread pool and run serially, for growing ``n``: on VMs whose idle
   vCPUs halt, the pool's sleeping workers join late, and a parallel loop only pays off
   beyond a few ms of work. Prints the parallel / serial time ratio per size (< 1: the
   pool helps).
2. Kernel launch paths (``gradsim_taichi/kernels.py``). The same small kernel (a template field
   argument and two scalars) called through Taichi's normal path and through a
   :class:`~gradsim_taichi.kernels.Launcher`; prints the ratio.

    python benchmarks/bench_launch.py [--threads 2] [--json PATH]
"""

import argparse
import json
import os
import sys

os.environ.setdefault("TI_SKIP_VERSION_CHECK", "ON")
os.environ.setdefault("ENABLE_TAICHI_HEADER_PRINT", "0")

import taichi as ti  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from timing import ARCH, best_time  # noqa: E402

import gradsim_taichi as gs  # noqa: E402
from gradsim_taichi.kernels import FastKernel  # noqa: E402


@ti.data_oriented
class Work:
    """A loop of ``n`` items of a few dozen ns each, parallel or serial."""

    def __init__(self, n: int):
        self.n = n
        self.y = ti.field(ti.f64, shape=n)

    @ti.kernel
    def parallel(self):
        for i in range(self.n):
            self.y[i] = self._item(self.y[i])

    @ti.kernel
    def serial(self):
        ti.loop_config(serialize=True)
        for i in range(self.n):
            self.y[i] = self._item(self.y[i])

    @ti.func
    def _item(self, a):
        for _ in ti.static(range(8)):
            a = ti.sqrt(a * a + 1.0)
        return a


@ti.data_oriented
class Small:
    """A small kernel shaped like a substep's: a template field and two scalars."""

    def __init__(self, n: int):
        self.n = n

    @ti.kernel
    def step(self, x: ti.template(), row: ti.i32, dt: ti.f64):
        ti.loop_config(serialize=True)
        for i in range(self.n):
            x[row, i] += dt


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args(argv)
    gs.init(arch=ARCH, threads=args.threads)

    loops = []
    print(f"serial vs parallel loops, {args.threads} threads (load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")
    print(f"{'items':>9} {'serial ms':>10} {'parallel ms':>12} {'parallel/serial':>16}")
    for n in (1_000, 10_000, 50_000, 200_000, 1_000_000):
        work = Work(n)
        calls = max(3, 200_000 // n)
        ts = best_time(work.serial, calls, sync=ti.sync)
        tp = best_time(work.parallel, calls, sync=ti.sync)
        loops.append({"items": n, "serial_s": ts, "parallel_s": tp, "ratio": tp / ts})
        print(f"{n:>9} {1e3 * ts:>10.3f} {1e3 * tp:>12.3f} {tp / ts:>16.2f}")

    n = 4096
    x = ti.field(ti.f64, shape=(4, n))
    small = Small(n)
    fast = FastKernel(small.step)
    normal_s = best_time(lambda: small.step(x, 2, 0.5), 2000, sync=ti.sync)
    fast_s = best_time(lambda: fast(x, 2, 0.5), 2000, sync=ti.sync)
    print(f"\nlaunch of a small kernel (serial loop over {n} items): Taichi's path "
          f"{1e6 * normal_s:.1f} us, Launcher {1e6 * fast_s:.1f} us -> "
          f"{normal_s / fast_s:.2f}x")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"cases": [{"case": "small kernel launch", "ours_s": fast_s,
                                  "reference_s": normal_s, "speedup": normal_s / fast_s}],
                       "loops": loops}, fh, indent=2)
        print(f"wrote {args.json}")


if __name__ == "__main__":
    sys.exit(main())

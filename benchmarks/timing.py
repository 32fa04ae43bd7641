"""Timing shared by the benchmarks, and the arch they run on."""

import os
import statistics
import time

# The arch of every benchmark's engine runs: GRADSIM_BENCH_ARCH=cuda on a GPU machine
# (scripts/gpu_check.sh sets it); the CPU by default.
ARCH = os.environ.get("GRADSIM_BENCH_ARCH", "cpu")


def interleaved_medians(fns: dict, repeats: int) -> dict:
    """Median seconds of each callable in ``fns``, after one warm-up call each (compiles
    kernels and adjoints). The calls are interleaved repeat by repeat, so that a load
    change on a shared machine hits every case alike."""
    for fn in fns.values():
        fn()
    times = {k: [] for k in fns}
    for _ in range(repeats):
        for k, fn in fns.items():
            t = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t)
    return {k: statistics.median(v) for k, v in times.items()}


def median_time(fn, repeats: int, warmup: bool = False) -> float:
    """Median wall time of ``repeats`` calls of ``fn`` (after one untimed call if
    ``warmup``)."""
    if warmup:
        fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def best_time(fn, calls: int = 1, blocks: int = 5, sync=None) -> float:
    """Seconds per call of ``fn``: the best of ``blocks`` blocks of ``calls`` back-to-back
    calls (robust to a noisy neighbour), after one warm-up call. ``sync`` (e.g.
    ``ti.sync``) runs after the warm-up and after each block."""
    fn()
    if sync is not None:
        sync()
    best = float("inf")
    for _ in range(blocks):
        t = time.perf_counter()
        for _ in range(calls):
            fn()
        if sync is not None:
            sync()
        best = min(best, (time.perf_counter() - t) / calls)
    return best

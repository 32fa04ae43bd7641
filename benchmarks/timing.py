"""Timing shared by the benchmarks."""

import statistics
import time


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

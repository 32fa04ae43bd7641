"""Benchmark: the frame-0 calibration of a video the engine did not make, with the stages
a Jacobian column does not reach reused (``gradsim_taichi/reuse.py``, and the blur
matrices built once), against the same calibration with nothing reused: one process,
the two interleaved, the calibrated values checked equal bit for bit.

    python benchmarks/bench_calibration.py [--shape box] [--resolution 64] [--repeats 2]
                                           [--json PATH]

The target is the rigid-mass preset's own render from a camera turned and shifted by a
few percent, with a shadow on the stage and a gamma: the default own-video fit plus the
camera (``--fit camera``) calibrates against it, with the robust loss. Prints the median
seconds of each calibration and their ratio (the reference's over the reused one's).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

from timing import ARCH  # benchmarks/ is the script's folder: on sys.path

FIT = ("camera", "background", "appearance", "shadow", "blur", "response")
# the target's nuisance: the camera's turn (rad) and shift (m), the shadow, the gamma
MOVED = {"camera_rotation": [0.02, -0.015, 0.01], "camera_translation": [-0.04, 0.03, 0.0],
         "shadow_strength": 0.5, "gamma": 1.3}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", default="box")
    ap.add_argument("--resolution", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)

    import torch

    import gradsim_taichi as gs
    from gradsim_taichi import fit, objectives, reuse
    from gradsim_taichi.estimation import estimate
    from gradsim_taichi.nuisance import Nuisance
    from gradsim_taichi.scenes import make_scene

    gs.init(arch=ARCH, precision="f64")
    scene = make_scene("rigid-mass", shape=args.shape, width=args.resolution,
                       height=args.resolution)
    scene.render_mode = "antialias"
    scene.build()
    with torch.no_grad():
        out = scene.simulate(scene.true_values(["mass"]))
        model = Nuisance(scene, ("camera", "shadow", "response"), scene.render(out))
        for name, value in MOVED.items():
            model.params[name].copy_(torch.as_tensor(value, dtype=torch.float64))
        target = model.render(out)

    calibrated = []
    calibrate = fit.Fit.calibrate

    def timed(self, *a, **k):
        t = time.perf_counter()
        record = calibrate(self, *a, **k)
        calibrated.append((time.perf_counter() - t, record["nuisance"], record["loss_after"]))
        return record

    def run(reused: bool):
        get, blur = reuse.LastResult.get, objectives._built_blur_matrix
        if not reused:
            reuse.LastResult.get = lambda self, inputs, compute: compute()
            objectives._built_blur_matrix = blur.__wrapped__
        fit.Fit.calibrate = timed
        try:
            estimate(scene, target, fit=FIT, loss="robust", iters=1, warmup=(),
                     uncertainty=False, progress=False)
        finally:
            reuse.LastResult.get, objectives._built_blur_matrix = get, blur
            fit.Fit.calibrate = calibrate
        return calibrated[-1]

    run(True)  # compiles the kernels
    times = {"reused": [], "nothing reused": []}
    results = {}
    for _ in range(args.repeats):
        for case in times:
            seconds, nuisance, loss = run(case == "reused")
            times[case].append(seconds)
            results[case] = (nuisance, loss)
            print(f"  {case}: {seconds:.1f} s", flush=True)
    median = {k: statistics.median(v) for k, v in times.items()}
    equal = results["reused"] == results["nothing reused"]
    ratio = median["nothing reused"] / median["reused"]
    print(f"frame-0 calibration, {args.shape}, {args.resolution} px, fit {','.join(FIT)}: "
          f"{median['reused']:.1f} s reused, {median['nothing reused']:.1f} s nothing "
          f"reused: {ratio:.2f}x; the calibrated values {'equal' if equal else 'DIFFER'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"shape": args.shape, "resolution": args.resolution, "arch": ARCH,
                       "seconds": times, "median": median, "ratio": ratio,
                       "equal": equal}, f, indent=1)
    return 0 if equal else 1


if __name__ == "__main__":
    sys.exit(main())

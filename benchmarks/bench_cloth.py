"""Cloth benchmark: a 64x64-cell cloth grid (triangle membranes + bending) on the ground.

The engine (Taichi kernels, checkpointed backward) against a vectorized plain-PyTorch
implementation of the same model (``torch_cloth_reference.py``, torch autograd for the
backward), both in this process on 2 CPU threads, in float64 and float32.

Scene: 1 m x 1 m cloth of 64 x 64 cells (4,225 particles, 8,192 triangles, 12,160
hinges) in the xz plane at y = 0.025 m, mass 1e-3 kg per particle, tri_ke = tri_ka = 100,
tri_kd = 0.01, edge_ke = 0.01, edge_kd = 1e-4, a random initial velocity (so that it
wrinkles and bends), falling onto the ground (contact ke = 1e3, kd = 0.5, kf = 0.5,
mu = 0.5) within the timed rollout. The ``--aero`` case adds lift, drag and wind.

Before timing, the engine and the reference must agree: trajectory (f64: rtol 1e-9,
f32: 1e-4) and the gradients of a fixed random linear loss of the frame positions with
respect to tri_ke, edge_ke, mass and the initial velocity (f64: 1e-8 of each gradient's
largest entry, f32: 2e-2).

Reported per precision: ms per substep of the forward rollout (reference under
``torch.no_grad``) and of forward + backward (ours: ``sim.forward`` + ``sim.backward``,
which recomputes each frame from its checkpoint; reference: forward with autograd +
``loss.backward()``), median of ``--repeats`` interleaved runs after a warm-up.

    python benchmarks/bench_cloth.py [--quick] [--json PATH] [--aero]
"""

from __future__ import annotations

import argparse
import json
import os
import sys

os.environ.setdefault("TI_SKIP_VERSION_CHECK", "ON")
os.environ.setdefault("ENABLE_TAICHI_HEADER_PRINT", "0")

import numpy as np  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from timing import ARCH, interleaved_medians  # noqa: E402
from torch_cloth_reference import TorchCloth, scene_from_simulation  # noqa: E402

import gradsim_taichi as gs  # noqa: E402

THREADS = 2
SUBSTEPS = 16
# contact damping and friction inside explicit stability for the 1 g particles at
# 60 Hz x 16 substeps (k dt / m = 0.52; the earlier kd = 1, kf = 10 gave 1.0 and 10.4)
CONTACT = dict(contact_ke=1e3, contact_kd=0.5, contact_kf=0.5, contact_mu=0.5)
CLOTH = dict(mass=1e-3, tri_ke=100.0, tri_ka=100.0, tri_kd=0.01, edge_ke=0.01, edge_kd=1e-4)
GRAD_NAMES = ("tri_ke", "edge_ke", "mass", "initial_velocity")
TOL = {"f64": dict(traj=1e-9, grad=1e-8), "f32": dict(traj=1e-4, grad=2e-2)}


def make_simulation(cells: int, frames: int, aero: bool) -> gs.Simulation:
    b = gs.ModelBuilder(particle_radius=0.01, **CONTACT)
    n = (cells + 1) ** 2
    vel = np.random.default_rng(1).normal(0.0, 0.3, (n, 3)) + np.array([0.0, -1.0, 0.0])
    extra = dict(lift=0.1, drag=0.2) if aero else {}
    b.add_cloth_grid(size=(1.0, 1.0), resolution=(cells, cells), origin=(-0.5, 0.025, -0.5),
                     velocity=vel, **CLOTH, **extra)
    if aero:
        b.set_wind((0.5, 0.0, 0.3))
    return gs.Simulation(b.finalize(), frames=frames, substeps=SUBSTEPS)


def compare(sim, ref: TorchCloth, w: np.ndarray, precision: str) -> dict:
    """Run both; return the worst relative errors, raise if they disagree."""
    ours = sim.forward()["particles"]
    sim.backward({"particles": w.astype(ours.dtype)})
    leaves = {name: ref.tensor(name, requires_grad=True) for name in GRAD_NAMES}
    out = ref.rollout(leaves)
    (out * torch.as_tensor(w, dtype=ref.dtype)).sum().backward()
    traj = out.detach().numpy()
    errors = {"trajectory": float(np.abs(ours - traj).max() / np.abs(traj).max())}
    for name, leaf in leaves.items():
        g_ref = leaf.grad.numpy().astype(np.float64)
        g = sim.param_grad(name).astype(np.float64).reshape(g_ref.shape)
        errors[name] = float(np.abs(g - g_ref).max() / max(np.abs(g_ref).max(), 1e-300))
    tol = TOL[precision]
    bad = {k: e for k, e in errors.items()
           if not np.isfinite(e) or e > (tol["traj"] if k == "trajectory" else tol["grad"])}
    if bad:
        raise AssertionError(f"{precision}: engine and torch reference disagree: {bad}")
    return errors


def time_cases(sim, ref: TorchCloth, w: np.ndarray, repeats: int) -> dict:
    """Seconds per substep, forward and forward+backward, ours and the reference;
    interleaved repeat by repeat so that load changes hit both alike."""
    steps = sim.frames * sim.substeps
    g = {"particles": w.astype(gs.runtime.np_dtype())}
    wt = torch.as_tensor(w, dtype=ref.dtype)

    def ours_fwd_bwd():
        sim.forward()
        sim.backward(g)

    def ref_fwd():
        with torch.no_grad():
            ref.rollout()

    def ref_fwd_bwd():
        leaves = {name: ref.tensor(name, requires_grad=True) for name in GRAD_NAMES}
        (ref.rollout(leaves) * wt).sum().backward()

    fns = {"ours fwd": sim.forward, "ours fwd+bwd": ours_fwd_bwd,
           "ref fwd": ref_fwd, "ref fwd+bwd": ref_fwd_bwd}
    return {k: t / steps for k, t in interleaved_medians(fns, repeats).items()}


def run(precision: str, cells: int, frames: int, repeats: int, aero: bool,
        torch_threads: int = THREADS) -> list[dict]:
    gs.init(arch=ARCH, threads=THREADS, precision=precision)
    torch.set_num_threads(torch_threads)
    sim = make_simulation(cells, frames, aero)
    ref = TorchCloth(scene_from_simulation(sim), dtype=gs.runtime.torch_dtype())
    w = np.random.default_rng(0).standard_normal((frames + 1, sim.model.particle_count, 3))
    errors = compare(sim, ref, w, precision)
    print(f"[{precision}] agreement (max rel. error): "
          + ", ".join(f"{k} {v:.1e}" for k, v in errors.items()))
    t = time_cases(sim, ref, w, repeats)
    name = f"cloth {cells}x{cells}{' aero' if aero else ''} {precision}"
    return [
        {"case": f"{name} fwd", "ours_s": t["ours fwd"], "reference_s": t["ref fwd"],
         "speedup": t["ref fwd"] / t["ours fwd"]},
        {"case": f"{name} fwd+bwd", "ours_s": t["ours fwd+bwd"],
         "reference_s": t["ref fwd+bwd"], "speedup": t["ref fwd+bwd"] / t["ours fwd+bwd"]},
    ]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="short rollout, fewer repeats")
    ap.add_argument("--json", metavar="PATH", help="write the results as JSON")
    ap.add_argument("--cells", type=int, default=64, help="grid cells per side (default 64)")
    ap.add_argument("--frames", type=int, default=None, help="frames per rollout")
    ap.add_argument("--repeats", type=int, default=None, help="timed repeats per case")
    ap.add_argument("--aero", action="store_true", help="also time lift, drag and wind")
    ap.add_argument("--precisions", default="f64,f32", help="comma separated (f64,f32)")
    ap.add_argument("--torch-threads", type=int, default=THREADS,
                    help="torch intra-op threads (default 2, like ours; on a machine busy "
                         "with other work 1 can be much faster for torch)")
    args = ap.parse_args(argv)
    frames = args.frames or (2 if args.quick else 6)
    repeats = args.repeats or (2 if args.quick else 5)
    cases = []
    for precision in args.precisions.split(","):
        cases += run(precision, args.cells, frames, repeats, False, args.torch_threads)
        if args.aero:
            cases += run(precision, args.cells, frames, repeats, True, args.torch_threads)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"\n{frames} frames x {SUBSTEPS} substeps, {THREADS} threads (torch "
          f"{args.torch_threads}), load average {load:.1f}; ms per substep")
    print(f"{'case':<34} {'ours':>9} {'torch':>9} {'speedup':>8}")
    for c in cases:
        print(f"{c['case']:<34} {1e3 * c['ours_s']:9.3f} {1e3 * c['reference_s']:9.3f} "
              f"{c['speedup']:7.1f}x")
    if args.json:
        with open(args.json, "w") as fh:
            meta = dict(frames=frames, substeps=SUBSTEPS, threads=THREADS,
                        torch_threads=args.torch_threads, load_average=load, cells=args.cells)
            json.dump({"cases": cases, "meta": meta}, fh, indent=2)
    return cases


if __name__ == "__main__":
    main()

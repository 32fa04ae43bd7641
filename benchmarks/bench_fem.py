"""FEM benchmark: tetrahedral stable neo-Hookean solids, ours vs plain PyTorch.

The engine (Taichi kernels, checkpointed backward) against a vectorized PyTorch
implementation of the same model (``torch_fem_reference.py``, autograd backward),
both in this process on 2 CPU threads, in float64 and float32.

Scenes (no ground; gravity on; damping and per-frame activation on; a random initial
velocity field so every tet deforms): a gear (``tet_gear`` defaults, 1200 tets) and a
box of 12^3 cells (10368 tets), E ~ 5e4 Pa, density 1000 kg/m^3, at 60 fps x
``SUBSTEPS`` substeps. Before timing, the trajectories must agree (f64: rtol 1e-9 of
the displacement scale; f32: 1e-3) and so must the gradients of a random linear loss
of the frame positions with respect to tet_mu, tet_lambda, tet_damping,
tet_activation and initial_velocity (f64: 1e-7 of each gradient's largest entry;
f32: 1e-2).

Reported: ms per substep of the forward rollout (reference under ``torch.no_grad``)
and of forward + backward (ours: ``sim.forward`` + ``sim.backward``, which recomputes
each frame from its checkpoint; reference: forward with autograd + ``backward``),
median of ``--repeats`` after a warm-up.

    python benchmarks/bench_fem.py [--quick] [--json PATH]
"""

import argparse
import json
import os
import sys

os.environ.setdefault("TI_SKIP_VERSION_CHECK", "ON")
os.environ.setdefault("ENABLE_TAICHI_HEADER_PRINT", "0")

import numpy as np  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from timing import ARCH, median_time  # noqa: E402
from torch_fem_reference import TorchFEM  # noqa: E402

import gradsim_taichi as gs  # noqa: E402
from gradsim_taichi import meshes  # noqa: E402

THREADS = 2
SUBSTEPS = 16
E, NU, RHO, DAMPING = 5e4, 0.3, 1000.0, 2.0
NAMES = ["tet_mu", "tet_lambda", "tet_damping", "tet_activation", "initial_velocity"]


def scene(kind):
    if kind == "gear":
        return meshes.tet_gear()
    return meshes.tet_box(size=(1.0, 1.0, 1.0), resolution=(12, 12, 12))


def build(kind, frames):
    v, t = scene(kind)
    mu, lam = E / (2 * (1 + NU)), E * NU / ((1 + NU) * (1 - 2 * NU))
    rng = np.random.default_rng(0)
    b = gs.ModelBuilder(ground=False)
    b.add_soft_mesh(v, t, density=RHO, mu=mu, lam=lam, damping=DAMPING,
                    velocity=0.3 * rng.standard_normal(v.shape), origin=(0.0, 1.0, 0.0))
    model = b.finalize()
    sim = gs.Simulation(model, frames=frames, substeps=SUBSTEPS)
    count = model.fem.count
    sim.set_param("tet_activation", 0.05 * rng.standard_normal((frames, count)))
    sim.set_param("tet_mu", mu * (1 + 0.1 * rng.random(count)))
    return model, sim


def reference_from(model, sim):
    dtype = gs.runtime.torch_dtype()
    fem, p = model.fem, model.particles

    def tt(a):
        return torch.as_tensor(np.asarray(a), dtype=dtype)

    ref = TorchFEM(torch.as_tensor(fem._tets, dtype=torch.long), tt(fem._dm_inv), tt(fem._vol),
                   tt(p.mass.to_numpy()), torch.as_tensor(p.pinned.to_numpy() != 0),
                   tt(p.gravity.to_numpy()), sim.dt, sim.substeps)
    values = {n: tt(sim.get_param(n)) for n in NAMES}
    x0 = tt(sim.get_param("initial_position"))
    return ref, values, x0


def ref_rollout(ref, values, x0, frames):
    return ref.rollout(x0, values["initial_velocity"], values["tet_mu"], values["tet_lambda"],
                       values["tet_damping"], values["tet_activation"], frames)


def run_case(kind, precision, frames, repeats):
    gs.init(arch=ARCH, precision=precision, threads=THREADS)
    torch.set_num_threads(THREADS)
    model, sim = build(kind, frames)
    ref, values, x0 = reference_from(model, sim)
    steps = frames * SUBSTEPS
    f64 = precision == "f64"

    # ---- agreement: trajectory and gradients -----------------------------------------
    ours = sim.forward()["particles"]
    weights = np.random.default_rng(1).standard_normal(ours.shape)
    sim.backward({"particles": weights.astype(ours.dtype)})
    leaves = {n: v.clone().requires_grad_(True) for n, v in values.items()}
    theirs = ref_rollout(ref, leaves, x0, frames)
    (theirs * torch.as_tensor(weights, dtype=theirs.dtype)).sum().backward()
    disp = np.abs(ours - ours[0]).max()
    err = np.abs(ours - theirs.detach().numpy()).max() / disp
    assert err < (1e-9 if f64 else 1e-3), f"{kind} {precision}: trajectories differ ({err:.3g})"
    for n in NAMES:
        g_ours, g_ref = sim.param_grad(n), leaves[n].grad.numpy()
        gerr = np.abs(g_ours - g_ref).max() / np.abs(g_ref).max()
        assert gerr < (1e-7 if f64 else 1e-2), f"{kind} {precision}: d/d{n} differs ({gerr:.3g})"

    # ---- timing ----------------------------------------------------------------------
    grads = {"particles": weights.astype(ours.dtype)}

    def ours_fwd():
        sim.forward()

    def ours_bwd():
        sim.forward()
        sim.backward(grads)

    def ref_fwd():
        with torch.no_grad():
            ref_rollout(ref, values, x0, frames)

    w = torch.as_tensor(weights, dtype=values["tet_mu"].dtype)

    def ref_bwd():
        leaves = {n: v.clone().requires_grad_(True) for n, v in values.items()}
        (ref_rollout(ref, leaves, x0, frames) * w).sum().backward()

    label = f"{kind}_{model.fem.count}tets_{precision}"
    rows = []
    for mode, ours_fn, ref_fn in (("fwd", ours_fwd, ref_fwd), ("fwd+bwd", ours_bwd, ref_bwd)):
        t_ours = median_time(ours_fn, repeats, warmup=True) / steps
        t_ref = median_time(ref_fn, repeats, warmup=True) / steps
        rows.append({"case": f"{label}_{mode}", "ours_s": t_ours, "reference_s": t_ref,
                     "speedup": t_ref / t_ours})
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short rollouts, fewer repeats")
    parser.add_argument("--json", metavar="PATH", help="write the results as JSON")
    parser.add_argument("--repeats", type=int, default=None)
    args = parser.parse_args(argv)
    frames = 2 if args.quick else 6
    repeats = args.repeats or (2 if args.quick else 5)
    cases = []
    print(f"{'case':<34} {'ours ms/substep':>16} {'torch ms/substep':>17} {'speedup':>8}")
    for kind in ("gear", "box"):
        for precision in ("f64", "f32"):
            for row in run_case(kind, precision, frames, repeats):
                cases.append(row)
                print(f"{row['case']:<34} {1e3 * row['ours_s']:>16.3f} "
                      f"{1e3 * row['reference_s']:>17.3f} {row['speedup']:>7.1f}x", flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"cases": cases}, fh, indent=2)


if __name__ == "__main__":
    main()

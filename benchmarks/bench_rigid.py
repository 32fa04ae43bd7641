"""Rigid-body benchmark: 1, 64 and 1024 icospheres (642 vertices each) dropped onto the
ground, plus one box over a full 1 s rollout (60 frames x 32 substeps).

The engine (one Taichi kernel per substep, checkpointed backward) against the
vectorized plain-PyTorch reference of the same model (``torch_rigid_reference.py``,
autograd for the backward), in this process, float64, 2 CPU threads. Before timing,
both must agree: vertex trajectories to 1e-9 and the gradients of a random linear loss
of the vertices w.r.t. mass, contact ke/kd/mu, initial velocity and angular velocity to
1e-7 of each gradient's largest entry.

Scenes start in contact (spheres 1 mm into the ground, with random velocities and
spins), so every substep does contact work. Reported: ms per substep of the forward
and of forward + backward (median of repeats after a compiling warm-up); for the
1-box case the whole rollout in seconds, the number of kernel launches and the share
of time as many launches of an empty kernel (through the engine's launcher) would take.

    python benchmarks/bench_rigid.py [--quick] [--json PATH]
"""

import argparse
import cProfile
import json
import os
import pstats
import sys

os.environ.setdefault("TI_SKIP_VERSION_CHECK", "ON")
os.environ.setdefault("ENABLE_TAICHI_HEADER_PRINT", "0")

import numpy as np  # noqa: E402
import taichi as ti  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from timing import ARCH, median_time  # noqa: E402
from torch_rigid_reference import from_system  # noqa: E402

import gradsim_taichi as gs  # noqa: E402
from gradsim_taichi.kernels import Launcher  # noqa: E402

THREADS = 2
CONTACT = dict(contact_ke=1e5, contact_kd=1e3, contact_kf=1e3, contact_mu=0.5)  # paper's
CHECKED = ["body_mass", "contact_ke", "contact_kd", "contact_mu", "body_velocity",
           "body_angular_velocity"]


def build(bodies: int, frames: int, substeps: int, box: bool = False):
    rng = np.random.default_rng(0)
    b = gs.ModelBuilder(**CONTACT)
    side = int(np.ceil(np.sqrt(bodies)))
    for i in range(bodies):
        pos = (0.25 * (i % side), 0.0, 0.25 * (i // side))
        vel = rng.normal(scale=0.3, size=3)
        spin = rng.normal(scale=2.0, size=3)
        if box:
            # 24 kg: with the paper's contact constants the one-sided damping of a lighter
            # box's rocking mode is explicit-unstable at this dt (chaotic adjoint)
            b.add_rigid_box((0.4, 0.2, 0.3), density=1000.0, position=(0, 0.3, 0),
                            velocity=(1.0, 0.0, 0.5), angular_velocity=(1.0, 3.0, 0.5))
        else:
            pos = (pos[0], 0.099, pos[2])
            b.add_rigid_sphere(0.1, 3, density=500.0, position=pos, velocity=vel,
                               angular_velocity=spin)
    return gs.Simulation(b.finalize(), frames=frames, substeps=substeps)


def check_equal(sim, weights):
    """Engine and reference agree on trajectories and gradients (raises otherwise)."""
    system = sim.model.systems[-1]
    ref, params = from_system(system, sim)
    out = sim.forward()["rigid"]
    sim.backward({"rigid": weights})
    leaves = {n: v.clone().requires_grad_(n in CHECKED) for n, v in params.items()}
    ref_out = ref.rollout(leaves, sim.frames, sim.substeps, sim.dt)
    np.testing.assert_allclose(ref_out.detach().numpy(), out, rtol=0, atol=1e-9)
    (ref_out * torch.from_numpy(weights)).sum().backward()
    for name in CHECKED:
        ours, theirs = sim.param_grad(name), leaves[name].grad.numpy()
        scale = np.abs(theirs).max()
        assert np.abs(ours - theirs).max() <= 1e-7 * scale, (name, ours, theirs)
    return ref, params


def run_case(name, sim, repeats, per_substep=True):
    weights = np.random.default_rng(1).normal(size=sim.model.systems[-1].output().shape)
    ref, params = check_equal(sim, weights)
    steps = sim.frames * sim.substeps if per_substep else 1
    w = torch.from_numpy(weights)

    def ours_fwd():
        sim.forward()

    def ours_both():
        sim.forward()
        sim.backward({"rigid": weights})

    def ref_fwd():
        with torch.no_grad():
            ref.rollout(params, sim.frames, sim.substeps, sim.dt)

    def ref_both():
        leaves = {n: v.clone().requires_grad_(n in CHECKED) for n, v in params.items()}
        (ref.rollout(leaves, sim.frames, sim.substeps, sim.dt) * w).sum().backward()

    rows = []
    for label, ours, theirs in (("fwd", ours_fwd, ref_fwd), ("fwd+bwd", ours_both, ref_both)):
        ours()  # warm-up
        t_ours = median_time(ours, repeats) / steps
        t_ref = median_time(theirs, max(1, repeats // 2)) / steps
        rows.append(dict(case=f"{name} {label}", ours_s=t_ours, reference_s=t_ref,
                         speedup=t_ref / t_ours))
    return rows


@ti.kernel
def _empty(row: ti.i32, frame: ti.i32, dt: float, t: float):
    pass


def launch_overhead(sim, weights):
    """Kernel launches of one fwd+bwd rollout and the cost of as many empty launches."""
    prof = cProfile.Profile()
    prof.enable()
    sim.forward()
    sim.backward({"rigid": weights})
    prof.disable()
    stats = pstats.Stats(prof).stats
    launches = sum(v[0] for k, v in stats.items() if k[2].endswith("launch_kernel}")
                   or k[2] == "<built-in method taichi._lib.core.taichi_python.launch_kernel>")
    # as the engine launches its substep kernels (gradsim_taichi/kernels.py)
    fast = Launcher(_empty._primal)
    fast(0, 0, 0.1, 0.0)
    per = median_time(lambda: [fast(i, 0, 0.1, 0.0) for i in range(1000)], 5) / 1000
    return launches, per


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="short rollouts, fewer repeats")
    parser.add_argument("--json", metavar="PATH", help="write the results as JSON")
    args = parser.parse_args()
    gs.init(arch=ARCH, threads=THREADS, precision="f64")
    torch.set_num_threads(THREADS)
    repeats = 3 if args.quick else 7
    cases = [(1, 2, 16), (64, 1, 16), (1024, 1, 4)] if args.quick else \
        [(1, 4, 32), (64, 2, 16), (1024, 1, 8)]
    rows = []
    for bodies, frames, substeps in cases:
        sim = build(bodies, frames, substeps)
        rows += run_case(f"{bodies} sphere(s) x 642 verts, {frames}x{substeps} substeps", sim,
                         repeats)
        print(f"  done: {bodies} bodies", flush=True)
    frames = 20 if args.quick else 60
    sim = build(1, frames, 32, box=True)
    rollout = run_case(f"1 box, {frames}x32 rollout (whole rollout, s)", sim, repeats,
                       per_substep=False)
    rows += rollout
    weights = np.zeros(sim.model.systems[-1].output().shape)
    launches, per_launch = launch_overhead(sim, weights)
    print(f"\n{'case':<62} {'ours':>12} {'torch':>12} {'speedup':>8}")
    for r in rows:
        unit = (1.0, "s ") if "whole" in r["case"] else (1e3, "ms")
        print(f"{r['case']:<62} {r['ours_s'] * unit[0]:>9.4f} {unit[1]} "
              f"{r['reference_s'] * unit[0]:>9.4f} {unit[1]} {r['speedup']:>7.1f}x")
    total = rollout[1]["ours_s"]
    print(f"\n1-box {frames}x32 fwd+bwd: {total:.3f} s, {launches} kernel launches; an empty "
          f"kernel launch (engine's launcher) takes {per_launch * 1e6:.1f} us, so launches are "
          f"{launches * per_launch:.3f} s ({100 * launches * per_launch / total:.0f}%)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"cases": rows, "launches_1box_fwd_bwd": launches,
                       "empty_launch_s": per_launch}, f, indent=1)


if __name__ == "__main__":
    main()

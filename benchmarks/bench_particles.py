"""Particle benchmark: a 64x64 cloth-like grid of springs falling onto the ground.

The engine (Taichi kernels, checkpointed backward) against a vectorized plain-PyTorch
implementation of the same model (``torch_particles_reference.py``, torch autograd
for the backward), both in this process on 2 CPU threads, in float64 and float32.

Scene: 64 x 64 particles (0.01 kg each) in the xz plane, 1 m wide, at y = 0.5 m,
joined by structural, shear and bend springs (23,938 springs, ke = 100 N/m,
kd = 0.05 N s/m), ground contact ke = 1e3, kd = 1, kf = 10, mu = 0.5. The grid first
falls for ``--drop-frames`` frames (untimed); the timed rollout of ``--frames``
frames x 32 substeps starts from there, so the grid lands on the ground inside it.

Before timing, the engine and the reference must agree: trajectory to rtol 1e-9
(f64) and the gradients of a fixed random linear loss of the frame positions with
respect to spring stiffness, spring damping, particle mass, contact ke / kd / kf / mu and the
initial velocity (f64: 1e-8 of each gradient's largest entry; f32: 1e-3).

Reported per precision: ms per substep of the forward rollout (reference under
``torch.no_grad``) and of forward + backward (ours: ``sim.forward`` + ``sim.backward``,
which recomputes each frame from its checkpoint; reference: forward with autograd
+ ``loss.backward()``), median of ``--repeats`` after a warm-up that compiles the
kernels; and ours forward + backward with every substep stored (``checkpoint=False``,
what ``checkpoint="auto"`` and the scenes pick for a rollout this size), after checking
it gives the checkpointed trajectory and gradients. Then the fraction of the
memory-bandwidth floor reached (see :func:`substep_bytes`; the target, 25% for the f64
stored forward + backward, is printed) and the stored state / peak RSS of checkpointed vs
full-storage backward for 60 frames x 32 substeps (each in a fresh subprocess).

    python benchmarks/bench_particles.py [--quick] [--json PATH] [--profile]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

os.environ.setdefault("TI_SKIP_VERSION_CHECK", "ON")
os.environ.setdefault("ENABLE_TAICHI_HEADER_PRINT", "0")

import numpy as np  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from timing import ARCH, best_time, interleaved_medians, median_time  # noqa: E402
from torch_particles_reference import (  # noqa: E402
    TorchParticles,
    cloth_grid,
    scene_from_simulation,
)

import gradsim_taichi as gs  # noqa: E402

THREADS = 2
SUBSTEPS = 32
MASS = 0.01
SPRING_KE, SPRING_KD = 100.0, 0.05
VEL_JITTER = 0.1
CONTACT = dict(contact_ke=1e3, contact_kd=1.0, contact_kf=10.0, contact_mu=0.5)
# issue 18: the fraction of the memory-bandwidth floor a substep reaches (forward and
# backward, the backward reading stored state as substep_bytes() counts it)
BANDWIDTH_TARGET = 0.25
# Gradients compared between the engine and the reference (the engine computes all).
GRAD_NAMES = ("spring_stiffness", "spring_damping", "mass", "contact_ke", "contact_kd",
              "contact_kf", "contact_mu", "initial_velocity")
TOL = {"f64": dict(traj=1e-9, grad=1e-8), "f32": dict(traj=1e-4, grad=1e-3)}


# ---- scene ------------------------------------------------------------------------------
def make_builder(n: int, height: float = 0.5, width: float = 1.0) -> gs.ModelBuilder:
    """The grid with a random initial velocity (0.1 m/s per component) so that it wrinkles:
    a uniform fall would never stretch a spring (zero stiffness gradients)."""
    pos, pairs = cloth_grid(n, width, height)
    vel = np.random.default_rng(1).normal(0.0, VEL_JITTER, pos.shape)
    b = gs.ModelBuilder(particle_radius=0.01, **CONTACT)
    b.add_particles(pos, velocities=vel, mass=MASS)
    b.add_springs(pairs, stiffness=SPRING_KE, damping=SPRING_KD)
    return b


def make_simulation(n: int, frames: int, drop_frames: int, checkpoint: bool = True):
    """The benchmark Simulation; its initial state is the grid after ``drop_frames`` frames
    of free fall from y = 0.5 (so the timed rollout contains the impact)."""
    b = make_builder(n)
    if drop_frames:
        drop = gs.Simulation(b.finalize(), frames=drop_frames, substeps=SUBSTEPS)
        x = drop.forward()["particles"][-1]
        v = drop.model.particles.vc.to_numpy()[-1]
    sim = gs.Simulation(b.finalize(), frames=frames, substeps=SUBSTEPS, checkpoint=checkpoint)
    if drop_frames:
        sim.set_param("initial_position", x)
        sim.set_param("initial_velocity", v)
    return sim


def loss_weights(frames: int, n_particles: int, seed: int = 0) -> np.ndarray:
    """dL/d(frame positions) of the linear loss L = sum(w * X)."""
    return np.random.default_rng(seed).standard_normal((frames + 1, n_particles, 3))


# ---- agreement check --------------------------------------------------------------------
def reference_grads(ref: TorchParticles, w: np.ndarray, names=GRAD_NAMES):
    leaves = {name: ref.tensor(name, requires_grad=True) for name in names}
    out = ref.rollout(leaves)
    (out * torch.as_tensor(w, dtype=ref.dtype)).sum().backward()
    return out.detach().numpy(), {k: t.grad.numpy().astype(np.float64) for k, t in leaves.items()}


def relative_errors(traj, grads, traj_ref, grads_ref) -> dict:
    """``{"trajectory" | gradient name: max |a - b| / max |b|}`` of two runs."""
    errors = {"trajectory": float(np.abs(traj - traj_ref).max() / np.abs(traj_ref).max())}
    for name, g_ref in grads_ref.items():
        g = np.asarray(grads[name], dtype=np.float64).reshape(g_ref.shape)
        errors[name] = float(np.abs(g - g_ref).max() / max(np.abs(g_ref).max(), 1e-300))
    return errors


def _grads(sim, w: np.ndarray):
    """The trajectory of ``sim`` and the gradients of ``sum(w * positions)``."""
    traj = sim.forward()["particles"]
    sim.backward({"particles": w.astype(traj.dtype)})
    return traj, {n: sim.param_grad(n).astype(np.float64) for n in GRAD_NAMES}


def compare(sim, ref: TorchParticles, w: np.ndarray, precision: str) -> dict:
    """Run both, return the worst relative errors; raise if they disagree."""
    tol = TOL[precision]
    errors = relative_errors(*_grads(sim, w), *reference_grads(ref, w))
    bad = {k: e for k, e in errors.items()
           if e > (tol["traj"] if k == "trajectory" else tol["grad"]) or not np.isfinite(e)}
    if bad:
        raise AssertionError(f"{precision}: engine and torch reference disagree: {bad}")
    return errors


def check_stored(sim, stored, w: np.ndarray) -> None:
    """The stored-substeps Simulation gives the checkpointed one's trajectory and
    gradients (to 1e-12 of each one's scale in f64, 1e-5 in f32)."""
    assert not stored.checkpoint and sim.checkpoint
    tol = 1e-12 if gs.runtime.np_dtype() == np.float64 else 1e-5
    errors = relative_errors(*_grads(stored, w), *_grads(sim, w))
    bad = {k: e for k, e in errors.items() if not e <= tol}
    if bad:
        raise AssertionError(f"stored and checkpointed backward disagree: {bad}")


# ---- timing -----------------------------------------------------------------------------


def time_cases(sim, stored, ref: TorchParticles, w: np.ndarray, repeats: int) -> dict:
    """Seconds per substep of ours / the reference, forward and forward+backward; and of
    ours with every substep stored (``stored``: the same model with ``checkpoint=False``,
    what ``checkpoint="auto"`` picks for a rollout this size, as the scenes run it).

    The measurements are interleaved repeat by repeat, so that a load change on a
    shared machine hits ours and the reference alike; each is the median of ``repeats``
    after one warm-up call (which compiles the kernels and their adjoints)."""
    steps = sim.frames * sim.substeps
    g = {"particles": w.astype(gs.runtime.np_dtype())}
    wt = torch.as_tensor(w, dtype=ref.dtype)

    def ours_fwd_bwd():
        sim.forward()
        sim.backward(g)

    def stored_fwd_bwd():
        stored.forward()
        stored.backward(g)

    def ref_fwd():
        with torch.no_grad():
            ref.rollout()

    def ref_fwd_bwd():
        leaves = {name: ref.tensor(name, requires_grad=True) for name in GRAD_NAMES}
        (ref.rollout(leaves) * wt).sum().backward()

    fns = {"ours fwd": sim.forward, "ours fwd+bwd": ours_fwd_bwd,
           "ours fwd+bwd stored": stored_fwd_bwd, "ref fwd": ref_fwd, "ref fwd+bwd": ref_fwd_bwd}
    return {k: t / steps for k, t in interleaved_medians(fns, repeats).items()}


# ---- memory-bandwidth floor ------------------------------------------------------------
def copy_bandwidth(mbytes: int = 256, repeats: int = 5) -> float:
    """Bytes/s of a large numpy copy (read + write counted)."""
    src = np.ones(mbytes * 2**20 // 8)
    dst = np.empty_like(src)
    np.copyto(dst, src)
    t = median_time(lambda: np.copyto(dst, src), repeats)
    return 2 * src.nbytes / t


def substep_bytes(n: int, s: int, itemsize: int) -> dict:
    """Bytes one substep must move between memory and the cores, at minimum.

    Forward (a fused step; R = float size, N particles, S springs):
      particle state  read x, v and write x', v'            12 N R
      forces          written by the force models, read by
                      the integrator                          6 N R
      per particle    mass, external force                    4 N R, pinned flag 4 N
      per spring      two int32 ends 8 S, ke, kd, rest        3 S R
    Backward (adjoint of one substep, state read from storage, no recomputation):
      primal state x, v read                                  6 N R
      adjoints of x', v' read, of x, v written               12 N R
      force adjoint written and read                          6 N R
      mass, external force read; their gradients r + w       12 N R, pinned 4 N
      spring ends, parameters read; parameter gradients r + w 8 S + 9 S R
    The checkpointed backward also recomputes each frame's forward; the floor does
    not count that (it is the price of storing frames*N instead of frames*substeps*N).
    """
    fwd = 22 * n * itemsize + 4 * n + 8 * s + 3 * s * itemsize
    bwd = 36 * n * itemsize + 4 * n + 8 * s + 9 * s * itemsize
    return {"fwd": fwd, "fwd+bwd": fwd + bwd}


# ---- memory of checkpointed vs full storage ----------------------------------------------
def _rss_kib(field: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def memory_child(n: int, checkpoint: bool, frames: int) -> dict:
    init("f64")
    b = make_builder(n)
    try:  # reset the peak-RSS mark (Linux >= 4.0), so VmHWM measures from here
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        pass
    base = _rss_kib("VmRSS")
    sim = gs.Simulation(b.finalize(), frames=frames, substeps=SUBSTEPS, checkpoint=checkpoint)
    t = time.perf_counter()
    out = sim.forward()["particles"]
    sim.backward({"particles": loss_weights(frames, out.shape[1]).astype(out.dtype)})
    elapsed = time.perf_counter() - t
    g = sim.param_grad("spring_stiffness")
    return {"checkpoint": checkpoint, "stored_state_bytes": sim.stored_state_bytes(),
            "peak_rss_delta_bytes": (_rss_kib("VmHWM") - base) * 1024,
            "fwd_bwd_s": elapsed, "grad_stiffness_sum": float(g.sum())}


def measure_memory(n: int, frames: int) -> list[dict]:
    rows = []
    for mode in ("checkpoint", "full"):
        cmd = [sys.executable, os.path.abspath(__file__), "--_memory-child", mode,
               "--n", str(n), "--memory-frames", str(frames), "--threads", str(THREADS)]
        res = subprocess.run(cmd, capture_output=True, text=True, check=True)
        rows.append(json.loads(res.stdout.strip().splitlines()[-1]))
    return rows


# ---- per-kernel profile --------------------------------------------------------------------
def profile_kernels(sim, repeats: int = 200) -> dict:
    """Seconds per launch of each kernel of a substep (and its adjoint), from back-to-back
    launches on row 0 (ti.sync() at the end), launched as the Simulation launches them."""
    import taichi as ti

    solver = sim.model.particle_system
    p = solver.particles
    (springs, _), = solver._force_kernels
    integrate = solver._integrate
    dt = sim.dt
    sim.forward()
    kernels = {
        "springs.apply": lambda: springs(p.x, p.v, p.f, 0),
        "integrate + contact": lambda: integrate(0, 0, dt),
        "springs.apply.grad": lambda: springs.grad(p.x, p.v, p.f, 0),
        "integrate + contact .grad": lambda: integrate.grad(0, 0, dt),
        "seed_segment (per frame)": lambda: p.seed_segment(0, 1, sim.substeps),
    }
    return {name: best_time(fn, repeats // 5, sync=ti.sync) for name, fn in kernels.items()}


# ---- main ---------------------------------------------------------------------------------
def init(precision: str) -> None:
    import taichi as ti

    gs.init(arch=ARCH, threads=THREADS, precision=precision)
    # set_param hands float64 arrays to float32 fields: silence the precision warnings
    ti.set_logging_level(ti.ERROR)


def run_precision(precision, args, bandwidth):
    init(precision)
    sim = make_simulation(args.n, args.frames, args.drop_frames)
    dtype = torch.float64 if precision == "f64" else torch.float32
    ref = TorchParticles(scene_from_simulation(sim), dtype=dtype)
    w = loss_weights(args.frames, sim.model.particle_count)
    errors = compare(sim, ref, w, precision)
    print(f"[{precision}] engine vs torch reference, max relative error: "
          + ", ".join(f"{k} {e:.1e}" for k, e in errors.items()), flush=True)
    stored = make_simulation(args.n, args.frames, args.drop_frames, checkpoint=False)
    check_stored(sim, stored, w)
    t = time_cases(sim, stored, ref, w, args.repeats)
    ours_f, ours_fb, ours_fbs, ref_f, ref_fb = (t["ours fwd"], t["ours fwd+bwd"],
                                                t["ours fwd+bwd stored"], t["ref fwd"],
                                                t["ref fwd+bwd"])
    springs = len(ref.i)
    nbytes = substep_bytes(sim.model.particle_count, springs, 8 if precision == "f64" else 4)
    cases = [
        {"case": f"{precision} fwd", "ours_s": ours_f, "reference_s": ref_f,
         "speedup": ref_f / ours_f},
        {"case": f"{precision} fwd+bwd", "ours_s": ours_fb, "reference_s": ref_fb,
         "speedup": ref_fb / ours_fb},
    ]
    cases.append({"case": f"{precision} fwd+bwd stored", "ours_s": ours_fbs,
                  "reference_s": ref_fb, "speedup": ref_fb / ours_fbs})
    floors = []
    # (the floor's backward reads the stored state: the stored run is the like-for-like
    # one; the checkpointed run also recomputes every frame's forward)
    for case, key, t in ((cases[0], "fwd", ours_f), (cases[1], "fwd+bwd", ours_fb),
                         (cases[2], "fwd+bwd", ours_fbs)):
        floor = nbytes[key] / bandwidth
        floors.append({"case": case["case"], "bytes": nbytes[key], "floor_s": floor,
                       "fraction": floor / t})
    profile = profile_kernels(sim) if args.profile else None
    return cases, floors, profile, springs


def main(argv=None):
    global THREADS
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="32x32 grid, fewer repeats")
    ap.add_argument("--json", metavar="PATH", help="write the cases as JSON")
    ap.add_argument("--profile", action="store_true", help="time each kernel of a substep")
    ap.add_argument("--n", type=int, default=None, help="grid side (default 64; quick 32)")
    ap.add_argument("--frames", type=int, default=None, help="timed frames (default 4)")
    ap.add_argument("--drop-frames", type=int, default=19, help="untimed fall before timing")
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--memory-frames", type=int, default=60)
    ap.add_argument("--no-memory", action="store_true", help="skip the memory measurement")
    ap.add_argument("--precisions", default="f64,f32")
    ap.add_argument("--threads", type=int, default=THREADS,
                    help="CPU threads of both sides (the targets are for 2)")
    ap.add_argument("--_memory-child", dest="memory_child", choices=("checkpoint", "full"),
                    help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    THREADS = args.threads
    args.n = args.n or (32 if args.quick else 64)
    if args.memory_child:
        print(json.dumps(memory_child(args.n, args.memory_child == "checkpoint",
                                      args.memory_frames)))
        return
    args.frames = args.frames or (2 if args.quick else 4)
    args.repeats = args.repeats or (3 if args.quick else 5)
    torch.set_num_threads(THREADS)

    load_before = os.getloadavg()[0]
    bandwidth = copy_bandwidth(64 if args.quick else 256)
    all_cases, all_floors, profiles = [], [], {}
    for precision in args.precisions.split(","):
        cases, floors, profile, springs = run_precision(precision, args, bandwidth)
        all_cases += cases
        all_floors += floors
        if profile:
            profiles[precision] = profile

    load = (load_before, os.getloadavg()[0])
    print(f"\n{args.n}x{args.n} particles, {springs} springs, {args.frames} frames x {SUBSTEPS} "
          f"substeps, {THREADS} threads (torch {torch.__version__}), 1-min load average "
          f"{load[0]:.1f} before / {load[1]:.1f} after on {os.cpu_count()} cores")
    if max(load) > (os.cpu_count() or 1):
        print("WARNING: the machine is oversubscribed; both sides slow down, the reference "
              "(many small multi-threaded ops, each a thread barrier) far more than ours")
    print(f"{'case':<21} {'ours ms/substep':>16} {'reference ms/substep':>21} {'speedup':>8}")
    for c in all_cases:
        print(f"{c['case']:<21} {1e3 * c['ours_s']:>16.3f} {1e3 * c['reference_s']:>21.3f} "
              f"{c['speedup']:>7.2f}x")
    targets = {"f64 fwd+bwd": 5.0, "f32 fwd+bwd": 3.0}
    for c in all_cases:
        if c["case"] in targets:
            ok = c["speedup"] >= targets[c["case"]]
            print(f"target {c['case']} >= {targets[c['case']]:.0f}x: "
                  f"{'met' if ok else 'MISSED'} ({c['speedup']:.2f}x)")

    print(f"\nmemory-bandwidth floor (numpy copy {bandwidth / 1e9:.2f} GB/s, 1 thread; "
          "bytes per substep in substep_bytes())")
    for f in all_floors:
        print(f"{f['case']:<21} {f['bytes'] / 1e6:6.2f} MB/substep  floor "
              f"{1e3 * f['floor_s']:.3f} ms  ->  {100 * f['fraction']:.1f}% of the floor")
    for f in all_floors:
        if f["case"] == "f64 fwd+bwd stored":
            ok = f["fraction"] >= BANDWIDTH_TARGET
            print(f"target f64 fwd+bwd stored >= {100 * BANDWIDTH_TARGET:.0f}% of the floor: "
                  f"{'met' if ok else 'MISSED'} ({100 * f['fraction']:.1f}%)")

    for precision, prof in profiles.items():
        print(f"\nper-kernel time, {precision} (ms per launch; a substep launches each "
              "of the first four once)")
        for name, t in prof.items():
            print(f"  {name:<26} {1e3 * t:8.3f}")

    memory = None
    if not args.no_memory:
        memory = measure_memory(args.n, args.memory_frames)
        print(f"\nbackward memory, {args.memory_frames} frames x {SUBSTEPS} substeps, "
              f"{args.n}x{args.n} grid, f64 (each mode in a fresh process)")
        for m in memory:
            mode = "checkpointed" if m["checkpoint"] else "full storage"
            print(f"  {mode:<13} stored state {m['stored_state_bytes'] / 2**20:9.1f} MiB   "
                  f"peak RSS delta {m['peak_rss_delta_bytes'] / 2**20:9.1f} MiB   "
                  f"fwd+bwd {m['fwd_bwd_s']:.2f} s")
        ratio = memory[1]["stored_state_bytes"] / memory[0]["stored_state_bytes"]
        print(f"  full / checkpointed stored state: {ratio:.1f}x")

    if args.json:
        with open(args.json, "w") as fh:
            meta = {"grid": args.n, "springs": springs, "frames": args.frames,
                    "substeps": SUBSTEPS, "threads": THREADS, "load_average": load,
                    "copy_bandwidth_Bps": bandwidth, "bandwidth_floor": all_floors,
                    "memory": memory, "profile_s": profiles or None}
            json.dump({"cases": all_cases, "meta": meta}, fh, indent=2)
        print(f"\nwrote {args.json}")


if __name__ == "__main__":
    main()

"""Peers benchmark: our engine against NVIDIA warp.sim and Newton on the CPU.

Two models, each built in every engine from ONE topology generated here in numpy
(``cloth_topology``, ``box_topology``):

- cloth: 1 m x 1 m, 64 x 64 cells (4,225 particles, 8,192 triangles, 12,160 hinges) at
  y = 0.025 m, 1 g per particle, tri_ke = tri_ka = 100, tri_kd = 0, edge_ke = 0.01,
  edge_kd = 1e-4, a random initial velocity around (0, -1, 0) m/s, gravity, falling onto
  the ground plane y = 0 (contact ke = 1e3, kd = 0.5, kf = 0.5, mu = 0.5, radius 1 cm);
- FEM box: 0.5 m cube of 12^3 cells (2,197 particles, 10,368 tets, 6 per cell), stable
  neo-Hookean (E = 5e4 Pa, nu = 0.3, 1000 kg/m^3, damping 2 Pa s), a random initial
  velocity around (0, -1, 0) m/s, gravity, ground (ke = 1e4, kd = 10, kf = 10, mu = 0.5).

Engines, each in its own process (one per engine and thread count), f32 unless noted:
ours (gradsim_taichi) at 1 and 2 threads, and at 2 threads in f64; warp.sim
(``warp-lang==1.9.*``, the last release with ``warp.sim``:
``SemiImplicitIntegrator``); Newton (``SolverSemiImplicit``; its current release needs a
newer warp than 1.9, so it runs from its own Python, ``--newton-python``, default
``.venv-newton/bin/python`` when it exists). warp's CPU kernels use one thread.

Measured per substep, ``--frames`` frames x 16 substeps at 60 fps, after a warm-up:
forward only, and forward + backward of the scalar loss ``L = sum_i w_i . x_i(T)`` on the
final positions (``w`` a fixed random field): ours ``Simulation.forward`` +
``Simulation.backward`` with ``checkpoint="auto"`` (these rollouts fit its memory budget,
so every substep is stored, as on the peers' tapes; no recomputation); warp.sim / Newton:
``wp.Tape`` recording every substep into a list of states, then ``tape.backward``.
Forward only in warp.sim / Newton ping-pongs two states (no tape). The workers stay
alive and the repeats are interleaved (A B C A B C ...), one worker running at a time;
medians are reported, and the speedups peer / ours are of the same run.

Backward peak memory: a fresh process per engine runs 60 frames x 32 substeps forward +
backward; reported is the rise of its peak RSS (``VmHWM``, reset through
``/proc/self/clear_refs`` after the warm-up; native buffers included) over the rollout,
ours checkpointed (the same ``"auto"``: this rollout is over its budget) against the
peers' tapes. Ours' rise includes compiling the fresh
model's kernels (Taichi compiles per model instance); the state it keeps
(``Simulation.stored_state_bytes``) is printed beside it.

Agreement, side by side: the mean particle position after the timed rollout, and the
gradient dL/d(initial velocities) after one frame of free flight (the model lifted 1 m,
a fresh process per engine): its norm and its relative difference to ours in f64
(through contact the plain law's gradient has no term for the jump of its damping at
first touch, so gradients are compared without contact). What differs between the
engines' models (read from warp.sim 1.9 and Newton's sources):

- ground contact: ours is gradSim's penalty law made C1 (the elastic force blends in
  over 0.1 mm, damping ramps in over 1 mm, friction saturates with tanh); here both
  widths are shrunk to 1 um (``--smooth-contact`` keeps ours' defaults: the same
  kernels, so the same speed, but a visibly different bounce), leaving the friction's
  tanh against warp.sim's plain ``min(kf |vt|, mu |fn|)`` (normal ``ke c + kd min(vn,
  0)``). Newton contacts the ground as a shape through its collision pipeline (run every
  substep, as its diffsim examples do; its time is in Newton's numbers), caps friction at
  ``mu ke c`` (damping excluded) and averages particle and shape materials (both set to
  the same values here);
- bending: ours and warp.sim use dtheta/dx = |e| n / |n|^2 (Bridson); Newton uses unit
  normals, |e| n_hat: for the same ke its elastic forces are |n| (twice the triangle
  area) times ours and its damping forces |n|^2 times, so Newton gets
  ``edge_ke / |n_rest|`` and ``edge_kd / |n_rest|^2`` per hinge (equal forces at rest);
- membrane damping: warp.sim / Newton damp dF/dt (deviatoric) and the area rate with
  the same tri_kd; ours damps the area rate only (so tri_kd = 0 here);
- FEM: all three are Smith et al.'s stable neo-Hookean; ours takes Lame parameters and
  uses mu' = 4/3 mu, lam' = lam + 5/6 mu (passed to the peers as their k_mu, k_lambda);
  ours damps sym(F^T dF/dt) and dJ/dt (rotation invariant), the peers damp dF/dt and
  dJ/dx . v without the first vertex's velocity;
- the peers clamp speeds at ``particle_max_velocity`` (1e5 m/s: never reached here) and
  skip hinges whose normals are shorter than 1e-6; their particle-particle and triangle
  self-contact are switched off (ours has neither).

    python benchmarks/bench_peers.py [--quick] [--json PATH] [--scenes cloth,fem]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

# the models beside this script (also when it runs as a worker or is imported)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_models import (  # noqa: E402, F401 (FPS, FEM, topology: re-exported)
    FEM,
    FPS,
    Ours,
    box_topology,
    cloth_topology,
    make_engine,
    tet_volumes,
)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SUBSTEPS = 16
MEMORY_ROLLOUT = (60, 32)  # frames x substeps of the backward-memory run
MARK = "@@"  # prefix of the workers' protocol lines (engines print to stdout too)

ENGINES = ("ours-1t", "ours-2t", "ours-2t-f64", "warp.sim", "newton")
PEERS = ("warp.sim", "newton")


class CLIError(Exception):
    """A bad command line: reported in one line, exit status 2."""


def scene_data(scene: str, quick: bool) -> dict:
    """The topology, initial velocities and loss weights of ``scene`` ("cloth"/"fem")."""
    if scene == "cloth":
        topo = cloth_topology(16 if quick else 64)
    elif scene == "fem":
        topo = box_topology(4 if quick else 12)
    else:
        raise CLIError(f"unknown scene {scene!r}; expected cloth or fem")
    rng = np.random.default_rng(1)
    n = len(topo["x"])
    topo["v"] = rng.normal(0.0, 0.3, (n, 3)) + np.array([0.0, -1.0, 0.0])
    topo["w"] = np.random.default_rng(0).standard_normal((n, 3))
    return topo


# ---- worker processes ---------------------------------------------------------------------
def _say(obj) -> None:
    print(MARK + json.dumps(obj), flush=True)


def _rss_mb(key: str) -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def worker(args) -> None:
    """One engine in this process: build, warm up, then answer the parent's commands
    (``fwd``, ``fwd+bwd``: run once and reply with the seconds; ``quit``)."""
    data = scene_data(args.scene, args.quick)
    if args.memory:
        frames, substeps = MEMORY_ROLLOUT if not args.quick else (4, 32)
        warm = make_engine(args.worker, args.scene, data, 1, substeps, args.smooth_contact)
        warm.forward_backward()  # compiles every kernel and adjoint
        try:  # reset the peak RSS to the current RSS (Linux >= 4.0)
            with open("/proc/self/clear_refs", "w") as fh:
                fh.write("5")
            reset = True
        except OSError:
            reset = False
        before = _rss_mb("VmRSS") if reset else _rss_mb("VmHWM")
        eng = make_engine(args.worker, args.scene, data, frames, substeps, args.smooth_contact)
        eng.forward_backward()
        stored = eng.sim.stored_state_bytes() / 2**20 if isinstance(eng, Ours) else None
        _say({"peak_rss_delta_mb": _rss_mb("VmHWM") - before, "hwm_reset": reset,
              "stored_mb": stored, "frames": frames, "substeps": substeps})
        return
    if args.gradcheck:  # lifted 1 m: one frame of free flight, no contact
        data["x"] = data["x"] + np.array([0.0, 1.0, 0.0])
        eng = make_engine(args.worker, args.scene, data, 1, SUBSTEPS, args.smooth_contact)
        _say({"grad_v0": np.asarray(eng.grad_v0(), dtype=np.float64).ravel().tolist()})
        return
    t = time.perf_counter()
    eng = make_engine(args.worker, args.scene, data, args.frames, SUBSTEPS, args.smooth_contact)
    final = np.asarray(eng.forward(), dtype=np.float64)
    eng.forward_backward()
    fns = {"fwd": eng.forward, "fwd+bwd": eng.forward_backward}
    _say({"ready": True, "setup_s": time.perf_counter() - t, "mean": final.mean(0).tolist()})
    for line in sys.stdin:
        cmd = line.strip()
        if cmd == "quit":
            break
        t = time.perf_counter()
        fns[cmd]()
        _say({"s": time.perf_counter() - t})


class Worker:
    """The parent's handle on one worker process."""

    def __init__(self, engine, scene, args, mode=None):
        python = args.newton_python if engine == "newton" else sys.executable
        cmd = [python, os.path.abspath(__file__), "--worker", engine, "--scene", scene,
               "--frames", str(args.frames)] + (["--quick"] if args.quick else []) \
            + ([f"--{mode}"] if mode else []) \
            + (["--smooth-contact"] if args.smooth_contact else [])
        self.engine = engine
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, cwd=ROOT)

    def read(self) -> dict:
        for line in self.proc.stdout:
            if line.startswith(MARK):
                return json.loads(line[len(MARK):])
        rc = self.proc.wait()
        raise RuntimeError(f"{self.engine} worker ended (exit {rc}) without answering")

    def ask(self, cmd: str) -> dict:
        self.proc.stdin.write(cmd + "\n")
        self.proc.stdin.flush()
        return self.read()

    def close(self):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write("quit\n")
                self.proc.stdin.flush()
            except BrokenPipeError:
                pass
            self.proc.wait(timeout=60)


def time_scene(scene, engines, args) -> dict:
    """Start every engine's worker (one after the other), then interleave the repeats."""
    workers, means, times = {}, {}, {}
    try:
        for e in engines:
            w = Worker(e, scene, args)
            try:
                means[e] = w.read()["mean"]
                workers[e] = w
            except RuntimeError as err:
                print(f"  {scene}: {e} skipped: {err}", flush=True)
        for mode in ("fwd", "fwd+bwd"):
            samples = {e: [] for e in workers}
            for _ in range(args.repeats):
                for e, w in workers.items():
                    samples[e].append(w.ask(mode)["s"])
            for e, s in samples.items():
                times[(e, mode)] = statistics.median(s) / (args.frames * SUBSTEPS)
    finally:
        for w in workers.values():
            w.close()
    return dict(means=means, times=times)


def one_shot(scene, engines, args, mode) -> dict:
    """Run ``mode`` ("memory" or "gradcheck") in a fresh worker per engine, in turn."""
    out = {}
    for e in engines:
        w = Worker(e, scene, args, mode=mode)
        try:
            out[e] = w.read()
        except RuntimeError as err:
            print(f"  {scene} {mode}: {e} skipped: {err}", flush=True)
        finally:
            w.proc.wait()
    return out


def gradcheck_scene(scene, engines, args) -> dict:
    """dL/d(initial velocities) after one frame of free flight: each engine's norm and
    its relative difference to ours (f64 if run)."""
    grads = {e: np.array(r["grad_v0"]) for e, r in one_shot(scene, engines, args,
                                                             "gradcheck").items()}
    ref = next((e for e in ("ours-2t-f64", "ours-2t", "ours-1t") if e in grads), None)
    if ref is None:
        return {}
    norm = np.linalg.norm(grads[ref])
    return dict(ref=ref, norm={e: float(np.linalg.norm(g)) for e, g in grads.items()},
                rel_diff={e: float(np.linalg.norm(g - grads[ref]) / norm)
                          for e, g in grads.items()})


def default_newton_python() -> str:
    venv = os.path.join(ROOT, ".venv-newton", "bin", "python")
    return venv if os.path.exists(venv) else sys.executable


def parse(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="small models (cloth 16x16, box 4^3), 1 frame, 2 repeats")
    ap.add_argument("--json", metavar="PATH", help="write the results as JSON")
    ap.add_argument("--scenes", default="cloth,fem", help="comma separated (cloth,fem)")
    ap.add_argument("--engines", default=",".join(ENGINES),
                    help=f"comma separated, from {','.join(ENGINES)}")
    ap.add_argument("--frames", type=int, default=None, help="frames per timed rollout (4)")
    ap.add_argument("--repeats", type=int, default=None, help="interleaved repeats (5)")
    ap.add_argument("--no-memory", action="store_true", help="skip the backward-memory runs")
    ap.add_argument("--no-gradcheck", action="store_true",
                    help="skip the free-flight gradient agreement")
    ap.add_argument("--smooth-contact", action="store_true",
                    help="ours with its default C1 contact (else shrunk to the peers' plain "
                         "law; the same speed, closer agreement)")
    ap.add_argument("--newton-python", default=default_newton_python(),
                    help="the Python that has newton (default .venv-newton/bin/python if "
                         "present, else this one)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--scene", help=argparse.SUPPRESS)
    ap.add_argument("--memory", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--gradcheck", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    args.frames = args.frames or (1 if args.quick else 4)
    args.repeats = args.repeats or (2 if args.quick else 5)
    if args.frames < 1 or args.repeats < 1:
        raise CLIError("--frames and --repeats must be >= 1")
    args.scene_list = [s for s in args.scenes.split(",") if s]
    args.engine_list = [e for e in args.engines.split(",") if e]
    for s in args.scene_list:
        if s not in ("cloth", "fem"):
            raise CLIError(f"unknown scene {s!r}; expected cloth or fem")
    for e in args.engine_list + ([args.worker] if args.worker else []):
        if e not in ENGINES:
            raise CLIError(f"unknown engine {e!r}; expected one of {', '.join(ENGINES)}")
    return args


def report(results, args) -> list[dict]:
    rows = []
    ours = [e for e in args.engine_list if e.startswith("ours")]
    peers = [e for e in args.engine_list if e in PEERS]
    for scene, r in results.items():
        for mode in ("fwd", "fwd+bwd"):
            row = {"scene": scene, "mode": mode,
                   "ms_per_substep": {e: 1e3 * t for (e, m), t in r["times"].items()
                                      if m == mode}}
            row["speedup"] = {f"{p}/{o}": r["times"][(p, mode)] / r["times"][(o, mode)]
                              for p in peers for o in ours
                              if (p, mode) in r["times"] and (o, mode) in r["times"]}
            rows.append(row)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"\n{args.frames} frames x {SUBSTEPS} substeps, median of {args.repeats} interleaved "
          f"repeats, load average {load:.1f}; ms per substep (f32 unless noted)")
    names = [e for e in args.engine_list]
    print(f"{'case':<14}" + "".join(f"{e:>13}" for e in names)
          + "   speedup peer/ours-2t (ours-1t)")
    for row in rows:
        ms = row["ms_per_substep"]
        sp = "  ".join(f"{p} " + " ".join(
            (f"{v:.1f}x" if o == "ours-2t" else f"({v:.1f}x)")
            for o in ("ours-2t", "ours-1t")
            if (v := row["speedup"].get(f"{p}/{o}")) is not None) for p in peers)
        print(f"{row['scene'] + ' ' + row['mode']:<14}"
              + "".join(f"{ms.get(e, float('nan')):13.3f}" for e in names) + "   " + sp)
    for scene, r in results.items():
        g = r.get("grad", {})
        print(f"\n{scene}: mean particle position after the timed rollout; dL/dv0 after one "
              f"frame of free flight (lifted 1 m){'' if g else ': not run'}")
        print(f"  {'':<12} {'x':>8} {'y':>8} {'z':>8}"
              + (f"   {'|dL/dv0|':>9}   rel. diff to {g['ref']}" if g else ""))
        for e, m in r["means"].items():
            extra = (f"   {g['norm'][e]:9.4f}   {g['rel_diff'][e]:.1e}"
                     if g and e in g["norm"] else "")
            print(f"  {e:<12} " + " ".join(f"{c:+.5f}" for c in m) + extra)
        if r.get("memory"):
            f, s = MEMORY_ROLLOUT if not args.quick else (4, 32)
            print(f"{scene}: backward peak RSS rise, {f} frames x {s} substeps: "
                  + ", ".join(f"{e} {m['peak_rss_delta_mb']:.0f} MB"
                              + (f" (state {m['stored_mb']:.0f} MB; the rest compiles the "
                                 "fresh model's kernels)" if m.get("stored_mb") else "")
                              for e, m in r["memory"].items()))
    if args.json:
        meta = dict(frames=args.frames, substeps=SUBSTEPS, repeats=args.repeats,
                    load_average=load, quick=args.quick, memory_rollout=MEMORY_ROLLOUT)
        flat = [{"case": f"{r['scene']} {r['mode']}: {p} (f32) vs {o}",
                 "ours_s": r["ms_per_substep"][o] / 1e3,
                 "reference_s": r["ms_per_substep"][p] / 1e3, "speedup": sp}
                for r in rows for key, sp in r["speedup"].items()
                for p, o in [key.split("/")]]
        out = dict(cases=flat, table=rows, meta=meta,
                   means={s: r["means"] for s, r in results.items()},
                   grad_v0_free_flight={s: r.get("grad", {}) for s, r in results.items()},
                   memory={s: r.get("memory", {}) for s, r in results.items()})
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=2)
    return rows


def main(argv=None):
    try:
        args = parse(argv)
    except CLIError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    if args.worker:
        return worker(args)
    results = {}
    for scene in args.scene_list:
        print(f"{scene}: starting {', '.join(args.engine_list)}", flush=True)
        results[scene] = time_scene(scene, args.engine_list, args)
        once = [e for e in args.engine_list if e != "ours-1t"]  # same results as ours-2t
        if not args.no_gradcheck:
            results[scene]["grad"] = gradcheck_scene(scene, once, args)
        if not args.no_memory:
            results[scene]["memory"] = one_shot(
                scene, [e for e in once if e != "ours-2t-f64"], args, "memory")
    return report(results, args)


if __name__ == "__main__":
    main()

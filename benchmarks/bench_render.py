"""Benchmark: the Taichi soft rasterizer vs the dense plain-PyTorch reference of the same
formula (``tests/softras_reference.py``), in one process, results checked equal.

Both sides take the same packed per-face inputs (projection and shading are shared torch
code and are not timed). Cases: 128x128 and 256x256 images, spheres of about 1k and 10k
triangles, 1 frame and a 30-frame batch; forward and forward+backward.

The dense reference costs (pixels x faces) per frame, so for large cases it is run on a
band of image rows of the first frame and its time scaled to the whole batch (marked
``"reference_estimated": true``); the equality check then covers that band (the gradient
check uses an output gradient that is zero outside the band).

Usage: ``python benchmarks/bench_render.py [--quick] [--json PATH] [--threads N]``
(``GRADSIM_RASTER_SHAPE=pixel`` times the GPU's kernel shape on the CPU).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from timing import ARCH, best_time  # noqa: E402

import gradsim_taichi as gs  # noqa: E402

KEYS = ("xy", "z", "col", "tex", "bg", "uv", "texid", "texsize")
DIFF = (0, 1, 2, 4)  # xy, z, col, bg


def make_scene(size: int, faces: int, frames: int):
    """A lit sphere moving across the view; returns (rasterizer, packed leaf inputs)."""
    import trimesh

    from gradsim_taichi.render import Camera, Mesh, SoftRasterizer

    if faces < 3000:
        mesh = trimesh.creation.icosphere(subdivisions=3)  # 1280 faces
    else:
        mesh = trimesh.creation.uv_sphere(count=[51, 51])  # 10400 faces
    cam = Camera.look_at((0.0, 0.8, 3.2), (0, 0, 0), fov_y_deg=45, width=size, height=size)
    g = torch.Generator().manual_seed(0)
    colours = torch.rand(len(mesh.faces), 3, generator=g, dtype=torch.float64)
    r = SoftRasterizer(cam, Mesh(mesh.faces, face_colors=colours), background=(0.3, 0.4, 0.5))
    from gradsim_taichi import runtime

    dev = runtime.torch_device()  # the engine's: CUDA with GRADSIM_BENCH_ARCH=cuda
    v = torch.tensor(mesh.vertices, dtype=torch.float64, device=dev)
    t = torch.linspace(-0.3, 0.3, frames, dtype=torch.float64, device=dev)
    shift = torch.stack([t, 0.2 * t, 0 * t], -1)[:, None, :]
    p, _ = r.prepare(v[None] + shift)
    args = [p[k] for k in KEYS]
    args = [a.detach().contiguous() if isinstance(a, torch.Tensor) else a for a in args]
    return r, args, len(mesh.faces)


def run_ours(args, st, backward: bool, gout=None):
    from gradsim_taichi.render import SoftRasterFunction

    leaves = [a.detach().requires_grad_(i in DIFF) if a is not None else None
              for i, a in enumerate(args)]  # fmt: skip
    out = SoftRasterFunction.apply(*leaves, st)
    grads = None
    if backward:
        g = torch.ones_like(out) if gout is None else gout
        grads = torch.autograd.grad(out, [leaves[i] for i in DIFF], g)
    return out.detach(), grads


def run_reference(args, st, rows, backward: bool, gout_full, chunk: int):
    """Dense reference over ``rows``, chunked; returns (out rows, grads, seconds)."""
    from softras_reference import soft_rasterize_reference

    leaves = [a.detach().requires_grad_(i in DIFF) if a is not None else None
              for i, a in enumerate(args)]  # fmt: skip
    kw = dict(sigma=st.sigma, gamma=st.gamma, near=st.near, far=st.far, eps=st.eps,
              threshold=st.threshold)  # fmt: skip
    outs = []
    t0 = time.perf_counter()
    for start in range(0, len(rows), chunk):
        rr = rows[start : start + chunk]
        if backward:
            o = soft_rasterize_reference(*leaves, rows=rr, **kw)
            (o * gout_full[:, rr]).sum().backward()
        else:
            with torch.no_grad():
                o = soft_rasterize_reference(*leaves, rows=rr, **kw)
        outs.append(o.detach())
    secs = time.perf_counter() - t0
    grads = [leaves[i].grad for i in DIFF] if backward else None
    return torch.cat(outs, 1), grads, secs


def bench_case(size, faces, frames, backward, budget_pairs, repeat):
    r, args, T = make_scene(size, faces, frames)
    st = r.settings
    H = W = size
    F = frames
    # best of `repeat` runs after a warm-up that compiles
    ours = best_time(lambda: run_ours(args, st, backward), blocks=repeat)
    # reference on a band of rows of the first frame (all of it when it fits the budget)
    ref_args = [a[:1] if i in (0, 1, 2) else a for i, a in enumerate(args)]
    pairs_per_row = W * T
    nrows = max(1, min(H, budget_pairs // pairs_per_row))
    r0 = (H - nrows) // 2
    rows = torch.arange(r0, r0 + nrows)
    chunk = max(1, min(nrows, 2_000_000 // pairs_per_row))
    gout = torch.rand(1, H, W, 4, generator=torch.Generator().manual_seed(3),
                      dtype=torch.float64).to(args[0].device)
    ref_out, ref_grads, ref_secs = run_reference(ref_args, st, rows, backward, gout, chunk)
    scale = (H / nrows) * F
    reference = ref_secs * scale
    # equality check on the band of frame 0
    band = torch.zeros_like(gout)
    band[:, rows] = gout[:, rows]
    our_out, our_grads = run_ours(ref_args, st, backward, band)
    diff = (our_out[:, rows] - ref_out).abs().max().item()
    gdiff = 0.0
    if backward:
        for a, b in zip(our_grads, ref_grads, strict=True):
            gdiff = max(gdiff, (a - b).abs().max().item() / max(1.0, b.abs().max().item()))
    ok = diff < 1e-9 and gdiff < 1e-9
    kind = "fwd+bwd" if backward else "fwd"
    return {
        "case": f"{size}x{size} {T} tris {F} frame{'s' if F > 1 else ''} {kind}",
        "ours_s": ours,
        "reference_s": reference,
        "speedup": reference / ours,
        "reference_estimated": nrows < H or F > 1,
        "reference_rows": nrows,
        "max_abs_diff": diff,
        "max_rel_grad_diff": gdiff,
        "equal": ok,
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="a fast subset")
    ap.add_argument("--json", type=str, default=None, help="write results to this path")
    ap.add_argument("--threads", type=int, default=None, help="CPU threads (default: all)")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args(argv)
    gs.init(arch=ARCH, precision="f64", threads=a.threads)
    if a.threads:
        torch.set_num_threads(a.threads)
    if a.quick:
        plan = [(128, 1000, 1), (256, 1000, 1)]
        budget = 3_000_000
    else:
        plan = [(s, n, f) for n in (1000, 10000) for s in (128, 256) for f in (1, 30)]
        budget = 6_000_000
    from gradsim_taichi import runtime

    shape = runtime.raster_shape()  # the kernels' layout: tile (CPU) or pixel (CUDA)
    print(f"threads: taichi {gs.info()['threads']}, torch {torch.get_num_threads()}; "
          f"raster shape: {shape}")
    header = f"{'case':44s} {'ours s':>9s} {'ref s':>10s} {'speedup':>8s}  check"
    print(header)
    print("-" * len(header))
    cases = []
    for size, faces, frames in plan:
        for backward in (False, True):
            c = bench_case(size, faces, frames, backward, budget, a.repeat)
            cases.append(c)
            est = "~" if c["reference_estimated"] else " "
            check = "equal" if c["equal"] else "MISMATCH"
            check += f" (fwd {c['max_abs_diff']:.1e}, grad {c['max_rel_grad_diff']:.1e})"
            print(f"{c['case']:44s} {c['ours_s']:9.4f} {est}{c['reference_s']:9.3f} "
                  f"{c['speedup']:8.1f}  {check}", flush=True)  # fmt: skip
    print("~: reference time scaled from a band of rows of one frame (dense cost is uniform)")
    if a.json:
        Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        Path(a.json).write_text(json.dumps({"raster_shape": shape, "cases": cases}, indent=2))
    if not all(c["equal"] for c in cases):
        print("ERROR: results differ from the reference", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

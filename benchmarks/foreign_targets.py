"""Mass estimation on videos our engine did not make (issues 14 and 20).

    python benchmarks/foreign_targets.py [--cases mitsuba,pybullet,pybullet-physics,camera,
        mitsuba-camera]
        [--shapes box,cone] [--seeds 0,1,2] [--quick] [--json PATH] [--save-targets DIR]
        [--spp N] [--lighting ours|bright|dim|soft] [--rfilter box|gaussian|...]
        [--scene FILE]

Needs the optional extra ``[bench]`` (``pip install -e ".[bench]"``: mitsuba, pybullet)
for the ``mitsuba`` and ``pybullet`` cases; without it the script says so and exits 2.

The rigid-mass preset (64 px; a body pushed by a known impulse, tumbling onto the
ground), its mass unknown, or with ``--scene FILE`` a scene file like it (another
camera, resolution, stage). The targets (the table ``CASES``):

- ``mitsuba``: our engine's TRUE trajectory, every frame path traced by Mitsuba 3
  (``scalar_rgb``) from the same posed meshes, camera and colours: a constant
  environment (the ambient 0.5) and a directional emitter in our light's direction (the
  directional 0.5), shadows and interreflection, box-filtered pixels, ``SPP`` samples
  per pixel (noise). ``--lighting`` changes the lights (brighter or dimmer sun against
  the environment, or a sun 3 degrees in radius: soft shadows), so that the image's
  shading is not one our model draws at its nominal light; ``--rfilter`` Mitsuba's
  pixel filter (its default ``gaussian`` softens every edge over about 2 px, as a
  camera's optics do). The camera match is
  checked: the body's silhouette point-sampled at pixel centres by Mitsuba against ours
  (IoU, printed; 1.0 when the cameras agree).
- ``pybullet``: another engine's physics and renderer: PyBullet (``p.DIRECT``) simulates
  the same body (mesh, mass, inertia from the mesh, initial pose, the preset's known
  impulse at the same point over the first frame, ground plane, gravity, friction 0.4,
  no restitution) with its own rigid contact, and TinyRenderer draws it with view and
  projection matrices matched to our camera (TinyRenderer samples pixels at integer
  coordinates and ours at pixel centres: the projection is shifted by half a pixel, and
  the silhouette IoU against ours on PyBullet's own poses is printed). Masses 4 and 7
  kg: the truth is the mass given to PyBullet.
- ``pybullet-physics``: PyBullet's poses drawn by our own renderer (the share of the
  ``pybullet`` case's error that is physics, not image formation).
- ``camera``: our own render of the true trajectory with the camera eye moved by 3% of
  its distance to the target (up and to the side); the model keeps the nominal camera.
- ``mitsuba-camera``: both at once: the ``mitsuba`` case's path-traced frames seen from
  the ``camera`` case's moved eye.

Per case, shape, mass, option and initial guess (drawn with the seed): the relative
error of every estimated parameter. The options (``options()``): ``defaults``
(``estimate(scene, target)``); ``the command's defaults`` (what ``gradsim-taichi
estimate --target`` uses: ``command_defaults()``; with ``--fit camera`` on the
moved camera); today's own-video options: the ``masked`` loss with a
mask keyed from a background plate that the foreign engine rendered without the body
(``mask_from_plate(shadows=True, cleanup=1)``; also eroded by a pixel), the
``silhouette`` loss on that mask, ``frame_range`` up to the frame before the first
contact (seen in the target's own trajectory), the pre-contact stage
(``stage_contact``), ``restarts``; and options being built (the antialiased forward
image ``scene.render_mode = "antialias"``, nuisance parameters fitted jointly
``estimate(fit=...)``), which print "n/a (option not available)" until they exist.
Per target it also prints how far the foreign images are from ours: the MSE between our
(soft) render and the foreign render of the same posed meshes (for Mitsuba with the
share of its sampling noise).
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

# the engines live beside this script (also when it is run with runpy or imported)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import foreign_engines  # noqa: E402
from foreign_engines import (  # noqa: E402
    EYE_SHIFT,
    LIGHTINGS,
    RFILTERS,
    SPP,
    camera_target,
    mitsuba_camera_target,
    mitsuba_target,
    pybullet_physics_target,
    pybullet_target,
)

CONTACT_STAGE = 4  # iterations of the pre-contact stage
HOLD_STAGE = 12  # ... when its estimate is held (hold_flight): run it to convergence
RESTARTS = 3
NA = "n/a (option not available)"

# One entry per target kind: which foreign engine makes it, the masses it is made at
# (the truth), and what it is. Add a case here and a maker in TARGET_MAKERS.
CASES = {
    "mitsuba": dict(engine="mitsuba", masses=(4.0,),
                    doc="path traced (Mitsuba 3 scalar_rgb) from our true trajectory"),
    "pybullet": dict(engine="pybullet", masses=(4.0, 7.0),
                     doc="PyBullet's physics (rigid contact) and TinyRenderer image"),
    "pybullet-physics": dict(engine="pybullet", masses=(4.0, 7.0),
                             doc="PyBullet's poses drawn by our renderer: the physics' share"),
    "camera": dict(engine=None, masses=(4.0,),
                   doc=f"our render, camera eye moved {EYE_SHIFT:.0%} of its distance"),
    "mitsuba-camera": dict(engine="mitsuba", masses=(4.0,),
                           doc=f"path traced from the eye moved {EYE_SHIFT:.0%}"),
}


TARGET_MAKERS = {"mitsuba": mitsuba_target, "pybullet": pybullet_target,
                 "pybullet-physics": pybullet_physics_target, "camera": camera_target,
                 "mitsuba-camera": mitsuba_camera_target}


# ---- options ---------------------------------------------------------------------------
def has_render_mode(scene) -> bool:
    from dataclasses import fields

    return hasattr(type(scene), "render_mode") or any(
        f.name == "render_mode" for f in fields(scene))


def has_fit() -> bool:
    from gradsim_taichi.estimation import estimate

    return "fit" in inspect.signature(estimate).parameters


def command_defaults(scene, fit=None) -> dict:
    """What the ``estimate`` command uses for a video the engine did not make (no mask):
    its fit, loss, render and iterations; ``fit`` as the command's ``--fit`` (``"camera"``:
    the default kinds and the camera)."""
    from gradsim_taichi.estimation_outputs import fit_for, iters_for, loss_for

    kinds = fit_for(True, fit, scene, masked=False)
    return dict(_render_mode="antialias", fit=kinds, loss=loss_for(True, None, False),
                iters=iters_for(True, scene.iters, None, kinds))


def options(case, target, plate, scene, contact):
    """``{name: estimate() keywords, or None where the option is not available}``; the
    key ``_render_mode`` asks for a scene render mode. ``contact``: the target's first
    frame with ground contact (seen in the video: its engine's trajectory)."""
    from gradsim_taichi.objectives import erode_mask, mask_from_plate
    from gradsim_taichi.scenes.scene_file_schema import PYBULLET_DAMPING

    mask = mask_from_plate(target, plate, shadows=True, cleanup=1)
    aa = {"_render_mode": "antialias"} if has_render_mode(scene) else None
    fit = has_fit()
    out = {
        "defaults": {},
        "the command's defaults": command_defaults(scene) if aa is not None and fit else None,
        "masked (keyed)": dict(loss="masked", mask=mask),
        "masked (keyed, eroded 1)": dict(loss="masked", mask=erode_mask(mask, 1)),
        "silhouette (keyed)": dict(loss="silhouette", mask=mask),
        f"frame_range 0:{contact - 1}" if contact else "frame_range (no contact)": (
            dict(frame_range=(0, contact - 1), warmup=(0, 0)) if contact else {}),
        "silhouette (keyed) + frame_range": (
            dict(loss="silhouette", mask=mask, frame_range=(0, contact - 1), warmup=(0, 0))
            if contact else dict(loss="silhouette", mask=mask)),
        f"stage_contact={CONTACT_STAGE}": dict(stage_contact=CONTACT_STAGE),
        f"restarts={RESTARTS}": dict(restarts=RESTARTS),
        "antialias": aa,
        "fit=background,appearance": dict(fit="background,appearance") if fit else None,
        "antialias + fit=background,appearance": (
            dict(aa, fit="background,appearance") if aa is not None and fit else None),
        "antialias + frame_range": (
            dict(aa, frame_range=(0, contact - 1), warmup=(0, 0))
            if aa is not None and contact else None),
        "antialias + fit=background,appearance + frame_range": (
            dict(aa, fit="background,appearance", frame_range=(0, contact - 1),
                 warmup=(0, 0)) if aa is not None and fit and contact else None),
        # the backdrop taken in by the background, moving shadows by the robust loss
        "antialias + fit=background + robust": (
            dict(aa, fit="background", loss="robust", iters=30)
            if aa is not None and fit else None),
        "antialias + fit=background + robust + frame_range": (
            dict(aa, fit="background", loss="robust", iters=30, frame_range=(0, contact - 1),
                 warmup=(0, 0)) if aa is not None and fit and contact else None),
        # the shadow the body casts, modelled (issue 20)
        "antialias + fit=background,shadow + robust": (
            dict(aa, fit="background,shadow", loss="robust", iters=30)
            if aa is not None and fit else None),
        # ... and the camera's blur (the command's default for a video; --rfilter
        # gaussian: a renderer's wider pixel filter)
        "antialias + fit=background,shadow,blur + robust": (
            dict(aa, fit="background,shadow,blur", loss="robust", iters=80)
            if aa is not None and fit else None),
        # ... and the light learned too: a renderer whose lights are not the model's
        "antialias + fit=background,shadow,appearance + robust": (
            dict(aa, fit="background,shadow,appearance", loss="robust", iters=80)
            if aa is not None and fit else None),
        # the flight's estimate held through the contact frames (issue 14)
        f"antialias + fit=background,appearance + stage_contact={HOLD_STAGE} + hold_flight": (
            dict(aa, fit="background,appearance", stage_contact=HOLD_STAGE, hold_flight=True,
                 iters=HOLD_STAGE + 10) if aa is not None and fit else None),
        # ... with PyBullet's default damping in the scene, as a user who knows the clip
        # came from PyBullet writes it (linear_damping = linear_drag = angular_damping =
        # angular_drag = 0.04): the flight's share of the physics mismatch
        f"antialias + fit=background,appearance + stage_contact={HOLD_STAGE} + hold_flight "
        "+ PyBullet's damping": (
            dict(aa, fit="background,appearance", stage_contact=HOLD_STAGE, hold_flight=True,
                 iters=HOLD_STAGE + 10, _damping=PYBULLET_DAMPING)
            if aa is not None and fit and CASES[case]["engine"] == "pybullet" else None),
        f"antialias + fit=background,appearance,shadow + stage_contact={HOLD_STAGE} + "
        "hold_flight": (
            dict(aa, fit="background,appearance,shadow", stage_contact=HOLD_STAGE,
                 hold_flight=True, iters=HOLD_STAGE + 10) if aa is not None and fit else None),
    }
    if case == "camera":
        out["fit=camera"] = dict(fit="camera") if fit else None
        out["antialias + fit=camera"] = dict(aa, fit="camera") if aa is not None and fit else None
    if case == "mitsuba-camera":  # (L-BFGS converges in 32-62 iterations here)
        out["the command's defaults, --fit camera"] = (command_defaults(scene, "camera")
                                                       if aa is not None and fit else None)
        out["antialias + fit=camera,shadow + robust"] = (
            dict(aa, fit="camera,shadow", loss="robust", iters=80)
            if aa is not None and fit else None)
        out["antialias + fit=camera,background,shadow + robust"] = (
            dict(aa, fit="camera,background,shadow", loss="robust", iters=80)
            if aa is not None and fit else None)
    return out


def run_estimate(scene, target, seed, kw):
    """One estimation; ``{param: rel_err}``, seconds, and the pre-contact stage's."""
    import torch

    from gradsim_taichi.estimation import estimate

    kw = dict(kw)
    mode = kw.pop("_render_mode", None)
    damping = kw.pop("_damping", None)  # the body's damping keys, as a scene file gives
    old, body = getattr(scene, "render_mode", None), scene.spec["objects"][0]
    old_body = dict(body)
    if mode is not None:
        scene.render_mode = mode
    if damping is not None:
        body.update(damping)
    if mode not in (None, old) or damping is not None:
        scene.build()  # the model and the renderers are made at build
    t0 = time.perf_counter()
    try:
        r = estimate(scene, torch.as_tensor(target), seed=seed, progress=False,
                     uncertainty=False, **kw)
    finally:
        if mode not in (None, old) or damping is not None:
            scene.render_mode = old
            body.clear()
            body.update(old_body)
            scene.build()
    errs = {n: e["rel_err"] for n, e in r.errors().items()}
    extra = {"init": {n: float(np.mean(v)) for n, v in r.init.items()},
             "iterations": r.iterations, "final_loss": r.loss}
    # the first stage after the frame-0 calibration (which logs the initial guess)
    fitted = [s for s in r.stages if not s.get("stage", "").startswith("calibration")]
    if kw.get("stage_contact") and fitted:
        truth = float(np.asarray(scene.params["mass"].true))
        first = float(np.asarray(fitted[0]["params"]["mass"]))
        extra["pre_contact_rel_err"] = abs(first - truth) / truth
    return errs, time.perf_counter() - t0, extra


def summary_table(rows) -> str:
    """A markdown table: per target and option, the mass's relative error per guess."""
    out = ["| target | option | mass rel. error per initial guess |", "|---|---|---|"]
    groups = {}
    for r in rows:
        light = r.get("lighting", "ours")
        key = (f"{r['case']} {r['shape']} {r['mass']:g} kg"
               + (f" ({light} light)" if light != "ours" else "")
               + (f" ({Path(r['scene']).stem})" if r.get("scene") else ""), r["option"])
        groups.setdefault(key, []).append(r)
    for (target, option), rs in groups.items():
        if all(r["status"] == NA for r in rs):
            cell = NA
        else:
            cell = ", ".join(f"{r['rel_err']['mass']:.1e}" if r["status"] == "done"
                             else r["status"] for r in rs)
        out.append(f"| {target} | {option} | {cell} |")
    return "\n".join(out)


def save_target(folder, name, frames, plate, fps):
    """``NAME.npy`` (float32 RGB frames), ``NAME.mp4`` and ``NAME-plate.png`` (the
    background plate, for ``--background-plate``)."""
    from gradsim_taichi.render import save_video

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    np.save(folder / f"{name}.npy", np.asarray(frames, dtype=np.float32))
    save_video(np.asarray(frames), folder / f"{name}.mp4", fps=fps)
    save_video(np.asarray(plate)[None], folder / f"{name}-plate", fps=fps)
    os.replace(folder / f"{name}-plate" / "frame_00000.png", folder / f"{name}-plate.png")
    os.rmdir(folder / f"{name}-plate")
    print(f"  saved {folder / name}.npy, .mp4 and -plate.png", flush=True)


def mp4_round_trip(frames, fps):
    """``frames`` as they come back from an MP4 our writer made (8-bit 4:2:0 H.264)."""
    import tempfile

    from gradsim_taichi.render import load_video, save_video

    with tempfile.TemporaryDirectory() as tmp:
        path = save_video(np.asarray(frames), Path(tmp) / "target.mp4", fps=fps)
        back = load_video(path).numpy()
    return back[:, :frames.shape[1], :frames.shape[2]]  # (the writer pads odd sizes)


def check_extras(cases) -> None:
    """Exit 2 naming the extra when a case's engine is not installed."""
    missing = []
    for case in cases:
        engine = CASES[case]["engine"]
        if engine is None:
            continue
        try:
            __import__(engine)
        except ImportError:
            missing.append(engine)
    if missing:
        print(f"foreign_targets: the case(s) need {', '.join(sorted(set(missing)))}: "
              'install the extra with  pip install -e ".[bench]"  (or choose --cases '
              "camera)", file=sys.stderr)
        sys.exit(2)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", default=",".join(CASES),
                    help=f"comma-separated, of {', '.join(CASES)}")
    ap.add_argument("--shapes", default="box,cone",
                    help="comma-separated, of the rigid-mass preset's shapes (box, cone, "
                         "cylinder, lshape)")
    ap.add_argument("--masses", default=None,
                    help="comma-separated masses (kg) for every case, instead of each "
                         "case's own (e.g. 6,9: a heavier body moves less after the push)")
    ap.add_argument("--seeds", default="0,1,2", help="initial guesses, drawn with these")
    ap.add_argument("--quick", action="store_true",
                    help="box only, seed 0, 24 frames, the first mass of each case")
    ap.add_argument("--options", default=None,
                    help="run only the options whose names start with one of these "
                         "(separated by ';', e.g. 'defaults;masked;fit'; default: all)")
    ap.add_argument("--spp", type=int, default=SPP,
                    help=f"Mitsuba's samples per pixel (default {SPP})")
    ap.add_argument("--lighting", default="ours", choices=tuple(LIGHTINGS),
                    help="Mitsuba's lights: ours (exactly our shading model's), bright, "
                         "dim (ambient and sun other than ours), soft (a sun 3 degrees "
                         "in radius: soft shadows); see foreign_engines.LIGHTINGS")
    ap.add_argument("--rfilter", default="box", choices=RFILTERS,
                    help="Mitsuba's pixel filter: box (the pixel's square, default), or "
                         "a wider one that blurs edges (gaussian: Mitsuba's own default)")
    ap.add_argument("--scene", default=None, metavar="FILE",
                    help="a scene file like rigid-mass's (one rigid body, its mass "
                         "unknown, a known push) instead of the preset: another camera, "
                         "resolution, stage; --shapes then names variants of its [shapes]")
    ap.add_argument("--json", default=None, help="write every row to this file")
    ap.add_argument("--table-from", default=None, metavar="JSON",
                    help="only print the summary table of a --json file and exit")
    ap.add_argument("--save-targets", default=None, metavar="DIR",
                    help="write each target as DIR/NAME.npy and DIR/NAME.mp4")
    ap.add_argument("--mp4", action="store_true",
                    help="estimate from each target as a user's MP4 arrives: through our "
                         "H.264 writer and load_video, compared as 4:2:0 (chroma='420')")
    args = ap.parse_args(argv)
    if args.table_from:
        with open(args.table_from) as f:
            print(summary_table(json.load(f)["rows"]))
        return
    cases = [c for c in args.cases.split(",") if c]
    bad = [c for c in cases if c not in CASES]
    if bad:
        ap.error(f"unknown case {bad[0]!r}; choose from {', '.join(CASES)}")
    if args.spp < 1:
        ap.error(f"--spp must be >= 1; got {args.spp}")
    try:
        masses_arg = (None if args.masses is None
                      else [float(m) for m in args.masses.split(",") if m.strip()])
    except ValueError:
        ap.error(f"--masses must be comma-separated numbers; got {args.masses!r}")
    if masses_arg is not None and not (masses_arg and all(m > 0 for m in masses_arg)):
        ap.error(f"--masses must be positive; got {args.masses!r}")
    check_extras(cases)
    # (the engines read these module settings)
    foreign_engines.SPP, foreign_engines.LIGHTING = args.spp, args.lighting
    foreign_engines.RFILTER = args.rfilter
    spp = args.spp

    import torch

    import gradsim_taichi as gs
    from gradsim_taichi.objectives import first_contact
    from gradsim_taichi.scenes import make_scene
    from gradsim_taichi.scenes.scene_file import load_scene_file

    gs.init(arch="cpu", precision="f64")
    shapes = ["box"] if args.quick else args.shapes.split(",")
    seeds = [0] if args.quick else [int(s) for s in args.seeds.split(",")]
    frames = 24 if args.quick else None
    wanted = None if args.options is None else [w.strip() for w in args.options.split(";")
                                                 if w.strip()]
    rows, targets = [], []
    for case in cases:
        spec = CASES[case]
        masses = masses_arg or spec["masses"]
        masses = masses[:1] if args.quick else masses
        for shape in shapes:
            for mass in masses:
                kw = {} if frames is None else dict(frames=frames)
                scene = (make_scene("rigid-mass", shape=shape, **kw) if args.scene is None
                         else load_scene_file(args.scene, shape=shape, **kw))
                scene.set_truth({"mass": mass})
                scene.build()
                try:
                    foreign_engines.camera_spec(scene)
                except ValueError as e:
                    ap.error(f"--scene {args.scene}: {e}")
                mitsuba = (dict(spp=spp, lighting=args.lighting, rfilter=args.rfilter)
                           if spec["engine"] == "mitsuba" else {})
                log = dict(case=case, shape=shape, mass=mass, scene=args.scene, **mitsuba)
                t0 = time.perf_counter()
                target, plate, verts = TARGET_MAKERS[case](scene, shape, mass, log)
                # RGB: a foreign engine's alpha means nothing to the losses
                target, plate = np.asarray(target)[..., :3], np.asarray(plate)[..., :3]
                contact = first_contact(torch.as_tensor(verts), 0.0)
                log["first_contact_frame"] = contact
                log["target_seconds"] = time.perf_counter() - t0
                targets.append(log)
                name = (f"{case}-{shape}-{mass:g}kg"
                        + (f"-{spp}spp" if mitsuba and spp != SPP else "")
                        + (f"-{args.lighting}" if mitsuba and args.lighting != "ours" else "")
                        + (f"-{args.rfilter}" if mitsuba and args.rfilter != "box" else "")
                        + (f"-{Path(args.scene).stem}" if args.scene else ""))
                if args.save_targets:
                    save_target(args.save_targets, name, target, plate, scene.fps)
                if args.mp4:
                    target = mp4_round_trip(target, scene.fps)
                for opt, okw in options(case, target, plate, scene, contact).items():
                    if wanted is not None and not any(opt.startswith(w) for w in wanted):
                        continue
                    if args.mp4 and okw is not None:
                        okw = {"chroma": "420", **okw}
                    for seed in seeds:
                        row = dict(case=case, shape=shape, mass=mass, option=opt, seed=seed,
                                   scene=args.scene, mp4=args.mp4, **mitsuba)
                        if okw is None:
                            row["status"] = NA
                            print(f"{case:8} {shape:4} {mass:g}kg {opt:38} seed {seed}: {NA}",
                                  flush=True)
                            rows.append(row)
                            continue
                        try:
                            errs, secs, extra = run_estimate(scene, target, seed, okw)
                        except Exception as e:  # a failed run is a result too
                            row.update(status=f"failed: {type(e).__name__}: {e}")
                            print(f"{case:8} {shape:4} {mass:g}kg {opt:38} seed {seed}: "
                                  f"{row['status']}", flush=True)
                            rows.append(row)
                            continue
                        row.update(status="done", rel_err=errs, seconds=secs, **extra)
                        txt = ", ".join(f"{n} rel.err {e:.2e} (guess {extra['init'][n]:.3g})"
                                        for n, e in errs.items())
                        if "pre_contact_rel_err" in extra:
                            txt += f" (pre-contact stage {extra['pre_contact_rel_err']:.2e})"
                        print(f"{case:8} {shape:4} {mass:g}kg {opt:38} seed {seed}: {txt}"
                              f"  [{extra['iterations']} it, {secs:.0f} s]", flush=True)
                        rows.append(row)
    print(summary_table(rows))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(targets=targets, rows=rows), f, indent=1, default=float)


if __name__ == "__main__":
    main()

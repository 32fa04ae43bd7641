"""What the own-video options buy on targets the model cannot reproduce exactly.

    python benchmarks/own_video_options.py [--shapes box,cone] [--seeds 0,1] [--json PATH]

Two kinds of mismatch, on the rigid-mass preset (64 px, 40 frames, its own defaults),
relative error of the mass per case and initial guess (drawn with the seed):

- backdrop: the target has a soft shadow under the body that the renderer cannot draw
  (the body's mask shifted by (4, 3) px, blurred 2 px, darkening the stage by up to
  50%). Losses: mse, robust, silhouette and masked with the true (binary) mask, masked
  with masks keyed against the empty stage (``mask_from_plate``: the shadow's core is
  keyed as object at threshold 0.1 and 0.3; ``shadows=True`` leaves it out).
- contact: the target is simulated with other contact parameters (friction 0.8 instead
  of 0.4, damping 50 instead of 100) than the model's; the whole video, the
  pre-contact stage (``stage_contact=4``: its own estimate and the final one), and only
  the frames before the first contact (``frame_range``).
"""

import argparse
import json
import time


def backdrop_cases(target, mask, plate):
    from gradsim_taichi.objectives import erode_mask, mask_from_plate

    keyed = mask_from_plate(target, plate, shadows=True)
    return {
        "mse": {},
        "robust": dict(loss="robust"),
        "silhouette, true mask": dict(loss="silhouette", mask=mask),
        "masked, true mask": dict(loss="masked", mask=mask),
        "masked, keyed 0.1": dict(loss="masked", mask=mask_from_plate(target, plate, 0.1)),
        "masked, keyed 0.3": dict(loss="masked", mask=mask_from_plate(target, plate, 0.3)),
        "masked, keyed, shadows": dict(loss="masked", mask=keyed),
        "masked, keyed, shadows, eroded 1": dict(loss="masked", mask=erode_mask(keyed, 1)),
    }


def shadowed(scene):
    """The preset's clip with a soft shadow the model cannot draw, and the true mask."""
    import torch

    from gradsim_taichi.estimation import render_target, render_target_mask
    from gradsim_taichi.objectives import blur_frames

    target, mask = render_target(scene), render_target_mask(scene)
    shadow = blur_frames(torch.roll(mask, shifts=(4, 3), dims=(1, 2))[..., None], 2.0)[..., 0]
    target = target.clone()
    target[..., :3] *= (1 - 0.5 * shadow * (1 - mask))[..., None]
    return target, mask


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", default="box,cone")
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    import gradsim_taichi as gs
    from gradsim_taichi.estimation import estimate, render_target
    from gradsim_taichi.objectives import first_contact
    from gradsim_taichi.scenes import make_scene

    gs.init(arch="cpu", precision="f64")
    seeds = [int(s) for s in args.seeds.split(",")]
    rows = []

    def run(kind, shape, case, scene, target, seed, **kw):
        t0 = time.perf_counter()
        r = estimate(scene, target, seed=seed, progress=False, uncertainty=False, **kw)
        err = r.errors()["mass"]["rel_err"]
        extra = ""
        if kw.get("stage_contact"):
            first = float(r.stages[0]["params"]["mass"])
            extra = f"  (pre-contact stage: {abs(first - 4.0) / 4.0:.2e})"
        rows.append(dict(kind=kind, shape=shape, case=case, seed=seed, rel_err=err,
                         seconds=time.perf_counter() - t0))
        print(f"{kind:9} {shape:5} {case:24} seed {seed}: mass rel.err {err:.2e}{extra}",
              flush=True)

    for shape in args.shapes.split(","):
        scene = make_scene("rigid-mass", shape=shape)
        scene.build()
        target, mask = shadowed(scene)
        plate = scene.render_backdrop()
        for case, kw in backdrop_cases(target, mask, plate).items():
            for seed in seeds:
                run("backdrop", shape, case, scene, target, seed, **kw)
        # contact mismatch: the target from other contact parameters than the model's
        other = make_scene("rigid-mass", shape=shape,
                           contact=dict(ke=5e3, kd=50.0, kf=100.0, mu=0.8))
        other.build()
        target = render_target(other)
        truth = scene.tracked_positions(scene.simulate(scene.true_values(["mass"])))
        contact = first_contact(truth, 0.0)
        cases = {"whole video": {}, "stage_contact=4": dict(stage_contact=4),
                 f"frame_range 0:{contact - 1}": dict(frame_range=(0, contact - 1),
                                                      warmup=(0, 0))}
        for case, kw in cases.items():
            for seed in seeds:
                run("contact", shape, case, scene, target, seed, **kw)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()

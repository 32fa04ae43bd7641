"""What a person should know about an estimation that technically finished (its
``warnings``): a run that ended inside a warm-up stage, a value that never moved, an
estimate that the frames with contact pulled away from the flight's, the camera's blur
or response at the bound of its range."""

from __future__ import annotations

import numpy as np

from gradsim_taichi.objectives import Stages

# stage_contact: a change of an estimate after the pre-contact stage, relative, above
# which the run warns that the contact frames pull it away (the presets' own targets,
# with a 3-iteration stage, move by at most ~1e-4)
CONTACT_PULL_TOL = 1e-3


def contact_pull(flight: dict, final: dict) -> list:
    """A warning when the estimate moved beyond :data:`CONTACT_PULL_TOL` between the end
    of the pre-contact stage and the end of the run."""
    out = []
    for n, before in flight["params"].items():
        b, a = np.asarray(before, dtype=np.float64), np.asarray(final["params"][n])
        moved = float(np.abs(a - b).max() / max(float(np.abs(b).mean()), 1e-12))
        if moved > CONTACT_PULL_TOL:
            out.append(
                f"'{n}' moved by {moved:.2e} (relative) after the pre-contact stage "
                f"({short(b)} -> {short(a)}): the frames with contact pull it away, so "
                f"the contact model may not match the video (or the stage did not "
                f"converge); frames {flight['first_frame']}..{flight['last_frame']} alone "
                f"(--frame-range {flight['first_frame']}:{flight['last_frame']}) fit the "
                "flight only")
    return out


def camera_limits(nuisance: dict | None, bounds: dict | None = None) -> list:
    """A warning for the camera's pose correction, blur or response (``fit``) when it
    ended at a bound of its range (``bounds``: :attr:`Nuisance.bounds
    <gradsim_taichi.nuisance.Nuisance.bounds>`; default
    :data:`~gradsim_taichi.nuisance.BOUNDS`): the clip differs from the model in some
    way those values absorbed as far as they could (on an sRGB clip fitted without the
    response the blur ran to its bound and the mass was lost)."""
    from gradsim_taichi.nuisance import BOUNDS, CAMERA_PARAMS

    bounds = BOUNDS if bounds is None else bounds
    out = []
    for name in CAMERA_PARAMS:
        if nuisance is None or name not in nuisance or name not in bounds:
            continue
        high = bounds[name][1]
        if float(np.abs(np.asarray(nuisance[name])).max()) >= high * (1.0 - 1e-9):
            out.append(f"the camera's pose correction {name} ended at the bound of its "
                       f"range (+-{high:.3g} in a component): the camera is further off "
                       "than a small correction, or the fit ran away from it; check the "
                       "scene file's camera against the video before trusting the "
                       "estimate")
    # (a sharp image's blur is 0 and a power law's offset is 0: at those bounds by design)
    for name, both_ends in (("blur_sigma", False), ("gamma", True), ("response_offset", False)):
        if nuisance is None or name not in nuisance:
            continue
        low, high = bounds[name]
        value = abs(nuisance[name]) if name == "blur_sigma" else nuisance[name]
        if (both_ends and value <= low) or value >= high:
            out.append(f"the camera's {name} ended at the bound of its range "
                       f"({value:.4g}, range {low:g}..{high:g}): the video differs from the "
                       "model's image in a way it could not absorb (another tone curve, a "
                       "wrong camera, scene or frame rate?); do not trust the estimate "
                       "before finding why")
    return out


def short(x) -> str:
    """A value for a message: 4 digits, or an array's mean."""
    x = np.asarray(x, dtype=np.float64)
    return f"{float(x):.4g}" if x.ndim == 0 else f"mean {x.mean():.4g}"


def finished_run_warnings(result, stages: Stages) -> list:
    """What a person should know about a run that technically finished."""
    out = []
    done = result.iterations
    last = stages.frame_ids(max(done - 1, 0))[-1].item()
    final = stages.all_ids[-1].item()
    if result.status == "done" and last < final:
        # the first stage whose horizon reaches the last frame (a shortened clip's
        # later horizons all do)
        starts = [0] + stages.ends[:-1]
        reach = [s for s, (_, end) in zip(starts, stages.horizons) if end >= final]
        need = min(reach) if reach else stages.ends[-1]
        out.append(f"the run ended after {done} iterations, inside a warm-up stage: only "
                   f"frames up to {last} were fitted; give at least "
                   f"{max(need, stages.coarse_end) + 1} iterations to fit every frame")
    for n, est in result.params.items():
        if done > 0 and np.allclose(est, result.init[n], rtol=1e-12, atol=0.0):
            out.append(f"'{n}' never moved from its initial guess")
    return out

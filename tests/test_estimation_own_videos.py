"""Estimation from videos the engine did not make, on the rigid-mass preset: the
pre-contact stage and hold_flight, restarts and their spread, the mask losses."""

import numpy as np
import pytest
import torch

from gradsim_taichi.estimation import estimate, render_target


def _rigid(frames=12, **kw):
    from gradsim_taichi.scenes import make_scene

    scene = make_scene("rigid-mass", frames=frames, width=32, height=32, **kw)
    scene.build()
    return scene


def test_contact_stage_fits_the_flight_before_the_first_touch():
    """The pre-contact stage ends one frame before the body first comes within 1% of its
    size of the ground, at the initial guess or at either end of the mass's range
    (whichever is earliest); the report keeps the estimate after each stage; the
    preset's own target is still recovered to rounding."""
    from gradsim_taichi.objectives import first_contact

    scene = _rigid(frames=20)
    target = render_target(scene)
    r = estimate(scene, target, stage_contact=3, seed=1, progress=False, uncertainty=False)
    spec = scene.params["mass"]
    contacts = []
    for mass in (float(r.init["mass"]), spec.low, spec.high):
        with torch.no_grad():
            x = scene.tracked_positions(scene.simulate(
                {"mass": torch.tensor(mass, dtype=torch.float64)}))
        contacts.append(first_contact(x, 0.0))
        assert x[:contacts[-1], :, 1].min() > 0.0  # nothing touches before it
    contact = min(contacts)
    assert 3 < contact < 20 and len(set(contacts)) > 1  # the range ends matter here
    first = r.stages[0]
    assert (first["last_frame"], first["end_iteration"]) == (contact - 1, 3)
    assert abs(first["params"]["mass"] - 4.0) < abs(float(r.init["mass"]) - 4.0) / 10
    assert r.stages[-1]["last_frame"] == 20 and r.errors()["mass"]["rel_err"] < 1e-10
    assert not any("pre-contact" in w for w in r.warnings)


def test_contact_stage_warns_when_contact_frames_pull_the_estimate_away():
    """A target simulated with other friction and damping than the model's: the flight
    gives the mass, the contact frames pull it off, and the run says so."""
    from gradsim_taichi.scenes import make_scene

    other = make_scene("rigid-mass", frames=20, width=32, height=32,
                       contact=dict(ke=5e3, kd=50.0, kf=100.0, mu=0.8))
    other.build()
    target = render_target(other)
    scene = _rigid(frames=20)
    r = estimate(scene, target, stage_contact=4, seed=1, progress=False, uncertainty=False)
    flight = abs(r.stages[0]["params"]["mass"] - 4.0) / 4.0
    assert flight < 1e-4 and r.errors()["mass"]["rel_err"] > 2e-3
    warning = next(w for w in r.warnings if "after the pre-contact stage" in w)
    last = r.stages[0]["last_frame"]
    assert f"--frame-range 0:{last}" in warning
    r = estimate(scene, target, frame_range=(0, last), warmup=(0, 0), seed=1,
                 progress=False, uncertainty=False)
    assert r.errors()["mass"]["rel_err"] < 1e-6


def test_hold_flight_keeps_the_flight_estimate_through_the_contact_frames():
    """The same mismatched contact: with hold_flight the mass keeps its pre-contact
    estimate (nothing else to fit: the run ends there, complete); with the contact
    parameters unknown too, only they move on the contact frames."""
    from gradsim_taichi.scenes import make_scene

    other = make_scene("rigid-mass", frames=20, width=32, height=32,
                       contact=dict(ke=5e3, kd=50.0, kf=100.0, mu=0.8))
    other.build()
    target = render_target(other)
    scene = _rigid(frames=20)
    r = estimate(scene, target, stage_contact=4, hold_flight=True, seed=1, progress=False)
    assert r.iterations == 4 and "nothing left to fit" in r.message
    last = r.stages[-1]["last_frame"]
    assert last < 20 and r.settings["hold_flight"] is True
    assert r.errors()["mass"]["rel_err"] < 1e-4 and not r.warnings
    # the uncertainty answers to the flight's frames only (32x32 pixels each)
    assert r.uncertainty["dof"] == (last + 1) * 32 * 32 * target.shape[-1] - 1

    other = make_scene("rigid-contact", frames=20, width=32, height=32,
                       contact=dict(ke=5e3, kd=50.0, kf=100.0, mu=0.4))
    other.build()
    target = render_target(other)
    scene = make_scene("rigid-contact", frames=20, width=32, height=32)
    scene.build()
    r = estimate(scene, target, params=["mass", "contact_kd"], init={"contact_kd": 100.0},
                 stage_contact=4, hold_flight=True, warmup=(0, 0), iters=12, seed=1,
                 optimizer="lbfgs", progress=False, uncertainty=False)
    flight, final = r.stages[0]["params"], r.stages[-1]["params"]
    assert abs(flight["contact_kd"] - 100.0) < 1e-9 and final["mass"] == flight["mass"]
    # fitted on the contact frames, towards the truth (50; weakly seen in 20 frames)
    assert final["contact_kd"] < 99.5
    assert r.history[-1]["loss"] < 0.9 * r.history[4]["loss"]
    with pytest.raises(ValueError, match="give stage_contact"):
        estimate(scene, target, hold_flight=True, progress=False)


@pytest.mark.parametrize("name, frames, warmup", [  # ~20-30 s each on 2 busy cores
    pytest.param("rigid-contact", 20, [(3, last) for last in (4, 6, 9, 12, 15, 18)],
                 marks=pytest.mark.slow),
    pytest.param("fem-ball", 40, (0, 0), marks=pytest.mark.slow),
])
def test_contact_stage_keeps_the_presets_recovering(name, frames, warmup):
    """Presets whose bodies land: with the pre-contact stage first, their own targets
    are still recovered (the test_scenes setup: 32 px, a 30% perturbed guess)."""
    from test_scenes import SMALL, error, perturbed

    from gradsim_taichi.scenes import make_scene

    scene = make_scene(name, **{**SMALL, "frames": frames})
    scene.build()
    init = perturbed(scene)
    r = estimate(scene, render_target(scene), init=init, iters=24, warmup=warmup,
                 stage_contact=3, progress=False, uncertainty=False)
    assert r.stages[0]["end_iteration"] == 3 and r.stages[0]["last_frame"] < frames
    assert error(scene, r.params) < 1e-8 * error(scene, init)


def test_restarts_agree_quietly_and_disagree_loudly():
    scene = _rigid()
    target = render_target(scene)
    r = estimate(scene, target, restarts=3, seed=2, progress=False, uncertainty=False)
    assert [x["seed"] for x in r.restarts] == [2, 3, 4]
    assert len({round(float(x["params"]["mass"]), 3) for x in r.restarts}) == 1
    assert r.loss == min(x["loss"] for x in r.restarts)
    assert r.spread["mass"] < 1e-8 and not any("disagree" in w for w in r.warnings)
    # one Adam step from three guesses: nowhere near each other
    r = estimate(scene, target, restarts=3, seed=2, iters=1, optimizer="adam",
                 progress=False, uncertainty=False)
    assert r.spread["mass"] > 0.1
    warning = next(w for w in r.warnings if "disagree" in w)
    assert "3 restarts" in warning and "mass: relative spread" in warning
    assert r.settings["best_seed"] == r.restarts[
        int(np.argmin([x["loss"] for x in r.restarts]))]["seed"]


def test_restarts_spread_sits_next_to_the_local_interval(tmp_path):
    """report.json: per parameter the local interval (std, ci95) and the restarts'
    spread and range side by side."""
    import json

    from gradsim_taichi.estimation_outputs import write_report

    scene = _rigid()
    target = render_target(scene)
    r = estimate(scene, target, restarts=2, seed=2, iters=1, optimizer="adam",
                 progress=False)
    entry = json.loads(write_report(tmp_path / "report.json", scene, r).read_text())
    entry = entry["params"]["mass"]
    runs = [float(x["params"]["mass"]) for x in r.restarts]
    assert {"std", "ci95", "restarts_spread", "restarts_range"} <= set(entry)
    assert entry["restarts_range"] == [min(runs), max(runs)]
    assert entry["restarts_spread"] == r.spread["mass"] > 0


def test_mask_losses_need_a_mask_and_recover_the_mass():
    from gradsim_taichi.estimation import render_target_mask

    scene = _rigid()
    target = render_target(scene)
    mask = render_target_mask(scene)
    assert set(mask.unique().tolist()) == {0.0, 1.0}
    with pytest.raises(ValueError, match="give one"):
        estimate(scene, target, loss="masked", progress=False)
    with pytest.raises(ValueError, match="does not use it"):
        estimate(scene, target, mask=mask, progress=False)
    with pytest.raises(ValueError, match="has 5 frames"):
        estimate(scene, target, loss="silhouette", mask=mask[:5], progress=False)
    r = estimate(scene, target, loss="masked", mask=mask, iters=6, progress=False,
                 uncertainty=False)
    # the colours inside the mask: exact on the preset's own clip
    assert r.errors()["mass"]["rel_err"] < 1e-9
    # the silhouette alone: a binary mask locates the outline to a pixel, close not exact
    r = estimate(scene, target, loss="silhouette", mask=mask, iters=6, progress=False,
                 uncertainty=False)
    assert 1e-7 < r.errors()["mass"]["rel_err"] < 1e-2

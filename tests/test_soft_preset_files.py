"""The soft presets are their shipped scene files (gradsim_taichi/scenes/files/:
fem-beam.toml, fem-ball.toml, cloth-velocity.toml): the scene loaded from the file rolls
out and renders as the presets' Python classes built them directly through ModelBuilder
(tests/soft_preset_reference.py), to 1e-12; it carries the same unknowns (ranges,
shapes, bases, draw patterns) and optimiser schedule; a short estimation lands where the
class's did; and preset -> file -> scene rolls out the same."""

import numpy as np
import pytest
import torch
from soft_preset_reference import (
    ClothVelocityReference,
    FemBallReference,
    FemBeamReference,
)

from gradsim_taichi.scenes import SCENES, make_scene
from gradsim_taichi.scenes.preset_files import FilePreset
from gradsim_taichi.scenes.scene_file import scene_from_toml
from gradsim_taichi.scenes.scene_file_writer import scene_to_toml

REFERENCES = {"fem-beam": FemBeamReference, "fem-ball": FemBallReference,
              "cloth-velocity": ClothVelocityReference}
SMALL = dict(frames=12, width=24, height=24)
SPEC_FIELDS = ("sim_name", "true", "low", "high", "shape", "positive", "doc", "draw_shape",
               "draw_pattern", "basis")
SCHEDULE = ("frames", "substeps", "fps", "width", "height", "optimizer", "iters", "lr",
            "blur", "warmup", "coarse_iters", "default_params", "camera_eye",
            "camera_target", "fov_y_deg", "background")


def _same(a, b) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.array_equal(a, b)
    return a == b


def _rollout(scene):
    scene.ensure_built()  # per-particle truths come with the build
    with torch.no_grad():
        out = scene.simulate(scene.true_values(scene.params))
        return out["particles"], scene.render(out)


def _assert_same_specs(scene, ref):
    assert list(scene.params) == list(ref.params)
    for name, spec in ref.params.items():
        for f in SPEC_FIELDS:
            assert _same(getattr(scene.params[name], f), getattr(spec, f)), (name, f)


@pytest.mark.parametrize("name", list(REFERENCES))
def test_the_preset_is_its_file_with_the_classes_schedule_and_unknowns(name):
    assert isinstance(SCENES[name], FilePreset) and SCENES[name].shapes == ()
    scene, ref = make_scene(name), REFERENCES[name]()
    assert SCENES[name].summary == ref.summary
    for key in SCHEDULE:
        assert _same(getattr(scene, key), getattr(ref, key)), key
    _assert_same_specs(scene, ref)  # as declared: per-particle truths not yet known


@pytest.fixture(scope="module")
def preset_rollout():
    """``preset_rollout(name)``: the preset's scene (``make_scene(name, **SMALL)``), built,
    and its rollout and frames at the truth; made once per preset (and Taichi
    initialisation) for the two tests below that compare other scenes with it."""
    from gradsim_taichi import runtime

    made = {}

    def get(name):
        if name not in made or made[name][0] != runtime.generation():
            scene = make_scene(name, **SMALL)
            made[name] = (runtime.generation(), scene, *_rollout(scene))
        return made[name][1:]

    return get


@pytest.mark.parametrize("name", list(REFERENCES))
def test_the_preset_file_rolls_out_and_renders_as_the_class(name, preset_rollout):
    scene, x1, frames1 = preset_rollout(name)
    ref = REFERENCES[name](**SMALL)
    ref.build()
    _assert_same_specs(scene, ref)  # derived at the build: truths, patterns, bases
    x0, frames0 = _rollout(ref)
    assert x0.shape == x1.shape and frames0.shape == frames1.shape == (13, 24, 24, 4)
    assert float((x0 - x0[0]).abs().max()) > 0.05  # it moves
    # measured: 0 (bit for bit) for all three
    assert float((x0 - x1).abs().max()) <= 1e-12
    assert float((frames0 - frames1).abs().max()) <= 1e-12
    f0, f1 = (s.sim.get_param("external_force") for s in (ref, scene))
    assert np.abs(f0 - f1).max() <= 1e-12 * np.abs(f0).max(initial=1.0)


@pytest.mark.parametrize("name", list(REFERENCES))
def test_preset_to_file_to_scene_rolls_out_the_same(name, preset_rollout):
    scene = make_scene(name, **SMALL)
    text = scene_to_toml(scene)
    again = scene_from_toml(text)
    assert scene_to_toml(again) == text
    for key in SCHEDULE:
        assert _same(getattr(again, key), getattr(scene, key)), key
    built, x0, frames0 = preset_rollout(name)  # the same preset, built and rolled out
    x1, frames1 = _rollout(again)
    _assert_same_specs(again, built)
    assert float((x0 - x1).abs().max()) <= 1e-12  # measured: 0
    assert float((frames0 - frames1).abs().max()) <= 1e-12


# a few iterations on each preset's own small target, from the truth moved by 25%; one
# coarse iteration (within the bases) for the presets that have a coarse stage
ESTIMATE = dict(iters=3, warmup=(0, 0))


@pytest.mark.slow  # ~12 s each; the rollouts and renders above are already equal
@pytest.mark.parametrize("name", list(REFERENCES))
def test_a_short_estimation_lands_where_the_class_did(name):
    from gradsim_taichi.estimation import estimate, render_target

    results = []
    for scene in (make_scene(name, frames=8, width=16, height=16),
                  REFERENCES[name](frames=8, width=16, height=16)):
        scene.build()
        # up and down in turn (all scaled alike, the ball's flight would look the same)
        init = {n: np.asarray(scene.params[n].true) * 1.25 ** (-1) ** k
                if scene.params[n].positive else np.asarray(scene.params[n].true) + 0.2
                for k, n in enumerate(scene.default_params)}
        results.append(estimate(scene, render_target(scene), init=init, progress=False,
                                uncertainty=False, coarse_iters=min(scene.coarse_iters, 1),
                                **ESTIMATE))
    got, want = results
    assert got.params.keys() == want.params.keys()
    for n, v in want.params.items():
        v = np.asarray(v)
        # measured: 0 for every parameter of the three presets
        assert np.abs(np.asarray(got.params[n]) - v).max() <= 1e-10 * np.abs(v).max(), n
    # it moves towards the truth (a coarse stage can reach it within the first recorded
    # iteration, as fem-ball's does from 25% off: its loss is then at rounding level)
    losses = [h["loss"] for h in got.history]
    assert losses[0] < 1e-20 or min(losses[1:]) < 0.7 * losses[0]


def test_the_beam_push_has_the_stated_force_and_couple():
    scene = make_scene("fem-beam", **SMALL)
    scene.build()
    push = scene.spec["pushes"][0]
    force = scene.sim.get_param("external_force")
    x0 = scene.sim.get_param("initial_position")
    assert np.abs(force[3:]).max() == 0.0  # frames [0, 3) only
    tip = np.flatnonzero(np.abs(force[0]).sum(axis=1))
    assert np.isclose(x0[tip, 0], x0[:, 0].max()).all() and len(tip) == 9
    np.testing.assert_allclose(force[0].sum(axis=0), push["vector"], atol=1e-9)
    moment = np.cross(x0[tip] - x0[tip].mean(axis=0), force[0, tip]).sum(axis=0)
    np.testing.assert_allclose(moment, push["torque"], atol=1e-9)
    pinned = scene.build_model().particle_pinned()  # the clamp: the x = min end
    assert pinned.sum() == 9 and np.array_equal(pinned, np.isclose(x0[:, 0], x0[:, 0].min()))


def test_a_couple_on_any_region_has_zero_sum_and_the_given_moment():
    from gradsim_taichi.scenes.scene_file_deformable import couple

    x = np.random.default_rng(0).random((7, 3))
    torque = np.array([0.3, -0.2, 0.5])
    f = couple(x, torque)
    np.testing.assert_allclose(f.sum(axis=0), 0.0, atol=1e-12)
    for about in (np.zeros(3), x.mean(axis=0), np.array([1.0, -2.0, 3.0])):
        np.testing.assert_allclose(np.cross(x - about, f).sum(axis=0), torque, atol=1e-12)
    with pytest.raises(ValueError, match="not all on one line"):
        couple(np.outer(np.arange(4.0), [1.0, 2.0, 0.0]), torque)


DROP = """
[scene]
fps = 60.0
frames = 40
width = 16
height = 16

[camera]
eye = [0.0, 0.8, 1.8]
target = [0.0, 0.2, 0.0]

[estimate]
warmup = [[4, 2], [4, 5]]
warmup_from = "contact"

[[objects]]
kind = "rigid"
shape = "box"
extents = [0.4, 0.3, 0.3]
position = [0.0, 0.4, 0.0]
mass = 1.0
"""


def test_warmup_from_contact_counts_from_the_free_flight_touch():
    # a box dropped from rest, its lowest face 0.25 m above the ground: it touches at
    # t = sqrt(2 h / g), frame 60 t
    scene = scene_from_toml(DROP)
    t = np.sqrt(2 * 0.25 / 9.8) * 60
    assert abs(scene.first_contact_frame() - t) < 1e-9
    assert scene.warmup == ((4, int(t) + 2), (4, int(t) + 5))
    thrown = scene_from_toml(DROP.replace("mass = 1.0", "mass = 1.0\nvelocity = [0.0, 2.0, 0.0]"))
    t = (2.0 + np.sqrt(4.0 + 2 * 9.8 * 0.25)) / 9.8 * 60  # up first, then down
    assert abs(thrown.first_contact_frame() - t) < 1e-9
    up = DROP + "\n[stage]\ngravity = [0.0, 9.8, 0.0]\n"
    with pytest.raises(ValueError, match="estimate.warmup_from: \"contact\" needs gravity"):
        scene_from_toml(up)


def test_cli_shows_and_estimates_the_soft_presets(tmp_path, capsys):
    from gradsim_taichi.cli import main

    for name in REFERENCES:
        assert main(["scene", "show", name]) == 0
        assert capsys.readouterr().out == SCENES[name].text()
    path = tmp_path / "beam.toml"
    path.write_text(SCENES["fem-beam"].text())
    assert main(["scene", "check", str(path)]) == 0
    assert ("pushes[0]: force [0.0, 60.0, 0.0], torque [1.0, 0.0, 0.0] on region max_x of "
            "objects[0]") in capsys.readouterr().out
    out = tmp_path / "beam"
    assert main(["estimate", "fem-beam", "--iters", "1", "--out", str(out), "--arch", "cpu",
                 "--frames", "4", "--resolution", "16", "--quiet"]) == 0
    assert (out / "report.json").is_file()

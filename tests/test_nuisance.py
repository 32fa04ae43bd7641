"""Nuisance parameters (estimate(fit=...)): every parameter's gradient against float64
central differences, the background's closed form, the camera calibration on the first
frame, and the CLI's errors."""

import json

import numpy as np
import pytest
import torch
from nuisance_helpers import directional as _directional
from nuisance_helpers import small_scene as _scene
from nuisance_helpers import truth_outputs as _truth_outputs
from runtime_arch import TEST_ARCH

from gradsim_taichi.cli import main
from gradsim_taichi.ground_shading import BOUNCE_CELLS
from gradsim_taichi.nuisance import KINDS, UNKNOWNS, Nuisance, parse_fit, unknowns

f64 = torch.float64
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_parse_fit():
    assert parse_fit(None) == ()
    assert parse_fit("appearance, camera") == ("camera", "appearance")
    assert parse_fit(["background"]) == ("background",)
    with pytest.raises(ValueError, match="unknown kind 'lights'"):
        parse_fit("camera,lights")
    assert parse_fit("none") == () and parse_fit(" none ") == ()
    # names add to a default, -kind takes one out, none drops it
    default = ("background", "shadow", "blur")
    assert parse_fit(None, default) == default
    assert parse_fit("camera", default) == ("camera", "background", "shadow", "blur")
    assert parse_fit("+camera", default) == parse_fit("camera", default)
    assert parse_fit("-shadow, +response,-blur", default) == ("background", "response")
    assert parse_fit("camera,-blur", default) == ("camera", "background", "shadow")
    assert parse_fit("-camera", default) == default and parse_fit("shadow", default) == default
    assert parse_fit(["appearance"], default) == ("background", "appearance", "shadow", "blur")
    assert parse_fit("none", default) == () and parse_fit("none,camera", default) == ("camera",)
    assert parse_fit("-blur", ()) == ()
    with pytest.raises(ValueError, match="'blur' is both added and taken out"):
        parse_fit("blur,-blur", default)
    with pytest.raises(ValueError, match="unknown kind '\\+lights'"):
        parse_fit("+lights", default)
    with pytest.raises(ValueError, match="unknown kind '-none'"):
        parse_fit("-none", default)
    assert set(KINDS) == {"camera", "background", "appearance", "shadow", "bounce", "blur",
                          "response"}


def test_the_defaults_for_a_video_the_engine_did_not_make():
    """``fit_for``: the backdrop, the lights, the shadow, the bounce map and the camera's
    blur and response for a foreign video without a mask; the lights only where an
    ambient and a directional light are there to learn, the shadow only where a
    directional light and a ground cast it, the bounce map where a ground takes it and
    no Levenberg-Marquardt fits the scene; what was given otherwise."""
    from gradsim_taichi.estimation_outputs import fit_for, loss_for
    from gradsim_taichi.render import AmbientLight, DirectionalLight

    scene = _scene(frames=2, size=8)
    lights = list(scene.renderer.lights)
    assert fit_for(True, None, scene, masked=False) == ("background", "appearance", "shadow",
                                                        "bounce", "blur", "response")
    assert fit_for(True, None, scene, masked=True) == ()
    assert fit_for(False, None, scene, masked=False) == ()
    # names add to the default (--fit camera); none drops it
    assert fit_for(True, ("camera",), scene, masked=False) == ("camera", "background",
                                                               "appearance", "shadow",
                                                               "bounce", "blur", "response")
    assert fit_for(True, (), scene, masked=False) == ()  # (an empty list: none)
    assert fit_for(True, "none", scene, masked=False) == ()
    assert fit_for(True, "none,camera", scene, masked=False) == ("camera",)
    assert fit_for(True, "camera,-appearance", scene, masked=False) == (
        "camera", "background", "shadow", "bounce", "blur", "response")
    assert fit_for(True, "+camera", scene, masked=True) == ("camera",)
    assert fit_for(False, "camera", scene, masked=False) == ("camera",)
    scene.renderer.lights = [lt for lt in lights if not isinstance(lt, DirectionalLight)]
    assert fit_for(True, None, scene, masked=False) == ("background", "bounce", "blur",
                                                        "response")
    scene.renderer.lights = [lt for lt in lights if not isinstance(lt, AmbientLight)]
    assert fit_for(True, None, scene, masked=False) == ("background", "shadow", "bounce",
                                                        "blur", "response")
    optimizer, scene.optimizer = scene.optimizer, "lm"
    assert "bounce" not in fit_for(True, None, scene, masked=False)
    scene.optimizer = optimizer
    # what the defaults name can be set up on the scene they were chosen for
    for kept in ([], lights, [lt for lt in lights if not isinstance(lt, AmbientLight)]):
        scene.renderer.lights = kept
        Nuisance(scene, fit_for(True, None, scene, masked=False),
                 torch.zeros(3, 8, 8, 3, dtype=f64))
    assert (loss_for(True, None, False), loss_for(False, None, False),
            loss_for(True, None, True), loss_for(True, "mse", False)) == (
        "robust", "mse", "masked", "mse")


def test_each_kind_learns_as_many_values_as_the_optimiser_choice_counts():
    """``unknowns`` (what picks Levenberg-Marquardt, at most 32 unknowns) is the size of
    what the kinds learn, alone and together."""
    scene = _scene(frames=2, size=8)
    target = torch.zeros(3, 8, 8, 3, dtype=f64)
    assert set(UNKNOWNS) == set(KINDS)
    for kinds in [(k,) for k in KINDS] + [KINDS, ("background", "appearance"),
                                          ("appearance", "shadow")]:
        nu = Nuisance(scene, kinds, target)
        assert sum(t.numel() for t in nu.tensors()) == unknowns(kinds), kinds
    assert unknowns(("appearance",)) == UNKNOWNS["appearance"]


def test_with_the_background_solved_the_lights_scale_is_the_albedos():
    """With ``background`` only the objects are lit, albedo x light: the gain times k
    and the lights over k draw the same image, so the directional light's intensity is
    not learned (the gain and the ambient carry the scale)."""
    scene = _scene(frames=3, size=16)
    out = _truth_outputs(scene)
    target = scene.render(out)
    nu = Nuisance(scene, ("background", "appearance"), target)
    assert "light_intensity" not in nu.params and "ambient" in nu.params
    with torch.no_grad():
        for name in ("albedo_gain", "ambient", "light_direction"):
            nu.params[name].copy_(torch.as_tensor(GENERIC[name], dtype=f64))
    image = nu.render(out)
    k = 1.7
    with torch.no_grad():
        nu.params["albedo_gain"].mul_(k)
        nu.params["ambient"].div_(k)
    nu.sun.intensity = nu.sun.intensity / k
    assert torch.allclose(nu.render(out), image, rtol=0, atol=1e-12)
    # ... which the stage, drawn without the background, is not
    drawn = Nuisance(scene, ("appearance",), target)
    assert "light_intensity" in drawn.params


# away from the defaults, so that every parameter's derivative is generic
GENERIC = {"camera_rotation": [0.01, -0.02, 0.005], "camera_translation": [0.02, 0.01, -0.03],
           "albedo_gain": [0.9, 1.1, 1.05], "ambient": 0.45, "light_intensity": 0.55,
           "light_direction": [0.1, -0.05], "shadow_strength": 0.4,
           "occlusion_strength": [0.3, 0.2, 0.35], "blur_sigma": 0.8, "gamma": 1.7,
           "response_offset": 0.06,
           # (one body's map [1, 3, G, G]: a smooth, generic field)
           "bounce_map": 0.2 * torch.sin(torch.arange(3 * BOUNCE_CELLS ** 2, dtype=f64)
                                         ).reshape(1, 3, BOUNCE_CELLS, BOUNCE_CELLS)}


@pytest.mark.parametrize("mode, kinds, rtol", [
    ("antialias", ("camera", "appearance", "shadow"), 1e-5),
    ("soft", ("camera", "appearance", "shadow"), 1e-5),
    # (the solved background follows the shadow: its least squares in the derivative)
    ("antialias", ("background", "shadow"), 1e-4),
    ("antialias", ("shadow", "blur", "response"), 1e-5),
    ("antialias", ("background", "shadow", "blur", "response"), 1e-4),
    # the defaults for a video the engine did not make
    ("antialias", ("background", "appearance", "shadow", "bounce", "blur", "response"), 1e-4),
])
def test_every_nuisance_gradient_matches_central_differences(mode, kinds, rtol):
    scene = _scene(mode)
    out = _truth_outputs(scene)
    target = scene.render(out)
    nu = Nuisance(scene, kinds, target)
    with torch.no_grad():
        for name, t in nu.params.items():
            t.copy_(torch.as_tensor(GENERIC[name], dtype=f64))
    w = torch.rand(target.shape, generator=torch.Generator().manual_seed(0), dtype=f64)

    def loss():
        return (nu.render(out) * w).sum()

    loss().backward()
    for name, t in nu.params.items():
        d = torch.randn(t.shape, generator=torch.Generator().manual_seed(1), dtype=f64)
        num, ana = _directional(loss, t, d)
        assert abs(num) > 1e-6, name
        assert abs(ana - num) <= rtol * abs(num), (name, ana, num)


@pytest.mark.parametrize("gamma, offset", [(2.4, 0.055), (1.8, 0.0)])
def test_a_recorded_clip_is_modelled_in_linear_light(gamma, offset):
    """With the camera's response known, the model of a clip recorded through it is the
    response of the model of the linear clip, to rounding: the background is solved,
    the objects composited and the shadow cast in linear light, and a pixel that an edge
    half covers records the response of the mix (compositing recorded values put the
    edges up to ~0.07 off). And :meth:`Nuisance.linear` inverts the response, its linear
    toe below the floor included."""
    scene = _scene(frames=6, size=24)
    out = _truth_outputs(scene)
    clip = scene.render(out)[..., :3]
    assert float(clip.min()) > 1e-4  # (where the response is the power law)
    kinds = ("background", "shadow", "blur")
    linear_model = Nuisance(scene, kinds, clip, robust_eps=0.01)
    recorded = (1.0 + offset) * clip ** (1.0 / gamma) - offset
    recorded_model = Nuisance(scene, (*kinds, "response"), recorded, robust_eps=0.01)
    with torch.no_grad():
        for nu in (linear_model, recorded_model):
            for name, t in nu.params.items():
                t.copy_(torch.as_tensor(GENERIC[name], dtype=f64))
        recorded_model.params["gamma"].fill_(gamma)
        recorded_model.params["response_offset"].fill_(offset)
        want = recorded_model.response(linear_model.render(out)[..., :3])
        got = recorded_model.render(out)[..., :3]
        covered = linear_model.render(out, coverage=True)[..., 3]
        x = torch.cat([torch.logspace(-8, 0, 200, dtype=f64), torch.zeros(1, dtype=f64)])
        back = recorded_model.linear(recorded_model.response(x))
    assert bool(((covered > 0.2) & (covered < 0.8)).any())  # edges in view
    assert float((got - want).abs().max()) < 1e-12
    assert float((back - x).abs().max()) < 1e-12


def test_background_is_the_least_squares_image_and_passes_gradients(monkeypatch):
    """A target composited over a known image: the solved background is that image
    wherever some frame leaves the pixel uncovered (with a negligible pull towards the
    median); the composite's gradient with respect to the body's vertices matches
    central differences."""
    import gradsim_taichi.nuisance as N

    monkeypatch.setattr(N, "BACKGROUND_PRIOR", 1e-12)
    scene = _scene(frames=6)
    out = _truth_outputs(scene)
    nu0 = Nuisance(scene, ("background",), scene.render(out))
    g = torch.Generator().manual_seed(2)
    image = torch.rand(scene.height, scene.width, 3, generator=g, dtype=f64)
    nu0.plate = image
    target = nu0.render(out)  # objects over the known image
    nu = Nuisance(scene, ("background",), target)
    again = nu.render(out)
    seen = (1 - nu.render(out, coverage=True)[..., 3]).amax(0) > 0.5
    assert seen.float().mean() > 0.5
    assert (nu.background - image).abs()[seen].max() < 1e-9
    assert (again - target).abs().max() < 1e-9  # where never seen, the image is the object

    x = out["rigid"].detach().clone().requires_grad_(True)
    w = torch.rand(target.shape, generator=g, dtype=f64)

    def loss(xx):
        return (nu.render({"rigid": xx}) * w).sum()

    loss(x).backward()
    d = torch.randn(x.shape, generator=g, dtype=f64)
    h = 1e-7
    with torch.no_grad():
        num = float((loss(x + h * d) - loss(x - h * d)) / (2 * h))
    assert abs(float((x.grad * d).sum()) - num) <= 1e-5 * abs(num)


def test_a_background_plate_of_the_wrong_size_is_named():
    scene = _scene()
    with pytest.raises(ValueError, match=r"background must be \[24, 24, 3\]"):
        Nuisance(scene, ("background",), scene.render(_truth_outputs(scene)),
                 background=torch.zeros(10, 10, 3, dtype=f64))


def test_calibration_recovers_a_moved_camera_from_the_first_frame():
    """The target's camera is off by 3% of its distance; the first frame alone (which
    the mass does not change) gives the pose back."""
    from gradsim_taichi.estimation import estimate, render_target

    scene = _scene(size=48, frames=3)
    eye, aim = np.array(scene.camera_eye), np.array(scene.camera_target)
    moved = _scene(size=48, frames=3)
    off = np.array([0.6, -0.5, 0.62])
    moved.camera_eye = tuple(eye + off / np.linalg.norm(off) * 0.03 * np.linalg.norm(eye - aim))
    moved.build()
    target = render_target(moved)
    r = estimate(scene, target, fit="camera", iters=1, progress=False, uncertainty=False,
                 true={})
    calib = r.stages[0]
    assert calib["last_frame"] == 0 and calib["loss_after"] < 1e-6 * calib["loss_before"]
    R0, t0 = (x.detach() for x in moved.camera.world_to_camera())
    from gradsim_taichi.nuisance import _rotation

    dR = _rotation(torch.as_tensor(calib["nuisance"]["camera_rotation"], dtype=f64))
    R1, _ = scene.camera.world_to_camera()
    assert (dR @ R1 - R0).abs().max() < 1e-5
    t1 = dR @ scene.camera.world_to_camera()[1] + torch.as_tensor(
        calib["nuisance"]["camera_translation"], dtype=f64)
    assert (t1 - t0).abs().max() < 1e-5


def test_calibration_recovers_the_cameras_blur_and_response_from_the_first_frame(
        monkeypatch):
    """A clip blurred by the camera and recorded through its response (here our own
    render, blurred by a known variance, then through an sRGB-like curve
    ``1.055 x^(1/2.4) - 0.055``): the first frame gives all three back."""
    from gradsim_taichi import fit
    from gradsim_taichi.estimation import estimate, render_target
    from gradsim_taichi.objectives import heat_blur_frames

    monkeypatch.setattr(fit, "CALIBRATION_ITERS", 10)  # (two unknowns: LM needs few)

    scene = _scene(size=24, frames=2)
    linear = heat_blur_frames(render_target(scene)[..., :3], torch.tensor(0.8, dtype=f64))
    assert float(linear.min()) > 1e-4  # (where the response is the power law)
    recorded = 1.055 * linear ** (1 / 2.4) - 0.055
    r = estimate(scene, recorded, fit="blur,response", iters=1, progress=False,
                 uncertainty=False, init={"mass": float(scene.params["mass"].true)})
    calib = r.stages[0]
    assert abs(calib["nuisance"]["blur_sigma"]) == pytest.approx(0.8 ** 0.5, rel=1e-6)
    assert calib["nuisance"]["gamma"] == pytest.approx(2.4, rel=1e-6)
    assert calib["nuisance"]["response_offset"] == pytest.approx(0.055, rel=1e-6)
    assert calib["loss_after"] < 1e-12 * calib["loss_before"]


@pytest.mark.parametrize("optimizer", [pytest.param("lbfgs", marks=pytest.mark.slow), "lm"])
def test_a_gradient_optimiser_holds_the_calibrated_camera_through_the_warm_up(
        monkeypatch, optimizer):
    """L-BFGS keeps the frame-0 calibration's camera until every frame is fitted, then
    learns it with the physics; Levenberg-Marquardt learns it from the start."""
    from gradsim_taichi import fit
    from gradsim_taichi.estimation import estimate, render_target

    scene = _scene(size=32, frames=4)
    moved = _scene(size=32, frames=4)
    eye, aim = np.array(scene.camera_eye), np.array(scene.camera_target)
    moved.camera_eye = tuple(eye + np.array([0.02, 0.03, -0.01]) * np.linalg.norm(eye - aim))
    moved.build()
    target = render_target(moved)
    seen = []
    step = fit.Fit.step

    def recording(self, it):
        out = step(self, it)
        seen.append((it, self.nuisance.params["camera_translation"].detach().clone()))
        return out

    monkeypatch.setattr(fit.Fit, "step", recording)
    r = estimate(scene, target, fit="camera", optimizer=optimizer, warmup=(2, 2), iters=4,
                 tol=0.0, init={"mass": 2.0}, progress=False, uncertainty=False)
    calibrated = torch.as_tensor(r.stages[0]["nuisance"]["camera_translation"], dtype=f64)
    moved_in = [it for it, t in seen if not torch.equal(t, calibrated)]
    assert moved_in == ([2, 3] if optimizer == "lbfgs" else [0, 1, 2, 3]), moved_in



@pytest.mark.slow  # (restarts themselves: test_estimation_own_videos.py)
def test_restarts_calibrate_frame_0_once_and_end_as_runs_of_their_own(monkeypatch):
    """The guesses of ``restarts`` leave frame 0 alone (the mass does not move the
    initial state), so its calibration runs once; each restart still ends bit for bit
    where an estimation from its seed alone ends. Another frame 0 (another shape) is
    calibrated afresh."""
    from gradsim_taichi import fit
    from gradsim_taichi.estimation import estimate, render_target

    scene = _scene(size=16, frames=2)
    target = render_target(_scene(size=16, frames=2, shape="cone")) * 0.9  # dimmer
    calibrations = []

    class Counting(fit.LevenbergMarquardt):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            if kw.get("tolerance") == 1e-30:  # the calibration's (one per blur level)
                calibrations.append(self)

    monkeypatch.setattr(fit, "LevenbergMarquardt", Counting)
    monkeypatch.setattr(fit, "CALIBRATION_ITERS", 2)  # (short: the values are not the point)
    kw = dict(fit="appearance", loss="robust", iters=1, progress=False,
              uncertainty=False)
    both = estimate(scene, target, restarts=2, **kw)
    assert len(calibrations) == len(fit.CALIBRATION_BLURS) + 1
    alone = estimate(scene, target, seed=1, **kw)  # (the restart that reused it)
    assert both.restarts[1]["params"]["mass"] == float(alone.params["mass"])
    assert both.restarts[1]["loss"] == alone.loss
    assert both.restarts[0]["params"]["mass"] != both.restarts[1]["params"]["mass"]
    for r in (both, alone):  # (the record shows the run's own initial guess)
        assert r.stages[0]["params"]["mass"] == pytest.approx(float(r.init["mass"]), rel=1e-12)
    assert {**alone.stages[0], "params": None} == {**both.stages[0], "params": None}
    cache = {}
    estimate(scene, target, _calibrations=cache, **kw)
    assert len(cache) == 1
    estimate(_scene(size=16, frames=2, shape="cone"), target, _calibrations=cache, **kw)
    assert len(cache) == 2

@pytest.mark.slow
def test_fit_gives_each_warm_up_horizon_more_iterations():
    """With nuisance parameters the scene's warm-up horizons get FIT_WARMUP_ITERS each,
    at most half the run together; a warm-up given explicitly is kept as it is."""
    from gradsim_taichi.estimation import estimate, render_target
    from gradsim_taichi.objectives import FIT_WARMUP_ITERS, fit_warmup

    n = FIT_WARMUP_ITERS
    assert fit_warmup([(4, 12)], 30) == [(n, 12)]
    assert fit_warmup([(4, 12)], 10) == [(5, 12)]
    assert fit_warmup([(4, 12)], 6) == [(4, 12)]  # never fewer than the scene's
    assert fit_warmup([(2, 5), (3, 9)], 4 * n) == [(n, 5), (n, 9)]
    assert fit_warmup([], 30) == []
    scene = _scene(frames=4)
    target = render_target(scene)
    common = dict(iters=2 * n, init={"mass": 3.0}, progress=False, uncertainty=False)
    assert estimate(scene, target, fit="background", **common).settings["warmup"] == [(n, 12)]
    assert estimate(scene, target, **common).settings["warmup"] == [(4, 12)]
    assert estimate(scene, target, fit="background", warmup=(3, 2),
                    **common).settings["warmup"] == [(3, 2)]
    # the pre-contact stage's n iterations are not the warm-up's: half of 2n - n
    staged = estimate(scene, target, fit="background", stage_contact=n, **common)
    assert staged.settings["warmup"][-1] == (n // 2, 12), staged.settings["warmup"]


def test_cli_fit_writes_the_nuisance_and_background(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["estimate", "rigid-mass", "--fit", "background,appearance", "--iters", "2",
                 "--arch", TEST_ARCH, "--frames", "6", "--resolution", "24", "--quiet",
                 "--out", str(out)]) == 0
    report = json.loads((out / "report.json").read_text())
    nu = report["nuisance"]
    assert set(nu) == {"albedo_gain", "ambient", "light_direction", "background"}
    assert nu["background"]["source"] == "solved per pixel"
    assert report["settings"]["fit"] == ["background", "appearance"]
    assert (out / "background.png").stat().st_size > 100


@pytest.mark.parametrize("extra, message", [
    (["--fit", "lights"], "--fit: unknown kind 'lights'"),
    (["--fit", "camera", "--supervision", "3d"], "3D supervision has no image"),
])
def test_cli_fit_errors(extra, message, capsys, tmp_path):
    assert main(["estimate", "rigid-mass", *extra, "--out", str(tmp_path / "o"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_a_camera_value_at_its_bound_is_warned_of():
    """The blur or the response at the end of its range: the video differs from the
    model in a way they absorbed as far as they could."""
    from gradsim_taichi.estimation_warnings import camera_limits
    from gradsim_taichi.nuisance import BLUR_MAX, GAMMA_RANGE, RESPONSE_OFFSET_RANGE

    assert camera_limits(None) == [] and camera_limits({"shadow_strength": 1.0}) == []
    # (a sharp clip's blur and a power law's offset sit at 0 by design)
    assert camera_limits({"blur_sigma": 0.0, "gamma": 2.2, "response_offset": 0.0}) == []
    assert camera_limits({"blur_sigma": 0.4 * BLUR_MAX, "gamma": 2.2}) == []
    (blur,) = camera_limits({"blur_sigma": -BLUR_MAX, "gamma": 2.2})
    assert "blur_sigma ended at the bound" in blur
    (gamma,) = camera_limits({"blur_sigma": 0.0, "gamma": GAMMA_RANGE[1]})
    assert "gamma ended at the bound" in gamma
    (gamma,) = camera_limits({"gamma": GAMMA_RANGE[0]})
    assert "gamma ended at the bound" in gamma
    (offset,) = camera_limits({"gamma": 2.2, "response_offset": RESPONSE_OFFSET_RANGE[1]})
    assert "response_offset ended at the bound" in offset


def test_the_camera_correction_stays_small_and_its_bound_is_warned_of():
    """The pose correction is kept within CAMERA_TURN_MAX radians and CAMERA_SHIFT_MAX of
    the camera's distance per component (projected; an element at its bound is not free),
    and a run that ends there is warned of."""
    from gradsim_taichi.estimation_warnings import camera_limits
    from gradsim_taichi.nuisance import CAMERA_SHIFT_MAX, CAMERA_TURN_MAX

    scene = _scene(frames=1, size=8)
    nu = Nuisance(scene, ("camera", "blur"), torch.zeros(2, 8, 8, 3, dtype=f64))
    distance = float(scene.camera.world_to_camera()[1].norm())
    assert distance > 1.0
    with torch.no_grad():
        nu.params["camera_rotation"].copy_(torch.tensor([0.05, -0.4, 0.2], dtype=f64))
        nu.params["camera_translation"].copy_(torch.tensor([0.0, 1.0, -0.01], dtype=f64))
    nu.project()
    shift = CAMERA_SHIFT_MAX * distance
    assert nu.params["camera_rotation"].tolist() == pytest.approx(
        [0.05, -CAMERA_TURN_MAX, CAMERA_TURN_MAX])
    assert nu.params["camera_translation"].tolist() == pytest.approx([0.0, shift, -0.01])
    assert nu.free("camera_rotation").tolist() == [True, False, False]
    assert nu.free("camera_translation").tolist() == [True, False, True]
    turned, shifted = camera_limits(nu.report(), nu.bounds)
    assert "camera_rotation ended at the bound" in turned
    assert "camera_translation ended at the bound" in shifted
    with torch.no_grad():
        nu.params["camera_rotation"].mul_(0.5)
    assert camera_limits(nu.report(), nu.bounds) == [shifted]
    with torch.no_grad():
        nu.params["camera_translation"].mul_(0.5)
    assert camera_limits(nu.report(), nu.bounds) == []
    # a camera at the world's origin (an identity extrinsic) may still move by 10% of 1 m
    from gradsim_taichi.render import Camera

    cam = scene.camera
    scene.camera = Camera.from_extrinsic(torch.eye(4, dtype=f64), *cam.intrinsics(),
                                         cam.width, cam.height, cam.near, cam.far)
    at_origin = Nuisance(scene, ("camera",), torch.zeros(2, 8, 8, 3, dtype=f64))
    assert at_origin.bounds["camera_translation"] == pytest.approx(
        (-CAMERA_SHIFT_MAX, CAMERA_SHIFT_MAX))

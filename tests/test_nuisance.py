"""Nuisance parameters (estimate(fit=...)): every parameter's gradient against float64
central differences, the background's closed form, the camera calibration on the first
frame, and the CLI's errors."""

import json

import numpy as np
import pytest
import torch
from runtime_arch import TEST_ARCH

from gradsim_taichi.cli import main
from gradsim_taichi.nuisance import KINDS, Nuisance, parse_fit

f64 = torch.float64
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _scene(mode="antialias", frames=4, size=24, **kw):
    from gradsim_taichi.scenes import make_scene

    scene = make_scene("rigid-mass", frames=frames, width=size, height=size, **kw)
    scene.render_mode = mode
    scene.build()
    return scene


def _truth_outputs(scene):
    with torch.no_grad():
        return scene.simulate(scene.true_values(["mass"]))


def test_parse_fit():
    assert parse_fit(None) == ()
    assert parse_fit("appearance, camera") == ("camera", "appearance")
    assert parse_fit(["background"]) == ("background",)
    with pytest.raises(ValueError, match="unknown kind 'lights'"):
        parse_fit("camera,lights")
    assert set(KINDS) == {"camera", "background", "appearance", "shadow"}


# away from the defaults, so that every parameter's derivative is generic
GENERIC = {"camera_rotation": [0.01, -0.02, 0.005], "camera_translation": [0.02, 0.01, -0.03],
           "albedo_gain": [0.9, 1.1, 1.05], "ambient": 0.45, "light_intensity": 0.55,
           "light_direction": [0.1, -0.05], "shadow_strength": 0.4}


@pytest.mark.parametrize("mode, kinds, rtol", [
    ("antialias", ("camera", "appearance", "shadow"), 1e-5),
    ("soft", ("camera", "appearance", "shadow"), 1e-5),
    # (the solved background follows the shadow: its least squares in the derivative)
    ("antialias", ("background", "shadow"), 1e-4),
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
        h = 1e-6
        with torch.no_grad():
            base = t.clone()
            t.copy_(base + h * d)
            lp = loss()
            t.copy_(base - h * d)
            lm = loss()
            t.copy_(base)
        num = float((lp - lm) / (2 * h))
        ana = float((t.grad * d).sum())
        assert abs(num) > 1e-6, name
        assert abs(ana - num) <= rtol * abs(num), (name, ana, num)


@pytest.mark.parametrize("direction", [(0.0, -1.0, 0.0), (0.3, -1.0, -0.6)])
def test_the_shadow_falls_along_the_light_onto_the_ground(direction):
    """A body in the air: the ground pixel that the light carries its centre onto is in
    full shadow (darkened by the strength), the pixel of a ground point 0.4 m beside it
    is not; the darkening is 1 - strength times the shadow's coverage there."""
    from gradsim_taichi.render import DirectionalLight

    scene = _scene(size=48, frames=1)
    scene.renderer.lights = [lt if not isinstance(lt, DirectionalLight) else
                             DirectionalLight(direction, lt.intensity, lt.color)
                             for lt in scene.renderer.lights]
    out = _truth_outputs(scene)
    nu = Nuisance(scene, ("shadow",), scene.render(out))
    with torch.no_grad():
        nu.params["shadow_strength"].fill_(0.6)
        verts = scene.posed_vertices(out)
        moving = [k for k, p in enumerate(scene.parts) if p.static_vertices is None]
        shade = nu.shadow(scene.camera, nu.meshes(), verts, moving)[0, ..., 0]
    centre = verts[moving[0]][0].mean(0)
    assert centre[1] > 0.2  # in the air
    d = torch.as_tensor(direction, dtype=f64)
    on_ground = centre - centre[1] / d[1] * d
    beside = on_ground + torch.tensor([0.4, 0.0, 0.0], dtype=f64)
    uv = scene.camera.project(torch.stack([on_ground, beside]))[0]  # pixel centres: +0.5
    (u0, v0), (u1, v1) = uv.floor().long().tolist()
    # (within the blur's tail from the shadow's edge, pixels away)
    assert abs(float(shade[v0, u0]) - 0.4) < 0.01
    assert abs(float(shade[v1, u1]) - 1.0) < 0.01
    assert float(shade.min()) >= 0.4 - 1e-9 and float(shade.max()) <= 1.0 + 1e-9


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


def test_cli_fit_writes_the_nuisance_and_background(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["estimate", "rigid-mass", "--fit", "background,appearance", "--iters", "2",
                 "--arch", TEST_ARCH, "--frames", "6", "--resolution", "24", "--quiet",
                 "--out", str(out)]) == 0
    report = json.loads((out / "report.json").read_text())
    nu = report["nuisance"]
    assert set(nu) == {"albedo_gain", "ambient", "light_intensity", "light_direction",
                       "background"}
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

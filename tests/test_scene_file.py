"""Scene files (gradsim_taichi/scenes/scene_file.py): a preset written as a file gives the
same rollout and frames; estimation from a file; errors that name the key; the CLI."""

import json

import numpy as np
import pytest
import torch
from runtime_arch import TEST_ARCH

from gradsim_taichi.cli import main
from gradsim_taichi.estimation import estimate, render_target
from gradsim_taichi.scenes import make_scene
from gradsim_taichi.scenes.scene_file import (
    OPTIMIZERS,
    SceneFileError,
    load_scene_file,
    scene_from_toml,
)
from gradsim_taichi.scenes.scene_file_writer import scene_to_toml

# a small scene: one box pushed off-centre, tumbling onto the ground; unknown mass
BASE = """
[scene]
name = "small-box"
fps = 60.0
frames = 10
substeps = 32
width = 24
height = 24

[camera]
eye = [0.0, 0.8, 1.8]
target = [0.0, 0.2, 0.0]
fov_y_deg = 40.0

[contact]
ke = 5000.0
kd = 100.0

[[objects]]
kind = "rigid"
shape = "box"
extents = [0.4, 0.3, 0.3]
position = [-0.4, 0.4, 0.0]
orientation = [0.95, 0.09, 0.29, 0.06]
mass = { unknown = true, guess_low = 2.0, guess_high = 12.0, true = 4.0 }

[[pushes]]
object = 0
kind = "impulse"
vector = [3.0, 1.0, 0.0]
point = [0.0, 0.1, 0.1]
duration = 0.016666666666666666
"""


def rollout(scene, values=None):
    out = scene.simulate(scene.true_values(scene.params) if values is None else values)
    return out["rigid"], scene.render(out)


@pytest.mark.parametrize("preset, shape", [
    ("rigid-mass", "box"), pytest.param("rigid-mass", "cone", marks=pytest.mark.slow),
    ("rigid-contact", "lshape")])
def test_preset_to_file_to_scene_gives_the_same_rollout(tmp_path, preset, shape):
    scene = make_scene(preset, shape=shape, width=24, height=24, frames=10)
    path = tmp_path / "scene.toml"
    path.write_text(scene_to_toml(scene))
    loaded = load_scene_file(path)
    assert loaded.default_params == scene.default_params
    for name, spec in scene.params.items():
        got = loaded.params[name]
        assert (got.sim_name, got.true, got.low, got.high) == (spec.sim_name, spec.true,
                                                                spec.low, spec.high)
    assert (loaded.optimizer, loaded.iters, loaded.lr, loaded.blur, loaded.warmup) == (
        scene.optimizer, scene.iters, scene.lr, scene.blur, scene.warmup)
    x0, frames0 = rollout(scene)
    x1, frames1 = rollout(loaded)
    assert x0.shape == x1.shape == (11, x0.shape[1], 3) and frames0.shape == frames1.shape
    assert float((x0 - x0[0]).abs().max()) > 0.1  # it moves
    assert float((x0 - x1).abs().max()) <= 1e-12
    assert float((frames0 - frames1).abs().max()) <= 1e-12
    # and a loaded scene writes itself back unchanged
    again = scene_to_toml(loaded)
    assert scene_to_toml(scene_from_toml(again)) == again


def test_estimate_the_unknown_mass_from_a_scene_file():
    scene = scene_from_toml(BASE)
    assert list(scene.params) == ["mass"] and scene.truth_given == {"mass": True}
    target = render_target(scene)
    result = estimate(scene, target, iters=8, seed=0, progress=False, uncertainty=False)
    init, est = float(result.init["mass"]), float(result.params["mass"])
    assert abs(init - 4.0) / 4.0 > 0.5  # a real starting error
    assert abs(est - 4.0) / 4.0 < 1e-9  # measured: 5e-14 (seeds 0-2 reach 2e-14..5e-14)


def test_estimate_two_unknown_masses_of_two_objects():
    second = """
[[objects]]
kind = "rigid"
shape = "sphere"
radius = 0.1
subdivisions = 1
position = [0.3, 0.3, 0.0]
color = [0.2, 0.3, 0.8]
shading = "flat"
mass = { unknown = true, guess_low = 0.5, guess_high = 2.0, true = 1.0 }

[[pushes]]
object = 1
kind = "impulse"
vector = [-1.0, 1.0, 0.0]
duration = 0.016666666666666666
"""
    scene = scene_from_toml(BASE + second)
    result = estimate(scene, render_target(scene), iters=12, seed=0, progress=False,
                      uncertainty=False)
    truth = {"mass_0": 4.0, "mass_1": 1.0}
    assert any(abs(float(result.init[n]) - v) / v > 0.05 for n, v in truth.items())
    for name, value in truth.items():  # measured: 1.1e-9 and 4.8e-10
        assert abs(float(result.params[name]) - value) / value < 1e-6


def test_unknown_mass_without_truth_is_built_at_the_geometric_mean():
    scene = scene_from_toml(BASE.replace(", true = 4.0", ""))
    assert scene.truth_given == {"mass": False}
    assert scene.params["mass"].true == pytest.approx(np.sqrt(24.0), rel=1e-15)


def test_several_objects_each_unknown_mass_goes_to_its_body():
    second = """
[[objects]]
kind = "rigid"
shape = "sphere"
radius = 0.1
subdivisions = 1
position = [0.3, 0.3, 0.0]
color = [0.2, 0.3, 0.8]
shading = "flat"
mass = MASS
"""
    unknown = scene_from_toml(BASE.replace(", true = 4.0", "") + second.replace(
        "MASS", "{ unknown = true, guess_low = 0.5, guess_high = 2.0, true = 1.0 }"))
    assert list(unknown.params) == ["mass_0", "mass_1"]
    known = scene_from_toml(BASE.replace("mass = { unknown = true, guess_low = 2.0, "
                                         "guess_high = 12.0, true = 4.0 }", "mass = 3.0")
                            + second.replace("MASS", "1.7"))
    assert list(known.params) == []
    # mass_0 as built (the guesses' geometric mean: sqrt(24)) unless given
    t = torch.tensor
    x_unknown, f_unknown = rollout(unknown, {"mass_0": t(3.0, dtype=torch.float64),
                                             "mass_1": t(1.7, dtype=torch.float64)})
    x_known, f_known = rollout(known, {})
    assert float((x_unknown - x_known).abs().max()) <= 1e-12
    assert float((f_unknown - f_known).abs().max()) <= 1e-12
    x_other, _ = rollout(unknown, {"mass_1": t(1.7, dtype=torch.float64)})
    assert float((x_other - x_known).abs().max()) > 1e-4  # mass_0 is sqrt(24), not 3
    # the first frames only (an estimation's horizons)
    part = unknown.simulate({"mass_0": t(3.0, dtype=torch.float64),
                             "mass_1": t(1.7, dtype=torch.float64)}, 4)["rigid"]
    assert part.shape[0] == 5 and float((part - x_known[:5]).abs().max()) <= 1e-12


def test_initial_velocity_and_spin_in_free_flight():
    """No push, no contact within 10 frames (1/6 s): the centre moves at the given
    velocity under gravity and the box turns at the given rate about its z axis."""
    start = BASE.index("[[pushes]]")
    text = (BASE[:start] + "\n").replace("orientation = [0.95, 0.09, 0.29, 0.06]",
                                         "orientation = [1.0, 0.0, 0.0, 0.0]\n"
                                         "velocity = [1.0, 0.5, 0.0]\n"
                                         "angular_velocity = [0.0, 0.0, 2.0]")
    x, _ = rollout(scene_from_toml(text))
    t = 10 / 60.0
    centre = x.mean(dim=1)  # a box's vertex mean is its centre of mass
    assert float(centre[-1, 0] - centre[0, 0]) == pytest.approx(t, abs=1e-9)
    # semi-implicit Euler: within g t dt of the parabola
    assert float(centre[-1, 1] - centre[0, 1]) == pytest.approx(0.5 * t - 4.9 * t * t,
                                                                abs=1e-3)
    r0, r1 = (x[k, 0, :2] - centre[k, :2] for k in (0, -1))
    angle = float(torch.atan2(r0[0] * r1[1] - r0[1] * r1[0], r0 @ r1))
    assert angle == pytest.approx(2.0 * t, abs=1e-6)


def test_a_force_over_one_frame_is_the_impulse_over_that_frame():
    impulse = scene_from_toml(BASE)
    force = scene_from_toml(BASE.replace(
        'kind = "impulse"\nvector = [3.0, 1.0, 0.0]', 'kind = "force"\nvector = [180.0, 60.0, 0.0]')
        .replace("duration = 0.016666666666666666", "frames = [0, 1]"))
    assert force.spec["pushes"][0]["kind"] == "force"
    x_impulse, _ = rollout(impulse)
    x_force, _ = rollout(force)
    assert float((x_impulse - x_force).abs().max()) < 1e-12
    longer = scene_from_toml(BASE.replace(
        'kind = "impulse"\nvector = [3.0, 1.0, 0.0]', 'kind = "force"\nvector = [180.0, 60.0, 0.0]')
        .replace("duration = 0.016666666666666666", "frames = [0, 2]"))
    assert float((rollout(longer)[0] - x_force).abs().max()) > 1e-3


def test_without_ground_the_body_falls_through_and_nothing_is_staged():
    scene = scene_from_toml(BASE.replace("[contact]", "[stage]\nground = false\n\n[contact]")
                            .replace("frames = 10", "frames = 20"))
    x, frames = rollout(scene)
    assert len(scene.parts) == 1  # the body only
    assert float(x[-1, :, 1].min()) < -0.1  # through the ground plane y = 0 that is absent
    grounded = scene_from_toml(BASE.replace("frames = 10", "frames = 20"))
    assert float(rollout(grounded)[0][-1, :, 1].min()) > -0.05  # penalty contact: ~1 cm


def test_pinhole_and_extrinsic_cameras_match_the_look_at_camera():
    look_at = scene_from_toml(BASE)
    look_at.ensure_built()
    f = float(look_at.camera.fx)
    pinhole = scene_from_toml(BASE.replace("fov_y_deg = 40.0",
                                           f"fx = {f!r}\nfy = {f!r}\ncx = 12.0\ncy = 12.0"))
    R, tr = look_at.camera.world_to_camera()
    rows = [list(map(float, R[k])) + [float(tr[k])] for k in range(3)] + [[0.0, 0, 0, 1]]
    cam = (f"[camera]\nworld_to_camera = {rows!r}\nfx = {f!r}\nfy = {f!r}\ncx = 12.0\n"
           "cy = 12.0\n")
    start, end = BASE.index("[camera]"), BASE.index("[contact]")
    extrinsic = scene_from_toml(BASE[:start] + cam + "\n" + BASE[end:])
    _, frames = rollout(look_at)
    for other in (pinhole, extrinsic):
        assert float((rollout(other)[1] - frames).abs().max()) <= 1e-12
    # intrinsics in pixels of the file's size scale with an overridden size
    large = scene_from_toml(BASE.replace("fov_y_deg = 40.0",
                                         f"fx = {2 * f!r}\nfy = {2 * f!r}\ncx = 24.0\ncy = 24.0")
                            .replace("width = 24\nheight = 24", "width = 48\nheight = 48"),
                            width=24, height=24)
    assert float((rollout(large)[1] - frames).abs().max()) <= 1e-12
    shifted = scene_from_toml(BASE.replace("fov_y_deg = 40.0",
                                           f"fx = {f!r}\nfy = {f!r}\ncx = 13.0\ncy = 12.0"))
    assert float((rollout(shifted)[1] - frames).abs().max()) > 0.05


def test_an_object_from_a_mesh_file(tmp_path):
    import trimesh

    (tmp_path / "meshes").mkdir()
    trimesh.creation.box(extents=(0.4, 0.3, 0.3)).export(tmp_path / "meshes" / "box.obj")
    path = tmp_path / "scene.toml"
    path.write_text(BASE.replace('shape = "box"\nextents = [0.4, 0.3, 0.3]',
                                 'mesh = "meshes/box.obj"'))
    from_mesh = load_scene_file(path)
    primitive = scene_from_toml(BASE)
    x_mesh, _ = rollout(from_mesh)
    x_box, _ = rollout(primitive)
    assert x_mesh.shape == x_box.shape == (11, 8, 3)
    # the same 8 corners, perhaps in another order
    order_mesh = np.lexsort(x_mesh[0].numpy().T)
    order_box = np.lexsort(x_box[0].numpy().T)
    diff = x_mesh[:, order_mesh] - x_box[:, order_box]
    assert float(diff.abs().max()) < 1e-9
    # scale: a mesh in centimetres
    trimesh.creation.box(extents=(40.0, 30.0, 30.0)).export(tmp_path / "meshes" / "cm.obj")
    path.write_text(BASE.replace('shape = "box"\nextents = [0.4, 0.3, 0.3]',
                                 'mesh = "meshes/cm.obj"\nscale = 0.01'))
    x_cm, _ = rollout(load_scene_file(path))
    assert float((x_cm[:, np.lexsort(x_cm[0].numpy().T)] - x_box[:, order_box]).abs().max()) \
        < 1e-9


def _edit(old, new):
    assert old in BASE
    return BASE.replace(old, new)


@pytest.mark.parametrize("text, error, words", [
    (_edit('shape = "box"', 'shape = "cube"'), SceneFileError,
     ["objects[0].shape: expected one of box, sphere, cylinder, cone, lshape", "'cube'"]),
    (_edit("fps = 60.0\n", ""), SceneFileError, ["scene.fps: missing"]),
    (_edit("extents = [0.4, 0.3, 0.3]", "extents = [0.4, 0.3, 0.3]\ncolour = [1, 0, 0]"),
     SceneFileError, ["objects[0].colour: unknown key", "color"]),
    (_edit("frames = 10", 'frames = "ten"'), SceneFileError,
     ["scene.frames: expected an integer", "'ten'"]),
    (_edit("width = 24", "width = 24.5"), SceneFileError, ["scene.width: expected an integer"]),
    (_edit("mass = { unknown = true, guess_low = 2.0, guess_high = 12.0, true = 4.0 }",
           "mass = -1.0"), SceneFileError, ["objects[0].mass: expected a number > 0", "-1.0"]),
    (_edit("mass = {", "linear_drag = -0.1\nmass = {"), SceneFileError,
     ["objects[0].linear_drag: expected a number >= 0", "-0.1"]),
    (_edit("guess_high = 12.0, ", ""), SceneFileError,
     ["objects[0].mass.guess_high: missing"]),
    (_edit("guess_high = 12.0", "guess_high = 1.0"), SceneFileError,
     ["objects[0].mass.guess_high: expected a number > guess_low"]),
    (_edit("kd = 100.0", "kd = true"), SceneFileError, ["contact.kd: expected a number"]),
    (_edit("extents = [0.4, 0.3, 0.3]", "extents = [0.4, 0.3]"), SceneFileError,
     ["objects[0].extents: expected a list of 3 numbers"]),
    (_edit('kind = "rigid"', 'kind = "fluid"'), SceneFileError,
     ["objects[0].kind: expected one of rigid, soft, cloth", "'fluid'"]),
    (_edit('kind = "rigid"', 'kind = "soft"'), SceneFileError,
     ["objects[0].mass: unknown key", "density, mu, lambda"]),
    (_edit("object = 0", "object = 1"), SceneFileError,
     ["pushes[0].object: expected an object index in [0, 1)"]),
    (_edit("duration = 0.016666666666666666\n", ""), SceneFileError,
     ["pushes[0].duration: missing"]),
    (_edit("fov_y_deg = 40.0", "fov_y_deg = 40.0\nfx = 30.0"), SceneFileError,
     ["camera.fov_y_deg: give either fov_y_deg or fx, fy, cx, cy"]),
    (_edit("[camera]", "[camera\n"), SceneFileError, ["not valid TOML"]),
    (_edit('shape = "box"\nextents = [0.4, 0.3, 0.3]', 'mesh = "nowhere.obj"'),
     FileNotFoundError, ["objects[0].mesh: mesh file not found", "nowhere.obj"]),
    (_edit('name = "small-box"', 'name = "../up"'), SceneFileError,
     ["scene.name: expected a name of letters", "'../up'"]),
    (_edit('shape = "box"\nextents = [0.4, 0.3, 0.3]', 'mesh = "open.obj"'),
     SceneFileError, ["objects[0].mesh: expected a closed (watertight) triangle mesh"]),
    (_edit('shape = "box"\nextents = [0.4, 0.3, 0.3]', 'mesh = "junk.obj"'),
     SceneFileError, ["objects[0].mesh: expected a closed triangle mesh"]),
    (BASE + '\n[estimate]\noptimizer = "sgd"\n', SceneFileError,
     ["estimate.optimizer: expected one of adam, lbfgs", "'sgd'"]),
])
def test_errors_name_the_key_and_what_was_expected(tmp_path, text, error, words):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    # an open mesh (a box without the two triangles of one side) and a file of no mesh
    import trimesh

    box = trimesh.creation.box()
    trimesh.Trimesh(box.vertices, box.faces[:-2]).export(tmp_path / "open.obj")
    (tmp_path / "junk.obj").write_text("this is not a mesh\n")
    with pytest.raises(error) as info:
        load_scene_file(path)
    message = str(info.value)
    assert str(path) in message
    for w in words:
        assert w in message


def test_a_missing_scene_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="scene file not found: .*nothing.toml"):
        load_scene_file(tmp_path / "nothing.toml")


def test_optimizer_names_agree_with_the_optimisers():
    from gradsim_taichi.optimisers import KINDS

    assert OPTIMIZERS == KINDS


def test_scenes_that_are_not_scene_files_are_refused():
    from toy_scene import SpringSheet

    with pytest.raises(ValueError, match="is not expressible as a scene file"):
        scene_to_toml(SpringSheet())


# ---- the command line ------------------------------------------------------------------
def test_cli_estimate_from_a_scene_file(tmp_path, capsys):
    path = tmp_path / "scene.toml"
    path.write_text(BASE.replace("width = 24\nheight = 24", "width = 32\nheight = 32"))
    out = tmp_path / "run"
    assert main(["estimate", "--scene", str(path), "--iters", "2", "--resolution", "24",
                 "--out", str(out), "--quiet", "--arch", TEST_ARCH]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["settings"]["scene_file"] == str(path)
    assert report["settings"]["width"] == 24  # --resolution overrides the file
    mass = report["params"]["mass"]
    assert mass["true"] == 4.0 and abs(mass["estimate"] - 4.0) < abs(mass["init"] - 4.0)
    assert "rel.err" in capsys.readouterr().out


def test_cli_scene_file_with_the_own_video_options(tmp_path):
    path = tmp_path / "scene.toml"
    path.write_text(BASE)
    out = tmp_path / "run"
    assert main(["estimate", "--scene", str(path), "--iters", "2", "--loss", "masked",
                 "--frame-range", "0:8", "--restarts", "2", "--out", str(out), "--quiet",
                 "--arch", TEST_ARCH]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["settings"]["loss"] == "masked" and len(report["restarts"]) == 2
    assert report["settings"]["frame_range"] == [0, 8]


def test_cli_estimate_from_a_scene_file_and_a_video(tmp_path, capsys):
    """The user's case: the file knows no truth, the clip is a video (8-bit PNGs here,
    rendered from mass 4 kg); --true only for the report."""
    from gradsim_taichi.render import save_video

    truth = scene_from_toml(BASE)
    with torch.no_grad():
        save_video(render_target(truth), tmp_path / "clip")
    path = tmp_path / "scene.toml"
    path.write_text(BASE.replace(", true = 4.0", ""))
    out = tmp_path / "run"
    # (--render soft, --fit none, --loss mse: the clip is the scene's own soft render)
    assert main(["estimate", "--scene", str(path), "--target", str(tmp_path / "clip"),
                 "--render", "soft", "--fit", "none", "--loss", "mse", "--restarts", "1",
                 "--true", "mass=4", "--iters", "6",
                 "--out", str(out),
                 "--quiet",
                 "--arch", TEST_ARCH]) == 0
    report = json.loads((out / "report.json").read_text())
    mass = report["params"]["mass"]
    assert abs(mass["init"] - 4.0) / 4.0 > 0.1
    assert mass["true"] == 4.0 and mass["rel_err"] < 1e-4  # 8-bit pixels; measured 2e-6


def test_cli_scene_show_output_loads_back(tmp_path, capsys):
    assert main(["scene", "show", "rigid-mass", "--shape", "cylinder"]) == 0
    text = capsys.readouterr().out
    path = tmp_path / "shown.toml"
    path.write_text(text)
    scene = load_scene_file(path)
    assert scene.name == "rigid-mass" and scene.spec["objects"][0]["shape"] == "cylinder"
    assert text == scene_to_toml(make_scene("rigid-mass", shape="cylinder"))


def test_cli_scene_check(tmp_path, capsys):
    path = tmp_path / "scene.toml"
    path.write_text(BASE)
    assert main(["scene", "check", str(path)]) == 0
    out = capsys.readouterr().out
    assert "small-box: 10 frames at 60 fps" in out and "24x24 px" in out
    assert "objects[0]: rigid box, mass unknown (2..12)" in out
    assert "unknown mass: guesses 2..12, true 4" in out and "built:" in out
    # the ground (default extent: z up to 1 m) reaching behind a level camera at z = 0.8
    path.write_text(BASE.replace("eye = [0.0, 0.8, 1.8]", "eye = [0.0, 0.2, 0.8]"))
    assert main(["scene", "check", str(path)]) == 2
    assert "closer than the near plane" in capsys.readouterr().err
    assert main(["estimate", "--scene", str(path), "--out", str(tmp_path / "out")]) == 2
    assert "closer than the near plane" in capsys.readouterr().err
    path.write_text(BASE.replace("guess_low = 2.0", "guess_low = 0"))
    assert main(["scene", "check", str(path)]) == 2
    assert "objects[0].mass.guess_low: expected a number > 0; got 0" in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["estimate"], "give a preset SCENE or --scene FILE (exactly one)"),
    (["estimate", "rigid-mass", "--scene", "x.toml"], "exactly one"),
    (["estimate", "--scene", "/nonexistent/scene.toml"], "scene file not found"),
    (["estimate", "--scene", "/nonexistent/x.toml", "--shape", "cone"],
     "scene file not found"),
    (["scene", "show", "no-such"], "unknown scene 'no-such'"),
    (["scene", "show", "fem-beam", "--shape", "box"], "offers no shapes"),
    (["scene", "show", "rigid-mass", "--shape", "cube"], "--shape 'cube'"),
])
def test_cli_errors(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_cli_file_errors(tmp_path, capsys):
    path = tmp_path / "scene.toml"
    path.write_text(BASE.replace('shape = "box"', 'shape = "cube"'))
    assert main(["estimate", "--scene", str(path)]) == 2
    assert "objects[0].shape" in capsys.readouterr().err
    path.write_text(BASE.replace(", true = 4.0", ""))
    assert main(["estimate", "--scene", str(path), "--out", str(tmp_path / "o")]) == 2
    assert "no true value for mass" in capsys.readouterr().err
    path.write_text(BASE.replace("mass = { unknown = true, guess_low = 2.0, guess_high = "
                                 "12.0, true = 4.0 }", "mass = 4.0"))
    assert main(["estimate", "--scene", str(path)]) == 2
    assert "no unknowns to estimate" in capsys.readouterr().err


def test_the_readme_example_is_a_valid_scene_file():
    from pathlib import Path

    readme = (Path(__file__).parents[1] / "README.md").read_text()
    section = readme[readme.index("## Your own scene file"):]
    block = section[section.index("```toml") + len("```toml"):]
    block = block[:block.index("```")]
    scene = scene_from_toml(block)
    assert list(scene.params) == ["mass", "contact_mu"]
    assert scene.truth_given == {"mass": False, "contact_mu": False}
    assert scene.spec["objects"][0]["shape"] == "box"


def test_the_module_docstring_example_is_a_valid_scene_file():
    import gradsim_taichi.scenes.scene_file as sf
    import gradsim_taichi.scenes.scene_file_schema as schema

    doc = sf.__doc__
    block = doc[doc.index("Schema"):].split("::", 1)[1].split("\n\n", 1)[1]
    block = block[:block.index("\nUnknowns become")]
    text = "\n".join(line[4:] for line in block.split("\n"))
    scene = scene_from_toml(text)
    assert scene.spec["stage"] == schema.STAGE_DEFAULTS  # the documented defaults are these
    assert {k: scene.spec["contact"][k]
            for k in schema.CONTACT_DEFAULTS} == schema.CONTACT_DEFAULTS
    assert scene.spec["estimate"] == schema.ESTIMATE_DEFAULTS
    assert (scene.spec["camera"]["near"], scene.spec["camera"]["far"]) == (0.1, 10.0)


@pytest.mark.parametrize("preset", ["rigid-mass", "rigid-contact"])
def test_the_shipped_preset_file_is_the_preset(preset, capsys):
    """gradsim_taichi/scenes/files/PRESET.toml (package data) is what make_scene loads and
    what `scene show PRESET` prints, comments included; written back out it reads as the
    same spec."""
    from importlib.resources import files

    from gradsim_taichi.scenes import SCENES

    shipped = (files("gradsim_taichi.scenes") / "files" / f"{preset}.toml").read_text(
        encoding="utf-8")
    scene = make_scene(preset)
    assert scene.spec == scene_from_toml(shipped).spec and scene.shape == "box"
    assert SCENES[preset].summary == scene.description
    assert main(["scene", "show", preset]) == 0
    assert capsys.readouterr().out == shipped and shipped.startswith("# The")
    again = scene_from_toml(scene_to_toml(scene))
    assert again.spec == scene.spec and again.shape == "box"


def test_every_shipped_scene_file_is_a_registered_preset():
    from importlib.resources import files

    from gradsim_taichi.scenes import SCENES
    from gradsim_taichi.scenes.preset_files import FilePreset

    names = {f.name[:-5] for f in (files("gradsim_taichi.scenes") / "files").iterdir()
             if f.name.endswith(".toml")}
    assert names == {n for n, p in SCENES.items() if isinstance(p, FilePreset)}
    assert names >= {"rigid-mass", "rigid-contact"}


def test_shape_variants_of_a_file(tmp_path):
    shapes = ('\n[shapes]\nwide = { shape = "box", extents = [0.6, 0.3, 0.3] }\n'
              'ball = { shape = "sphere", radius = 0.15 }\n')
    start = BASE.index("[[objects]]")
    text = BASE[:start] + shapes + "\n" + BASE[start:]
    plain = scene_from_toml(text)
    assert plain.shape is None and plain.shapes == ("wide", "ball")
    ball = scene_from_toml(text, shape="ball")
    o = ball.spec["objects"][0]
    assert (o["shape"], o["radius"], o["subdivisions"], ball.shape) == ("sphere", 0.15, 2,
                                                                        "ball")
    assert o["position"] == plain.spec["objects"][0]["position"]
    assert "extents" not in o
    # the variant equal to the object as written is the scene's shape
    same = text.replace("[0.6, 0.3, 0.3]", "[0.4, 0.3, 0.3]")
    assert scene_from_toml(same).shape == "wide"
    path = tmp_path / "variants.toml"
    path.write_text(text)
    with pytest.raises(SceneFileError, match=r"variants.toml: shape 'cube': the file "
                                             r"offers wide, ball"):
        load_scene_file(path, shape="cube")
    with pytest.raises(SceneFileError, match="shape 'cone': the file has no .shapes. table"):
        scene_from_toml(BASE, shape="cone")
    for old, new, words in [
            ("radius = 0.15 }", "subdivisions = 1 }", "shapes.ball.radius: missing"),
            ("radius = 0.15 }", "radius = 0.15, radios = 1.0 }",
             "shapes.ball.radios: unknown key"),
            ('"sphere"', '"ellipsoid"', "shapes.ball.shape: expected one of box"),
            ("[shapes]", "[shapes]\nx = 1", "shapes.x: expected a table")]:
        with pytest.raises(SceneFileError, match=words):
            scene_from_toml(text.replace(old, new))


def test_a_scene_written_out_keeps_its_changed_fields():
    """The fields a preset is changed with (camera, contact, truths, schedule) are what
    scene_to_toml writes, and the file reads back to them."""
    scene = make_scene("rigid-mass", shape="cone", frames=12, width=24, height=24,
                       camera_eye=(0.1, 0.9, 1.7), contact=dict(ke=5e3, kd=50.0, kf=100.0,
                                                                 mu=0.8), iters=7)
    scene.set_truth({"mass": 5.5})
    back = scene_from_toml(scene_to_toml(scene))
    assert back.camera_eye == (0.1, 0.9, 1.7) and back.contact["kd"] == 50.0
    assert (back.frames, back.width, back.iters, back.shape) == (12, 24, 7, "cone")
    assert back.params["mass"].true == 5.5 and back.truth_given == {"mass": True}
    x0, f0 = rollout(scene)
    x1, f1 = rollout(back)
    assert float((x0 - x1).abs().max()) <= 1e-12 and float((f0 - f1).abs().max()) <= 1e-12
    plain = make_scene("rigid-mass", shape="cone", frames=12, width=24, height=24)
    assert float((rollout(plain)[1] - f0).abs().max()) > 1e-3  # the changes took effect


def test_an_unknowns_doc_is_its_parameters_doc():
    scene = scene_from_toml(BASE.replace("true = 4.0 }", 'true = 4.0, doc = "the box [kg]" }'))
    assert scene.params["mass"].doc == "the box [kg]"
    assert scene_from_toml(BASE).params["mass"].doc == "mass of the body [kg]"
    with pytest.raises(SceneFileError, match="objects.0..mass.doc: expected a string"):
        scene_from_toml(BASE.replace("true = 4.0 }", "true = 4.0, doc = 1 }"))


@pytest.mark.slow  # (shape variants of a file: test_shape_variants_of_a_file)
def test_cli_shape_picks_a_variant_of_a_scene_file(tmp_path, capsys):
    from gradsim_taichi.scenes import SCENES

    path = tmp_path / "mass.toml"
    path.write_text(SCENES["rigid-mass"].text())
    out = tmp_path / "run"
    assert main(["estimate", "--scene", str(path), "--shape", "cone", "--iters", "1",
                 "--frames", "4", "--resolution", "16", "--out", str(out), "--quiet",
                 "--arch", TEST_ARCH]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["settings"]["shape"] == "cone"
    assert main(["estimate", "--scene", str(path), "--shape", "pyramid"]) == 2
    err = capsys.readouterr().err
    assert "mass.toml: shape 'pyramid': the file offers box, cone, cylinder, lshape" in err

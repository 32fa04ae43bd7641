"""`gradsim-taichi estimate` on a user's files: what a clip and a scene file can get
wrong is named (exit 2), and what a writer does to a clip (an odd size padded for
H.264) is undone."""

import json

import numpy as np
import pytest
from runtime_arch import TEST_ARCH
from test_cli_estimate import SMALL, _preset_clip

from gradsim_taichi.cli import main
from gradsim_taichi.render import save_video


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    return _preset_clip(tmp_path_factory.mktemp("clip"))


def _err(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


def test_an_empty_mask_is_named(tmp_path, capsys, clip):
    target, _ = clip
    np.save(tmp_path / "mask.npy", np.zeros((13, 32, 32), np.float32))
    assert main(["estimate", "rigid-mass", "--target", str(target), "--mask",
                 str(tmp_path / "mask.npy"), "--out", str(tmp_path / "o"), *SMALL]) == 2
    assert "is empty: no pixel of the object in any frame" in _err(capsys)


def test_a_clip_at_another_frame_rate_is_named(tmp_path, capsys, clip):
    from gradsim_taichi.render import load_video

    frames = load_video(clip[0])
    # (the preset runs at 60 fps)
    video = save_video(frames, tmp_path / "clip.mp4", fps=30)
    assert main(["estimate", "rigid-mass", "--target", str(video), "--out",
                 str(tmp_path / "o"), *SMALL]) == 2
    assert "plays at 30 frames per second" in _err(capsys)


@pytest.mark.usefixtures("quick_calibration")
def test_the_plate_as_the_background_needs_no_mask_loss(tmp_path, capsys, clip):
    target, plate = clip
    out = tmp_path / "o"
    assert main(["estimate", "rigid-mass", "--target", str(target), "--background-plate",
                 str(plate), "--fit", "background", "--iters", "1", "--restarts", "1",
                 "--out", str(out), *SMALL]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["nuisance"]["background"]["source"] == "plate"


def _preset_text() -> str:
    from gradsim_taichi.scenes import SCENES

    return SCENES["rigid-mass"].text()


def _scene_file(tmp_path, **scene):
    """rigid-mass's scene file with ``[scene]`` values changed."""
    import re

    text = _preset_text()
    for key, value in scene.items():
        text, n = re.subn(rf"(?m)^{key} = .*$", f"{key} = {value}", text, count=1)
        assert n == 1, key
    path = tmp_path / "scene.toml"
    path.write_text(text)
    return path


def test_an_odd_sized_mp4_is_cropped_back_and_the_files_truth_is_announced(tmp_path, capsys):
    import gradsim_taichi as gs
    from gradsim_taichi.estimation import render_target
    from gradsim_taichi.scenes.scene_file import load_scene_file

    gs.init(arch=TEST_ARCH, precision="f64")
    path = _scene_file(tmp_path, frames=6, width=31, height=25)
    scene = load_scene_file(path)
    video = save_video(render_target(scene), tmp_path / "clip.mp4", fps=scene.fps)
    from gradsim_taichi.render import load_video

    assert tuple(load_video(video).shape[1:3]) == (26, 32)  # padded to even by the writer
    out = tmp_path / "o"
    assert main(["estimate", "--scene", str(path), "--target", str(video), "--iters", "1",
                 "--restarts", "1", "--fit", "none", "--arch", "cpu", "--out", str(out)]) == 0
    assert "errors are reported against the scene file's true values (mass = 4)" in (
        capsys.readouterr().out)
    assert json.loads((out / "report.json").read_text())["settings"]["width"] == 31


def test_resolution_on_a_wide_scene_file_is_named(tmp_path, capsys):
    path = _scene_file(tmp_path, width=96, height=64)
    assert main(["estimate", "--scene", str(path), "--resolution", "32", "--arch", "cpu"]) == 2
    assert "--resolution makes square images" in _err(capsys)


def test_a_camera_matrix_that_is_not_rigid_is_named():
    from gradsim_taichi.scenes.scene_file import scene_from_toml
    from gradsim_taichi.scenes.scene_file_schema import SceneFileError

    text = _preset_text()
    start, end = text.index("[camera]"), text.index("\n[", text.index("[camera]"))
    for matrix, message in [
            ("[[2, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 3], [0, 0, 0, 1]]", "must be a rotation"),
            ("[[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 3], [1, 2, 3, 5]]", "[0, 0, 0, 1]")]:
        camera = ("[camera]\nworld_to_camera = " + matrix
                  + "\nfx = 80.0\nfy = 80.0\ncx = 32.0\ncy = 32.0\n")
        with pytest.raises(SceneFileError, match=message.replace("[", r"\[")):
            scene_from_toml(text[:start] + camera + text[end:])


def test_a_folder_or_a_binary_file_as_the_scene_file_is_named(tmp_path, capsys):
    for path, message in [(tmp_path, "(a folder)"), (tmp_path / "x.toml", "not a text")]:
        if path.suffix:
            path.write_bytes(b"\x93NUMPY\xff\xfe")
        assert main(["scene", "check", str(path)]) == 2
        assert message in _err(capsys)


def test_scene_check_warns_of_a_body_below_the_ground_or_out_of_view(tmp_path, capsys):
    import re

    text = _preset_text()
    for position, message in [("[-0.4, -0.5, 0.0]", "starts below the ground"),
                              ("[40.0, 0.4, 0.0]", "wholly out of the camera's view")]:
        edited, n = re.subn(r"(?m)^position = .*$", f"position = {position}", text, count=1)
        assert n == 1
        (tmp_path / "s.toml").write_text(edited)
        assert main(["scene", "check", str(tmp_path / "s.toml")]) == 0
        printed = capsys.readouterr().out
        assert message in printed and "see the warnings above" in printed
    (tmp_path / "s.toml").write_text(text)
    assert main(["scene", "check", str(tmp_path / "s.toml")]) == 0
    assert "warning" not in capsys.readouterr().out
    # a variant of the file's [shapes] table is checked as chosen, an unknown one named
    assert main(["scene", "check", str(tmp_path / "s.toml"), "--shape", "cone"]) == 0
    assert "objects[0]: rigid cone" in capsys.readouterr().out
    assert main(["scene", "check", str(tmp_path / "s.toml"), "--shape", "cube"]) == 2
    assert "cube" in _err(capsys)


def test_the_benchmarks_scene_file_checks_with_every_shape_it_adds(capsys):
    """benchmarks/scenes/other-camera.toml (foreign_targets.py --scene): its sphere and
    mesh-file variants read, build in view and above the ground."""
    from pathlib import Path

    path = Path(__file__).parents[1] / "benchmarks" / "scenes" / "other-camera.toml"
    for shape, shown in [("sphere", "rigid sphere"), ("rock", "rock.obj"),
                         ("capsule", "capsule.obj")]:
        assert main(["scene", "check", str(path), "--shape", shape]) == 0
        printed = capsys.readouterr().out
        assert shown in printed and "80x60 px" in printed and "warning" not in printed

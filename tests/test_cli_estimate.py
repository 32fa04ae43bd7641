"""`gradsim-taichi estimate`: the main job end to end, and clear errors for bad input."""

import json

import numpy as np
import pytest
from runtime_arch import TEST_ARCH

from gradsim_taichi.cli import main
from gradsim_taichi.render import save_video

SMALL = ["--arch", "cpu", "--frames", "12", "--resolution", "32", "--quiet"]


def test_estimate_writes_report_plot_and_videos(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["estimate", "rigid-mass", "--iters", "4", "--out", str(out), *SMALL]) == 0
    report = json.loads((out / "report.json").read_text())
    mass = report["params"]["mass"]
    assert abs(mass["init"] - mass["true"]) / mass["true"] > 0.1  # a real starting error
    assert mass["rel_err"] < 1e-2  # a few L-BFGS steps find it
    assert report["iterations"] == 4 and report["seed"] == 0 and report["arch"] == "cpu"
    assert report["settings"]["frames"] == 12
    for name in ("loss.png", "compare.mp4", "compare.gif"):
        assert (out / name).stat().st_size > 500
    printed = capsys.readouterr().out
    assert "report:" in printed and "rel.err" in printed


@pytest.mark.parametrize(
    "argv, message",
    [
        (["estimate", "no-such-scene"], "unknown scene 'no-such-scene'"),
        (["estimate", "rigid-mass", "--params", "mass,spin"], "no parameter 'spin'"),
        (["estimate", "rigid-mass", "--iters", "0"], "--iters must be a positive integer"),
        (["estimate", "rigid-mass", "--lr", "-1"], "--lr must be > 0"),
        (["estimate", "rigid-mass", "--blur", "nan"], "--blur must be >= 0 pixels"),
        (["estimate", "rigid-mass", "--target", "/nonexistent/video.mp4"], "video not found"),
    ],
)
def test_bad_arguments_exit_2_with_a_message(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_corrupt_target_file(tmp_path, capsys):
    bad = tmp_path / "bad.mp4"
    bad.write_bytes(b"this is not a video")
    assert main(["estimate", "rigid-mass", "--target", str(bad), *SMALL]) == 2
    assert "cannot read video" in capsys.readouterr().err


@pytest.mark.parametrize("frames, size, message", [(5, 32, "has 5 frames"),
                                                   (13, 16, "16x16 pixels")])
def test_target_that_does_not_fit_the_scene(tmp_path, capsys, frames, size, message):
    video = tmp_path / "target.gif"
    rng = np.random.default_rng(0)
    save_video(rng.uniform(size=(frames, size, size, 3)), video)
    assert main(["estimate", "rigid-mass", "--target", str(video), "--out",
                 str(tmp_path / "o"), *SMALL]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_a_diverging_run_stops_with_the_best_state_and_exit_3(tmp_path, capsys):
    """An absurd learning rate: the loss jumps 1e6x (the explicit integrator's blow-up
    penalty) and stays there; the run stops as diverged, keeps the best estimate (the
    initial guess here), still writes every output, and says why."""
    out = tmp_path / "run"
    argv = ["estimate", "rigid-mass", "--frames", "8", "--resolution", "16", "--optimizer",
            "adam", "--lr", "1e3", "--arch", "cpu", "--quiet", "--out", str(out)]
    assert main(argv) == 3
    report = json.loads((out / "report.json").read_text())
    assert report["status"] == "diverged" and "learning rate" in report["message"]
    mass = report["params"]["mass"]
    assert mass["estimate"] == pytest.approx(mass["init"], rel=1e-12)
    assert report["iterations"] < 10
    for name in ("loss.png", "compare.mp4", "compare.gif"):
        assert (out / name).stat().st_size > 500
    assert "diverged at iteration" in capsys.readouterr().out


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """One finished run's folder (each test damages a copy of it)."""
    out = tmp_path_factory.mktemp("finished") / "run"
    assert main(["estimate", "rigid-mass", "--iters", "2", "--out", str(out), *SMALL]) == 0
    return out


@pytest.mark.parametrize("state", [{"names": ["mass"]}, [1, 2, 3], "garbage"])
def test_a_damaged_resume_state_is_exit_2_and_leaves_every_output(tmp_path, capsys, state,
                                                                  finished_run):
    import shutil

    out = tmp_path / "run"
    shutil.copytree(finished_run, out)
    before = _outputs(out)
    if state == "garbage":
        (out / "state.pt").write_bytes(b"\x00garbage")
    else:
        import torch

        torch.save(state, out / "state.pt")
    capsys.readouterr()
    assert main(["estimate", "rigid-mass", "--iters", "3", "--resume", "--out", str(out),
                 *SMALL]) == 2
    err = capsys.readouterr().err
    assert "cannot resume from" in err and "Traceback" not in err
    assert _outputs(out) == before


def _outputs(out):
    return {p.name: p.read_bytes() for p in out.iterdir() if p.name not in ("state.pt", ".lock")}


# (resume from a saved state: test_a_damaged_resume_state_is_exit_2..., test_batch.py and
# test_control.py resume in the default run; the SIGKILL mid-run here is the slow tier)
@pytest.mark.slow
def test_kill_9_then_resume_gives_the_uninterrupted_result(tmp_path):
    """A run killed with SIGKILL mid-way (after its first resume state) and resumed ends
    exactly where an uninterrupted run does (one thread: bitwise reproducible)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    args = ["estimate", "rigid-mass", "--iters", "8", "--frames", "8", "--resolution",
            "16", "--arch", "cpu", "--threads", "1", "--quiet"]
    assert main([*args, "--out", str(tmp_path / "full")]) == 0
    out = tmp_path / "cut"
    # no offline kernel cache in the process we kill: a killed holder of its lock would
    # leave the lock behind and silently disable the cache for every later process
    env = dict(os.environ, TI_OFFLINE_CACHE="0")
    proc = subprocess.Popen([sys.executable, "-m", "gradsim_taichi", *args, "--out", str(out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    deadline = time.time() + 300
    while not (out / "state.pt").exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL  # killed mid-run, not finished already
    assert main([*args, "--out", str(out), "--resume"]) == 0
    full = json.loads((tmp_path / "full" / "report.json").read_text())
    resumed = json.loads((out / "report.json").read_text())
    assert resumed["params"] == full["params"]
    assert resumed["loss_history"] == full["loss_history"]
    assert not [p for p in out.iterdir() if ".tmp" in p.name]


@pytest.mark.usefixtures("quick_calibration")
def test_a_users_target_reports_no_truth_unless_given(tmp_path, capsys):
    """A video the preset did not render (here: the preset's box at 6 kg): no error
    against the preset's own truth (4 kg); --true NAME=VALUE gives one."""
    import dataclasses

    import gradsim_taichi as gs
    from gradsim_taichi.estimation import render_target
    from gradsim_taichi.scenes import make_scene

    gs.init(arch=TEST_ARCH, precision="f64")
    # (a short small clip and one iteration: the report's fields are the point here)
    scene = make_scene("rigid-mass", frames=6, width=16, height=16)
    scene.params = {"mass": dataclasses.replace(scene.params["mass"], true=6.0)}
    target = tmp_path / "six_kg.gif"
    save_video(render_target(scene), target)
    out = tmp_path / "user"
    argv = ["estimate", "rigid-mass", "--iters", "1", "--target", str(target), "--out",
            str(out), "--arch", "cpu", "--frames", "6", "--resolution", "16", "--quiet"]
    assert main(argv) == 0
    report = json.loads((out / "report.json").read_text())
    assert "true" not in report["params"]["mass"] and "rel_err" not in report["params"]["mass"]
    # a video the engine did not make: three initial guesses by default, antialiased,
    # the backdrop, the lights, the shadow, the bounce map, the camera's blur and
    # response learned, the robust loss
    assert report["settings"]["restarts"] == 3 and len(report["restarts"]) == 3
    assert report["settings"]["render"] == "antialias"
    assert report["settings"]["fit"] == ["background", "appearance", "shadow", "bounce",
                                         "blur", "response"]
    assert report["settings"]["loss"] == "robust"
    assert set(report["nuisance"]) >= {"shadow_strength", "occlusion_strength", "bounce_map",
                                       "background"}
    argv += ["--restarts", "1"]
    assert "rel.err" not in capsys.readouterr().out
    # names add to the default (the camera), -kind takes one out (the blur)
    assert main([*argv, "--fit", "camera,-blur"]) == 0
    assert json.loads((out / "report.json").read_text())["settings"]["fit"] == [
        "camera", "background", "appearance", "shadow", "bounce", "response"]
    assert main([*argv, "--fit", "camera,-camera"]) == 2
    assert "--fit: 'camera' is both added and taken out" in capsys.readouterr().err
    assert main([*argv, "--fit", "none", "--loss", "mse"]) == 0  # the plain model
    settings = json.loads((out / "report.json").read_text())["settings"]
    assert settings["fit"] == [] and settings["loss"] == "mse"
    assert "nuisance" not in json.loads((out / "report.json").read_text())
    assert main([*argv, "--true", "mass=6"]) == 0
    mass = json.loads((out / "report.json").read_text())["params"]["mass"]
    assert mass["true"] == 6.0 and "rel_err" in mass
    capsys.readouterr()
    assert main(["estimate", "rigid-mass", "--true", "mass=6", *SMALL]) == 2
    assert "--true goes with --target" in capsys.readouterr().err
    assert main([*argv, "--true", "spin=1"]) == 2
    assert "expected NAME=VALUE" in capsys.readouterr().err


def test_compare_video_runs_at_the_scene_rate_with_four_labelled_panels(tmp_path):
    import imageio.v2 as iio

    out = tmp_path / "run"
    assert main(["estimate", "rigid-mass", "--iters", "1", "--out", str(out), *SMALL]) == 0
    with iio.get_reader(out / "compare.mp4") as reader:
        assert abs(reader.get_meta_data()["fps"] - 60.0) < 1e-6  # the preset's 60 Hz
    frames = np.stack(iio.mimread(out / "compare.gif"))
    assert frames.shape[1:3] == (32 + 12, 4 * 32 + 3 * 2)  # label row; four panels
    assert frames[0, :12].min() < 100  # text drawn in the label row


# ---- own videos: losses, masks, frame range, shapes, restarts --------------------------
@pytest.mark.parametrize(
    "extra, message",
    [
        (["--shape", "sphere"], "scene 'rigid-mass' offers box, cone, cylinder, lshape"),
        (["--frame-range", "5"], "--frame-range '5': expected A:B"),
        (["--frame-range", "8:3"], "frame range must be (first, last)"),
        (["--frame-range", "0:40"], "frame range must be (first, last)"),
        (["--restarts", "0"], "--restarts must be a positive integer"),
        (["--mask", "m.gif", "--background-plate", "p.png"], "not both"),
        (["--key-threshold", "0.2"], "--key-threshold and --ignore-shadows go with"),
        (["--mask", "/nonexistent/mask.gif"], "--mask: video not found"),
        (["--loss", "silhouette", "--supervision", "3d"], "not with --supervision 3d"),
        (["--silhouette-weight", "0.1"], "--silhouette-weight goes with --loss masked"),
        (["--mask-erode", "1"], "--loss mse does not use a mask"),
        (["--loss", "masked", "--mask-erode", "-1"], "mask erosion must be an integer"),
        (["--loss", "masked", "--silhouette-weight", "-1"], "must be a number >= 0"),
        (["--hold-flight"], "--hold-flight holds the pre-contact stage's estimates: give "
                            "--stage-contact too"),
        (["--fit", "shadow,ghosts"], "unknown kind 'ghosts'"),
        (["--damping", "-0.1"], "--damping: expected 'pybullet', one number >= 0 or four"),
        (["--damping", "0.1,0.2"], "--damping: expected 'pybullet', one number >= 0"),
    ],
)
def test_bad_own_video_arguments_exit_2_with_a_message(extra, message, capsys, tmp_path):
    assert main(["estimate", "rigid-mass", *extra, "--out", str(tmp_path / "o"),
                 *SMALL]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_damping_on_a_scene_without_rigid_bodies_is_named(capsys):
    assert main(["estimate", "fem-beam", "--damping", "0.1", *SMALL]) == 2
    assert "--damping: the scene has no rigid object to damp" in capsys.readouterr().err


def test_shape_on_a_preset_without_shapes_lists_those_with_shapes(capsys):
    assert main(["estimate", "fem-beam", "--shape", "box", *SMALL]) == 2
    err = capsys.readouterr().err
    assert "'fem-beam' offers no shapes" in err and "rigid-mass" in err


def _preset_clip(tmp_path, shape="box"):
    """The rigid-mass preset's own clip as PNGs, and its stage without the body."""
    import gradsim_taichi as gs
    from gradsim_taichi.estimation import render_target
    from gradsim_taichi.scenes import make_scene

    gs.init(arch=TEST_ARCH, precision="f64")
    scene = make_scene("rigid-mass", frames=12, width=32, height=32, shape=shape)
    scene.build()
    target = save_video(render_target(scene), tmp_path / "clip")
    plate = tmp_path / "plate.png"
    import imageio.v2 as iio

    iio.imwrite(plate, (scene.render_backdrop()[..., :3].numpy() * 255 + 0.5).astype(np.uint8))
    return target, plate


def test_background_plate_and_cone_shape_recover_the_mass(tmp_path, capsys):
    """The cone's own clip with a background plate: the mask is keyed, the loss is
    'masked' by default, and the mass comes back (8-bit frames, binary mask)."""
    target, plate = _preset_clip(tmp_path, "cone")
    out = tmp_path / "run"
    # (--render soft: the clip is the preset's own soft render)
    assert main(["estimate", "rigid-mass", "--shape", "cone", "--target", str(target),
                 "--render", "soft", "--restarts", "1",
                 "--true", "mass=4", "--background-plate", str(plate), "--iters", "6",
                 "--out", str(out), *SMALL]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["settings"]["loss"] == "masked" and report["settings"]["shape"] == "cone"
    assert report["params"]["mass"]["rel_err"] < 1e-2
    assert report["stages"][-1]["last_frame"] == 12


@pytest.fixture(scope="module")
def box_clip(tmp_path_factory):
    """The box's clip and plate, made once for the tests that only read them."""
    return _preset_clip(tmp_path_factory.mktemp("box_clip"))


@pytest.mark.parametrize("what", ["mask-frames", "plate-size"])
def test_a_mask_that_does_not_fit_the_target_is_named(tmp_path, capsys, what, box_clip):
    target, plate = box_clip
    if what == "mask-frames":
        rng = np.random.default_rng(0)  # (identical GIF frames would merge into one)
        save_video(rng.uniform(size=(5, 32, 32, 3)), tmp_path / "mask.gif")
        extra, message = ["--mask", str(tmp_path / "mask.gif")], "--mask"
    else:
        import imageio.v2 as iio

        iio.imwrite(tmp_path / "small.png", np.zeros((16, 16, 3), np.uint8))
        extra, message = (["--background-plate", str(tmp_path / "small.png")],
                          "background plate is 16x16 pixels; the target video is 32x32")
    assert main(["estimate", "rigid-mass", "--target", str(target), *extra, "--out",
                 str(tmp_path / "o"), *SMALL]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    if what == "mask-frames":
        assert "5 frames" in err and "13 frames" in err


def test_mask_loss_on_a_users_video_needs_a_mask(tmp_path, capsys, box_clip):
    target, _ = box_clip
    assert main(["estimate", "rigid-mass", "--target", str(target), "--loss", "silhouette",
                 "--out", str(tmp_path / "o"), *SMALL]) == 2
    assert "give --mask VIDEO or --background-plate IMAGE" in capsys.readouterr().err


def test_frame_range_restarts_and_stage_contact_reach_the_report(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["estimate", "rigid-mass", "--frames", "20", "--resolution", "32", "--quiet",
                 "--arch", "cpu", "--iters", "1", "--optimizer", "adam", "--restarts", "2",
                 "--frame-range", "2:16",
                 "--stage-contact", "1", "--loss", "robust", "--damping", "pybullet",
                 "--out", str(out)]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["settings"]["frame_range"] == [2, 16]
    assert report["settings"]["damping"] == "pybullet"
    assert report["settings"]["loss"] == "robust" and report["settings"]["restarts"] == 2
    assert [r["seed"] for r in report["restarts"]] == [0, 1]
    # one iteration from two guesses: they disagree, and the report and console say so
    assert report["spread"]["mass"] > 1e-2
    assert any("restarts disagree" in w for w in report["warnings"])
    printed = capsys.readouterr().out
    assert "warning: the 2 restarts disagree" in printed and "restart 1 (seed 1)" in printed

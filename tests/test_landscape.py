"""The loss landscape: a grid of the estimation loss along one or two parameters."""

import numpy as np
import pytest
from toy_scene import SpringSheet

from gradsim_taichi.cli import main
from gradsim_taichi.estimation import render_target
from gradsim_taichi.landscape import loss_landscape, write_landscape


@pytest.fixture
def scene():
    s = SpringSheet(frames=10)  # lands: the mass shows through the contact
    s.build()
    return s


def test_one_parameter_has_its_minimum_at_the_truth(scene, tmp_path):
    truth = scene.params["mass"].true  # 0.05, the middle of the even grid below
    land = loss_landscape(scene, render_target(scene), {"mass": (0.03, 0.07)}, points=5,
                          progress=False)
    loss = land["loss"]
    assert land["axes"][0][2] == pytest.approx(truth) and loss[2] < 1e-28
    assert np.all(np.diff(loss[:3]) < 0) and np.all(np.diff(loss[2:]) > 0)
    paths = write_landscape(tmp_path, land, {"mass": truth})
    rows = paths["csv"].read_text().splitlines()
    assert rows[0] == "mass,loss" and len(rows) == 6
    assert float(rows[3].split(",")[0]) == pytest.approx(truth)
    assert paths["plot"].stat().st_size > 1000


def test_two_parameters_give_a_map(scene, tmp_path):
    vx = scene.params["velocity"].true[0]
    land = loss_landscape(scene, render_target(scene),
                          {"mass": (0.04, 0.06), "velocity": (vx - 0.2, vx + 0.2)},
                          points=3, progress=False)
    assert land["loss"].shape == (3, 3)
    # a scalar velocity sweeps all three components together: the truth (1, .5, -.5) is
    # not on the grid, so every point has a loss; the least one at the true mass
    assert np.all(land["loss"] > 0)
    assert np.argmin(land["loss"].min(axis=1)) == 1
    assert write_landscape(tmp_path, land)["plot"].stat().st_size > 1000


def test_bad_sweeps_are_named(scene):
    target = render_target(scene)
    with pytest.raises(KeyError, match="no parameter 'spin'"):
        loss_landscape(scene, target, {"spin": (0, 1)}, progress=False)
    with pytest.raises(ValueError, match="must start above 0"):
        loss_landscape(scene, target, {"mass": (0.0, 1.0)}, progress=False)
    with pytest.raises(ValueError, match="points must be an integer >= 2"):
        loss_landscape(scene, target, {"mass": (0.01, 1.0)}, points=1, progress=False)
    with pytest.raises(ValueError, match="one or two"):
        loss_landscape(scene, target, {}, progress=False)


def test_cli_writes_the_curve(tmp_path, capsys):
    out = tmp_path / "ls"
    assert main(["landscape", "rigid-mass", "--param", "mass", "--range", "2:8", "--points",
                 "3", "--frames", "6", "--resolution", "16", "--arch", "cpu", "--quiet",
                 "--out", str(out)]) == 0
    assert len((out / "landscape.csv").read_text().splitlines()) == 4
    assert (out / "landscape.png").stat().st_size > 1000
    for argv, message in [(["--param", "mass", "--range", "8:2"], "A < B"),
                          (["--param", "spin"], "no parameter 'spin'"),
                          (["--param", "mass", "--range", "1:2", "--range", "3:4"],
                           "one --range per --param")]:
        assert main(["landscape", "rigid-mass", *argv, "--out", str(out)]) == 2
        assert message in capsys.readouterr().err

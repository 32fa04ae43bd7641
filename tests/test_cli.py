"""The command line: info and simulate."""

import numpy as np
from PIL import Image

from gradsim_taichi.cli import main


def test_info_prints_versions(capsys):
    assert main(["info", "--arch", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "taichi" in out and "precision" in out and "arch=cpu" in out


def test_simulate_writes_trajectory_and_gif(tmp_path, capsys):
    assert main(["simulate", "--arch", "cpu", "--frames", "6", "--substeps", "8",
                 "--out", str(tmp_path)]) == 0
    data = np.load(tmp_path / "trajectory.npz")
    assert data["positions"].shape == (7, 100, 3)
    # the net falls: its mean height goes down
    assert data["positions"][-1, :, 1].mean() < data["positions"][0, :, 1].mean()
    gif = Image.open(tmp_path / "trajectory.gif")
    assert gif.n_frames == 7
    assert np.asarray(gif.convert("RGB")).std() > 0


def test_simulate_rejects_bad_frames(capsys):
    assert main(["simulate", "--frames", "0"]) == 2
    assert "must be positive" in capsys.readouterr().err

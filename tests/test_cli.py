"""The command line: info, simulate, output folders, ``python -m``."""

import subprocess
import sys

import numpy as np
import pytest
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


@pytest.mark.parametrize("command", [["simulate", "--frames", "2"],
                                     ["estimate", "rigid-mass", "--iters", "1"],
                                     ["control", "cloth", "--iters", "1"]])
def test_out_under_a_file_is_a_clear_error(tmp_path, capsys, command):
    blocker = tmp_path / "some_file"
    blocker.write_text("not a folder")
    assert main([*command, "--arch", "cpu", "--out", str(blocker / "sub")]) == 2
    err = capsys.readouterr().err
    assert "existing file" in err and "Traceback" not in err
    assert blocker.read_text() == "not a folder"


@pytest.mark.parametrize("module", ["gradsim_taichi", "gradsim_taichi.cli"])
def test_python_dash_m_behaves_like_the_console_script(module):
    """One CLIError class whichever way the CLI is started (a module run as __main__ and
    imported again would have two)."""
    run = subprocess.run([sys.executable, "-m", module, "estimate", "rigid-mass", "--lr", "-1"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2, run.stderr
    assert "--lr must be > 0" in run.stderr and "Traceback" not in run.stderr


def test_version_has_one_source(capsys):
    import gradsim_taichi as gs
    from gradsim_taichi.version import version

    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out.strip() == f"gradsim-taichi {gs.__version__}"
    assert gs.__version__ == version() == gs.info()["gradsim_taichi"]


def test_help_does_not_load_torch_or_taichi():
    """``gradsim-taichi --help`` stays quick (3.5 s -> 0.1 s): nothing heavy is imported
    until a command runs; a command's own --help still lists its presets."""
    code = ("import sys\nfrom gradsim_taichi.cli import main\ntry:\n    main(['--help'])\n"
            "except SystemExit:\n    pass\nheavy = {'torch', 'taichi'} & set(sys.modules)\n"
            "print('heavy:', sorted(heavy))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert "heavy: []" in run.stdout, run.stdout + run.stderr
    assert "estimate" in run.stdout and "control" in run.stdout
    sub = subprocess.run([sys.executable, "-m", "gradsim_taichi", "estimate", "--help"],
                         capture_output=True, text=True, timeout=120)
    assert sub.returncode == 0 and "rigid-mass" in "".join(sub.stdout.split())

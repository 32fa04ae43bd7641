"""The ti.GUI demos run headless for a few frames and write non-empty, non-uniform PNG
frames and a GIF; the cloth demo's mouse handle really carries the cloth to the cursor.

The demos are called in-process (``main(argv)``); they keep the engine the test fixture
initialised (float64), so other tests' fields survive.
"""

import importlib
import sys
from pathlib import Path

import imageio.v2 as imageio
import numpy as np
import pytest

DEMOS = Path(__file__).resolve().parent.parent / "demos"


def load(name):
    if str(DEMOS) not in sys.path:
        sys.path.insert(0, str(DEMOS))
    return importlib.import_module(name)


def check_outputs(out: Path, name: str, frames: int, moving: bool = True):
    pngs = sorted(out.glob("frame_*.png"))
    assert len(pngs) == frames, f"{name}: expected {frames} frames, found {len(pngs)}"
    images = []
    for p in pngs:
        assert p.stat().st_size > 0
        img = imageio.imread(p)[..., :3].astype(np.float64)
        assert img.ndim == 3 and img.shape[0] > 100 and img.shape[1] > 100
        assert img.std() > 5.0, f"{p} is (nearly) uniform"
        images.append(img)
    if moving and len(images) > 1:
        assert np.abs(images[-1] - images[0]).mean() > 0.05, f"{name}: nothing moved"
    gif = out / f"{name}.gif"
    assert gif.exists() and gif.stat().st_size > 0
    assert len(imageio.mimread(gif)) == frames
    return images


@pytest.mark.parametrize("name, frames", [("cloth_drag", 4), ("jelly", 4),
                                          ("rigid_tumble", 4)])
def test_demo_headless(tmp_path, name, frames):
    out = tmp_path / name
    still = tmp_path / "still.png"
    rc = load(name).main(["--headless", "--frames", str(frames), "--out", str(out),
                          "--still", str(still)])
    assert rc == 0
    images = check_outputs(out, name, frames)
    assert 0 < still.stat().st_size < 100_000
    assert imageio.imread(still).shape[:2] == images[-1].shape[:2]


def test_estimation_viewer_headless(tmp_path):
    out = tmp_path / "est"
    rc = load("estimation_viewer").main(
        ["--headless", "--frames", "2", "--out", str(out), "--scene-frames", "6",
         "--size", "24", "--optimizer", "adam", "--init", "mass=8"])
    assert rc == 0
    # the start frame plus one per iteration
    images = check_outputs(out, "estimation_viewer", 3, moving=False)
    # the estimate and difference panels are drawn once the first iteration is in
    assert np.abs(images[1] - images[0]).mean() > 0.5


def test_estimation_viewer_rejects_bad_init(tmp_path):
    with pytest.raises(SystemExit):
        load("estimation_viewer").main(["--headless", "--out", str(tmp_path),
                                        "--scene-frames", "4", "--size", "16",
                                        "--init", "nonsense=1"])


def test_cloth_handle_follows_target():
    demo = load("cloth_drag")
    sim, _ = demo.build(resolution=6, substeps=16)
    st = demo.ClothStepper(sim)
    corner = int(np.argmin(st.x0[:, 1] - st.x0[:, 0]))
    st.grab = corner
    target = st.x0[corner] + np.array([0.03, 0.06, 0.03])  # within the speed limit
    st.step(target)
    np.testing.assert_allclose(st.x[corner], target, atol=2e-3)
    others = np.delete(np.arange(len(st.x)), corner)
    assert np.all(np.isfinite(st.x))
    # its neighbours were dragged along (up) while the free cloth alone would sag
    near = others[np.argsort(np.linalg.norm(st.x0[others] - st.x0[corner], axis=1))[:2]]
    free = demo.ClothStepper(sim)
    free.step(None)
    assert np.all(st.x[near, 1] > free.x[near, 1])
    st.step(None)  # let go: the handle is released and keeps no velocity
    assert st.grab is None and np.all(st.v[corner] == 0)


@pytest.mark.slow  # (the viewer itself: test_estimation_viewer_headless)
def test_estimation_viewer_with_the_readme_arguments(tmp_path):
    """The README's command (``--scene rigid-mass``, the scene's 40 frames) while the
    estimation is still in its 13-frame warm-up horizon: it used to index frame 40 of
    13 rendered ones."""
    out = tmp_path / "est"
    rc = load("estimation_viewer").main(["--scene", "rigid-mass", "--headless", "--frames",
                                         "2", "--out", str(out), "--size", "24"])
    assert rc == 0
    check_outputs(out, "estimation_viewer", 3, moving=False)

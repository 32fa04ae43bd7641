"""The estimation machinery on a small spring-sheet scene: supervision modes, resume,
NaN handling, report and outputs, target checks."""

import json

import numpy as np
import pytest
import torch
from runtime_arch import TEST_ARCH, cpu_only
from toy_scene import SpringSheet

from gradsim_taichi.estimation import (
    EstimationError,
    blur_frames,
    check_target,
    estimate,
    render_target,
)
from gradsim_taichi.estimation_outputs import write_report
from gradsim_taichi.objectives import heat_blur_frames
from gradsim_taichi.render import load_video
from gradsim_taichi.reports import plot_history, save_compare_videos


@pytest.fixture
def scene():
    s = SpringSheet()
    s.build()
    return s


def test_3d_supervision_recovers_velocity(scene):
    target = render_target(scene, "3d")
    init = {"velocity": np.array([0.2, 0.1, 0.2])}
    r = estimate(scene, target, params=["velocity"], iters=10, lr=1.0, supervision="3d",
                 optimizer="lbfgs", init=init, progress=False)
    err0 = np.abs(init["velocity"] - scene.params["velocity"].true).mean()
    assert r.errors()["velocity"]["abs_err"] < err0 / 10
    assert r.history[-1]["loss"] < r.history[0]["loss"] / 100


def test_video_supervision_lowers_loss_and_error(scene):
    target = render_target(scene)
    assert target.shape == (scene.frames + 1, scene.height, scene.width, 4)
    init = {"velocity": np.array([0.6, 0.3, -0.3])}
    r = estimate(scene, target, params=["velocity"], iters=8, lr=0.1, init=init,
                 progress=False)
    err0 = np.abs(init["velocity"] - scene.params["velocity"].true).mean()
    assert r.history[-1]["loss"] < r.history[0]["loss"]
    assert r.errors()["velocity"]["abs_err"] < err0


@pytest.mark.parametrize("optimizer", [None, "lm", "lbfgs+lm"])
def test_resume_reaches_the_same_estimate(scene, tmp_path, optimizer):
    target = render_target(scene, "3d")
    kw = dict(params=["velocity", "mass"], iters=6, lr=0.1, supervision="3d", seed=3,
              progress=False, save_every=1, optimizer=optimizer, tol=0.0,
              warmup=(2, 4) if optimizer == "lbfgs+lm" else None)  # (cut after the switch)
    full = estimate(scene, target, out_dir=tmp_path / "full", **kw)

    def interrupt(it, *_):
        if it == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        estimate(scene, target, out_dir=tmp_path / "cut", callback=interrupt, **kw)
    resumed = estimate(scene, target, out_dir=tmp_path / "cut", resume=True, **kw)
    assert resumed.iterations == 6
    for n in full.params:
        np.testing.assert_allclose(resumed.params[n], full.params[n], rtol=1e-9)
    np.testing.assert_allclose([h["loss"] for h in resumed.history],
                               [h["loss"] for h in full.history], rtol=1e-9)


def _optimiser_per_iteration(monkeypatch):
    """``{iteration: "lm" | "gradient"}``: which kind of evaluation each iteration ran."""
    from gradsim_taichi import fit

    seen = {}
    residual, closure = fit.Fit.residual, fit.Fit.closure

    def spy(kind, method):
        def wrapped(self):
            seen[self.iteration] = seen.get(self.iteration, kind)
            return method(self)
        return wrapped

    monkeypatch.setattr(fit.Fit, "residual", spy("lm", residual))
    monkeypatch.setattr(fit.Fit, "closure", spy("gradient", closure))
    return seen


def test_lbfgs_then_lm_switches_when_every_frame_is_fitted(scene, monkeypatch):
    """``"lbfgs+lm"``: L-BFGS on the warm-up horizon, Levenberg-Marquardt after it, to
    the truth; a scene's ``"lbfgs+lm"`` runs L-BFGS with another loss, and asking for it
    with one is an error."""
    seen = _optimiser_per_iteration(monkeypatch)
    target = render_target(scene)
    init = {"velocity": np.array([0.6, 0.3, -0.3])}
    r = estimate(scene, target, params=["velocity"], iters=12, lr=0.5, optimizer="lbfgs+lm",
                 warmup=(3, 4), init=init, progress=False)
    assert [seen[i] for i in range(3)] == ["gradient"] * 3
    assert {seen[i] for i in range(3, r.iterations)} == {"lm"}
    assert r.errors()["velocity"]["abs_err"] < 1e-10
    assert r.settings["optimizer"] == "lbfgs+lm"
    # a scene's "lbfgs+lm" runs L-BFGS with the robust loss; a scene's own "lm"
    # (rigid-contact's) fits it through its residuals
    for own, used in (("lbfgs+lm", "lbfgs"), ("lm", "lm")):
        scene.optimizer = own
        try:
            r = estimate(scene, target, params=["velocity"], iters=1, loss="robust",
                         progress=False, uncertainty=False)
            assert r.settings["optimizer"] == used
        finally:
            scene.optimizer = SpringSheet.optimizer
    with pytest.raises(ValueError, match="'lbfgs\\+lm' fits residuals \\(mse or robust\\)"):
        estimate(scene, target, iters=1, loss="silhouette", optimizer="lbfgs+lm",
                 progress=False)


def test_lm_fits_the_robust_loss_to_the_minimum_lbfgs_finds(scene):
    """Levenberg-Marquardt on the robust loss's residuals reaches the minimum L-BFGS
    reaches on the loss itself, on a target with outliers (5% of the pixels white: the
    MSE's minimum lies elsewhere)."""
    target = render_target(scene).clone()
    salt = torch.rand(target.shape[:3], generator=torch.Generator().manual_seed(3),
                      dtype=target.dtype) < 0.05
    target[..., :3][salt] = 1.0
    init = {"velocity": np.array([0.6, 0.3, -0.3])}
    runs = {opt: estimate(scene, target, params=["velocity"], iters=40, lr=0.5, loss=loss,
                          optimizer=opt, init=init, progress=False, uncertainty=False)
            for opt, loss in (("lm", "robust"), ("lbfgs", "robust"))}
    mse = estimate(scene, target, params=["velocity"], iters=40, lr=0.5, optimizer="lm",
                   init=init, progress=False, uncertainty=False)
    lm, lbfgs = (runs[k].params["velocity"] for k in ("lm", "lbfgs"))
    np.testing.assert_allclose(lm, lbfgs, atol=1e-6)
    assert np.abs(mse.params["velocity"] - lm).max() > 1e-3  # another minimum


def test_a_stage_that_starts_at_the_minimum_ends_at_once(scene, monkeypatch):
    """The coarse stage (Levenberg-Marquardt in the basis) finds a truth that lies in
    it; the free stage then starts at rounding level and stops after the patience,
    measured against the run's first loss rather than its own (noise) start."""
    seen = _optimiser_per_iteration(monkeypatch)
    target = render_target(scene, "3d")
    truth = scene.params["velocity"].true
    direction = np.array([1.0, -1.0, 2.0]) / np.sqrt(6)
    init = truth - 0.3 * direction
    scene.params["velocity"].basis = direction[:, None]
    try:
        r = estimate(scene, target, params=["velocity"], iters=40, lr=1.0, supervision="3d",
                     optimizer="lbfgs", init={"velocity": init}, coarse_iters=20,
                     progress=False, uncertainty=False)
    finally:
        scene.params["velocity"].basis = None
    assert seen[0] == "lm" and r.errors()["velocity"]["abs_err"] < 1e-10
    coarse_end = r.stages[0]["end_iteration"]
    # (the first iteration of the stage, then the patience; without the run's units 2 more)
    assert coarse_end < 20 and r.iterations <= coarse_end + 3, (coarse_end, r.iterations)
    assert "converged" in r.message


def test_a_repeated_prediction_is_reused_without_changing_the_result(scene, monkeypatch):
    """Levenberg-Marquardt starts each step where the last trial ended, and the final
    loss is that evaluation's: reusing it saves simulations, and nothing else changes."""
    from gradsim_taichi import fit

    target = render_target(scene)
    kw = dict(params=["velocity"], iters=4, lr=0.5, optimizer="lm", tol=0.0, progress=False,
              init={"velocity": np.array([0.6, 0.3, -0.3])}, uncertainty=False)
    calls = []
    simulate = type(scene).simulate
    monkeypatch.setattr(type(scene), "simulate",
                        lambda self, *a, **k: calls.append(1) or simulate(self, *a, **k))
    cached = estimate(scene, target, **kw)
    with_cache = len(calls)
    monkeypatch.setattr(fit.Fit, "_same_as_last", lambda self, ids: False)
    # (and the rollout not reused either: gradsim_taichi.reuse)
    monkeypatch.setattr(fit.LastResult, "get", lambda self, inputs, compute: compute())
    calls.clear()
    fresh = estimate(scene, target, **kw)
    assert with_cache <= len(calls) - 4  # each step's start and the final loss
    np.testing.assert_array_equal(cached.params["velocity"], fresh.params["velocity"])
    assert cached.loss == fresh.loss


def test_lbfgs_does_not_evaluate_a_point_twice_and_nothing_else_changes(scene, monkeypatch):
    """L-BFGS starts each step where its line search ended, at a point it evaluated:
    the remembered closure saves about one evaluation per iteration, bit for bit."""
    from gradsim_taichi import fit

    target = render_target(scene)
    kw = dict(params=["velocity"], iters=6, lr=1.0, optimizer="lbfgs", tol=0.0,
              progress=False, init={"velocity": np.array([0.6, 0.3, -0.3])},
              uncertainty=False, warmup=(2, 3))
    calls = []
    objective = fit.Fit.objective
    monkeypatch.setattr(fit.Fit, "objective",
                        lambda self: calls.append(1) or objective(self))
    remembered = estimate(scene, target, **kw)
    with_memory = len(calls)
    monkeypatch.setattr(fit, "RECENT_CLOSURES", 0)
    calls.clear()
    fresh = estimate(scene, target, **kw)
    # every step but a stage's first starts at a remembered point
    assert with_memory <= len(calls) - (kw["iters"] - 2), (with_memory, len(calls))
    assert [h["loss"] for h in remembered.history] == [h["loss"] for h in fresh.history]
    np.testing.assert_array_equal(remembered.params["velocity"], fresh.params["velocity"])
    assert remembered.loss == fresh.loss


@pytest.mark.cuda
def test_levenberg_marquardt_recovers_velocity_from_video(scene):
    target = render_target(scene)
    init = {"velocity": np.array([0.6, 0.3, -0.3])}
    r = estimate(scene, target, params=["velocity"], iters=12, lr=0.5, optimizer="lm",
                 init=init, progress=False)
    assert r.errors()["velocity"]["abs_err"] < 1e-10  # quadratic convergence at the end
    assert r.history[-1]["loss"] < 1e-12 * r.history[0]["loss"]


def test_blur_frames_is_the_sampled_gaussian():
    frames = torch.zeros(2, 15, 15, 4, dtype=torch.float64)
    frames[1, 7, 7, 2] = 1.0
    out = blur_frames(frames, 1.5)
    x = torch.arange(-5, 6, dtype=torch.float64)  # radius ceil(3 * 1.5) = 5
    k = torch.exp(-x**2 / (2 * 1.5**2))
    k /= k.sum()
    np.testing.assert_allclose(out[1, 2:13, 2:13, 2].numpy(), torch.outer(k, k).numpy(),
                               rtol=1e-12, atol=1e-15)
    assert float(out[0].abs().max()) == 0 and float(out[1, ..., :2].abs().max()) == 0
    const = torch.full((1, 6, 9, 3), 0.3, dtype=torch.float64)
    np.testing.assert_allclose(blur_frames(const, 2.0).numpy(), 0.3, rtol=1e-14)  # borders
    assert blur_frames(frames, 0.0) is frames
    # its gradient (the L-BFGS presets back-propagate through it) against float64
    # central differences
    x = torch.rand(2, 7, 5, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda f: blur_frames(f, 0.8), (x,), eps=1e-6, atol=1e-8)



@pytest.mark.parametrize("variance", [0.05, 0.7, 2.25])
def test_heat_blur_has_the_exact_variance_keeps_the_light_and_composes(variance):
    """The learned blur's kernel (``fit="blur"``): a point's spread has exactly the
    variance asked for along each axis, no light is lost at the borders, two blurs are
    one of the summed variance, and 0 is the identity."""
    v = torch.tensor(variance, dtype=torch.float64)
    point = torch.zeros(1, 31, 33, 1, dtype=torch.float64)
    point[0, 15, 16] = 1.0
    out = heat_blur_frames(point, v)[0, ..., 0]
    y, x = torch.meshgrid(torch.arange(31.0) - 15, torch.arange(33.0) - 16, indexing="ij")
    assert float(out.sum()) == pytest.approx(1.0, abs=1e-13)
    assert float((out * x * x).sum()) == pytest.approx(variance, rel=1e-10)
    assert float((out * y * y).sum()) == pytest.approx(variance, rel=1e-10)
    assert float((out * x * y).sum()) == pytest.approx(0.0, abs=1e-13)
    frames = torch.rand(2, 9, 7, 3, generator=torch.Generator().manual_seed(0),
                        dtype=torch.float64)
    edge = heat_blur_frames(frames, v)
    assert torch.allclose(edge.sum((1, 2)), frames.sum((1, 2)), rtol=1e-13)
    twice = heat_blur_frames(heat_blur_frames(frames, v / 3), 2 * v / 3)
    assert torch.allclose(twice, edge, rtol=1e-12, atol=1e-14)
    assert torch.allclose(heat_blur_frames(frames, v * 0), frames, rtol=0, atol=1e-14)


@pytest.mark.parametrize("variance", [0.0, 0.3, 4.0])
def test_heat_blur_gradients_match_central_differences(variance):
    """Through the variance (also at 0, where a learned blur starts) and the frames."""
    frames = torch.rand(2, 8, 6, 3, generator=torch.Generator().manual_seed(1),
                        dtype=torch.float64, requires_grad=True)
    v = torch.tensor(variance, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(heat_blur_frames, (frames, v), eps=1e-6, atol=1e-8)

def test_blurred_video_loss_has_the_same_minimum(scene):
    target = render_target(scene)
    r = estimate(scene, target, params=["velocity"], iters=12, lr=0.5, optimizer="lm",
                 init={"velocity": np.array([0.6, 0.3, -0.3])}, blur=1.0, progress=False)
    assert r.errors()["velocity"]["abs_err"] < 1e-10
    with pytest.raises(ValueError, match="blur must be a number of pixels >= 0"):
        estimate(scene, target, blur=-1.0, progress=False)


def test_nan_loss_stops_with_last_good_state(scene):
    target = render_target(scene, "3d")
    calls = []

    def flaky_loss(pred, tgt):
        calls.append(1)
        value = ((pred - tgt) ** 2).mean()
        return value * float("nan") if len(calls) == 3 else value

    with pytest.raises(EstimationError, match="iteration 2: the loss became NaN") as e:
        estimate(scene, target, params=["velocity"], iters=5, lr=0.1, supervision="3d",
                 loss=flaky_loss, init={"velocity": [0.5, 0.5, 0.5]}, progress=False)
    result = e.value.result
    assert result.iterations == 2
    assert np.all(np.isfinite(result.params["velocity"]))


def test_trial_steps_out_of_range_are_rejected_not_fatal():
    """A line-search trial so long that exp() of a log-parameter underflows to 0 (or
    overflows) gets the blow-up penalty: the run goes on instead of failing on the
    parameter check (seen in the paper tables: a beam's density became 0)."""
    scene = SpringSheet(frames=14)  # long enough to land: the mass matters through contact
    scene.build()
    target = render_target(scene, "3d")
    r = estimate(scene, target, params=["mass"], iters=3, lr=1e4, optimizer="lbfgs",
                 supervision="3d", init={"mass": 0.08}, progress=False)
    assert r.iterations == 3
    assert np.isfinite(r.params["mass"]) and r.params["mass"] > 0
    assert all(np.isfinite(h["loss"]) for h in r.history)


def test_bad_arguments_are_named(scene):
    target = render_target(scene)
    with pytest.raises(KeyError, match="no parameter 'stiffness'"):
        estimate(scene, target, params=["stiffness"], progress=False)
    with pytest.raises(ValueError, match="iters must be a positive integer"):
        estimate(scene, target, iters=0, progress=False)
    with pytest.raises(ValueError, match="lr must be a positive number"):
        estimate(scene, target, lr=-1.0, progress=False)
    with pytest.raises(ValueError, match="'lm' fits residuals \\(mse or robust\\)"):
        estimate(scene, target, optimizer="lm", loss=lambda a, b: (a - b).abs().mean(),
                 progress=False)
    with pytest.raises(ValueError, match="has 5 frames; scene 'spring-sheet' renders 9"):
        check_target(scene, target[:5], "video")
    with pytest.raises(ValueError, match="16x32 pixels"):
        check_target(scene, target[:, :, :16], "video")
    with pytest.raises(ValueError, match="must be \\[frames, height, width"):
        check_target(scene, target[0], "video")


def test_report_plot_and_videos(scene, tmp_path):
    target = render_target(scene)
    r = estimate(scene, target, params=["velocity"], iters=2, lr=0.1, progress=False)
    path = write_report(tmp_path / "report.json", scene, r, {"seed": 0, "iters": 2})
    rep = json.loads(path.read_text())
    entry = rep["params"]["velocity"]
    assert set(entry) >= {"true", "init", "estimate", "abs_err", "rel_err"}
    assert len(rep["loss_history"]) == 2 and rep["precision"] == "f64"
    png = plot_history(tmp_path / "loss.png", r.history, r.true)
    assert png.stat().st_size > 1000
    with torch.no_grad():
        est = scene.render(scene.simulate({"velocity": torch.tensor(r.params["velocity"])}))
    mp4, gif = save_compare_videos(tmp_path, target, est)
    video = load_video(gif)
    assert video.shape[0] == scene.frames + 1 and video.shape[2] > 3 * scene.width


def test_3d_target_shape_is_checked(scene):
    target = render_target(scene, "3d")
    check_target(scene, target, "3d")
    with pytest.raises(ValueError, match="3D target must have shape"):
        check_target(scene, target[:, :3], "3d")


def test_resume_from_a_corrupt_state_is_a_clear_error(scene, tmp_path):
    (tmp_path / "state.pt").write_bytes(b"not a checkpoint")
    target = render_target(scene, "3d")
    with pytest.raises(ValueError, match="cannot resume from .*state.pt"):
        estimate(scene, target, iters=2, supervision="3d", out_dir=tmp_path, resume=True,
                 progress=False)


def test_warmup_stages_fit_growing_horizons(scene):
    target = render_target(scene)
    seen = []
    estimate(scene, target, iters=5, lr=0.1, warmup=[(1, 2), (2, 4)], progress=False,
             callback=lambda it, loss, values, rendered: seen.append(rendered.shape[0]))
    assert seen == [3, 5, 5, 9, 9]  # frames 0..2, 0..4, then all 9
    for bad in ([(1, -2)], [(1, 2, 3)], (2,), [(1, 2), 3]):
        with pytest.raises(ValueError, match="warmup stages"):
            estimate(scene, target, iters=2, warmup=bad, progress=False)


def _mse(a, b):
    return ((a - b) ** 2).mean()


@pytest.mark.parametrize("loss", ["mse", _mse])  # the coarse stage's LM; L-BFGS projected
def test_coarse_iterations_stay_in_the_basis_then_go_free(scene, loss):
    target = render_target(scene, "3d")
    init = np.array([0.2, 0.1, 0.2])
    direction = np.ones(3) / np.sqrt(3)
    scene.params["velocity"].basis = direction[:, None]
    values = []
    try:
        estimate(scene, target, params=["velocity"], iters=8, lr=1.0, supervision="3d",
                 optimizer="lbfgs", init={"velocity": init}, coarse_iters=4, progress=False,
                 loss=loss, tol=0.0,
                 callback=lambda it, loss, v, r: values.append(v["velocity"].numpy().copy()))
    finally:
        scene.params["velocity"].basis = None
    steps = [v - init for v in values]
    off_span = [np.linalg.norm(s - direction * (s @ direction)) for s in steps]
    assert max(off_span[:5]) < 1e-12  # the values the first 4 steps reach lie on the line
    assert np.linalg.norm(steps[1]) > 1e-3  # ... and they moved along it
    assert off_span[-1] > 0.1  # then the free steps leave it (the truth is off the line)
    truth = scene.params["velocity"].true
    assert np.abs(values[-1] - truth).max() < np.abs(values[4] - truth).max() / 10
    scene.params["velocity"].basis = direction[:, None]
    try:
        with pytest.raises(ValueError, match="coarse_iters with optimizer 'lm'"):
            estimate(scene, target, params=["velocity"], iters=2, supervision="3d",
                     optimizer="lm", coarse_iters=1, progress=False)
    finally:
        scene.params["velocity"].basis = None


@cpu_only
@pytest.mark.parametrize("threads", [1, 2])
def test_the_same_estimation_twice_is_bitwise_equal(threads):
    """With one thread every sum has one order; the README states what two threads give
    (this small scene's loops all run serially, so two threads are bitwise equal too)."""
    import gradsim_taichi as gs

    gs.init(arch=TEST_ARCH, precision="f64", threads=threads)
    try:
        runs = []
        for _ in range(2):
            scene = SpringSheet()
            scene.build()
            r = estimate(scene, render_target(scene), params=["velocity", "mass"], iters=4,
                         lr=0.5, optimizer="lbfgs", seed=2, progress=False)
            runs.append((r.params, r.history))
        (p1, h1), (p2, h2) = runs
        assert h1 == h2
        assert all(np.array_equal(p1[n], p2[n]) for n in p1)
    finally:
        gs.init(arch=TEST_ARCH, precision="f64")


def test_a_converged_run_stops_early_and_says_so(scene):
    target = render_target(scene)
    kw = dict(params=["velocity"], iters=40, lr=0.5, optimizer="lm", progress=False,
              init={"velocity": np.array([0.6, 0.3, -0.3])})
    r = estimate(scene, target, **kw)
    assert r.status == "done" and r.message.startswith("converged at iteration")
    assert r.iterations < 40 and r.errors()["velocity"]["abs_err"] < 1e-10
    full = estimate(scene, target, tol=0, **kw)  # tol=0: every iteration
    assert full.iterations == 40 and full.message == "done"
    np.testing.assert_allclose(r.params["velocity"], full.params["velocity"], rtol=0,
                               atol=1e-12)
    with pytest.raises(ValueError, match="tol must be a number >= 0"):
        estimate(scene, target, tol=-1.0, progress=False)


def test_converged_warmup_stages_end_early_with_the_same_estimate(scene, tmp_path):
    """A horizon stage whose fit has converged hands over to the next at once; the
    estimate equals that of the full schedule, and a resumed run keeps the moved ends."""
    target = render_target(scene)
    kw = dict(params=["velocity"], iters=30, lr=0.5, optimizer="lm", progress=False,
              warmup=[(10, 3), (10, 6)], init={"velocity": np.array([0.6, 0.3, -0.3])})
    full = estimate(scene, target, tol=0, **kw)  # every stage runs its 10 iterations
    assert [s["end_iteration"] for s in full.stages] == [10, 20, 30]
    r = estimate(scene, target, **kw)
    ends = [s["end_iteration"] for s in r.stages]
    assert ends[0] < 10 and ends[1] - ends[0] < 10 and r.iterations < 20
    assert [s["last_frame"] for s in r.stages] == [3, 6, scene.frames]
    np.testing.assert_allclose(r.params["velocity"], full.params["velocity"], rtol=0,
                               atol=1e-12)
    assert r.errors()["velocity"]["abs_err"] < 1e-10

    def interrupt(it, *_):
        if it == ends[0] + 1:  # inside the second stage, which has moved
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        estimate(scene, target, out_dir=tmp_path, save_every=1, callback=interrupt, **kw)
    resumed = estimate(scene, target, out_dir=tmp_path, resume=True, save_every=1, **kw)
    assert [s["end_iteration"] for s in resumed.stages] == ends
    np.testing.assert_allclose(resumed.params["velocity"], r.params["velocity"], rtol=0,
                               atol=1e-12)


def test_short_runs_warn_and_record_every_setting(scene):
    target = render_target(scene)
    r = estimate(scene, target, params=["velocity"], iters=2, lr=0.1, warmup=[(3, 4)],
                 progress=False)
    assert len(r.warnings) == 1 and "inside a warm-up stage: only frames up to 4" in r.warnings[0]
    assert "at least 4 iterations" in r.warnings[0]
    # a horizon past the clip's last frame fits every frame already (a shortened clip)
    past = estimate(scene, target, params=["velocity"], iters=2, lr=0.1,
                    warmup=[(3, 4), (5, 10_000)], progress=False)
    assert "at least 4 iterations" in past.warnings[0]
    assert r.settings["warmup"] == [(3, 4)] and r.settings["coarse_iters"] == 0
    for key in ("iters", "lr", "optimizer", "frame_stride", "loss", "supervision", "seed",
                "blur", "tol", "params"):
        assert key in r.settings
    still = estimate(scene, target, params=["velocity"], iters=1, lr=1e-30,
                     optimizer="adam", progress=False)
    assert still.warnings == ["'velocity' never moved from its initial guess"]
    assert estimate(scene, target, params=["velocity"], iters=3, lr=0.1,
                    progress=False).warnings == []


def test_frame_range_fits_only_those_frames(scene):
    target = render_target(scene)
    seen = []
    r = estimate(scene, target, iters=2, lr=0.1, frame_range=(3, 7), warmup=[(1, 2), (1, 5)],
                 progress=False, uncertainty=False,
                 callback=lambda it, loss, values, rendered: seen.append(rendered.shape[0]))
    assert seen == [3, 5]  # (1, 2) selects no frame of 3..7: dropped; then 3..5, 3..7
    assert r.settings["frame_range"] == [3, 7]
    assert [(s["first_frame"], s["last_frame"]) for s in r.stages] == [(3, 5), (3, 7)]

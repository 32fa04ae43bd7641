"""Control from one target image: the three tasks learn, closed-loop stepping has
correct gradients, and the ``control`` CLI writes its outputs and rejects bad input.

Tiny versions of the tasks (short horizons, 32 px) keep each training test to a few
seconds; the defaults are measured by ``benchmarks/control_tasks.py``."""

import json

import numpy as np
import pytest
import torch
from torch import nn

import gradsim_taichi as gs
from gradsim_taichi.control import ControlError, random_baseline, train
from gradsim_taichi.frame_stepper import FrameStepper
from gradsim_taichi.render import Camera, Mesh, SoftRasterizer
from gradsim_taichi.scenes import make_task

torch.set_num_threads(1)


def _check_learns(result, iters):
    assert result.status == "done" and result.iterations == iters
    losses, dists = result.losses, result.distances
    assert all(np.isfinite(losses)) and all(np.isfinite(dists))
    # the loss and the centre-of-mass distance go down (the final policy's rollout
    # against the first iteration's)
    assert result.final_loss < 0.9 * losses[0], losses + [result.final_loss]
    assert result.final_distance < 0.9 * dists[0], dists + [result.final_distance]


@pytest.mark.cuda
def test_cloth_learns_its_initial_velocity():
    task = make_task("cloth", frames=12, width=32, height=32, resolution=(4, 4))
    result = train(task, iters=3, lr=0.2, seed=0, progress=False)
    _check_learns(result, 3)


@pytest.mark.slow  # (the other paper tasks learn in the default run)
def test_gear_learns_to_roll():
    task = make_task("gear", frames=10, width=32, height=32, goal_offset=(0.04, 0.0, 0.0))
    result = train(task, iters=3, lr=0.1, seed=0, progress=False)
    _check_learns(result, 3)


def test_walker_learns_to_walk():
    task = make_task("walker", frames=12, width=32, height=32, goal_offset=(0.03, 0.0, 0.0))
    result = train(task, iters=3, lr=0.2, seed=0, progress=False)
    _check_learns(result, 3)


def test_train_rejects_bad_settings():
    task = make_task("cloth", frames=2, width=16, height=16, resolution=(2, 2))
    with pytest.raises(ValueError, match="iters"):
        train(task, iters=0, progress=False)
    with pytest.raises(ValueError, match="lr"):
        train(task, iters=1, lr=-1.0, progress=False)
    with pytest.raises(ValueError, match="optimizer"):
        train(task, iters=1, lr=0.1, optimizer=lambda params: None, progress=False)


def test_a_render_mode_changed_on_a_built_task_redraws_its_goal():
    """The renderers are made again for the new mode (the model kept), and the goal's
    image with them: the one a task built in that mode from the start has."""
    task = make_task("cloth", frames=2, width=16, height=16, resolution=(2, 2))
    task.ensure_built()
    soft, sim = task.target_image, task.sim
    task.render_mode = "hard"
    task.ensure_built()
    fresh = make_task("cloth", frames=2, width=16, height=16, resolution=(2, 2))
    fresh.render_mode = "hard"
    fresh.ensure_built()
    assert task.sim is sim and not torch.equal(task.target_image, soft)
    assert torch.equal(task.target_image, fresh.target_image)


def test_nan_rollout_stops_with_last_good_policy():
    task = make_task("cloth", frames=2, width=16, height=16, resolution=(2, 2))
    policy = task.default_policy(seed=0)
    with torch.no_grad():
        policy.value.fill_(1e200)  # the explicit integrator overflows
    with pytest.raises(ControlError, match="NaN") as info:
        train(task, policy, iters=2, lr=0.1, progress=False)
    assert info.value.result.iterations == 0
    assert float(policy.value.detach()[0]) == 1e200  # restored, not a NaN-updated one


def test_random_baseline_is_finite():
    task = make_task("cloth", frames=4, width=16, height=16, resolution=(2, 2))
    assert np.isfinite(random_baseline(task, seed=1))


# ---- closed loop: two frames with a policy call between them, vs finite differences ----
def _box_stepper():
    b = gs.ModelBuilder(contact_ke=1e3, contact_kd=1.0, contact_kf=5.0, contact_mu=0.5)
    b.add_soft_box(size=(0.2, 0.2, 0.2), resolution=(1, 1, 1), origin=(-0.1, 0.02, -0.1),
                   density=200.0, mu=2e3, lam=2e3, damping=0.5, velocity=(0.3, -0.4, 0.1))
    return FrameStepper(b.finalize(), substeps=8, fps=60.0), b.soft_tet_count


class _Policy(nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.linear = nn.Linear(n_in, n_out, dtype=torch.float64)
        torch.manual_seed(0)
        with torch.no_grad():
            self.linear.weight.normal_(0.0, 0.5)
            self.linear.bias.normal_(0.0, 0.1)

    def forward(self, obs):
        return 0.3 * torch.tanh(self.linear(obs))


def _state_obs(x, v):
    return torch.cat([x.mean(0), v.mean(0)]) * 3.0


def _make_image_obs():
    cam = Camera.look_at((0.0, 0.3, 0.8), (0.0, 0.05, 0.0), fov_y_deg=40, width=12,
                         height=12, near=0.1, far=5.0)

    def obs(x, v, faces):
        r = SoftRasterizer(cam, [Mesh(faces)], sigma=1e-3, gamma=1e-2,
                           background=(0.2, 0.3, 0.4))
        img = r(x)[..., :3]
        return img.reshape(4, 3, 4, 3, 3).mean(dim=(1, 3)).reshape(-1)  # 4x4x3 pooled

    return obs


@pytest.mark.parametrize("observe", ["state", "image"])
def test_closed_loop_gradients_match_finite_differences(observe):
    stepper, tets = _box_stepper()
    faces = None
    if observe == "image":
        offset, tris = stepper.sim.model.soft_surfaces[0]
        faces = tris + offset
        image_obs = _make_image_obs()
        policy = _Policy(48, tets)
    else:
        policy = _Policy(6, tets)
    weights = torch.randn(8, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(3))

    def loss_fn():
        x, v = stepper.initial_state()
        for _ in range(2):  # frame, policy call on the new state, frame
            obs = _state_obs(x, v) if observe == "state" else image_obs(x, v, faces)
            x, v = stepper.step(x, v, {"tet_activation": policy(obs)[None]})
        return (weights * x).sum() + 0.1 * (weights * v).sum()

    params = list(policy.parameters())
    loss = loss_fn()
    grads = torch.autograd.grad(loss, params)
    assert all(float(g.abs().max()) > 0 for g in grads)
    rng = torch.Generator().manual_seed(7)
    for _ in range(3):  # directional derivatives along random directions
        dirs = [torch.randn(p.shape, dtype=torch.float64, generator=rng) for p in params]
        analytic = sum(float((g * d).sum()) for g, d in zip(grads, dirs))
        eps = 1e-6
        with torch.no_grad():
            for p, d in zip(params, dirs):
                p.add_(eps * d)
            up = float(loss_fn())
            for p, d in zip(params, dirs):
                p.sub_(2 * eps * d)
            down = float(loss_fn())
            for p, d in zip(params, dirs):
                p.add_(eps * d)
        numeric = (up - down) / (2 * eps)
        assert analytic == pytest.approx(numeric, rel=1e-5, abs=1e-9)


def test_stepper_matches_one_rollout():
    """Two single-frame steps equal one two-frame rollout of the same model."""
    b = gs.ModelBuilder(contact_kf=5.0)
    b.add_soft_box(size=(0.2, 0.2, 0.2), resolution=(1, 1, 1), origin=(-0.1, 0.05, -0.1),
                   density=200.0, mu=2e3, lam=2e3, damping=0.5, velocity=(0.3, -0.4, 0.1))
    stepper = FrameStepper(b.finalize(), substeps=8)
    xs, vs = stepper.rollout(2, lambda k, x, v: {})
    b2 = gs.ModelBuilder(contact_kf=5.0)
    b2.add_soft_box(size=(0.2, 0.2, 0.2), resolution=(1, 1, 1), origin=(-0.1, 0.05, -0.1),
                    density=200.0, mu=2e3, lam=2e3, damping=0.5, velocity=(0.3, -0.4, 0.1))
    sim = gs.Simulation(b2.finalize(), frames=2, substeps=8)
    ref = gs.simulate(sim)
    assert torch.allclose(xs, ref["particles"], atol=1e-12)
    assert torch.allclose(vs, ref["particles_velocity"], atol=1e-12)


# (the image observation's gradients: test_closed_loop_gradients_match_finite_differences)
@pytest.mark.parametrize("observation", ["state", pytest.param("image", marks=pytest.mark.slow)])
def test_closed_loop_policy_trains(observation):
    task = make_task("gear", frames=2, width=16, height=16, goal_offset=(0.02, 0.0, 0.0),
                     observation=observation, pool=4)
    result = train(task, iters=2, lr=0.05, seed=0, progress=False, closed_loop=True)
    assert result.iterations == 2 and np.isfinite(result.final_distance)
    assert result.final_rollout["actions"].shape == (2, task.n_actions())
    assert result.history[0]["loss"] != result.final_loss


# ---- CLI -----------------------------------------------------------------------------
def _cli(args):
    from gradsim_taichi.cli import main

    return main(args)


@pytest.mark.parametrize("args, message", [
    (["control", "spinner"], "unknown control task"),
    (["control", "cloth", "--iters", "0"], "--iters"),
    (["control", "cloth", "--lr", "-1"], "--lr"),
    (["control", "cloth", "--lr", "nan"], "--lr"),
    (["control", "gear", "--frames", "0"], "--frames"),
    (["control", "gear", "--size", "2"], "--size"),
    (["control", "cloth", "--policy", "closed"], "open-loop"),
    (["control", "cloth", "--resume", "--out", "/nonexistent/run"], "no saved state"),
])
def test_cli_rejects_bad_input(args, message, capsys):
    assert _cli(args) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_cli_writes_outputs_and_resumes(tmp_path, capsys):
    out = tmp_path / "run"
    base = ["control", "cloth", "--frames", "4", "--size", "16", "--arch", "cpu", "--quiet",
            "--out", str(out)]
    assert _cli(base + ["--iters", "2"]) == 0
    report = json.loads((out / "report.json").read_text())
    assert len(report["history"]) == 2 and np.isfinite(report["final_distance"])
    for key in ("loss_history", "distance_history", "start_distance", "seconds", "arch",
                "precision", "settings", "paper"):
        assert key in report
    for name in ("progress.png", "rollout.mp4", "rollout.gif", "state.pt"):
        assert (out / name).stat().st_size > 0
    assert _cli(base + ["--iters", "3", "--resume"]) == 0
    resumed = json.loads((out / "report.json").read_text())
    assert len(resumed["history"]) == 3
    assert resumed["history"][:2] == report["history"]

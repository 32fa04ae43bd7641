"""Visuomotor control from one target image: train a torch policy through the engine.

``train(task, policy, iters, lr)`` repeats: run the policy (open loop: one rollout of
actions computed from time features; closed loop: frame by frame through
:mod:`gradsim_taichi.stepping`, the policy reading the current state between frames),
render the LAST frame, take the pixel MSE against the task's target image (plus an
optional small action regulariser), back-propagate through renderer, simulator and
policy, and step any torch optimiser. Per iteration it records the loss and the
centre-of-mass distance to the goal (the paper's metric; it is never used for the
gradient). ``out_dir`` gets ``state.pt`` every few iterations so ``resume=True``
continues an interrupted run.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from gradsim_taichi import runtime


class ControlError(RuntimeError):
    """Training could not go on (NaN loss or gradient); ``error.result`` holds the run so
    far with the last good policy."""

    def __init__(self, message, result=None):
        super().__init__(message)
        self.result = result


@dataclass
class ControlResult:
    """What :func:`train` did.

    Attributes:
        history: per iteration ``{"iter", "loss", "distance"}`` (loss and centre-of-mass
            distance [m] of the policy *before* that iteration's update).
        final_distance: centre-of-mass distance [m] of the trained policy's rollout.
        final_loss: its loss.
        start_distance: distance of the initial configuration to the goal [m].
        iterations, seconds, status (``"done"`` or why it stopped), reached (distance
        below the task's reach fraction of the start distance).
    """

    history: list = field(default_factory=list)
    final_distance: float = float("nan")
    final_loss: float = float("nan")
    start_distance: float = float("nan")
    iterations: int = 0
    seconds: float = 0.0
    status: str = "done"
    reached: bool = False

    @property
    def losses(self) -> list:
        return [h["loss"] for h in self.history]

    @property
    def distances(self) -> list:
        return [h["distance"] for h in self.history]


def make_optimizer(optimizer, params, lr: float):
    """``optimizer`` is a ``torch.optim.Optimizer`` class or a factory called as
    ``optimizer(params, lr=lr)``."""
    try:
        return optimizer(params, lr=lr)
    except TypeError as e:
        raise ValueError(f"optimizer must be a torch optimiser class or a factory "
                         f"optimizer(params, lr=...); calling {optimizer!r} failed: {e}") from None


def evaluate(task, policy) -> dict:
    """Rollout of ``policy`` without gradients: loss, distance, the last image and the
    rollout."""
    with torch.no_grad():
        roll = task.rollout(policy)
        if not bool(torch.isfinite(roll["particles"]).all()):
            nan = float("nan")
            return {"loss": nan, "distance": nan, "image": None, "rollout": roll}
        value, image = task.loss(roll)
    return {"loss": float(value), "distance": task.distance(roll["particles"][-1]),
            "image": image, "rollout": roll}


def train(task, policy=None, iters: int | None = None, lr: float | None = None,
          optimizer=torch.optim.Adam, seed: int = 0, out_dir=None, resume: bool = False,
          callback=None, progress: bool = True, save_every: int = 5,
          closed_loop: bool = False, lr_decay: float = 0.1) -> ControlResult:
    """Train ``policy`` so that the task's rendered last frame matches its target image.

    Args:
        task: a control task (see :func:`gradsim_taichi.control_tasks.make_task`).
        policy: a torch ``nn.Module``; with ``closed_loop = True`` as an attribute it is
            called between frames on the task's observation of the current state, else
            once on the task's time features. None: the task's default policy.
        iters: iterations (> 0); default: the task's.
        lr: learning rate (> 0); default: the task's.
        optimizer: a ``torch.optim`` class or a factory ``optimizer(params, lr=lr)``.
        seed: seeds torch (and the default policy's initialisation).
        out_dir: where to save ``state.pt`` every ``save_every`` iterations.
        resume: continue from ``out_dir/state.pt`` when it exists.
        callback: ``callback(iteration, loss, distance, image)`` after every iteration.
        progress: tqdm bar with loss and distance.
        closed_loop: when ``policy`` is None, build the task's closed-loop default policy.
        lr_decay: the learning rate decays exponentially to ``lr * lr_decay`` over the run
            (1: constant), so that Adam settles instead of circling the goal.
    """
    iters = task.iters if iters is None else iters
    lr = task.lr if lr is None else lr
    if isinstance(iters, bool) or int(iters) != iters or iters < 1:
        raise ValueError(f"iters must be a positive integer; got {iters!r}")
    if not (isinstance(lr, (int, float)) and math.isfinite(lr) and lr > 0):
        raise ValueError(f"lr must be a positive number; got {lr!r}")
    if not (isinstance(lr_decay, (int, float)) and 0 < lr_decay <= 1):
        raise ValueError(f"lr_decay must be in (0, 1]; got {lr_decay!r}")
    if int(save_every) != save_every or save_every < 1:
        raise ValueError(f"save_every must be a positive integer; got {save_every!r}")
    torch.manual_seed(seed)
    task.ensure_built()
    if policy is None:
        policy = task.default_policy(closed_loop=closed_loop, seed=seed)
    params = [p for p in policy.parameters() if p.requires_grad]
    if not params:
        raise ValueError("the policy has no parameters that require grad")
    opt = make_optimizer(optimizer, params, lr)
    sched = torch.optim.lr_scheduler.ExponentialLR(opt, lr_decay ** (1.0 / iters))

    history: list = []
    start_iter, seconds_before = 0, 0.0
    state_path = Path(out_dir) / "state.pt" if out_dir is not None else None
    if resume and state_path is not None and state_path.exists():
        state = torch.load(state_path, weights_only=False)
        if state.get("task") != task.name:
            raise ValueError(f"{state_path} was saved by task {state.get('task')!r}, "
                             f"not {task.name!r}")
        policy.load_state_dict(state["policy"])
        opt.load_state_dict(state["optimizer"])
        sched.load_state_dict(state["scheduler"])
        history, start_iter = state["history"], state["iteration"]
        seconds_before = state["seconds"]

    t0 = time.perf_counter()
    status = "done"
    bar = tqdm(range(start_iter, iters), desc=f"control {task.name}", disable=not progress,
               initial=start_iter, total=iters)
    for it in bar:
        before = {k: v.detach().clone() for k, v in policy.state_dict().items()}
        opt.zero_grad(set_to_none=True)
        roll = task.rollout(policy)
        finite = bool(torch.isfinite(roll["particles"]).all())
        if finite:  # an explicit-integrator blow-up; the renderer rejects NaN positions
            value, image = task.loss(roll)
            finite = bool(torch.isfinite(value))
        else:
            value = torch.tensor(float("nan"))
        if finite:
            value.backward()
            finite = all(p.grad is None or bool(torch.isfinite(p.grad).all()) for p in params)
        if not finite:
            policy.load_state_dict(before)
            what = "loss" if not torch.isfinite(value) else "gradient"
            status = (f"stopped at iteration {it}: the {what} became NaN/inf; "
                      "kept the last good policy")
            break
        dist = task.distance(roll["particles"][-1])
        history.append({"iter": it, "loss": float(value.detach()), "distance": dist})
        opt.step()
        sched.step()
        bar.set_postfix(loss=f"{float(value.detach()):.3e}", dist=f"{dist:.3f}")
        done = it + 1
        if state_path is not None and (done % save_every == 0 or done == iters):
            _save_state(state_path, task.name, policy, opt, sched, history, done,
                        seconds_before + time.perf_counter() - t0)
        if callback is not None:
            callback(it, float(value.detach()), dist, image.detach())
    bar.close()
    final = evaluate(task, policy)
    result = ControlResult(history=history, final_distance=final["distance"],
                           final_loss=final["loss"], start_distance=task.start_distance,
                           iterations=len(history),
                           seconds=seconds_before + time.perf_counter() - t0, status=status,
                           reached=task.reached(final["distance"]))
    result.final_image = final["image"]
    result.final_rollout = final["rollout"]
    if status != "done":
        raise ControlError(status, result)
    return result


def random_baseline(task, seed: int = 0) -> float:
    """Centre-of-mass distance [m] after a rollout of random actions (the paper's
    random-actuation baseline)."""
    task.ensure_built()
    actions = task.random_actions(np.random.default_rng(seed))
    with torch.no_grad():
        roll = task.rollout_actions(actions)
    return task.distance(roll["particles"][-1])


def _save_state(path: Path, task_name, policy, opt, sched, history, iteration, seconds):
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {"task": task_name, "policy": policy.state_dict(), "optimizer": opt.state_dict(),
             "scheduler": sched.state_dict(), "history": history, "iteration": iteration,
             "seconds": seconds}
    tmp = path.with_suffix(".tmp")
    torch.save(state, tmp)
    tmp.replace(path)  # atomic: an interrupted save never corrupts the last state


def write_report(path, task, result: ControlResult, settings: dict) -> Path:
    """``report.json``: per-iteration loss and distance, final distance, start distance,
    the paper's numbers, settings, seconds, arch/precision."""
    info = runtime.info()
    report = {
        "task": task.name,
        "status": result.status,
        "final_distance": result.final_distance,
        "final_loss": result.final_loss,
        "start_distance": result.start_distance,
        "relative_final_distance": result.final_distance / max(result.start_distance, 1e-12),
        "reached": result.reached,
        "iterations": result.iterations,
        "seconds": result.seconds,
        "loss_history": result.losses,
        "distance_history": result.distances,
        "history": result.history,
        "paper": task.paper,
        "arch": info.get("arch"),
        "precision": info.get("precision"),
        "threads": info.get("threads"),
        "settings": settings,
        "seed": settings.get("seed"),
    }
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2))
    return path


def plot_progress(path, result: ControlResult, title: str = "") -> Path:
    """``progress.png``: loss (log scale) and centre-of-mass distance vs iteration."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    it = [h["iter"] for h in result.history]
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.2))
    axes[0].semilogy(it, [max(h["loss"], 1e-30) for h in result.history], color="tab:blue")
    axes[0].set_xlabel("iteration")
    axes[0].set_title(f"{title} loss (last-frame pixel MSE)")
    axes[1].plot(it, result.distances, color="tab:orange", label="per iteration")
    axes[1].axhline(result.final_distance, color="k", ls="--", lw=1, label="final")
    axes[1].set_xlabel("iteration")
    axes[1].set_ylabel("m")
    axes[1].set_title("centre-of-mass distance to goal")
    axes[1].legend(fontsize=7)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def save_rollout_videos(out_dir, task, rollout: dict, fps: float = 30) -> list[Path]:
    """``rollout.mp4`` and ``rollout.gif``: each frame of the rollout beside the target
    image."""
    from gradsim_taichi.render.video import save_video

    with torch.no_grad():
        frames = task.render({"particles": rollout["particles"].detach()})
    f = frames.cpu().numpy()[..., :3]
    t = np.broadcast_to(task.target_image.cpu().numpy()[..., :3], f.shape)
    sep = np.ones(f.shape[:2] + (2, 3))
    video = np.clip(np.concatenate([f, sep, t], axis=2), 0.0, 1.0)
    out_dir = Path(out_dir)
    return [save_video(video, out_dir / "rollout.mp4", fps=fps),
            save_video(video, out_dir / "rollout.gif", fps=fps)]

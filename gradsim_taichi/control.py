"""Visuomotor control from one target image: train a torch policy through the engine.

``train(task, policy, iters, lr)`` repeats: run the policy (open loop: one rollout of
actions computed from time features; closed loop: frame by frame through
:mod:`gradsim_taichi.frame_stepper`, the policy reading the current state between
frames), render the LAST frame, take the pixel loss against the task's target image
(:func:`gradsim_taichi.objectives.image_loss`), back-propagate through renderer,
simulator and policy, and step any torch optimiser. Per iteration it records the loss
and the centre-of-mass distance to the goal (the paper's metric; it is never used for
the gradient). The iterations, the resume state and the NaN stop are those of
:mod:`gradsim_taichi.run_loop`. The tasks are presets in
:mod:`gradsim_taichi.scenes.control_tasks`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from gradsim_taichi import run_loop
from gradsim_taichi.errors import ControlError, StateError
from gradsim_taichi.reports import plot_history, save_videos, side_by_side
from gradsim_taichi.reports import write_report as _write_report

__all__ = ["train", "evaluate", "random_baseline", "write_report", "plot_progress",
           "save_rollout_videos", "ControlResult", "ControlError"]


@dataclass
class ControlResult:
    """What :func:`train` did.

    Attributes:
        history: per iteration ``{"iter", "loss", "distance"}`` (loss and centre-of-mass
            distance [m] of the policy *before* that iteration's update).
        final_distance: centre-of-mass distance [m] of the trained policy's rollout.
        final_loss: its loss.
        start_distance: distance of the initial configuration to the goal [m].
        iterations, seconds, status (``"done"``, ``"stopped"``, ``"diverged"``; see
        :mod:`gradsim_taichi.run_loop`) and message (why it ended), reached (distance
        below the task's reach fraction of the start distance).
        final_image, final_rollout: the trained policy's last frame and rollout.
    """

    history: list = field(default_factory=list)
    final_distance: float = float("nan")
    final_loss: float = float("nan")
    start_distance: float = float("nan")
    iterations: int = 0
    seconds: float = 0.0
    status: str = "done"
    message: str = "done"
    reached: bool = False
    final_image: torch.Tensor | None = None
    final_rollout: dict | None = None

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
        task: a control task (see :func:`gradsim_taichi.scenes.make_task`).
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
    torch.manual_seed(seed)
    task.ensure_built()
    if policy is None:
        policy = task.default_policy(closed_loop=closed_loop, seed=seed)
    job = _Training(task, policy, optimizer, lr, lr_decay, iters)

    def after_step(it, record):
        if callback is not None:
            callback(it, record["loss"], record["distance"], job.image)

    run = run_loop.run(job, iters, out_dir=out_dir, resume=resume, save_every=save_every,
                       progress=progress, callback=after_step, desc=job.name)
    final = evaluate(task, policy)
    result = ControlResult(history=run.history, final_distance=final["distance"],
                           final_loss=final["loss"], start_distance=task.start_distance,
                           iterations=run.iterations, seconds=run.seconds,
                           status=run.status, message=run.message,
                           reached=task.reached(final["distance"]),
                           final_image=final["image"], final_rollout=final["rollout"])
    if run.stopped:
        raise ControlError(run.message, result)
    return result


class _Training:
    """One training as a job of :func:`gradsim_taichi.run_loop.run`."""

    kept = "policy"

    def __init__(self, task, policy, optimizer, lr, lr_decay, iters):
        self.name = f"control {task.name}"
        self.task, self.policy = task, policy
        self.params = [p for p in policy.parameters() if p.requires_grad]
        if not self.params:
            raise ValueError("the policy has no parameters that require grad")
        self.opt = make_optimizer(optimizer, self.params, lr)
        self.sched = torch.optim.lr_scheduler.ExponentialLR(self.opt,
                                                            lr_decay ** (1.0 / iters))
        self.image = None

    def step(self, it):
        self.opt.zero_grad(set_to_none=True)
        roll = self.task.rollout(self.policy)
        finite = bool(torch.isfinite(roll["particles"]).all())
        value = torch.tensor(float("nan"))
        if finite:  # an explicit-integrator blow-up; the renderer rejects NaN positions
            value, image = self.task.loss(roll)
            finite = bool(torch.isfinite(value))
        if finite:
            value.backward()
            finite = all(p.grad is None or bool(torch.isfinite(p.grad).all())
                         for p in self.params)
        if not finite:
            return "loss" if not torch.isfinite(value) else "gradient"
        self.image = image.detach()
        record = {"iter": it, "loss": float(value.detach()),
                  "distance": self.task.distance(roll["particles"][-1])}
        self.opt.step()
        self.sched.step()
        return record

    def postfix(self, record):
        return {"loss": f"{record['loss']:.3e}", "dist": f"{record['distance']:.3f}"}

    def new_objective(self, it):
        return False

    def converged(self, it, record):
        return None  # Adam on a goal image: every iteration is run

    def divergence_hint(self):
        return ("a learning rate too large (lr), or actions too strong for the substeps "
                "(the explicit integrator blows up)")

    def snapshot(self):
        return {k: v.detach().clone() for k, v in self.policy.state_dict().items()}

    def restore(self, snapshot):
        self.policy.load_state_dict(snapshot)

    def state_dict(self):
        return {"task": self.task.name, "policy": self.policy.state_dict(),
                "optimizer": self.opt.state_dict(), "scheduler": self.sched.state_dict()}

    def load_state_dict(self, state):
        if not isinstance(state, dict) or state.get("task") != self.task.name:
            saved = state.get("task") if isinstance(state, dict) else None
            raise StateError(f"it was saved by task {saved!r}, not {self.task.name!r}")
        run_loop.check_saved_tensors(state["policy"])
        self.policy.load_state_dict(state["policy"])
        self.opt.load_state_dict(state["optimizer"])
        self.sched.load_state_dict(state["scheduler"])


def random_baseline(task, seed: int = 0) -> float:
    """Centre-of-mass distance [m] after a rollout of random actions (the paper's
    random-actuation baseline)."""
    task.ensure_built()
    actions = task.random_actions(np.random.default_rng(seed))
    with torch.no_grad():
        roll = task.rollout_actions(actions)
    return task.distance(roll["particles"][-1])


def write_report(path, task, result: ControlResult, settings: dict):
    """``report.json``: per-iteration loss and distance, final distance, start distance,
    the paper's numbers, settings, seconds, arch/precision."""
    body = {
        "task": task.name,
        "status": result.status,
        "message": result.message,
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
    }
    return _write_report(path, body, settings)


def plot_progress(path, result: ControlResult, title: str = ""):
    """``progress.png``: loss (log scale) and centre-of-mass distance [m] vs iteration."""
    return plot_history(path, result.history, {"distance": result.final_distance},
                        title=title, reference_label="final",
                        loss_label="loss (last-frame pixel MSE)")


def save_rollout_videos(out_dir, task, rollout: dict, fps: float = 30) -> list:
    """``rollout.mp4`` and ``rollout.gif``: each frame of the rollout beside the target
    image."""
    with torch.no_grad():
        frames = task.render({"particles": rollout["particles"].detach()})
    video = side_by_side(frames, task.target_image, labels=["rollout", "goal"])
    return save_videos(out_dir, "rollout", video, fps)


def write_outputs(out_dir, task, result: ControlResult, settings: dict) -> dict:
    """Everything a training leaves in ``out_dir``: ``report.json`` (see
    :func:`write_report`), ``progress.png`` and, when the final rollout is finite,
    ``rollout.mp4`` / ``rollout.gif``. Returns ``{kind: path}``."""
    out = {"report": write_report(Path(out_dir) / "report.json", task, result, settings),
           "plot": plot_progress(Path(out_dir) / "progress.png", result, title=task.name)}
    if result.final_image is not None:
        out["video"], out["gif"] = save_rollout_videos(out_dir, task, result.final_rollout,
                                                       fps=task.fps)
    return out

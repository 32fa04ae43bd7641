"""The one run loop of the package: estimation and control training both run on it.

A *job* (see :class:`Job`) knows how to take one optimisation step and how to save and
restore its own state; :func:`run` does the rest: the iterations with a progress bar,
the NaN/inf stop that keeps the last good state, the resume state ``state.pt`` (written
atomically every few iterations and validated whole before a resumed run touches
anything), timing and the per-iteration callback.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import torch
from tqdm.auto import tqdm

from gradsim_taichi.errors import StateError

STATE_FILE = "state.pt"


class Job(Protocol):
    """What :func:`run` drives.

    ``step(iteration)`` takes one step and returns the iteration's record (a dict with at
    least ``"loss"``, recorded in the history) or, when the loss or the gradient was not
    finite, the string ``"loss"`` or ``"gradient"``; the run loop then restores the
    snapshot taken before the step and stops.
    """

    name: str  # names the job in the progress bar and in saved states
    kept: str  # what a stop keeps, for the message ("estimate", "policy")

    def step(self, iteration: int) -> dict | str: ...

    def snapshot(self) -> Any: ...

    def restore(self, snapshot: Any) -> None: ...

    def state_dict(self) -> dict: ...

    def load_state_dict(self, state: dict) -> None:
        """Restore from :meth:`state_dict`; raise :class:`StateError` (saying what does not
        fit, without the path) before changing anything if it does not fit."""

    def postfix(self, record: dict) -> dict:
        """What the progress bar shows after an iteration."""


@dataclass
class RunRecord:
    """What :func:`run` did: the history (one record per finished iteration), the time
    spent (resumed runs included) and the status: ``"done"`` or why it stopped."""

    history: list = field(default_factory=list)
    seconds: float = 0.0
    status: str = "done"

    @property
    def iterations(self) -> int:
        return len(self.history)

    @property
    def stopped(self) -> bool:
        return self.status != "done"


def run(job: Job, iters: int, out_dir=None, resume: bool = False, save_every: int = 5,
        progress: bool = True, callback=None, desc: str | None = None) -> RunRecord:
    """Run ``job`` for ``iters`` iterations (resumed runs: the ones left).

    Args:
        out_dir: where ``state.pt`` is saved every ``save_every`` iterations and after the
            last one (None: nowhere).
        resume: continue from ``out_dir/state.pt`` when it exists.
        callback: ``callback(iteration, record)`` after every finished iteration.
    """
    if isinstance(iters, bool) or int(iters) != iters or iters < 1:
        raise ValueError(f"iters must be a positive integer; got {iters!r}")
    if isinstance(save_every, bool) or int(save_every) != save_every or save_every < 1:
        raise ValueError(f"save_every must be a positive integer; got {save_every!r}")
    state_path = Path(out_dir) / STATE_FILE if out_dir is not None else None
    record = RunRecord()
    start = 0
    if resume and state_path is not None and state_path.exists():
        start, record.history, record.seconds = load_state(state_path, job, iters)
    seconds_before = record.seconds
    t0 = time.perf_counter()
    bar = tqdm(range(start, iters), desc=desc or job.name, disable=not progress,
               initial=start, total=iters)
    for it in bar:
        before = job.snapshot()
        outcome = job.step(it)
        if isinstance(outcome, str):
            job.restore(before)
            record.status = (f"stopped at iteration {it}: the {outcome} became NaN/inf; "
                             f"kept the last good {job.kept}")
            break
        record.history.append(outcome)
        bar.set_postfix(job.postfix(outcome))
        done = it + 1
        record.seconds = seconds_before + time.perf_counter() - t0
        if state_path is not None and (done % save_every == 0 or done == iters):
            save_state(state_path, job, record.history, done, record.seconds)
        if callback is not None:
            callback(it, outcome)
    bar.close()
    record.seconds = seconds_before + time.perf_counter() - t0
    return record


def save_state(path: Path, job: Job, history: list, iteration: int, seconds: float) -> None:
    """Write the resume state atomically: an interrupted save never corrupts the last one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {"job": job.name, "state": job.state_dict(), "history": history,
             "iteration": iteration, "seconds": seconds}
    tmp = path.with_name(path.name + ".tmp")
    torch.save(state, tmp)
    tmp.replace(path)


def load_state(path: Path, job: Job, iters: int) -> tuple[int, list, float]:
    """Read and check a whole resume state before anything is changed; returns
    ``(iteration, history, seconds)``. Every problem is a :class:`StateError`."""
    try:
        state = torch.load(path, weights_only=False)
    except Exception as e:
        raise StateError(f"cannot resume from {path}: {type(e).__name__}: {e}; "
                         "delete it to start over") from None
    keys = ("job", "state", "history", "iteration", "seconds")
    if not isinstance(state, dict) or any(k not in state for k in keys):
        raise StateError(f"cannot resume from {path}: it is not a resume state of this "
                         "version (keys missing); delete it to start over")
    if state["job"] != job.name:
        raise StateError(f"{path} was saved by {state['job']!r}, not {job.name!r}")
    it, history, seconds = state["iteration"], state["history"], state["seconds"]
    if (isinstance(it, bool) or not isinstance(it, int) or not 0 <= it <= iters
            or not isinstance(history, list) or len(history) != it):
        raise StateError(f"cannot resume from {path}: it holds {it!r} iterations and "
                         f"{len(history) if isinstance(history, list) else 'no'} history "
                         f"records, for a run of {iters}; delete it to start over")
    if not all(isinstance(h, dict) and _finite_number(h.get("loss")) for h in history):
        raise StateError(f"cannot resume from {path}: its history holds a loss that is "
                         "missing or not finite; delete it to start over")
    if not _finite_number(seconds):
        raise StateError(f"cannot resume from {path}: its time is {seconds!r}")
    try:
        job.load_state_dict(state["state"])
    except (StateError, KeyError, TypeError, ValueError, RuntimeError) as e:
        raise StateError(f"cannot resume from {path}: {e}; delete it to start over") from None
    return it, history, float(seconds)


def _finite_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def check_saved_tensors(tensors) -> None:
    """For jobs' ``load_state_dict``: every saved tensor must be a finite tensor."""
    if not isinstance(tensors, dict):
        raise StateError("its saved values are not a dict of tensors")
    for name, t in tensors.items():
        if not isinstance(t, torch.Tensor):
            raise StateError(f"its saved {name!r} is not a tensor")
        if t.is_floating_point() and not bool(torch.isfinite(t).all()):
            raise StateError(f"its saved {name!r} holds NaN or inf")

"""The one run loop of the package: estimation and control training both run on it.

A *job* (see :class:`Job`) knows how to take one optimisation step and how to save and
restore its own state; :func:`run` does the rest: the iterations with a progress bar,
the NaN/inf stop that keeps the last good state, the divergence stop that keeps the
best one, the resume state ``state.pt`` (written atomically every few iterations and
validated whole before a resumed run touches anything), a lock on the output folder,
timing and the per-iteration callback.

A run ends with a status: ``"done"`` (every iteration, or the job's convergence test
passed early: the message says which), ``"stopped"`` (the loss or the gradient became
NaN/inf) or ``"diverged"`` (the loss rose :data:`DIVERGENCE_FACTOR` times above its best
for :data:`DIVERGENCE_PATIENCE` iterations in a row); the CLI exits with 3 for the
last two.
"""

from __future__ import annotations

import math
import os
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import torch
from tqdm.auto import tqdm

from gradsim_taichi import runtime
from gradsim_taichi.errors import OutputLockedError, StateError

try:
    import fcntl
except ImportError:  # Windows: no folder locks
    fcntl = None

STATE_FILE = "state.pt"
LOCK_FILE = ".lock"
# Within one objective (a stage of growing horizons starts a new one) a loss this many
# times above its best, this many iterations in a row, is divergence, not noise.
DIVERGENCE_FACTOR = 1e3
DIVERGENCE_PATIENCE = 3


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

    def new_objective(self, iteration: int) -> bool:
        """Whether the objective changes at ``iteration`` (losses before and after are
        not comparable, so the best loss is tracked anew)."""

    def divergence_hint(self) -> str:
        """The likely causes of a divergence, for the message."""

    def converged(self, iteration: int, record: dict) -> str | None:
        """After a finished iteration: a message when the job's tolerance is met (the run
        then ends early, status ``"done"``), else None."""


@dataclass
class RunRecord:
    """What :func:`run` did: the history (one record per finished iteration), the time
    spent (resumed runs included), the status (``"done"``, ``"stopped"``,
    ``"diverged"``) and a message saying why it ended."""

    history: list = field(default_factory=list)
    seconds: float = 0.0
    status: str = "done"
    message: str = "done"

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
            last one (None: nowhere); the folder is locked for the run (:func:`locked`).
        resume: continue from ``out_dir/state.pt`` when it exists.
        callback: ``callback(iteration, record)`` after every finished iteration.
    """
    if isinstance(iters, bool) or int(iters) != iters or iters < 1:
        raise ValueError(f"iters must be a positive integer; got {iters!r}")
    if isinstance(save_every, bool) or int(save_every) != save_every or save_every < 1:
        raise ValueError(f"save_every must be a positive integer; got {save_every!r}")
    with locked(out_dir), runtime.job_torch_threads():
        return _run(job, iters, out_dir, resume, save_every, progress, callback, desc)


def _run(job, iters, out_dir, resume, save_every, progress, callback, desc) -> RunRecord:
    state_path = Path(out_dir) / STATE_FILE if out_dir is not None else None
    record = RunRecord()
    start, ended = 0, None
    if resume and state_path is not None and state_path.exists():
        start, record.history, record.seconds, ended = load_state(state_path, job, iters)
    seconds_before = record.seconds
    best = _Best()
    t0 = time.perf_counter()
    # (a state saved as the run converged: killed before its outputs, it has no
    # iterations left, like an uninterrupted run)
    bar = tqdm(range(start, start if ended else iters), desc=desc or job.name,
               disable=not progress, initial=start, total=iters)
    if ended:
        record.message = ended
    for it in bar:
        if job.new_objective(it):
            best = _Best()
        before = job.snapshot()
        outcome = job.step(it)
        if isinstance(outcome, str):
            job.restore(before)
            record.status = "stopped"
            record.message = (f"stopped at iteration {it}: the {outcome} became NaN/inf; "
                              f"kept the last good {job.kept}")
            break
        record.history.append(outcome)
        if best.diverged(outcome["loss"], before, it):
            job.restore(best.snapshot)
            record.status = "diverged"
            record.message = (
                f"diverged at iteration {it}: the loss rose from its best {best.loss:.3g} "
                f"(iteration {best.iteration}) to {outcome['loss']:.3g}; kept the best "
                f"{job.kept}, from before iteration {best.iteration}. Likely causes: "
                f"{job.divergence_hint()}")
            break
        bar.set_postfix(job.postfix(outcome))
        done = it + 1
        record.seconds = seconds_before + time.perf_counter() - t0
        converged = job.converged(it, outcome)
        if state_path is not None and (done % save_every == 0 or done == iters or converged):
            save_state(state_path, job, record.history, done, record.seconds, converged)
        if callback is not None:
            callback(it, outcome)
        if converged:
            record.message = converged
            break
    bar.close()
    record.seconds = seconds_before + time.perf_counter() - t0
    return record


class _Best:
    """The best loss of the current objective, the state it was evaluated at, and how
    many iterations in a row the loss has been far above it."""

    def __init__(self):
        self.loss, self.snapshot, self.iteration, self.above = math.inf, None, -1, 0

    def diverged(self, loss: float, snapshot, iteration: int) -> bool:
        """Record the loss evaluated at ``snapshot``; True once it is divergence."""
        if loss < self.loss:
            self.loss, self.snapshot, self.iteration, self.above = loss, snapshot, iteration, 0
            return False
        self.above = self.above + 1 if loss > DIVERGENCE_FACTOR * self.loss else 0
        return self.above >= DIVERGENCE_PATIENCE


_held: dict = {}  # lock path -> open file, for the locks this process holds


@contextmanager
def locked(out_dir):
    """Hold an exclusive lock on ``out_dir/.lock`` while the block runs, so that two runs
    do not write into one folder at once; the second gets :class:`OutputLockedError`
    naming the first's process. The operating system releases the lock when its process
    ends, however it ends (no stale locks). Re-entrant within a process (the CLI holds
    it around a run and the writing of its outputs). ``None``: no folder, no lock."""
    if out_dir is None or fcntl is None:
        yield
        return
    path = (Path(out_dir) / LOCK_FILE).resolve()
    if path in _held:
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    f = open(path, "a+")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        f.seek(0)
        owner = f.read().strip() or "unknown"
        f.close()
        raise OutputLockedError(f"{out_dir} is in use by another run (process {owner}); "
                                "wait for it, or choose another output folder") from None
    f.seek(0)
    f.truncate()
    f.write(str(os.getpid()))
    f.flush()
    _held[path] = f
    try:
        yield
    finally:
        del _held[path]
        f.close()  # releases the lock; the file stays (removing it would race)


def save_state(path: Path, job: Job, history: list, iteration: int, seconds: float,
               ended: str | None = None) -> None:
    """Write the resume state atomically: an interrupted save never corrupts the last one.
    ``ended``: the message of a run that converged here (a resumed run then ends too)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {"job": job.name, "state": job.state_dict(), "history": history,
             "iteration": iteration, "seconds": seconds, "ended": ended}
    tmp = path.with_name(path.name + ".tmp")
    torch.save(state, tmp)
    tmp.replace(path)


def load_state(path: Path, job: Job, iters: int) -> tuple[int, list, float, str | None]:
    """Read and check a whole resume state before anything is changed; returns
    ``(iteration, history, seconds, ended)`` (``ended``: the converged run's message, or
    None). Every problem is a :class:`StateError`."""
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
    ended = state.get("ended")
    if ended is not None and not isinstance(ended, str):
        raise StateError(f"cannot resume from {path}: its end message is {ended!r}")
    try:
        job.load_state_dict(state["state"])
    except (StateError, KeyError, TypeError, ValueError, RuntimeError) as e:
        raise StateError(f"cannot resume from {path}: {e}; delete it to start over") from None
    return it, history, float(seconds), ended


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

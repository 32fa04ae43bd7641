"""The shared run loop on a tiny torch job (no Taichi): iterations, NaN stop, resume
state (atomic, validated before anything changes), and the reports' atomic writes."""

import math

import pytest
import torch

from gradsim_taichi import run_loop
from gradsim_taichi.errors import OutputLockedError, StateError
from gradsim_taichi.reports import atomic_path, write_report


class Quadratic:
    """Gradient descent on (x - 3)^2; ``nan_at`` makes that iteration's loss NaN."""

    kept = "value"

    def __init__(self, nan_at=None, name="quadratic"):
        self.name = name
        self.x = torch.tensor(0.0, dtype=torch.float64, requires_grad=True)
        self.opt = torch.optim.SGD([self.x], lr=0.1)
        self.nan_at = nan_at
        self.stop_below = 0.0

    def step(self, it):
        self.opt.zero_grad()
        loss = (self.x - 3.0) ** 2
        if it == self.nan_at:
            loss = loss * float("nan")
        loss.backward()
        self.opt.step()  # a NaN step poisons x: the loop must restore it
        if not torch.isfinite(loss):
            return "loss"
        return {"iter": it, "loss": float(loss.detach()), "x": float(self.x.detach())}

    def postfix(self, record):
        return {"loss": record["loss"]}

    def new_objective(self, it):
        return False

    def converged(self, it, record):
        return f"converged at {it}" if record["loss"] < self.stop_below else None

    def divergence_hint(self):
        return "the step size"

    def snapshot(self):
        return self.x.detach().clone()

    def restore(self, snapshot):
        with torch.no_grad():
            self.x.copy_(snapshot)

    def state_dict(self):
        return {"x": self.x.detach().clone(), "opt": self.opt.state_dict()}

    def load_state_dict(self, state):
        run_loop.check_saved_tensors({"x": state["x"]})
        self.restore(state["x"])
        self.opt.load_state_dict(state["opt"])


def test_runs_every_iteration_and_records_history():
    job = Quadratic()
    rec = run_loop.run(job, 20, progress=False)
    assert rec.status == "done" and rec.iterations == 20 and not rec.stopped
    losses = [h["loss"] for h in rec.history]
    assert all(b < a for a, b in zip(losses, losses[1:]))
    assert abs(float(job.x.detach()) - 3.0) < 0.1  # 3 (1 - 0.8^20)


def test_nan_stops_and_keeps_the_last_good_state():
    job = Quadratic(nan_at=3)
    rec = run_loop.run(job, 10, progress=False)
    assert rec.iterations == 3 and rec.status == "stopped"
    assert rec.message == ("stopped at iteration 3: the loss became NaN/inf; kept the last "
                           "good value")
    x = float(job.x.detach())
    assert math.isfinite(x) and x == pytest.approx(rec.history[-1]["x"])


def test_resume_equals_an_uninterrupted_run(tmp_path):
    full = run_loop.run(Quadratic(), 7, out_dir=tmp_path / "full", save_every=1,
                        progress=False)

    def interrupt(it, record):
        if it == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_loop.run(Quadratic(), 7, out_dir=tmp_path / "cut", save_every=2,
                     progress=False, callback=interrupt)
    job = Quadratic()
    resumed = run_loop.run(job, 7, out_dir=tmp_path / "cut", resume=True, progress=False)
    assert resumed.history == full.history
    assert not list((tmp_path / "cut").glob("*.tmp"))


@pytest.mark.parametrize("bad, message", [
    ({"something": 1}, "not a resume state of this version"),
    ("a string", "not a resume state of this version"),
    ({"job": "other", "state": {}, "history": [], "iteration": 0, "seconds": 0.0},
     "saved by 'other'"),
    ({"job": "quadratic", "state": {}, "history": [], "iteration": 99, "seconds": 0.0},
     "for a run of 5"),
    ({"job": "quadratic", "state": {}, "history": [{"loss": float("nan")}], "iteration": 1,
      "seconds": 0.0}, "not finite"),
    ({"job": "quadratic", "state": {"x": torch.tensor(float("nan"), dtype=torch.float64)},
      "history": [], "iteration": 0, "seconds": 0.0}, "holds NaN or inf"),
    ({"job": "quadratic", "state": {}, "history": [], "iteration": 0, "seconds": 0.0},
     "'x'"),
    ({"job": "quadratic", "state": {}, "history": [], "iteration": 0, "seconds": 0.0,
      "ended": 3}, "its end message is 3"),
])
def test_a_bad_resume_state_is_a_clear_error_before_anything_changes(tmp_path, bad, message):
    torch.save(bad, tmp_path / "state.pt")
    before = (tmp_path / "state.pt").read_bytes()
    job = Quadratic()
    with pytest.raises(StateError, match=message) as e:
        run_loop.run(job, 5, out_dir=tmp_path, resume=True, progress=False)
    assert "cannot resume from" in str(e.value) or "saved by" in str(e.value)
    assert isinstance(e.value, ValueError)
    assert float(job.x.detach()) == 0.0  # untouched
    assert (tmp_path / "state.pt").read_bytes() == before


def test_run_rejects_bad_settings():
    with pytest.raises(ValueError, match="iters must be a positive integer"):
        run_loop.run(Quadratic(), 0, progress=False)
    with pytest.raises(ValueError, match="save_every must be a positive integer"):
        run_loop.run(Quadratic(), 2, save_every=0, progress=False)


def test_an_interrupted_write_leaves_the_old_file(tmp_path):
    path = write_report(tmp_path / "report.json", {"a": 1}, {"seed": 0})
    good = path.read_text()
    with pytest.raises(RuntimeError):
        with atomic_path(path) as tmp:
            tmp.write_text("{half")
            raise RuntimeError("killed")
    assert path.read_text() == good
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]


def test_divergence_stops_and_keeps_the_best_state():
    """Gradient ascent in disguise: the step overshoots more every time, so the loss grows
    without bound; the loop stops after DIVERGENCE_PATIENCE iterations far above the best
    and restores the state the best loss was evaluated at."""
    job = Quadratic()
    job.opt = torch.optim.SGD([job.x], lr=5.0)  # x -> 3 - 9 (x - 3): |error| x9 per step
    rec = run_loop.run(job, 50, progress=False)
    assert rec.status == "diverged" and "the step size" in rec.message
    # losses 9 * 81^k: above 1e3 x 9 from k = 2 on, then PATIENCE iterations in a row
    assert rec.iterations == 2 + run_loop.DIVERGENCE_PATIENCE
    assert float(job.x.detach()) == 0.0  # the start, where the best loss (9) was evaluated
    assert "kept the best value, from before iteration 0" in rec.message


def test_a_new_objective_resets_the_best_loss():
    class Staged(Quadratic):
        def step(self, it):  # the loss jumps 1e6x at iteration 5 (more frames, say)
            record = super().step(it)
            record["loss"] *= 1e6 if it >= 5 else 1.0
            return record

        def new_objective(self, it):
            return it == 5

    assert run_loop.run(Staged(), 12, progress=False).status == "done"


def test_one_run_per_output_folder(tmp_path):
    import subprocess
    import sys

    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom gradsim_taichi.run_loop import locked\n"
         "with locked(sys.argv[1]):\n    print('held', flush=True)\n    time.sleep(60)",
         str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(OutputLockedError, match=f"in use by another run .process {holder.pid}"):
            run_loop.run(Quadratic(), 2, out_dir=tmp_path, progress=False)
    finally:
        holder.kill()
        holder.wait()
    # the lock died with its process: the folder is free again, and re-entrant here
    with run_loop.locked(tmp_path):
        assert run_loop.run(Quadratic(), 2, out_dir=tmp_path, progress=False).status == "done"


def test_a_job_that_converges_ends_early_as_done_and_saves_its_state(tmp_path):
    job = Quadratic()
    job.stop_below = 1e-3
    rec = run_loop.run(job, 100, out_dir=tmp_path, progress=False)
    # losses 9 * 0.64^k: below 1e-3 from k = 21 on
    assert rec.status == "done" and rec.message == "converged at 21"
    assert rec.iterations == 22
    assert torch.load(tmp_path / "state.pt", weights_only=False)["iteration"] == 22
    # killed after that save, before its outputs: resumed, it has nothing left to do
    # (it used to run one more iteration, which an uninterrupted run never ran)
    again = Quadratic()
    again.stop_below = 1e-3
    resumed = run_loop.run(again, 100, out_dir=tmp_path, resume=True, progress=False)
    assert resumed.history == rec.history and resumed.message == "converged at 21"
    assert float(again.x.detach()) == float(job.x.detach())


def test_iterations_run_on_one_torch_thread_on_the_cpu_and_restore_it(monkeypatch):
    from gradsim_taichi import runtime

    class Seen(Quadratic):
        def step(self, it):
            threads.append(torch.get_num_threads())
            return super().step(it)

    before = torch.get_num_threads()
    threads = []
    run_loop.run(Seen(), 2, progress=False)
    assert threads == ([1, 1] if runtime.torch_device().type == "cpu" else [before] * 2)
    assert torch.get_num_threads() == before
    monkeypatch.setenv("GRADSIM_TORCH_THREADS", "3")
    threads = []
    run_loop.run(Seen(), 1, progress=False)
    assert threads == [3] and torch.get_num_threads() == before
    monkeypatch.setenv("GRADSIM_TORCH_THREADS", "two")
    with pytest.raises(ValueError, match="GRADSIM_TORCH_THREADS must be a positive integer"):
        run_loop.run(Seen(), 1, progress=False)

"""One estimation as a job of :func:`gradsim_taichi.run_loop.run` (:class:`Fit`): the
learned tensors (log-values for positive parameters), the optimiser, the objective of
each iteration, the stages' bookkeeping, early stopping and the resume state.
:func:`gradsim_taichi.estimation.estimate` sets one up and reads the result."""

from __future__ import annotations

import copy
import math

import numpy as np
import torch

from gradsim_taichi import run_loop, runtime
from gradsim_taichi.errors import StateError
from gradsim_taichi.nuisance import CAMERA_PARAMS, MANY_VALUED
from gradsim_taichi.objectives import blur_frames, chroma_420, lm_residual, needs_mask
from gradsim_taichi.optimisers import LM_MAX_UNKNOWNS, LevenbergMarquardt, Optimiser
from gradsim_taichi.reports import jsonable
from gradsim_taichi.reuse import LastResult

# estimate(tol=...): iterations in a row within the tolerance before stopping early, or
# before a warm-up stage ends early (an L-BFGS step whose line search failed moves
# nothing once, then restarts its memory and moves again unless it is at the minimum)
CONVERGED_PATIENCE = 2
# Levenberg-Marquardt ends a step after one simulation when the loss is at rounding
# level: below LM_STAGE_TOL of its value at the stage's start, or LM_RUN_TOL of its value
# at the run's start (a later stage that starts where an earlier one left the residuals
# at rounding level would otherwise build Jacobians of noise)
LM_STAGE_TOL = 1e-20
LM_RUN_TOL = 1e-24
# The nuisance calibration on the first frame (Fit.calibrate): Levenberg-Marquardt, at
# most CALIBRATION_ITERS iterations on the frame blurred by each of CALIBRATION_BLURS
# (Gaussian sigmas, pixels) in turn, then as many on the frame as compared, no value
# changing by more than CALIBRATION_STEP a step (radians, metres, ...). Coarse to fine:
# on the sharp frame alone the camera stopped in a local minimum (clips from another
# renderer, the eye 3% off: 3.6-5.2 cm from the truth on the box, cone and L-shape; from
# the blurred start 1.0-2.1 cm, at the lower loss LM also reaches from the true camera).
CALIBRATION_ITERS = 30
CALIBRATION_STEP = 0.1
CALIBRATION_BLURS = (1.0, 0.5)
# the Levenberg-Marquardt of the coarse stage and of "lbfgs+lm": its largest change of
# any value per step (log-values for positive parameters: a factor of 1.65)
POLISH_LM_STEP = 0.5
# closures remembered (Fit.closure): L-BFGS's line search ends at one of the points it
# evaluated, usually the last, sometimes an earlier bracket end
RECENT_CLOSURES = 3


def plain_values(params: dict) -> dict:
    """``{name: value}`` with tensors as JSON-ready lists or numbers."""
    return {n: jsonable(v.detach().cpu().numpy() if isinstance(v, torch.Tensor) else v)
            for n, v in params.items()}


class Fit:
    """One estimation as a job of :func:`gradsim_taichi.run_loop.run`: the learned
    tensors ``u`` (log-values for positive parameters), the optimiser and the objective
    of each iteration."""

    kept = "estimate"

    def __init__(self, scene, target, names, init, optimizer, lr, iters, stages, blur,
                 supervision, loss_fn, tol, nuisance=None, hold=None, chroma="full",
                 coarse_lm=False):
        self.name = f"estimate {scene.name}"
        self.scene, self.target, self.names, self.init = scene, target, names, init
        self.stages, self.blur, self.supervision = stages, blur, supervision
        self.chroma = chroma
        self.loss_fn, self.kind, self.tol = loss_fn, optimizer, tol
        self.with_mask = needs_mask(loss_fn)
        self.stage_log = []  # the estimate at the end of each stage
        self.still = 0  # iterations in a row within the tolerance
        self.last_loss = None  # normalised loss of the previous iteration
        self.specs = {n: scene.params[n] for n in names}
        self.compared = self.view(target, model=False)
        self.u = {n: _to_param(self.specs[n], init[n]) for n in names}
        # camera, background, appearance (gradsim_taichi.nuisance), learned alongside
        self.nuisance = nuisance
        self.learned = {**self.u, **(nuisance.params if nuisance is not None else {})}
        self.lr, self.iters = lr, iters
        # (iteration, names): from that iteration on, those values are held (the
        # pre-contact stage's estimates, estimate(hold_flight=True))
        self.hold_at, self.held = hold if hold is not None else (None, ())
        self.holding = False
        # the nuisance strengths' bounds, kept by Levenberg-Marquardt's own steps
        self.bounds = nuisance.project if nuisance is not None else None
        self.opt = Optimiser(optimizer, list(self.learned.values()), lr, iters,
                             project=self.bounds)
        # The loss is divided by its first value in each stage: L-BFGS's curvature test
        # uses an absolute threshold (1e-10) that tiny pixel losses would never pass.
        self.scale = None
        self.first_scale = None  # the first stage's
        self.iteration = 0
        self.rendered = None  # frames of the step's first evaluation (for callbacks)
        self.evaluated = None  # the values it was at
        self.last_prediction = None  # (frames, values, prediction): see predict()
        # the last rollout: a calibration or LM column that moves only nuisance values
        # simulates nothing again
        self.last_rollout = LastResult()
        self.recent = []  # the last closures' results: see closure()
        # nuisance names the frame-0 calibration found and the warm-up holds (calibrate())
        self.calibrated = ()
        # ... and those it does not calibrate, held at their start (the bounce map: its
        # hundreds of values took a short pre-contact stage's L-BFGS steps from the mass)
        self.uncalibrated = tuple(n for n in MANY_VALUED
                                  if nuisance is not None and n in nuisance.params)
        # coarse stage: projectors onto each basis (orthonormal columns), anchored at the
        # values the stage starts from
        dtype = runtime.torch_dtype()
        self.bases = {n: torch.as_tensor(s.basis, dtype=dtype, device=runtime.torch_device())
                      for n, s in self.specs.items()
                      if s.basis is not None and stages.coarse_iters > 0}
        if self.bases and optimizer == "lm":
            raise ValueError(f"coarse_iters with optimizer 'lm': {', '.join(self.bases)} "
                             "would need a coarse stage; use coarse_iters=0 or another "
                             "optimizer")
        self.coarse_lm = coarse_lm
        self.coarse_opt = self._coarse_optimiser()
        self.final_opt = self._final_optimiser()
        self.active = self.opt  # the optimiser of the current iteration
        self._anchor()

    # ---- the model at the current values ------------------------------------------------
    def values(self) -> dict:
        return {n: _from_param(self.specs[n], self.u[n]) for n in self.names}

    def predict(self, frame_ids):
        """Frames (or tracked positions) at the current values; None where the values
        are out of range or the explicit integrator blew up at them. Without autograd,
        the last prediction is reused when the values and frames are the same (a
        Levenberg-Marquardt step starts where the last one's trial ended; the final
        loss is often the last evaluation's)."""
        if not torch.is_grad_enabled() and self._same_as_last(frame_ids):
            return self.last_prediction[2]
        pred = self._predict(frame_ids)
        self.last_prediction = (frame_ids.clone(), self.snapshot(),
                                None if pred is None else pred.detach())
        return pred

    def _same_as_last(self, frame_ids) -> bool:
        if self.last_prediction is None:
            return False
        ids, values, _ = self.last_prediction
        return (torch.equal(ids, frame_ids)
                and all(torch.equal(values[n], t.detach()) for n, t in self.learned.items()))

    def _predict(self, frame_ids):
        vals = self.values()
        # the rollout stops at the last frame compared (a horizon stage fits early frames)
        last = max(int(frame_ids.max()), 1)
        drawable = self.nuisance is None or self.nuisance.drawable()
        out = (None if self._out_of_domain(vals) or not drawable
               else self.last_rollout.get([torch.tensor(last), *vals.values()],
                                          lambda: self.scene.simulate(vals, last)))
        if out is None or not all(torch.isfinite(x).all() for x in out.values()):
            return None
        if self.supervision == "3d":
            return self.scene.tracked_positions(out)[frame_ids]
        render = self.scene.render if self.nuisance is None else self.nuisance.render
        pred = render(out, frame_ids, coverage=self.with_mask)
        return pred[..., :3] if self.target.shape[-1] == 3 else pred

    def fitted_ids(self) -> torch.Tensor:
        """The frames the estimate answers to: every fitted frame, or the pre-contact
        stage's when ``hold_flight`` ended the run there (the contact frames, which the
        model may not match, then judge nothing)."""
        if self.hold_at is not None and not self.holding and not set(self.free()) & set(
                self.names):
            return self.stages.frame_ids(self.hold_at - 1)
        return self.stages.all_ids

    def raw_residuals(self):
        """The residual of every frame of :meth:`fitted_ids` at the current values,
        unblurred (pixels or positions minus the target); None where the model is
        undefined there."""
        ids = self.fitted_ids()
        with torch.no_grad():
            pred = self.predict(ids)
        return None if pred is None else (pred - self.target[ids]).reshape(-1)

    def _out_of_domain(self, vals) -> bool:
        """A trial step so long that exp() of a log-parameter overflowed or underflowed."""
        return any(not torch.isfinite(v).all() or (self.specs[n].positive and (v <= 0).any())
                   for n, v in vals.items())

    def _note(self, pred) -> None:
        if self.rendered is None:  # the first evaluation of a step is at its start point
            self.rendered = pred

    def objective(self):
        """The loss at the current values; a trial step too far (out of range, or too
        stiff for the substep) gets a large loss with zero gradient, which sends a line
        search back (it is not the NaN stop, which is for the current point)."""
        frame_ids = self.stages.frame_ids(self.iteration)
        pred = self.predict(frame_ids)
        if pred is None:
            penalty = 1e6 / self.scale if self.scale is not None else 1e6
            # (zero gradient through the optimised tensors, which stay finite: exp() of
            # them may not be)
            return sum(t.sum() for t in self.learned.values()) * 0.0 + penalty
        self._note(pred)
        return self.loss_fn(self.view(pred), self.compared[frame_ids])

    def final_loss(self) -> float:
        """The loss (unscaled) at the current values over every fitted frame."""
        ids = self.stages.all_ids
        with torch.no_grad():
            pred = self.predict(ids)
            if pred is None:
                return math.inf
            return float(self.loss_fn(self.view(pred), self.compared[ids]))

    def closure(self):
        """The normalised loss at the current values, its gradient left in the learned
        tensors. A point evaluated by one of the last :data:`RECENT_CLOSURES` calls (same
        frames, values, scale and projection) is not evaluated again: L-BFGS's step
        starts where its line search ended, at a point the search evaluated (the same
        ``x + t d``, bit for bit), so without this every iteration paid one evaluation
        twice."""
        frame_ids = self.stages.frame_ids(self.iteration)
        coarse = self.stages.coarse(self.iteration)
        held = self._held_calibration()
        for entry in self.recent:
            if self._same_point(entry, frame_ids, (coarse, held)):
                for n, t in self.learned.items():
                    t.grad = None if entry["grads"][n] is None else entry["grads"][n].clone()
                self._note(entry["pred"])
                return entry["value"].clone()
        for t in self.learned.values():
            t.grad = None
        value = self.objective()
        if self.scale is None:
            self.scale = 1.0 / max(float(value.detach()), 1e-300)
            self.first_scale = self.first_scale or self.scale
        value = value * self.scale
        value.backward()
        if coarse:
            for n, q in self.bases.items():
                self.u[n].grad = _project(q, self.u[n].grad)
        for n in held:  # (L-BFGS and Adam leave a coordinate with zero gradient alone)
            self.learned[n].grad = torch.zeros_like(self.learned[n])
        last = self.last_prediction
        if last is not None and last[2] is not None and torch.equal(last[0], frame_ids):
            entry = dict(ids=frame_ids.clone(), projection=(coarse, held), scale=self.scale,
                         values=self.snapshot(), value=value.detach().clone(), pred=last[2],
                         grads={n: None if t.grad is None else t.grad.clone()
                                for n, t in self.learned.items()})
            self.recent = ([entry] + self.recent)[:RECENT_CLOSURES]
        return value

    def _same_point(self, entry, frame_ids, projection) -> bool:
        return (entry["projection"] == projection and entry["scale"] == self.scale
                and torch.equal(entry["ids"], frame_ids)
                and all(torch.equal(entry["values"][n], t.detach())
                        for n, t in self.learned.items()))

    def _held_calibration(self) -> tuple:
        """The calibrated camera's names and the uncalibrated values' while the warm-up
        stages run (see :meth:`calibrate`), else none."""
        return () if self.stages.final(self.iteration) else (*self.calibrated,
                                                             *self.uncalibrated)

    def residual(self):
        """Levenberg-Marquardt: residuals scaled like the loss (their mean square is the
        normalised loss: the MSE, or the robust loss through
        :func:`~gradsim_taichi.objectives.robust_residual`)."""
        frame_ids = self.stages.frame_ids(self.iteration)
        with torch.no_grad():
            pred = self.predict(frame_ids)
        if pred is None:
            return None
        self._note(pred)
        r = lm_residual(self.loss_fn)((self.view(pred) - self.compared[frame_ids]).reshape(-1))
        if self.scale is None:
            self.scale = 1.0 / max(float((r * r).mean()), 1e-300)
            self.first_scale = self.first_scale or self.scale
            self._lm_tolerance()
        return r * math.sqrt(self.scale)

    def _lm_tolerance(self, optimisers=None):
        for opt in optimisers or (self.active,):
            if opt is not None and opt.lm is not None:
                opt.lm.tolerance = max(LM_STAGE_TOL,
                                       LM_RUN_TOL * self.scale / self.first_scale)

    def view(self, frames: torch.Tensor, model: bool = True) -> torch.Tensor:
        """Frames as the loss compares them: blurred, and with ``chroma="420"`` in a video
        codec's colour (:func:`~gradsim_taichi.objectives.chroma_420`): the model's
        frames as the encoder stores them, the target's (``model=False``, decoded) as
        they hold it."""
        frames = blur_frames(frames, self.blur)
        return chroma_420(frames, encoded=model) if self.chroma == "420" else frames

    def calibrate(self, iters: int | None = None, cache: dict | None = None
                  ) -> dict | None:
        """Fit the learned nuisance parameters (camera, appearance) alone to the first
        frame, which the physical parameters do not change (the initial state): the
        camera and the light are found from the scene as it stands, before the
        trajectory can trade them against the physics; coarse to fine
        (:data:`CALIBRATION_BLURS`). Returns the stage's record (or
        None when there is nothing to calibrate).

        ``cache``: a dict shared by the restarts of one estimation (same scene, target
        and settings). A restart whose frame 0 is the same as an earlier one's (its
        posed vertices and its residual at the start, bit for bit: the unknowns do not
        touch the initial state) takes that calibration's values instead of running it
        again: the same LM steps would give the same values."""
        iters = CALIBRATION_ITERS if iters is None else iters
        tensors = [] if self.nuisance is None else [
            t for n, t in self.nuisance.params.items() if n not in MANY_VALUED]
        if not tensors or self.supervision == "3d":
            return None
        ids = torch.tensor([0])
        target = self.compared[ids]

        def residual_at(sigma):
            blurred = blur_frames(target, sigma)

            def residual():
                with torch.no_grad():
                    pred = self.predict(ids)
                return None if pred is None else (
                    blur_frames(self.view(pred), sigma) - blurred).reshape(-1)
            return residual

        residual = residual_at(0.0)
        r0 = residual()
        if r0 is None:
            raise ValueError("the model is undefined at the initial guess")
        before = float((r0 * r0).mean())
        key = None
        if cache is not None:
            with torch.no_grad():
                verts = self.scene.posed_vertices(self.scene.simulate(self.values(), 1), ids)
            key = b"".join(torch.as_tensor(v).detach().cpu().numpy().tobytes()
                           for v in (*verts, r0))
            if key in cache:
                values, record = cache[key]
                with torch.no_grad():
                    for name, value in values.items():
                        self.nuisance.params[name].copy_(value)
                self._hold_calibrated_camera()
                return {**copy.deepcopy(record), "params": plain_values(self.values())}
        for sigma in (*CALIBRATION_BLURS, 0.0):
            # Levenberg-Marquardt: camera rotation and translation trade against each
            # other (a valley L-BFGS crawls along); a one-frame Jacobian costs one frame
            # per column
            lm = LevenbergMarquardt(tensors, max_step=CALIBRATION_STEP, tolerance=1e-30,
                                    project=self.bounds)
            stage_residual = residual_at(sigma)
            last, still = math.inf, 0
            for _ in range(iters):
                value = float(lm.step(stage_residual))  # the loss where the step started
                if not math.isfinite(value):
                    break
                # (a step that found no descent leaves the values as they were: try
                # again, more damped, twice)
                still = still + 1 if abs(last - value) <= 1e-12 * before else 0
                if still >= 3:
                    break
                last = value
        self.nuisance.settle_blur()
        r1 = residual()
        after = float((r1 * r1).mean()) if r1 is not None else math.inf
        self._hold_calibrated_camera()
        record = {"stage": "calibration (frame 0, nuisance parameters only)",
                  "first_frame": 0, "last_frame": 0, "end_iteration": 0,
                  "loss_before": before, "loss_after": after,
                  "params": plain_values(self.values()), "nuisance": self.nuisance.report()}
        if key is not None:
            # (copies: the tensors go on to be optimised)
            values = {n: t.clone() for n, t in self.nuisance.values().items()}
            cache[key] = (values, copy.deepcopy(record))
        return record

    def _hold_calibrated_camera(self) -> None:
        if self.kind != "lm":
            # A gradient optimiser on short horizons trades the camera against the
            # physics from a far initial guess (path-traced clips, 3% eye offset, L-BFGS,
            # robust loss: the cone's mass lost, 1.06, the box's 3e-3); the calibrated
            # camera is held until every frame is fitted (6.9e-3, 6.2e-4; closure()
            # zeroes its gradient). LM's residual steps do not wander (our own image:
            # 6e-11), so it keeps it free.
            self.calibrated = tuple(n for n in CAMERA_PARAMS if n in self.nuisance.params)

    # ---- the run loop's interface ---------------------------------------------------------
    def step(self, it):
        self.iteration = it
        if self.stages.starts_new_objective(it):
            self.stage_log.append(dict(self.stages.stage_of(it - 1), end_iteration=it,
                                       params=plain_values(self.values())))
            if it == self.hold_at:
                self._hold()
            for opt in (self.opt, self.coarse_opt, self.final_opt):
                if opt is not None:
                    opt.restart()
            self.scale, self.still, self.last_loss = None, 0, None
        self.rendered = None
        before = self.snapshot()
        self.evaluated = {n: _from_param(self.specs[n], before[n]) for n in self.names}
        self.active = self._optimiser(it)
        value, finite = self.active.step(self.residual if self.active.lm is not None
                                         else self.closure)
        if self.nuisance is not None:
            self.nuisance.project()
        if self.stages.coarse(it):
            with torch.no_grad():  # exact for L-BFGS already; Adam's steps leave the span
                for n, q in self.bases.items():
                    self.u[n].copy_(self.anchor[n] + _project(q, self.u[n] - self.anchor[n]))
        if not finite:
            return "loss" if not torch.isfinite(value).all() else "gradient"
        self._track_change(before, float(value))
        if self.tol > 0 and self.still >= CONVERGED_PATIENCE and not self.stages.final(it):
            self._end_stage(it)
        record = {"iter": it, "loss": float(value / self.scale)}
        for n in self.names:
            record[n] = float(self.evaluated[n].mean())
        return record

    def postfix(self, record):
        return {"loss": f"{record['loss']:.3e}"}

    def new_objective(self, it):
        return self.stages.starts_new_objective(it)

    def _track_change(self, before, normalised_loss):
        moved = max(float(((self.learned[n].detach() - b).abs() / b.abs().clamp(min=1.0)).max())
                    for n, b in before.items())
        # (a stage that starts at the minimum, e.g. the elements freed after the coarse
        # stage found the field, has its loss at rounding level: measured against the
        # run's first loss, its noise is no change)
        run_units = min(1.0, self.first_scale / self.scale) if self.first_scale else 1.0
        same_loss = (self.last_loss is not None
                     and abs(normalised_loss - self.last_loss) * run_units <= self.tol)
        self.still = self.still + 1 if moved <= self.tol and same_loss else 0
        if self.active.lm is not None and self.active.lm.at_tolerance:  # nothing left to fit
            self.still = CONVERGED_PATIENCE
        self.last_loss = normalised_loss

    def _end_stage(self, it):
        """The warm-up stage at ``it`` converged: the next iteration starts the next."""
        boundary, shift = self.stages.end_objective_after(it)
        if self.hold_at is not None and self.hold_at >= boundary:
            self.hold_at -= shift

    def free(self) -> list:
        """The names learned after the values in :attr:`held` are held."""
        return [n for n in self.learned if n not in self.held]

    def moving(self) -> list:
        """The names learned now: :meth:`free` once held, else all."""
        return self.free() if self.holding else list(self.learned)

    def _hold(self):
        self.opt = Optimiser(self.kind, [self.learned[n] for n in self.free()], self.lr,
                             self.iters, project=self.bounds)
        self.holding = True
        self.coarse_opt = self._coarse_optimiser()
        self.final_opt = self._final_optimiser()

    def _optimiser(self, it):
        """The optimiser of iteration ``it``: Levenberg-Marquardt where the coarse stage
        or ``"lbfgs+lm"`` has one and every frame is fitted, else the run's."""
        if self.stages.every_frame(it):
            polish = self.coarse_opt if self.stages.coarse(it) else self.final_opt
            if polish is not None:
                return polish
        return self.opt

    def _final_optimiser(self):
        """``"lbfgs+lm"``'s Levenberg-Marquardt over every free element."""
        if self.kind != "lbfgs+lm":
            return None
        return Optimiser("lm", [self.learned[n] for n in self.moving()], POLISH_LM_STEP,
                         self.iters, project=self.bounds)

    def _coarse_optimiser(self):
        """With ``coarse_lm`` (the MSE), the coarse stage's optimiser: Levenberg-Marquardt
        in the coordinates of the bases (each other free tensor element by element),
        when they are few enough; else None (the run's optimiser, its gradients projected
        onto the bases). A per-particle velocity field's 12 affine coordinates are a
        small, exactly determined least-squares problem: LM solves it to rounding level
        in a few iterations where L-BFGS crawled along the cloth's stiff directions."""
        if not (self.coarse_lm and self.bases):
            return None
        free = self.moving()
        blocks = [self.bases[n] if n in self.bases
                  else torch.eye(self.learned[n].numel(), dtype=runtime.torch_dtype(),
                                 device=runtime.torch_device()) for n in free]
        directions = torch.block_diag(*blocks)
        if directions.shape[1] > LM_MAX_UNKNOWNS:
            return None
        return Optimiser("lm", [self.learned[n] for n in free], POLISH_LM_STEP, self.iters,
                         directions=directions, project=self.bounds)

    def converged(self, it, record):
        if (self.hold_at is not None and it + 1 == self.hold_at
                and not set(self.free()) & set(self.names)):
            return (f"the pre-contact stage determined every unknown "
                    f"({', '.join(self.held)}); with hold_flight the frames with contact "
                    "have nothing left to fit")
        if self.tol > 0 and self.stages.final(it) and self.still >= CONVERGED_PATIENCE:
            return (f"converged at iteration {it}: for {self.still} iterations no value "
                    f"moved by more than {self.tol:g} (relative) and the loss did not "
                    f"change by more than {self.tol:g} of its value at the stage's (or the "
                    "run's, if larger) start")
        return None

    def divergence_hint(self):
        return ("a learning rate too large for this optimiser (lr), or values so stiff "
                "for the substeps that the explicit integrator blows up (more substeps)")

    def snapshot(self):
        return {n: t.detach().clone() for n, t in self.learned.items()}

    def restore(self, snapshot):
        with torch.no_grad():
            for n, t in self.learned.items():
                t.copy_(snapshot[n])

    def state_dict(self):
        return {"names": self.names, "u": self.snapshot(), "optimizer": self.opt.state_dict(),
                "polish": {k: o.state_dict() for k, o in (("coarse", self.coarse_opt),
                                                          ("final", self.final_opt))
                           if o is not None},
                "init": self.init, "loss_scale": self.scale, "stages": self.stage_log,
                "holding": self.holding, "first_scale": self.first_scale,
                "stage_ends": list(self.stages.ends), "coarse_end": self.stages.coarse_end,
                "hold_at": self.hold_at, "still": self.still, "last_loss": self.last_loss,
                "calibrated": list(self.calibrated)}

    def load_state_dict(self, state):
        if not isinstance(state, dict) or state.get("names") != self.names:
            saved = state.get("names") if isinstance(state, dict) else None
            raise StateError(f"it was saved for parameters {saved}, not {self.names}")
        run_loop.check_saved_tensors(state["u"])
        if set(state["u"]) != set(self.learned):
            raise StateError(f"it learned {sorted(state['u'])}, this run learns "
                             f"{sorted(self.learned)} (another --fit?)")
        shapes = {n: tuple(state["u"][n].shape) for n in self.learned}
        if any(shapes[n] != tuple(t.shape) for n, t in self.learned.items()):
            raise StateError(f"its parameter shapes {shapes} do not fit this scene")
        self.restore(state["u"])
        if state.get("holding"):
            self._hold()
        self.opt.load_state_dict(state["optimizer"])
        for k, o in (("coarse", self.coarse_opt), ("final", self.final_opt)):
            if o is not None and k in state.get("polish", {}):
                o.load_state_dict(state["polish"][k])
        self.init, self.scale = state["init"], state["loss_scale"]
        self.stage_log = list(state.get("stages", []))
        self.calibrated = tuple(state.get("calibrated", ()))
        self.first_scale = state.get("first_scale")
        if "stage_ends" in state:  # stages that converged early ended early
            self.stages.ends = list(state["stage_ends"])
            self.stages.coarse_end = state["coarse_end"]
            self.hold_at = state["hold_at"]
            self.still, self.last_loss = state["still"], state["last_loss"]
        if self.scale is not None and self.first_scale is not None:
            self._lm_tolerance((self.opt, self.coarse_opt, self.final_opt))
        self._anchor()

    def _anchor(self):
        self.anchor = {n: self.u[n].detach().clone() for n in self.bases}


def _to_param(spec, value) -> torch.Tensor:
    v = torch.as_tensor(np.asarray(value, dtype=np.float64), dtype=runtime.torch_dtype(),
                        device=runtime.torch_device())
    return (torch.log(v) if spec.positive else v).detach().clone().requires_grad_(True)


def _from_param(spec, u: torch.Tensor) -> torch.Tensor:
    return torch.exp(u) if spec.positive else u


def _project(q, x):
    """``x`` projected onto the span of the orthonormal columns ``q``."""
    return (q @ (q.T @ x.reshape(-1))).reshape(x.shape)

"""Optimisers for estimation: Adam, L-BFGS, Adam followed by L-BFGS, and
Levenberg-Marquardt.

Adam is robust far from the answer but settles only to about its learning rate; L-BFGS
converges superlinearly once the loss is locally quadratic but can stall far away.
``"adam+lbfgs"`` runs Adam for the first part of the budget and polishes with L-BFGS.
``"lm"`` (Levenberg-Marquardt) is for a handful of scalar unknowns fitted by the pixel or
position MSE: it uses the residuals themselves, not just their gradient, and on a loss
whose minimum is zero (the truth is in the model) it converges quadratically, to rounding
level in a few iterations, whatever the conditioning (contact stiffness against damping,
friction stiffness against mu). With growing horizons that matters: each horizon is
solved exactly before frames are added, so the estimate follows the true solution from
horizon to horizon, where L-BFGS carries a residual into the next stage and can end in
a local minimum. Far from the answer, though, its linearised steps (each within
``max_step``) can lead into another basin, where L-BFGS's line search reaches the right
one: ``"lbfgs+lm"`` runs L-BFGS through the warm-up horizons and Levenberg-Marquardt once
every frame is fitted (:class:`~gradsim_taichi.fit.Fit` switches; fem-beam: 28 L-BFGS
iterations, or LM alone failing from one guess in two, against about 15).
"""

import torch

KINDS = ("adam", "lbfgs", "adam+lbfgs", "lm", "lbfgs+lm")
# Levenberg-Marquardt builds a dense Jacobian by finite differences: a simulation per
# unknown and iteration, so it is for few unknowns.
LM_MAX_UNKNOWNS = 32
# A Levenberg-Marquardt step that lowers the loss below this fraction of its value is
# not doubled (see LevenbergMarquardt._extend): the linearised model held, and near the
# answer (quadratic convergence) a doubled trial only costs a simulation
LM_NO_EXTEND = 1e-2


class Optimiser:
    """One interface over the schedules (``"lbfgs+lm"``: its L-BFGS part);
    ``step(closure)`` returns the loss at the start of the step. ``closure()`` zeroes
    gradients, evaluates and back-propagates. ``project``: Levenberg-Marquardt's bounds
    (see :class:`LevenbergMarquardt`; the gradient optimisers' caller projects after
    each step)."""

    def __init__(self, kind: str, tensors: list, lr: float, iters: int,
                 adam_fraction: float = 0.6, directions: torch.Tensor | None = None,
                 project=None):
        if kind not in KINDS:
            raise ValueError(f"optimizer must be one of {KINDS}; got {kind!r}")
        self.kind, self.tensors, self.lr, self.iters = kind, tensors, lr, iters
        # (estimate() divides the loss by its value at the start of each horizon stage:
        # 1e-20 below that, the residuals are rounding noise)
        self.lm = (LevenbergMarquardt(tensors, max_step=lr, tolerance=1e-20,
                                      directions=directions, project=project)
                   if kind == "lm" else None)
        self.adam_iters = {"adam": iters, "lbfgs": 0, "lbfgs+lm": 0}.get(
            kind, int(round(adam_fraction * iters)))
        self.adam = torch.optim.Adam(tensors, lr=lr)
        # decay 100x over Adam's part of the run so it settles
        gamma = 0.01 ** (1.0 / max(self.adam_iters, 1))
        self.sched = torch.optim.lr_scheduler.ExponentialLR(self.adam, gamma)
        self.lbfgs = self._new_lbfgs()
        self.done = 0
        self.best = float("inf")

    def _new_lbfgs(self):
        # One iteration per step, with up to 12 evaluations for its line search (torch's
        # default max_eval = 1.25 max_iter leaves none); absolute stopping tolerances are
        # off (the iteration budget decides).
        lr = self.lr if self.kind in ("lbfgs", "lbfgs+lm") else 1.0
        return torch.optim.LBFGS(self.tensors, lr=lr, max_iter=1, max_eval=12,
                                 tolerance_grad=0.0, tolerance_change=0.0, history_size=20,
                                 line_search_fn="strong_wolfe")

    def restart(self) -> None:
        """Forget L-BFGS's curvature memory and the best loss (the objective changed)."""
        self.lbfgs = self._new_lbfgs()
        self.best = float("inf")
        if self.lm is not None:
            self.lm.restart()

    def step(self, closure):
        """One iteration; returns (loss before the step, whether it was finite). For
        ``"lm"``, ``closure()`` returns the residual vector instead (see
        :class:`LevenbergMarquardt`)."""
        if self.lm is not None:
            value = self.lm.step(closure)
            finite = bool(torch.isfinite(value))
            if finite:
                self.done += 1
            return value, finite
        if self.done < self.adam_iters:
            value = closure().detach()
            finite = _finite(value, self.tensors)
            if finite:
                self.adam.step()
                self.sched.step()
        else:
            value = self.lbfgs.step(closure).detach()
            finite = _finite(value, self.tensors)
            if finite and float(value) >= self.best:
                self.lbfgs = self._new_lbfgs()  # stalled line search: restart its memory
            self.best = min(self.best, float(value))
        if finite:
            self.done += 1
        return value, finite

    def state_dict(self) -> dict:
        return {"adam": self.adam.state_dict(), "sched": self.sched.state_dict(),
                "lbfgs": self.lbfgs.state_dict(), "done": self.done, "best": self.best,
                "lm_damping": None if self.lm is None else self.lm.damping}

    def load_state_dict(self, state: dict) -> None:
        self.adam.load_state_dict(state["adam"])
        self.sched.load_state_dict(state["sched"])
        self.lbfgs.load_state_dict(state["lbfgs"])
        self.done, self.best = state["done"], state["best"]
        if self.lm is not None and state.get("lm_damping") is not None:
            self.lm.damping = state["lm_damping"]


class LevenbergMarquardt:
    """Levenberg-Marquardt on ``loss = mean(r^2)`` over the elements of ``tensors``.

    ``step(residual)``: ``residual()`` evaluates the model at the tensors' current values
    and returns the residual vector ``r`` (predicted minus target), or None where the
    model is undefined or blew up. The Jacobian is built column by column from forward
    finite differences (forward simulations only, one per unknown; a step of
    ``eps ** (1/2)`` of the floating-point type, their optimum): a step needs only an
    approximate Jacobian, and the minimum it converges to is set by the residuals (on
    the rigid-contact preset the estimates agree with central differences' to 1e-13 at
    about 60% of the simulations). Then
    ``(J^T J + lambda D) d = -J^T r`` is solved with ``D`` the diagonal of ``J^T J`` plus a
    small floor (a direction the data do not see yet gets no step, rather than an
    arbitrary one). A step that lowers the loss is taken (and, unless it lowered it below
    :data:`LM_NO_EXTEND` of its value, doubled while that lowers it further) and
    ``lambda`` shrinks; otherwise ``lambda`` grows and the step is solved
    again (at most ``max_trials`` times; then the iteration leaves the values unchanged).
    No element moves more than ``max_step`` per step (on log-values for positive
    parameters: 0.5 is a factor of 1.65). A loss at or below ``tolerance`` ends a step
    at once, after one simulation. ``directions`` (``[elements, k]``, optional): steps
    only within the span of these columns, the unknowns being their ``k`` coefficients
    (a per-particle field's affine part: :class:`~gradsim_taichi.fit.Fit`'s coarse
    stage). ``project`` (optional): called after every change of the values, to put
    them back into their bounds (projected steps, also for the Jacobian's columns: a value
    held at its bound otherwise gives a column of zeros and the step stalls there); a
    value at its bound that the step would take out of it is held and the step solved
    over the others.
    """

    def __init__(self, tensors: list, max_step: float = 0.5, max_trials: int = 8,
                 damping: float = 1e-3, tolerance: float = 0.0,
                 directions: torch.Tensor | None = None, project=None):
        self.tensors, self.max_step, self.max_trials = tensors, max_step, max_trials
        self.project = project
        self.tolerance = tolerance
        self.initial_damping = damping
        self.damping = damping
        self.at_tolerance = False  # whether the last step started or ended at the tolerance
        self.directions = directions
        n = sum(t.numel() for t in tensors) if directions is None else directions.shape[1]
        if n > LM_MAX_UNKNOWNS:
            raise ValueError(f"Levenberg-Marquardt takes at most {LM_MAX_UNKNOWNS} unknowns (a "
                             f"simulation each per iteration); these parameters have {n}")

    def restart(self) -> None:
        self.damping = self.initial_damping

    def _get(self) -> torch.Tensor:
        return torch.cat([t.detach().reshape(-1) for t in self.tensors])

    def _set(self, x: torch.Tensor) -> None:
        with torch.no_grad():
            i = 0
            for t in self.tensors:
                t.copy_(x[i: i + t.numel()].reshape(t.shape))
                i += t.numel()
        if self.project is not None:
            self.project()

    def _eval(self, residual, x):
        self._set(x)
        r = residual()
        if r is None:
            return None
        r = r.detach().reshape(-1).to(torch.float64)
        return r if bool(torch.isfinite(r).all()) else None

    def jacobian(self, residual, x: torch.Tensor, r0: torch.Tensor) -> torch.Tensor:
        """Forward-difference Jacobian ``[len(r), unknowns]`` at ``x`` (see
        :func:`fd_jacobian`); leaves the tensors at ``x``."""
        jac = fd_jacobian(lambda y: self._eval(residual, y), x, r0, self.directions,
                          central=False)
        self._set(x)
        return jac

    def step(self, residual) -> torch.Tensor:
        """One iteration; returns the loss before it (NaN if the model is undefined at
        the current values, which are then left as they were)."""
        x = self._get()
        r = self._eval(residual, x)
        if r is None:
            self._set(x)
            return torch.tensor(float("nan"), dtype=torch.float64)
        loss = (r * r).mean()
        self.at_tolerance = float(loss) <= self.tolerance
        if self.at_tolerance:
            return loss  # residuals at rounding level: a Jacobian of noise
        jac = self.jacobian(residual, x, r)
        a = jac.T @ jac
        g = jac.T @ r
        # (the floor, times the smallest damping, stays a normal number: BLAS flushes
        # subnormals to zero, and a Jacobian of zeros then made the system singular)
        diag = torch.diagonal(a) + 1e-4 * torch.diagonal(a).max() + 1e-280
        for _ in range(self.max_trials):
            d = torch.linalg.solve(a + self.damping * torch.diag(diag), -g)
            if self.directions is not None:
                d = self.directions.to(d) @ d
            else:
                d = self._within_bounds(x, d, a, g, diag)
            d = d * min(1.0, self.max_step / max(float(d.abs().max()), 1e-300))
            trial = self._eval(residual, x + d.to(x.dtype))
            if trial is not None and float((trial * trial).mean()) < float(loss):
                new = float((trial * trial).mean())
                if new > LM_NO_EXTEND * float(loss):
                    new = self._extend(residual, x, d, new)
                else:  # the linear model was right: the step is the solution's
                    self._set(x + d.to(x.dtype))
                # (the values it leaves are at rounding level: no step need follow)
                self.at_tolerance = new <= self.tolerance
                self.damping = max(self.damping / 3.0, 1e-12)
                return loss
            self.damping = min(self.damping * 4.0, 1e12)
        self._set(x)
        return loss

    def _within_bounds(self, x, d, a, g, diag) -> torch.Tensor:
        """The step ``d`` with the values that sit at a bound and would step out of it
        (``project`` puts them back where they are) held, solved again over the others
        (an active set). Projecting the full step instead moves the free values along
        a solution that counted on the held ones moving too: a blur learned next to
        shadow strengths held at 0 crept towards its optimum over 30 steps."""
        if self.project is None:
            return d
        self._set(x + d.to(x.dtype))
        held = (self._get() == x) & (d != 0)
        if not bool(held.any()) or bool(held.all()):
            return d
        free = ~held
        out = torch.zeros_like(d)
        out[free] = torch.linalg.solve(
            a[free][:, free] + self.damping * torch.diag(diag[free]), -g[free])
        return out

    def _extend(self, residual, x, d, best) -> None:
        """After an accepted step, double it while that lowers the loss further (within
        ``max_step``). Far from the answer the linearised model underestimates the step
        (a body whose image does not overlap its target's sees only its own edges), and
        doubling crosses that distance in a few simulations instead of many iterations.
        Leaves the tensors at the best point; returns its loss."""
        while 2.0 * float(d.abs().max()) <= self.max_step * (1 + 1e-12):
            trial = self._eval(residual, x + (2.0 * d).to(x.dtype))
            if trial is None or float((trial * trial).mean()) >= best:
                break
            d, best = 2.0 * d, float((trial * trial).mean())
        self._set(x + d.to(x.dtype))
        return best


def fd_jacobian(evaluate, x: torch.Tensor, r0: torch.Tensor,
                directions: torch.Tensor | None = None, central: bool = True) -> torch.Tensor:
    """Central-difference Jacobian of ``evaluate`` (``x -> residual vector``, or None
    where the model is undefined) at ``x``, whose residual is ``r0``: ``[len(r), k]``,
    the derivatives along the ``k`` columns of ``directions`` (default: every
    coordinate). The step is ``eps ** (1/3)`` of the floating-point type times
    ``max(1, |x|)`` over the direction's support, the optimum for central differences;
    one-sided where one side is undefined, zero where both are. ``central=False``:
    forward differences (one evaluation per column, step ``eps ** (1/2)``; backward
    where the forward side is undefined)."""
    h0 = torch.finfo(x.dtype).eps ** (1.0 / 3.0 if central else 0.5)
    if directions is None:
        directions = torch.eye(len(x), dtype=x.dtype, device=x.device)
    cols = []
    for j in range(directions.shape[1]):
        d = directions[:, j].to(dtype=x.dtype, device=x.device)
        support = d != 0
        h = h0 * max(1.0, float(x[support].abs().max()) if bool(support.any()) else 1.0)
        h = h / max(float(d.abs().max()), 1e-300)  # in units of the column
        plus = evaluate(x + h * d)
        minus = evaluate(x - h * d) if central or plus is None else None
        if plus is not None and minus is not None:
            cols.append((plus - minus) / (2 * h))
        elif plus is not None or minus is not None:
            cols.append((plus - r0) / h if plus is not None else (r0 - minus) / h)
        else:
            cols.append(torch.zeros_like(r0))
    return torch.stack(cols, 1)


def _finite(value, tensors) -> bool:
    if not torch.isfinite(value).all():
        return False
    return all(t.grad is None or bool(torch.isfinite(t.grad).all()) for t in tensors)

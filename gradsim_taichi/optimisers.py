"""Optimisers for estimation: Adam, L-BFGS, and Adam followed by L-BFGS.

Adam is robust far from the answer but settles only to about its learning rate; L-BFGS
converges superlinearly once the loss is locally quadratic but can stall far away.
``"adam+lbfgs"`` runs Adam for the first part of the budget and polishes with L-BFGS.
"""

import torch

KINDS = ("adam", "lbfgs", "adam+lbfgs")


class Optimiser:
    """One interface over the three schedules; ``step(closure)`` returns the loss at the
    start of the step. ``closure()`` zeroes gradients, evaluates and back-propagates."""

    def __init__(self, kind: str, tensors: list, lr: float, iters: int,
                 adam_fraction: float = 0.6):
        if kind not in KINDS:
            raise ValueError(f"optimizer must be one of {KINDS}; got {kind!r}")
        self.kind, self.tensors, self.lr, self.iters = kind, tensors, lr, iters
        self.adam_iters = {"adam": iters, "lbfgs": 0}.get(kind, int(round(adam_fraction * iters)))
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
        lr = self.lr if self.kind == "lbfgs" else 1.0
        return torch.optim.LBFGS(self.tensors, lr=lr, max_iter=1, max_eval=12,
                                 tolerance_grad=0.0, tolerance_change=0.0, history_size=20,
                                 line_search_fn="strong_wolfe")

    def restart(self) -> None:
        """Forget L-BFGS's curvature memory and the best loss (the objective changed)."""
        self.lbfgs = self._new_lbfgs()
        self.best = float("inf")

    def step(self, closure):
        """One iteration; returns (loss before the step, whether it was finite)."""
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
                "lbfgs": self.lbfgs.state_dict(), "done": self.done, "best": self.best}

    def load_state_dict(self, state: dict) -> None:
        self.adam.load_state_dict(state["adam"])
        self.sched.load_state_dict(state["sched"])
        self.lbfgs.load_state_dict(state["lbfgs"])
        self.done, self.best = state["done"], state["best"]


def _finite(value, tensors) -> bool:
    if not torch.isfinite(value).all():
        return False
    return all(t.grad is None or bool(torch.isfinite(t.grad).all()) for t in tensors)

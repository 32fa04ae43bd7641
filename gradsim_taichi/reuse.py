"""Reusing a computation's last result while its inputs stay the same.

A Levenberg-Marquardt step builds its Jacobian one column at a time, each column
moving one value: the stages of the model that value does not reach (the simulation,
for a column of the camera; the object layer, for a column of the shadow's strength)
give what they gave for the last column. Without autograd (LM's evaluations), such a
stage keeps its last result and returns it when called with the same inputs, bit for
bit; with autograd it always runs (its result must carry this call's graph).
"""

from __future__ import annotations

import torch


class LastResult:
    """The last result of one computation and the inputs it was computed from."""

    def __init__(self):
        self.inputs: list[torch.Tensor] | None = None
        self.result = None

    def get(self, inputs, compute):
        """``compute()``, or the last result if no gradient is being recorded and
        ``inputs`` (tensors, in a fixed order) equal the last call's bit for bit."""
        if torch.is_grad_enabled():
            return compute()
        inputs = [torch.as_tensor(t).detach() for t in inputs]
        if self.inputs is not None and len(inputs) == len(self.inputs) and all(
                a.shape == b.shape and a.dtype == b.dtype and torch.equal(a, b)
                for a, b in zip(inputs, self.inputs)):
            return self.result
        result = compute()
        self.inputs, self.result = [t.clone() for t in inputs], result
        return result

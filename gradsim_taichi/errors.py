"""The package's error classes, in one place.

- :class:`RunError`: a run (an estimation, a training) could not go on, e.g. its loss
  became NaN; ``error.result`` holds the run so far with the last good state.
- :class:`StateError`: a saved resume state that cannot be used (damaged, or saved by
  another run); it is a ``ValueError`` like every other bad input.

Bad arguments raise ``ValueError`` / ``TypeError`` / ``KeyError`` naming the argument,
the value and what was expected; the CLI turns each into one line and exit status 2.
"""


class GradsimError(Exception):
    """Base of the errors this package defines."""


class RunError(GradsimError, RuntimeError):
    """A run stopped before its last iteration; ``result`` holds what it found so far."""

    def __init__(self, message, result=None):
        super().__init__(message)
        self.result = result


class EstimationError(RunError):
    """An estimation stopped early (NaN loss or gradient); the last good estimate is in
    ``error.result``."""


class ControlError(RunError):
    """A training stopped early (NaN loss or gradient); ``error.result`` holds the run so
    far with the last good policy."""


class StateError(GradsimError, ValueError):
    """A resume state (``state.pt``) that cannot be used; the message says why."""


class OutputLockedError(GradsimError, RuntimeError):
    """Another running process holds the output folder (its ``.lock``)."""

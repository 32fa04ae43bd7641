"""Input validators shared by the ModelBuilder and its solver mixins.

Each returns the value converted to a numpy array, or raises ValueError naming the
argument, the offending value (and its index) and what was expected. They live in
their own module so that ``builder.py`` and the ``build_*.py`` mixins it is made of can
all import them at the top level (no import cycle).
"""

from __future__ import annotations

import numpy as np


def check_finite(name: str, values) -> np.ndarray:
    """Return ``values`` as float64, raising ValueError if any entry is NaN or inf."""
    arr = np.asarray(values, dtype=np.float64)
    if not np.all(np.isfinite(arr)):
        bad = np.argwhere(~np.isfinite(arr))[:3].tolist()
        raise ValueError(f"{name} contains NaN or inf (at index {bad})")
    return arr


def check_shape(name: str, arr: np.ndarray, shape: tuple) -> np.ndarray:
    """Check ``arr.shape`` against ``shape`` (``-1`` matches any length)."""
    if arr.ndim != len(shape) or any(s != -1 and s != a for s, a in zip(shape, arr.shape)):
        want = "(" + ", ".join("N" if s == -1 else str(s) for s in shape) + ")"
        raise ValueError(f"{name} must have shape {want}; got {arr.shape}")
    return arr


def per_item(name: str, value, count: int, positive=False, nonnegative=False) -> np.ndarray:
    """A scalar or an array of length ``count`` -> float64 array of length ``count``."""
    arr = check_finite(name, value)
    if arr.ndim == 0:
        arr = np.full(count, float(arr))
    elif arr.shape != (count,):
        raise ValueError(f"{name} must be a scalar or have length {count}; got shape {arr.shape}")
    if positive and count and arr.min() <= 0:
        i = int(np.argmin(arr))
        raise ValueError(f"{name} must be > 0; got {arr[i]:.6g} at index {i}")
    if nonnegative and count and arr.min() < 0:
        i = int(np.argmin(arr))
        raise ValueError(f"{name} must be >= 0; got {arr[i]:.6g} at index {i}")
    return arr


def per_row3(name: str, value, count: int) -> np.ndarray:
    """A ``(3,)`` vector (shared by all rows) or ``[count, 3]`` finite values ->
    float64 ``[count, 3]`` (a copy)."""
    arr = check_finite(name, value)
    if arr.shape == (3,):
        return np.tile(arr, (count, 1))
    return check_shape(name, arr, (count, 3)).copy()


def check_indices(name: str, idx, count: int, width: int) -> np.ndarray:
    """Integer index array of shape (M, width) with every entry in [0, count)."""
    arr = np.asarray(idx)
    if arr.size == 0:
        return np.zeros((0, width), dtype=np.int64)
    if not np.issubdtype(arr.dtype, np.integer):
        if not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr)):
            raise ValueError(f"{name} must hold integer indices")
        arr = arr.astype(np.int64)
    arr = check_shape(name, arr.reshape(-1, width) if arr.ndim == 1 else arr, (-1, width))
    bad = np.argwhere((arr < 0) | (arr >= count))
    if len(bad):
        r, c = bad[0]
        raise ValueError(
            f"{name}[{r}] refers to particle {arr[r, c]}, out of range [0, {count})"
        )
    return arr.astype(np.int64)


def check_ids(name: str, ids, count: int, unique: bool = False) -> np.ndarray:
    """A particle index, or a 1-D sequence of them, each in ``[0, count)`` -> int64 ``[M]``.

    ``unique=True`` rejects repeated indices (a setter given one particle twice would
    keep only one of its two values)."""
    arr = np.asarray(ids)
    if arr.dtype == bool:
        # a mask would silently read as the indices 0 and 1
        raise ValueError(f"{name} must be integer particle indices, not a bool mask "
                         f"(use np.nonzero(mask)[0])")
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64)
    if not np.issubdtype(arr.dtype, np.integer):
        if not np.issubdtype(arr.dtype, np.floating) or not np.all(np.isfinite(arr)) \
                or np.any(arr != np.round(arr)):
            raise ValueError(f"{name} must hold integer particle indices; got {ids!r}")
        arr = arr.astype(np.int64)
    if arr.ndim > 1:
        raise ValueError(f"{name} must be an index or a 1-D array of indices; "
                         f"got shape {arr.shape}")
    arr = arr.reshape(-1).astype(np.int64)
    bad = np.nonzero((arr < 0) | (arr >= count))[0]
    if len(bad):
        i = bad[0]
        raise ValueError(f"{name}[{i}] = {arr[i]} is not a particle index in [0, {count})")
    if unique:
        values, counts = np.unique(arr, return_counts=True)
        if np.any(counts > 1):
            raise ValueError(f"{name} lists particle {values[counts > 1][0]} more than once")
    return arr


def check_orientation(orientation) -> np.ndarray:
    """An orientation as the builder takes it everywhere: a quaternion ``(w, x, y, z)``
    (normalised here) or a 3x3 rotation matrix. Returns the unit quaternion
    ``(w, x, y, z)``."""
    arr = np.asarray(orientation, dtype=np.float64)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"orientation contains NaN or inf: {orientation!r}")
    if arr.shape == (3, 3):
        if not np.allclose(arr @ arr.T, np.eye(3), atol=1e-6) or np.linalg.det(arr) < 0:
            raise ValueError("orientation given as a matrix must be a rotation (orthonormal, "
                             "det +1)")
        from scipy.spatial.transform import Rotation

        x, y, z, w = Rotation.from_matrix(arr).as_quat()
        return np.array([w, x, y, z])
    if arr.shape != (4,):
        raise ValueError(f"orientation must be a quaternion (w, x, y, z) or a 3x3 rotation "
                         f"matrix; got shape {arr.shape}")
    norm = np.linalg.norm(arr)
    if norm < 1e-12:
        raise ValueError("orientation quaternion must be nonzero")
    return arr / norm


def rotation_matrix(quaternion) -> np.ndarray:
    """The 3x3 matrix of a unit quaternion ``(w, x, y, z)``."""
    w, x, y, z = quaternion
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ])


def placement_rotation(orientation, rotation, where: str) -> np.ndarray:
    """The rotation matrix of a mesh placement from ``orientation`` (``(w, x, y, z)`` or a
    matrix, as everywhere in the builder) or the deprecated ``rotation`` (a matrix, or a
    quaternion in the old ``(x, y, z, w)`` order)."""
    if rotation is not None:
        import warnings

        if orientation is not None:
            raise ValueError(f"{where}: give orientation= or the deprecated rotation=, "
                             "not both")
        warnings.warn(f"{where}(rotation=...) is deprecated: use orientation=(w, x, y, z) "
                      "(or a 3x3 matrix), the order add_rigid_body takes; rotation= "
                      "quaternions were (x, y, z, w)", DeprecationWarning, stacklevel=3)
        r = check_finite("rotation", rotation)
        if r.shape == (4,):
            n = np.linalg.norm(r)
            if not np.isclose(n, 1.0, atol=1e-6):
                raise ValueError(f"rotation quaternion (x, y, z, w) must have unit norm; "
                                 f"got {n:.6g}")
            orientation = np.array([r[3], r[0], r[1], r[2]])
        else:
            orientation = r
    if orientation is None:
        return np.eye(3)
    return rotation_matrix(check_orientation(orientation))


# ---- explicit stability ----------------------------------------------------------------
# Every force is integrated explicitly. Between two particles of mass m a stiffness k is
# stable up to k dt^2 / m = 2 and a damping c up to c dt / m = 1 (twice that for the ground,
# which acts on one particle). The engine warns at these ratios (3/4 of the stiffness
# limit); the builder's automatic defaults stay at a fraction of them.
STABILITY_LIMITS = {"stiffness": 1.5, "damping": 1.0}
# The step the automatic defaults are stable at: 16 substeps of a 60 fps frame (fewer
# substeps than any preset uses; Simulation's default is 32).
DEFAULT_STEP = 1.0 / (60.0 * 16)


def stable_default(kind: str, reference: float, mass, per_unit: float = 1.0,
                   ground: bool = False) -> float:
    """A stiffness or damping the user left unset: ``reference`` (the usual value), or less
    where the lightest free particle ``min(mass)`` is too light for it: a third of the
    explicit stiffness limit, a quarter of the damping limit, at :data:`DEFAULT_STEP`.
    ``per_unit`` converts the parameter into a force per unit displacement (velocity)
    (e.g. ``1 / L^2`` for a hinge); ``ground``: the term acts on one particle."""
    mass = np.asarray(mass, dtype=np.float64)
    mass = mass[np.isfinite(mass)]
    if mass.size == 0:
        return float(reference)
    share = 1.0 / 3.0 if kind == "stiffness" else 0.25
    limit = STABILITY_LIMITS[kind] * (2.0 if ground else 1.0)
    step = DEFAULT_STEP ** 2 if kind == "stiffness" else DEFAULT_STEP
    return float(min(reference, share * limit * mass.min() / step / per_unit))

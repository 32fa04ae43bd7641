"""Checks of single values in scene files (numbers, vectors, strings, tables, unknowns),
with errors that name the key path and the expected value; used by
:mod:`.scene_file_schema` and :mod:`.scene_file_deformable`."""

from __future__ import annotations

import math

MISSING = object()


class SceneFileError(ValueError):
    """A scene file that cannot be used; the message names the file and the key path."""


def err(path: str, expected: str, got=MISSING) -> SceneFileError:
    tail = "" if got is MISSING else f"; got {got!r}"
    return SceneFileError(f"{path}: expected {expected}{tail}")


def table(data, path: str, allowed, required=()) -> dict:
    if not isinstance(data, dict):
        raise err(path, "a table", data)
    for key in data:
        if key not in allowed:
            raise SceneFileError(f"{join(path, key)}: unknown key; expected one of "
                                 f"{', '.join(allowed)}")
    for key in required:
        if key not in data:
            raise SceneFileError(f"{join(path, key)}: missing; this key is required")
    return data


def join(path: str, key: str) -> str:
    return key if not path else f"{path}.{key}"


def number(value, path, low=None, positive=False, integer=False) -> float | int:
    kind = "an integer" if integer else "a number"
    if isinstance(value, bool) or not isinstance(value, int | float) or (
            integer and not isinstance(value, int)):
        raise err(path, kind, value)
    if not math.isfinite(value):
        raise err(path, f"a finite {kind[3:] if integer else 'number'}", value)
    if positive and not value > 0:
        raise err(path, f"{kind} > 0", value)
    if low is not None and value < low:
        raise err(path, f"{kind} >= {low}", value)
    return value if integer else float(value)


def vector(value, path, n, unit=False) -> list:
    what = f"a list of {n} numbers" + (" in [0, 1]" if unit else "")
    if not isinstance(value, list) or len(value) != n:
        raise err(path, what, value)
    out = [number(v, f"{path}[{k}]") for k, v in enumerate(value)]
    if unit and not all(0 <= v <= 1 for v in out):
        raise err(path, what, value)
    return out


def string(value, path, choices=None) -> str:
    if not isinstance(value, str):
        raise err(path, "a string" if choices is None else f"one of {', '.join(choices)}",
                   value)
    if choices is not None and value not in choices:
        raise err(path, f"one of {', '.join(choices)}", value)
    return value


def value_or_unknown(value, path) -> float | dict:
    """A positive known number, or ``{unknown, guess_low, guess_high[, true]}``."""
    if not isinstance(value, dict):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise err(path, "a number or a table {unknown = true, guess_low = .., "
                             "guess_high = ..}", value)
        return number(value, path, positive=True)
    table(value, path, ("unknown", "guess_low", "guess_high", "true", "doc"),
           ("unknown", "guess_low", "guess_high"))
    if value["unknown"] is not True:
        raise err(join(path, "unknown"), "true (a known value is a plain number)",
                   value["unknown"])
    low = number(value["guess_low"], join(path, "guess_low"), positive=True)
    high = number(value["guess_high"], join(path, "guess_high"), positive=True)
    if not high > low:
        raise err(join(path, "guess_high"), f"a number > guess_low ({low})", high)
    out = dict(unknown=True, guess_low=low, guess_high=high)
    if "true" in value:
        out["true"] = number(value["true"], join(path, "true"), positive=True)
    if "doc" in value:
        out["doc"] = string(value["doc"], join(path, "doc"))
    return out


def dimensions(o: dict, path: str, what: str, keys: dict) -> dict:
    """The dimensions of the primitive ``what`` in the table ``o``, checked: ``keys``
    maps each to its default (None: required); the defaults are filled in."""
    out = {}
    for key, default in keys.items():
        kp = f"{path}.{key}"
        if key not in o and default is None:
            raise SceneFileError(f"{kp}: missing; a {what} needs {', '.join(keys)}")
        value = o.get(key, default)
        if key == "extents":
            out[key] = vector(value, kp, 3)
            if min(out[key]) <= 0:
                raise err(kp, "3 numbers > 0", value)
        elif key == "resolution":
            if not isinstance(value, list) or len(value) != 3:
                raise err(kp, "a list of 3 integers >= 1 (cells along x, y, z)", value)
            out[key] = [number(v, f"{kp}[{k}]", low=1, integer=True)
                        for k, v in enumerate(value)]
        elif key in ("subdivisions", "sections"):
            out[key] = number(value, kp, low=0 if key == "subdivisions" else 3, integer=True)
        else:
            out[key] = number(value, kp, positive=True)
    return out

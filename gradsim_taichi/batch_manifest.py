"""The manifest of ``gradsim-taichi estimate-batch`` (:mod:`gradsim_taichi.batch`): its
items, read and checked.

The manifest is JSON Lines (one object per line; blank lines and lines starting with
``#`` are skipped) or CSV (a header row; an empty cell is an absent key). Keys:

- ``id`` (required): the item's folder name (letters, digits, ``.``, ``_``, ``-``).
- ``scene`` (required): a preset of :data:`gradsim_taichi.scenes.SCENES`, or a scene
  file (a name ending in ``.toml``, relative to the manifest's folder; see
  :mod:`gradsim_taichi.scenes.scene_file`). Without a target video every unknown the
  item estimates needs a truth: the file's ``true`` or the item's ``truth``.
- ``shape``: the body's shape for the presets that have one (``rigid-mass``,
  ``rigid-contact``: ``gradsim_taichi.scenes.rigid.SHAPES``), or a name of a scene
  file's ``[shapes]`` table.
- ``seed``: draws the initial guess (default 0).
- ``target``: a video (MP4, GIF, a folder of PNGs; relative to the manifest's folder);
  absent, empty or ``"synthetic"``: rendered from the scene's ground truth.
- ``truth``: ``{name: value}`` (CSV: ``name=value;name=value``): with a target video the
  known truth to report errors against; without one the ground truth the target is
  rendered from (default: the preset's).
- ``iters``, ``lr``, ``optimizer``, ``frames``, ``resolution``, ``params`` (a list, or
  names separated by commas), ``blur``, ``frame_stride``, ``loss`` (``mse``, ``robust``;
  the mask losses need a mask, which a manifest cannot give; default ``robust`` with a
  target video), ``fit`` (default
  ``"background,appearance,shadow,bounce,blur,response"`` with a target video; names add to
  it, e.g. ``"camera"``, ``-kind`` takes one out, ``"none"`` drops it: ``"none"``,
  ``"none,camera"``), ``render``
  (``antialias`` or ``soft``; default ``antialias`` with a target video),
  ``stage_contact`` (iterations of the
  pre-contact stage), ``hold_flight`` (true/false; CSV ``true``, ``false``, ``1``,
  ``0``), ``restarts`` (default 3 with a target video, else 1): as the ``estimate``
  command's flags (default: the preset's).

Structural errors of the manifest itself (a line that is not JSON, a missing or
duplicate id, an unknown key, a value of the wrong type) stop before anything runs
(:class:`ManifestError`, naming every bad line).
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

_INTS = ("seed", "iters", "frames", "resolution", "frame_stride", "stage_contact", "restarts")
_BOOLS = ("hold_flight",)
_FLOATS = ("lr", "blur")
_STRS = ("id", "scene", "shape", "target", "optimizer", "loss", "fit", "render")
KEYS = ("id", "scene", "shape", "seed", "target", "truth", "iters", "lr", "optimizer",
        "frames", "resolution", "params", "blur", "frame_stride", "loss", "fit", "render",
        "stage_contact", "hold_flight", "restarts")
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\Z")


class ManifestError(ValueError):
    """A manifest that cannot be read; the message names every bad line."""


@dataclass(frozen=True)
class Item:
    """One estimation of a manifest (see the module's docstring for the keys); ``line``
    is where it stands in the manifest; ``scene_file`` is the path of a ``scene`` that
    names a scene file (relative to the manifest's folder), else None."""

    id: str
    scene: str
    line: int = 0
    shape: str | None = None
    seed: int = 0
    target: str | None = None
    truth: dict = field(default_factory=dict)
    iters: int | None = None
    lr: float | None = None
    optimizer: str | None = None
    frames: int | None = None
    resolution: int | None = None
    params: tuple = ()
    blur: float | None = None
    frame_stride: int = 1
    loss: str | None = None
    fit: str | None = None
    render: str | None = None
    stage_contact: int = 0
    hold_flight: bool = False
    restarts: int | None = None
    scene_file: str | None = None


# ---- the manifest ------------------------------------------------------------------------

def read_manifest(path) -> list[Item]:
    """The items of a manifest file: CSV when its name ends in ``.csv``, else JSON Lines.
    A :class:`ManifestError` names every bad line (and stops before anything runs)."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise ManifestError(f"cannot read manifest {path}: {e.strerror or e}") from None
    reader = _csv_records if path.suffix.lower() == ".csv" else _jsonl_records
    items, errors, seen = [], [], {}
    for line, record in reader(text):
        try:
            if isinstance(record, str):
                raise ManifestError(record)
            item = parse_item(record, line, path.parent, from_csv=reader is _csv_records)
        except ManifestError as e:
            errors.append(f"line {line}: {e}")
            continue
        if item.id in seen:
            errors.append(f"line {line}: duplicate id {item.id!r} (first on line "
                          f"{seen[item.id]})")
            continue
        seen[item.id] = line
        items.append(item)
    if errors:
        raise ManifestError(f"manifest {path}: " + "; ".join(errors))
    if not items:
        raise ManifestError(f"manifest {path} lists no items")
    return items


def _jsonl_records(text):
    """``(line number, dict or error message)`` per non-blank, non-comment line."""
    for n, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        try:
            record = json.loads(raw)
        except json.JSONDecodeError as e:
            yield n, f"not valid JSON ({e.msg} at column {e.colno})"
            continue
        yield n, record if isinstance(record, dict) else "expected a JSON object {...}"


def _csv_records(text):
    """``(line number, dict)`` per row (empty cells left out); the header is line 1."""
    reader = csv.DictReader(io.StringIO(text))
    for row in reader:
        if None in row:
            yield reader.line_num, "more cells than the header has columns"
            continue
        record = {k.strip(): v.strip() for k, v in row.items() if k and v and v.strip()}
        if record:
            yield reader.line_num, record


def parse_item(record: dict, line: int = 0, base=".", from_csv: bool = False) -> Item:
    """An :class:`Item` from one manifest record (values as JSON gives them, or strings
    from CSV); a relative ``target`` is taken relative to ``base``. A
    :class:`ManifestError` for a missing id or scene, an unknown key or a bad value. A
    ``scene`` ending in ``.toml`` is a scene file, relative to ``base`` too (read when
    the item runs: a missing or bad file fails that item alone)."""
    unknown = sorted(set(record) - set(KEYS))
    if unknown:
        raise ManifestError(f"unknown key {unknown[0]!r}; keys: {', '.join(KEYS)}")
    for key in ("id", "scene"):
        if record.get(key) in (None, ""):
            raise ManifestError(f"missing {key!r}")
    values = {}
    for key, value in record.items():
        if value is None:
            continue
        if key == "id" and isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        values[key] = _convert(key, value, from_csv)
    if not _ID.match(values["id"]):
        raise ManifestError(f"id {values['id']!r}: use letters, digits, '.', '_' and '-' "
                            "(it names the item's folder)")
    if values["scene"].lower().endswith(".toml"):
        values["scene_file"] = str(Path(base) / values["scene"])
    target = values.get("target")
    if target in ("", "synthetic"):
        values.pop("target")
    elif target is not None:
        values["target"] = str(Path(base) / target)
    return Item(line=line, **values)


def _convert(key: str, value, from_csv: bool):
    """One manifest value, checked (and converted from a CSV string)."""
    if key in _STRS:
        if not isinstance(value, str):
            raise ManifestError(f"{key} must be a string; got {value!r}")
        return value.strip()
    if key in _INTS:
        if from_csv:
            try:
                value = int(value)
            except ValueError:
                raise ManifestError(f"{key} must be an integer; got {value!r}") from None
        if isinstance(value, bool) or not isinstance(value, int) or value < (key != "seed"):
            raise ManifestError(f"{key} must be an integer >= {int(key != 'seed')}; got "
                                f"{value!r}")
        return value
    if key in _BOOLS:
        if from_csv and isinstance(value, str) and value.strip().lower() in (
                "true", "false", "1", "0"):
            return value.strip().lower() in ("true", "1")
        if not isinstance(value, bool):
            raise ManifestError(f"{key} must be true or false; got {value!r}")
        return value
    if key in _FLOATS:
        return _number(key, value, from_csv, low=0, above=key == "lr")
    if key == "params":
        names = value.replace(";", ",").split(",") if isinstance(value, str) else value
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise ManifestError(f"params must be a list of names or a string 'a,b'; got "
                                f"{value!r}")
        return tuple(n.strip() for n in names if n.strip())
    # truth
    if from_csv:
        pairs = [p.partition("=") for p in value.split(";") if p.strip()]
        if not all(sep for _, sep, _ in pairs):
            raise ManifestError(f"truth must be 'name=value;name=value'; got {value!r}")
        value = {n.strip(): _number(f"truth {n.strip()}", v, True) for n, _, v in pairs}
    if not isinstance(value, dict):
        raise ManifestError(f"truth must be an object {{name: value}}; got {value!r}")
    out = {}
    for name, v in value.items():
        arr = np.asarray(v, dtype=object)
        if not all(isinstance(x, (int, float)) and not isinstance(x, bool)
                   and math.isfinite(x) for x in arr.reshape(-1)):
            raise ManifestError(f"truth {name}: expected a finite number or a list of "
                                f"them; got {v!r}")
        out[name] = v
    return out


def _number(key, value, from_csv, low=None, above=False) -> float:
    """A finite number (from a CSV string too), ``>= low`` (``> low`` with ``above``)."""
    if from_csv:
        try:
            value = float(value)
        except ValueError:
            raise ManifestError(f"{key} must be a number; got {value!r}") from None
    ok = not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)
    if ok and low is not None:
        ok = value > low if above else value >= low
    if not ok:
        bound = "" if low is None else f" {'>' if above else '>='} {low:g}"
        raise ManifestError(f"{key} must be a finite number{bound}; got {value!r}")
    return float(value)

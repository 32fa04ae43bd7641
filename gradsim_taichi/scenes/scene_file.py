"""Scene files: a user's own clip described in TOML, estimated without writing Python.

:func:`load_scene_file` reads a file into a :class:`FileScene` (a :class:`Scene` like the
presets); :func:`scene_from_toml` does the same from text; :func:`scene_to_toml` writes
a scene file back (a loaded one, or a rigid preset: ``gradsim-taichi scene show``).
Everything is checked when the file is read: an error names the key path and what was
expected, e.g. ``objects[0].shape: expected one of box, sphere, cylinder, cone, lshape
(or give mesh = "file.obj"); got 'cube'``; unknown keys (typos) are errors too.

Schema (lengths in metres, times in seconds, colours RGB in [0, 1]; keys marked
optional take the value shown)::

    [scene]
    name = "my-clip"          # optional, "scene-file"
    fps = 60.0                # frames per second of the video
    frames = 40               # simulated frames (the video has frames, or frames + 1)
    substeps = 32             # optional, 32: physics steps per frame
    width = 64                # image size in pixels
    height = 64
    description = ""          # optional

    [camera]                  # a look-at pose ...
    eye = [0.0, 0.8, 1.8]
    target = [0.0, 0.2, 0.0]
    up = [0.0, 1.0, 0.0]      # optional
    # ... or world_to_camera = [[...4], [...4], [...4], [...4]] (OpenCV: x right,
    # y down, z forward), instead of eye/target/up
    fov_y_deg = 40.0          # vertical field of view, or all of fx, fy, cx, cy (pixels
                              # of this width x height; scaled if the size is overridden)
    near = 0.1                # optional: depth range drawn
    far = 10.0                # optional

    [stage]                   # optional table
    ground = true             # the ground plane y = height: contact and drawn
    height = 0.0
    gravity = [0.0, -9.8, 0.0]
    background = [1.0, 1.0, 1.0]           # where no surface is drawn
    ground_color = [0.55, 0.6, 0.55]
    wall_color = [0.85, 0.85, 0.88]        # the backdrop wall at z = extent[2]
    extent = [-3.0, 3.0, -3.0, 1.0]        # ground x0, x1, z0, z1 (keep z1 before the camera)
    wall_height = 3.0

    [contact]                 # optional table; ground contact of every body
    ke = 5000.0               # normal stiffness [N/m]
    kd = 100.0                # normal damping [N s/m]
    kf = 100.0                # friction stiffness [N s/m]
    mu = 0.4                  # Coulomb friction
    # each a number or an unknown: { unknown = true, guess_low = .., guess_high = ..,
    # true = .. }  (true is optional: the value a synthetic target is rendered with)

    [[objects]]               # one table per body, in order (index 0, 1, ...)
    kind = "rigid"            # only rigid bodies so far
    shape = "box"             # box: extents = [x, y, z]; sphere: radius, subdivisions (2);
                              # cylinder, cone: radius, height, sections (32; axis on the
                              # mesh z, the cone's base at z = 0); lshape: size, thickness
    extents = [0.4, 0.3, 0.3]
    # or mesh = "body.obj"    # a closed mesh trimesh reads, relative to this file;
                              # scale = 1.0 multiplies its coordinates
    position = [-0.4, 0.4, 0.0]            # of the mesh origin
    orientation = [1.0, 0.0, 0.0, 0.0]     # optional quaternion w, x, y, z
    velocity = [0.0, 0.0, 0.0]             # optional, of the centre of mass [m/s]
    angular_velocity = [0.0, 0.0, 0.0]     # optional, world frame [rad/s]
    color = [0.75, 0.3, 0.2]               # optional
    shading = "normals"       # optional: "normals" (face colours vary around color with
                              # the face normal, so rotation shows) or "flat"
    mass = 4.0                # [kg], or an unknown table as in [contact]
    # or density = 1000.0     # [kg/m^3], known

    [[pushes]]                # optional, known pushes
    object = 0                # index into objects
    kind = "impulse"          # impulse [N s] spread over [start, start + duration) s,
    vector = [3.0, 1.0, 0.0]  # or "force" [N] held over frames = [first, stop) (stop
    point = [0.0, 0.1, 0.1]   # excluded; optional: every frame). point: mesh frame,
    start = 0.0               # optional (none: at the centre of mass); frame =
    duration = 0.016666666666666666  # "world" (optional) or "body"

    [estimate]                # optional: the optimiser's defaults for this scene
    optimizer = "lbfgs"       # adam, lbfgs, adam+lbfgs or lm
    iters = 12
    lr = 1.0
    blur = 0.0                # pixels
    warmup = [0, 0]           # (iterations, last frame) fitted first, or a list of them

Unknowns become the scene's parameters: ``mass`` (one object) or ``mass_<index>``
(several), and ``contact_ke``, ``contact_kd``, ``contact_kf``, ``contact_mu``.
An unknown without ``true`` is built at the geometric mean of its guesses; estimating
it needs a target video.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field, fields
from pathlib import Path

import numpy as np
import torch

from gradsim_taichi import runtime
from gradsim_taichi.render import Camera, Mesh
from gradsim_taichi.scenes.base import ParamSpec, RenderPart, Scene, ground_part

if sys.version_info >= (3, 11):
    import tomllib
else:  # the same parser, from PyPI (a dependency on Python 3.10)
    import tomli as tomllib

PRIMITIVES = {  # shape -> {key: default (None: required)}
    "box": {"extents": None},
    "sphere": {"radius": None, "subdivisions": 2},
    "cylinder": {"radius": None, "height": None, "sections": 32},
    "cone": {"radius": None, "height": None, "sections": 32},
    "lshape": {"size": 0.4, "thickness": 0.2},
}
CONTACT_DEFAULTS = {"ke": 5e3, "kd": 100.0, "kf": 100.0, "mu": 0.4}
CONTACT_DOCS = {"ke": "normal stiffness [N/m]", "kd": "normal damping [N s/m]",
                "kf": "friction stiffness [N s/m]", "mu": "Coulomb friction"}
STAGE_DEFAULTS = dict(ground=True, height=0.0, gravity=[0.0, -9.8, 0.0],
                      background=[1.0, 1.0, 1.0], ground_color=[0.55, 0.6, 0.55],
                      wall_color=[0.85, 0.85, 0.88], extent=[-3.0, 3.0, -3.0, 1.0],
                      wall_height=3.0)
# optimisers.KINDS (a layer above the presets; tests/test_scene_file.py checks they agree)
OPTIMIZERS = ("adam", "lbfgs", "adam+lbfgs", "lm")
ESTIMATE_DEFAULTS = dict(optimizer="lbfgs", iters=12, lr=1.0, blur=0.0, warmup=[0, 0])
_MISSING = object()


class SceneFileError(ValueError):
    """A scene file that cannot be used; the message names the file and the key path."""


# ---- reading ---------------------------------------------------------------------------
def load_scene_file(path, **overrides) -> FileScene:
    """The scene a TOML scene file describes (see the module docstring for the schema).

    Args:
        path: the file; mesh paths in it are relative to its folder.
        overrides: Scene fields to change after reading (``frames``, ``width``, ...).

    Raises:
        FileNotFoundError: no such file, or a mesh file it names is missing.
        SceneFileError (a ValueError): bad TOML or a value the schema does not allow.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"scene file not found: {path}")
    return scene_from_toml(path.read_text(encoding="utf-8"), base_dir=path.parent,
                           source=str(path), **overrides)


def scene_from_toml(text: str, base_dir=".", source: str = "<text>", **overrides) -> FileScene:
    """Like :func:`load_scene_file`, from the file's text; mesh paths are relative to
    ``base_dir``; ``source`` names the text in error messages."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise SceneFileError(f"scene file {source}: not valid TOML: {e}") from None
    try:
        spec = _validate(data, Path(base_dir))
    except SceneFileError as e:
        raise SceneFileError(f"scene file {source}: {e}") from None
    except FileNotFoundError as e:
        raise FileNotFoundError(f"scene file {source}: {e}") from None
    scene = FileScene.from_spec(spec, source=source)
    names = {f.name for f in fields(scene)}
    for key, value in overrides.items():
        if key not in names:
            raise TypeError(f"load_scene_file: {key!r} is not a Scene field")
        setattr(scene, key, value)
    return scene


def _err(path: str, expected: str, got=_MISSING) -> SceneFileError:
    tail = "" if got is _MISSING else f"; got {got!r}"
    return SceneFileError(f"{path}: expected {expected}{tail}")


def _table(data, path: str, allowed, required=()) -> dict:
    if not isinstance(data, dict):
        raise _err(path, "a table", data)
    for key in data:
        if key not in allowed:
            raise SceneFileError(f"{_join(path, key)}: unknown key; expected one of "
                                 f"{', '.join(allowed)}")
    for key in required:
        if key not in data:
            raise SceneFileError(f"{_join(path, key)}: missing; this key is required")
    return data


def _join(path: str, key: str) -> str:
    return key if not path else f"{path}.{key}"


def _number(value, path, low=None, positive=False, integer=False) -> float | int:
    kind = "an integer" if integer else "a number"
    if isinstance(value, bool) or not isinstance(value, int | float) or (
            integer and not isinstance(value, int)):
        raise _err(path, kind, value)
    if not math.isfinite(value):
        raise _err(path, f"a finite {kind[3:] if integer else 'number'}", value)
    if positive and not value > 0:
        raise _err(path, f"{kind} > 0", value)
    if low is not None and value < low:
        raise _err(path, f"{kind} >= {low}", value)
    return value if integer else float(value)


def _vector(value, path, n, unit=False) -> list:
    what = f"a list of {n} numbers" + (" in [0, 1]" if unit else "")
    if not isinstance(value, list) or len(value) != n:
        raise _err(path, what, value)
    out = [_number(v, f"{path}[{k}]") for k, v in enumerate(value)]
    if unit and not all(0 <= v <= 1 for v in out):
        raise _err(path, what, value)
    return out


def _string(value, path, choices=None) -> str:
    if not isinstance(value, str):
        raise _err(path, "a string" if choices is None else f"one of {', '.join(choices)}",
                   value)
    if choices is not None and value not in choices:
        raise _err(path, f"one of {', '.join(choices)}", value)
    return value


def _name(value) -> str:
    """A scene name: it names the default output folder, so letters, digits, -, _, ."""
    name = _string(value, "scene.name")
    if not name or not all(c.isalnum() or c in "-_." for c in name) or name[0] == ".":
        raise _err("scene.name", "a name of letters, digits, '-', '_' and '.' (it names "
                                 "the default output folder)", value)
    return name


def _value_or_unknown(value, path) -> float | dict:
    """A positive known number, or ``{unknown, guess_low, guess_high[, true]}``."""
    if not isinstance(value, dict):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _err(path, "a number or a table {unknown = true, guess_low = .., "
                             "guess_high = ..}", value)
        return _number(value, path, positive=True)
    _table(value, path, ("unknown", "guess_low", "guess_high", "true"),
           ("unknown", "guess_low", "guess_high"))
    if value["unknown"] is not True:
        raise _err(_join(path, "unknown"), "true (a known value is a plain number)",
                   value["unknown"])
    low = _number(value["guess_low"], _join(path, "guess_low"), positive=True)
    high = _number(value["guess_high"], _join(path, "guess_high"), positive=True)
    if not high > low:
        raise _err(_join(path, "guess_high"), f"a number > guess_low ({low})", high)
    out = dict(unknown=True, guess_low=low, guess_high=high)
    if "true" in value:
        out["true"] = _number(value["true"], _join(path, "true"), positive=True)
    return out


def _validate(data: dict, base_dir: Path) -> dict:
    """The checked, completed spec (defaults filled in) of a parsed scene file."""
    _table(data, "", ("scene", "camera", "stage", "contact", "objects", "pushes", "estimate"),
           ("scene", "camera", "objects"))
    s = _table(data["scene"], "scene",
               ("name", "fps", "frames", "substeps", "width", "height", "description"),
               ("fps", "frames", "width", "height"))
    scene = dict(
        name=_name(s.get("name", "scene-file")),
        fps=_number(s["fps"], "scene.fps", positive=True),
        frames=_number(s["frames"], "scene.frames", low=1, integer=True),
        substeps=_number(s.get("substeps", 32), "scene.substeps", low=1, integer=True),
        width=_number(s["width"], "scene.width", low=1, integer=True),
        height=_number(s["height"], "scene.height", low=1, integer=True),
        description=_string(s.get("description", ""), "scene.description"))
    return dict(scene=scene, camera=_camera(data["camera"]),
                stage=_stage(data.get("stage", {})), contact=_contact(data.get("contact", {})),
                objects=_objects(data["objects"], base_dir),
                pushes=_pushes(data.get("pushes", []), len(data["objects"])),
                estimate=_estimate(data.get("estimate", {})))


def _camera(c) -> dict:
    keys = ("eye", "target", "up", "world_to_camera", "fov_y_deg", "fx", "fy", "cx", "cy",
            "near", "far")
    _table(c, "camera", keys)
    near = _number(c.get("near", 0.1), "camera.near", positive=True)
    far = _number(c.get("far", 10.0), "camera.far", positive=True)
    if not far > near:
        raise _err("camera.far", f"a number > camera.near ({near})", far)
    out = {}
    if "world_to_camera" in c:
        for key in ("eye", "target", "up"):
            if key in c:
                raise SceneFileError(f"camera.{key}: give either eye/target/up or "
                                     "world_to_camera, not both")
        m = c["world_to_camera"]
        if not isinstance(m, list) or len(m) != 4:
            raise _err("camera.world_to_camera", "a 4x4 matrix (4 rows of 4 numbers)", m)
        out["world_to_camera"] = [_vector(row, f"camera.world_to_camera[{k}]", 4)
                                  for k, row in enumerate(m)]
    else:
        for key in ("eye", "target"):
            if key not in c:
                raise SceneFileError(f"camera.{key}: missing; give eye and target (or "
                                     "world_to_camera)")
        out["eye"] = _vector(c["eye"], "camera.eye", 3)
        out["target"] = _vector(c["target"], "camera.target", 3)
        out["up"] = _vector(c.get("up", [0.0, 1.0, 0.0]), "camera.up", 3)
    pinhole = [k for k in ("fx", "fy", "cx", "cy") if k in c]
    if pinhole:
        if "fov_y_deg" in c:
            raise SceneFileError("camera.fov_y_deg: give either fov_y_deg or fx, fy, cx, "
                                 "cy, not both")
        missing = [k for k in ("fx", "fy", "cx", "cy") if k not in c]
        if missing:
            raise SceneFileError(f"camera.{missing[0]}: missing; fx, fy, cx, cy go together")
        for k in ("fx", "fy"):
            out[k] = _number(c[k], f"camera.{k}", positive=True)
        for k in ("cx", "cy"):
            out[k] = _number(c[k], f"camera.{k}")
    else:
        fov = _number(c.get("fov_y_deg", 40.0), "camera.fov_y_deg", positive=True)
        if not fov < 180:
            raise _err("camera.fov_y_deg", "a number in (0, 180) degrees", fov)
        out["fov_y_deg"] = fov
        if "world_to_camera" in out:
            raise SceneFileError("camera.fx: missing; world_to_camera needs fx, fy, cx, cy")
    return dict(out, near=near, far=far)


def _stage(st) -> dict:
    _table(st, "stage", tuple(STAGE_DEFAULTS))
    out = dict(STAGE_DEFAULTS)
    out.update(st)
    if not isinstance(out["ground"], bool):
        raise _err("stage.ground", "true or false", out["ground"])
    out["height"] = _number(out["height"], "stage.height")
    out["wall_height"] = _number(out["wall_height"], "stage.wall_height", positive=True)
    out["gravity"] = _vector(out["gravity"], "stage.gravity", 3)
    for key in ("background", "ground_color", "wall_color"):
        out[key] = _vector(out[key], f"stage.{key}", 3, unit=True)
    out["extent"] = _vector(out["extent"], "stage.extent", 4)
    x0, x1, z0, z1 = out["extent"]
    if not (x1 > x0 and z1 > z0):
        raise _err("stage.extent", "[x0, x1, z0, z1] with x1 > x0 and z1 > z0", st["extent"])
    return out


def _contact(c) -> dict:
    _table(c, "contact", tuple(CONTACT_DEFAULTS))
    return {k: _value_or_unknown(c.get(k, d), f"contact.{k}")
            for k, d in CONTACT_DEFAULTS.items()}


def _objects(objs, base_dir: Path) -> list:
    if not isinstance(objs, list) or not objs:
        raise _err("objects", "one or more [[objects]] tables", objs)
    out = []
    for i, o in enumerate(objs):
        path = f"objects[{i}]"
        if not isinstance(o, dict):
            raise _err(path, "a table", o)
        if "kind" not in o:
            raise SceneFileError(f"{path}.kind: missing; expected \"rigid\"")
        kind = o["kind"]
        if kind in ("soft", "cloth"):
            raise SceneFileError(f"{path}.kind: {kind!r} objects are not yet supported in "
                                 "scene files (only \"rigid\")")
        _string(kind, f"{path}.kind", ("rigid",))
        shape = o.get("shape")
        if ("shape" in o) == ("mesh" in o):
            raise _err(f"{path}.shape", f"one of {', '.join(PRIMITIVES)} or a mesh = "
                       "\"file.obj\" (exactly one of shape and mesh)")
        if "shape" in o and (not isinstance(shape, str) or shape not in PRIMITIVES):
            raise _err(f"{path}.shape", f"one of {', '.join(PRIMITIVES)} (or give "
                       "mesh = \"file.obj\")", shape)
        prim_keys = PRIMITIVES.get(shape, {})
        keys = ("kind", *(("shape", *prim_keys) if "shape" in o else ("mesh", "scale")),
                "position", "orientation", "velocity", "angular_velocity", "color",
                "shading", "mass", "density")
        _table(o, path, keys)
        obj = dict(kind="rigid")
        if "shape" in o:
            obj["shape"] = shape
            for key, default in prim_keys.items():
                kp = f"{path}.{key}"
                if key not in o and default is None:
                    raise SceneFileError(f"{kp}: missing; a {shape} needs "
                                         f"{', '.join(prim_keys)}")
                value = o.get(key, default)
                if key == "extents":
                    obj[key] = _vector(value, kp, 3)
                    if min(obj[key]) <= 0:
                        raise _err(kp, "3 numbers > 0", value)
                elif key in ("subdivisions", "sections"):
                    obj[key] = _number(value, kp, low=0 if key == "subdivisions" else 3,
                                       integer=True)
                else:
                    obj[key] = _number(value, kp, positive=True)
        else:
            mesh = _string(o["mesh"], f"{path}.mesh")
            file = Path(mesh) if Path(mesh).is_absolute() else base_dir / mesh
            if not file.is_file():
                raise FileNotFoundError(f"{path}.mesh: mesh file not found: {file}")
            obj["mesh"] = str(file.resolve())
            _check_mesh(file, f"{path}.mesh")
            obj["scale"] = _number(o.get("scale", 1.0), f"{path}.scale", positive=True)
        if "position" not in o:
            raise SceneFileError(f"{path}.position: missing; expected a list of 3 numbers")
        obj["position"] = _vector(o["position"], f"{path}.position", 3)
        obj["orientation"] = _vector(o.get("orientation", [1.0, 0.0, 0.0, 0.0]),
                                     f"{path}.orientation", 4)
        if not np.linalg.norm(obj["orientation"]) > 1e-12:
            raise _err(f"{path}.orientation", "a non-zero quaternion w, x, y, z",
                       o["orientation"])
        for key in ("velocity", "angular_velocity"):
            obj[key] = _vector(o.get(key, [0.0, 0.0, 0.0]), f"{path}.{key}", 3)
        obj["color"] = _vector(o.get("color", [0.75, 0.3, 0.2]), f"{path}.color", 3,
                               unit=True)
        obj["shading"] = _string(o.get("shading", "normals"), f"{path}.shading",
                                 ("normals", "flat"))
        if ("mass" in o) == ("density" in o):
            raise SceneFileError(f"{path}.mass: give exactly one of mass (a number or an "
                                 "unknown table) and density")
        if "mass" in o:
            obj["mass"] = _value_or_unknown(o["mass"], f"{path}.mass")
        else:
            obj["density"] = _number(o["density"], f"{path}.density", positive=True)
        out.append(obj)
    return out


def _read_mesh(file):
    import trimesh

    return trimesh.load(file, force="mesh", process=True)


def _check_mesh(file: Path, path: str) -> None:
    """A closed triangle mesh trimesh can read, or a SceneFileError naming ``path``."""
    try:
        mesh = _read_mesh(file)
    except Exception as e:  # trimesh raises many kinds for unreadable files
        raise SceneFileError(f"{path}: cannot read {file} as a mesh: {e}") from None
    if len(getattr(mesh, "faces", ())) < 4:
        raise _err(path, "a closed triangle mesh (trimesh found no solid in it)", str(file))
    if not mesh.is_watertight:
        raise _err(path, "a closed (watertight) triangle mesh; this one has holes or open "
                         "edges", str(file))


def _pushes(pushes, n_objects: int) -> list:
    if not isinstance(pushes, list):
        raise _err("pushes", "[[pushes]] tables", pushes)
    out = []
    for i, p in enumerate(pushes):
        path = f"pushes[{i}]"
        _table(p, path, ("object", "kind", "vector", "point", "frame", "start", "duration",
                         "frames"), ("object", "kind", "vector"))
        body = _number(p["object"], f"{path}.object", low=0, integer=True)
        if body >= n_objects:
            raise _err(f"{path}.object", f"an object index in [0, {n_objects})", body)
        kind = _string(p["kind"], f"{path}.kind", ("impulse", "force"))
        push = dict(object=body, kind=kind, vector=_vector(p["vector"], f"{path}.vector", 3),
                    frame=_string(p.get("frame", "world"), f"{path}.frame", ("world", "body")))
        if "point" in p:
            push["point"] = _vector(p["point"], f"{path}.point", 3)
        if kind == "impulse":
            if "frames" in p:
                raise SceneFileError(f"{path}.frames: an impulse takes start and duration "
                                     "(seconds); frames is for a force")
            push["start"] = _number(p.get("start", 0.0), f"{path}.start", low=0)
            if "duration" not in p:
                raise SceneFileError(f"{path}.duration: missing; expected seconds > 0")
            push["duration"] = _number(p["duration"], f"{path}.duration", positive=True)
        else:
            for key in ("start", "duration"):
                if key in p:
                    raise SceneFileError(f"{path}.{key}: a force takes frames = [first, "
                                         "stop]; start/duration are for an impulse")
            if "frames" in p:
                fr = p["frames"]
                if not isinstance(fr, list) or len(fr) != 2:
                    raise _err(f"{path}.frames", "[first, stop] frame indices", fr)
                a, b = (_number(v, f"{path}.frames[{k}]", low=0, integer=True)
                        for k, v in enumerate(fr))
                if not b > a:
                    raise _err(f"{path}.frames", "[first, stop] with stop > first", fr)
                push["frames"] = [a, b]
        out.append(push)
    return out


def _estimate(e) -> dict:
    _table(e, "estimate", tuple(ESTIMATE_DEFAULTS))
    out = dict(ESTIMATE_DEFAULTS)
    out.update(e)
    out["optimizer"] = _string(out["optimizer"], "estimate.optimizer", OPTIMIZERS)
    out["iters"] = _number(out["iters"], "estimate.iters", low=1, integer=True)
    out["lr"] = _number(out["lr"], "estimate.lr", positive=True)
    out["blur"] = _number(out["blur"], "estimate.blur", low=0)
    w = out["warmup"]
    pair = "[iterations, last frame] (two integers >= 0) or a list of them"
    if not isinstance(w, list) or not w:
        raise _err("estimate.warmup", pair, w)
    rows = w if isinstance(w[0], list) else [w]
    for k, row in enumerate(rows):
        if not isinstance(row, list) or len(row) != 2:
            raise _err("estimate.warmup", pair, w)
        for v in row:
            _number(v, f"estimate.warmup[{k}]", low=0, integer=True)
    out["warmup"] = w
    return out


# ---- the scene -------------------------------------------------------------------------
def _geomean(u: dict) -> float:
    return float(np.sqrt(u["guess_low"] * u["guess_high"]))


def _spec_param(sim_name: str, u: dict, doc: str) -> ParamSpec:
    return ParamSpec(sim_name, u.get("true", _geomean(u)), u["guess_low"], u["guess_high"],
                     doc=doc)


@dataclass
class FileScene(Scene):
    """A scene read from a scene file (:func:`load_scene_file`). ``spec`` is the checked
    file with its defaults filled in; ``source`` where it came from. Parameters are the
    file's unknowns (``mass`` or ``mass_<i>``, ``contact_*``); ``truth_given`` says which
    of them the file gives a ``true`` value for."""

    name: str = "scene-file"
    spec: dict = field(default_factory=dict)
    source: str = ""
    truth_given: dict = field(default_factory=dict)
    summary = "a scene read from a TOML scene file"

    @classmethod
    def from_spec(cls, spec: dict, source: str = "") -> FileScene:
        """The scene of a checked spec (as :func:`_validate` returns it)."""
        s, cam, st, est = spec["scene"], spec["camera"], spec["stage"], spec["estimate"]
        params, truth_given = {}, {}
        objs = spec["objects"]
        for i, o in enumerate(objs):
            if isinstance(o.get("mass"), dict):
                name = "mass" if len(objs) == 1 else f"mass_{i}"
                params[name] = _spec_param("body_mass", o["mass"],
                                           f"mass of object {i} [kg]" if len(objs) > 1
                                           else "mass of the body [kg]")
                truth_given[name] = "true" in o["mass"]
        for key, value in spec["contact"].items():
            if isinstance(value, dict):
                params[f"contact_{key}"] = _spec_param(f"contact_{key}", value,
                                                       CONTACT_DOCS[key])
                truth_given[f"contact_{key}"] = "true" in value
        warmup = est["warmup"]
        warmup = (tuple(tuple(r) for r in warmup) if isinstance(warmup[0], list)
                  else tuple(warmup))
        return cls(name=s["name"], frames=s["frames"], substeps=s["substeps"], fps=s["fps"],
                   width=s["width"], height=s["height"], description=s["description"],
                   near=cam["near"], far=cam["far"],
                   camera_eye=tuple(cam.get("eye", (0.0, 1.0, 3.0))),
                   camera_target=tuple(cam.get("target", (0.0, 0.3, 0.0))),
                   fov_y_deg=cam.get("fov_y_deg", 40.0), background=tuple(st["background"]),
                   params=params, default_params=tuple(params), iters=est["iters"],
                   lr=est["lr"], optimizer=est["optimizer"], blur=est["blur"],
                   warmup=warmup, spec=spec, source=source, truth_given=truth_given)

    def _mass_params(self) -> dict:
        """``{param name: object index}`` of the unknown masses."""
        n = len(self.spec["objects"])
        return {name: (0 if n == 1 else int(name.split("_")[1]))
                for name, p in self.params.items() if p.sim_name == "body_mass"}

    def make_camera(self) -> Camera:
        """The file's camera: look-at or world_to_camera; fov_y_deg or fx, fy, cx, cy (in
        pixels of the file's image size: scaled with the image when ``width``/``height``
        were overridden)."""
        c = self.spec["camera"]
        size = dict(width=self.width, height=self.height, near=self.near, far=self.far)
        if "fx" in c:
            sx = self.width / self.spec["scene"]["width"]
            sy = self.height / self.spec["scene"]["height"]
            pinhole = (c["fx"] * sx, c["fy"] * sy, c["cx"] * sx, c["cy"] * sy)
        if "world_to_camera" in c:
            return Camera.from_extrinsic(c["world_to_camera"], *pinhole, **size)
        cam = Camera.look_at(c["eye"], c["target"], up=c["up"],
                             fov_y_deg=c.get("fov_y_deg", 40.0), **size)
        if "fx" not in c:
            return cam
        R, t = cam.world_to_camera()
        T = torch.eye(4, dtype=runtime.torch_dtype())
        T[:3, :3], T[:3, 3] = R, t
        return Camera.from_extrinsic(T, *pinhole, **size)

    def build_model(self):
        from gradsim_taichi.builder import ModelBuilder

        truth = {k: p.true for k, p in self.params.items()}
        st = self.spec["stage"]
        contact = {k: truth[f"contact_{k}"] if isinstance(v, dict) else v
                   for k, v in self.spec["contact"].items()}
        b = ModelBuilder(gravity=st["gravity"], ground=st["ground"],
                         ground_height=st["height"], contact_ke=contact["ke"],
                         contact_kd=contact["kd"], contact_kf=contact["kf"],
                         contact_mu=contact["mu"])
        names = {i: n for n, i in self._mass_params().items()}
        for i, o in enumerate(self.spec["objects"]):
            where = f"objects[{i}]"
            if "density" in o:
                amount = dict(density=o["density"])
            else:
                amount = dict(mass=truth[names[i]] if i in names else o["mass"])
            try:
                _add_object(b, o, **amount, position=o["position"],
                            orientation=o["orientation"], velocity=o["velocity"],
                            angular_velocity=o["angular_velocity"])
            except ValueError as e:
                raise SceneFileError(f"scene file {self.source}: {where}: {e}") from None
        for k, p in enumerate(self.spec["pushes"]):
            point = p.get("point")
            try:
                if p["kind"] == "impulse":
                    b.add_body_impulse(p["object"], p["vector"], point=point,
                                       start=p["start"], duration=p["duration"],
                                       frame=p["frame"])
                else:
                    frames = range(*p["frames"]) if "frames" in p else None
                    b.add_body_force(p["object"], p["vector"], point=point, frame=p["frame"],
                                     frames=frames)
            except ValueError as e:
                raise SceneFileError(f"scene file {self.source}: pushes[{k}]: {e}") from None
        # the masses as built (truths of the unknowns), for simulate(); the engine keeps
        # the values of the last rollout instead
        self._built_masses = [b.rigid_body(i).mass for i in range(b.rigid_body_count)]
        return b

    def render_parts(self, model):
        from gradsim_taichi.scenes.rigid import _face_colors

        parts = []
        for o, m in zip(self.spec["objects"], model.rigid_meshes()):
            look = (dict(face_colors=_face_colors(m.vertices, m.faces, o["color"]))
                    if o["shading"] == "normals" else dict(color=o["color"]))
            parts.append(RenderPart(Mesh(m.faces, smooth=False, **look), output="rigid",
                                    vertex_ids=m.rows))
        st = self.spec["stage"]
        if st["ground"]:
            parts.append(ground_part(extent=tuple(st["extent"]), height=st["height"],
                                     wall_height=st["wall_height"],
                                     color=tuple(st["ground_color"]),
                                     wall_color=tuple(st["wall_color"])))
        return parts

    def simulate(self, values: dict[str, torch.Tensor], frames: int | None = None
                 ) -> dict[str, torch.Tensor]:
        """Rollout with ``{param name: tensor}`` of the first ``frames`` frames (default:
        all); with several objects the unknown masses ``mass_<i>`` are put into the
        per-body mass vector, the others at the values the model was built with (known
        masses, the unknowns' truths)."""
        masses = self._mass_params()
        if len(self.spec["objects"]) == 1 or not any(n in values for n in masses):
            return super().simulate(values, frames)
        self.ensure_built()
        from gradsim_taichi.torch_bridge import simulate

        dtype = runtime.torch_dtype()
        built = torch.as_tensor(self._built_masses, dtype=dtype)
        column = [values[n].reshape(()) if (n := _name_of(masses, i)) in values else built[i]
                  for i in range(len(built))]
        engine = {self.params[k].sim_name: v for k, v in values.items() if k not in masses}
        engine["body_mass"] = torch.stack(column)
        return simulate(self.sim, engine, frames)


def _name_of(masses: dict, index: int):
    return next((n for n, i in masses.items() if i == index), None)


def _add_object(b, o: dict, **kw) -> int:
    """Add one checked rigid object to the builder ``b``; returns its body index."""
    shape = o.get("shape")
    if shape == "box":
        return b.add_rigid_box(o["extents"], **kw)
    if shape == "sphere":
        return b.add_rigid_sphere(o["radius"], subdivisions=o["subdivisions"], **kw)
    if shape == "cylinder":
        return b.add_rigid_cylinder(o["radius"], o["height"], sections=o["sections"], **kw)
    if shape == "cone":
        return b.add_rigid_cone(o["radius"], o["height"], sections=o["sections"], **kw)
    if shape == "lshape":
        from gradsim_taichi.scenes.rigid import lshape_mesh

        return b.add_rigid_body(lshape_mesh(o["size"], o["thickness"]), **kw)
    mesh = _read_mesh(o["mesh"])  # checked when the file was read
    if o["scale"] != 1.0:
        mesh.apply_scale(o["scale"])
    return b.add_rigid_body(mesh, **kw)


# ---- writing ---------------------------------------------------------------------------
def scene_to_toml(scene) -> str:
    """A scene file (TOML text) for ``scene``: a :class:`FileScene` (its checked spec;
    mesh paths absolute) or a rigid preset (``rigid-mass``, ``rigid-contact``, any
    shape). Other presets raise a ValueError: they are not expressible in scene files
    yet."""
    if isinstance(scene, FileScene):
        spec = scene.spec
        spec = dict(spec, scene=dict(spec["scene"], name=scene.name, frames=scene.frames,
                                     substeps=scene.substeps, fps=scene.fps,
                                     width=scene.width, height=scene.height))
    else:
        spec = _preset_spec(scene)
    return _dumps(spec)


def _unknown_of(p: ParamSpec) -> dict:
    return dict(unknown=True, guess_low=float(p.low), guess_high=float(p.high),
                true=float(p.true))


def _preset_spec(scene) -> dict:
    from gradsim_taichi.scenes.rigid import BODY_COLOR, RigidMass

    if not isinstance(scene, RigidMass):
        raise ValueError(f"preset '{scene.name}' is not expressible as a scene file yet: "
                         "only the rigid presets (rigid-mass, rigid-contact) are")
    builder = scene.build_model()  # numpy only: no Taichi needed
    body = builder.rigid_body(0)
    if scene.shape == "box":
        shape = dict(shape="box", extents=[0.4, 0.3, 0.3])
    elif scene.shape == "cone":
        shape = dict(shape="cone", radius=0.2, height=0.4, sections=16)
    elif scene.shape == "cylinder":
        shape = dict(shape="cylinder", radius=0.15, height=0.4, sections=16)
    else:
        shape = dict(shape="lshape", size=0.4, thickness=0.2)
    p = scene.params
    obj = dict(kind="rigid", **shape, position=list(map(float, scene.start_position)),
               orientation=[float(v) for v in body.orientation], velocity=[0.0, 0.0, 0.0],
               angular_velocity=[0.0, 0.0, 0.0],
               color=list(BODY_COLOR), shading="normals",
               mass=_unknown_of(p["mass"]) if "mass" in p else float(body.mass))
    contact = {k: _unknown_of(p[f"contact_{k}"]) if f"contact_{k}" in p
               else float(scene.contact[k]) for k in CONTACT_DEFAULTS}
    push = dict(object=0, kind="impulse", vector=list(map(float, scene.impulse)),
                frame="world", point=list(map(float, scene.impulse_point)), start=0.0,
                duration=1.0 / scene.fps)
    warmup = scene.warmup
    warmup = ([list(r) for r in warmup] if isinstance(warmup[0], tuple | list)
              else list(warmup))
    return dict(
        scene=dict(name=scene.name, fps=float(scene.fps), frames=scene.frames,
                   substeps=scene.substeps, width=scene.width, height=scene.height,
                   description=scene.summary),
        camera=dict(eye=list(map(float, scene.camera_eye)),
                    target=list(map(float, scene.camera_target)), up=[0.0, 1.0, 0.0],
                    fov_y_deg=float(scene.fov_y_deg), near=float(scene.near),
                    far=float(scene.far)),
        stage=dict(STAGE_DEFAULTS, background=list(map(float, scene.background))),
        contact=contact, objects=[obj], pushes=[push],
        estimate=dict(optimizer=scene.optimizer, iters=scene.iters, lr=float(scene.lr),
                      blur=float(scene.blur), warmup=warmup))


def _dumps(spec: dict) -> str:
    """TOML text of a spec: plain tables, then the arrays of tables."""
    lines = []
    for section in ("scene", "camera", "stage", "contact", "estimate"):
        if spec.get(section):
            lines += [f"[{section}]"] + [f"{k} = {_toml(v)}" for k, v in
                                         spec[section].items()] + [""]
    for section in ("objects", "pushes"):
        for item in spec.get(section, []):
            lines += [f"[[{section}]]"] + [f"{k} = {_toml(v)}" for k, v in item.items()] + [""]
    return "\n".join(lines)


def _toml(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | np.integer):
        return str(int(v))
    if isinstance(v, float | np.floating):
        v = float(v)
        if not math.isfinite(v):
            raise ValueError(f"cannot write {v} to a scene file")
        return repr(v)  # shortest text that reads back to the same float
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_toml(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {_toml(x)}" for k, x in v.items()) + " }"
    raise TypeError(f"cannot write {type(v).__name__} to a scene file")

"""The scene files' schema: defaults, and the checks that turn a parsed TOML document
into a spec (:func:`validate`), with errors that name the key path and the expected
value. :mod:`gradsim_taichi.scenes.scene_file` documents the schema and builds scenes."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

PRIMITIVES = {  # shape -> {key: default (None: required)}
    "box": {"extents": None},
    "sphere": {"radius": None, "subdivisions": 2},
    "cylinder": {"radius": None, "height": None, "sections": 32},
    "cone": {"radius": None, "height": None, "sections": 32},
    "lshape": {"size": 0.4, "thickness": 0.2},
}
SOFT_PRIMITIVES = {  # soft (FEM) solids: shape -> {key: default (None: required)}
    "box": {"extents": None, "resolution": [4, 2, 2]},
    "ball": {"radius": None, "subdivisions": 2},
}
SOFT_DOCS = {"mu": "Lame mu [Pa]", "lambda": "Lame lambda [Pa]"}
CLOTH_DOCS = {"tri_ke": "cloth stretch stiffness [N/m]",
              "tri_ka": "cloth area stiffness [N/m]",
              "tri_kd": "cloth area damping [N s/m]",
              "edge_ke": "cloth bending stiffness [N m/rad]",
              "edge_kd": "cloth bending damping [N m s/rad]"}
CLOTH_PINS = ("corners", "top_corners", "bottom_corners", "top", "bottom", "left", "right",
              "top_left", "top_right", "bottom_left", "bottom_right")
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
    _table(value, path, ("unknown", "guess_low", "guess_high", "true", "doc"),
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
    if "doc" in value:
        out["doc"] = _string(value["doc"], _join(path, "doc"))
    return out


def validate(data: dict, base_dir: Path) -> dict:
    """The checked, completed spec (defaults filled in) of a parsed scene file."""
    _table(data, "", ("scene", "camera", "stage", "contact", "objects", "pushes", "estimate",
                      "shapes"), ("scene", "camera", "objects"))
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
                pushes=_pushes(data.get("pushes", []), data["objects"]),
                estimate=_estimate(data.get("estimate", {})),
                shapes=_shapes(data.get("shapes", {}), base_dir))


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
            raise SceneFileError(f"{path}.kind: missing; expected \"rigid\", \"soft\" or "
                                 "\"cloth\"")
        kind = _string(o["kind"], f"{path}.kind", ("rigid", "soft", "cloth"))
        if kind == "soft":
            out.append(_soft(o, path, base_dir))
            continue
        if kind == "cloth":
            out.append(_cloth(o, path))
            continue
        _check_shape_choice(o, path)
        keys = ("kind", *(("mesh", "scale") if "mesh" in o
                          else ("shape", *PRIMITIVES[o["shape"]])),
                "position", "orientation", "velocity", "angular_velocity", "color",
                "shading", "mass", "density")
        _table(o, path, keys)
        obj = dict(kind="rigid", **_shape(o, path, base_dir))
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
    for kind, keys in (("soft", ("mu", "lambda")), ("cloth", tuple(CLOTH_DOCS))):
        same = [i for i, o in enumerate(out) if o["kind"] == kind]
        for i in same:
            for key in keys:
                if isinstance(out[i].get(key), dict) and len(same) > 1:
                    raise SceneFileError(
                        f"objects[{i}].{key}: an unknown {key} needs a single {kind} "
                        f"object; this file has {len(same)} (give the others known "
                        f"values, or one {kind} object)")
    return out


def _cloth(o: dict, path: str) -> dict:
    """A checked cloth object: a rectangular grid of triangles, its area density, pins
    and (optional) membrane and bending stiffness, known or unknown."""
    keys = ("kind", "size", "resolution", "plane", "position", "velocity", "color",
            "density", "pinned", *CLOTH_DOCS)
    _table(o, path, keys, ("size", "position"))
    obj = dict(kind="cloth", size=_vector(o["size"], f"{path}.size", 2))
    if min(obj["size"]) <= 0:
        raise _err(f"{path}.size", "[width, height] > 0 [m]", o["size"])
    res = o.get("resolution", [8, 8])
    if not isinstance(res, list) or len(res) != 2:
        raise _err(f"{path}.resolution", "[nx, ny] cells (integers >= 1)", res)
    obj["resolution"] = [_number(v, f"{path}.resolution[{k}]", low=1, integer=True)
                         for k, v in enumerate(res)]
    obj["plane"] = _string(o.get("plane", "xz"), f"{path}.plane", ("xz", "xy"))
    obj["position"] = _vector(o["position"], f"{path}.position", 3)
    obj["velocity"] = _vector(o.get("velocity", [0.0, 0.0, 0.0]), f"{path}.velocity", 3)
    obj["color"] = _vector(o.get("color", [0.75, 0.6, 0.3]), f"{path}.color", 3, unit=True)
    obj["density"] = _number(o.get("density", 0.1), f"{path}.density", positive=True)
    pins = o.get("pinned", [])
    if not isinstance(pins, list) or not all(isinstance(p, str) and p in CLOTH_PINS
                                             for p in pins):
        raise _err(f"{path}.pinned", f"a list of names from {', '.join(CLOTH_PINS)}", pins)
    obj["pinned"] = list(pins)
    for key in CLOTH_DOCS:  # absent: the builder's stable defaults
        if key in o:
            known = not isinstance(o[key], dict) and key.endswith("kd")  # damping: >= 0
            obj[key] = (_number(o[key], f"{path}.{key}", low=0) if known
                        else _value_or_unknown(o[key], f"{path}.{key}"))
    return obj


def _soft(o: dict, path: str, base_dir: Path) -> dict:
    """A checked soft (FEM) object: a primitive solid or a tet mesh file, placed, with
    its material (density known; mu and lambda known or unknown)."""
    if ("shape" in o) == ("mesh" in o):
        raise _err(f"{path}.shape", f"one of {', '.join(SOFT_PRIMITIVES)} or a mesh = "
                   "\"solid.msh\" (exactly one of shape and mesh)")
    shape = o.get("shape")
    if "shape" in o and (not isinstance(shape, str) or shape not in SOFT_PRIMITIVES):
        raise _err(f"{path}.shape", f"one of {', '.join(SOFT_PRIMITIVES)} for a soft object "
                   "(or give mesh = \"solid.msh\", a tet mesh)", shape)
    prim = SOFT_PRIMITIVES.get(shape, {})
    keys = ("kind", *(("mesh", "scale") if "mesh" in o else ("shape", *prim)), "position",
            "orientation", "velocity", "color", "density", "mu", "lambda", "damping")
    _table(o, path, keys)
    obj = dict(kind="soft")
    if "shape" in o:
        obj["shape"] = shape
        for key, default in prim.items():
            kp = f"{path}.{key}"
            if key not in o and default is None:
                raise SceneFileError(f"{kp}: missing; a soft {shape} needs "
                                     f"{', '.join(prim)}")
            value = o.get(key, default)
            if key == "extents":
                obj[key] = _vector(value, kp, 3)
                if min(obj[key]) <= 0:
                    raise _err(kp, "3 numbers > 0", value)
            elif key == "resolution":
                if not isinstance(value, list) or len(value) != 3:
                    raise _err(kp, "a list of 3 integers >= 1 (cells along x, y, z)", value)
                obj[key] = [_number(v, f"{kp}[{k}]", low=1, integer=True)
                            for k, v in enumerate(value)]
            elif key == "subdivisions":
                obj[key] = _number(value, kp, low=0, integer=True)
            else:
                obj[key] = _number(value, kp, positive=True)
    else:
        mesh = _string(o["mesh"], f"{path}.mesh")
        file = Path(mesh) if Path(mesh).is_absolute() else base_dir / mesh
        if not file.is_file():
            raise FileNotFoundError(f"{path}.mesh: tet mesh file not found: {file}")
        try:
            read_tet_mesh(file)
        except Exception as e:  # meshio and the mesh checks raise many kinds
            raise SceneFileError(f"{path}.mesh: cannot read {file} as a tetrahedral mesh: "
                                 f"{e}") from None
        obj["mesh"] = str(file.resolve())
        obj["scale"] = _number(o.get("scale", 1.0), f"{path}.scale", positive=True)
    if "position" not in o:
        raise SceneFileError(f"{path}.position: missing; expected a list of 3 numbers")
    obj["position"] = _vector(o["position"], f"{path}.position", 3)
    obj["orientation"] = _vector(o.get("orientation", [1.0, 0.0, 0.0, 0.0]),
                                 f"{path}.orientation", 4)
    if not np.linalg.norm(obj["orientation"]) > 1e-12:
        raise _err(f"{path}.orientation", "a non-zero quaternion w, x, y, z",
                   o["orientation"])
    obj["velocity"] = _vector(o.get("velocity", [0.0, 0.0, 0.0]), f"{path}.velocity", 3)
    obj["color"] = _vector(o.get("color", [0.2, 0.45, 0.8]), f"{path}.color", 3, unit=True)
    obj["density"] = _number(o.get("density", 1000.0), f"{path}.density", positive=True)
    for key in ("mu", "lambda"):
        if key not in o:
            raise SceneFileError(f"{path}.{key}: missing; a soft object needs its Lame "
                                 "parameters mu and lambda [Pa] (numbers or unknowns)")
        obj[key] = _value_or_unknown(o[key], f"{path}.{key}")
    obj["damping"] = _number(o.get("damping", 0.0), f"{path}.damping", low=0)
    return obj


def read_tet_mesh(file):
    from gradsim_taichi.meshes import read_tet_mesh as read

    return read(file)


SHAPE_KEYS = ("shape", "mesh", "scale", *{k: 0 for d in PRIMITIVES.values() for k in d})


def _check_shape_choice(o: dict, path: str) -> None:
    """Exactly one of shape (a known primitive) and mesh."""
    shape = o.get("shape")
    if ("shape" in o) == ("mesh" in o):
        raise _err(f"{path}.shape", f"one of {', '.join(PRIMITIVES)} or a mesh = "
                   "\"file.obj\" (exactly one of shape and mesh)")
    if "shape" in o and (not isinstance(shape, str) or shape not in PRIMITIVES):
        raise _err(f"{path}.shape", f"one of {', '.join(PRIMITIVES)} (or give "
                   "mesh = \"file.obj\")", shape)


def _shape(o: dict, path: str, base_dir: Path) -> dict:
    """The checked shape keys of an object (or a shape variant): ``shape`` and its
    dimensions (defaults filled in), or ``mesh`` (an absolute path) and ``scale``."""
    if "shape" in o:
        shape, prim_keys = o["shape"], PRIMITIVES[o["shape"]]
        out = dict(shape=shape)
        for key, default in prim_keys.items():
            kp = f"{path}.{key}"
            if key not in o and default is None:
                raise SceneFileError(f"{kp}: missing; a {shape} needs "
                                     f"{', '.join(prim_keys)}")
            value = o.get(key, default)
            if key == "extents":
                out[key] = _vector(value, kp, 3)
                if min(out[key]) <= 0:
                    raise _err(kp, "3 numbers > 0", value)
            elif key in ("subdivisions", "sections"):
                out[key] = _number(value, kp, low=0 if key == "subdivisions" else 3,
                                   integer=True)
            else:
                out[key] = _number(value, kp, positive=True)
        return out
    mesh = _string(o["mesh"], f"{path}.mesh")
    file = Path(mesh) if Path(mesh).is_absolute() else base_dir / mesh
    if not file.is_file():
        raise FileNotFoundError(f"{path}.mesh: mesh file not found: {file}")
    _check_mesh(file, f"{path}.mesh")
    return dict(mesh=str(file.resolve()),
                scale=_number(o.get("scale", 1.0), f"{path}.scale", positive=True))


def _shapes(variants, base_dir: Path) -> dict:
    """``[shapes]``: named alternatives to objects[0]'s shape keys."""
    if not isinstance(variants, dict):
        raise _err("shapes", "a table of named shapes, e.g. cone = { shape = \"cone\", "
                             "radius = 0.2, height = 0.4 }", variants)
    out = {}
    for name, v in variants.items():
        path = f"shapes.{name}"
        if not isinstance(v, dict):
            raise _err(path, "a table { shape = ..., its dimensions } or { mesh = ..., "
                             "scale = ... }", v)
        _check_shape_choice(v, path)
        _table(v, path, ("mesh", "scale") if "mesh" in v
               else ("shape", *PRIMITIVES[v["shape"]]))
        out[name] = _shape(v, path, base_dir)
    return out


def shape_of(obj: dict) -> dict:
    """The shape keys of a checked object (as :func:`_shape` returns them)."""
    return {k: obj[k] for k in SHAPE_KEYS if k in obj}


def with_shape(spec: dict, name: str) -> dict:
    """``spec`` with objects[0]'s shape replaced by the variant ``name`` of its
    ``[shapes]`` table; a SceneFileError when the file offers no such variant."""
    variants = spec["shapes"]
    if name not in variants:
        offered = (f"the file offers {', '.join(variants)}" if variants
                   else "the file has no [shapes] table")
        raise SceneFileError(f"shape {name!r}: {offered}")
    first = {k: v for k, v in spec["objects"][0].items() if k not in SHAPE_KEYS}
    kind = first.pop("kind")
    objects = [dict(kind=kind, **variants[name], **first), *spec["objects"][1:]]
    return dict(spec, objects=objects)


def read_mesh(file):
    import trimesh

    return trimesh.load(file, force="mesh", process=True)


def _check_mesh(file: Path, path: str) -> None:
    """A closed triangle mesh trimesh can read, or a SceneFileError naming ``path``."""
    try:
        mesh = read_mesh(file)
    except Exception as e:  # trimesh raises many kinds for unreadable files
        raise SceneFileError(f"{path}: cannot read {file} as a mesh: {e}") from None
    if len(getattr(mesh, "faces", ())) < 4:
        raise _err(path, "a closed triangle mesh (trimesh found no solid in it)", str(file))
    if not mesh.is_watertight:
        raise _err(path, "a closed (watertight) triangle mesh; this one has holes or open "
                         "edges", str(file))


def _pushes(pushes, objects: list) -> list:
    n_objects = len(objects)
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
        if objects[body].get("kind") != "rigid":
            raise _err(f"{path}.object", "the index of a rigid object (pushes act on rigid "
                       f"bodies); objects[{body}] is {objects[body].get('kind')!r}", body)
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

"""The scene files' schema: defaults, and the checks that turn a parsed TOML document
into a spec (:func:`validate`), with errors that name the key path and the expected
value. :mod:`gradsim_taichi.scenes.scene_file` documents the schema and builds scenes."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from gradsim_taichi.scenes import scene_file_checks as checks
from gradsim_taichi.scenes import scene_file_deformable as deformable
from gradsim_taichi.scenes.scene_file_checks import (  # noqa: F401 (re-exported)
    SceneFileError,
)
from gradsim_taichi.scenes.scene_file_deformable import (  # noqa: F401 (re-exported)
    CLOTH_DOCS,
    CLOTH_PINS,
    PER_PARTICLE,
    SOFT_DOCS,
    SOFT_PRIMITIVES,
    read_tet_mesh,
)

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
OPTIMIZERS = ("adam", "lbfgs", "adam+lbfgs", "lm", "lbfgs+lm")
ESTIMATE_DEFAULTS = dict(optimizer="lbfgs", iters=12, lr=1.0, blur=0.0, warmup=[0, 0],
                         warmup_from="start", coarse_iters=0)
def _name(value) -> str:
    """A scene name: it names the default output folder, so letters, digits, -, _, ."""
    name = checks.string(value, "scene.name")
    if not name or not all(c.isalnum() or c in "-_." for c in name) or name[0] == ".":
        raise checks.err("scene.name", "a name of letters, digits, '-', '_' and '.' (it names "
                                 "the default output folder)", value)
    return name


def validate(data: dict, base_dir: Path) -> dict:
    """The checked, completed spec (defaults filled in) of a parsed scene file."""
    checks.table(data, "", ("scene", "camera", "stage", "contact", "objects", "pushes", "estimate",
                      "shapes"), ("scene", "camera", "objects"))
    s = checks.table(data["scene"], "scene",
               ("name", "fps", "frames", "substeps", "width", "height", "description"),
               ("fps", "frames", "width", "height"))
    scene = dict(
        name=_name(s.get("name", "scene-file")),
        fps=checks.number(s["fps"], "scene.fps", positive=True),
        frames=checks.number(s["frames"], "scene.frames", low=1, integer=True),
        substeps=checks.number(s.get("substeps", 32), "scene.substeps", low=1, integer=True),
        width=checks.number(s["width"], "scene.width", low=1, integer=True),
        height=checks.number(s["height"], "scene.height", low=1, integer=True),
        description=checks.string(s.get("description", ""), "scene.description"))
    return dict(scene=scene, camera=_camera(data["camera"]),
                stage=_stage(data.get("stage", {})), contact=_contact(data.get("contact", {})),
                objects=_objects(data["objects"], base_dir),
                pushes=_pushes(data.get("pushes", []), data["objects"]),
                estimate=_estimate(data.get("estimate", {})),
                shapes=_shapes(data.get("shapes", {}), base_dir))


def _camera(c) -> dict:
    keys = ("eye", "target", "up", "world_to_camera", "fov_y_deg", "fx", "fy", "cx", "cy",
            "near", "far")
    checks.table(c, "camera", keys)
    near = checks.number(c.get("near", 0.1), "camera.near", positive=True)
    far = checks.number(c.get("far", 10.0), "camera.far", positive=True)
    if not far > near:
        raise checks.err("camera.far", f"a number > camera.near ({near})", far)
    out = {}
    if "world_to_camera" in c:
        for key in ("eye", "target", "up"):
            if key in c:
                raise SceneFileError(f"camera.{key}: give either eye/target/up or "
                                     "world_to_camera, not both")
        m = c["world_to_camera"]
        if not isinstance(m, list) or len(m) != 4:
            raise checks.err("camera.world_to_camera", "a 4x4 matrix (4 rows of 4 numbers)", m)
        out["world_to_camera"] = [checks.vector(row, f"camera.world_to_camera[{k}]", 4)
                                  for k, row in enumerate(m)]
        T = np.asarray(out["world_to_camera"], dtype=float)
        if not np.allclose(T[3], [0.0, 0.0, 0.0, 1.0]):
            raise checks.err("camera.world_to_camera[3]", "[0, 0, 0, 1] (a rigid transform)",
                             m[3])
        R = T[:3, :3]
        if not (np.allclose(R @ R.T, np.eye(3), atol=1e-4) and np.linalg.det(R) > 0):
            raise SceneFileError("camera.world_to_camera: the upper-left 3x3 block must be a "
                                 "rotation (orthonormal rows, determinant +1); got "
                                 f"{np.round(R, 6).tolist()}")
    else:
        for key in ("eye", "target"):
            if key not in c:
                raise SceneFileError(f"camera.{key}: missing; give eye and target (or "
                                     "world_to_camera)")
        out["eye"] = checks.vector(c["eye"], "camera.eye", 3)
        out["target"] = checks.vector(c["target"], "camera.target", 3)
        out["up"] = checks.vector(c.get("up", [0.0, 1.0, 0.0]), "camera.up", 3)
    pinhole = [k for k in ("fx", "fy", "cx", "cy") if k in c]
    if pinhole:
        if "fov_y_deg" in c:
            raise SceneFileError("camera.fov_y_deg: give either fov_y_deg or fx, fy, cx, "
                                 "cy, not both")
        missing = [k for k in ("fx", "fy", "cx", "cy") if k not in c]
        if missing:
            raise SceneFileError(f"camera.{missing[0]}: missing; fx, fy, cx, cy go together")
        for k in ("fx", "fy"):
            out[k] = checks.number(c[k], f"camera.{k}", positive=True)
        for k in ("cx", "cy"):
            out[k] = checks.number(c[k], f"camera.{k}")
    else:
        fov = checks.number(c.get("fov_y_deg", 40.0), "camera.fov_y_deg", positive=True)
        if not fov < 180:
            raise checks.err("camera.fov_y_deg", "a number in (0, 180) degrees", fov)
        out["fov_y_deg"] = fov
        if "world_to_camera" in out:
            raise SceneFileError("camera.fx: missing; world_to_camera needs fx, fy, cx, cy")
    return dict(out, near=near, far=far)


def _stage(st) -> dict:
    checks.table(st, "stage", tuple(STAGE_DEFAULTS))
    out = dict(STAGE_DEFAULTS)
    out.update(st)
    if not isinstance(out["ground"], bool):
        raise checks.err("stage.ground", "true or false", out["ground"])
    out["height"] = checks.number(out["height"], "stage.height")
    out["wall_height"] = checks.number(out["wall_height"], "stage.wall_height", positive=True)
    out["gravity"] = checks.vector(out["gravity"], "stage.gravity", 3)
    for key in ("background", "ground_color", "wall_color"):
        out[key] = checks.vector(out[key], f"stage.{key}", 3, unit=True)
    out["extent"] = checks.vector(out["extent"], "stage.extent", 4)
    x0, x1, z0, z1 = out["extent"]
    if not (x1 > x0 and z1 > z0):
        raise checks.err("stage.extent", "[x0, x1, z0, z1] with x1 > x0 and z1 > z0", st["extent"])
    return out


def _contact(c) -> dict:
    checks.table(c, "contact", tuple(CONTACT_DEFAULTS))
    return {k: checks.value_or_unknown(c.get(k, d), f"contact.{k}")
            for k, d in CONTACT_DEFAULTS.items()}


def _objects(objs, base_dir: Path) -> list:
    if not isinstance(objs, list) or not objs:
        raise checks.err("objects", "one or more [[objects]] tables", objs)
    out = []
    for i, o in enumerate(objs):
        path = f"objects[{i}]"
        if not isinstance(o, dict):
            raise checks.err(path, "a table", o)
        if "kind" not in o:
            raise SceneFileError(f"{path}.kind: missing; expected \"rigid\", \"soft\" or "
                                 "\"cloth\"")
        kind = checks.string(o["kind"], f"{path}.kind", ("rigid", "soft", "cloth"))
        if kind == "soft":
            out.append(deformable.soft(o, path, base_dir))
            continue
        if kind == "cloth":
            out.append(deformable.cloth(o, path))
            continue
        _check_shape_choice(o, path)
        keys = ("kind", *(("mesh", "scale") if "mesh" in o
                          else ("shape", *PRIMITIVES[o["shape"]])),
                "position", "orientation", "velocity", "angular_velocity", "color",
                "shading", "mass", "density", *RIGID_DAMPING)
        checks.table(o, path, keys)
        obj = dict(kind="rigid", **_shape(o, path, base_dir))
        if "position" not in o:
            raise SceneFileError(f"{path}.position: missing; expected a list of 3 numbers")
        obj["position"] = checks.vector(o["position"], f"{path}.position", 3)
        obj["orientation"] = checks.vector(o.get("orientation", [1.0, 0.0, 0.0, 0.0]),
                                     f"{path}.orientation", 4)
        if not np.linalg.norm(obj["orientation"]) > 1e-12:
            raise checks.err(f"{path}.orientation", "a non-zero quaternion w, x, y, z",
                       o["orientation"])
        for key in ("velocity", "angular_velocity"):
            obj[key] = checks.vector(o.get(key, [0.0, 0.0, 0.0]), f"{path}.{key}", 3)
        obj["color"] = checks.vector(o.get("color", [0.75, 0.3, 0.2]), f"{path}.color", 3,
                               unit=True)
        obj["shading"] = checks.string(o.get("shading", "normals"), f"{path}.shading",
                                 ("normals", "flat"))
        for key in RIGID_DAMPING:  # only when given: a file without them reads back as is
            if key in o:
                obj[key] = checks.number(o[key], f"{path}.{key}", low=0.0)
        if ("mass" in o) == ("density" in o):
            raise SceneFileError(f"{path}.mass: give exactly one of mass (a number or an "
                                 "unknown table) and density")
        if "mass" in o:
            obj["mass"] = checks.value_or_unknown(o["mass"], f"{path}.mass")
        else:
            obj["density"] = checks.number(o["density"], f"{path}.density", positive=True)
        out.append(obj)
    for kind, keys in ((("soft",), ("mu", "lambda", "density")), (("cloth",), tuple(CLOTH_DOCS)),
                       (("soft", "cloth"), ("velocity",))):
        same = [i for i, o in enumerate(out) if o["kind"] in kind]
        for i in same:
            for key in keys:
                if isinstance(out[i].get(key), dict) and len(same) > 1:
                    raise SceneFileError(
                        f"objects[{i}].{key}: an unknown {key} needs a single "
                        f"{' or '.join(kind)} object; this file has {len(same)} (give the "
                        f"others known values, or one such object)")
    return out


# a rigid object's optional velocity damping (ModelBuilder.add_rigid_body's keywords:
# known values >= 0; PyBullet damps every body with 0.04 in all four by default)
RIGID_DAMPING = ("linear_damping", "linear_drag", "angular_damping", "angular_drag")
# PyBullet's default (its linearDamping and angularDamping, each the linear and the
# quadratic coefficient of btMultiBody's damping)
PYBULLET_DAMPING = dict.fromkeys(RIGID_DAMPING, 0.04)


def rigid_damping(obj: dict) -> dict:
    """The damping keywords a checked rigid object gives (none: the builder's zeros)."""
    return {k: obj[k] for k in RIGID_DAMPING if k in obj}


def parse_damping(text: str) -> dict:
    """``--damping``'s value as the four damping keys: ``pybullet``
    (:data:`PYBULLET_DAMPING`), one number (all four) or four comma-separated numbers in the order
    of :data:`RIGID_DAMPING`; a ValueError says what was expected."""
    if text.strip().lower() == "pybullet":
        return dict(PYBULLET_DAMPING)
    words = text.split(",")
    expected = (f"'pybullet', one number >= 0 or four ({', '.join(RIGID_DAMPING)}); "
                f"got {text!r}")
    if len(words) == 1:
        words *= 4
    try:
        values = [float(w) for w in words]
    except ValueError:
        raise ValueError(f"expected {expected}") from None
    if len(values) != 4 or not all(np.isfinite(v) and v >= 0 for v in values):
        raise ValueError(f"expected {expected}")
    return dict(zip(RIGID_DAMPING, values))


def with_damping(spec: dict, damping: dict) -> dict:
    """A copy of a checked spec whose rigid objects all take ``damping`` (keys of
    :data:`RIGID_DAMPING`); a ValueError when it has no rigid object."""
    if not any(o["kind"] == "rigid" for o in spec["objects"]):
        raise ValueError("the scene has no rigid object to damp")
    objects = [dict(o, **damping) if o["kind"] == "rigid" else o for o in spec["objects"]]
    return dict(spec, objects=objects)


SHAPE_KEYS = ("shape", "mesh", "scale", *{k: 0 for d in PRIMITIVES.values() for k in d})


def _check_shape_choice(o: dict, path: str) -> None:
    """Exactly one of shape (a known primitive) and mesh."""
    shape = o.get("shape")
    if ("shape" in o) == ("mesh" in o):
        raise checks.err(f"{path}.shape", f"one of {', '.join(PRIMITIVES)} or a mesh = "
                   "\"file.obj\" (exactly one of shape and mesh)")
    if "shape" in o and (not isinstance(shape, str) or shape not in PRIMITIVES):
        raise checks.err(f"{path}.shape", f"one of {', '.join(PRIMITIVES)} (or give "
                   "mesh = \"file.obj\")", shape)


def _shape(o: dict, path: str, base_dir: Path) -> dict:
    """The checked shape keys of an object (or a shape variant): ``shape`` and its
    dimensions (defaults filled in), or ``mesh`` (an absolute path) and ``scale``."""
    if "shape" in o:
        shape = o["shape"]
        return dict(shape=shape, **checks.dimensions(o, path, shape, PRIMITIVES[shape]))
    mesh = checks.string(o["mesh"], f"{path}.mesh")
    file = Path(mesh) if Path(mesh).is_absolute() else base_dir / mesh
    if not file.is_file():
        raise FileNotFoundError(f"{path}.mesh: mesh file not found: {file}")
    _check_mesh(file, f"{path}.mesh")
    return dict(mesh=str(file.resolve()),
                scale=checks.number(o.get("scale", 1.0), f"{path}.scale", positive=True))


def _shapes(variants, base_dir: Path) -> dict:
    """``[shapes]``: named alternatives to objects[0]'s shape keys."""
    if not isinstance(variants, dict):
        raise checks.err("shapes", "a table of named shapes, e.g. cone = { shape = \"cone\", "
                             "radius = 0.2, height = 0.4 }", variants)
    out = {}
    for name, v in variants.items():
        path = f"shapes.{name}"
        if not isinstance(v, dict):
            raise checks.err(path, "a table { shape = ..., its dimensions } or { mesh = ..., "
                             "scale = ... }", v)
        _check_shape_choice(v, path)
        checks.table(v, path, ("mesh", "scale") if "mesh" in v
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


def add_rigid_object(b, o: dict, **kw) -> int:
    """Add one checked rigid object (its shape, or its mesh file) to the builder ``b``;
    returns its body index."""
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
        from gradsim_taichi.meshes import lshape_mesh

        return b.add_rigid_body(lshape_mesh(o["size"], o["thickness"]), **kw)
    mesh = read_mesh(o["mesh"])  # checked when the file was read
    if o["scale"] != 1.0:
        mesh.apply_scale(o["scale"])
    return b.add_rigid_body(mesh, **kw)


def _check_mesh(file: Path, path: str) -> None:
    """A closed triangle mesh trimesh can read, or a SceneFileError naming ``path``."""
    try:
        mesh = read_mesh(file)
    except Exception as e:  # trimesh raises many kinds for unreadable files
        raise SceneFileError(f"{path}: cannot read {file} as a mesh: {e}") from None
    if len(getattr(mesh, "faces", ())) < 4:
        raise checks.err(path, "a closed triangle mesh (trimesh found no solid in it)", str(file))
    if not mesh.is_watertight:
        raise checks.err(path, "a closed (watertight) triangle mesh; this one has holes or open "
                         "edges", str(file))


def _pushes(pushes, objects: list) -> list:
    n_objects = len(objects)
    if not isinstance(pushes, list):
        raise checks.err("pushes", "[[pushes]] tables", pushes)
    out = []
    for i, p in enumerate(pushes):
        path = f"pushes[{i}]"
        checks.table(p, path, ("object", "kind", "vector", "point", "frame", "start", "duration",
                         "frames", "region", "torque"), ("object", "kind", "vector"))
        body = checks.number(p["object"], f"{path}.object", low=0, integer=True)
        if body >= n_objects:
            raise checks.err(f"{path}.object", f"an object index in [0, {n_objects})", body)
        kind = checks.string(p["kind"], f"{path}.kind", ("impulse", "force"))
        push = dict(object=body, kind=kind,
                    vector=checks.vector(p["vector"], f"{path}.vector", 3))
        if objects[body].get("kind") in ("soft", "cloth"):
            push.update(deformable.particle_push(p, path))
        else:
            for key in ("region", "torque"):
                if key in p:
                    raise SceneFileError(f"{path}.{key}: for a push on a soft or cloth "
                                         "object; a rigid body's push takes point")
            push["frame"] = checks.string(p.get("frame", "world"), f"{path}.frame",
                                          ("world", "body"))
        if "point" in p:
            push["point"] = checks.vector(p["point"], f"{path}.point", 3)
        if kind == "impulse":
            if "frames" in p:
                raise SceneFileError(f"{path}.frames: an impulse takes start and duration "
                                     "(seconds); frames is for a force")
            push["start"] = checks.number(p.get("start", 0.0), f"{path}.start", low=0)
            if "duration" not in p:
                raise SceneFileError(f"{path}.duration: missing; expected seconds > 0")
            push["duration"] = checks.number(p["duration"], f"{path}.duration", positive=True)
        else:
            for key in ("start", "duration"):
                if key in p:
                    raise SceneFileError(f"{path}.{key}: a force takes frames = [first, "
                                         "stop]; start/duration are for an impulse")
            if "frames" in p:
                fr = p["frames"]
                if not isinstance(fr, list) or len(fr) != 2:
                    raise checks.err(f"{path}.frames", "[first, stop] frame indices", fr)
                a, b = (checks.number(v, f"{path}.frames[{k}]", low=0, integer=True)
                        for k, v in enumerate(fr))
                if not b > a:
                    raise checks.err(f"{path}.frames", "[first, stop] with stop > first", fr)
                push["frames"] = [a, b]
        out.append(push)
    return out


def _estimate(e) -> dict:
    checks.table(e, "estimate", tuple(ESTIMATE_DEFAULTS))
    out = dict(ESTIMATE_DEFAULTS)
    out.update(e)
    out["optimizer"] = checks.string(out["optimizer"], "estimate.optimizer", OPTIMIZERS)
    out["iters"] = checks.number(out["iters"], "estimate.iters", low=1, integer=True)
    out["lr"] = checks.number(out["lr"], "estimate.lr", positive=True)
    out["blur"] = checks.number(out["blur"], "estimate.blur", low=0)
    out["coarse_iters"] = checks.number(out["coarse_iters"], "estimate.coarse_iters", low=0,
                                        integer=True)
    out["warmup_from"] = checks.string(out["warmup_from"], "estimate.warmup_from",
                                       ("start", "contact"))
    w = out["warmup"]
    pair = "[iterations, last frame] (two integers >= 0) or a list of them"
    if not isinstance(w, list) or not w:
        raise checks.err("estimate.warmup", pair, w)
    rows = w if isinstance(w[0], list) else [w]
    for k, row in enumerate(rows):
        if not isinstance(row, list) or len(row) != 2:
            raise checks.err("estimate.warmup", pair, w)
        for v in row:
            checks.number(v, f"estimate.warmup[{k}]", low=0, integer=True)
    out["warmup"] = w
    return out


# ---- the scene -------------------------------------------------------------------------

"""The scene files' deformable objects: ``kind = "soft"`` (FEM solids) and
``kind = "cloth"`` (a grid), their defaults and checks, their regions and the forces on
them, and the building of a soft object (see :mod:`gradsim_taichi.scenes.scene_file`
for the schema)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from gradsim_taichi.scenes.scene_file_checks import (
    SceneFileError,
    dimensions,
    err,
    number,
    string,
    table,
    value_or_unknown,
    vector,
)

SOFT_PRIMITIVES = {  # soft (FEM) solids: shape -> {key: default (None: required)}
    "box": {"extents": None, "resolution": [4, 2, 2]},
    "ball": {"radius": None, "subdivisions": 2},
}
SOFT_DOCS = {"mu": "Lame mu [Pa]", "lambda": "Lame lambda [Pa]", "density": "density [kg/m^3]"}
# the faces of a deformable object's bounding box (its mesh frame), for pinned and pushes
REGIONS = ("min_x", "max_x", "min_y", "max_y", "min_z", "max_z")
PER_PARTICLE = "per_particle"
CLOTH_DOCS = {"tri_ke": "cloth stretch stiffness [N/m]",
              "tri_ka": "cloth area stiffness [N/m]",
              "tri_kd": "cloth area damping [N s/m]",
              "edge_ke": "cloth bending stiffness [N m/rad]",
              "edge_kd": "cloth bending damping [N m s/rad]"}
CLOTH_PINS = ("corners", "top_corners", "bottom_corners", "top", "bottom", "left", "right",
              "top_left", "top_right", "bottom_left", "bottom_right")


def cloth(o: dict, path: str) -> dict:
    """A checked cloth object: a rectangular grid of triangles, its area density, pins
    and (optional) membrane and bending stiffness, known or unknown."""
    keys = ("kind", "size", "resolution", "plane", "position", "velocity",
            "angular_velocity", "color", "ramp", "density", "pinned", "lift", "drag",
            *CLOTH_DOCS)
    table(o, path, keys, ("size", "position"))
    obj = dict(kind="cloth", size=vector(o["size"], f"{path}.size", 2))
    if min(obj["size"]) <= 0:
        raise err(f"{path}.size", "[width, height] > 0 [m]", o["size"])
    res = o.get("resolution", [8, 8])
    if not isinstance(res, list) or len(res) != 2:
        raise err(f"{path}.resolution", "[nx, ny] cells (integers >= 1)", res)
    obj["resolution"] = [number(v, f"{path}.resolution[{k}]", low=1, integer=True)
                         for k, v in enumerate(res)]
    obj["plane"] = string(o.get("plane", "xz"), f"{path}.plane", ("xz", "xy"))
    obj["position"] = vector(o["position"], f"{path}.position", 3)
    obj.update(_motion(o, path))
    obj.update(_look(o, path, [0.75, 0.6, 0.3]))
    obj["density"] = number(o.get("density", 0.1), f"{path}.density", positive=True)
    pins = o.get("pinned", [])
    if not isinstance(pins, list) or not all(isinstance(p, str) and p in CLOTH_PINS
                                             for p in pins):
        raise err(f"{path}.pinned", f"a list of names from {', '.join(CLOTH_PINS)}", pins)
    obj["pinned"] = list(pins)
    for key in CLOTH_DOCS:  # absent: the builder's stable defaults
        if key in o:
            known = not isinstance(o[key], dict) and key.endswith("kd")  # damping: >= 0
            obj[key] = (number(o[key], f"{path}.{key}", low=0) if known
                        else value_or_unknown(o[key], f"{path}.{key}"))
    for key in ("lift", "drag"):  # absent (both): no aerodynamics
        if key in o:
            obj[key] = number(o[key], f"{path}.{key}", low=0)
    return obj


def soft(o: dict, path: str, base_dir: Path) -> dict:
    """A checked soft (FEM) object: a primitive solid or a tet mesh file, placed, with
    its material (density known; mu and lambda known or unknown)."""
    if ("shape" in o) == ("mesh" in o):
        raise err(f"{path}.shape", f"one of {', '.join(SOFT_PRIMITIVES)} or a mesh = "
                   "\"solid.msh\" (exactly one of shape and mesh)")
    shape = o.get("shape")
    if "shape" in o and (not isinstance(shape, str) or shape not in SOFT_PRIMITIVES):
        raise err(f"{path}.shape", f"one of {', '.join(SOFT_PRIMITIVES)} for a soft object "
                   "(or give mesh = \"solid.msh\", a tet mesh)", shape)
    prim = SOFT_PRIMITIVES.get(shape, {})
    keys = ("kind", *(("mesh", "scale") if "mesh" in o else ("shape", *prim)), "position",
            "orientation", "velocity", "angular_velocity", "color", "ramp", "density", "mu",
            "lambda", "damping", "pinned")
    table(o, path, keys)
    obj = dict(kind="soft")
    if "shape" in o:
        obj["shape"] = shape
        obj.update(dimensions(o, path, f"soft {shape}", prim))
    else:
        mesh = string(o["mesh"], f"{path}.mesh")
        file = Path(mesh) if Path(mesh).is_absolute() else base_dir / mesh
        if not file.is_file():
            raise FileNotFoundError(f"{path}.mesh: tet mesh file not found: {file}")
        try:
            read_tet_mesh(file)
        except Exception as e:  # meshio and the mesh checks raise many kinds
            raise SceneFileError(f"{path}.mesh: cannot read {file} as a tetrahedral mesh: "
                                 f"{e}") from None
        obj["mesh"] = str(file.resolve())
        obj["scale"] = number(o.get("scale", 1.0), f"{path}.scale", positive=True)
    if "position" not in o:
        raise SceneFileError(f"{path}.position: missing; expected a list of 3 numbers")
    obj["position"] = vector(o["position"], f"{path}.position", 3)
    obj["orientation"] = vector(o.get("orientation", [1.0, 0.0, 0.0, 0.0]),
                                 f"{path}.orientation", 4)
    if not np.linalg.norm(obj["orientation"]) > 1e-12:
        raise err(f"{path}.orientation", "a non-zero quaternion w, x, y, z",
                   o["orientation"])
    obj.update(_motion(o, path))
    obj.update(_look(o, path, [0.2, 0.45, 0.8]))
    obj["density"] = _value(o.get("density", 1000.0), f"{path}.density", "mass")
    pins = o.get("pinned", [])
    if not isinstance(pins, list) or not all(isinstance(p, str) and p in REGIONS
                                             for p in pins):
        raise err(f"{path}.pinned", f"a list of faces from {', '.join(REGIONS)}", pins)
    obj["pinned"] = list(pins)
    for key in ("mu", "lambda"):
        if key not in o:
            raise SceneFileError(f"{path}.{key}: missing; a soft object needs its Lame "
                                 "parameters mu and lambda [Pa] (numbers or unknowns)")
        obj[key] = value_or_unknown(o[key], f"{path}.{key}")
    obj["damping"] = number(o.get("damping", 0.0), f"{path}.damping", low=0)
    return obj


def _motion(o: dict, path: str) -> dict:
    """A deformable object's initial velocity (a vector, or a per-particle unknown) and
    angular velocity (about the mean of its vertices, world frame)."""
    return dict(velocity=_value(o.get("velocity", [0.0, 0.0, 0.0]), f"{path}.velocity",
                                "vector"),
                angular_velocity=vector(o.get("angular_velocity", [0.0, 0.0, 0.0]),
                                        f"{path}.angular_velocity", 3))


def _look(o: dict, path: str, color: list) -> dict:
    """A deformable object's colour and the strength of its colour ramp."""
    return dict(color=vector(o.get("color", color), f"{path}.color", 3, unit=True),
                ramp=number(o.get("ramp", 0.0), f"{path}.ramp", low=0))


def _value(value, path: str, what: str):
    """A density (``what = "mass"``: a number, an unknown or a per-particle unknown) or a
    velocity (``"vector"``: a list of 3 numbers or a per-particle unknown), checked."""
    scalar = what == "mass"
    if isinstance(value, dict) and (value.get("unknown") is not True or not scalar):
        if value.get("unknown") != PER_PARTICLE:
            raise err(f"{path}.unknown", f"{'true or ' if scalar else ''}\"{PER_PARTICLE}\" "
                      "(one unknown per particle)", value.get("unknown"))
        return per_particle(value, path, what)
    return value_or_unknown(value, path) if scalar else vector(value, path, 3)


def per_particle(value: dict, path: str, what: str) -> dict:
    """A per-particle unknown ``{unknown = "per_particle", guess_low, guess_high[, true]
    [, doc]}``: ``what`` is ``"mass"`` (of a density: guesses and ``true`` are densities
    > 0) or ``"vector"`` (of a velocity: signed guesses per component, ``true`` a list
    of 3 numbers)."""
    table(value, path, ("unknown", "guess_low", "guess_high", "true", "doc"),
          ("unknown", "guess_low", "guess_high"))
    positive = what == "mass"
    low = number(value["guess_low"], f"{path}.guess_low", positive=positive)
    high = number(value["guess_high"], f"{path}.guess_high", positive=positive)
    if not high > low:
        raise err(f"{path}.guess_high", f"a number > guess_low ({low})", high)
    out = dict(unknown=PER_PARTICLE, guess_low=low, guess_high=high)
    if "true" in value:
        out["true"] = (number(value["true"], f"{path}.true", positive=True) if positive
                       else vector(value["true"], f"{path}.true", 3))
    if "doc" in value:
        out["doc"] = string(value["doc"], f"{path}.doc")
    return out


def particle_push(p: dict, path: str) -> dict:
    """The keys of a push on a soft or cloth object: a force ``vector`` [N] (total,
    spread evenly) and optionally a couple ``torque`` [N m] on the vertices of
    ``region`` (a face of the object's bounding box, or "all"), held over ``frames``."""
    if p["kind"] != "force":
        raise err(f"{path}.kind", "\"force\" for a soft or cloth object (held over frames)",
                  p["kind"])
    for key in ("point", "frame"):
        if key in p:
            raise SceneFileError(f"{path}.{key}: a push on a soft or cloth object is a force "
                                 "on a region of its vertices (region, vector, torque, "
                                 "frames); point and frame are for rigid bodies")
    out = dict(region=string(p.get("region", "all"), f"{path}.region", ("all", *REGIONS)))
    if "torque" in p:
        out["torque"] = vector(p["torque"], f"{path}.torque", 3)
    return out


def region_mask(vertices, region: str) -> np.ndarray:
    """Bool mask of ``vertices`` ``[N, 3]`` on a face of their bounding box (``"min_x"``:
    the smallest x, within 1e-6 of the box's largest side; ...) or ``"all"``."""
    v = np.asarray(vertices, dtype=np.float64)
    if region == "all":
        return np.ones(len(v), dtype=bool)
    axis = "xyz".index(region[-1])
    end = v[:, axis].min() if region.startswith("min") else v[:, axis].max()
    return np.abs(v[:, axis] - end) <= 1e-6 * max(np.ptp(v, axis=0).max(), 1e-12)


def add_soft(b, o: dict, mu: float, lam: float, density: float) -> tuple:
    """Add one checked soft (FEM) object to the builder ``b`` (its ``pinned`` faces held);
    its particle indices and mesh-frame vertices."""
    from gradsim_taichi import meshes

    if o.get("shape") == "box":
        v, t = meshes.tet_box(size=o["extents"], resolution=tuple(o["resolution"]))
    elif o.get("shape") == "ball":
        v, t = meshes.tet_ball(radius=o["radius"], subdivisions=o["subdivisions"])
    else:
        v, t = read_tet_mesh(o["mesh"])
    pinned = np.zeros(len(v), dtype=bool)
    for region in o["pinned"]:
        pinned |= region_mask(v, region)
    ids = b.add_soft_mesh(v, t, density=density, mu=mu, lam=lam, damping=o["damping"],
                          origin=o["position"], orientation=o["orientation"],
                          scale=o.get("scale", 1.0), pinned=pinned)
    return ids, v


def couple(x, torque) -> np.ndarray:
    """Forces ``[N, 3]`` on the points ``x`` with zero sum and moment ``torque`` (about
    any point): the torque's size ``T`` spread across the points' offsets ``r_i`` from
    their centre, perpendicular to its axis ``a``: ``f_i = a x r_i T / sum |r_i|^2``
    (exact for points flat across the axis, as a box face and its normal), plus the
    smallest couple (least squares) of any moment that misses. A ValueError when the
    points lie on one line and a correction is needed (a torque along it has no couple)."""
    torque = np.asarray(torque, dtype=np.float64)
    r = np.asarray(x, dtype=np.float64) - np.mean(x, axis=0)
    size = np.linalg.norm(torque)
    if size == 0:
        return np.zeros_like(r)
    axis = torque / size
    across = r - np.outer(r @ axis, axis)
    f = np.cross(axis, across) * size / max((across ** 2).sum(), 1e-300)
    missing = torque - np.cross(r, f).sum(axis=0)
    if np.linalg.norm(missing) <= 1e-9 * size:
        return f
    inertia = (r ** 2).sum() * np.eye(3) - r.T @ r  # of unit masses: sum r x (w x r) = J w
    if np.linalg.matrix_rank(inertia) < 3:
        raise ValueError("a torque needs a region of vertices not all on one line")
    return f + np.cross(np.linalg.solve(inertia, missing), r)


def read_tet_mesh(file):
    from gradsim_taichi.meshes import read_tet_mesh as read

    return read(file)

"""Writing scene files: :func:`scene_to_toml` turns a :class:`FileScene` (its checked
spec) or a rigid preset into TOML text that :mod:`gradsim_taichi.scenes.scene_file`
reads back to the same scene (``gradsim-taichi scene show``)."""

from __future__ import annotations

import math

import numpy as np

from gradsim_taichi.scenes.base import ParamSpec
from gradsim_taichi.scenes.scene_file import FileScene
from gradsim_taichi.scenes.scene_file_schema import CONTACT_DEFAULTS, STAGE_DEFAULTS


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

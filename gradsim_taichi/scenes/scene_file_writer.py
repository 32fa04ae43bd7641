"""Writing scene files: :func:`scene_to_toml` turns a :class:`FileScene` (a loaded file
or a preset shipped as one) into TOML text that :mod:`gradsim_taichi.scenes.scene_file`
reads back to the same scene (``gradsim-taichi scene show PRESET --shape ...``)."""

from __future__ import annotations

import math

import numpy as np

from gradsim_taichi.scenes.scene_file import FileScene


def scene_to_toml(scene) -> str:
    """A scene file (TOML text) for a :class:`FileScene` (a loaded file or a preset that
    is one: every estimation preset, any shape) as it stands: its fields (size, frames,
    camera pose, background, the optimiser's schedule with its warm-up horizons as
    absolute frames, the known contact values, the scalar unknowns' truths) over its
    file's spec; a per-particle unknown's table as the file wrote it; mesh paths
    absolute. Other scenes raise a ValueError: they are not expressible in scene files."""
    if not isinstance(scene, FileScene):
        raise ValueError(f"scene '{scene.name}' is not expressible as a scene file: only "
                         "scenes loaded from scene files (and the presets shipped as "
                         "them) are")
    return _dumps(_spec_of(scene))


def _spec_of(scene: FileScene) -> dict:
    """The scene's spec with its fields written in."""
    spec = scene.spec
    camera = dict(spec["camera"])
    if "eye" in camera:
        camera.update(eye=_floats(scene.camera_eye), target=_floats(scene.camera_target))
    if "fov_y_deg" in camera:
        camera["fov_y_deg"] = float(scene.fov_y_deg)
    camera.update(near=float(scene.near), far=float(scene.far))
    mass_names = {i: n for n, i in scene._mass_params().items()}
    objects = []
    for i, o in enumerate(spec["objects"]):
        if i in mass_names:
            o = dict(o, mass=_unknown(scene, mass_names[i], o["mass"]))
        for key in ("mu", "lambda", "density", "tri_ke", "tri_ka", "tri_kd", "edge_ke",
                    "edge_kd"):  # a soft object's or cloth's scalar unknowns
            if isinstance(o.get(key), dict) and o[key]["unknown"] is True:
                o = dict(o, **{key: _unknown(scene, key, o[key])})
        objects.append(o)
    contact = {k: _unknown(scene, f"contact_{k}", v) if isinstance(v, dict)
               else float(scene.contact.get(k, v)) for k, v in spec["contact"].items()}
    warmup = scene.warmup
    warmup = ([list(r) for r in warmup] if isinstance(warmup[0], tuple | list)
              else list(warmup))
    return dict(
        spec,
        scene=dict(spec["scene"], name=scene.name, frames=scene.frames,
                   substeps=scene.substeps, fps=float(scene.fps), width=scene.width,
                   height=scene.height, description=scene.description),
        camera=camera, stage=dict(spec["stage"], background=_floats(scene.background)),
        contact=contact, objects=objects,
        estimate=dict(optimizer=scene.optimizer, iters=scene.iters, lr=float(scene.lr),
                      blur=float(scene.blur), warmup=warmup,
                      coarse_iters=scene.coarse_iters))


def _floats(v) -> list:
    return [float(x) for x in v]


def _unknown(scene: FileScene, name: str, written: dict) -> dict:
    """An unknown's table: the file's, with the parameter's truth if it has one."""
    out = {k: v for k, v in written.items() if k != "true"}
    if scene.truth_given.get(name):
        out["true"] = float(np.asarray(scene.params[name].true))
    if "doc" in out:  # keep the key order of the file (doc last)
        out["doc"] = out.pop("doc")
    return out


def _dumps(spec: dict) -> str:
    """TOML text of a spec: plain tables, then the arrays of tables."""
    lines = []
    for section in ("scene", "camera", "stage", "contact", "estimate", "shapes"):
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

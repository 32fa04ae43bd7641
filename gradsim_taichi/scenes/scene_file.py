"""Scene files: a user's own clip described in TOML, estimated without writing Python.

:func:`load_scene_file` reads a file into a :class:`FileScene` (a :class:`Scene` like the
presets); :func:`scene_from_toml` does the same from text. The checks and defaults live in
:mod:`.scene_file_schema`; :func:`.scene_file_writer.scene_to_toml` writes a scene file
back (a loaded one, or a preset that is one: ``gradsim-taichi scene show``).
Everything is checked when the file is read: an error names the key path and what was
expected, e.g. ``objects[0].shape: expected one of box, sphere, cylinder, cone, lshape
(or give mesh = "file.obj"); got 'cube'``; unknown keys (typos) are errors too.

Schema (lengths in metres, times in seconds, colours RGB in [0, 1]; keys marked
optional take the value shown)::

    [scene]
    name = "my-clip"          # optional, "scene-file"
    fps = 60.0                # frames per second of the video
    frames = 40               # simulated frames (the video has frames + 1 images)
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
    # true = .., doc = ".." }  (true is optional: the value a synthetic target is
    # rendered with; doc, optional, describes the parameter)

    [[objects]]               # one table per body, in order (index 0, 1, ...)
    kind = "rigid"            # "rigid", "soft" (FEM) or "cloth" (keys below)
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
    # linear_damping = 0.04   # optional, 0: also linear_drag, angular_(damping|drag)

    [[objects]]               # a soft (FEM) solid
    kind = "soft"
    shape = "ball"            # ball: radius, subdivisions (2); box: extents, resolution
    radius = 0.15             # ([4, 2, 2] cells; the box spans [0, extents] from position)
    # or mesh = "solid.msh"   # a tetrahedral mesh meshio reads (.msh, .vtu, ...), scale
    position = [0.6, 0.3, 0.0]             # of the mesh origin (the ball's centre)
    orientation = [1.0, 0.0, 0.0, 0.0]     # optional
    velocity = [0.0, 0.0, 0.0]             # optional (or a per-particle unknown: below)
    angular_velocity = [0.0, 0.0, 0.0]     # optional: spin about the mean of the vertices
    color = [0.2, 0.45, 0.8]               # optional
    ramp = 0.0                # optional: colour ramp over the rest shape (0: uniform;
                              # 0.3: rotation and in-plane motion show)
    density = 150.0           # optional, 1000.0 [kg/m^3]; or an unknown (named density),
                              # or { unknown = "per_particle", guess_low = 75.0,
                              # guess_high = 300.0, true = 150.0 }: every particle's mass
                              # unknown (named mass; guesses a uniform density times each
                              # particle's volume; coarse basis: the uniform density)
    mu = 15000.0              # Lame parameters [Pa]: numbers, or unknown tables (then
    lambda = 23000.0          # named mu, lambda; only with a single soft object)
    damping = 0.0             # optional: strain-rate viscosity [Pa s]
    pinned = ["min_x"]        # optional: held faces of the bounding box (mesh frame):
                              # min_x, max_x, min_y, max_y, min_z, max_z

    [[objects]]               # a cloth: a rectangular grid of triangles
    kind = "cloth"
    size = [0.5, 0.5]         # [width, height] m
    resolution = [8, 8]       # optional: cells (two triangles each)
    plane = "xz"              # optional: "xz" (flat, normal +y) or "xy" (standing)
    position = [-0.25, 0.8, -0.25]         # of the grid's corner (0, 0)
    velocity = [0.0, 0.0, 0.0]             # optional; or (soft objects too) a per-particle
    # unknown { unknown = "per_particle", guess_low = -1.0, guess_high = 1.0, true =
    # [0.6, 0.8, -0.3] } (named velocity; guesses one velocity shared by all particles;
    # coarse basis: the affine velocity fields; the truth adds angular_velocity's spin)
    angular_velocity = [0.0, 2.0, 0.0]     # optional, as for soft objects
    color = [0.75, 0.6, 0.3]               # optional
    ramp = 0.0                # optional, as for soft objects
    lift = 0.5                # optional: aerodynamic lift and drag coefficients (either
    drag = 1.0                # turns aerodynamics on)
    density = 0.1             # optional: area density [kg/m^2]
    pinned = []               # optional: corners, top_corners, bottom_corners, top,
                              # bottom, left, right, top_left, top_right, bottom_left,
                              # bottom_right
    tri_ke = 100.0            # optional stretch, area stiffness [N/m] and damping; edge_ke,
    tri_ka = 100.0            # edge_kd bending: numbers or unknowns (one cloth); absent:
                              # the builder's stable defaults

    [shapes]                  # optional: named alternatives to objects[0]'s shape keys,
    cone = { shape = "cone", radius = 0.2, height = 0.4 }   # chosen with --shape NAME
    ball = { shape = "sphere", radius = 0.15 }              # (or mesh = .., scale = ..)

    [[pushes]]                # optional, known pushes
    object = 0                # index into objects
    kind = "impulse"          # impulse [N s] spread over [start, start + duration) s,
    vector = [3.0, 1.0, 0.0]  # or "force" [N] held over frames = [first, stop) (stop
    point = [0.0, 0.1, 0.1]   # excluded; optional: every frame). point: mesh frame,
    start = 0.0               # optional (none: at the centre of mass); frame =
    duration = 0.016666666666666666  # "world" (optional) or "body"

    [[pushes]]                # on a soft or cloth object: a force on a region of it
    object = 1
    kind = "force"            # held over frames = [first, stop) (optional: every frame)
    region = "max_x"          # optional: a face of its bounding box (as pinned) or "all"
    vector = [0.0, 60.0, 0.0] # total force [N], spread evenly over the region's vertices
    torque = [1.0, 0.0, 0.0]  # optional: a couple [N m] (zero total force) on the region
    frames = [0, 3]

    [estimate]                # optional: the optimiser's defaults for this scene
    optimizer = "lbfgs"       # adam, lbfgs, adam+lbfgs, lm or lbfgs+lm
    iters = 12
    lr = 1.0
    blur = 0.0                # pixels
    warmup = [0, 0]           # (iterations, last frame) fitted first, or a list of them
    warmup_from = "start"     # or "contact": last frames counted from the frame a vertex
                              # first reaches the ground in free flight
    coarse_iters = 0          # first iterations within the per-particle unknowns' bases

Unknowns become the scene's parameters: ``mass`` (one object) or ``mass_<index>`` (several),
``contact_ke``, ``contact_kd``, ``contact_kf``, ``contact_mu``, a soft object's ``mu``,
``lambda`` and ``density`` (or per particle: ``mass``), a cloth's ``tri_ke``, ``tri_ka``,
``tri_kd``, ``edge_ke``, ``edge_kd``, and a soft or cloth object's per-particle
``velocity``. An unknown without ``true`` is built at the geometric mean of its guesses;
estimating it needs a target video.

The estimation presets are scene files (:class:`FilePreset`) shipped in ``gradsim_taichi/
scenes/files/``; ``make_scene(name, shape=...)`` loads one with that ``[shapes]`` variant.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, fields
from pathlib import Path

import numpy as np
import torch

from gradsim_taichi import runtime
from gradsim_taichi.render import Camera, Mesh
from gradsim_taichi.scenes.base import (
    RenderPart,
    Scene,
    affine_basis,
    ground_part,
    normal_face_colors,
    ramp_look,
)
from gradsim_taichi.scenes.scene_file_deformable import add_soft, couple, region_mask
from gradsim_taichi.scenes.scene_file_params import (
    geomean,
    name_of,
    particle_param,
    per_particle,
    spec_param,
)
from gradsim_taichi.scenes.scene_file_schema import (  # noqa: F401 (re-exported)
    CLOTH_DOCS,
    CONTACT_DEFAULTS,
    CONTACT_DOCS,
    OPTIMIZERS,
    PER_PARTICLE,
    SOFT_DOCS,
    STAGE_DEFAULTS,
    SceneFileError,
    add_rigid_object,
    read_mesh,
    read_tet_mesh,
    rigid_damping,
    shape_of,
    validate,
    with_shape,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # the same parser, from PyPI (a dependency on Python 3.10)
    import tomli as tomllib

# ---- reading ---------------------------------------------------------------------------
def load_scene_file(path, shape: str | None = None, **overrides) -> FileScene:
    """The scene a TOML scene file describes (see the module docstring for the schema).

    Args:
        path: the file; mesh paths in it are relative to its folder.
        shape: a name of the file's ``[shapes]`` table: objects[0] takes that shape
            (None: the shape the object is written with).
        overrides: Scene fields to change after reading (``frames``, ``width``, ...).

    Raises:
        FileNotFoundError: no such file, or a mesh file it names is missing.
        SceneFileError (a ValueError): bad TOML or a value the schema does not allow.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"scene file not found: {path}{' (a folder)' * path.is_dir()}")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise SceneFileError(f"scene file {path}: not a text (TOML) file") from None
    return scene_from_toml(text, base_dir=path.parent, source=str(path), shape=shape,
                           **overrides)


def scene_from_toml(text: str, base_dir=".", source: str = "<text>", shape: str | None = None,
                    **overrides) -> FileScene:
    """Like :func:`load_scene_file`, from the file's text; mesh paths are relative to
    ``base_dir``; ``source`` names the text in error messages."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise SceneFileError(f"scene file {source}: not valid TOML: {e}") from None
    try:
        spec = validate(data, Path(base_dir))
        if shape is not None:
            spec = with_shape(spec, shape)
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
    # objects[0]'s shape: the name of the file's [shapes] variant it has (None: none)
    shape: str | None = None
    # the contact values the model is built with where the file gives a known value (an
    # unknown's is its parameter's truth); set to build with others
    contact: dict = field(default_factory=dict)
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
                params[name] = spec_param("body_mass", o["mass"],
                                           f"mass of object {i} [kg]" if len(objs) > 1
                                           else "mass of the body [kg]")
                truth_given[name] = "true" in o["mass"]
            if o["kind"] == "rigid":
                continue
            density = o.get("density") if o["kind"] == "soft" else None
            if per_particle(density):  # every particle's mass (the only such object)
                params["mass"] = particle_param("mass", density, shape=(-1,), draw_shape=(),
                                                 doc=f"mass of each particle [kg]; guesses: a "
                                                 f"uniform density drawn from "
                                                 f"[{density['guess_low']:g}, "
                                                 f"{density['guess_high']:g}] kg/m^3 times "
                                                 "each particle's volume")
                truth_given["mass"] = "true" in density
            # a soft object's or cloth's scalar unknowns (the only such object)
            sim_names = ({"mu": "tet_mu", "lambda": "tet_lambda", "density": "density"}
                         if o["kind"] == "soft" else {k: k for k in CLOTH_DOCS})
            for key, sim_name in sim_names.items():
                if isinstance(o.get(key), dict) and not per_particle(o[key]):
                    params[key] = spec_param(sim_name, o[key], {**SOFT_DOCS, **CLOTH_DOCS}[key])
                    truth_given[key] = "true" in o[key]
            if per_particle(o["velocity"]):  # every particle's initial velocity
                params["velocity"] = particle_param(
                    "initial_velocity", o["velocity"], shape=(-1, 3), draw_shape=(3,),
                    positive=False, doc="initial velocity of every particle [m/s]")
                truth_given["velocity"] = "true" in o["velocity"]
        for key, value in spec["contact"].items():
            if isinstance(value, dict):
                params[f"contact_{key}"] = spec_param(f"contact_{key}", value,
                                                       CONTACT_DOCS[key])
                truth_given[f"contact_{key}"] = "true" in value
        warmup = est["warmup"]
        rows = [tuple(r) for r in warmup] if isinstance(warmup[0], list) else [tuple(warmup)]
        first = shape_of(spec["objects"][0])
        shape = next((n for n, v in spec["shapes"].items() if v == first), None)
        contact = {k: v for k, v in spec["contact"].items() if not isinstance(v, dict)}
        scene = cls(name=s["name"], frames=s["frames"], substeps=s["substeps"], fps=s["fps"],
                   width=s["width"], height=s["height"], description=s["description"],
                   near=cam["near"], far=cam["far"],
                   camera_eye=tuple(cam.get("eye", (0.0, 1.0, 3.0))),
                   camera_target=tuple(cam.get("target", (0.0, 0.3, 0.0))),
                   fov_y_deg=cam.get("fov_y_deg", 40.0), background=tuple(st["background"]),
                   params=params, default_params=tuple(params), iters=est["iters"],
                   lr=est["lr"], optimizer=est["optimizer"], blur=est["blur"],
                   coarse_iters=est["coarse_iters"], spec=spec, source=source,
                   truth_given=truth_given, shape=shape, contact=contact)
        scene.shapes = tuple(spec["shapes"])
        if est["warmup_from"] == "contact":  # last frames counted from the first contact
            first = scene.first_contact_frame()
            if not np.isfinite(first):
                raise SceneFileError(f"scene file {source}: estimate.warmup_from: \"contact\""
                                     " but no vertex reaches the ground in free flight")
            rows = [(n, int(first) + last) for n, last in rows]
        scene.warmup = tuple(rows) if isinstance(warmup[0], list) else rows[0]
        return scene

    def set_truth(self, values: dict) -> None:
        """:meth:`Scene.set_truth`; the values count as given (written back as ``true``)."""
        super().set_truth(values)
        self.truth_given = {**self.truth_given, **{n: True for n in values}}

    def _bodies(self) -> dict:
        """``{object index: rigid body index}`` of the rigid objects."""
        rigid = [i for i, o in enumerate(self.spec["objects"]) if o["kind"] == "rigid"]
        return {i: j for j, i in enumerate(rigid)}

    def _mass_params(self) -> dict:
        """``{param name: object index}`` of the unknown masses."""
        n = len(self.spec["objects"])
        return {name: (0 if n == 1 else int(name.split("_")[1]))
                for name, p in self.params.items() if p.sim_name == "body_mass"}

    def make_camera(self) -> Camera:
        """The file's camera: look-at (from :attr:`camera_eye` to :attr:`camera_target`,
        the file's values unless changed) or world_to_camera; :attr:`fov_y_deg` or fx,
        fy, cx, cy (in pixels of the file's image size: scaled with the image when
        ``width``/``height`` were overridden)."""
        c = self.spec["camera"]
        size = dict(width=self.width, height=self.height, near=self.near, far=self.far)
        if "fx" in c:
            sx = self.width / self.spec["scene"]["width"]
            sy = self.height / self.spec["scene"]["height"]
            pinhole = (c["fx"] * sx, c["fy"] * sy, c["cx"] * sx, c["cy"] * sy)
        if "world_to_camera" in c:
            return Camera.from_extrinsic(c["world_to_camera"], *pinhole, **size)
        cam = Camera.look_at(self.camera_eye, self.camera_target, up=c["up"],
                             fov_y_deg=self.fov_y_deg, **size)
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
        contact = {k: truth[f"contact_{k}"] if isinstance(v, dict) else self.contact.get(k, v)
                   for k, v in self.spec["contact"].items()}
        b = ModelBuilder(gravity=st["gravity"], ground=st["ground"],
                         ground_height=st["height"], contact_ke=contact["ke"],
                         contact_kd=contact["kd"], contact_kf=contact["kf"],
                         contact_mu=contact["mu"])
        names = {i: n for n, i in self._mass_params().items()}
        bodies = self._bodies()
        # per deformable object: its cloth (cloths), particle ids, region vertices (the
        # mesh frame) and, for a per-particle mass, each particle's volume share
        self._cloths, self._particles, self._regions, self._volumes = {}, {}, {}, {}
        for i, o in enumerate(self.spec["objects"]):
            where = f"objects[{i}]"
            if o["kind"] in ("soft", "cloth"):
                try:
                    self._add_deformable(b, i, o, truth)
                except ValueError as e:
                    raise SceneFileError(f"scene file {self.source}: {where}: {e}") from None
                continue
            if "density" in o:
                amount = dict(density=o["density"])
            else:
                amount = dict(mass=truth[names[i]] if i in names else o["mass"])
            try:
                add_rigid_object(b, o, **amount, position=o["position"],
                            orientation=o["orientation"], velocity=o["velocity"],
                            angular_velocity=o["angular_velocity"], **rigid_damping(o))
            except ValueError as e:
                raise SceneFileError(f"scene file {self.source}: {where}: {e}") from None
        for k, p in enumerate(self.spec["pushes"]):
            if p["object"] not in bodies:  # on a soft or cloth object: configure()
                continue
            point = p.get("point")
            try:
                body = bodies[p["object"]]
                if p["kind"] == "impulse":
                    b.add_body_impulse(body, p["vector"], point=point,
                                       start=p["start"], duration=p["duration"],
                                       frame=p["frame"])
                else:
                    frames = range(*p["frames"]) if "frames" in p else None
                    b.add_body_force(body, p["vector"], point=point, frame=p["frame"],
                                     frames=frames)
            except ValueError as e:
                raise SceneFileError(f"scene file {self.source}: pushes[{k}]: {e}") from None
        # the masses as built (truths of the unknowns), for simulate(); the engine keeps
        # the values of the last rollout instead
        self._built_masses = [b.rigid_body(i).mass for i in range(b.rigid_body_count)]
        return b

    def _add_deformable(self, b, i: int, o: dict, truth: dict) -> None:
        """Add the soft or cloth object ``objects[i]`` to the builder ``b`` at the
        parameters' truths, with its initial velocities."""
        value = {k: truth[k] if isinstance(v, dict) and not per_particle(v) else v
                 for k, v in o.items()}
        if o["kind"] == "cloth":
            aero = {k: o[k] for k in ("lift", "drag") if k in o}
            cloth = self._cloths[i] = b.add_cloth_grid(
                tuple(o["size"]), tuple(o["resolution"]), origin=o["position"],
                plane=o["plane"], density=o["density"], pinned=o["pinned"] or None,
                **{k: value[k] for k in CLOTH_DOCS if k in o}, **aero)
            ids = np.asarray(cloth.particles)
            self._regions[i] = b.particle_rest_positions(ids)
        else:
            density = value["density"]
            if per_particle(density):  # the masses are built from this density
                density = density.get("true", geomean(density))
            ids, self._regions[i] = add_soft(b, o, value["mu"], value["lambda"], density)
            if per_particle(o["density"]):
                self._volumes[i] = b.particle_masses(ids) / density
                if truth["mass"] is not None:  # set_truth, or the last build's
                    b.set_particle_masses(ids, truth["mass"])
        self._particles[i] = ids
        v = o["velocity"]
        if per_particle(v):
            if truth["velocity"] is not None:  # set_truth, or the last build's
                b.set_particle_velocities(ids, truth["velocity"])
                return
            v = v.get("true", [(v["guess_low"] + v["guess_high"]) / 2] * 3)
        x = b.particle_positions(ids)  # the spin is about the mean of the vertices
        b.set_particle_velocities(ids, np.asarray(v, dtype=np.float64)
                                  + np.cross(o["angular_velocity"], x - x.mean(axis=0)))

    def derived_params(self, b) -> dict:
        """The per-particle unknowns' truths (as built), shapes, draw pattern (a
        per-particle mass: each particle's volume share) and coarse basis (the uniform
        density; the affine velocity fields)."""
        out = {}
        for i, o in enumerate(self.spec["objects"]):
            if i in self._volumes:
                m = b.particle_masses(self._particles[i])
                out["mass"] = dict(true=m, shape=m.shape, draw_pattern=self._volumes[i],
                                   basis=np.full((len(m), 1), 1.0 / np.sqrt(len(m))))
            if o["kind"] != "rigid" and per_particle(o["velocity"]):
                ids = self._particles[i]
                v = b.particle_velocities(ids)
                out["velocity"] = dict(true=v, shape=v.shape,
                                       basis=affine_basis(b.particle_rest_positions(ids)))
        return out

    def configure(self, sim) -> None:
        """The pushes on soft and cloth objects: per-frame forces on their regions."""
        pushes = {k: p for k, p in enumerate(self.spec["pushes"])
                  if p["object"] in self._particles}
        if not pushes:
            return
        x0 = sim.get_param("initial_position")
        force = np.zeros(sim.params["external_force"].shape)
        for k, p in pushes.items():
            i = p["object"]
            ids = self._particles[i][region_mask(self._regions[i], p["region"])]
            frames = slice(*p["frames"]) if "frames" in p else slice(None)
            force[frames, ids] += np.asarray(p["vector"]) / len(ids)
            if "torque" in p:
                try:
                    force[frames, ids] += couple(x0[ids], p["torque"])
                except ValueError as e:
                    raise SceneFileError(f"scene file {self.source}: pushes[{k}].torque: "
                                         f"{e}") from None
        sim.set_param("external_force", force)

    def first_contact_frame(self) -> float:
        """The frame at which a vertex first reaches the ground in free flight (gravity
        alone, from the initial positions and velocities; rotation and the particles'
        contact radius ignored): each soft or cloth particle, each rigid body's mesh
        vertices at its initial pose moving with its centre's velocity. ``inf`` when
        none does; a SceneFileError when gravity does not pull towards the ground."""
        from gradsim_taichi.checks import placement_rotation

        st = self.spec["stage"]
        a = st["gravity"][1]
        if not a < 0:
            raise SceneFileError(f"scene file {self.source}: estimate.warmup_from: "
                                 "\"contact\" needs gravity towards the ground "
                                 f"(stage.gravity[1] < 0); got {a}")
        b = self.build_model()
        y, vy = [b.particle_positions()[:, 1]], [b.particle_velocities()[:, 1]]
        for j in range(b.rigid_body_count):
            r = b.rigid_body(j)
            rot = placement_rotation(r.orientation, None, "first_contact_frame")
            y.append((r.position + r.vertices @ rot.T)[:, 1])
            vy.append(np.full(len(r.vertices), r.velocity[1]))
        h, v = np.maximum(np.concatenate(y) - st["height"], 0.0), np.concatenate(vy)
        if not len(h):
            return float("inf")
        t = (v + np.sqrt(v ** 2 - 2 * a * h)) / -a  # h + v t + a t^2 / 2 = 0, t >= 0
        return float(t.min() * self.fps)

    def render_parts(self, model):
        parts = []
        objects = self.spec["objects"]
        rigid = [o for o in objects if o["kind"] == "rigid"]
        for o, m in zip(rigid, model.rigid_meshes()):
            look = (dict(face_colors=normal_face_colors(m.vertices, m.faces, o["color"]))
                    if o["shading"] == "normals" else dict(color=o["color"]))
            parts.append(RenderPart(Mesh(m.faces, smooth=False, **look), output="rigid",
                                    vertex_ids=m.rows))
        rest = self.sim.get_param("initial_position") if self._particles else None
        soft = [o for o in objects if o["kind"] == "soft"]
        for o, (offset, tris) in zip(soft, getattr(model, "soft_surfaces", [])):
            ids = offset + np.arange(tris.max() + 1)
            parts.append(RenderPart(Mesh(tris, **ramp_look(rest[ids], o["color"], o["ramp"])),
                                    output="particles", vertex_ids=ids))
        for i, cloth in getattr(self, "_cloths", {}).items():
            ids = np.asarray(cloth.particles)
            local = np.searchsorted(ids, np.asarray(cloth.faces))  # ids are increasing
            o = objects[i]
            parts.append(RenderPart(Mesh(local, two_sided=True,
                                         **ramp_look(rest[ids], o["color"], o["ramp"])),
                                    output="particles", vertex_ids=ids))
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
        objects = {j: i for i, j in self._bodies().items()}  # body -> object index
        column = [values[n].reshape(()) if (n := name_of(masses, objects[j])) in values
                  else built[j] for j in range(len(built))]
        engine = {self.params[k].sim_name: v for k, v in values.items() if k not in masses}
        engine["body_mass"] = torch.stack(column)
        return simulate(self.sim, engine, frames)

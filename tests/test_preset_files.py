"""The rigid presets are their shipped scene files (gradsim_taichi/scenes/files/*.toml):
for every shape and both presets, the scene loaded from the file rolls out and renders
as a scene built here directly through ModelBuilder calls (what the presets' Python
classes did), to 1e-12, and carries the same unknowns and optimiser schedule."""

from dataclasses import dataclass, field

import numpy as np
import pytest
import torch

from gradsim_taichi.builder import ModelBuilder
from gradsim_taichi.render import Mesh
from gradsim_taichi.scenes import SCENES, ParamSpec, RenderPart, Scene, ground_part, make_scene

SHAPES = ("box", "cone", "cylinder", "lshape")
SMALL = dict(frames=20, width=24, height=24)  # 20 frames: the body lands (frame ~12)


def _lshape(size=0.4, thickness=0.2):
    import trimesh

    from gradsim_taichi.meshes import triangulate_polygon

    s, t = size, size / 2
    poly = np.array([[0, 0], [s, 0], [s, t], [t, t], [t, s], [0, s]]) - s / 3
    pts, tris = triangulate_polygon(poly, interior=False)
    mesh = trimesh.creation.extrude_triangulation(pts, tris, thickness)
    mesh.apply_translation([0, 0, -thickness / 2])
    mesh.fix_normals()
    return mesh


def _face_colors(v, faces, base=(0.75, 0.3, 0.2)):
    n = np.cross(v[faces[:, 1]] - v[faces[:, 0]], v[faces[:, 2]] - v[faces[:, 0]])
    n /= np.linalg.norm(n, axis=1, keepdims=True) + 1e-12
    return np.clip(np.asarray(base) + 0.25 * n, 0.05, 0.95)


def _contact_params():
    return {"mass": ParamSpec("body_mass", 4.0, 2.0, 12.0, doc="mass of the body [kg]"),
            "contact_ke": ParamSpec("contact_ke", 5e3, 2.5e3, 1e4, doc="normal stiffness [N/m]"),
            "contact_kd": ParamSpec("contact_kd", 100.0, 50.0, 200.0,
                                    doc="normal damping [N s/m]"),
            "contact_kf": ParamSpec("contact_kf", 100.0, 50.0, 200.0,
                                    doc="friction stiffness [N s/m]"),
            "contact_mu": ParamSpec("contact_mu", 0.4, 0.2, 0.8, doc="Coulomb friction")}


@dataclass
class Reference(Scene):
    """The rigid presets as their Python classes built them."""

    shape: str = "box"
    impulse: tuple = (3.0, 1.0, 0.0)
    params: dict = field(default_factory=lambda: {
        "mass": ParamSpec("body_mass", 4.0, 2.0, 12.0, doc="mass of the body [kg]")})
    camera_eye: tuple = (0.0, 0.8, 1.8)
    camera_target: tuple = (0.0, 0.2, 0.0)

    def build_model(self):
        truth = {k: s.true for k, s in self.params.items()}
        c = {k: truth.get(f"contact_{k}", v)
             for k, v in dict(ke=5e3, kd=100.0, kf=100.0, mu=0.4).items()}
        b = ModelBuilder(contact_ke=c["ke"], contact_kd=c["kd"], contact_kf=c["kf"],
                         contact_mu=c["mu"])
        q = np.array([np.cos(0.3), 0.3 * np.sin(0.3), np.sin(0.3), 0.2 * np.sin(0.3)])
        kw = dict(mass=truth["mass"], position=(-0.4, 0.4, 0.0),
                  orientation=q / np.linalg.norm(q))
        if self.shape == "box":
            body = b.add_rigid_box((0.4, 0.3, 0.3), **kw)
        elif self.shape == "cone":
            body = b.add_rigid_cone(0.2, 0.4, sections=16, **kw)
        elif self.shape == "cylinder":
            body = b.add_rigid_cylinder(0.15, 0.4, sections=16, **kw)
        else:
            body = b.add_rigid_body(_lshape(), **kw)
        b.add_body_impulse(body, self.impulse, point=(0.0, 0.1, 0.1), start=0.0,
                           duration=1.0 / self.fps)
        return b

    def render_parts(self, model):
        return [RenderPart(Mesh(m.faces, face_colors=_face_colors(m.vertices, m.faces),
                                smooth=False), output="rigid", vertex_ids=m.rows)
                for m in model.rigid_meshes()] + [ground_part()]


def reference(preset, shape, **kw):
    if preset == "rigid-mass":
        return Reference(shape=shape, **kw)
    return Reference(shape=shape, impulse=(6.0, -2.0, 0.0), params=_contact_params(), **kw)


# the presets' optimiser schedules, as their classes declared them
SCHEDULES = {
    "rigid-mass": dict(frames=40, optimizer="lbfgs+lm", iters=12, lr=1.0, blur=0.0,
                       warmup=(4, 12), default_params=("mass",)),
    "rigid-contact": dict(frames=50, optimizer="lm", iters=60, lr=0.5, blur=1.5,
                          warmup=tuple((4, last) for last in (4, 6, 9, 12, 15, 18, 21, 24,
                                                              27, 30, 33, 36, 40, 45)),
                          default_params=("mass", "contact_ke", "contact_kd", "contact_kf",
                                          "contact_mu")),
}


def _rollout(scene):
    with torch.no_grad():
        out = scene.simulate(scene.true_values(scene.params))
        return out["rigid"], scene.render(out)


@pytest.mark.parametrize("preset", ["rigid-mass", "rigid-contact"])
def test_the_preset_schedule_and_unknowns_are_the_files(preset):
    scene = make_scene(preset)
    for key, value in SCHEDULES[preset].items():
        assert getattr(scene, key) == value, key
    ref = reference(preset, "box")
    assert list(scene.params) == list(ref.params)
    for name, spec in ref.params.items():
        got = scene.params[name]
        assert (got.sim_name, got.true, got.low, got.high, got.doc) == (
            spec.sim_name, spec.true, spec.low, spec.high, spec.doc), name
    assert tuple(SCENES[preset].shapes) == SHAPES
    assert (scene.width, scene.height, scene.substeps, scene.fps) == (64, 64, 32, 60.0)


@pytest.mark.parametrize("preset", ["rigid-mass", "rigid-contact"])
@pytest.mark.parametrize("shape", SHAPES)
def test_the_preset_file_rolls_out_and_renders_as_the_builder_calls(preset, shape):
    scene = make_scene(preset, shape=shape, **SMALL)
    ref = reference(preset, shape, **SMALL)
    x0, frames0 = _rollout(ref)
    x1, frames1 = _rollout(scene)
    assert x0.shape == x1.shape and frames0.shape == frames1.shape == (21, 24, 24, 4)
    assert float((x0 - x0[0]).abs().max()) > 0.1  # it moves
    assert float(x0[:, :, 1].min()) < 0.01  # and reaches the ground
    assert float((x0 - x1).abs().max()) <= 1e-12
    assert float((frames0 - frames1).abs().max()) <= 1e-12
    # the shapes differ: the variant is really applied
    if shape != "box":
        box = make_scene(preset, shape="box", **SMALL)
        assert box.spec["objects"][0]["shape"] == "box"
        assert scene.spec["objects"][0]["shape"] == shape

"""Soft (FEM) and cloth objects in scene files: the file builds what the ModelBuilder
calls build, a tet mesh file is the same solid as the primitive, file -> scene -> file
round trips, unknown Lame parameters and cloth stiffnesses become parameters, and errors
name the key."""

import numpy as np
import pytest
import torch

from gradsim_taichi.builder import ModelBuilder
from gradsim_taichi.scenes.scene_file import SceneFileError, load_scene_file, scene_from_toml
from gradsim_taichi.scenes.scene_file_writer import scene_to_toml

# a soft ball thrown onto the ground (contact soft enough for its light particles)
SOFT = """
[scene]
name = "soft-ball"
fps = 60.0
frames = 12
substeps = 32
width = 24
height = 24

[camera]
eye = [0.0, 0.6, 1.6]
target = [0.0, 0.2, 0.0]

[contact]
ke = 2000.0
kd = 5.0
kf = 10.0
mu = 0.5

[[objects]]
kind = "soft"
shape = "ball"
radius = 0.15
subdivisions = 1
position = [-0.1, 0.25, 0.0]
velocity = [0.8, -0.5, 0.0]
density = 150.0
mu = { unknown = true, guess_low = 8000.0, guess_high = 30000.0, true = 15000.0 }
lambda = 23000.0
damping = 1.0
"""


def rollout(scene, values=None):
    with torch.no_grad():
        out = scene.simulate(scene.true_values(scene.params) if values is None else values)
        return out["particles"], scene.render(out)


def positions(builder, frames, substeps=32, fps=60.0):
    from gradsim_taichi.simulation import Simulation

    sim = Simulation(builder.finalize(), frames=frames, substeps=substeps, fps=fps)
    return torch.as_tensor(np.asarray(sim.forward()["particles"]))


def test_a_soft_ball_is_what_the_builder_calls_build():
    scene = scene_from_toml(SOFT)
    assert list(scene.params) == ["mu"] and scene.params["mu"].sim_name == "tet_mu"
    assert scene.params["mu"].doc == "Lame mu [Pa]"
    x, frames = rollout(scene)
    b = ModelBuilder(contact_ke=2000.0, contact_kd=5.0, contact_kf=10.0, contact_mu=0.5)
    b.add_soft_ball(0.15, subdivisions=1, origin=(-0.1, 0.25, 0.0), velocity=(0.8, -0.5, 0.0),
                    density=150.0, mu=15000.0, lam=23000.0, damping=1.0)
    ref = positions(b, 12)
    assert x.shape == ref.shape and float((x - ref).abs().max()) <= 1e-12
    assert float(x[:, :, 1].min()) < 0.02  # it reaches the ground
    assert frames.shape == (13, 24, 24, 4) and float((frames[-1] - frames[0]).abs().max()) > 0.1
    # mu drives the rollout: another value, another motion
    other, _ = rollout(scene, {"mu": torch.tensor(30000.0, dtype=torch.float64)})
    assert float((other - x).abs().max()) > 1e-4


def test_soft_file_to_scene_to_file_round_trips(tmp_path):
    scene = scene_from_toml(SOFT)
    text = scene_to_toml(scene)
    path = tmp_path / "again.toml"
    path.write_text(text)
    again = load_scene_file(path)
    assert again.spec == scene.spec and scene_to_toml(again) == text
    x0, f0 = rollout(scene)
    x1, f1 = rollout(again)
    assert float((x0 - x1).abs().max()) <= 1e-12 and float((f0 - f1).abs().max()) <= 1e-12


def test_a_tet_mesh_file_is_the_same_solid_as_the_primitive(tmp_path):
    from gradsim_taichi.meshes import tet_box, write_tet_mesh

    box = SOFT.replace('shape = "ball"\nradius = 0.15\nsubdivisions = 1',
                       'shape = "box"\nextents = [0.2, 0.1, 0.1]\nresolution = [2, 1, 1]')
    v, t = tet_box(size=(0.2, 0.1, 0.1), resolution=(2, 1, 1))
    write_tet_mesh(tmp_path / "box.vtu", v * 100.0, t)  # in centimetres
    path = tmp_path / "mesh.toml"
    path.write_text(box.replace('shape = "box"\nextents = [0.2, 0.1, 0.1]\nresolution = '
                                '[2, 1, 1]', 'mesh = "box.vtu"\nscale = 0.01'))
    x_prim, _ = rollout(scene_from_toml(box))
    x_mesh, _ = rollout(load_scene_file(path))
    assert x_prim.shape == x_mesh.shape
    assert float((x_prim - x_mesh).abs().max()) < 1e-9


def test_a_rigid_body_and_a_soft_ball_together():
    rigid = """
[[objects]]
kind = "rigid"
shape = "box"
extents = [0.2, 0.2, 0.2]
position = [0.3, 0.3, 0.0]
mass = { unknown = true, guess_low = 0.5, guess_high = 2.0, true = 1.0 }

[[pushes]]
object = 1
kind = "impulse"
vector = [-1.0, 0.5, 0.0]
duration = 0.016666666666666666
"""
    scene = scene_from_toml(SOFT + rigid)
    assert list(scene.params) == ["mu", "mass_1"]
    with torch.no_grad():
        out = scene.simulate(scene.true_values(scene.params))
        heavier = scene.simulate({"mass_1": torch.tensor(2.0, dtype=torch.float64),
                                  "mu": torch.tensor(15000.0, dtype=torch.float64)})
    assert set(out) >= {"particles", "rigid"} and len(scene.parts) == 3  # ball, box, stage
    assert float((out["particles"] - heavier["particles"]).abs().max()) <= 1e-12
    assert float((out["rigid"] - heavier["rigid"]).abs().max()) > 1e-4  # half the push


@pytest.mark.parametrize("old, new, words", [
    ('shape = "ball"', 'shape = "cone"', ["objects[0].shape: expected one of box, ball for "
                                          "a soft object", "'cone'"]),
    ("lambda = 23000.0\n", "", ["objects[0].lambda: missing"]),
    ("damping = 1.0", "damping = -1.0", ["objects[0].damping: expected a number >= 0"]),
    ("radius = 0.15\n", "", ["objects[0].radius: missing; a soft ball needs radius"]),
    ("density = 150.0", "mass = 1.0", ["objects[0].mass: unknown key"]),
    ('kind = "soft"', 'kind = "jelly"', ["objects[0].kind: expected one of rigid, soft, "
                                         "cloth"]),
    ('shape = "ball"\nradius = 0.15\nsubdivisions = 1', 'mesh = "nowhere.msh"',
     ["objects[0].mesh: tet mesh file not found"]),
    ('shape = "ball"\nradius = 0.15\nsubdivisions = 1', 'mesh = "junk.msh"',
     ["objects[0].mesh: cannot read", "as a tetrahedral mesh"]),
])
def test_soft_errors_name_the_key(tmp_path, old, new, words):
    assert old in SOFT
    (tmp_path / "junk.msh").write_text("not a mesh\n")
    path = tmp_path / "bad.toml"
    path.write_text(SOFT.replace(old, new))
    with pytest.raises((SceneFileError, FileNotFoundError)) as info:
        load_scene_file(path)
    for w in words:
        assert w in str(info.value)


def test_impulses_on_soft_objects_and_several_unknown_soft_are_refused():
    push = ('\n[[pushes]]\nobject = 0\nkind = "impulse"\nvector = [1.0, 0.0, 0.0]\n'
            'duration = 0.1\n')
    with pytest.raises(SceneFileError, match=r"pushes\[0\].kind: expected \"force\" for a "
                                             r"soft or cloth object"):
        scene_from_toml(SOFT + push)
    second = SOFT[SOFT.index("[[objects]]"):].replace("-0.1, 0.25", "0.3, 0.25")
    with pytest.raises(SceneFileError, match=r"objects\[0\].mu: an unknown mu needs a "
                                             r"single soft object"):
        scene_from_toml(SOFT + second)


def test_cli_scene_check_lists_a_soft_object(tmp_path, capsys):
    from gradsim_taichi.cli import main

    path = tmp_path / "soft.toml"
    path.write_text(SOFT)
    assert main(["scene", "check", str(path)]) == 0
    out = capsys.readouterr().out
    assert "objects[0]: soft ball, density 150, mu unknown (8000..30000), lambda 23000" in out
    assert "unknown mu: guesses 8000..30000, true 15000" in out


def test_estimate_the_unknown_mu_of_a_soft_ball():
    from gradsim_taichi.estimation import estimate, render_target

    scene = scene_from_toml(SOFT)
    result = estimate(scene, render_target(scene), init={"mu": 25000.0}, iters=6,
                      progress=False, uncertainty=False)
    assert abs(float(result.init["mu"]) - 15000.0) / 15000.0 > 0.5
    # measured: 1.1e-14 (L-BFGS, 6 iterations)
    assert abs(float(result.params["mu"]) - 15000.0) / 15000.0 < 1e-9


CLOTH = SOFT[:SOFT.index("[contact]")] + """
[contact]
ke = 1000.0
kd = 0.5
kf = 1.0
mu = 0.5

[[objects]]
kind = "cloth"
size = [0.5, 0.5]
resolution = [4, 4]
position = [-0.25, 0.3, -0.25]
velocity = [0.3, 0.5, 0.0]
density = 1.0
pinned = ["top_left"]
tri_ke = { unknown = true, guess_low = 100.0, guess_high = 400.0, true = 200.0 }
tri_ka = 200.0
tri_kd = 1.0
edge_ke = 0.5
edge_kd = 0.0
"""


def test_a_cloth_is_what_the_builder_calls_build_and_round_trips():
    scene = scene_from_toml(CLOTH)
    assert list(scene.params) == ["tri_ke"] and scene.params["tri_ke"].sim_name == "tri_ke"
    x, frames = rollout(scene)
    b = ModelBuilder(contact_ke=1e3, contact_kd=0.5, contact_kf=1.0, contact_mu=0.5)
    b.add_cloth_grid((0.5, 0.5), (4, 4), origin=(-0.25, 0.3, -0.25), density=1.0,
                     velocity=(0.3, 0.5, 0.0), pinned=["top_left"], tri_ke=200.0,
                     tri_ka=200.0, tri_kd=1.0, edge_ke=0.5, edge_kd=0.0)
    ref = positions(b, 12)
    assert x.shape == ref.shape == (13, 25, 3) and float((x - ref).abs().max()) <= 1e-12
    assert float((x[-1] - x[0]).abs().max()) > 0.05
    assert float((frames[-1] - frames[0]).abs().max()) > 0.1  # drawn, and it moves
    stiffer, _ = rollout(scene, {"tri_ke": torch.tensor(400.0, dtype=torch.float64)})
    assert float((stiffer - x).abs().max()) > 1e-6
    text = scene_to_toml(scene)
    again = scene_from_toml(text)
    assert again.spec == scene.spec and scene_to_toml(again) == text
    x1, f1 = rollout(again)
    assert float((x1 - x).abs().max()) <= 1e-12 and float((f1 - frames).abs().max()) <= 1e-12


@pytest.mark.parametrize("old, new, words", [
    ("size = [0.5, 0.5]\n", "", ["objects[0].size: missing"]),
    ('pinned = ["top_left"]', 'pinned = ["middle"]', ["objects[0].pinned: expected a list "
                                                      "of names from corners"]),
    ("edge_kd = 0.0", "edge_kd = -1.0", ["objects[0].edge_kd: expected a number >= 0"]),
    ("tri_ka = 200.0", "tri_ka = 0.0", ["objects[0].tri_ka: expected a number > 0"]),
    ("resolution = [4, 4]", "resolution = [4, 0]", ["objects[0].resolution[1]: expected "
                                                    "an integer >= 1"]),
    ("density = 1.0", "density = 1.0\nmass = 1.0", ["objects[0].mass: unknown key"]),
])
def test_cloth_errors_name_the_key(old, new, words):
    assert old in CLOTH
    with pytest.raises(SceneFileError) as info:
        scene_from_toml(CLOTH.replace(old, new))
    for w in words:
        assert w in str(info.value)


def test_cli_scene_check_lists_a_cloth(tmp_path, capsys):
    from gradsim_taichi.cli import main

    path = tmp_path / "cloth.toml"
    path.write_text(CLOTH)
    assert main(["scene", "check", str(path)]) == 0
    out = capsys.readouterr().out
    assert "objects[0]: cloth 0.5 x 0.5 m, 4x4 cells, density 1 kg/m^2" in out
    assert "unknown tri_ke: guesses 100..400, true 200" in out


# ---- the keys the soft presets brought (fem-beam, fem-ball, cloth-velocity) --------------
PUSHED = SOFT.replace("density = 150.0", 'density = { unknown = "per_particle", guess_low = '
                      '75.0, guess_high = 300.0, true = 150.0 }\npinned = ["min_x"]\nramp = 0.3\n'
                      "angular_velocity = [0.0, 1.0, 0.0]") + """
[estimate]
coarse_iters = 2
warmup = [[2, 1], [2, 3]]
warmup_from = "contact"

[[pushes]]
object = 0
kind = "force"
region = "max_y"
vector = [0.0, 1.0, 0.0]
torque = [0.0, 0.1, 0.0]
frames = [0, 2]
"""
AERO = CLOTH.replace("velocity = [0.3, 0.5, 0.0]",
                     'velocity = { unknown = "per_particle", guess_low = -1.0, guess_high = 1.0, '
                     "true = [0.3, 0.5, 0.0] }\nangular_velocity = [0.0, 2.0, 0.0]\nramp = 0.3\n"
                     "lift = 0.5\ndrag = 1.0")


@pytest.mark.parametrize("text, old, new, words", [
    (PUSHED, 'pinned = ["min_x"]', 'pinned = ["left"]',
     ["objects[0].pinned: expected a list of faces from min_x, max_x"]),
    (PUSHED, "ramp = 0.3", "ramp = -0.3", ["objects[0].ramp: expected a number >= 0"]),
    (PUSHED, "angular_velocity = [0.0, 1.0, 0.0]", "angular_velocity = [1.0, 0.0]",
     ["objects[0].angular_velocity: expected a list of 3 numbers"]),
    (PUSHED, "guess_low = 75.0", "guess_low = 0.0",
     ["objects[0].density.guess_low: expected a number > 0"]),
    (PUSHED, "true = 150.0", "true = [150.0]", ["objects[0].density.true: expected a number"]),
    (PUSHED, 'unknown = "per_particle"', 'unknown = "per_tet"',
     ["objects[0].density.unknown: expected true or \"per_particle\"", "'per_tet'"]),
    (AERO, 'unknown = "per_particle"', "unknown = true",
     ["objects[0].velocity.unknown: expected \"per_particle\" (one unknown per particle)"]),
    (AERO, "true = [0.3, 0.5, 0.0]", "true = 0.3",
     ["objects[0].velocity.true: expected a list of 3 numbers"]),
    (AERO, "guess_high = 1.0", "guess_high = -2.0",
     ["objects[0].velocity.guess_high: expected a number > guess_low (-1.0)"]),
    (AERO, "lift = 0.5", "lift = -0.5", ["objects[0].lift: expected a number >= 0"]),
    (AERO, "drag = 1.0", 'drag = "strong"', ["objects[0].drag: expected a number"]),
    (AERO, "ramp = 0.3", 'ramp = "yes"', ["objects[0].ramp: expected a number"]),
    (PUSHED, 'region = "max_y"', 'region = "top"',
     ["pushes[0].region: expected one of all, min_x, max_x"]),
    (PUSHED, "torque = [0.0, 0.1, 0.0]", "torque = 0.1",
     ["pushes[0].torque: expected a list of 3 numbers"]),
    (PUSHED, 'region = "max_y"', "point = [0.0, 0.0, 0.0]",
     ["pushes[0].point: a push on a soft or cloth object is a force on a region"]),
    (PUSHED, "coarse_iters = 2", "coarse_iters = -1",
     ["estimate.coarse_iters: expected an integer >= 0"]),
    (PUSHED, 'warmup_from = "contact"', 'warmup_from = "end"',
     ["estimate.warmup_from: expected one of start, contact"]),
])
def test_the_soft_presets_keys_name_their_errors(text, old, new, words):
    assert old in text
    scene_from_toml(text)  # the file as written is fine
    with pytest.raises(SceneFileError) as info:
        scene_from_toml(text.replace(old, new))
    for w in words:
        assert w in str(info.value)


def test_region_and_torque_push_deformable_objects_and_per_particle_needs_one():
    rigid = ('\n[[objects]]\nkind = "rigid"\nshape = "box"\nextents = [0.1, 0.1, 0.1]\n'
             "position = [0.5, 0.3, 0.0]\nmass = 1.0\n")
    push = ('\n[[pushes]]\nobject = 1\nkind = "force"\nregion = "max_y"\n'
            "vector = [0.0, 1.0, 0.0]\n")
    with pytest.raises(SceneFileError, match=r"pushes\[0\].region: for a push on a soft or "
                                             "cloth object"):
        scene_from_toml(SOFT + rigid + push)
    known = SOFT.replace("mu = { unknown = true, guess_low = 8000.0, guess_high = 30000.0, "
                         "true = 15000.0 }", "mu = 15000.0")
    second = known[known.index("[[objects]]"):].replace("-0.1, 0.25", "0.3, 0.25")
    per_particle = 'density = { unknown = "per_particle", guess_low = 75.0, guess_high = 300.0 }'
    with pytest.raises(SceneFileError, match=r"objects\[0\].density: an unknown density "
                                             r"needs a single soft object"):
        scene_from_toml(known.replace("density = 150.0", per_particle)
                        + second.replace("density = 150.0", per_particle))
    moving = ('velocity = { unknown = "per_particle", guess_low = -1.0, guess_high = 1.0 }')
    cloth = CLOTH[CLOTH.index("[[objects]]"):].replace("velocity = [0.3, 0.5, 0.0]", moving)
    with pytest.raises(SceneFileError, match=r"objects\[0\].velocity: an unknown velocity "
                                             r"needs a single soft or cloth object"):
        scene_from_toml(known.replace("velocity = [0.8, -0.5, 0.0]", moving) + cloth)


def test_a_per_particle_unknown_builds_its_spec_and_the_spin():
    scene = scene_from_toml(PUSHED)
    spec = scene.params["mass"]
    assert (spec.sim_name, spec.shape, spec.draw_shape, spec.low, spec.high) == (
        "mass", (-1,), (), 75.0, 300.0)
    b = scene.build_model()
    ids = scene._particles[0]
    x, v = b.particle_positions(ids), b.particle_velocities(ids)
    r = x - x.mean(axis=0)
    np.testing.assert_array_equal(v, np.asarray([0.8, -0.5, 0.0]) + np.cross([0.0, 1.0, 0.0], r))
    derived = scene.derived_params(b)["mass"]
    np.testing.assert_allclose(derived["draw_pattern"] * 150.0, b.particle_masses(ids),
                               rtol=1e-15)
    pinned = b.particle_pinned(ids)
    assert pinned.any() and np.allclose(x[pinned, 0], x[:, 0].min())
    # the first contact of the thrown ball, from free flight: lowest vertex 0.1 m up
    t = (-0.5 + np.sqrt(0.25 + 2 * 9.8 * (x[:, 1].min()))) / 9.8 * 60
    assert abs(scene.first_contact_frame() - t) < 1e-9
    assert scene.warmup == ((2, int(t) + 1), (2, int(t) + 3)) and scene.coarse_iters == 2


def test_a_torque_on_a_line_of_vertices_is_an_error_naming_the_push():
    push = ('\n[[pushes]]\nobject = 0\nkind = "force"\nregion = "min_x"\n'
            "vector = [0.0, 0.0, 0.0]\ntorque = [0.0, 0.0, 1.0]\n")
    scene = scene_from_toml(CLOTH + push)  # min_x of a flat cloth: one line along z
    with pytest.raises(SceneFileError, match=r"pushes\[0\].torque: a torque needs a region "
                                             "of vertices not all on one line"):
        scene.build()

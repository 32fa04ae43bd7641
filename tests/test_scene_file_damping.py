"""A rigid body's velocity damping in scene files and on the command line: the keys reach
the engine, round trip through the writer, and ``--damping``'s values are checked."""

import pytest
from test_scene_file import BASE, rollout

from gradsim_taichi.scenes import make_scene
from gradsim_taichi.scenes.scene_file import scene_from_toml
from gradsim_taichi.scenes.scene_file_writer import scene_to_toml


def test_damping_reaches_the_engine_and_round_trips():
    """A rigid object's damping keys are the builder's: the engine holds them, the
    rollout differs from the undamped one, and the file written back reads back to it."""
    damping = dict(linear_damping=0.4, linear_drag=0.3, angular_damping=0.2,
                   angular_drag=0.1)
    text = BASE.replace("mass = {", "".join(f"{k} = {v}\n" for k, v in damping.items())
                        + "mass = {")
    scene = scene_from_toml(text)
    scene.build()
    for key, value in damping.items():
        assert scene.sim.get_param(f"body_{key}") == pytest.approx([value])
    x, _ = rollout(scene)
    x_free, _ = rollout(scene_from_toml(BASE))
    assert float((x - x_free).abs().max()) > 1e-3
    written = scene_to_toml(scene)
    assert all(f"{k} = {v}" in written for k, v in damping.items())
    assert "damping" not in scene_to_toml(scene_from_toml(BASE))  # only when given
    again, _ = rollout(scene_from_toml(written))
    assert float((again - x).abs().max()) < 1e-12


def test_damping_given_on_the_command_line_reaches_every_rigid_body():
    from gradsim_taichi.scenes.scene_file_schema import (
        RIGID_DAMPING,
        parse_damping,
        with_damping,
    )

    assert parse_damping("PyBullet") == dict.fromkeys(RIGID_DAMPING, 0.04)
    assert parse_damping(" pybullet ") == parse_damping("0.04,0.04,0.04,0.04")
    assert parse_damping("0.5") == dict.fromkeys(RIGID_DAMPING, 0.5)
    assert list(parse_damping("1,2,3,4").values()) == [1.0, 2.0, 3.0, 4.0]
    for bad in ("-1", "nan", "1,2", "fast", "1,2,3,4,5"):
        with pytest.raises(ValueError, match="expected 'pybullet', one number >= 0 or four"):
            parse_damping(bad)
    scene = make_scene("rigid-mass", frames=2)
    spec = scene.spec
    scene.spec = with_damping(spec, parse_damping("1,2,3,4"))
    assert "linear_damping" not in spec["objects"][0]  # a copy: the preset's is unchanged
    scene.build()
    for key, value in zip(RIGID_DAMPING, (1.0, 2.0, 3.0, 4.0)):
        assert scene.sim.get_param(f"body_{key}") == pytest.approx([value])
    fresh = make_scene("rigid-mass", frames=2)
    fresh.build()
    assert fresh.sim.get_param("body_linear_damping") == pytest.approx([0.0])

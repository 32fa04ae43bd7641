"""Mass, centre of mass and inertia of closed meshes: analytic values and trimesh."""

import numpy as np
import pytest
import trimesh

from gradsim_taichi.mass_properties import mass_properties

RHO = 700.0


def _props(mesh):
    return mass_properties(mesh.vertices, mesh.faces, density=RHO)


def _close(a, b, rel, scale=None):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    scale = np.abs(b).max() if scale is None else scale
    assert np.abs(a - b).max() <= rel * scale, (a, b)


def test_box_analytic():
    a, b, c = 0.3, 0.5, 1.1
    p = _props(trimesh.creation.box((a, b, c)))
    m = RHO * a * b * c
    _close(p.mass, m, 1e-12)
    _close(p.inertia, np.diag([b * b + c * c, a * a + c * c, a * a + b * b]) * m / 12, 1e-12)
    assert np.abs(p.com).max() < 1e-14


def test_sphere_analytic():
    r = 0.4
    p = _props(trimesh.creation.icosphere(3, r))
    m = RHO * 4 / 3 * np.pi * r**3
    _close(p.mass, m, 0.02)
    _close(p.inertia, np.eye(3) * 0.4 * m * r * r, 0.02)


def test_cylinder_analytic():
    r, h = 0.3, 0.8
    p = _props(trimesh.creation.cylinder(r, h, sections=64))
    m = RHO * np.pi * r * r * h
    _close(p.mass, m, 0.01)
    i_side = m * (3 * r * r + h * h) / 12
    _close(p.inertia, np.diag([i_side, i_side, m * r * r / 2]), 0.01)


def test_cone_analytic():
    r, h = 0.3, 0.9
    p = _props(trimesh.creation.cone(r, h, sections=64))
    m = RHO * np.pi * r * r * h / 3
    _close(p.mass, m, 0.01)
    _close(p.com, [0.0, 0.0, h / 4], 0.01)  # base at z = 0
    i_side = m * (3 * r * r / 20 + 3 * h * h / 80)
    _close(p.inertia, np.diag([i_side, i_side, 0.3 * m * r * r]), 0.01)


@pytest.mark.parametrize("make", [
    lambda: trimesh.creation.box((0.2, 0.7, 0.4)),
    lambda: trimesh.creation.icosphere(2, 0.3),
    lambda: trimesh.creation.cylinder(0.2, 0.5, sections=17),
    lambda: trimesh.creation.cone(0.3, 0.4, sections=11),
    lambda: trimesh.creation.capsule(0.6, 0.2),
    # asymmetric and off-origin: rotated, shifted, non-convex (a torus)
    lambda: trimesh.creation.torus(0.5, 0.15).apply_transform(
        trimesh.transformations.random_rotation_matrix(np.random.default_rng(1).random(3)))
    .apply_translation((0.3, -1.0, 2.0)),
])
def test_matches_trimesh(make):
    mesh = make()
    mesh.density = RHO
    p = _props(mesh)
    _close(p.mass, mesh.mass, 1e-6)
    _close(p.com, mesh.center_mass, 1e-6, scale=mesh.scale)  # relative to the size
    _close(p.inertia, mesh.moment_inertia, 1e-6)


def test_given_mass_and_inward_winding():
    mesh = trimesh.creation.box((1.0, 2.0, 3.0))
    p = mass_properties(mesh.vertices, mesh.faces, mass=2.0)
    assert p.mass == pytest.approx(2.0) and p.density == pytest.approx(2.0 / 6.0)
    q = mass_properties(mesh.vertices, mesh.faces[:, ::-1], mass=2.0)  # wound inward
    np.testing.assert_allclose(q.inertia, p.inertia, rtol=1e-12)


def test_bad_meshes():
    box = trimesh.creation.box()
    with pytest.raises(ValueError, match="not watertight"):
        mass_properties(box.vertices, box.faces[:-1], density=1.0)  # a hole
    faces = box.faces.copy()
    faces[0] = faces[0][::-1]
    with pytest.raises(ValueError, match="inconsistently wound"):
        mass_properties(box.vertices, faces, density=1.0)
    with pytest.raises(ValueError, match="exactly one of density"):
        mass_properties(box.vertices, box.faces)
    with pytest.raises(ValueError, match="density must be > 0"):
        mass_properties(box.vertices, box.faces, density=-1.0)
    with pytest.raises(ValueError, match="shape"):
        mass_properties(box.vertices[:, :2], box.faces, density=1.0)

"""The ModelBuilder's public particle and body API: reads of positions, velocities,
masses and pins; per-particle masses and initial velocities; a start pose apart from
the rest pose (elastic forces at t = 0 point back to the rest shape, for springs, cloth
and tets alike); rigid-body reads; clear errors for bad input."""

import numpy as np
import pytest

import gradsim_taichi as gs


def free_builder():
    """No ground, no gravity: any motion comes from the model's own forces."""
    return gs.ModelBuilder(gravity=(0.0, 0.0, 0.0), ground=False)


def first_motion(builder, dt=1e-4, substeps=5):
    """Start positions and the displacement after a short time (one frame)."""
    sim = gs.Simulation(builder.finalize(), frames=1, substeps=substeps, dt=dt)
    xs = sim.forward()["particles"]
    return xs[0], xs[1] - xs[0]


# ---- reads --------------------------------------------------------------------------------
def test_reads_return_what_was_added_as_copies():
    b = free_builder()
    x = np.array([[0.0, 1.0, 2.0], [3.0, 4.0, 5.0], [6.0, 7.0, 8.0]])
    ids = b.add_particles(x, velocities=(0.1, 0.2, 0.3), mass=[1.0, 2.0, 3.0],
                          pinned=[False, True, False])
    np.testing.assert_array_equal(b.particle_positions(), x)
    np.testing.assert_array_equal(b.particle_rest_positions([2, 0]), x[[2, 0]])
    np.testing.assert_array_equal(b.particle_velocities(ids[1:]), [[0.1, 0.2, 0.3]] * 2)
    np.testing.assert_array_equal(b.particle_masses([1]), [2.0])
    np.testing.assert_array_equal(b.particle_pinned(), [False, True, False])
    assert b.particle_masses(np.int64(2)).tolist() == [3.0]  # one index reads as [1]
    assert b.particle_positions([]).shape == (0, 3)
    # copies: editing what a read returned changes nothing in the builder
    b.particle_positions()[:] = 0.0
    b.particle_masses()[:] = -1.0
    np.testing.assert_array_equal(b.particle_positions(), x)
    np.testing.assert_array_equal(b.particle_masses(), [1.0, 2.0, 3.0])


# ---- setters reach the model --------------------------------------------------------------
def test_set_masses_and_velocities_reach_the_simulation():
    b = free_builder()
    b.add_particles(np.eye(3), mass=1.0)
    b.add_particles(np.eye(3) + 2.0, mass=1.0)
    b.set_particle_masses([4, 1], [0.25, 3.0])
    b.set_particle_masses([5], 7.0)  # a scalar for all the given particles
    b.set_particle_velocities([0, 3], [[1.0, 0.0, 0.0], [0.0, -2.0, 0.5]])
    b.set_particle_velocities([2, 5], (0.0, 0.0, 4.0))  # one velocity shared
    sim = gs.Simulation(b.finalize(), frames=2, substeps=2, dt=1e-3)
    np.testing.assert_array_equal(sim.get_param("mass"), [1.0, 3.0, 1.0, 1.0, 0.25, 7.0])
    v = np.zeros((6, 3))
    v[0], v[3], v[2], v[5] = (1.0, 0.0, 0.0), (0.0, -2.0, 0.5), (0, 0, 4.0), (0, 0, 4.0)
    np.testing.assert_array_equal(sim.get_param("initial_velocity"), v)
    # and the rollout moves the particles with them (no forces: straight lines)
    xs = sim.forward()["particles"]
    np.testing.assert_allclose(xs[-1] - xs[0], v * 2e-3 * 2, rtol=1e-12, atol=1e-15)


@pytest.mark.filterwarnings("ignore:.*where explicit integration rings")  # not its subject
def test_set_velocities_of_a_cloth_and_a_soft_mesh():
    b = free_builder()
    cloth = b.add_cloth_grid((0.2, 0.2), (2, 2), origin=(0.0, 1.0, 0.0))
    ball = b.add_soft_box((0.1, 0.1, 0.1), (1, 1, 1), origin=(1.0, 1.0, 0.0))
    b.set_particle_velocities(ball, (0.0, 0.0, -1.0))
    v = np.arange(3 * len(cloth.particles), dtype=float).reshape(-1, 3)
    b.set_particle_velocities(cloth.particles, v)
    got = gs.Simulation(b.finalize(), frames=1, substeps=1).get_param("initial_velocity")
    np.testing.assert_array_equal(got[cloth.particles], v)
    np.testing.assert_array_equal(got[ball], np.tile([0.0, 0.0, -1.0], (len(ball), 1)))


# ---- a start pose apart from the rest pose ------------------------------------------------
def test_spring_start_pose_pulls_back_to_the_rest_length():
    b = free_builder()
    b.add_particles([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0]], mass=1.0)
    b.add_spring(0, 1, stiffness=100.0)  # rest length 1 (the added configuration)
    b.set_particle_positions([1], [1.5, 0.0, 0.0])  # start stretched by 0.5
    b.add_spring(0, 1, stiffness=100.0)  # added after: rest length still from the rest pose
    np.testing.assert_array_equal(b.particle_rest_positions([1]), [[1.0, 0.0, 0.0]])
    x0, dx = first_motion(b)
    np.testing.assert_array_equal(x0[1], [1.5, 0.0, 0.0])
    # two springs of rest length 1 stretched by 0.5: each end feels 2 * 100 * 0.5 = 100 N
    # (with the second spring's rest length taken from the start pose: 50 N); 5 steps
    # of semi-implicit Euler move it a dt^2 (1 + 2 + ... + 5)
    step = 100.0 * 1e-4**2 * 15
    np.testing.assert_allclose(dx[:, 0], [step, -step], rtol=1e-3)
    np.testing.assert_allclose(dx[:, 1:], 0.0, atol=1e-15)


def test_cloth_start_pose_stretched_contracts_toward_the_rest_shape():
    b = free_builder()
    cloth = b.add_cloth_grid((0.4, 0.4), (4, 4), origin=(-0.2, 1.0, -0.2), density=1.0,
                             tri_ke=200.0, tri_ka=200.0, tri_kd=0.0, edge_ke=0.0)
    rest = b.particle_positions(cloth.particles)
    centre = rest.mean(axis=0)
    start = centre + (rest - centre) * [1.2, 1.0, 1.0]  # stretched 20% along x
    b.set_particle_positions(cloth.particles, start)
    np.testing.assert_array_equal(b.particle_rest_positions(cloth.particles), rest)
    x0, dx = first_motion(b)
    np.testing.assert_array_equal(x0, start)
    r = start[:, 0] - centre[0]
    edge = np.abs(r) > 0.2 - 1e-9  # the left and right columns
    assert np.all(dx[edge, 0] * r[edge] < 0)  # they move toward the centre
    assert np.abs(dx[edge, 0]).min() > 1e-6
    # the control: started in its rest pose, the same cloth does not move
    b2 = free_builder()
    b2.add_cloth_grid((0.4, 0.4), (4, 4), origin=(-0.2, 1.0, -0.2), density=1.0,
                      tri_ke=200.0, tri_ka=200.0, tri_kd=0.0, edge_ke=0.0)
    _, still = first_motion(b2)
    assert np.abs(still).max() < 1e-15


def test_tet_start_pose_compressed_expands_toward_the_rest_shape():
    b = free_builder()
    ids = b.add_soft_box((0.2, 0.2, 0.2), (2, 2, 2), origin=(0.0, 1.0, 0.0), density=100.0,
                         mu=1e4, lam=1e4)
    rest = b.particle_positions(ids)
    centre = rest.mean(axis=0)
    start = centre + 0.9 * (rest - centre)  # squeezed to 90% in every direction
    b.set_particle_positions(ids, start)
    x0, dx = first_motion(b)
    np.testing.assert_array_equal(x0, start)
    r = start - centre
    corner = np.linalg.norm(r, axis=1) > 0.9 * 0.1 * np.sqrt(3) - 1e-9
    assert corner.sum() == 8
    outward = np.einsum("ij,ij->i", dx[corner], r[corner])
    assert np.all(outward > 0) and outward.min() > 1e-9  # the corners move out
    b2 = free_builder()
    b2.add_soft_box((0.2, 0.2, 0.2), (2, 2, 2), origin=(0.0, 1.0, 0.0), density=100.0,
                    mu=1e4, lam=1e4)
    _, still = first_motion(b2)
    assert np.abs(still).max() < 1e-14


# ---- bad input ----------------------------------------------------------------------------
BAD = [
    (lambda b: b.set_particle_masses([0, 1], [1.0, np.nan]), r"masses contains NaN"),
    (lambda b: b.set_particle_masses([0, 1], [1.0, -2.0]),
     r"masses must be > 0; got -2 at index 1"),
    (lambda b: b.set_particle_masses([2], 0.0), r"masses must be > 0; got 0 at index 0"),
    (lambda b: b.set_particle_masses([0, 1], [1.0, 2.0, 3.0]),
     r"masses must be a scalar or have length 2; got shape \(3,\)"),
    (lambda b: b.set_particle_velocities([0, 1], np.ones((3, 3))),
     r"velocities must have shape \(2, 3\); got \(3, 3\)"),
    (lambda b: b.set_particle_velocities([0], [np.inf, 0.0, 0.0]),
     r"velocities contains NaN or inf"),
    (lambda b: b.set_particle_positions([0, 1], np.ones((2, 2))),
     r"positions must have shape \(2, 3\); got \(2, 2\)"),
    (lambda b: b.set_particle_positions([1], [0.0, np.nan, 0.0]), r"positions contains NaN"),
    (lambda b: b.set_particle_masses([0, 3], 1.0),
     r"ids\[1\] = 3 is not a particle index in \[0, 3\)"),
    (lambda b: b.set_particle_velocities([-1], (0, 0, 0)),
     r"ids\[0\] = -1 is not a particle index"),
    (lambda b: b.particle_positions([5]), r"ids\[0\] = 5 is not a particle index in \[0, 3\)"),
    (lambda b: b.particle_masses([0.5]), r"ids must hold integer particle indices"),
    (lambda b: b.particle_masses([[0, 1]]), r"ids must be an index or a 1-D array"),
    (lambda b: b.particle_masses([True, False, True]),
     r"ids must be integer particle indices, not a bool mask"),
    (lambda b: b.set_particle_masses([1, 1], [1.0, 2.0]), r"ids lists particle 1 more than once"),
]


@pytest.mark.parametrize("call, match", BAD)
def test_bad_input_names_the_argument_and_the_value(call, match):
    b = free_builder()
    b.add_particles(np.eye(3), mass=1.0)
    before = (b.particle_positions(), b.particle_velocities(), b.particle_masses())
    with pytest.raises(ValueError, match=match):
        call(b)
    # a rejected call leaves the builder as it was
    for old, new in zip(before, (b.particle_positions(), b.particle_velocities(),
                                 b.particle_masses())):
        np.testing.assert_array_equal(old, new)


# ---- rigid bodies -------------------------------------------------------------------------
def test_rigid_body_read():
    b = gs.ModelBuilder()
    with pytest.raises(ValueError, match=r"body=0 is not a rigid body index in \[0, 0\)"):
        b.rigid_body(0)
    ext = np.array([0.4, 0.2, 0.1])
    i = b.add_rigid_box(ext, mass=3.0, position=(1.0, 2.0, 3.0), velocity=(0.5, 0.0, 0.0),
                        orientation=(2.0, 0.0, 0.0, 0.0))
    body = b.rigid_body(i)
    assert body.mass == pytest.approx(3.0, rel=1e-12)
    np.testing.assert_allclose(body.com, 0.0, atol=1e-12)
    box = 3.0 / 12.0 * np.array([ext[1]**2 + ext[2]**2, ext[0]**2 + ext[2]**2,
                                 ext[0]**2 + ext[1]**2])
    np.testing.assert_allclose(body.inertia, np.diag(box), rtol=1e-10, atol=1e-14)
    np.testing.assert_array_equal(body.position, [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(body.orientation, [1.0, 0.0, 0.0, 0.0])  # normalised
    np.testing.assert_array_equal(body.velocity, [0.5, 0.0, 0.0])
    assert body.vertices.shape == (8, 3) and body.faces.shape == (12, 3)
    body.position[:] = 0.0  # a copy: the builder keeps its own
    np.testing.assert_array_equal(b.rigid_body(i).position, [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match=r"body=1 is not a rigid body index in \[0, 1\)"):
        b.rigid_body(1)


def test_mixins_do_not_import_the_builder():
    """The validators live in gradsim_taichi.checks: the build_* mixins no longer import
    builder.py (which imports them), lazily or not."""
    import inspect

    from gradsim_taichi import build_cloth, build_fem, build_rigid

    for mod in (build_cloth, build_fem, build_rigid):
        assert "gradsim_taichi.builder import" not in inspect.getsource(mod), mod.__name__


def test_one_orientation_convention_for_rigid_soft_and_cloth():
    """orientation=(w, x, y, z) (or a matrix) places a soft mesh, a cloth mesh and a rigid
    body alike; the soft/cloth builders' old rotation= (x, y, z, w) still works, with a
    DeprecationWarning, and means the same rotation."""
    import warnings

    from scipy.spatial.transform import Rotation

    q = np.array([0.9, 0.1, -0.3, 0.2])
    q /= np.linalg.norm(q)
    R = Rotation.from_quat([q[1], q[2], q[3], q[0]]).as_matrix()
    tet = np.array([[0.0, 0, 0], [0.3, 0, 0], [0, 0.3, 0], [0, 0, 0.3]])
    b = gs.ModelBuilder()
    ids = b.add_soft_mesh(tet, [[0, 1, 2, 3]], orientation=q, origin=(0, 1, 0))
    np.testing.assert_allclose(b.particle_positions(ids), tet @ R.T + [0, 1, 0], atol=1e-12)
    cloth = b.add_cloth_mesh(tet[:3], [[0, 1, 2]], orientation=R, origin=(0, 2, 0))
    np.testing.assert_allclose(b.particle_positions(cloth.particles), tet[:3] @ R.T + [0, 2, 0],
                               atol=1e-12)
    body = b.rigid_body(b.add_rigid_box((0.2, 0.2, 0.2), orientation=q))
    np.testing.assert_allclose(body.orientation, q, atol=1e-12)
    with pytest.warns(DeprecationWarning, match=r"orientation=\(w, x, y, z\)"):
        old = b.add_soft_mesh(tet, [[0, 1, 2, 3]], rotation=[q[1], q[2], q[3], q[0]],
                              origin=(0, 1, 0))
    np.testing.assert_allclose(b.particle_positions(old), b.particle_positions(ids), atol=1e-12)
    with pytest.raises(ValueError, match="not both"), warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        b.add_soft_mesh(tet, [[0, 1, 2, 3]], rotation=R, orientation=q)

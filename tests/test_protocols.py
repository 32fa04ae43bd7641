"""The System and ForceModel protocols and the Learnable parameter declarations."""

import numpy as np
import pytest
from runtime_arch import TEST_ARCH

import gradsim_taichi as gs
from gradsim_taichi.model import _SYSTEM_MEMBERS, Model, System
from gradsim_taichi.solvers.registry import ForceModel, force_models


@pytest.fixture(autouse=True)
def _init():
    gs.init(arch=TEST_ARCH, precision="f64", threads=1)


def scene():
    b = gs.ModelBuilder(contact_kd=1.0, contact_kf=1.0)
    ids = b.add_particles([[0, 0.2, 0], [0.1, 0.2, 0]], mass=0.1)
    b.add_springs([(ids[0], ids[1])], stiffness=10.0)
    b.add_cloth_grid(size=(0.2, 0.2), resolution=(2, 2), origin=(0.5, 0.2, 0), mass=0.01,
                     edge_ke=0.1, lift=0.1, drag=0.1)
    b.add_soft_box(size=0.1, resolution=1, origin=(-0.5, 0.1, 0), density=100.0, mu=1e3,
                   lam=1e3)
    b.add_rigid_box((0.1, 0.1, 0.1), mass=1.0, position=(0, 0.5, 0.5))
    return b.finalize()


def test_models_systems_and_force_models_satisfy_the_protocols():
    model = scene()
    names = {type(s).__name__ for s in model.systems}
    assert names == {"ParticleSystem", "RigidBodySystem"}
    assert all(isinstance(s, System) for s in model.systems)
    kinds = {type(f) for f in model.forces}
    assert kinds == set(force_models().values())  # the scene has every registered model
    assert all(isinstance(f, ForceModel) for f in model.forces)
    # the protocol lists exactly the members the Model checks
    assert set(_SYSTEM_MEMBERS) == {m for m in dir(System) if not m.startswith("_")} | {"name"}


def test_a_system_or_force_model_that_lacks_members_is_rejected_by_name():
    class Half:
        name = "half"

        def allocate(self, rows, frames):
            pass

    with pytest.raises(TypeError, match="Half is not a System: it lacks params, load"):
        Model(None, system_factories=[lambda m: Half()])
    model = scene()
    with pytest.raises(TypeError, match="lacks apply, zero_grads"):
        model.add_force(type("NoForce", (), {"params": lambda self: []})())


@pytest.mark.filterwarnings("ignore:.*where explicit integration rings")  # not its subject
def test_learnable_declarations_give_params_and_zero_grads():
    sim = gs.Simulation(scene(), frames=2, substeps=8)
    # declaration order is the parameter order: the same as the hand-written params() had
    assert sim.params.names() == [
        "contact_ke", "contact_kd", "contact_kf", "contact_mu", "mass", "gravity",
        "initial_position", "initial_velocity", "external_force", "spring_stiffness",
        "spring_damping", "spring_rest_length", "tri_ke", "tri_ka", "tri_kd",
        "tri_activation", "edge_ke", "edge_kd", "cloth_lift", "cloth_drag", "wind", "tet_mu",
        "tet_lambda", "tet_damping", "density", "tet_activation", "body_mass",
        "body_inertia_scale", "body_com_offset", "body_position", "body_orientation",
        "body_velocity", "body_angular_velocity", "body_linear_damping", "body_linear_drag",
        "body_angular_damping", "body_angular_drag", "body_force", "body_torque"]
    for owner in list(sim.model.forces) + [sim.model.ground, sim.model.particles]:
        fields = owner.learnable_fields()
        assert fields
        for field in fields:
            field.grad.fill(1.0)
        owner.zero_grads()
        assert all(np.all(field.grad.to_numpy() == 0) for field in fields)
    # every declared parameter reads back what was set
    for name in ("spring_stiffness", "cloth_lift", "wind", "tri_activation", "contact_mu"):
        p = sim.params[name]
        value = np.random.default_rng(0).uniform(0.1, 1.0, p.shape)
        sim.set_param(name, value)
        np.testing.assert_array_equal(sim.get_param(name), value)

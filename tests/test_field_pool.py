"""A model built again with the structure of a collected one takes its fields back
(gradsim_taichi/field_pool.py): its rollout and gradients are those of a model on new
fields, bit for bit, whatever the old model left in them; live models never share a
field; a Param held after its model was dropped keeps the model's fields."""

import gc

import numpy as np
import pytest
import torch

import gradsim_taichi as gs
from gradsim_taichi import field_pool


def rigid_and_cloth(mass=1.0, cells=3, frames=6):
    b = gs.ModelBuilder(contact_ke=1e3, contact_kd=1.0, contact_kf=1.0, contact_mu=0.5)
    b.add_rigid_box((0.2, 0.1, 0.15), mass=mass, position=(0.0, 0.12, 0.0),
                    orientation=(0.95, 0.1, 0.2, 0.05), velocity=(1.0, -0.5, 0.0),
                    angular_velocity=(0.5, 2.0, 0.3))
    b.add_cloth_grid((0.3, 0.3), (cells, cells), origin=(0.5, 0.05, 0.0), density=1.0,
                     velocity=(0.5, -1.0, 0.2), tri_ke=20.0, tri_ka=20.0, tri_kd=0.05,
                     edge_ke=0.01)
    return gs.Simulation(b.finalize(), frames=frames, substeps=8)


NAMES = ("body_mass", "contact_ke", "mass", "initial_velocity")


def rollout_and_grads(sim, scale=1.0):
    leaves = {n: (torch.tensor(sim.get_param(n)) * scale).requires_grad_(True)
              for n in NAMES}
    out = gs.simulate(sim, leaves)
    weights = {k: torch.linspace(0.5, 1.5, v.numel(), dtype=v.dtype).reshape(v.shape)
               for k, v in out.items()}
    sum((out[k] * weights[k]).sum() for k in out).backward()
    return ({k: v.detach().clone() for k, v in out.items()},
            {n: leaves[n].grad.clone() for n in NAMES})


def fields_of(sim):
    return fields_of_model(sim.model)


def fields_of_model(model):
    return {id(f) for _, f in model._field_pool_record.fields}


def field_values(sim):
    """Every field of the model and its gradient, as arrays, in the order made."""
    out = []
    for _, f in sim.model._field_pool_record.fields:
        out.append(f.to_numpy())
        grad = getattr(f, "grad", None)
        if grad is not None and grad.snode.ptr is not None:  # placed
            out.append(grad.to_numpy())
    return out


def assert_same(a, b):
    for k in a:
        np.testing.assert_array_equal(a[k].numpy(), b[k].numpy(), err_msg=k)


def test_a_model_built_again_reuses_the_fields_and_equals_new_fields(monkeypatch):
    gc.collect()
    monkeypatch.setattr(field_pool, "_released", [])  # the first model's fields are new

    first = rigid_and_cloth()
    new = field_values(first)
    fresh = rollout_and_grads(first)  # the reference: a model on new fields
    rollout_and_grads(first, scale=1.3)  # leaves other states and gradients in its fields
    used = fields_of(first)
    del first
    gc.collect()
    trees = gs.runtime.field_trees()
    again = rigid_and_cloth()
    assert gs.runtime.field_trees() == trees  # no new field tree either
    assert fields_of(again) == used  # every field came back, as new fields are
    for a, b in zip(field_values(again), new, strict=True):
        np.testing.assert_array_equal(a, b)
    out, grads = rollout_and_grads(again)
    assert_same(out, fresh[0])
    assert_same(grads, fresh[1])


def test_other_structures_get_other_fields_and_live_models_share_none(monkeypatch):
    monkeypatch.setattr(field_pool, "_DISABLED", True)
    fresh = rollout_and_grads(rigid_and_cloth(mass=2.0, cells=4, frames=5))
    monkeypatch.setattr(field_pool, "_DISABLED", False)

    first = rigid_and_cloth()
    rollout_and_grads(first, scale=0.7)
    alive = rigid_and_cloth()
    assert not fields_of(alive) & fields_of(first)
    del first
    gc.collect()
    other = rigid_and_cloth(mass=2.0, cells=4, frames=5)  # a prefix may match, the rest not
    assert not fields_of(other) & fields_of(alive)
    out, grads = rollout_and_grads(other)
    assert_same(out, fresh[0])
    assert_same(grads, fresh[1])


def small_box():
    b = gs.ModelBuilder(contact_ke=1e3, contact_kd=1.0, contact_kf=1.0, contact_mu=0.5)
    b.add_rigid_box((0.2, 0.1, 0.15), mass=1.0, position=(0.0, 0.12, 0.0))
    return b.finalize()


def cone(segments=12):
    b = gs.ModelBuilder(contact_ke=1e3, contact_kd=1.0, contact_kf=1.0, contact_mu=0.5)
    b.add_rigid_cone(0.1, 0.2, segments, mass=1.0, position=(0.0, 0.12, 0.0))
    return b.finalize()


def test_a_rebuilt_model_takes_its_own_structure_s_fields_first():
    """Two structures that start alike, released in turn: each rebuilt model gets back the
    fields of the one built like it, not the newest list (which would split both)."""
    gc.collect()
    box, other = small_box(), cone()
    box_fields, cone_fields = fields_of_model(box), fields_of_model(other)
    del box
    gc.collect()
    del other
    gc.collect()  # released in turn: the cone's list is the newest
    assert fields_of_model(small_box()) == box_fields
    gc.collect()
    assert fields_of_model(cone()) == cone_fields


def test_the_pool_collects_garbage_only_where_a_model_like_the_new_one_may_be(monkeypatch):
    """Dead models sit in reference cycles: the pool runs the cycle collector (0.1-0.2 s)
    before giving up on a reuse, but only when an owner not collected yet was built like
    the new model."""
    collects = []
    real_collect = gc.collect
    monkeypatch.setattr(field_pool.gc, "collect", lambda: collects.append(1) or real_collect())
    gs.init(arch=gs.info()["arch"], precision="f64")  # an empty pool
    gc.disable()  # only the pool's own collections
    try:
        box = small_box()
        assert len(collects) == 0  # nothing uncollected was built like it
        kept = fields_of_model(box)
        del box  # garbage in a cycle
        again = small_box()
        assert len(collects) == 1 and fields_of_model(again) == kept
        cone(segments=7)
        assert len(collects) == 1  # the dead box's structure is another
    finally:
        gc.enable()


def test_a_param_held_keeps_its_model_s_fields():
    sim = rigid_and_cloth()
    mass = sim.params["body_mass"]
    kept = fields_of(sim)
    del sim
    gc.collect()
    again = rigid_and_cloth()
    assert not fields_of(again) & kept
    before = float(again.params["body_mass"].getter()[0])
    mass.setter(torch.tensor([3.0], dtype=torch.float64))
    assert float(mass.getter()[0]) == 3.0
    assert float(again.params["body_mass"].getter()[0]) == before != 3.0


def test_a_new_taichi_starts_an_empty_pool():
    sim = rigid_and_cloth()
    del sim
    gs.init(arch=gs.info()["arch"], precision="f64")
    gc.collect()
    again = rigid_and_cloth()  # the old fields are gone with the old Taichi
    out, _ = rollout_and_grads(again)
    assert all(torch.isfinite(v).all() for v in out.values())


@pytest.mark.parametrize("kind", ["field", "vector", "matrix"])
def test_outside_an_owner_fields_are_taichi_s_own(kind):
    make = {"field": lambda: field_pool.field(gs.runtime.real(), 3),
            "vector": lambda: field_pool.vector(3, gs.runtime.real(), 3),
            "matrix": lambda: field_pool.matrix(2, 2, gs.runtime.real(), 3)}[kind]
    a, b = make(), make()
    assert a is not b

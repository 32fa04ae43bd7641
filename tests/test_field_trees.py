"""Taichi never frees field trees and crashes (no error) past 512 of them in one
initialisation: models are refused with a clear error near the limit, and a worker that
builds a scene per job starts afresh before it. The models here are kept alive: a
model built again after one of its structure was collected takes that one's fields
(gradsim_taichi/field_pool.py) and adds no tree."""

import pytest

import gradsim_taichi as gs
from gradsim_taichi import runtime


def _model():
    b = gs.ModelBuilder(ground=False)
    b.add_particles([[0.0, 1.0, 0.0], [0.1, 1.0, 0.0]], mass=1.0)
    b.add_spring(0, 1, stiffness=10.0)
    return b.finalize()


def test_models_add_field_trees_and_are_refused_near_the_limit(monkeypatch):
    before = runtime.field_trees()
    alive = [_model()]
    used = runtime.field_trees() - before
    assert used >= 1  # every model adds trees that stay
    # refused once the trees pass limit - margin = now + used - 1
    monkeypatch.setattr(runtime, "FIELD_TREE_LIMIT", runtime.field_trees() + 2 * used - 1)
    monkeypatch.setattr(runtime, "FIELD_TREE_MARGIN", used)
    alive.append(_model())  # still room
    with pytest.raises(RuntimeError, match=r"cannot build a Model: Taichi already holds \d+ "
                                            r"field trees.*gradsim_taichi.init\(\) again"):
        _model()
    gen = runtime.generation()
    gs.init(**runtime._state["settings"])
    assert runtime.generation() == gen + 1 and runtime.field_trees() < used + 1
    _model()  # room again


def test_renew_if_full_starts_afresh_with_the_same_settings(monkeypatch):
    settings = dict(runtime._state["settings"])
    assert runtime.renew_if_full() is False  # far from the limit: nothing happens
    alive = _model()  # noqa: F841 (its trees stay)
    monkeypatch.setattr(runtime, "FIELD_TREE_LIMIT", runtime.field_trees() - 1)
    monkeypatch.setattr(runtime, "FIELD_TREE_MARGIN", 0)
    gen = runtime.generation()
    assert runtime.renew_if_full() is True
    assert runtime.generation() == gen + 1 and runtime._state["settings"] == settings
    assert runtime.field_trees() == 0


@pytest.mark.slow  # about a minute: ~150 models
def test_building_models_until_the_limit_ends_in_the_error_not_a_crash():
    """The real limit: tiny models one after another (a process would segfault past 512
    trees); the error comes first, and after a fresh init building works again."""
    alive = []
    with pytest.raises(RuntimeError, match="cannot build a Model"):
        for _ in range(runtime.FIELD_TREE_LIMIT):
            alive.append(_model())
    built = len(alive)
    alive.clear()
    assert built > 10 and runtime.field_trees() <= runtime.FIELD_TREE_LIMIT
    gs.init(**runtime._state["settings"])
    _model()

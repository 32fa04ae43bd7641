"""The parameter specs of a scene file's unknowns (a checked ``{unknown, guess_low,
guess_high, true, doc}`` table -> :class:`~gradsim_taichi.scenes.base.ParamSpec`)."""

from __future__ import annotations

import numpy as np

from gradsim_taichi.scenes.base import ParamSpec
from gradsim_taichi.scenes.scene_file_schema import PER_PARTICLE


def geomean(u: dict) -> float:
    """The middle of an unknown's guess range (its default truth)."""
    return float(np.sqrt(u["guess_low"] * u["guess_high"]))


def spec_param(sim_name: str, u: dict, doc: str) -> ParamSpec:
    """A scalar unknown's spec from its checked table."""
    return ParamSpec(sim_name, u.get("true", geomean(u)), u["guess_low"], u["guess_high"],
                     doc=u.get("doc", doc))


def per_particle(value) -> bool:
    """Whether a checked value is a per-particle unknown."""
    return isinstance(value, dict) and value["unknown"] == PER_PARTICLE


def particle_param(sim_name: str, u: dict, doc: str, **kw) -> ParamSpec:
    """A per-particle unknown's spec; its truth, shape and basis come with the build
    (:meth:`FileScene.derived_params`)."""
    return ParamSpec(sim_name, None, u["guess_low"], u["guess_high"], doc=u.get("doc", doc),
                     **kw)


def name_of(masses: dict, index: int):
    """The name of the mass unknown of object ``index`` (``{name: object index}``), or
    None when its mass is known."""
    return next((n for n, i in masses.items() if i == index), None)

"""Scene presets mirroring the gradSim paper's experiments.

``make_scene(name, **overrides)`` builds a preset; ``SCENES`` maps names to classes.
"""

from gradsim_taichi.scenes.base import ParamSpec, RenderPart, Scene, ground_part

SCENES: dict = {}


def register(cls):
    """Class decorator: add a preset to :data:`SCENES` under ``cls.name``."""
    SCENES[cls.name] = cls
    return cls


def make_scene(name: str, **overrides) -> Scene:
    """A scene preset by name; keyword arguments override its fields (frames, width, ...)."""
    if name not in SCENES:
        raise KeyError(f"unknown scene {name!r}; choose one of: {', '.join(SCENES)}")
    return SCENES[name](**overrides)


__all__ = ["SCENES", "make_scene", "register", "Scene", "ParamSpec", "RenderPart",
           "ground_part"]

# presets register themselves on import
from gradsim_taichi.scenes import cloth, fem, rigid  # noqa: E402, F401

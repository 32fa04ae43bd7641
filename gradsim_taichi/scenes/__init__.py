"""Presets: the paper's estimation experiments, the control tasks and the spring net.

``make_scene(name, **overrides)`` builds an estimation preset (``SCENES`` maps names to
``FilePreset``s: every estimation preset is a shipped scene file; a Scene class can
register too; ``make_preset`` with the command line's size overrides checked),
``make_task(name, **overrides)`` a control task (``TASKS``). Each preset is
built only through the public :class:`~gradsim_taichi.builder.ModelBuilder` API.
"""

from gradsim_taichi.scenes.base import ParamSpec, RenderPart, Scene, ground_part
from gradsim_taichi.scenes.registry import (
    SCENES,
    TASKS,
    make_preset,
    make_scene,
    make_task,
    register,
    register_task,
)

__all__ = ["SCENES", "TASKS", "make_scene", "make_preset", "make_task", "register", "register_task",
           "Scene", "ParamSpec", "RenderPart", "ground_part"]

# presets register themselves on import
from gradsim_taichi.scenes import cloth, control_tasks, fem, rigid  # noqa: E402, F401

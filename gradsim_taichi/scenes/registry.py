"""The presets by name: estimation scenes (:data:`SCENES`) and control tasks
(:data:`TASKS`). Presets register themselves with a class decorator on import."""

SCENES: dict = {}
TASKS: dict = {}


def register(cls):
    """Class decorator: add an estimation preset to :data:`SCENES` under ``cls.name``."""
    SCENES[cls.name] = cls
    return cls


def register_task(cls):
    """Class decorator: add a control task to :data:`TASKS` under ``cls.name``."""
    TASKS[cls.name] = cls
    return cls


def make_scene(name: str, **overrides):
    """An estimation preset by name; keyword arguments override its fields (frames,
    width, ...)."""
    return _make(SCENES, "scene", name, overrides)


def make_task(name: str, **overrides):
    """A control task by name; keyword arguments override its fields (frames, width, ...)."""
    return _make(TASKS, "control task", name, overrides)


def _make(registry: dict, kind: str, name: str, overrides: dict):
    if name not in registry:
        raise KeyError(f"unknown {kind} {name!r}; choose one of: {', '.join(registry)}")
    return registry[name](**overrides)

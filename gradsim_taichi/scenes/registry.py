"""The presets by name: estimation scenes (:data:`SCENES`) and control tasks
(:data:`TASKS`). Presets register themselves on import: a Scene class with the
:func:`register` decorator, or a shipped scene file with ``register(FilePreset(name))``
(:mod:`gradsim_taichi.scenes.rigid`)."""

SCENES: dict = {}
TASKS: dict = {}


def register(cls):
    """Add an estimation preset to :data:`SCENES` under ``cls.name``: a Scene class (as a
    decorator) or any callable with ``name``, ``summary`` and ``shapes`` that returns a
    scene (a :class:`~gradsim_taichi.scenes.preset_files.FilePreset`); returns it."""
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


def make_preset(name: str, frames: int | None = None, resolution: int | None = None,
                **overrides):
    """:func:`make_scene` with the size overrides the command line offers, checked:
    ``frames`` (a positive integer) and ``resolution`` (square images, an even number
    >= 8). A KeyError for an unknown name, a ValueError for a bad size or field."""
    if name not in SCENES:
        raise KeyError(f"unknown scene {name!r}; choose one of: {', '.join(SCENES)}")
    overrides.update(size_overrides(frames, resolution))
    try:
        return make_scene(name, **overrides)
    except TypeError as e:  # a field the preset does not have
        raise ValueError(f"scene {name!r}: {e}") from None


def size_overrides(frames: int | None = None, resolution: int | None = None) -> dict:
    """The Scene fields ``frames`` (a positive integer) and ``resolution`` (square
    images, an even number >= 8) set, checked (a ValueError); None: unchanged."""
    overrides = {}
    if frames is not None:
        if isinstance(frames, bool) or not isinstance(frames, int) or frames < 1:
            raise ValueError(f"frames must be a positive integer; got {frames}")
        overrides["frames"] = frames
    if resolution is not None:
        if (isinstance(resolution, bool) or not isinstance(resolution, int)
                or resolution < 8 or resolution % 2):
            raise ValueError(f"resolution must be an even number >= 8; got {resolution}")
        overrides["width"] = overrides["height"] = resolution
    return overrides


def make_task(name: str, **overrides):
    """A control task by name; keyword arguments override its fields (frames, width, ...)."""
    return _make(TASKS, "control task", name, overrides)


def _make(registry: dict, kind: str, name: str, overrides: dict):
    if name not in registry:
        raise KeyError(f"unknown {kind} {name!r}; choose one of: {', '.join(registry)}")
    return registry[name](**overrides)

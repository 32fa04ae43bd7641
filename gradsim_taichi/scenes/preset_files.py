"""The presets that are scene files shipped with the package
(``gradsim_taichi/scenes/files/NAME.toml``): :class:`FilePreset` loads one into a
:class:`~gradsim_taichi.scenes.scene_file.FileScene` (the schema and the reading are in
:mod:`gradsim_taichi.scenes.scene_file`)."""

from __future__ import annotations

from gradsim_taichi.scenes.scene_file import FileScene, scene_from_toml

PRESET_FILES = "files"  # the folder of gradsim_taichi.scenes that ships the preset files


def preset_text(name: str) -> str:
    """The text of the shipped scene file of preset ``name`` (package data:
    ``gradsim_taichi/scenes/files/NAME.toml``)."""
    from importlib.resources import files

    return (files("gradsim_taichi.scenes") / PRESET_FILES / f"{name}.toml").read_text(
        encoding="utf-8")


class FilePreset:
    """A preset that is a scene file shipped with the package: calling it,
    ``preset(shape=None, **overrides)``, loads the file into a :class:`FileScene` with
    objects[0]'s shape chosen from the file's ``[shapes]`` table and the Scene fields
    ``overrides`` changed. ``summary`` (the file's description) and ``shapes`` are read
    from the file."""

    def __init__(self, name: str):
        self.name = name
        self._spec = None

    def _read(self) -> dict:
        if self._spec is None:
            self._spec = scene_from_toml(self.text(), source=self.source).spec
        return self._spec

    @property
    def source(self) -> str:
        return f"gradsim_taichi/scenes/{PRESET_FILES}/{self.name}.toml"

    def text(self) -> str:
        """The shipped file, as written (comments included)."""
        return preset_text(self.name)

    @property
    def summary(self) -> str:
        return self._read()["scene"]["description"]

    @property
    def shapes(self) -> tuple:
        return tuple(self._read()["shapes"])

    def __call__(self, shape: str | None = None, **overrides) -> FileScene:
        if shape is not None and shape not in self.shapes:
            raise ValueError(f"shape={shape!r}; choose one of {self.shapes}")
        return scene_from_toml(self.text(), source=self.source, shape=shape, **overrides)

    def __repr__(self) -> str:
        return f"FilePreset({self.name!r})"

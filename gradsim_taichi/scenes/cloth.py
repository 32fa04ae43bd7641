"""Cloth preset (paper Table 3): a falling cloth with unknown initial velocity.

A scene file shipped with the package (``gradsim_taichi/scenes/files/cloth-velocity.toml``;
``gradsim-taichi scene show cloth-velocity`` prints it): ``ClothVelocity(**overrides)``
loads it into a :class:`~gradsim_taichi.scenes.scene_file.FileScene`.
"""

from gradsim_taichi.scenes.preset_files import FilePreset
from gradsim_taichi.scenes.registry import register

# a cloth thrown with a spinning velocity field; unknown per-particle initial velocity
ClothVelocity = register(FilePreset("cloth-velocity"))

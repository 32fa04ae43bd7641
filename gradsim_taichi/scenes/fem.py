"""Soft-body presets (paper Table 3): a clamped beam and a ball thrown onto the ground.

Each is a scene file shipped with the package (``gradsim_taichi/scenes/files/``:
``fem-beam.toml``, ``fem-ball.toml``; ``gradsim-taichi scene show PRESET`` prints one):
the solid, its clamp and push, the unknowns with their guess ranges and the optimiser's
schedule are all in the file. ``FemBeam(**overrides)`` and ``FemBall(...)`` load them
into a :class:`~gradsim_taichi.scenes.scene_file.FileScene`.
"""

from gradsim_taichi.scenes.preset_files import FilePreset
from gradsim_taichi.scenes.registry import register


def lame(young: float, poisson: float) -> tuple[float, float]:
    """(mu, lambda) from Young's modulus and Poisson's ratio."""
    mu = young / (2 * (1 + poisson))
    lam = young * poisson / ((1 + poisson) * (1 - 2 * poisson))
    return mu, lam


# a soft beam clamped at one end, pushed and twisted at its tip; unknown mu, lambda, density
FemBeam = register(FilePreset("fem-beam"))
# a soft ball thrown onto the ground; unknown per-particle mass, mu, lambda
FemBall = register(FilePreset("fem-ball"))

"""gradsim-taichi: differentiable physics and rendering on Taichi with PyTorch interop.

Quick tour::

    import gradsim_taichi as gs
    gs.init(precision="f64")
    b = gs.ModelBuilder()
    b.add_particle((0, 1, 0), mass=1.0)
    sim = gs.Simulation(b.finalize(), frames=30, substeps=16)
    out = gs.simulate(sim, {"mass": torch.tensor(2.0, dtype=torch.float64)})
"""

from typing import TYPE_CHECKING

from gradsim_taichi.version import __version__

# The public names are imported on first use (PEP 562), so that importing the package
# (the CLI's --help, a subprocess that only wants the version) does not load torch and
# Taichi.
_PUBLIC = {
    "init": "gradsim_taichi.runtime",
    "info": "gradsim_taichi.runtime",
    "ModelBuilder": "gradsim_taichi.builder",
    "Model": "gradsim_taichi.model",
    "Simulation": "gradsim_taichi.simulation",
    "simulate": "gradsim_taichi.torch_bridge",
    "SimulationModule": "gradsim_taichi.torch_bridge",
}

__all__ = ["__version__", "init", "info", "ModelBuilder", "Model", "Simulation", "simulate",
           "SimulationModule"]


def __getattr__(name):
    if name in _PUBLIC:
        import importlib

        value = getattr(importlib.import_module(_PUBLIC[name]), name)
        globals()[name] = value  # later lookups skip this function
        return value
    raise AttributeError(f"module 'gradsim_taichi' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_PUBLIC))


if TYPE_CHECKING:
    from gradsim_taichi.builder import ModelBuilder
    from gradsim_taichi.model import Model
    from gradsim_taichi.runtime import info, init
    from gradsim_taichi.simulation import Simulation
    from gradsim_taichi.torch_bridge import SimulationModule, simulate

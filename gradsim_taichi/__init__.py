"""gradsim-taichi: differentiable physics and rendering on Taichi with PyTorch interop.

Quick tour::

    import gradsim_taichi as gs
    gs.init(precision="f64")
    b = gs.ModelBuilder()
    b.add_particle((0, 1, 0), mass=1.0)
    sim = gs.Simulation(b.finalize(), frames=30, substeps=16)
    out = gs.simulate(sim, {"mass": torch.tensor(2.0, dtype=torch.float64)})
"""

from gradsim_taichi.builder import ModelBuilder
from gradsim_taichi.model import Model
from gradsim_taichi.runtime import info, init
from gradsim_taichi.simulation import Simulation
from gradsim_taichi.torch_bridge import SimulationModule, simulate
from gradsim_taichi.version import __version__

__all__ = ["__version__", "init", "info", "ModelBuilder", "Model", "Simulation", "simulate",
           "SimulationModule"]

"""gradsim-taichi: differentiable physics and rendering on Taichi with PyTorch interop."""

from gradsim_taichi.runtime import info, init

__all__ = ["init", "info"]

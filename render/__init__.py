"""Image formation for gradsim-taichi: camera, meshes, lights, the differentiable soft
rasterizer (Taichi kernels with hand-written adjoints behind a torch autograd Function)
and video helpers. Import as ``gradsim_taichi.render``."""

from gradsim_taichi.render.bridge import RasterSettings, SoftRasterFunction
from gradsim_taichi.render.camera import Camera
from gradsim_taichi.render.rasterizer import SoftRasterizer
from gradsim_taichi.render.shading import AmbientLight, DirectionalLight, Mesh, default_lights
from gradsim_taichi.render.video import load_video, save_video

__all__ = [
    "Camera",
    "Mesh",
    "AmbientLight",
    "DirectionalLight",
    "default_lights",
    "SoftRasterizer",
    "SoftRasterFunction",
    "RasterSettings",
    "save_video",
    "load_video",
]

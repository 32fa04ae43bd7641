"""Image formation for gradsim-taichi: camera, meshes, lights, the differentiable soft
rasterizer (Taichi kernels with hand-written adjoints behind a torch autograd Function)
and video helpers. Import as ``gradsim_taichi.render``.

Example (a box falling past the camera, rendered and differentiated)::

    import torch
    import gradsim_taichi as gs
    from gradsim_taichi.render import Camera, Mesh, SoftRasterizer, save_video

    gs.init(precision="f64")
    cube = torch.tensor([[x, y, z] for x in (0, 1) for y in (0, 1) for z in (0, 1)],
                        dtype=torch.float64) * 0.4 - 0.2
    faces = [[0, 1, 3], [0, 3, 2], [4, 6, 7], [4, 7, 5], [0, 4, 5], [0, 5, 1],
             [2, 3, 7], [2, 7, 6], [0, 2, 6], [0, 6, 4], [1, 5, 7], [1, 7, 3]]
    drop = torch.linspace(0.8, 0.2, 10, dtype=torch.float64)  # 10 frames
    height = drop.clone().requires_grad_(True)
    box = cube[None] + torch.stack([0 * height, height, 0 * height], -1)[:, None]
    cam = Camera.look_at(eye=(0, 1.0, 3), target=(0, 0.4, 0), fov_y_deg=45,
                         width=64, height=48)
    render = SoftRasterizer(cam, [Mesh(faces, color=(0.9, 0.3, 0.2))],
                            background=(0.7, 0.8, 1.0))
    frames = render([box])  # [10, 48, 64, 4] RGBA
    frames[..., :3].mean().backward()  # gradients reach height (and colours, lights, camera)
    save_video(frames.detach(), "out.gif", fps=10)
"""

from gradsim_taichi.render.camera import Camera
from gradsim_taichi.render.raster_autograd import RasterSettings, SoftRasterFunction
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

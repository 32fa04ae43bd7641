"""Image formation for gradsim-taichi: camera, meshes, lights, the differentiable soft
rasterizer (Taichi kernels with hand-written adjoints behind a torch autograd Function)
and video helpers. Import as ``gradsim_taichi.render``.

Example::

    from gradsim_taichi.render import Camera, Mesh, SoftRasterizer, save_video

    cam = Camera.look_at(eye=(0, 1.5, 4), target=(0, 0.5, 0), fov_y_deg=45,
                         width=160, height=120)
    ball = Mesh(sphere_faces, color=(0.9, 0.3, 0.2))
    ground = Mesh([[0, 2, 1], [0, 3, 2]], color=(0.4, 0.6, 0.4))
    render = SoftRasterizer(cam, [ball, ground], sigma=1e-4, gamma=1e-4,
                            background=(0.7, 0.8, 1.0))
    frames = render([ball_positions, ground_positions])  # [F, V, 3], [4, 3] -> [F, H, W, 4]
    loss = ((frames - target_frames) ** 2).mean()
    loss.backward()  # gradients to positions, colours, textures, lights, camera tensors
    save_video(frames.detach(), "out.gif", fps=30)
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

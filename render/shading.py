"""Meshes, lights and shading (torch): per-face corner colours for the rasterizer.

Shading is evaluated per vertex (Gouraud, ``smooth=True``) or per face (flat) in
torch, so gradients to vertex positions (through normals), colours, textures and light
parameters come from torch autograd. The rasterizer then interpolates, per pixel,
``colour = (sum_i b_i M_i) * texture(uv) + sum_i b_i A_i`` with ``M = albedo * (ambient +
diffuse)`` and ``A = specular`` at the three corners.
"""

from __future__ import annotations

import torch

from gradsim_taichi import runtime


def _tensor(x, name, shape=None, allow_grad=True):
    """Float tensor of the runtime dtype on the runtime's device (a tensor elsewhere is
    moved: differentiably, so tensors that require grad stay in the graph)."""
    dt, dev = runtime.torch_dtype(), runtime.torch_device()
    if isinstance(x, torch.Tensor):
        if not torch.is_floating_point(x):
            raise TypeError(f"{name} must be a floating tensor, got dtype {x.dtype}")
        t = x.to(dtype=dt, device=dev)
    else:
        t = torch.as_tensor(x, dtype=dt, device=dev)
    if shape is not None and tuple(t.shape) != tuple(shape):
        raise ValueError(f"{name} must have shape {tuple(shape)}, got {tuple(t.shape)}")
    if not torch.isfinite(t.detach()).all():
        raise ValueError(f"{name} contains NaN or infinite values")
    return t


class AmbientLight:
    """Uniform light: adds ``intensity * color`` to the shading of every surface point."""

    def __init__(self, intensity=0.5, color=(1.0, 1.0, 1.0)):
        self.intensity = _tensor(intensity, "AmbientLight.intensity", ())
        self.color = _tensor(color, "AmbientLight.color", (3,))


class DirectionalLight:
    """Light travelling along ``direction`` (e.g. ``(0, -1, 0)`` shines downwards):
    Lambertian ``intensity * color * max(0, n . -direction)`` plus, for meshes with
    ``specular > 0``, a Blinn-Phong highlight. Parameters may be tensors requiring grad."""

    def __init__(self, direction=(0.0, -1.0, -1.0), intensity=0.5, color=(1.0, 1.0, 1.0)):
        self.direction = _tensor(direction, "DirectionalLight.direction", (3,))
        if float(self.direction.detach().norm()) < 1e-12:
            raise ValueError("DirectionalLight.direction must be non-zero")
        self.intensity = _tensor(intensity, "DirectionalLight.intensity", ())
        self.color = _tensor(color, "DirectionalLight.color", (3,))


def default_lights() -> list:
    """Ambient 0.5 plus a directional 0.5 from above and in front (as in gradSim)."""
    return [AmbientLight(0.5), DirectionalLight((0.3, -1.0, -0.6), 0.5)]


class Mesh:
    """Topology and appearance of one triangle mesh (positions are given per render).

    Args:
        faces: ``[T, 3]`` integer vertex indices, counter-clockwise seen from outside
            (the outward normal is ``(v1 - v0) x (v2 - v0)``).
        vertex_colors: ``[V, 3]`` albedo per vertex, or
        face_colors: ``[T, 3]`` albedo per face, or neither: ``color`` everywhere.
        uv: texture coordinates ``[V, 2]`` (per vertex) or ``[T, 3, 2]`` (per corner).
        texture: ``[Ht, Wt, 3]`` image (row 0 at the top); multiplies the albedo.
        color: uniform albedo when no colours are given (default light grey; white with
            a texture).
        specular, shininess: Blinn-Phong highlight strength and exponent (0: none).
        smooth: Gouraud shading with area-weighted vertex normals (else flat).
        two_sided: light back faces as if their normal faced the camera (planes whose
            winding is unknown).
        lit: False ignores the lights and shows the albedo as it is.
    Tensors may require grad (colours, texture); they are used as given at each render.
    """

    def __init__(
        self,
        faces,
        vertex_colors=None,
        face_colors=None,
        uv=None,
        texture=None,
        color=None,
        specular=0.0,
        shininess=32.0,
        smooth=True,
        two_sided=False,
        lit=True,
    ):
        f = faces if isinstance(faces, torch.Tensor) else torch.as_tensor(faces)
        if f.is_floating_point() or f.dtype == torch.bool:
            raise TypeError(f"faces must be an integer array, got dtype {f.dtype}")
        if f.ndim != 2 or f.shape[1] != 3 or f.shape[0] == 0:
            raise ValueError(f"faces must have shape [T, 3] with T >= 1, got {tuple(f.shape)}")
        if int(f.min()) < 0:
            raise ValueError(f"faces contain a negative vertex index ({int(f.min())})")
        self.faces = f.to(torch.int64).contiguous()
        T = self.faces.shape[0]
        if vertex_colors is not None and face_colors is not None:
            raise ValueError("give vertex_colors or face_colors, not both")
        self.vertex_colors = None
        if vertex_colors is not None:
            self.vertex_colors = _tensor(vertex_colors, "vertex_colors")
        if self.vertex_colors is not None and (
            self.vertex_colors.ndim != 2 or self.vertex_colors.shape[1] != 3
        ):
            raise ValueError(f"vertex_colors must be [V, 3], got {tuple(self.vertex_colors.shape)}")
        self.face_colors = None
        if face_colors is not None:
            self.face_colors = _tensor(face_colors, "face_colors", (T, 3))
        self.texture = None
        self.uv = None
        if (uv is None) != (texture is None):
            raise ValueError("a texture needs uv coordinates and uv needs a texture")
        if texture is not None:
            self.texture = _tensor(texture, "texture")
            if self.texture.ndim != 3 or self.texture.shape[2] != 3 or min(self.texture.shape) < 1:
                raise ValueError(f"texture must be [Ht, Wt, 3], got {tuple(self.texture.shape)}")
            self.uv = _tensor(uv, "uv").detach()
            if not (self.uv.ndim == 2 and self.uv.shape[1] == 2) and tuple(self.uv.shape) != (
                T, 3, 2,
            ):  # fmt: skip
                raise ValueError(f"uv must be [V, 2] or [T, 3, 2], got {tuple(self.uv.shape)}")
        if color is None:
            color = (1.0, 1.0, 1.0) if texture is not None else (0.7, 0.7, 0.7)
        self.color = _tensor(color, "color", (3,))
        self.specular = _tensor(specular, "specular", ())
        self.shininess = float(shininess)
        self.smooth, self.two_sided, self.lit = bool(smooth), bool(two_sided), bool(lit)

    @property
    def num_faces(self) -> int:
        return self.faces.shape[0]

    def check_vertices(self, verts: torch.Tensor, index: int) -> None:
        """Raise a clear error if ``verts [F, V, 3]`` does not fit this mesh."""
        V = verts.shape[1]
        fmax = self._faces_max()
        if fmax >= V:
            raise ValueError(f"mesh {index}: faces index vertex {fmax} but only {V} vertices given")
        if self.vertex_colors is not None and self.vertex_colors.shape[0] != V:
            raise ValueError(
                f"mesh {index}: vertex_colors has {self.vertex_colors.shape[0]} rows, "
                f"the positions have {V} vertices"
            )
        if self.uv is not None and self.uv.ndim == 2 and self.uv.shape[0] != V:
            raise ValueError(f"mesh {index}: uv has {self.uv.shape[0]} rows, expected {V}")

    def _faces_max(self) -> int:
        """The largest vertex index of ``faces``, read once per faces tensor (not on every
        render: on CUDA each read waits for the device)."""
        cached = self.__dict__.get("_fmax")
        if cached is None or cached[0] is not self.faces or cached[1] != self.faces._version:
            cached = (self.faces, self.faces._version, int(self.faces.max()))
            self._fmax = cached
        return cached[2]

    def _uses_specular(self) -> bool:
        """Whether shading computes the highlight: always when ``specular`` requires grad
        (it may leave 0), else when it is non-zero, read once per specular tensor (not on
        every render: on CUDA each read waits for the device)."""
        spec = self.specular
        if spec.requires_grad:
            return True
        cached = self.__dict__.get("_spec")
        if cached is None or cached[0] is not spec or cached[1] != spec._version:
            cached = (spec, spec._version, bool(spec.detach() != 0))
            self._spec = cached
        return cached[2]

    def corner_uv(self) -> torch.Tensor | None:
        """Texture coordinates per face corner ``[T, 6]`` (None without a texture)."""
        if self.uv is None:
            return None
        uv = self.uv if self.uv.ndim == 3 else self.uv[self.faces]
        return uv.reshape(-1, 6)

    def corner_albedo(self) -> torch.Tensor:
        """Albedo per face corner ``[T, 3, 3]``."""
        T = self.num_faces
        if self.vertex_colors is not None:
            return self.vertex_colors[self.faces]
        if self.face_colors is not None:
            return self.face_colors[:, None, :].expand(T, 3, 3)
        return self.color.expand(T, 3, 3)


def _normalize(v: torch.Tensor) -> torch.Tensor:
    return v / v.norm(dim=-1, keepdim=True).clamp_min(1e-12)


def shade(mesh: Mesh, verts: torch.Tensor, lights: list, eye: torch.Tensor):
    """Corner colours ``(M, A)``, each ``[F, T, 3, 3]``, of ``mesh`` at positions
    ``verts [F, V, 3]`` under ``lights`` seen from ``eye [3]``."""
    F = verts.shape[0]
    faces = mesh.faces.to(verts.device)
    albedo = mesh.corner_albedo()[None]  # [1, T, 3, 3]
    if not mesh.lit or not lights:
        M = albedo.expand(F, -1, -1, -1)
        return M, torch.zeros_like(M)
    fv = verts[:, faces]  # [F, T, 3, 3]
    fn = torch.linalg.cross(fv[:, :, 1] - fv[:, :, 0], fv[:, :, 2] - fv[:, :, 0])
    if mesh.smooth:
        vn = torch.zeros_like(verts).index_add(1, faces.reshape(-1), fn.repeat_interleave(3, 1))
        n = _normalize(vn)[:, faces]
    else:
        n = _normalize(fn)[:, :, None, :].expand(-1, -1, 3, -1)
    view = _normalize(eye - fv)  # corner to camera
    if mesh.two_sided:
        n = n * torch.where((n * view).sum(-1, keepdim=True) < 0, -1.0, 1.0)
    light = torch.zeros_like(fv)
    spec = torch.zeros_like(fv)
    use_spec = mesh._uses_specular()
    for lt in lights:
        if isinstance(lt, AmbientLight):
            light = light + lt.intensity * lt.color
        elif isinstance(lt, DirectionalLight):
            to_light = _normalize(-lt.direction)
            lam = (n * to_light).sum(-1, keepdim=True).clamp_min(0.0)
            light = light + lt.intensity * lt.color * lam
            if use_spec:
                h = _normalize(view + to_light)
                nh = (n * h).sum(-1, keepdim=True).clamp_min(0.0)
                lit_side = (lam > 0).to(nh.dtype)
                strength = mesh.specular * lt.intensity * lt.color
                spec = spec + strength * nh**mesh.shininess * lit_side
        else:
            raise TypeError(f"unknown light type {type(lt).__name__}")
    return albedo * light, spec

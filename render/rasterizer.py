"""``SoftRasterizer``: vertex positions of several meshes -> RGBA frames, differentiable.

Projection and shading run in torch (so camera pose, lights, colours and textures get
gradients from autograd), the per-pixel soft rasterization in Taichi
(:class:`.bridge.SoftRasterFunction`). ``mode="hard"`` z-buffers in Taichi and shades the
visible face per pixel in torch (gradients to appearance, none through silhouettes);
``mode="antialias"`` adds analytic edge anti-aliasing to that (:mod:`.antialias`): the
image an ordinary renderer makes, with gradients through silhouette and occlusion edges.
"""

from __future__ import annotations

import torch

from gradsim_taichi import runtime
from gradsim_taichi.render import hard_raster
from gradsim_taichi.render.antialias import antialias, face_neighbours
from gradsim_taichi.render.camera import Camera
from gradsim_taichi.render.raster_autograd import (
    RasterSettings,
    SoftRasterFunction,
    ensure_texture,
    hard_face_ids,
    pack_geometry,
)
from gradsim_taichi.render.shading import DirectionalLight, Mesh, _tensor, default_lights, shade
from gradsim_taichi.render.sun_shadows import shadowed_pixels
from gradsim_taichi.render.texture import sample_bilinear, stack_textures

MODES = ("soft", "hard", "antialias")
# samples per pixel edge of the antialiased image (see SoftRasterizer's ``supersample``)
ANTIALIAS_SUPERSAMPLE = 2


class SoftRasterizer:
    """Differentiable renderer of triangle meshes (SoftRas aggregation).

    Args:
        camera: a :class:`Camera`.
        meshes: a :class:`Mesh` or a list of them (e.g. an object and a ground plane).
        lights: list of ``AmbientLight``/``DirectionalLight``; None gives gradSim's
            ambient 0.5 + directional 0.5; ``[]`` renders the albedo unlit.
        sigma: coverage sharpness, in squared units of half the image height (1e-4 at
            256 px spreads edges over about a pixel). Smaller is crisper.
        gamma: depth-softmax temperature (smaller: the nearest surface wins harder).
            The defaults (``gamma=1e-4``, ``threshold=1e-8``) are SoftRas's: a crisp
            front surface and a short reach per triangle (fast). For estimation to
            machine precision the presets use ``gamma=1e-2, threshold=1e-30``
            (``Scene``): with 1e-4 a face's far coverage tail can outweigh what lies
            behind it by ``exp(depth gap / gamma)``, so the loss jumps where a pixel
            leaves the tail's reach; 1e-2 over a 10 m depth range with a 1e-30 cutoff
            keeps those jumps below 1e-15, at the cost of a wider reach.
        background: RGB colour ``[3]`` or image ``[H, W, 3]`` (may require grad).
        mode: ``"soft"`` (SoftRas: differentiable everywhere, but the depth softmax
            blends hidden faces' colours into the visible ones and blurs edges),
            ``"hard"`` (z-buffer, alpha in {0, 1}; gradients only to appearance and
            interpolation) or ``"antialias"`` (the hard image with analytic edge
            anti-aliasing: the nearest surface wins, edges are anti-aliased, and
            gradients reach vertex positions through silhouette and occlusion edges;
            ``sigma``, ``gamma``, ``eps`` and ``threshold`` are not used).
        eps: normalised depth of the background in the softmax.
        threshold: coverage below which a face is skipped at a pixel (sets the reach of
            each triangle's screen box).
        tile: tile edge in pixels for binning.
        supersample: render at ``supersample`` times the camera's resolution and average
            each block of ``supersample x supersample`` samples into a pixel (default 2
            for ``"antialias"``, 1 otherwise). The anti-aliasing is exact only for an
            edge that crosses a pixel from side to side: where edges meet (corners,
            thin faces, a curved surface's facets) its error, small per pixel, biased
            an estimation (a 6 kg cylinder's mass by 1e-3 on an exactly box-filtered
            target); blocks of 2 x 2 cut that to 2e-5-6e-5, for 4x the pixels.
        sun_shadows: the meshes (indices into ``meshes``; True: all) that cast the
            directional lights' shadows onto each other and onto themselves, hard and
            antialiased modes only (:mod:`.sun_shadows`): a concave body's self-shadow,
            one body's shadow on another. None (the default): no shadows.

    Call with vertex positions: ``frames = r(vertices)`` where ``vertices`` is a list with
    one tensor per mesh, each ``[F, V_k, 3]`` (or ``[V_k, 3]``: the same for every frame);
    one mesh may be passed as a bare tensor. Returns ``[F, H, W, 4]`` RGBA, or ``[H, W, 4]``
    when every input was ``[V, 3]``. Positions must have the runtime dtype.

    Triangles with a corner at or closer than ``camera.near`` are dropped whole (no
    clipping): split large ground planes into tiles, or keep them in front of the camera.
    """

    def __init__(
        self,
        camera: Camera,
        meshes,
        lights=None,
        sigma: float = 1e-4,
        gamma: float = 1e-4,
        background=(0.0, 0.0, 0.0),
        mode: str = "soft",
        eps: float = 1e-3,
        threshold: float = 1e-8,
        tile: int = 16,
        supersample: int | None = None,
        sun_shadows=None,
    ):
        runtime.ensure_init()
        if not isinstance(camera, Camera):
            raise TypeError(f"camera must be a Camera, got {type(camera).__name__}")
        self.camera = camera
        self.meshes = [meshes] if isinstance(meshes, Mesh) else list(meshes)
        if not self.meshes or not all(isinstance(m, Mesh) for m in self.meshes):
            raise TypeError("meshes must be a Mesh or a non-empty list of Mesh")
        self.lights = default_lights() if lights is None else list(lights)
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        if not sigma > 0 or not gamma > 0:
            raise ValueError(f"sigma and gamma must be positive, got {sigma}, {gamma}")
        if not 0 < threshold < 0.5:
            raise ValueError(f"threshold must be in (0, 0.5), got {threshold}")
        if int(tile) != tile or tile < 1:
            raise ValueError(f"tile must be a positive integer, got {tile}")
        self.mode = mode
        self.sigma, self.gamma, self.eps, self.threshold = sigma, gamma, eps, threshold
        self.tile = int(tile)
        if supersample is None:
            supersample = ANTIALIAS_SUPERSAMPLE if mode == "antialias" else 1
        if int(supersample) != supersample or supersample < 1:
            raise ValueError(f"supersample must be a positive integer, got {supersample}")
        self.supersample = int(supersample)
        self.background = background
        self.sun_shadows = None
        if sun_shadows is not None and sun_shadows is not False:
            if mode == "soft":
                raise ValueError("sun_shadows needs mode 'hard' or 'antialias'")
            k = range(len(self.meshes)) if sun_shadows is True else list(sun_shadows)
            if not all(isinstance(i, int) and 0 <= i < len(self.meshes) for i in k):
                raise ValueError(f"sun_shadows must be True or indices of meshes, got "
                                 f"{sun_shadows!r}")
            self.sun_shadows = tuple(k) or None

    @property
    def settings(self) -> RasterSettings:
        """The rasterized grid: the camera's pixels times :attr:`supersample` (positions
        are packed in units of half the image height, the same at any resolution)."""
        cam, S = self.camera, self.supersample
        return RasterSettings(
            width=cam.width * S, height=cam.height * S, sigma=self.sigma, gamma=self.gamma,
            near=cam.near, far=cam.far, eps=self.eps, threshold=self.threshold, tile=self.tile,
        )  # fmt: skip

    def background_image(self) -> torch.Tensor:
        """The background as ``[H, W, 3]``."""
        H, W = self.camera.height, self.camera.width
        bg = _tensor(self.background, "background")
        if bg.shape == (3,):
            return bg.expand(H, W, 3)
        if tuple(bg.shape) != (H, W, 3):
            raise ValueError(f"background must be [3] or [{H}, {W}, 3], got {tuple(bg.shape)}")
        return bg

    def packed_faces(self) -> torch.Tensor:
        """``[T, 3]`` the faces of all meshes as rendered, indexing their vertices packed
        one mesh after another; computed once."""
        if getattr(self, "_packed_faces", None) is None:
            faces, offset = [], 0
            for m in self.meshes:
                faces.append(m.faces + offset)
                offset += int(m.faces.max()) + 1
            self._packed_faces = torch.cat(faces)
        return self._packed_faces

    def neighbours(self) -> torch.Tensor:
        """``[T, 3]`` face adjacency over all meshes (packed as rendered), for the
        anti-aliasing's walk to the silhouette; computed once."""
        if getattr(self, "_neighbours", None) is None:
            self._neighbours = face_neighbours(self.packed_faces())
        return self._neighbours

    def _antialias(self, img, ids, xy, z, p=None):
        """The anti-aliasing of ``img``; with the packed inputs ``p``, the faces that no
        pixel centre sees are shaded as the pixels are (:func:`_colour_at`)."""
        colour_at = None if p is None else _colour_at(p, ids.shape[1], ids.shape[2])
        return antialias(img, ids, xy, z, self.neighbours().to(ids.device),
                         self.packed_faces().to(ids.device), colour_at)

    def _vertices(self, vertices) -> tuple[list[torch.Tensor], int, bool]:
        if isinstance(vertices, torch.Tensor):
            vertices = [vertices]
        vertices = list(vertices)
        if len(vertices) != len(self.meshes):
            raise ValueError(f"got {len(vertices)} vertex tensors for {len(self.meshes)} meshes")
        dt = runtime.torch_dtype()
        frames = set()
        for k, v in enumerate(vertices):
            if not isinstance(v, torch.Tensor):
                raise TypeError(f"vertices[{k}] must be a torch tensor, got {type(v).__name__}")
            if v.dtype != dt:
                raise TypeError(
                    f"vertices[{k}] has dtype {v.dtype}; the runtime precision needs {dt}"
                )
            if v.ndim not in (2, 3) or v.shape[-1] != 3:
                raise ValueError(f"vertices[{k}] must be [F, V, 3] or [V, 3], got {tuple(v.shape)}")
            if v.ndim == 3:
                frames.add(v.shape[0])
            # a host read that stays (on CUDA a wait for the device): a clear error for
            # NaN positions instead of faces silently culled by the binning
            if not torch.isfinite(v.detach()).all():
                raise ValueError(f"vertices[{k}] contains NaN or infinite positions")
        if len(frames) > 1:
            raise ValueError(f"meshes have different frame counts {sorted(frames)}")
        F = frames.pop() if frames else 1
        if F < 1:
            raise ValueError("vertices have zero frames")
        single = all(v.ndim == 2 for v in vertices)
        out = [v[None].expand(F, -1, -1) if v.ndim == 2 else v for v in vertices]
        for k, (m, v) in enumerate(zip(self.meshes, out, strict=True)):
            m.check_vertices(v, k)
        return out, F, single

    def prepare(self, vertices):
        """Projection and shading: the packed inputs of :class:`SoftRasterFunction`."""
        verts, F, single = self._vertices(vertices)
        eye = self.camera.eye()
        xys, zs = self._project(verts)
        cols, uvs, texids, textures, grads = [], [], [], [], []
        for m, v, xy in zip(self.meshes, verts, xys, strict=True):
            M, A = shade(m, v, self.lights, eye)
            T = m.num_faces
            cols.append(torch.cat([M.reshape(F, T, 9), A.reshape(F, T, 9)], -1))
            learnable = (xy.requires_grad or zs[-1].requires_grad or cols[-1].requires_grad
                         or (m.texture is not None and m.texture.requires_grad))
            grads.append(torch.full((T,), int(learnable), dtype=torch.int32, device=v.device))
            cuv = m.corner_uv()
            if cuv is None:
                uvs.append(torch.zeros(T, 6, dtype=v.dtype, device=v.device))
                texids.append(torch.full((T,), -1, dtype=torch.int32, device=v.device))
            else:
                uvs.append(cuv.to(v.device))
                texids.append(torch.full((T,), len(textures), dtype=torch.int32, device=v.device))
                textures.append(m.texture)
        tex, texsize = (None, None)
        sizes = [(t.shape[0], t.shape[1]) for t in textures]  # host copy of texsize
        if textures:
            tex, texsize = stack_textures(textures, runtime.torch_dtype())
        else:
            texsize = torch.ones(1, 2, dtype=torch.int32, device=verts[0].device)
        if self.sun_shadows is not None:
            sun = self._sun_colours(verts, eye)
        packed = dict(
            xy=torch.cat(xys, 1), z=torch.cat(zs, 1), col=torch.cat(cols, 1).contiguous(),
            tex=tex, bg=self.background_image(), uv=torch.cat(uvs, 0).contiguous(),
            texid=torch.cat(texids, 0).contiguous(), texsize=texsize,
            face_grad=torch.cat(grads, 0), texid_max=len(textures) - 1, tex_sizes=sizes,
        )  # fmt: skip
        if self.sun_shadows is not None:
            packed.update(sun)
        return packed, single

    def _sun_colours(self, verts, eye) -> dict:
        """For :mod:`.sun_shadows`: every packed face's corners in world space, which
        faces shadow, and per directional light its direction and its share of the
        corner colours (packed like ``col``; zero on meshes that do not shadow)."""
        world, shadowing, two_sided, lights = [], [], [], []
        # (which pixels a light reaches carries no gradient: positions without a graph)
        vertices = torch.cat([verts[k].detach() for k in self.sun_shadows], 1)
        for k, (m, v) in enumerate(zip(self.meshes, verts, strict=True)):
            world.append(v.detach()[:, m.faces.to(v.device)])
            for flags, value in ((shadowing, k in self.sun_shadows), (two_sided, m.two_sided)):
                flags.append(torch.full((m.num_faces,), value, dtype=torch.bool,
                                        device=v.device))
        for lt in self.lights:
            if not isinstance(lt, DirectionalLight):
                continue
            col = []
            for k, (m, v) in enumerate(zip(self.meshes, verts, strict=True)):
                F, T = v.shape[0], m.num_faces
                if k in self.sun_shadows and m.lit:
                    M, A = shade(m, v, [lt], eye)
                    col.append(torch.cat([M.reshape(F, T, 9), A.reshape(F, T, 9)], -1))
                else:
                    col.append(torch.zeros(F, T, 18, dtype=v.dtype, device=v.device))
            lights.append((lt.direction, torch.cat(col, 1)))
        return dict(world=torch.cat(world, 1), shadow_vertices=vertices,
                    shadowing=torch.cat(shadowing), two_sided=torch.cat(two_sided),
                    suns=lights)

    def _shadowed(self, out, ids, p) -> torch.Tensor:
        """``out`` with each directional light's share taken from the pixels it does
        not reach (:mod:`.sun_shadows`); records those pixels in ``p["dark"]``."""
        F, H, W = ids.shape
        rgb = out[..., :3].reshape(F * H * W, 3)
        p["dark"] = []
        for direction, col in p["suns"]:
            idx = shadowed_pixels(p["world"], p["shadow_vertices"], ids,
                                  p["shadowing"], p["two_sided"], self.camera, direction,
                                  self.supersample)
            dark = torch.zeros(F * H * W, dtype=torch.bool, device=ids.device)
            p["dark"].append(dark.index_fill(0, idx, True))
            if idx.numel():
                lost = _shade_pixels(dict(p, col=col), ids.reshape(-1)[idx], idx, H, W)
                rgb = rgb.index_put((idx,), rgb[idx] - lost)
        return torch.cat([rgb.reshape(F, H, W, 3), out[..., 3:]], -1)

    def _project(self, verts) -> tuple[list, list]:
        """Per mesh, the face corners on the screen ``[F, T, 3, 2]`` (units of half the
        image height) and their depths ``[F, T, 3]``."""
        cam = self.camera
        scale = 2.0 / cam.height
        fx, fy, cx, cy = cam.intrinsics()
        xys, zs = [], []
        for m, v in zip(self.meshes, verts, strict=True):
            pc = cam.to_camera(v)
            z = pc[..., 2]
            zsafe = torch.where(z > 0.5 * cam.near, z, torch.ones_like(z))
            u = (fx * pc[..., 0] / zsafe + cx) * scale
            w = (fy * pc[..., 1] / zsafe + cy) * scale
            xys.append(torch.stack([u, w], -1)[:, m.faces])
            zs.append(z[:, m.faces])
        return xys, zs

    def coverage(self, vertices) -> torch.Tensor:
        """The meshes' coverage ``[F, H, W, 1]`` (``[H, W, 1]`` for ``[V, 3]`` vertices):
        the alpha channel of :meth:`__call__`, equal to it bit for bit. The antialiased
        mode skips the shading (the shadow and the mask losses need only this; shading
        and anti-aliasing the colours cost as much again); the others render in full (a
        hard image's coverage keeps its graph, with zero gradient, as before)."""
        if self.mode != "antialias":
            return self(vertices)[..., 3:]
        verts, F, single = self._vertices(vertices)
        xys, zs = self._project(verts)
        xy, z = torch.cat(xys, 1), torch.cat(zs, 1)
        ids = hard_face_ids(xy, z, self.settings)
        out = self._antialias((ids >= 0)[..., None].to(xy.dtype), ids, xy, z)
        out = self._pooled(out)
        return out[0] if single else out

    def _pooled(self, out: torch.Tensor) -> torch.Tensor:
        """The raster grid's ``[F, H S, W S, C]`` averaged in ``S x S`` blocks."""
        S = self.supersample
        if S == 1:
            return out
        return torch.nn.functional.avg_pool2d(out.permute(0, 3, 1, 2), S).permute(0, 2, 3, 1)

    def __call__(self, vertices) -> torch.Tensor:
        """Render; see the class docstring for shapes."""
        p, single = self.prepare(vertices)
        st = self.settings
        S = self.supersample
        if S > 1:  # each background pixel fills its block
            p["bg"] = p["bg"].repeat_interleave(S, 0).repeat_interleave(S, 1)
        if self.mode == "soft":
            out = SoftRasterFunction.apply(
                p["xy"], p["z"], p["col"], p["tex"], p["bg"], p["uv"], p["texid"],
                p["texsize"], st, p["face_grad"], p["texid_max"],
            )  # fmt: skip
        else:
            ids = hard_face_ids(p["xy"], p["z"], st)
            out = hard_shade(p, ids, st)
            if self.sun_shadows is not None:
                out = self._shadowed(out, ids, p)
            if self.mode == "antialias":
                out = self._antialias(out, ids, p["xy"], p["z"], p)
        out = self._pooled(out)
        return out[0] if single else out


def hard_shade(p: dict, face_id: torch.Tensor, st: RasterSettings) -> torch.Tensor:
    """Colour of the visible face at each pixel, differentiable in appearance.

    Every pixel is shaded by a Taichi kernel (no gradients); the pixels of faces that
    need gradients (``p["face_grad"]``) are shaded again in torch, so that an
    estimation's autograd graph holds only the pixels of what it learns."""
    F, H, W = face_id.shape
    hit = face_id >= 0
    geom = pack_geometry(p["xy"].detach(), p["z"].detach())
    tex, texsize = ensure_texture(p["tex"], p["texsize"], geom.device)
    rgb = p["bg"].detach().expand(F, H, W, 3).contiguous()
    hard_raster.hard_colours(geom, p["col"].detach().contiguous(), p["uv"].detach().contiguous(),
                   p["texid"], tex.detach().contiguous(), texsize,
                   face_id.to(torch.int32).contiguous(), rgb)
    bg = p["bg"]
    if torch.is_grad_enabled() and bg.requires_grad:  # a learned background
        rgb = torch.where(hit[..., None], rgb, bg.expand(F, H, W, 3))
    learn = hit & (p["face_grad"][face_id.clamp_min(0)] != 0)
    # a host read that stays (on CUDA a wait for the device): the number of pixels to
    # re-shade sizes the autograd graph; re-shading every pixel would cost far more
    idx = torch.nonzero(learn.reshape(-1), as_tuple=True)[0]
    if torch.is_grad_enabled() and idx.numel():
        rgb = rgb.reshape(F * H * W, 3).index_put(
            (idx,), _shade_pixels(p, face_id.reshape(-1)[idx], idx, H, W)).reshape(F, H, W, 3)
    return torch.cat([rgb, hit[..., None].to(rgb.dtype)], -1)


def _colour_at(p: dict, H: int, W: int):
    """For :func:`.antialias.antialias`: a face's RGBA at a screen point, as
    :func:`hard_shade` and :meth:`SoftRasterizer._shadowed` would colour it at a pixel
    centre there, with the shadows of the pixel ``pixel`` next to it."""

    def colour_at(frame, fid, point, pixel):
        px, py = point[:, 0], point[:, 1]
        rgb = _shade_points(p, frame, fid, px, py)
        for (_, col), dark in zip(p.get("suns", []), p.get("dark", []), strict=True):
            rgb = rgb - dark[pixel][:, None] * _shade_points(dict(p, col=col), frame, fid,
                                                              px, py)
        return torch.cat([rgb, torch.ones_like(rgb[:, :1])], -1)

    return colour_at


def _shade_pixels(p: dict, fid: torch.Tensor, idx: torch.Tensor, H: int, W: int
                  ) -> torch.Tensor:
    """Colours ``[N, 3]`` of faces ``fid [N]`` at the centres of the flat pixels ``idx``
    (perspective-correct interpolation of the corner colours and texture coordinates)."""
    frame, ij = idx // (H * W), idx % (H * W)
    scale = 2.0 / H
    # pixel centres in the positions' dtype (int + 0.5 would be float32)
    dtype = p["z"].dtype
    px = ((ij % W).to(dtype) + 0.5) * scale
    py = ((ij // W).to(dtype) + 0.5) * scale
    return _shade_points(p, frame, fid, px, py)


def _shade_points(p: dict, frame: torch.Tensor, fid: torch.Tensor, px: torch.Tensor,
                  py: torch.Tensor) -> torch.Tensor:
    """Colours ``[N, 3]`` of faces ``fid [N]`` of frames ``frame [N]`` at the screen
    points ``(px, py)`` (see :func:`_shade_pixels`)."""
    xy = p["xy"][frame, fid]  # [N, 3, 2]
    z = p["z"][frame, fid]  # [N, 3]
    col = p["col"][frame, fid]  # [N, 18]
    xs, ys = xy[..., 0], xy[..., 1]
    n = []
    for k in range(3):
        k1, k2 = (k + 1) % 3, (k + 2) % 3
        n.append((xs[:, k1] - px) * (ys[:, k2] - py) - (ys[:, k1] - py) * (xs[:, k2] - px))
    n = torch.stack(n, -1)
    w = (n / n.sum(-1, keepdim=True)).clamp(0.0, 1.0)
    q = w / z
    b = q / q.sum(-1, keepdim=True).clamp_min(1e-300)
    uv = p["uv"][fid].reshape(-1, 3, 2)
    uvp = (b[..., None] * uv).sum(-2)
    Tx = sample_bilinear(p["tex"], p["texsize"], p["texid"][fid], uvp[:, 0], uvp[:, 1],
                         p.get("tex_sizes"))
    M = col[:, 0:9].reshape(-1, 3, 3)
    A = col[:, 9:18].reshape(-1, 3, 3)
    return (b[..., None] * M).sum(-2) * Tx + (b[..., None] * A).sum(-2)

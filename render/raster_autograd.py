"""The torch side of the soft rasterizer: a ``torch.autograd.Function`` over packed faces.

:class:`SoftRasterFunction` maps per-face screen geometry, corner colours, textures and
the background to RGBA images, with the hand-written Taichi adjoint as its backward.
The formula is documented in :mod:`.soft_raster`; :class:`RasterSettings` holds its
constants.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from gradsim_taichi import runtime
from gradsim_taichi.render import hard_raster
from gradsim_taichi.render import soft_raster as K
from gradsim_taichi.render.tiles import Bins, bin_faces


@dataclass(frozen=True)
class RasterSettings:
    """Constants of the soft rasterizer.

    ``sigma``: sharpness of the coverage sigmoid, in squared units of half the image
    height (SoftRas's NDC units for square images); ``gamma``: softmax temperature of
    the depth aggregation; ``near``/``far``: depth range for the normalised depth;
    ``eps``: normalised depth of the background; ``threshold``: coverage below which a
    face is ignored at a pixel (sets the box growth ``sqrt(sigma * log(1/threshold - 1))``);
    ``tile``: tile edge in pixels.
    """

    width: int
    height: int
    sigma: float = 1e-4
    gamma: float = 1e-4
    near: float = 0.01
    far: float = 100.0
    eps: float = 1e-3
    threshold: float = 1e-8
    tile: int = 16

    @property
    def d2max(self) -> float:
        """Squared distance (screen units) outside a face where the coverage reaches
        ``threshold``."""
        return self.sigma * math.log(1.0 / self.threshold - 1.0)


def pack_geometry(xy: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """``xy[F, T, 3, 2]`` (screen units) and ``z[F, T, 3]`` to ``geom[F, T, 9]``."""
    F, T = z.shape[0], z.shape[1]
    return torch.cat([xy.reshape(F, T, 6), z], -1).contiguous()


def ensure_texture(tex, texsize, device):
    """``(tex, texsize)``, or a 1x1 white texture when there is none (kernels need one)."""
    if tex is None or tex.numel() == 0:
        dt = runtime.torch_dtype()
        return (torch.ones(1, 1, 1, 3, dtype=dt, device=device),
                torch.ones(1, 2, dtype=torch.int32, device=device))
    return tex, texsize


def bins_for(geom: torch.Tensor, st: RasterSettings, reach: float) -> Bins:
    return bin_faces(geom.detach(), st.near, st.width, st.height, reach, st.tile)


def _check_inputs(xy, z, col, tex, bg, uv, texid, texsize, st: RasterSettings,
                  texid_max: int | None = None) -> None:
    """Shapes, dtypes and texture ids; ``texid_max``: the largest texid when the caller
    knows it (no read of ``texid`` from the device)."""
    dt = runtime.torch_dtype()
    F, T = z.shape[0] if z.ndim == 3 else -1, z.shape[1] if z.ndim == 3 else -1
    want = {
        "xy": (xy, (F, T, 3, 2)),
        "z": (z, (F, T, 3)),
        "col": (col, (F, T, 18)),
        "bg": (bg, (st.height, st.width, 3)),
        "uv": (uv, (T, 6)),
    }
    for name, (t, shape) in want.items():
        if t.dtype != dt:
            raise TypeError(f"{name} has dtype {t.dtype}; the runtime precision needs {dt}")
        if tuple(t.shape) != shape or F < 1 or T < 1:
            raise ValueError(f"{name} must have shape {shape} (F, T >= 1), got {tuple(t.shape)}")
    if texid.dtype != torch.int32 or tuple(texid.shape) != (T,):
        raise TypeError(f"texid must be int32 [{T}], got {texid.dtype} {tuple(texid.shape)}")
    if tex is not None:
        if tex.dtype != dt or tex.ndim != 4 or tex.shape[3] != 3:
            raise ValueError(
                f"tex must be [K, Ht, Wt, 3] of {dt}, got {tex.dtype} {tuple(tex.shape)}"
            )
        if texsize is None or texsize.dtype != torch.int32 or tuple(texsize.shape) != (
            tex.shape[0], 2,
        ):  # fmt: skip
            raise TypeError("texsize must be int32 [K, 2] matching tex")
    top = int(texid.max()) if texid_max is None else int(texid_max)
    if tex is not None:
        if top >= tex.shape[0]:
            raise ValueError(f"texid {top} is past the {tex.shape[0]} textures")
    elif top >= 0:
        raise ValueError("texid refers to a texture but tex is None")


class SoftRasterFunction(torch.autograd.Function):
    """``rgba = SoftRasterFunction.apply(xy, z, col, tex, bg, uv, texid, texsize, settings
    [, face_grad[, texid_max]])``.

    Inputs (runtime dtype, CPU): ``xy[F, T, 3, 2]`` screen positions, ``z[F, T, 3]``
    depths, ``col[F, T, 18]`` corner colours ``(M, A)``, ``tex[K, Ht, Wt, 3]`` textures
    (or None), ``bg[H, W, 3]`` background, ``uv[T, 6]``, ``texid[T]`` int32,
    ``texsize[K, 2]`` int32. Output ``[F, H, W, 4]``. Differentiable in ``xy, z, col, tex,
    bg``. Faces with a corner at or in front of ``near`` are culled. ``face_grad[T]``
    (int32, optional): 0 for faces whose geometry, colours and texture need no gradient
    (a static ground): the backward pass skips them (their gradients are zero).
    ``texid_max`` (optional): the largest entry of ``texid`` when the caller knows it (the
    rasterizer, which builds ``texid``): the check then reads nothing back from the device.
    """

    @staticmethod
    def forward(ctx, xy, z, col, tex, bg, uv, texid, texsize, st: RasterSettings,
                face_grad=None, texid_max=None):
        _check_inputs(xy, z, col, tex, bg, uv, texid, texsize, st, texid_max)
        F, T = z.shape[0], z.shape[1]
        geom = pack_geometry(xy.detach(), z.detach())
        col = col.detach().contiguous()
        tex_in = tex
        tex, texsize = ensure_texture(None if tex is None else tex.detach().contiguous(), texsize,
                                   geom.device)
        bg = bg.detach().contiguous()
        bins = bins_for(geom, st, math.sqrt(st.d2max))
        out = torch.empty(F, st.height, st.width, 4, dtype=geom.dtype, device=geom.device)
        state = torch.empty(F, st.height, st.width, 3, dtype=geom.dtype, device=geom.device)
        args = (geom, col, uv, texid, tex, texsize, bins.bbox, bins.tile_start, bins.entry_face)
        pixels = int(runtime.raster_shape() == "pixel")
        K.soft_forward(
            *args, bg, out, state, st.sigma, st.gamma, st.near, st.far, st.eps, st.d2max,
            st.tile, bins.ntx, bins.nty, pixels,
        )  # fmt: skip
        ctx.pixels = pixels
        ctx.st = st
        ctx.bins = bins
        ctx.shape = (F, T)
        ctx.has_tex = tex_in is not None
        if face_grad is None:
            face_grad = torch.ones(T, dtype=torch.int32, device=geom.device)
        ctx.save_for_backward(geom, col, uv, texid, tex, texsize, out, state,
                              face_grad.to(dtype=torch.int32, device=geom.device).contiguous())
        return out

    @staticmethod
    def backward(ctx, gout):
        saved = [t.detach() for t in ctx.saved_tensors]
        geom, col, uv, texid, tex, texsize, out, state, face_grad = saved
        st, bins = ctx.st, ctx.bins
        F, T = ctx.shape
        gout = gout.detach().contiguous().to(geom.dtype)
        E = bins.entry_key.shape[0]
        gentry = torch.zeros(max(E, 1), 27, dtype=geom.dtype, device=geom.device)
        want_tex = int(ctx.has_tex and ctx.needs_input_grad[3])
        gtex = (torch.zeros_like(tex) if want_tex
                else torch.zeros(1, 1, 1, 3, dtype=geom.dtype, device=geom.device))
        K.soft_backward(
            geom, col, uv, texid, tex, texsize, bins.bbox, bins.tile_start, bins.entry_face,
            bins.entry_tile, out, state, gout, gentry, gtex, face_grad, st.sigma, st.gamma,
            st.near, st.far, st.d2max, st.tile, bins.ntx, bins.nty, want_tex, E, ctx.pixels,
        )  # fmt: skip
        gface = torch.zeros(F * T, 27, dtype=geom.dtype, device=geom.device)
        if E > 0:
            K.sum_entries(gentry, bins.entry_key, gface, E, runtime.serial(E * 27, 1.0))
        gface = gface.reshape(F, T, 27)
        gxy = gface[..., 0:6].reshape(F, T, 3, 2)
        gz = gface[..., 6:9].contiguous()
        gcol = gface[..., 9:27].contiguous()
        gbg = None
        if ctx.needs_input_grad[4]:
            wb = torch.exp((st.eps - state[..., 0]) / st.gamma) / state[..., 1]
            gbg = (gout[..., :3] * wb[..., None]).sum(0)
        return (gxy, gz, gcol, (gtex if want_tex else None), gbg, None, None, None, None, None,
                None)


def hard_face_ids(xy: torch.Tensor, z: torch.Tensor, st: RasterSettings) -> torch.Tensor:
    """Nearest face per pixel (z-buffer), ``[F, H, W]`` int64, -1 where no face."""
    F = z.shape[0]
    geom = pack_geometry(xy.detach(), z.detach())
    bins = bins_for(geom, st, 0.0)
    face_id = torch.full((F, st.height, st.width), -1, dtype=torch.int32, device=geom.device)
    zbuf = torch.full((F, st.height, st.width), st.far, dtype=geom.dtype, device=geom.device)
    hard_raster.hard_zbuffer(
        geom, bins.bbox, bins.tile_start, bins.entry_face, face_id, zbuf, st.near, st.far,
        st.tile, bins.ntx, bins.nty, int(runtime.raster_shape() == "pixel"),
    )  # fmt: skip
    return face_id.to(torch.int64)

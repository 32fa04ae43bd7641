"""Textures in torch: stacking per-mesh textures for the kernels and a bilinear sampler.

Texture images are ``[Ht, Wt, 3]`` with row 0 at the top; ``uv = (0, 0)`` is the
bottom-left corner of the image and ``(1, 1)`` the top-right. Lookups are bilinear with
clamp-to-edge, the same rule as the Taichi kernels (``soft_raster._tex_sample``).
"""

from __future__ import annotations

import torch


def stack_textures(textures: list[torch.Tensor], dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """Zero-pad textures to a common size and stack them: ``[K, Hmax, Wmax, 3]`` plus
    their sizes ``[K, 2]`` (int32, rows then columns). Differentiable."""
    hmax = max(t.shape[0] for t in textures)
    wmax = max(t.shape[1] for t in textures)
    padded = [
        torch.nn.functional.pad(t.to(dtype), (0, 0, 0, wmax - t.shape[1], 0, hmax - t.shape[0]))
        for t in textures
    ]
    sizes = torch.tensor([[t.shape[0], t.shape[1]] for t in textures], dtype=torch.int32,
                         device=textures[0].device)
    return torch.stack(padded).contiguous(), sizes


def sample_bilinear(tex, texsize, texid, u, v, sizes=None) -> torch.Tensor:
    """Colours ``[..., 3]`` at ``(u, v)`` of textures ``texid`` (same shape as u; -1: ones).

    ``sizes``: the textures' ``(rows, columns)`` as Python ints when the caller has them
    (the rasterizer does); without, they are read from ``texsize`` (on CUDA a wait for
    the device per texture)."""
    out = torch.ones(*u.shape, 3, dtype=u.dtype, device=u.device)
    if tex is None:
        return out
    if sizes is None:
        sizes = texsize.tolist()
    for k in range(tex.shape[0]):
        sel = texid == k
        ht, wt = int(sizes[k][0]), int(sizes[k][1])
        x = u * wt - 0.5
        y = (1.0 - v) * ht - 0.5
        xf = torch.floor(x).detach()
        yf = torch.floor(y).detach()
        fx = (x - xf)[..., None]
        fy = (y - yf)[..., None]
        xa = xf.long().clamp(0, wt - 1)
        xb = (xf.long() + 1).clamp(0, wt - 1)
        ya = yf.long().clamp(0, ht - 1)
        yb = (yf.long() + 1).clamp(0, ht - 1)
        t = tex[k]
        top = (1 - fx) * t[ya, xa] + fx * t[ya, xb]
        bottom = (1 - fx) * t[yb, xa] + fx * t[yb, xb]
        out = torch.where(sel[..., None], (1 - fy) * top + fy * bottom, out)
    return out

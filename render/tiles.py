"""Per-face screen boxes and tile binning (torch, no gradients).

Each face gets an inclusive pixel box grown by the sigmoid's reach; the image is cut
into ``tile x tile`` tiles and every (frame, tile) gets the list of faces whose box
meets it, in increasing face order (a stable sort keeps runs deterministic).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class Bins:
    """Binning of faces to tiles for F frames (all tensors int32 unless said)."""

    bbox: torch.Tensor  # [F, T, 4]: j0 j1 i0 i1, inclusive; empty (1, 0, 1, 0) when culled
    tile_start: torch.Tensor  # [F * nty * ntx + 1]
    entry_face: torch.Tensor  # [E'] face index within its frame (E' = max(E, 1))
    entry_key: torch.Tensor  # [E] int64: f * T + face, for reducing per-entry gradients
    tile: int
    ntx: int
    nty: int


def face_valid(geom: torch.Tensor, near: float) -> torch.Tensor:
    """Faces drawn at all: every corner in front of ``near`` and a non-degenerate area."""
    z = geom[..., 6:9]
    x0, y0, x1, y1, x2, y2 = geom[..., 0:6].unbind(-1)
    area = (x1 - x0) * (y2 - y0) - (y1 - y0) * (x2 - x0)
    finite = torch.isfinite(geom).all(-1)
    return finite & (z > near).all(-1) & (area.abs() > 1e-30)


def bin_faces(
    geom: torch.Tensor, valid: torch.Tensor, width: int, height: int, reach: float, tile: int
) -> Bins:
    """Boxes grown by ``reach`` (screen units) and the face lists of every tile.

    ``geom[F, T, 9]`` as in :mod:`.soft_raster`; ``valid[F, T]`` from :func:`face_valid`.
    """
    F, T = geom.shape[0], geom.shape[1]
    ntx = (width + tile - 1) // tile
    nty = (height + tile - 1) // tile
    half = 0.5 * height
    g = geom.detach()
    xs = g[..., 0:6:2] * half
    ys = g[..., 1:6:2] * half
    xs = torch.where(valid[..., None], xs, torch.zeros_like(xs))
    ys = torch.where(valid[..., None], ys, torch.zeros_like(ys))
    r = reach * half
    # pixel j has its centre at j + 0.5; one pixel of margin against rounding
    j0 = torch.ceil(xs.amin(-1) - r - 0.5) - 1
    j1 = torch.floor(xs.amax(-1) + r - 0.5) + 1
    i0 = torch.ceil(ys.amin(-1) - r - 0.5) - 1
    i1 = torch.floor(ys.amax(-1) + r - 0.5) + 1
    keep = valid & (j0 <= j1) & (i0 <= i1) & (j0 <= width - 1) & (j1 >= 0)
    keep = keep & (i0 <= height - 1) & (i1 >= 0)
    j0, j1 = j0.clamp(min=0), j1.clamp(max=width - 1)
    i0, i1 = i0.clamp(min=0), i1.clamp(max=height - 1)
    one = torch.ones_like(j0)
    j0 = torch.where(keep, j0, one)
    j1 = torch.where(keep, j1, one - 1)
    i0 = torch.where(keep, i0, one)
    i1 = torch.where(keep, i1, one - 1)
    bbox = torch.stack([j0, j1, i0, i1], -1).to(torch.int32).contiguous()

    j0l, j1l, i0l, i1l = (v.to(torch.int64) for v in (j0, j1, i0, i1))
    tx0, tx1 = j0l // tile, j1l // tile
    ty0, ty1 = i0l // tile, i1l // tile
    ntile_x = torch.where(keep, tx1 - tx0 + 1, torch.zeros_like(tx0))
    ntile_y = torch.where(keep, ty1 - ty0 + 1, torch.zeros_like(ty0))
    counts = (ntile_x * ntile_y).reshape(-1)
    E = int(counts.sum())
    ft = torch.repeat_interleave(torch.arange(F * T, dtype=torch.int64), counts)
    start = torch.cumsum(counts, 0) - counts
    k = torch.arange(E, dtype=torch.int64) - start[ft]
    nx = ntile_x.reshape(-1)[ft]
    tx = tx0.reshape(-1)[ft] + k % nx.clamp(min=1)
    ty = ty0.reshape(-1)[ft] + k // nx.clamp(min=1)
    frame = ft // T
    key = (frame * nty + ty) * ntx + tx
    key, order = torch.sort(key, stable=True)
    ft = ft[order]
    ntiles = F * nty * ntx
    tile_count = torch.bincount(key, minlength=ntiles)
    tile_start = torch.zeros(ntiles + 1, dtype=torch.int64)
    tile_start[1:] = torch.cumsum(tile_count, 0)
    entry_face = (ft % T).to(torch.int32)
    if E == 0:
        entry_face = torch.zeros(1, dtype=torch.int32)
    return Bins(
        bbox=bbox,
        tile_start=tile_start.to(torch.int32),
        entry_face=entry_face.contiguous(),
        entry_key=ft,
        tile=tile,
        ntx=ntx,
        nty=nty,
    )

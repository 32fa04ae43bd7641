"""Per-face screen boxes and tile binning (no gradients).

Each face gets an inclusive pixel box grown by the sigmoid's reach; the image is cut
into ``tile x tile`` tiles and every (frame, tile) gets the list of faces whose box
meets it, in increasing face order (a stable sort keeps runs deterministic). The
rasterizer's kernels walk these lists per tile or per pixel, and the backward pass per
entry (see ``runtime.raster_shape``).
:func:`bin_faces` does it with two Taichi kernels and a few torch calls;
:func:`bin_faces_torch` is the same in plain torch (kept as a cross-check for tests).
"""

from dataclasses import dataclass

import taichi as ti
import torch

NDA = ti.types.ndarray()


@dataclass
class Bins:
    """Binning of faces to tiles for F frames (all tensors int32 unless said)."""

    bbox: torch.Tensor  # [F, T, 4]: j0 j1 i0 i1, inclusive; empty (1, 0, 1, 0) when culled
    tile_start: torch.Tensor  # [F * nty * ntx + 1]
    entry_face: torch.Tensor  # [E'] face index within its frame (E' = max(E, 1))
    entry_tile: torch.Tensor  # [E'] int64: the entry's tile, (f * nty + ty) * ntx + tx
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


def bin_faces_torch(
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
    E = int(counts.sum())  # a host read; this torch version is a test cross-check only
    dev = geom.device
    ft = torch.repeat_interleave(torch.arange(F * T, dtype=torch.int64, device=dev), counts)
    start = torch.cumsum(counts, 0) - counts
    k = torch.arange(E, dtype=torch.int64, device=dev) - start[ft]
    nx = ntile_x.reshape(-1)[ft]
    tx = tx0.reshape(-1)[ft] + k % nx.clamp(min=1)
    ty = ty0.reshape(-1)[ft] + k // nx.clamp(min=1)
    frame = ft // T
    key = (frame * nty + ty) * ntx + tx
    key, order = torch.sort(key, stable=True)
    ft = ft[order]
    ntiles = F * nty * ntx
    tile_count = torch.bincount(key, minlength=ntiles)
    tile_start = torch.zeros(ntiles + 1, dtype=torch.int64, device=dev)
    tile_start[1:] = torch.cumsum(tile_count, 0)
    entry_face = (ft % T).to(torch.int32)
    entry_tile = key
    if E == 0:
        entry_face = torch.zeros(1, dtype=torch.int32, device=dev)
        entry_tile = torch.zeros(1, dtype=torch.int64, device=dev)
    return Bins(
        bbox=bbox,
        tile_start=tile_start.to(torch.int32),
        entry_face=entry_face.contiguous(),
        entry_tile=entry_tile.contiguous(),
        entry_key=ft,
        tile=tile,
        ntx=ntx,
        nty=nty,
    )


@ti.func
def tile_id(f, ty, tx, ntx, nty):
    """The number of tile (ty, tx) of frame f: the binning's key, the rasterizers' index
    into ``tile_start``."""
    return (f * nty + ty) * ntx + tx


@ti.func
def tile_pixel(ty, tx, k, tile):
    """Pixel ``(i, j)`` number k of tile (ty, tx), row by row: the rasterizers' pixel
    shape numbers its threads tile by tile, so that a warp shares one face list."""
    return ty * tile + k // tile, tx * tile + k % tile


@ti.kernel
def _face_boxes(
    geom: NDA, bbox: NDA, counts: NDA, near: float, reach_px: float, tile: int, W: int, H: int
):
    """Per face: validity (as :func:`face_valid`), the grown pixel box and its tile count."""
    F = geom.shape[0]
    T = geom.shape[1]
    half = 0.5 * H
    for f, t in ti.ndrange(F, T):
        ok = True
        for k in ti.static(range(9)):
            if not ti.abs(geom[f, t, k]) < 1e300:  # NaN or infinite
                ok = False
        for k in ti.static(range(6, 9)):
            if not geom[f, t, k] > near:
                ok = False
        x0 = geom[f, t, 0]
        y0 = geom[f, t, 1]
        x1 = geom[f, t, 2]
        y1 = geom[f, t, 3]
        x2 = geom[f, t, 4]
        y2 = geom[f, t, 5]
        area = (x1 - x0) * (y2 - y0) - (y1 - y0) * (x2 - x0)
        if not ti.abs(area) > 1e-30:
            ok = False
        n = 0
        j0 = 1
        j1 = 0
        i0 = 1
        i1 = 0
        if ok:
            fj0 = ti.ceil(ti.min(x0, x1, x2) * half - reach_px - 0.5) - 1.0
            fj1 = ti.floor(ti.max(x0, x1, x2) * half + reach_px - 0.5) + 1.0
            fi0 = ti.ceil(ti.min(y0, y1, y2) * half - reach_px - 0.5) - 1.0
            fi1 = ti.floor(ti.max(y0, y1, y2) * half + reach_px - 0.5) + 1.0
            if fj0 <= W - 1 and fj1 >= 0 and fi0 <= H - 1 and fi1 >= 0:
                j0 = ti.cast(ti.max(fj0, 0.0), ti.i32)
                j1 = ti.cast(ti.min(fj1, W - 1.0), ti.i32)
                i0 = ti.cast(ti.max(fi0, 0.0), ti.i32)
                i1 = ti.cast(ti.min(fi1, H - 1.0), ti.i32)
                n = (j1 // tile - j0 // tile + 1) * (i1 // tile - i0 // tile + 1)
        bbox[f, t, 0] = j0
        bbox[f, t, 1] = j1
        bbox[f, t, 2] = i0
        bbox[f, t, 3] = i1
        counts[f * T + t] = n


@ti.kernel
def _fill_entries(
    bbox: NDA, offsets: NDA, keys: NDA, ft: NDA, T: int, tile: int, ntx: int, nty: int
):
    """Per face: one (tile key, face) entry per tile its box meets, at the face's offset."""
    for idx in range(offsets.shape[0] - 1):
        f = idx // T
        t = idx % T
        o = offsets[idx]
        if offsets[idx + 1] > o:
            tx0 = bbox[f, t, 0] // tile
            tx1 = bbox[f, t, 1] // tile
            ty0 = bbox[f, t, 2] // tile
            ty1 = bbox[f, t, 3] // tile
            for ty in range(ty0, ty1 + 1):
                for tx in range(tx0, tx1 + 1):
                    keys[o] = tile_id(f, ty, tx, ntx, nty)
                    ft[o] = idx
                    o += 1


def bin_faces(
    geom: torch.Tensor, near: float, width: int, height: int, reach: float, tile: int
) -> Bins:
    """Boxes grown by ``reach`` (screen units) and the face lists of every tile, for
    ``geom[F, T, 9]`` as in :mod:`.soft_raster`. Faces that are not
    :func:`face_valid` get an empty box and no entries."""
    F, T = geom.shape[0], geom.shape[1]
    ntx = (width + tile - 1) // tile
    nty = (height + tile - 1) // tile
    g = geom.detach().contiguous()
    dev = g.device
    bbox = torch.empty(F, T, 4, dtype=torch.int32, device=dev)
    counts = torch.empty(F * T, dtype=torch.int64, device=dev)
    _face_boxes(g, bbox, counts, near, reach * 0.5 * height, tile, width, height)
    offsets = torch.zeros(F * T + 1, dtype=torch.int64, device=dev)
    torch.cumsum(counts, 0, out=offsets[1:])
    # A host read that stays (on CUDA a wait for the device, after two short kernels): the
    # entry count sizes the entry buffers, their sort and the backward pass's per-entry
    # gradients, and torch needs sizes on the host. A capacity kept between calls needs
    # the same read to check it (or drops entries silently when a mesh comes nearer), and
    # the shapes alone bound it only by F * T * tiles (any face's box may cover the
    # image). On the CPU it is a plain memory read.
    E = int(offsets[-1])
    keys = torch.empty(max(E, 1), dtype=torch.int64, device=dev)
    ft = torch.empty(max(E, 1), dtype=torch.int64, device=dev)
    _fill_entries(bbox, offsets, keys, ft, T, tile, ntx, nty)
    keys, ft = keys[:E], ft[:E]
    keys, order = torch.sort(keys, stable=True)
    ft = ft[order]
    ntiles = F * nty * ntx
    tile_start = torch.zeros(ntiles + 1, dtype=torch.int64, device=dev)
    torch.cumsum(torch.bincount(keys, minlength=ntiles), 0, out=tile_start[1:])
    entry_face = ((ft % T).to(torch.int32) if E > 0
                  else torch.zeros(1, dtype=torch.int32, device=dev))
    entry_tile = keys if E > 0 else torch.zeros(1, dtype=torch.int64, device=dev)
    return Bins(
        bbox=bbox,
        tile_start=tile_start.to(torch.int32),
        entry_face=entry_face,
        entry_tile=entry_tile,
        entry_key=ft,
        tile=tile,
        ntx=ntx,
        nty=nty,
    )

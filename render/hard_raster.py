"""Taichi kernels of the hard (z-buffered) image: the nearest face per pixel centre and
its colour, on the packed arrays and tile bins of :mod:`.soft_raster` (whose geometry,
tile and shading ``ti.func``s they share). ``hard_zbuffer`` has the same two shapes as
the soft kernels (the ``pixels`` template argument, ``runtime.raster_shape()``)."""

import taichi as ti

from gradsim_taichi.render.soft_raster import (
    NDA,
    _in_box,
    _pixel_barycentric,
    _shade,
    _tile_box,
)
from gradsim_taichi.render.tiles import tile_id, tile_pixel


@ti.func
def _zbuffer_depth(geom: ti.template(), f, t, px, py, near):
    """Whether face t covers point p in front of ``near``, and its depth there."""
    w = _pixel_barycentric(geom, f, t, px, py)
    hit = False
    zp = 0.0
    if w[0] >= 0.0 and w[1] >= 0.0 and w[2] >= 0.0:
        zp = 1.0 / (w[0] / geom[f, t, 6] + w[1] / geom[f, t, 7] + w[2] / geom[f, t, 8])
        hit = zp >= near
    return hit, zp


@ti.kernel
def hard_zbuffer(
    geom: NDA,
    bbox: NDA,
    tile_start: NDA,
    entry_face: NDA,
    face_id: NDA,
    zbuf: NDA,
    near: float,
    far: float,
    tile: int,
    ntx: int,
    nty: int,
    pixels: ti.template(),
):
    """Z-buffer: ``face_id[f, i, j]`` gets the nearest face whose triangle contains the
    pixel centre with depth in [near, far] (-1 if none; ties go to the lower face index).
    ``zbuf`` must come in filled with ``far``. ``pixels=0``: one thread per (frame, tile)
    (the CPU's); ``pixels=1``: one per (frame, pixel), walking its tile's faces in the
    same order (a GPU's; pixels numbered tile by tile, so that a warp shares one list)."""
    F = face_id.shape[0]
    H = face_id.shape[1]
    W = face_id.shape[2]
    scale = 2.0 / H
    if ti.static(pixels):
        # tile-major: the threads of a warp share one tile and its face list
        for f, ty, tx, k in ti.ndrange(F, nty, ntx, tile * tile):
            i, j = tile_pixel(ty, tx, k, tile)
            if i < H and j < W:
                tid = tile_id(f, ty, tx, ntx, nty)
                zb = zbuf[f, i, j]
                fid = face_id[f, i, j]
                for e in range(tile_start[tid], tile_start[tid + 1]):
                    t = entry_face[e]
                    if _in_box(bbox, f, t, i, j):
                        hit, zp = _zbuffer_depth(geom, f, t, (j + 0.5) * scale,
                                                 (i + 0.5) * scale, near)  # fmt: skip
                        if hit and zp < zb:
                            zb = zp
                            fid = t
                zbuf[f, i, j] = zb
                face_id[f, i, j] = fid
    else:
        for f, ty, tx in ti.ndrange(F, nty, ntx):
            tid = tile_id(f, ty, tx, ntx, nty)
            for e in range(tile_start[tid], tile_start[tid + 1]):
                t = entry_face[e]
                ia, ib, ja, jb = _tile_box(bbox, f, t, ty, tx, tile, H, W)
                for i in range(ia, ib + 1):
                    for j in range(ja, jb + 1):
                        hit, zp = _zbuffer_depth(geom, f, t, (j + 0.5) * scale,
                                                 (i + 0.5) * scale, near)  # fmt: skip
                        if hit and zp < zbuf[f, i, j]:
                            zbuf[f, i, j] = zp
                            face_id[f, i, j] = t


@ti.kernel
def hard_colours(
    geom: NDA,
    col: NDA,
    uv: NDA,
    texid: NDA,
    tex: NDA,
    texsize: NDA,
    face_id: NDA,
    rgb: NDA,
):
    """Colour of face ``face_id[f, i, j]`` at each covered pixel centre (the hard image's
    shading, without gradients); pixels with no face are left as they are."""
    H = face_id.shape[1]
    scale = 2.0 / H
    for f, i, j in ti.ndrange(face_id.shape[0], H, face_id.shape[2]):
        t = face_id[f, i, j]
        if t >= 0:
            w = _pixel_barycentric(geom, f, t, (j + 0.5) * scale, (i + 0.5) * scale)
            C = _shade(geom, col, uv, texid, tex, texsize, f, t, w)[0]
            for c in ti.static(range(3)):
                rgb[f, i, j, c] = C[c]

"""Taichi kernels of the soft rasterizer (SoftRas, Liu et al. 2019) with hand-written adjoints.

Everything here works on packed per-face arrays prepared by :mod:`.tiles` and
:mod:`.bridge` (torch tensors passed zero-copy as ndarrays):

- ``geom[F, T, 9]``: screen positions ``x0 y0 x1 y1 x2 y2`` (units of half the image
  height, pixel ``(i, j)`` centred at ``((j + .5) * 2/H, (i + .5) * 2/H)``) and camera
  depths ``z0 z1 z2``.
- ``col[F, T, 18]``: per corner ``i`` and channel ``c`` a multiplicative colour
  ``M[3*i + c]`` and an additive colour ``A[9 + 3*i + c]``; the colour of the face at a
  point is ``(sum_i b_i M_i) * tex(uv) + sum_i b_i A_i`` (``tex = 1`` without a texture).
- ``uv[T, 6]``, ``texid[T]`` (-1: no texture), ``tex[K, Ht, Wt, 3]``, ``texsize[K, 2]``.
- ``bbox[F, T, 4]``: inclusive pixel bounds ``j0 j1 i0 i1`` grown by the sigmoid's reach.
- ``tile_start``/``entry_face``/``entry_tile``: per (frame, tile) the faces whose box
  meets the tile, and each entry's tile.

Two shapes of the same kernels, picked by ``runtime.raster_shape()`` through the
``pixels`` template argument (the per-pixel and per-entry work is shared ``ti.func``s, so
both give the same numbers): ``tile`` (the CPU's: one thread per (frame, tile), a few
hundred threads, no atomics) and ``pixel`` (a GPU's: one thread per (frame, pixel) in the
forward passes, per tile entry in the backward pass).

The formula (for pixel p and face j): screen barycentrics ``w``; ``d2`` the squared
distance from p to the nearest edge segment; sign ``s = +1`` inside; ``x = s d2 / sigma``,
``D = sigmoid(x)``. A face contributes when p is inside or ``d2 <= d2max`` (the cutoff,
``D > threshold``). Clamped, renormalised barycentrics ``wc``, perspective-correct
``b_i = (wc_i / z_i) / Q``, ``Q = sum wc_i / z_i``, depth ``zp = 1 / Q``, normalised
``zn = (far - zp) / (far - near)``. With ``m = max(eps, max zn)``, weights
``w_j = D_j exp((zn_j - m) / gamma)``, background weight ``exp((eps - m) / gamma)``:
``rgb = (sum w_j C_j + w_b C_bg) / (sum w_j + w_b)``, ``alpha = 1 - prod(1 - D_j)``.
"""

import taichi as ti

from gradsim_taichi.render.tiles import tile_id, tile_pixel

NDA = ti.types.ndarray()


@ti.func
def _cross2(ax, ay, bx, by):
    return ax * by - ay * bx


@ti.func
def _corners(geom: ti.template(), f, t):
    """Screen positions ``x0, y0, x1, y1, x2, y2`` of face t's corners in frame f."""
    return geom[f, t, 0], geom[f, t, 1], geom[f, t, 2], geom[f, t, 3], geom[f, t, 4], geom[f, t, 5]


@ti.func
def _pixel_barycentric(geom: ti.template(), f, t, px, py):
    """Screen barycentrics of point p in face t (extrapolated outside; the z-buffer's
    inside test and the hard image's shading)."""
    x0, y0, x1, y1, x2, y2 = _corners(geom, f, t)
    n = ti.Vector([_cross2(x1 - px, y1 - py, x2 - px, y2 - py),
                   _cross2(x2 - px, y2 - py, x0 - px, y0 - py),
                   _cross2(x0 - px, y0 - py, x1 - px, y1 - py)])
    return n / (n[0] + n[1] + n[2])


@ti.func
def _seg_d2(px, py, ax, ay, bx, by):
    """Squared distance from p to segment ab, and the parameter t of the closest point."""
    ex = bx - ax
    ey = by - ay
    ll = ex * ex + ey * ey
    t = 0.0
    if ll > 0.0:
        t = ti.math.clamp(((px - ax) * ex + (py - ay) * ey) / ll, 0.0, 1.0)
    rx = px - ax - t * ex
    ry = py - ay - t * ey
    return rx * rx + ry * ry, t


@ti.func
def _sigmoid_pair(x):
    """(sigmoid(x), sigmoid(-x)) computed without cancellation."""
    e = ti.exp(-ti.abs(x))
    hi = 1.0 / (1.0 + e)
    lo = e / (1.0 + e)
    D = hi
    om = lo
    if x < 0.0:
        D = lo
        om = hi
    return D, om


@ti.func
def _tex_sample(tex: ti.template(), texsize: ti.template(), k, u, v):
    """Bilinear, clamp-to-edge lookup at (u, v) (v = 0 at the bottom row) of texture k.

    Returns the colour and its derivatives with respect to u and v (vectors of 3)."""
    T = ti.Vector([1.0, 1.0, 1.0])
    Tu = ti.Vector([0.0, 0.0, 0.0])
    Tv = ti.Vector([0.0, 0.0, 0.0])
    if k >= 0:
        ht = texsize[k, 0]
        wt = texsize[k, 1]
        x = u * wt - 0.5
        y = (1.0 - v) * ht - 0.5
        xf = ti.floor(x)
        yf = ti.floor(y)
        fx = x - xf
        fy = y - yf
        xi = ti.cast(xf, ti.i32)
        yi = ti.cast(yf, ti.i32)
        xa = ti.math.clamp(xi, 0, wt - 1)
        xb = ti.math.clamp(xi + 1, 0, wt - 1)
        ya = ti.math.clamp(yi, 0, ht - 1)
        yb = ti.math.clamp(yi + 1, 0, ht - 1)
        for c in ti.static(range(3)):
            t00 = tex[k, ya, xa, c]
            t01 = tex[k, ya, xb, c]
            t10 = tex[k, yb, xa, c]
            t11 = tex[k, yb, xb, c]
            T[c] = (1.0 - fy) * ((1.0 - fx) * t00 + fx * t01) + fy * ((1.0 - fx) * t10 + fx * t11)
            Tu[c] = ((1.0 - fy) * (t01 - t00) + fy * (t11 - t10)) * wt
            Tv[c] = -((1.0 - fx) * (t10 - t00) + fx * (t11 - t01)) * ht
    return T, Tu, Tv


@ti.func
def _tex_scatter(gtex: ti.template(), texsize: ti.template(), k, u, v, g):
    """Adjoint of :func:`_tex_sample` with respect to the texels (atomic adds)."""
    ht = texsize[k, 0]
    wt = texsize[k, 1]
    x = u * wt - 0.5
    y = (1.0 - v) * ht - 0.5
    xf = ti.floor(x)
    yf = ti.floor(y)
    fx = x - xf
    fy = y - yf
    xi = ti.cast(xf, ti.i32)
    yi = ti.cast(yf, ti.i32)
    xa = ti.math.clamp(xi, 0, wt - 1)
    xb = ti.math.clamp(xi + 1, 0, wt - 1)
    ya = ti.math.clamp(yi, 0, ht - 1)
    yb = ti.math.clamp(yi + 1, 0, ht - 1)
    for c in ti.static(range(3)):
        ti.atomic_add(gtex[k, ya, xa, c], g[c] * (1.0 - fy) * (1.0 - fx))
        ti.atomic_add(gtex[k, ya, xb, c], g[c] * (1.0 - fy) * fx)
        ti.atomic_add(gtex[k, yb, xa, c], g[c] * fy * (1.0 - fx))
        ti.atomic_add(gtex[k, yb, xb, c], g[c] * fy * fx)


@ti.func
def _coverage(geom: ti.template(), f, t, px, py, d2max):
    """Screen barycentrics, nearest edge and whether face t reaches pixel p at all."""
    x0, y0, x1, y1, x2, y2 = _corners(geom, f, t)
    n0 = _cross2(x1 - px, y1 - py, x2 - px, y2 - py)
    n1 = _cross2(x2 - px, y2 - py, x0 - px, y0 - py)
    n2 = _cross2(x0 - px, y0 - py, x1 - px, y1 - py)
    area = n0 + n1 + n2
    w = ti.Vector([n0, n1, n2]) / area
    inside = w[0] >= 0.0 and w[1] >= 0.0 and w[2] >= 0.0
    da, ta = _seg_d2(px, py, x0, y0, x1, y1)
    db, tb = _seg_d2(px, py, x1, y1, x2, y2)
    dc, tc = _seg_d2(px, py, x2, y2, x0, y0)
    d2 = da
    te = ta
    edge = 0
    if db < d2:
        d2 = db
        te = tb
        edge = 1
    if dc < d2:
        d2 = dc
        te = tc
        edge = 2
    ok = inside or d2 <= d2max
    return ok, inside, w, area, d2, te, edge


@ti.func
def _shade(
    geom: ti.template(),
    col: ti.template(),
    uv: ti.template(),
    texid: ti.template(),
    tex: ti.template(),
    texsize: ti.template(),
    f,
    t,
    w,
):
    """Perspective-correct interpolation of a face's colour at clamped barycentrics."""
    u0 = ti.math.clamp(w[0], 0.0, 1.0)
    u1 = ti.math.clamp(w[1], 0.0, 1.0)
    u2 = ti.math.clamp(w[2], 0.0, 1.0)
    U = u0 + u1 + u2
    wc = ti.Vector([u0, u1, u2]) / U
    z = ti.Vector([geom[f, t, 6], geom[f, t, 7], geom[f, t, 8]])
    q = wc / z
    Q = q[0] + q[1] + q[2]
    b = q / Q
    uu = b[0] * uv[t, 0] + b[1] * uv[t, 2] + b[2] * uv[t, 4]
    vv = b[0] * uv[t, 1] + b[1] * uv[t, 3] + b[2] * uv[t, 5]
    T, Tu, Tv = _tex_sample(tex, texsize, texid[t], uu, vv)
    Mi = ti.Vector([0.0, 0.0, 0.0])
    Ai = ti.Vector([0.0, 0.0, 0.0])
    for i in ti.static(range(3)):
        for c in ti.static(range(3)):
            Mi[c] += b[i] * col[f, t, 3 * i + c]
            Ai[c] += b[i] * col[f, t, 9 + 3 * i + c]
    C = Mi * T + Ai
    return C, wc, U, z, q, Q, b, uu, vv, T, Tu, Tv, Mi


@ti.func
def _soft_face(
    geom: ti.template(),
    col: ti.template(),
    uv: ti.template(),
    texid: ti.template(),
    tex: ti.template(),
    texsize: ti.template(),
    f,
    t,
    px,
    py,
    sigma,
    near,
    far,
    d2max,
):
    """Face t at pixel p: whether it reaches p, its coverage ``D`` and ``1 - D``, its
    normalised depth ``zn`` and its colour ``C`` there."""
    ok, inside, w, area, d2, te, edge = _coverage(geom, f, t, px, py, d2max)
    D = 0.0
    om = 1.0
    zn = 0.0
    C = ti.Vector([0.0, 0.0, 0.0])
    if ok:
        s = -1.0
        if inside:
            s = 1.0
        D, om = _sigmoid_pair(s * d2 / sigma)
        C, wc, U, z, q, Q, b, uu, vv, T, Tu, Tv, Mi = _shade(
            geom, col, uv, texid, tex, texsize, f, t, w
        )
        zn = (far - 1.0 / Q) / (far - near)
    return ok, D, om, zn, C


@ti.func
def _soft_merge(gamma, D, om, zn, C, m, S, acc, P):
    """One face's step of a pixel's online softmax: from ``(m, S, acc, P)`` (the shift,
    the weight sum, the weighted colour sum and ``prod(1 - D)``) to the updated state."""
    m1 = m
    S1 = S
    acc1 = acc
    if zn > m1:
        r = ti.exp((m1 - zn) / gamma)
        S1 *= r
        acc1 *= r
        m1 = zn
    wgt = D * ti.exp((zn - m1) / gamma)
    return m1, S1 + wgt, acc1 + wgt * C, P * om


@ti.func
def _soft_store(out: ti.template(), state: ti.template(), f, i, j, m, S, acc, P):
    """Pixel p's final colour ``acc / S`` and alpha ``1 - P`` into ``out``, and ``(m, S,
    P)`` into ``state`` for the backward pass."""
    for c in ti.static(range(3)):
        out[f, i, j, c] = acc[c] / S
    out[f, i, j, 3] = 1.0 - P
    state[f, i, j, 0] = m
    state[f, i, j, 1] = S
    state[f, i, j, 2] = P


@ti.func
def _in_box(bbox: ti.template(), f, t, i, j):
    """Whether pixel (i, j) lies in face t's grown box (the pixel shape's per-face test)."""
    return bbox[f, t, 2] <= i and i <= bbox[f, t, 3] and bbox[f, t, 0] <= j and j <= bbox[f, t, 1]


@ti.func
def _tile_box(bbox: ti.template(), f, t, ty, tx, tile, H, W):
    """The pixel rows ``ia..ib`` and columns ``ja..jb`` where face t's box meets the tile."""
    ia = ti.max(ty * tile, bbox[f, t, 2])
    ib = ti.min(ti.min(ty * tile + tile, H) - 1, bbox[f, t, 3])
    ja = ti.max(tx * tile, bbox[f, t, 0])
    jb = ti.min(ti.min(tx * tile + tile, W) - 1, bbox[f, t, 1])
    return ia, ib, ja, jb


@ti.kernel
def soft_forward(
    geom: NDA,
    col: NDA,
    uv: NDA,
    texid: NDA,
    tex: NDA,
    texsize: NDA,
    bbox: NDA,
    tile_start: NDA,
    entry_face: NDA,
    bg: NDA,
    out: NDA,
    state: NDA,
    sigma: float,
    gamma: float,
    near: float,
    far: float,
    eps: float,
    d2max: float,
    tile: int,
    ntx: int,
    nty: int,
    pixels: ti.template(),
):
    """Writes ``out[f, i, j] = (r, g, b, alpha)`` and ``state[f, i, j] = (m, S, P)`` (the
    softmax shift, the weight sum and ``prod(1 - D)``) for the backward pass.

    Each pixel takes its tile's faces in face order through the same :func:`_soft_face`
    and :func:`_soft_merge` in both shapes (so the images are the same). ``pixels=0``
    (the CPU's, see ``runtime.raster_shape``): one thread per (frame, tile), which for
    each binned face loops over the pixels of the face's box inside the tile, keeping
    the pixels' state in ``out``/``state`` (the tile's pixels belong to this thread only:
    plain loads and stores). ``pixels=1`` (a GPU's): one thread per (frame, pixel), which
    walks its tile's face list with the state in registers (pixels numbered tile by
    tile, so that the threads of a warp share one list)."""
    F = out.shape[0]
    H = out.shape[1]
    W = out.shape[2]
    scale = 2.0 / H
    if ti.static(pixels):
        # tile-major: the threads of a warp share one tile and its face list
        for f, ty, tx, k in ti.ndrange(F, nty, ntx, tile * tile):
            i, j = tile_pixel(ty, tx, k, tile)
            if i < H and j < W:
                tid = tile_id(f, ty, tx, ntx, nty)
                px = (j + 0.5) * scale
                py = (i + 0.5) * scale
                m = eps
                S = 1.0
                acc = ti.Vector([bg[i, j, 0], bg[i, j, 1], bg[i, j, 2]])
                P = 1.0
                for e in range(tile_start[tid], tile_start[tid + 1]):
                    t = entry_face[e]
                    if _in_box(bbox, f, t, i, j):
                        ok, D, om, zn, C = _soft_face(geom, col, uv, texid, tex, texsize, f,
                                                      t, px, py, sigma, near, far,
                                                      d2max)  # fmt: skip
                        if ok:
                            m, S, acc, P = _soft_merge(gamma, D, om, zn, C, m, S, acc, P)
                _soft_store(out, state, f, i, j, m, S, acc, P)
    else:
        for f, ty, tx in ti.ndrange(F, nty, ntx):
            tid = tile_id(f, ty, tx, ntx, nty)
            i_end = ti.min(ty * tile + tile, H)
            j_end = ti.min(tx * tile + tile, W)
            for i in range(ty * tile, i_end):
                for j in range(tx * tile, j_end):
                    for c in ti.static(range(3)):
                        out[f, i, j, c] = bg[i, j, c]
                    out[f, i, j, 3] = 1.0
                    state[f, i, j, 0] = eps
                    state[f, i, j, 1] = 1.0
            for e in range(tile_start[tid], tile_start[tid + 1]):
                t = entry_face[e]
                ia, ib, ja, jb = _tile_box(bbox, f, t, ty, tx, tile, H, W)
                for i in range(ia, ib + 1):
                    for j in range(ja, jb + 1):
                        ok, D, om, zn, C = _soft_face(geom, col, uv, texid, tex, texsize, f, t,
                                                      (j + 0.5) * scale, (i + 0.5) * scale,
                                                      sigma, near, far, d2max)  # fmt: skip
                        if ok:
                            acc = ti.Vector([out[f, i, j, 0], out[f, i, j, 1], out[f, i, j, 2]])
                            m, S, acc, P = _soft_merge(gamma, D, om, zn, C, state[f, i, j, 0],
                                                       state[f, i, j, 1], acc,
                                                       out[f, i, j, 3])  # fmt: skip
                            for c in ti.static(range(3)):
                                out[f, i, j, c] = acc[c]
                            out[f, i, j, 3] = P
                            state[f, i, j, 0] = m
                            state[f, i, j, 1] = S
            for i in range(ty * tile, i_end):
                for j in range(tx * tile, j_end):
                    acc = ti.Vector([out[f, i, j, 0], out[f, i, j, 1], out[f, i, j, 2]])
                    _soft_store(out, state, f, i, j, state[f, i, j, 0], state[f, i, j, 1], acc,
                                out[f, i, j, 3])  # fmt: skip


@ti.func
def _entry_backward(
    geom: ti.template(),
    col: ti.template(),
    uv: ti.template(),
    texid: ti.template(),
    tex: ti.template(),
    texsize: ti.template(),
    bbox: ti.template(),
    out: ti.template(),
    state: ti.template(),
    gout: ti.template(),
    gentry: ti.template(),
    gtex: ti.template(),
    sigma,
    gamma,
    near,
    far,
    d2max,
    tile,
    want_tex,
    e,
    f,
    t,
    ty,
    tx,
):
    """Gradient of tile entry e (face t of frame f in tile (ty, tx)): loops over the
    pixels of the face's box inside the tile, accumulates in registers and writes
    ``gentry[e, 0:27]`` once (9 geometry + 18 colour entries); texels by atomic adds."""
    H = out.shape[1]
    W = out.shape[2]
    scale = 2.0 / H
    inv_range = 1.0 / (far - near)
    ia, ib, ja, jb = _tile_box(bbox, f, t, ty, tx, tile, H, W)
    gg = ti.Vector([0.0] * 9)  # d/d(x0 y0 x1 y1 x2 y2 z0 z1 z2)
    gc = ti.Vector([0.0] * 18)  # d/d(M, A)
    x0, y0, x1, y1, x2, y2 = _corners(geom, f, t)
    xs = ti.Vector([x0, x1, x2])
    ys = ti.Vector([y0, y1, y2])
    for i in range(ia, ib + 1):
        for j in range(ja, jb + 1):
            px = (j + 0.5) * scale
            py = (i + 0.5) * scale
            ok, inside, w, area, d2, te, edge = _coverage(geom, f, t, px, py, d2max)
            if ok:
                s = -1.0
                if inside:
                    s = 1.0
                D, om = _sigmoid_pair(s * d2 / sigma)
                C, wc, U, z, q, Q, b, uu, vv, T, Tu, Tv, Mi = _shade(
                    geom, col, uv, texid, tex, texsize, f, t, w
                )
                zp = 1.0 / Q
                zn = (far - zp) * inv_range
                m = state[f, i, j, 0]
                S = state[f, i, j, 1]
                P = state[f, i, j, 2]
                ex = ti.exp((zn - m) / gamma)
                wj = D * ex
                gs = ti.Vector([gout[f, i, j, 0], gout[f, i, j, 1], gout[f, i, j, 2]]) / S
                rgb = ti.Vector([out[f, i, j, 0], out[f, i, j, 1], out[f, i, j, 2]])
                g_w = gs.dot(C - rgb)
                gC = gs * wj
                g_zn = g_w * wj / gamma
                g_x = g_w * ex * D * om + gout[f, i, j, 3] * P * D
                # nearest-edge distance: envelope theorem on the segment parameter
                g_d2 = g_x * s / sigma
                for k in ti.static(range(3)):
                    if edge == k:
                        k1 = (k + 1) % 3
                        rx = px - xs[k] - te * (xs[k1] - xs[k])
                        ry = py - ys[k] - te * (ys[k1] - ys[k])
                        gg[2 * k] += -2.0 * g_d2 * rx * (1.0 - te)
                        gg[2 * k + 1] += -2.0 * g_d2 * ry * (1.0 - te)
                        gg[2 * k1] += -2.0 * g_d2 * rx * te
                        gg[2 * k1 + 1] += -2.0 * g_d2 * ry * te
                # colour
                gT = gC * Mi
                g_u = gT.dot(Tu)
                g_v = gT.dot(Tv)
                gb = ti.Vector([0.0, 0.0, 0.0])
                for k in ti.static(range(3)):
                    for c in ti.static(range(3)):
                        gc[3 * k + c] += gC[c] * T[c] * b[k]
                        gc[9 + 3 * k + c] += gC[c] * b[k]
                        Mc = col[f, t, 3 * k + c]
                        gb[k] += gC[c] * (Mc * T[c] + col[f, t, 9 + 3 * k + c])
                    gb[k] += g_u * uv[t, 2 * k] + g_v * uv[t, 2 * k + 1]
                if want_tex != 0 and texid[t] >= 0:
                    _tex_scatter(gtex, texsize, texid[t], uu, vv, gT)
                # perspective-correct barycentrics and depth
                g_zp = -g_zn * inv_range
                gq = (gb - gb.dot(b)) / Q - g_zp * zp * zp
                gwc = gq / z
                for k in ti.static(range(3)):
                    gg[6 + k] += -gq[k] * q[k] / z[k]
                gu = (gwc - gwc.dot(wc)) / U
                gw = ti.Vector([0.0, 0.0, 0.0])
                for k in ti.static(range(3)):
                    if 0.0 <= w[k] and w[k] <= 1.0:
                        gw[k] = gu[k]
                gn = (gw - gw.dot(w)) / area
                # n_k = cross(v_{k+1} - p, v_{k+2} - p)
                for k in ti.static(range(3)):
                    k1 = (k + 1) % 3
                    k2 = (k + 2) % 3
                    gg[2 * k1] += gn[k] * (ys[k2] - py)
                    gg[2 * k1 + 1] += -gn[k] * (xs[k2] - px)
                    gg[2 * k2] += -gn[k] * (ys[k1] - py)
                    gg[2 * k2 + 1] += gn[k] * (xs[k1] - px)
    for k in ti.static(range(9)):
        gentry[e, k] = gg[k]
    for k in ti.static(range(18)):
        gentry[e, 9 + k] = gc[k]


@ti.kernel
def soft_backward(
    geom: NDA,
    col: NDA,
    uv: NDA,
    texid: NDA,
    tex: NDA,
    texsize: NDA,
    bbox: NDA,
    tile_start: NDA,
    entry_face: NDA,
    entry_tile: NDA,
    out: NDA,
    state: NDA,
    gout: NDA,
    gentry: NDA,
    gtex: NDA,
    face_grad: NDA,
    sigma: float,
    gamma: float,
    near: float,
    far: float,
    d2max: float,
    tile: int,
    ntx: int,
    nty: int,
    want_tex: int,
    num_entries: int,
    pixels: ti.template(),
):
    """Per tile entry (a face in a tile), its gradient by :func:`_entry_backward` into
    ``gentry[e]``: no two entries write the same row, so there are no atomics except for
    texels, and both shapes give the same rows. ``pixels=0`` (the CPU's): one thread per
    (frame, tile) takes the tile's entries in turn; ``pixels=1`` (a GPU's): one thread
    per entry (``entry_tile[e]`` says its tile). Faces with ``face_grad[t] == 0``
    (static, nothing learnable: a ground, a backdrop) are skipped; their entries stay
    zero."""
    if ti.static(pixels):
        for e in range(num_entries):
            t = entry_face[e]
            if face_grad[t] != 0:
                tid = ti.cast(entry_tile[e], ti.i32)
                f = tid // (nty * ntx)
                ty = tid % (nty * ntx) // ntx
                tx = tid % ntx
                _entry_backward(geom, col, uv, texid, tex, texsize, bbox, out, state, gout,
                                gentry, gtex, sigma, gamma, near, far, d2max, tile, want_tex,
                                e, f, t, ty, tx)  # fmt: skip
    else:
        for f, ty, tx in ti.ndrange(out.shape[0], nty, ntx):
            tid = tile_id(f, ty, tx, ntx, nty)
            for e in range(tile_start[tid], tile_start[tid + 1]):
                t = entry_face[e]
                if face_grad[t] != 0:
                    _entry_backward(geom, col, uv, texid, tex, texsize, bbox, out, state, gout,
                                    gentry, gtex, sigma, gamma, near, far, d2max, tile,
                                    want_tex, e, f, t, ty, tx)  # fmt: skip


@ti.kernel
def sum_entries(gentry: NDA, key: NDA, gface: NDA, count: ti.i32, serialize: ti.template()):
    """``gface[key[e]] += gentry[e]`` for the first ``count`` tile entries: the backward
    pass's per-entry gradient rows added into their faces' (a face's entries lie in
    several tiles). A Taichi loop under the engine's serial policy (``serialize``): a
    torch ``index_add_`` of the same rows ran on torch's own threads, which on a loaded
    2-core machine waited tens of milliseconds for a core."""
    ti.loop_config(serialize=serialize)
    for e in range(count):
        k = key[e]
        for c in ti.static(range(27)):  # xy (6), z (3), corner colours (18)
            gface[k, c] += gentry[e, c]

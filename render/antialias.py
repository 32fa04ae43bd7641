"""Analytic edge anti-aliasing of a z-buffered image, differentiable in vertex positions.

The hard rasterizer gives each pixel the colour of the nearest face at its centre: the
image an ordinary renderer makes, but aliased, and with no gradient from a silhouette
or occlusion edge to the vertices that place it. This stage (in the spirit of
nvdiffrast's ``antialias``, Laine et al. 2020) looks at every pair of neighbouring
pixels whose faces differ, finds where the visible edge crosses the segment joining
the two pixel centres, and blends the pixel that the edge cuts with its neighbour by
the fraction of that pixel past the edge:

    crossing at t in [0, 1) from pixel p towards q (t in pixel widths):
        t < 1/2:  c_p += (1/2 - t) (c_q - c_p)
        t >= 1/2: c_q += (t - 1/2) (c_p - c_q)

This is the exact area coverage of a pixel cut by a straight edge that crosses two
opposite sides of it, if each edge is handled along the pixel axis more perpendicular
to it (horizontal pairs for edges steeper than 45 degrees, vertical pairs for the
others). Corners, edges ending inside a pixel and pixels cut by two edges are
approximated. The axis is a share, not a choice: all or nothing outside 45 +- 5
degrees, smooth between (at 45 both axes give the same image of a straight edge); and
within a pixel of either end of an edge it moves to a value every edge at that vertex
takes (at a silhouette corner the mean of the two silhouette edges' shares, else of
all edges'), so a crossing that passes a vertex from a steep edge to a shallow one
changes share smoothly, where a choice made the image jump. The image stays
continuous when an edge crosses a pixel centre, and the crossing point is a smooth
function of the edge's screen position: gradients reach the vertices of silhouette
edges and of occluding edges. Surfaces that intersect (no edge at the boundary) are not
anti-aliased, as in nvdiffrast.

Which edge: the face visible at p covers p and leaves the segment at ``t_p``; the face
at q covers q and starts at ``s_q``. If the two overlap on the segment (``s_q < t_p``),
the one nearer the camera at the overlap's middle is in front and its edge is the
boundary; if they do not (a shared edge: a crease; or a sliver between them that no
pixel centre sees), the one nearer at its own pixel. Against the background, the
face's own edge.

Which colours: where the front surface's walk crossed faces neither centre sees, the
segment's colour steps at each crossing: from the front pixel's colour to each crossed
face's (evaluated at the middle of its stretch by the caller's ``colour_at``: the
renderer's own shading) and at the boundary to the other pixel's, each step
anti-aliased with its own edge's share. At a junction (a crease meeting a silhouette,
three sides of a box at a corner) the crossed face is a distinct side, and without its
colour the image jumped when it reached a pixel centre
(``benchmarks/antialias_jumps.py``). Taking one colour for the whole stretch (the first
crossed face's, as measured from the pixels that see it) jumped too, when a pixel centre
crossed the diagonal of a flat quad: the first face crossed changed from the quad's
other half to the next side.
"""

from __future__ import annotations

import math

import torch

# the most faces a segment's walk crosses: the thin faces of a curved surface seen
# edge-on (a cylinder's side near its silhouette, or flattened into a cast shadow) can
# be many within half a pixel, and a walk cut short took an inner edge for the
# boundary (the shadow's cover of an 8 kg cylinder jumped by 0.06 where a pixel centre
# crossed a face's edge, with 8)
WALK_STEPS = 64


def _signed_area(tri: torch.Tensor) -> torch.Tensor:
    """Twice the signed screen area of ``tri [N, 3, 2]``: its sign is the winding."""
    a, b = tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0]
    return a[:, 0] * b[:, 1] - a[:, 1] * b[:, 0]


def _barycentric(tri: torch.Tensor, pt: torch.Tensor) -> torch.Tensor:
    """Screen-space barycentric coordinates ``[N, 3]`` of ``pt [N, 2]`` in ``tri [N, 3, 2]``
    (extrapolated outside; degenerate triangles give 0)."""
    n = []
    for k in range(3):
        a, b = tri[:, (k + 1) % 3] - pt, tri[:, (k + 2) % 3] - pt
        n.append(a[:, 0] * b[:, 1] - a[:, 1] * b[:, 0])
    n = torch.stack(n, -1)
    area = n.sum(-1, keepdim=True)
    # a zero area would make the backward pass NaN even where the result is not used
    ok = area.abs() > 1e-300
    return torch.where(ok, n / torch.where(ok, area, torch.ones_like(area)), 0.0)


def _exit(w0: torch.Tensor, w1: torch.Tensor):
    """Where the line ``P + t (Q - P)`` leaves a triangle, given the barycentrics at
    ``P`` (``w0``) and ``Q`` (``w1``): the parameter ``t [N]`` (+inf if it never leaves)
    and the index ``[N]`` of the edge (opposite that vertex) it leaves through."""
    out = w1 < w0
    den = torch.where(out, w0 - w1, torch.ones_like(w0))
    t = torch.where(out, w0 / den, torch.full_like(w0, float("inf")))
    t, k = t.min(-1)
    return t, k


def _surface_walk(face, f, P, Q, xy, neighbours, stop):
    """The walk of the segment ``P -> Q`` over the surface around ``face`` (which covers
    ``P``): across shared edges into neighbours of the same winding (thin faces of a
    curved surface that no pixel centre sees) until a silhouette (a boundary edge, or a
    neighbour that winds the other way: it faces away), the face ``stop`` (the one seen
    at ``Q``: a crease) or ``Q``. Returns ``(t, path, exits, n)``: where the walk leaves
    the surface ``t [N]``; the faces it crossed, in order, ``path [N, L]``
    (``path[:, 0]`` is ``face``, -1 past the end), the edge through which the segment
    leaves each, ``exits``, and their number ``n [N]`` (no gradient: the crossings are
    recomputed from the edges found). ``path`` is as wide as the longest walk."""
    tri = xy[f, face]
    t, k = _exit(_barycentric(tri, P), _barycentric(tri, Q))
    path, exits = [face.clone()], [k.clone()]
    n = torch.ones_like(face)
    if neighbours is None:
        return t, path[0][:, None], exits[0][:, None], n
    winding = _signed_area(tri) > 0
    face = face.clone()
    for step in range(1, WALK_STEPS + 1):
        nb = neighbours[face, k]
        go = (nb >= 0) & (nb != stop) & (t < 1)
        sel = torch.nonzero(go, as_tuple=True)[0]
        if sel.numel() == 0:
            break
        ntri = xy[f[sel], nb[sel]]
        nt, nk = _exit(_barycentric(ntri, P[sel]), _barycentric(ntri, Q[sel]))
        ok = ((_signed_area(ntri) > 0) == winding[sel]) & (nt > t[sel])
        sel, nt, nk = sel[ok], nt[ok], nk[ok]
        if sel.numel() == 0:
            break
        face[sel], t[sel], k[sel] = nb[sel], nt, nk
        path.append(torch.full_like(face, -1).index_put((sel,), nb[sel]))
        exits.append(torch.zeros_like(k).index_put((sel,), nk))
        n[sel] = step + 1
    return t, torch.stack(path, 1), torch.stack(exits, 1), n


def face_neighbours(faces: torch.Tensor) -> torch.Tensor:
    """``[T, 3]``: the face across the edge opposite each corner, -1 at a boundary or a
    non-manifold edge. ``faces [T, 3]`` indexes one vertex array (offset meshes apart)."""
    import numpy as np

    fc = faces.detach().cpu().numpy().astype(np.int64)
    T = fc.shape[0]
    a = np.stack([fc[:, 1], fc[:, 2], fc[:, 0]], 1).reshape(-1)
    b = np.stack([fc[:, 2], fc[:, 0], fc[:, 1]], 1).reshape(-1)
    key = np.minimum(a, b) * (fc.max() + 1) + np.maximum(a, b)
    order = np.argsort(key, kind="stable")
    ks = key[order]
    out = np.full(3 * T, -1, dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, ks[1:] != ks[:-1]])
    counts = np.diff(np.r_[starts, ks.size])
    pairs = starts[counts == 2]
    e0, e1 = order[pairs], order[pairs + 1]
    out[e0], out[e1] = e1 // 3, e0 // 3
    return torch.as_tensor(out.reshape(T, 3), device=faces.device)


def _depth(w: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """Perspective-correct depth from screen barycentrics ``w [N, 3]`` and corner depths."""
    return 1.0 / (w / z).sum(-1)


def _crossing(xy, f, face, k, P, D):
    """Where ``P + t D`` crosses the line of edge ``k`` of ``face``: ``t [M]``,
    differentiable in the edge's ends."""
    a, b = xy[f, face, (k + 1) % 3], xy[f, face, (k + 2) % 3]
    e = b - a
    r = a - P
    return (r[:, 0] * e[:, 1] - r[:, 1] * e[:, 0]) / (D[:, 0] * e[:, 1] - D[:, 1] * e[:, 0])


def _overlap(a, b, lo, hi):
    """Length of ``[a, b]`` inside ``[lo, hi]`` (0 if apart)."""
    return (torch.minimum(b, torch.full_like(b, hi)) - torch.maximum(a, torch.full_like(a, lo))
            ).clamp_min(0)


# the band of edge angles (radians either side of 45 degrees) over which an edge's share
# moves from one pixel axis to the other, and the distance (pixels) from a vertex over
# which it moves to the share every edge takes there
ANGLE_BAND = 5 * math.pi / 180
CORNER_REACH = 1.0


def _smoothstep(x: torch.Tensor) -> torch.Tensor:
    x = x.clamp(0, 1)
    return x * x * (3 - 2 * x)


def _horizontal_share(e: torch.Tensor) -> torch.Tensor:
    """The share ``[M]`` of horizontal pairs in anti-aliasing an edge of direction
    ``e [M, 2]``: 1 for edges steeper than 45 + band degrees, 0 below 45 - band, smooth
    (and 1/2 at 45) between; vertical pairs take the rest."""
    phi = torch.atan2(e[:, 1].abs(), e[:, 0].abs())
    return _smoothstep((phi - (math.pi / 4 - ANGLE_BAND)) / (2 * ANGLE_BAND))


def _corner_shares(xy, faces, neighbours):
    """Per frame and vertex ``[F, V]``, the horizontal share every edge takes at that
    vertex: at a silhouette corner (two silhouette edges meet: a boundary edge, or one
    whose faces wind opposite ways on screen) the mean of those two edges' shares, else
    the mean over all edges there."""
    F, T = xy.shape[:2]
    V = int(faces.max()) + 1
    wind = _signed_area(xy.reshape(F * T, 3, 2)).reshape(F, T) > 0
    nb = neighbours.to(xy.device)
    sil = ((nb < 0)[None] | (wind[:, nb.clamp_min(0)] != wind[:, :, None])).to(xy.dtype)
    # an inner edge is seen from both of its faces: half from each
    half = torch.where(nb < 0, 1.0, 0.5).to(xy.dtype)[None].expand(F, T, 3)
    sums = torch.zeros(4, F * V, dtype=xy.dtype, device=xy.device)
    frame = torch.arange(F, device=xy.device)[:, None] * V
    for k in range(3):
        a, b = (k + 1) % 3, (k + 2) % 3
        h = _horizontal_share((xy[:, :, b] - xy[:, :, a]).reshape(-1, 2)).reshape(F, T)
        w, ws = half[:, :, k], half[:, :, k] * sil[:, :, k]
        rows = torch.stack([w * h, w, ws * h, ws]).reshape(4, -1)
        for end in (a, b):
            sums = sums.index_add(1, (frame + faces[None, :, end]).reshape(-1), rows)
    every, silhouette = sums[0] / sums[1].clamp_min(1e-300), sums[2] / sums[3].clamp_min(1e-300)
    corner = (sums[3] - 2).abs() < 1e-6
    return torch.where(corner, silhouette, every).reshape(F, V)


def _horizontal_weight(xy, f, face, k, cross, faces, corners, s):
    """The share of horizontal pairs for crossings ``cross [M, 2]`` of edge ``k`` of
    ``face`` (screen units; ``s`` per pixel): the edge's own share, moving within
    :data:`CORNER_REACH` pixels of either end to the share all edges take there
    (:func:`_corner_shares`), so that a segment passing a vertex from one edge to
    another changes share smoothly."""
    a, b = xy[f, face, (k + 1) % 3], xy[f, face, (k + 2) % 3]
    e = b - a
    own = _horizontal_share(e)
    if corners is None:
        return own
    length = e.norm(dim=-1).clamp_min(1e-300)
    along = (((cross - a) * e).sum(-1) / (length * length)).clamp(0, 1)
    reach = torch.minimum(torch.full_like(length, CORNER_REACH), 0.5 * length / s)
    weight = own
    for end, pos in (((k + 1) % 3, along), ((k + 2) % 3, 1 - along)):
        near = 1 - _smoothstep(pos * length / s / reach)
        weight = weight + near * (corners[f, faces[face, end]] - own)
    return weight


def _pair_deltas(img, face_id, xy, z, neighbours, faces=None, colour_at=None):
    """Colour changes from the pairs of horizontal and vertical neighbours, as
    ``(flat pixel index [M], delta [M, C])``.

    A pair's segment can cross faces that neither pixel centre sees before it reaches
    the boundary (the surface walk of :func:`_surface_walk`): from the front pixel, its
    colour up to the first crossing, then each face's in turn, and the other pixel's
    past the boundary, each step anti-aliased with its own edge (:func:`_steps`). A
    face's colour is ``colour_at``'s at the middle of its stretch (else the front
    pixel's): where it is a crease's other face (two box sides meeting a silhouette,
    three at a corner) the image stays continuous when that face reaches the pixel's
    centre, and where it is the other half of a flat quad (a diagonal, no step of
    colour) nothing changes when the diagonal crosses the centre."""
    F, H, W, C = img.shape
    fid = face_id
    s = 2.0 / H  # screen units per pixel (see soft_raster: y spans [0, 2])
    dt = xy.dtype
    pairs = []
    # the pairs of differing neighbours (torch.nonzero) and the kept ones (boolean masks)
    # have data-dependent counts: host reads that stay (on CUDA waits for the device)
    for di, dj in ((0, 1), (1, 0)):
        a, b = fid[:, : H - di, : W - dj], fid[:, di:, dj:]
        f, i, j = torch.nonzero(a != b, as_tuple=True)
        pairs.append((f, i, j, torch.full_like(f, di), torch.full_like(f, dj)))
    f, i, j, di, dj = (torch.cat(x) for x in zip(*pairs))
    if f.numel() == 0:
        return None
    fp, fq = fid[f, i, j], fid[f, i + di, j + dj]
    D = torch.stack([dj, di], -1).to(dt) * s  # from p's centre to q's
    with torch.no_grad():
        xyd = xy.detach()
        P = torch.stack([(j.to(dt) + 0.5) * s, (i.to(dt) + 0.5) * s], -1)
        Q = P + D
        has_p, has_q = fp >= 0, fq >= 0
        A, B = fp.clamp_min(0), fq.clamp_min(0)
        t_p, path_p, exits_p, n_p = _surface_walk(A, f, P, Q, xyd, neighbours, fq)
        u_q, path_q, exits_q, n_q = _surface_walk(B, f, Q, P, xyd, neighbours, fp)
        s_q = 1.0 - u_q  # where the surface seen at q starts, from p
        tA, tB, zA, zB = xyd[f, A], xyd[f, B], z[f, A], z[f, B]
        wA0, wA1 = _barycentric(tA, P), _barycentric(tA, Q)
        wB0, wB1 = _barycentric(tB, P), _barycentric(tB, Q)
        mid = (0.5 * (s_q + t_p)).clamp(0, 1).nan_to_num(0.5)[:, None]
        dA = _depth(wA0 + mid * (wA1 - wA0), zA)
        dB = _depth(wB0 + mid * (wB1 - wB0), zB)
        overlap = s_q < t_p
        p_front = torch.where(overlap, dA < dB, _depth(wA0, zA) < _depth(wB1, zB))
        if neighbours is not None:
            # one surface: each walk reached the other pixel's face (a planar cap's
            # triangles): neither is in front, and comparing depths there was a tie of
            # round-off that any non-rigid change of the vertices flipped (the L-shape's
            # image then disagreed with finite differences by up to 10% along random
            # vertex directions; rigid motions keep the cap planar and agreed); take p's
            rows = torch.arange(f.numel(), device=f.device)
            last_p, last_q = n_p - 1, n_q - 1
            p_front |= ((neighbours[path_p[rows, last_p], exits_p[rows, last_p]] == fq)
                        & (neighbours[path_q[rows, last_q], exits_q[rows, last_q]] == fp))
        p_front = (p_front & has_p) | ~has_q
        t = torch.where(p_front, t_p, s_q)
        wide = max(path_p.shape[1], path_q.shape[1])
        path_p, path_q, exits_p, exits_q = (
            torch.nn.functional.pad(x, (0, wide - x.shape[1]), value=fill)
            for x, fill in ((path_p, -1), (path_q, -1), (exits_p, 0), (exits_q, 0)))
        path = torch.where(p_front[:, None], path_p, path_q)
        exits = torch.where(p_front[:, None], exits_p, exits_q)
        n = torch.where(p_front, n_p, n_q)
        # a pixel centre on an edge counts as covered (t = 0 or 1, up to round-off)
        keep = (t > -1e-9) & (t < 1 + 1e-9)
    f, i, j, di, dj, path, exits, n, P, D, p_front = (
        x[keep] for x in (f, i, j, di, dj, path, exits, n, P, D, p_front))
    corners = None if faces is None else _corner_shares(xy, faces, neighbours)
    ts, shares = _steps(xy, corners, faces, s, f, dj, path, exits, n, P, D, p_front)
    cp, cq = img[f, i, j], img[f, i + di, j + dj]
    front = torch.where(p_front[:, None], cp, cq)
    back = torch.where(p_front[:, None], cq, cp)
    flat = (f * H + i) * W + j
    front_pixel = torch.where(p_front, flat, flat + di * W + dj)
    colours = _walk_colours(colour_at, f, path, n, P, D, ts, front, back, front_pixel)
    sign = torch.where(p_front, 1.0, -1.0).to(dt)[:, None]
    dp = torch.zeros_like(cp)
    dq = torch.zeros_like(cq)
    ones, zeros = torch.ones_like(ts[:, 0]), torch.zeros_like(ts[:, 0])
    for step in range(path.shape[1]):
        # from p across this crossing: the colour goes from the inner face's to the
        # outer one's where the walk went from p, the other way where it came from q
        change = shares[:, step:step + 1] * sign * (colours[step + 1] - colours[step])
        dp = dp + _overlap(ts[:, step], ones, 0.0, 0.5)[:, None] * change
        dq = dq - _overlap(zeros, ts[:, step], 0.5, 1.0)[:, None] * change
    index = torch.cat([flat, flat + di * W + dj])
    return index, torch.cat([dp, dq])


def _steps(xy, corners, faces, s, f, dj, path, exits, n, P, D, p_front):
    """Where a pair's colour steps: the crossings of the front surface's walk
    ``ts [M, S]`` (from p; column ``k`` where the segment leaves ``path[:, k]``, the
    last active one the boundary), each differentiable in its edge's ends, and each
    step's share ``[M, S]`` of this pair's axis (:func:`_horizontal_weight`; 0 past the
    walk's end)."""
    M, S = path.shape
    m, k = torch.nonzero(torch.arange(S, device=n.device)[None] < n[:, None], as_tuple=True)
    face, edge = path[m, k], exits[m, k]
    t = _crossing(xy, f[m], face, edge, P[m], D[m]).clamp(0, 1)
    h = _horizontal_weight(xy, f[m], face, edge, P[m] + t[:, None] * D[m], faces, corners, s)
    share = torch.where(dj[m] == 1, h, 1 - h)
    # past the walk's end: 1 where the walk went from p, 0 from q (neither moves the
    # running bound below)
    pad = torch.where(p_front, 1.0, 0.0).to(t.dtype)[:, None].expand(M, S)
    ts = pad.index_put((m, k), t)
    # the walk's crossings go away from its pixel; round-off where faces meet at a
    # vertex must not reorder them: each is bounded by the ones after it (the boundary
    # stays exact)
    ahead_min = ts.flip(1).cummin(1).values.flip(1)
    ahead_max = ts.flip(1).cummax(1).values.flip(1)
    ts = torch.where(p_front[:, None], ahead_min, ahead_max)
    shares = torch.zeros_like(ts).index_put((m, k), share)
    return ts, shares


def _walk_colours(colour_at, f, path, n, P, D, ts, front, back, front_pixel):
    """The colours along a pair's walk, one ``[M, C]`` per column ``k`` of ``path`` and
    one more: the front pixel's (column 0), each walked face's, evaluated by
    ``colour_at`` at the middle of its stretch (without it, the front pixel's), and the
    other pixel's from column ``n`` on."""
    M, S = path.shape
    out = [front]
    for k in range(1, S + 1):
        inside = k < n
        colour = front
        sel = torch.nonzero(inside, as_tuple=True)[0]
        if colour_at is not None and sel.numel():
            middle = 0.5 * (ts[sel, k - 1] + ts[sel, k])
            point = P[sel] + middle[:, None] * D[sel]
            colour = front.index_put((sel,), colour_at(f[sel], path[sel, k], point,
                                                       front_pixel[sel]))
        out.append(torch.where((k >= n)[:, None], back, colour))
    return out


def antialias(img: torch.Tensor, face_id: torch.Tensor, xy: torch.Tensor, z: torch.Tensor,
              neighbours: torch.Tensor | None = None,
              faces: torch.Tensor | None = None, colour_at=None) -> torch.Tensor:
    """Anti-alias a z-buffered image at its silhouette, occlusion and crease edges.

    Args:
        img: ``[F, H, W, C]`` colours (e.g. RGBA) of the visible face at each pixel
            centre; may require grad.
        face_id: ``[F, H, W]`` index of that face, -1 where none (background).
        xy: ``[F, T, 3, 2]`` face corners in screen units (pixel ``(i, j)``'s centre is
            ``((j + 0.5), (i + 0.5)) * 2 / H``); may require grad.
        z: ``[F, T, 3]`` corner depths (positive).
        neighbours: ``[T, 3]`` from :func:`face_neighbours`: with it, a segment that
            leaves the visible face into a neighbour no pixel centre sees (thin faces of
            a cone, a cylinder, a fine mesh) follows the surface to its real silhouette.
        faces: ``[T, 3]`` vertex indices of the faces (the array ``neighbours`` was made
            from; needs ``neighbours``): with them, an edge's share of each pixel axis
            moves smoothly to a common value at its ends, so the image stays
            continuous as a crossing passes a vertex (see the module docstring).
        colour_at: ``colour_at(frame [N], face [N], point [N, 2], pixel [N]) -> [N, C]``,
            the colour of a face at a screen point, as ``img`` would show it at the
            flat pixel index ``pixel`` (the pixel next to it on the same surface: its
            shadows, say); used for the faces a segment crosses that no pixel centre
            sees (needs ``neighbours``). Without it they take the front pixel's colour.

    Returns ``[F, H, W, C]``, differentiable in ``img`` and ``xy`` (and in what
    ``colour_at`` returns).
    """
    if faces is not None and neighbours is None:
        raise ValueError("antialias: faces needs neighbours (face_neighbours(faces))")
    F, H, W, C = img.shape
    flat = img.reshape(F * H * W, C)
    pairs = _pair_deltas(img, face_id, xy, z, neighbours, faces, colour_at)
    if pairs is None:
        return img
    return flat.index_add(0, pairs[0], pairs[1]).reshape(F, H, W, C)

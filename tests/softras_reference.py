"""Plain-PyTorch reference of the soft rasterizer formula (dense: every pixel x every face).

Independent of the Taichi code (it shares no helper with ``gradsim_taichi.render``);
gradients come from torch autograd. Same inputs as
``gradsim_taichi.render.raster_autograd.SoftRasterFunction``; the formula is documented in
``render/soft_raster.py``. Memory grows with pixels x faces: pass ``rows`` to render a
subset of image rows (the benchmark uses it for large cases).
"""

from __future__ import annotations

import math

import torch


def _bilinear(tex, texsize, texid, u, v):
    """Clamp-to-edge bilinear lookup; ``texid < 0`` gives ones. u, v, texid: same shape."""
    out = torch.ones(*u.shape, 3, dtype=u.dtype)
    for k in range(tex.shape[0]):
        sel = texid == k
        if not bool(sel.any()):
            continue
        ht, wt = int(texsize[k, 0]), int(texsize[k, 1])
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
        val = (1 - fy) * ((1 - fx) * t[ya, xa] + fx * t[ya, xb]) + fy * (
            (1 - fx) * t[yb, xa] + fx * t[yb, xb]
        )
        out = torch.where(sel[..., None], val, out)
    return out


def soft_rasterize_reference(
    xy, z, col, tex, bg, uv, texid, texsize, *, sigma, gamma, near, far, eps, threshold,
    rows=None,
):  # fmt: skip
    """RGBA ``[F, len(rows) or H, W, 4]`` from the SoftRas formula, fully differentiable.

    ``xy[F, T, 3, 2]`` screen positions (units of half the image height), ``z[F, T, 3]``,
    ``col[F, T, 18]`` corner colours (9 multiplicative then 9 additive), ``tex`` textures
    ``[K, Ht, Wt, 3]`` or None, ``bg[H, W, 3]``, ``uv[T, 6]``, ``texid[T]``, ``texsize[K, 2]``.
    """
    H, W = bg.shape[0], bg.shape[1]
    F, T = z.shape[0], z.shape[1]
    rows = torch.arange(H) if rows is None else torch.as_tensor(rows)
    dt = xy.dtype
    d2max = sigma * math.log(1.0 / threshold - 1.0)
    ii, jj = torch.meshgrid(rows.to(dt), torch.arange(W, dtype=dt), indexing="ij")
    px = ((jj + 0.5) * 2.0 / H).reshape(-1, 1)  # [P, 1]
    py = ((ii + 0.5) * 2.0 / H).reshape(-1, 1)
    bgp = bg[rows].reshape(-1, 3)
    uvr = uv.reshape(T, 3, 2)
    frames = []
    for f in range(F):
        x, y, zf = xy[f, :, :, 0], xy[f, :, :, 1], z[f]
        ex1, ey1 = x[:, 1] - x[:, 0], y[:, 1] - y[:, 0]
        ex2, ey2 = x[:, 2] - x[:, 0], y[:, 2] - y[:, 0]
        area0 = ex1 * ey2 - ey1 * ex2
        finite = torch.isfinite(xy[f]).all(-1).all(-1) & torch.isfinite(zf).all(-1)
        valid = finite & (zf > near).all(-1) & (area0.abs() > 1e-30)
        dummy_x = torch.tensor([0.0, 1.0, 0.0], dtype=dt)
        dummy_y = torch.tensor([0.0, 0.0, 1.0], dtype=dt)
        x = torch.where(valid[:, None], x, dummy_x)
        y = torch.where(valid[:, None], y, dummy_y)
        zf = torch.where(valid[:, None], zf, torch.ones_like(zf))
        xs = [x[None, :, k] for k in range(3)]  # [1, T]
        ys = [y[None, :, k] for k in range(3)]
        n = []
        for k in range(3):
            k1, k2 = (k + 1) % 3, (k + 2) % 3
            n.append((xs[k1] - px) * (ys[k2] - py) - (ys[k1] - py) * (xs[k2] - px))
        area = n[0] + n[1] + n[2]
        w = torch.stack(n, -1) / area[..., None]  # [P, T, 3]
        inside = (w >= 0).all(-1)
        d2s = []
        for k in range(3):
            k1 = (k + 1) % 3
            ex, ey = xs[k1] - xs[k], ys[k1] - ys[k]
            ll = ex * ex + ey * ey
            t = (((px - xs[k]) * ex + (py - ys[k]) * ey) / ll).clamp(0.0, 1.0)
            rx, ry = px - xs[k] - t * ex, py - ys[k] - t * ey
            d2s.append(rx * rx + ry * ry)
        d2 = torch.stack(d2s, -1).min(-1).values
        mask = valid[None, :] & (inside | (d2 <= d2max))
        xarg = torch.where(inside, d2, -d2) / sigma
        D = torch.where(mask, torch.sigmoid(xarg), torch.zeros_like(xarg))
        om = torch.where(mask, torch.sigmoid(-xarg), torch.ones_like(xarg))
        u = w.clamp(0.0, 1.0)
        wc = u / u.sum(-1, keepdim=True)
        q = wc / zf[None]
        Q = q.sum(-1)
        b = q / Q[..., None]
        zn = (far - 1.0 / Q) / (far - near)
        uvp = torch.einsum("ptk,tkd->ptd", b, uvr)  # [P, T, 2]
        Tx = (
            _bilinear(tex, texsize, texid[None, :].expand_as(Q), uvp[..., 0], uvp[..., 1])
            if (tex is not None)
            else torch.ones(*Q.shape, 3, dtype=dt)
        )
        M = col[f, :, 0:9].reshape(T, 3, 3)
        A = col[f, :, 9:18].reshape(T, 3, 3)
        Mi = torch.einsum("ptk,tkc->ptc", b, M)  # [P, T, 3]
        Ai = torch.einsum("ptk,tkc->ptc", b, A)
        C = Mi * Tx + Ai
        znm = torch.where(mask, zn, torch.full_like(zn, -math.inf))
        m = torch.maximum(znm.max(-1).values, torch.tensor(eps, dtype=dt)).detach()
        e = torch.exp(torch.where(mask, (zn - m[:, None]) / gamma, torch.full_like(zn, -math.inf)))
        wj = D * e
        wb = torch.exp((eps - m) / gamma)
        S = wj.sum(-1) + wb
        rgb = (torch.einsum("pt,ptc->pc", wj, C) + wb[:, None] * bgp) / S[:, None]
        alpha = 1.0 - om.prod(-1)
        frames.append(torch.cat([rgb, alpha[:, None]], -1).reshape(len(rows), W, 4))
    return torch.stack(frames)

"""Shadows of the directional lights on the meshes themselves (hard and antialiased
modes; ``SoftRasterizer(sun_shadows=...)``).

A concave body shades itself: the upper arm of an L-shape hides the sun from the step
below it. A path tracer draws that; a rasterizer that shades each face from the light
alone does not, and on path-traced clips of an L-shape the missing shadow (a few
pixels in the inner corner) pulled a fitted camera 4 cm off and the mass by 8e-3.

Each pixel whose visible face belongs to a shadowing mesh and faces a directional
light is tested for that light: the ray from its surface point (where the pixel
centre's ray meets the face's plane) towards the light against every triangle of the
shadowing meshes in that frame. A blocked pixel loses the light's share of its colour
(:func:`gradsim_taichi.render.shading.shade` with that light alone), which keeps its
gradients to the light, the albedo and the face's normal. Which pixels are blocked is
a step function of the positions: its edges carry no gradient (like the visibility of a
hard render's pixel centres); on a moving body the shadow's edge is a few pixels of
small faces.
"""

from __future__ import annotations

import torch

# the rays-times-triangles tested at once (memory: about 30 doubles each)
CHUNK = 1 << 20


def _ray_hits(origin, direction, tris, skip) -> torch.Tensor:
    """Whether each ray ``origin [N, 3] + t direction [3]`` (t > 0) meets one of the
    triangles ``tris [T, 3, 3]`` other than its own face ``skip [N]`` (Moller-Trumbore)."""
    e1, e2 = tris[:, 1] - tris[:, 0], tris[:, 2] - tris[:, 0]
    p = torch.linalg.cross(direction.expand_as(e2), e2)                  # [T, 3]
    det = (e1 * p).sum(-1)                                               # [T]
    inv = 1.0 / torch.where(det.abs() > 1e-300, det, torch.ones_like(det))
    s = origin[:, None] - tris[None, :, 0]                               # [N, T, 3]
    a = (s * p).sum(-1) * inv
    q = torch.linalg.cross(s, e1.expand_as(s))
    b = (q * direction).sum(-1) * inv
    t = (q * e2).sum(-1) * inv
    # (rounding: a hit within 1e-9 of the scale of the origin is the origin's own face
    # or an edge it shares)
    tol = 1e-9 * (1.0 + origin.abs().amax(-1, keepdim=True))
    own = torch.arange(len(tris), device=origin.device)[None] == skip[:, None]
    hit = (det.abs() > 1e-300) & (a >= 0) & (b >= 0) & (a + b <= 1) & (t > tol) & ~own
    return hit.any(-1)


def _has_front(world, n, vertices) -> torch.Tensor:
    """``[F, T]``: whether any of ``vertices [F, V, 3]`` lies in front of each face's
    plane (on its normal's side): a lit face with none there cannot be shadowed (a
    convex body never is), which leaves few pixels to test."""
    F, T = n.shape[:2]
    out = torch.zeros(F, T, dtype=torch.bool, device=n.device)
    rows = max(1, CHUNK // max(1, vertices.shape[1]))
    scale = 1.0 + vertices.abs().amax()
    for s in range(0, T, rows):
        nn = n[:, s:s + rows] / n[:, s:s + rows].norm(dim=-1, keepdim=True).clamp_min(1e-300)
        rel = vertices[:, None] - world[:, s:s + rows, 0][:, :, None]       # [F, t, V, 3]
        out[:, s:s + rows] = ((rel * nn[:, :, None]).sum(-1) > 1e-9 * scale).any(-1)
    return out


def shadowed_pixels(world, vertices, face_id, shadowing, two_sided, camera, direction,
                    supersample) -> torch.Tensor:
    """The flat indices (into ``face_id``'s ``F * H * W``) of the pixels that light
    ``direction [3]`` (its direction of travel) does not reach.

    ``world [F, T, 3, 3]``: every packed face's corners (world space); ``vertices [F,
    V, 3]``: the shadowing meshes' vertices; ``face_id [F, H, W]``: the visible packed
    face per pixel of the raster grid (-1: none), which is ``supersample`` times the
    camera's resolution; ``shadowing [T]`` (bool): the faces that receive and cast the
    shadows; ``two_sided [T]`` (bool): faces shaded on the side the camera sees (as
    :func:`~gradsim_taichi.render.shading.shade` does). No gradient."""
    with torch.no_grad():
        F, H, W = face_id.shape
        dev, dt = world.device, world.dtype
        to_light = -direction.detach().to(dt)
        to_light = to_light / to_light.norm()
        n = torch.linalg.cross(world[:, :, 1] - world[:, :, 0], world[:, :, 2] - world[:, :, 0])
        eye = camera.eye().detach().to(dt)
        if two_sided.any():
            toward = ((eye - world[:, :, 0]) * n).sum(-1, keepdim=True) < 0
            n = torch.where(two_sided[None, :, None] & toward, -n, n)
        # lit, and something in front of it
        facing = ((n * to_light).sum(-1) > 0) & _has_front(world, n, vertices)  # [F, T]
        fid = face_id.clamp_min(0)
        frames = torch.arange(F, device=dev)[:, None, None].expand(F, H, W)
        recv = (face_id >= 0) & shadowing[fid] & facing[frames, fid]
        idx = torch.nonzero(recv.reshape(-1), as_tuple=True)[0]
        if not idx.numel():
            return idx
        R, _ = camera.world_to_camera()
        R = R.detach().to(dt)
        fx, fy, cx, cy = (float(x) for x in camera.intrinsics())
        frame, ij = idx // (H * W), idx % (H * W)
        u = ((ij % W).to(dt) + 0.5) / supersample
        v = ((ij // W).to(dt) + 0.5) / supersample
        ray = torch.stack([(u - cx) / fx, (v - cy) / fy, torch.ones_like(u)], -1) @ R
        f = fid.reshape(-1)[idx]
        corner, normal = world[frame, f, 0], n[frame, f]
        t = ((corner - eye) * normal).sum(-1) / (ray * normal).sum(-1)
        points = eye + t[:, None] * ray
        blocked = torch.zeros(len(idx), dtype=torch.bool, device=dev)
        casters = torch.nonzero(shadowing, as_tuple=True)[0]
        # local face numbers of the casters (a pixel's own face is never its blocker)
        local = torch.full((len(shadowing),), -1, dtype=torch.long, device=dev)
        local[casters] = torch.arange(len(casters), device=dev)
        rows = max(1, CHUNK // max(1, len(casters)))
        for k in range(F):
            sel = torch.nonzero(frame == k, as_tuple=True)[0]
            tris = world[k, casters]
            for s in range(0, len(sel), rows):
                part = sel[s:s + rows]
                blocked[part] = _ray_hits(points[part], to_light, tris, local[f[part]])
        return idx[blocked]

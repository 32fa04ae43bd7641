"""How moving bodies change the ground's light around them (the nuisance kinds ``shadow``
and ``bounce``, :mod:`gradsim_taichi.nuisance`): the bodies flattened along the light
onto the ground (the cast shadow's outline), where each pixel's ray meets the ground,
the sky each body hides from it (ambient occlusion), and a learned map of what else a
body does to the ground near it.

The map is for the light a renderer with global illumination or a camera records and
the model's shadow and occlusion do not draw: the light the body bounces onto the
ground beside it (a red body reddens it), the dark crevice along a resting body's
contact, the soft edge of a shadow. Each is tied to the body: it moves with it. A
static background learned per pixel cannot take it in, and a loss that compares the
ground there pulls the body towards where its missing light would match: on a 6 kg
cylinder path-traced by Mitsuba (all its light bounces) the mass came out 1.7e-3 off
without the map and 7.9e-4 with it (docs/own_video_measurements.md).
"""

from __future__ import annotations

import torch

from gradsim_taichi import runtime

# the map's cells along each ground axis, and its reach from the body's centre (each
# way, in the body's root-mean-square radius): 12 cells over 3 radii gave the 6 kg
# cylinder 1.0e-3, 20 cells 1.2e-3 (more values, as much data)
BOUNCE_CELLS = 12
BOUNCE_REACH = 3.0
# the shadow's faces, flattened onto the ground, are lifted off it by this fraction of
# their height above it, so that the flattened faces that overlap (a closed body's lit
# and unlit sides) keep one depth order. Coplanar, the z-buffer's pick among them flipped
# with any small move, and the cover's edge pixels with it (along a slide in 0.1 mm
# steps an L-shape's shadow had second differences 1.36 times its first; lifted, 0.11),
# and an 8 kg cylinder's fit stopped after 45 iterations with its mass still moving
# (lifted: 113, to a lower loss). 0.4 mm at 0.4 m: under 1/50 of a pixel here.
SHADOW_LIFT = 1e-3


def flattened(v: torch.Tensor, direction: torch.Tensor, height: float) -> torch.Tensor:
    """The vertices ``v [..., 3]`` moved along the light's ``direction`` onto the ground
    plane ``y = height`` (the cast shadow's outline), then lifted off it by
    :data:`SHADOW_LIFT` times their height above it."""
    lift = torch.zeros_like(direction)
    lift[1] = SHADOW_LIFT
    h = v[..., 1:2] - height
    return v - (h / direction[1]) * direction + h * lift


def ground_points(camera, height: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Where each pixel's centre ray meets the ground plane ``y = height``: the points
    ``[H, W, 3]`` and whether the ray meets it in front of the camera ``[H, W]`` (bool)."""
    dt, dev = runtime.torch_dtype(), runtime.torch_device()
    R, _ = camera.world_to_camera()
    fx, fy, cx, cy = camera.intrinsics()
    v, u = torch.meshgrid(torch.arange(camera.height, dtype=dt, device=dev) + 0.5,
                          torch.arange(camera.width, dtype=dt, device=dev) + 0.5,
                          indexing="ij")
    ray = torch.stack([(u - cx) / fx, (v - cy) / fy, torch.ones_like(u)], -1) @ R
    eye = camera.eye()
    dy = ray[..., 1]
    # (a camera at or below the ground sees none of its upper side)
    hit = (dy < -1e-12) & (float(eye[1].detach()) > height)
    t = torch.where(hit, (height - eye[1]) / torch.where(hit, dy, -1.0),
                    torch.zeros_like(dy))
    return eye + t[..., None] * ray, hit


def sphere_occlusion(points, hit, parts) -> torch.Tensor:
    """The ambient occlusion ``[F, H, W, 1]`` of the ground ``points [H, W, 3]`` (where
    ``hit``) by the bodies ``parts`` (each ``[F, V, 3]`` vertices): the fraction of the
    cosine-weighted sky each hides, the body taken as a sphere (centre: its vertices'
    mean; radius: their root-mean-square distance from it), ``(r / d)^2 cos(theta)``
    (``d`` from the ground point to the centre, ``theta`` from the ground's normal),
    summed over the bodies and clamped to 1; 0 where the ray misses the ground."""
    total = 0.0
    for v in parts:
        c = v.mean(1)                                              # [F, 3]
        r2 = ((v - c[:, None]) ** 2).sum(-1).mean(1)                # [F]
        rel = c[:, None, None, :] - points                          # [F, H, W, 3]
        d2 = (rel ** 2).sum(-1)
        height = rel[..., 1]
        # inside the sphere (d < r) the whole sky is hidden
        d2 = torch.maximum(d2, r2[:, None, None])
        cos = height.clamp(min=0.0) / d2.sqrt()
        total = total + r2[:, None, None] / d2 * cos
    total = torch.where(hit, total, torch.zeros_like(total)).clamp(max=1.0)
    return total[..., None]


def radius(v: torch.Tensor) -> float:
    """A body's root-mean-square radius (its vertices ``[V, 3]`` about their mean)."""
    return float(((v - v.mean(0)) ** 2).sum(-1).mean().sqrt().detach())


def bounce_factor(points, hit, parts, maps, reaches) -> torch.Tensor:
    """The factor ``[F, H, W, 3]`` on the ground's light of the learned bounce maps: at a
    ground point ``p`` (``points [H, W, 3]``, where ``hit``) and body ``k`` (vertices
    ``parts[k] [F, V, 3]``, centre ``c`` their mean), ``1 + maps[k]`` sampled
    bilinearly at ``(p - c) / reaches[k]`` along the ground's x and z axes (the map
    ``[3, G, G]`` spans -1..1 in both, its rows along z; 0 beyond: the factor is 1
    there), multiplied over the bodies; 1 where the ray misses the ground."""
    out = 1.0
    for v, m, reach in zip(parts, maps, reaches):
        c = v.mean(1)                                               # [F, 3]
        rel = (points[None, :, :, [0, 2]] - c[:, None, None, [0, 2]]) / reach
        s = torch.nn.functional.grid_sample(
            m.expand(len(c), -1, -1, -1), rel, mode="bilinear", padding_mode="zeros",
            align_corners=False)                                    # [F, 3, H, W]
        out = out * (1.0 + s.permute(0, 2, 3, 1))
    return torch.where(hit[None, :, :, None], out, torch.ones_like(out))

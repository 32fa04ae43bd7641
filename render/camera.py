"""Pinhole camera: pose (look-at or extrinsic), intrinsics and projection, all in torch.

Conventions: the world is right-handed with y up. The camera frame is OpenCV's: x to
the right of the image, y down the image, z forward (depth is positive in front of
the camera). Pixel ``(row i, column j)`` has its centre at ``u = j + 0.5, v = i + 0.5``;
row 0 is the top of the image.

The pose is recomputed from the stored tensors at every call, so ``eye``/``target`` or the
extrinsic matrix may be torch tensors with ``requires_grad=True`` (camera-pose gradients).
"""

from __future__ import annotations

import math

import torch

from gradsim_taichi import runtime


def _as_tensor(x, name: str, shape: tuple) -> torch.Tensor:
    """Convert ``x`` to a float tensor of the runtime dtype and device (keeping autograd),
    checking shape."""
    dt, dev = runtime.torch_dtype(), runtime.torch_device()
    if isinstance(x, torch.Tensor):
        if not torch.is_floating_point(x):
            raise TypeError(f"{name} must be a floating tensor, got dtype {x.dtype}")
        t = x.to(dtype=dt, device=dev)
    else:
        t = torch.as_tensor(x, dtype=dt, device=dev)
    if tuple(t.shape) != shape:
        raise ValueError(f"{name} must have shape {shape}, got {tuple(t.shape)}")
    if not torch.isfinite(t).all():
        raise ValueError(f"{name} must be finite, got {t.detach().tolist()}")
    return t


def _check_size(width, height) -> tuple[int, int]:
    if int(width) != width or int(height) != height or width < 1 or height < 1:
        raise ValueError(f"image size must be positive integers, got {width}x{height} (W x H)")
    return int(width), int(height)


class Camera:
    """A perspective pinhole camera.

    Build one with :meth:`look_at` or :meth:`from_extrinsic`. Attributes ``width``,
    ``height`` (pixels), ``near`` and ``far`` (depth range; geometry closer than ``near``
    is culled) are plain numbers; ``fx, fy, cx, cy`` are in pixels.
    """

    def __init__(self, width, height, fx, fy, cx, cy, near=0.01, far=100.0):
        self.width, self.height = _check_size(width, height)
        if not (0 < near < far):
            raise ValueError(f"need 0 < near < far, got near={near}, far={far}")
        self.near, self.far = float(near), float(far)
        self.fx = _as_tensor(fx, "fx", ())
        self.fy = _as_tensor(fy, "fy", ())
        self.cx = _as_tensor(cx, "cx", ())
        self.cy = _as_tensor(cy, "cy", ())
        if self.fx.item() <= 0 or self.fy.item() <= 0:
            raise ValueError(f"focal lengths must be positive, got fx={self.fx}, fy={self.fy}")
        self._eye = self._target = self._up = self._extrinsic = None

    @classmethod
    def look_at(
        cls,
        eye,
        target=(0.0, 0.0, 0.0),
        up=(0.0, 1.0, 0.0),
        fov_y_deg: float = 45.0,
        width: int = 128,
        height: int = 128,
        near: float = 0.01,
        far: float = 100.0,
    ) -> Camera:
        """Camera at ``eye`` looking at ``target`` with ``up`` roughly up in the image.

        ``fov_y_deg`` is the vertical field of view; pixels are square, the principal
        point is the image centre. ``eye`` and ``target`` may be tensors requiring grad.
        """
        if not (0.0 < fov_y_deg < 180.0):
            raise ValueError(f"fov_y_deg must be in (0, 180), got {fov_y_deg}")
        width, height = _check_size(width, height)
        f = 0.5 * height / math.tan(math.radians(fov_y_deg) / 2.0)
        cam = cls(width, height, f, f, width / 2.0, height / 2.0, near, far)
        cam._eye = _as_tensor(eye, "eye", (3,))
        cam._target = _as_tensor(target, "target", (3,))
        cam._up = _as_tensor(up, "up", (3,))
        fwd = cam._target.detach() - cam._eye.detach()
        if fwd.norm() < 1e-12:
            raise ValueError("eye and target coincide")
        if torch.linalg.cross(fwd, cam._up.detach()).norm() < 1e-9 * fwd.norm():
            raise ValueError(f"up={cam._up.tolist()} is parallel to the viewing direction")
        return cam

    @classmethod
    def from_extrinsic(
        cls, T_world_to_cam, fx, fy, cx, cy, width: int, height: int, near=0.01, far=100.0
    ) -> Camera:
        """Camera from a 4x4 world-to-camera matrix (OpenCV camera frame: x right, y down,
        z forward) and pinhole intrinsics in pixels. The matrix may require grad; its
        rotation block is used as given (it should be orthonormal)."""
        cam = cls(width, height, fx, fy, cx, cy, near, far)
        cam._extrinsic = _as_tensor(T_world_to_cam, "T_world_to_cam", (4, 4))
        return cam

    def intrinsics(self) -> tuple[torch.Tensor, ...]:
        """``(fx, fy, cx, cy)`` as tensors of the current runtime dtype."""
        dt = runtime.torch_dtype()
        return tuple(x.to(dt) for x in (self.fx, self.fy, self.cx, self.cy))

    def world_to_camera(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Rotation ``R`` [3,3] and translation ``t`` [3] with ``x_cam = R @ x_world + t``
        (in the current runtime dtype)."""
        dt = runtime.torch_dtype()
        if self._extrinsic is not None:
            T = self._extrinsic.to(dt)
            return T[:3, :3], T[:3, 3]
        eye, target, up = self._eye.to(dt), self._target.to(dt), self._up.to(dt)
        fwd = target - eye
        fwd = fwd / fwd.norm()
        right = torch.linalg.cross(fwd, up)
        right = right / right.norm()
        down = torch.linalg.cross(fwd, right)
        R = torch.stack([right, down, fwd])
        return R, -(R @ eye)

    def eye(self) -> torch.Tensor:
        """Camera centre in world coordinates."""
        R, t = self.world_to_camera()
        return -(R.transpose(0, 1) @ t)

    def to_camera(self, points: torch.Tensor) -> torch.Tensor:
        """World points [..., 3] to camera-frame points [..., 3]."""
        R, t = self.world_to_camera()
        return points @ R.transpose(0, 1) + t

    def project(self, points) -> tuple[torch.Tensor, torch.Tensor]:
        """Project world points [..., 3] to pixel coordinates.

        Returns ``(uv, depth)``: ``uv`` [..., 2] in pixels (u to the right, v down, pixel
        centres at half-integers) and ``depth`` [...] along the optical axis (positive in
        front). Points at or behind the camera give non-finite or meaningless ``uv``.
        """
        points = points if isinstance(points, torch.Tensor) else torch.as_tensor(points)
        points = points.to(dtype=runtime.torch_dtype(), device=runtime.torch_device())
        pc = self.to_camera(points)
        fx, fy, cx, cy = self.intrinsics()
        z = pc[..., 2]
        u = fx * pc[..., 0] / z + cx
        v = fy * pc[..., 1] / z + cy
        return torch.stack([u, v], dim=-1), z

    def __repr__(self) -> str:
        return (
            f"Camera(width={self.width}, height={self.height}, fx={self.fx.item():.4g}, "
            f"fy={self.fy.item():.4g}, cx={self.cx.item():.4g}, cy={self.cy.item():.4g})"
        )

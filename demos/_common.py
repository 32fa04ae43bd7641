"""Shared helpers of the ti.GUI demos: arguments, engine start, a pinhole camera,
painter's-algorithm mesh drawing and frame recording (PNG frames, a GIF, a still).

Every demo runs in a window where a display exists; with ``--headless`` (or when there
is no display) it draws into ``ti.GUI(show_gui=False)`` and writes its frames to
``--out`` instead.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

# before any demo imports taichi: no banner, no online version check
os.environ.setdefault("ENABLE_TAICHI_HEADER_PRINT", "0")
os.environ.setdefault("TI_SKIP_VERSION_CHECK", "ON")

BACKGROUND = 0xF2F2F5
TEXT = 0x202028
LIGHT = np.array([0.35, 0.85, 0.4]) / np.linalg.norm([0.35, 0.85, 0.4])


def parse_args(name: str, description: str, argv=None, frames_help: str = "frames",
               extra=None, headless_frames: int | None = 120) -> argparse.Namespace:
    """The common options; ``extra(parser)`` may add the demo's own.

    ``--frames`` defaults to ``headless_frames`` headless and to "until the window
    closes" otherwise."""
    p = argparse.ArgumentParser(prog=f"demos/{name}.py", description=description)
    p.add_argument("--headless", action="store_true",
                   help="no window: write PNG frames and a GIF to --out")
    p.add_argument("--frames", type=int, default=None,
                   help=f"number of {frames_help} (default: "
                        + (f"{headless_frames} headless, else until closed)"
                           if headless_frames else "see below)"))
    p.add_argument("--out", default=f"results/demos/{name}", help="output folder (headless)")
    p.add_argument("--still", default=None,
                   help="also write the last frame as a small PNG here (for docs)")
    p.add_argument("--gif-fps", type=float, default=30.0, help="GIF frame rate")
    if extra is not None:
        extra(p)
    args = p.parse_args(argv)
    if not args.headless and not has_display():
        print(f"{name}: no display found; running headless (frames go to {args.out})")
        args.headless = True
    if args.frames is None and args.headless:
        args.frames = headless_frames
    if args.frames is not None and args.frames < 1:
        p.error(f"--frames must be a positive integer; got {args.frames}")
    return args


def has_display() -> bool:
    """True where a window can open (always assumed off Linux)."""
    if not sys.platform.startswith("linux"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def start_engine(precision: str = "f64"):
    """``gradsim_taichi.init`` unless the engine already runs at this precision (a demo
    called in-process, e.g. from the tests, then keeps the caller's fields alive)."""
    import gradsim_taichi as gs

    info = gs.info()
    if not info["initialized"] or info.get("precision") != precision:
        gs.init(precision=precision)
    return gs


def make_gui(title: str, res, headless: bool):
    import taichi as ti

    return ti.GUI(title, res=tuple(res), background_color=BACKGROUND, show_gui=not headless)


class Camera3D:
    """A pinhole camera looking from ``eye`` at ``target`` (y up); projects to ti.GUI's
    canvas coordinates ([0, 1]^2, origin bottom left)."""

    def __init__(self, eye, target, fov_y_deg=40.0, aspect=4 / 3):
        self.eye = np.asarray(eye, dtype=np.float64)
        fwd = np.asarray(target, dtype=np.float64) - self.eye
        self.fwd = fwd / np.linalg.norm(fwd)
        right = np.cross(self.fwd, [0.0, 1.0, 0.0])
        self.right = right / np.linalg.norm(right)
        self.up = np.cross(self.right, self.fwd)
        self.f = 1.0 / np.tan(np.radians(fov_y_deg) / 2)
        self.aspect = float(aspect)

    def project(self, points) -> tuple[np.ndarray, np.ndarray]:
        """World points [N, 3] -> canvas positions [N, 2] and view depths [N]."""
        d = np.asarray(points, dtype=np.float64) - self.eye
        z = np.maximum(d @ self.fwd, 1e-6)
        u = 0.5 + 0.5 * self.f * (d @ self.right) / (z * self.aspect)
        v = 0.5 + 0.5 * self.f * (d @ self.up) / z
        return np.stack([u, v], axis=1), z

    def unproject(self, uv, depth: float) -> np.ndarray:
        """The world point at canvas position ``uv`` and view depth ``depth``."""
        x = (2 * uv[0] - 1) * self.aspect / self.f
        y = (2 * uv[1] - 1) / self.f
        return self.eye + depth * (self.fwd + x * self.right + y * self.up)


def to_hex(rgb) -> np.ndarray:
    """RGB in [0, 1], [..., 3] -> 0xRRGGBB integers."""
    c = (np.clip(np.asarray(rgb, dtype=np.float64), 0, 1) * 255).astype(np.uint32)
    return (c[..., 0] << 16) | (c[..., 1] << 8) | c[..., 2]


def draw_meshes(gui, cam: Camera3D, meshes, two_sided: bool = True) -> None:
    """Draw ``[(vertices [V, 3], faces [T, 3], colours (3,) or [T, 3]), ...]`` with flat
    Lambert shading, all faces sorted far to near together (painter's algorithm)."""
    a, b, c, depth, colors = [], [], [], [], []
    for verts, faces, color in meshes:
        uv, z = cam.project(verts)
        p = verts[faces]
        n = np.cross(p[:, 1] - p[:, 0], p[:, 2] - p[:, 0])
        n /= np.linalg.norm(n, axis=1, keepdims=True) + 1e-12
        to_eye = cam.eye - p.mean(axis=1)
        facing = np.einsum("ij,ij->i", n, to_eye) > 0
        n = np.where(facing[:, None], n, -n)
        keep = np.ones(len(faces), bool) if two_sided else facing
        lam = 0.35 + 0.65 * np.abs(n @ LIGHT)
        rgb = np.broadcast_to(np.asarray(color, dtype=np.float64), (len(faces), 3))
        f = faces[keep]
        a.append(uv[f[:, 0]])
        b.append(uv[f[:, 1]])
        c.append(uv[f[:, 2]])
        depth.append(z[f].mean(axis=1))
        colors.append(to_hex(rgb[keep] * lam[keep, None]))
    order = np.argsort(-np.concatenate(depth), kind="stable")
    if len(order):
        gui.triangles(np.concatenate(a)[order], np.concatenate(b)[order],
                      np.concatenate(c)[order], color=np.concatenate(colors)[order])


def draw_ground(gui, cam: Camera3D, height=0.0, extent=(-2.0, 2.0, -2.0, 1.0),
                tile=0.25) -> None:
    """A checkered ground y = ``height`` over ``x0, x1, z0, z1`` (draw it first)."""
    x0, x1, z0, z1 = extent
    xs, zs = np.arange(x0, x1, tile), np.arange(z0, z1, tile)
    gx, gz = [g.ravel() for g in np.meshgrid(xs, zs, indexing="ij")]
    corners = [(0, 0), (tile, 0), (tile, tile), (0, tile)]
    quad = [cam.project(np.stack([gx + dx, np.full_like(gx, height), gz + dz], 1))[0]
            for dx, dz in corners]
    checker = ((np.round(gx / tile) + np.round(gz / tile)) % 2).astype(bool)
    col = np.where(checker, 0xC8CCC4, 0xB4BAB0).astype(np.uint32)
    for i, j, k in ((0, 1, 2), (0, 2, 3)):
        gui.triangles(quad[i], quad[j], quad[k], color=col)


def draw_hud(gui, lines, frame: int | None = None) -> None:
    """Text lines in the top left corner (hints, state) and the frame counter."""
    for k, line in enumerate(lines):
        gui.text(line, (0.015, 0.985 - 0.04 * k), font_size=16, color=TEXT)
    if frame is not None:
        gui.text(f"frame {frame}", (0.86, 0.985), font_size=16, color=TEXT)


class Recorder:
    """Shows each frame in the window, or (headless) writes it to ``out/frame_NNNN.png``;
    :meth:`finish` writes ``out/NAME.gif`` and the optional ``--still``."""

    def __init__(self, gui, args, name: str):
        self.gui, self.args, self.name = gui, args, name
        self.frame = 0
        self.paths: list[Path] = []
        self.out = Path(args.out)
        if args.headless:
            self.out.mkdir(parents=True, exist_ok=True)
            for old in self.out.glob("frame_*.png"):
                old.unlink()

    @property
    def running(self) -> bool:
        """False once the window closed, ESC was pressed or ``--frames`` were shown."""
        if self.args.frames is not None and self.frame >= self.args.frames:
            return False
        return bool(self.gui.running)

    def show(self) -> None:
        if self.args.headless:
            path = self.out / f"frame_{self.frame:04d}.png"
            self.gui.show(str(path))
            self.paths.append(path)
        else:
            self.gui.show()
        self.frame += 1

    def finish(self) -> dict:
        """Write the GIF (headless) and the still; returns the written paths."""
        import imageio.v2 as imageio
        from PIL import Image

        written: dict = {"frames": list(self.paths)}
        if self.paths:
            gif = self.out / f"{self.name}.gif"
            images = [imageio.imread(p)[..., :3] for p in self.paths]
            imageio.mimsave(gif, images, duration=1.0 / self.args.gif_fps, loop=0)
            written["gif"] = gif
            if self.args.still:
                still = Path(self.args.still)
                still.parent.mkdir(parents=True, exist_ok=True)
                img = Image.fromarray(images[-1]).quantize(colors=64)
                img.save(still, optimize=True)
                written["still"] = still
            print(f"{self.name}: {len(self.paths)} frames in {self.out}, GIF {gif}")
        return written


def key_presses(gui) -> list[str]:
    """Keys pressed since the last call (ti.GUI key names: 'w', 'r', ' ', 'Escape', ...)."""
    import taichi as ti

    return [e.key for e in gui.get_events(ti.GUI.PRESS)]

"""Saving and loading frame sequences (GIF, MP4, folders of PNGs) through imageio."""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import torch

from gradsim_taichi.render.yuv import read_yuv420

_IMAGE_EXT = (".png", ".jpg", ".jpeg", ".bmp")


def _to_uint8(frames) -> np.ndarray:
    if isinstance(frames, torch.Tensor):
        frames = frames.detach().cpu().numpy()
    a = np.asarray(frames)
    if a.ndim == 3:
        a = a[None]
    if a.ndim != 4 or a.shape[-1] not in (1, 3, 4) or min(a.shape[:3]) < 1:
        raise ValueError(f"frames must be [F, H, W, 1|3|4] (or one [H, W, C]), got {a.shape}")
    if a.dtype == np.uint8:
        rgb = a
    else:
        if not np.issubdtype(a.dtype, np.floating):
            raise TypeError(f"frames must be float in [0, 1] or uint8, got dtype {a.dtype}")
        if not np.isfinite(a).all():
            raise ValueError("frames contain NaN or infinite values")
        rgb = (np.clip(a, 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)
    if rgb.shape[-1] == 4:
        rgb = rgb[..., :3]  # the renderer's RGB already holds the background
    if rgb.shape[-1] == 1:
        rgb = np.repeat(rgb, 3, -1)
    return np.ascontiguousarray(rgb)


def save_video(frames, path, fps: float = 30) -> Path:
    """Write frames ``[F, H, W, 3|4]`` (float in [0, 1] or uint8; torch or numpy) to ``path``.

    The format follows the suffix: ``.gif``, ``.mp4`` (H.264 through imageio-ffmpeg; odd
    sizes are padded to even by repeating the last row/column) or a folder path without
    suffix (one ``frame_00000.png`` per frame). Alpha is dropped. Returns the path.
    """
    import imageio.v2 as iio

    rgb = _to_uint8(frames)
    if not fps > 0:
        raise ValueError(f"fps must be positive, got {fps}")
    path = Path(path)
    ext = path.suffix.lower()
    if ext == "":
        path.mkdir(parents=True, exist_ok=True)
        for k, img in enumerate(rgb):
            iio.imwrite(path / f"frame_{k:05d}.png", img)
    elif ext == ".gif":
        path.parent.mkdir(parents=True, exist_ok=True)
        iio.mimsave(path, list(rgb), duration=1000.0 / fps, loop=0)
    elif ext in (".mp4", ".mov", ".mkv", ".avi"):
        path.parent.mkdir(parents=True, exist_ok=True)
        ph, pw = rgb.shape[1] % 2, rgb.shape[2] % 2
        if ph or pw:
            rgb = np.pad(rgb, ((0, 0), (0, ph), (0, pw), (0, 0)), mode="edge")
        with iio.get_writer(
            path, format="FFMPEG", fps=fps, codec="libx264", quality=10,
            macro_block_size=1, pixelformat="yuv420p",
        ) as w:  # fmt: skip
            for img in rgb:
                w.append_data(img)
    else:
        raise ValueError(f"cannot save video {path}: unknown suffix {ext!r} (.gif, .mp4, folder)")
    return path


def load_video(path) -> torch.Tensor:
    """Read an MP4/GIF file, a folder of images, one image (a one-frame video) or a
    ``.npy`` array into a float tensor ``[F, H, W, C]`` in [0, 1] (C = 3, or 4 for images
    with alpha; dtype float32).

    A ``.npy`` file holds ``[F, H, W, 3|4]`` (or grey ``[F, H, W]``), float in [0, 1] or
    uint8/uint16: a renderer's frames without the 8-bit rounding and the 4:2:0 colour of
    an MP4. An 8-bit 4:2:0 video stream (nearly every MP4) is converted from its Y, Cb
    and Cr planes in floating point (:func:`gradsim_taichi.render.yuv.read_yuv420`), not
    through ffmpeg's rounded RGB.

    Raises FileNotFoundError for a missing path and ValueError for an empty folder, an
    unreadable or corrupt file, frames of different sizes, or an array of another shape,
    with NaN or outside [0, 1].
    """
    import imageio.v2 as iio

    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"video not found: {path}")
    if path.is_dir():
        # in the numbers' order: frame_2 before frame_10
        files = sorted((p for p in path.iterdir() if p.suffix.lower() in _IMAGE_EXT),
                       key=_natural_key)
        if not files:
            raise ValueError(f"folder {path} holds no image files ({', '.join(_IMAGE_EXT)})")
        imgs = []
        for p in files:
            try:
                imgs.append(np.asarray(iio.imread(p)))
            except Exception as e:
                raise ValueError(f"cannot read image {p}: {e}") from e
    elif path.suffix.lower() == ".npy":
        return _load_array(path)
    else:
        if os.path.getsize(path) == 0:
            raise ValueError(f"cannot read video {path}: the file is empty")
        try:
            if path.suffix.lower() in _IMAGE_EXT:  # one image: a one-frame video
                imgs = [np.asarray(iio.imread(path))]
            elif path.suffix.lower() == ".gif":
                imgs = list(iio.mimread(path, memtest=False))
            else:  # an 8-bit 4:2:0 stream from its planes, others through ffmpeg's RGB
                imgs = read_yuv420(path)
                if imgs is None:
                    with iio.get_reader(path, format="FFMPEG") as r:
                        imgs = [np.asarray(im) for im in r]
        except Exception as e:
            # (ffmpeg's error carries its whole banner: the first line says what failed)
            first = (str(e).strip().splitlines() or [""])[0]
            raise ValueError(f"cannot read video {path}: {type(e).__name__}: {first} (is "
                             "it a complete, uncorrupted video file?)") from e
        if not len(imgs):
            raise ValueError(f"cannot read video {path}: no frames")
        if isinstance(imgs, np.ndarray):  # converted from the planes: float32 RGB
            return torch.from_numpy(imgs)
    imgs = [im[..., None].repeat(3, -1) if im.ndim == 2 else im for im in imgs]
    shapes = {im.shape for im in imgs}
    if len(shapes) != 1:
        raise ValueError(f"frames of {path} have different shapes: {sorted(shapes)}")
    return _from_integers(np.stack(imgs))


def _natural_key(path: Path) -> list:
    """Sort key: the name's digit runs compared as numbers."""
    return [(0, int(t), "") if t.isdigit() else (1, 0, t.lower())
            for t in re.split(r"(\d+)", path.name)]


def video_fps(path) -> float | None:
    """The frame rate a video container (MP4, MOV, MKV, AVI) declares, or None (image
    folders, ``.npy``, GIF: whose frame times are rounded to 10 ms)."""
    import imageio.v2 as iio

    path = Path(path)
    if path.is_dir() or path.suffix.lower() not in (".mp4", ".mov", ".mkv", ".avi"):
        return None
    try:
        with iio.get_reader(path, format="FFMPEG") as r:
            fps = r.get_meta_data().get("fps")
    except Exception:
        return None
    return float(fps) if fps and np.isfinite(fps) and fps > 0 else None


def _from_integers(a: np.ndarray) -> torch.Tensor:
    """8- or 16-bit pixel values as float32 in [0, 1]."""
    scale = 65535.0 if a.dtype == np.uint16 else 255.0
    return torch.from_numpy(a.astype(np.float32) / scale)


def _load_array(path: Path) -> torch.Tensor:
    """``load_video`` for a ``.npy`` file (see there)."""
    try:
        a = np.load(path, allow_pickle=False)
    except Exception as e:
        raise ValueError(f"cannot read video {path}: {type(e).__name__}: {e}") from e
    if a.ndim == 3:
        a = a[..., None].repeat(3, -1)  # grey frames
    if a.ndim != 4 or a.shape[-1] not in (3, 4) or min(a.shape[:3]) < 1:
        raise ValueError(f"video {path}: expected an array [F, H, W, 3|4] or [F, H, W], "
                         f"got shape {a.shape}")
    if a.dtype in (np.uint8, np.uint16):
        return _from_integers(a)
    if not np.issubdtype(a.dtype, np.floating):
        raise ValueError(f"video {path}: expected float in [0, 1], uint8 or uint16, got "
                         f"dtype {a.dtype}")
    if not np.isfinite(a).all():
        raise ValueError(f"video {path}: the array holds NaN or infinite values")
    if a.min() < -1e-6 or a.max() > 1 + 1e-6:
        raise ValueError(f"video {path}: values lie in [{a.min():.4g}, {a.max():.4g}], "
                         "not in [0, 1] (linear HDR values need tone mapping first)")
    return torch.from_numpy(np.clip(a, 0.0, 1.0).astype(np.float32))

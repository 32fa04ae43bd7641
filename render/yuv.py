"""An 8-bit 4:2:0 video's frames, read as its Y, Cb and Cr planes and converted to RGB in
floating point (:func:`read_yuv420`).

Why not ffmpeg's own conversion to 8-bit RGB: it rounds every channel once more and, on
its fast path, is off by up to 2/255 in saturated colours. Measured on our render of a
tumbling cylinder written by :func:`~gradsim_taichi.render.save_video` (H.264, lossless
quantiser, BT.601): luma against the source, MSE 1.1e-5 through ffmpeg's RGB and 6e-7
from the planes (the 8-bit planes' own rounding); the cylinder's mass, estimated from
the clip, moved 6.0e-4 -> 4.7e-4 off (1e-5 from the frames before encoding).

Each chroma sample is repeated over its 2 x 2 block, as ffmpeg's decoder does: compared
as 4:2:0 (:func:`gradsim_taichi.objectives.chroma_420`) the block mean is then the plane's
value exactly.
"""

from __future__ import annotations

import re

import numpy as np

# the luma weights (Kr, Kb) of the colour matrices ffmpeg names; an untagged stream
# ("unknown") is BT.601, as ffmpeg's own conversion takes it
_MATRICES = {"bt470bg": (0.299, 0.114), "smpte170m": (0.299, 0.114), "bt601": (0.299, 0.114),
             "unknown": (0.299, 0.114), "bt709": (0.2126, 0.0722)}
_FORMATS = ("yuv420p", "yuvj420p")
# frames converted together (in float64): a long HD clip is converted in pieces, so that
# it costs float32 RGB's memory, as ffmpeg's 8-bit RGB made into float32 did
FRAMES_AT_ONCE = 4


def stream_format(pix_fmt: str) -> tuple[str, bool, tuple] | None:
    """``(format, full_range, (Kr, Kb))`` of ffmpeg's description of a stream's pixels
    (``"yuv420p(tv, bt709, progressive)"``), or None where :func:`read_yuv420` does not
    apply (another layout or bit depth, an unknown colour matrix)."""
    m = re.fullmatch(r"\s*(\w+)\s*(?:\((.*)\))?\s*", pix_fmt or "")
    if m is None or m.group(1) not in _FORMATS:
        return None
    tags = [t.strip() for t in (m.group(2) or "").split(",")]
    full = m.group(1) == "yuvj420p" or "pc" in tags
    matrix = _MATRICES["bt601"]
    for tag in tags:
        # a colour tag is "matrix" or "matrix/primaries/transfer"
        if "/" in tag or tag.startswith(("bt", "smpte", "fcc", "ycgco", "gbr", "chroma",
                                         "unknown")):
            name = tag.split("/")[0]
            if name not in _MATRICES:
                return None
            matrix = _MATRICES[name]
    return m.group(1), full, matrix


def to_rgb(y: np.ndarray, cb: np.ndarray, cr: np.ndarray, full: bool,
           matrix: tuple) -> np.ndarray:
    """RGB ``[F, H, W, 3]`` float64 in [0, 1] of 8-bit planes ``y [F, H, W]``, ``cb``, ``cr``
    ``[F, ceil(H/2), ceil(W/2)]`` (each chroma sample over its 2 x 2 block)."""
    y, cb, cr = (np.asarray(p, dtype=np.float64) for p in (y, cb, cr))
    if full:
        y, cb, cr = y / 255.0, (cb - 128.0) / 255.0, (cr - 128.0) / 255.0
    else:  # the studio range: luma 16-235, chroma 16-240
        y, cb, cr = (y - 16.0) / 219.0, (cb - 128.0) / 224.0, (cr - 128.0) / 224.0
    h, w = y.shape[1:]
    cb, cr = (c.repeat(2, 1).repeat(2, 2)[:, :h, :w] for c in (cb, cr))
    kr, kb = matrix
    r = y + 2.0 * (1.0 - kr) * cr
    b = y + 2.0 * (1.0 - kb) * cb
    g = (y - kr * r - kb * b) / (1.0 - kr - kb)
    return np.clip(np.stack([r, g, b], -1), 0.0, 1.0)


def read_yuv420(path) -> np.ndarray | None:
    """The frames ``[F, H, W, 3]`` (float32 RGB in [0, 1]) of the video file ``path`` from
    its 8-bit 4:2:0 planes (see the module's docstring), or None for a stream that is not
    8-bit 4:2:0 with a known colour matrix, has odd dimensions or is rotated (the caller
    then reads ffmpeg's RGB). Raises what imageio-ffmpeg raises for an unreadable file."""
    import imageio_ffmpeg

    frames = imageio_ffmpeg.read_frames(str(path), pix_fmt="yuv420p", bits_per_pixel=12)
    try:
        meta = next(frames)
        fmt = stream_format(meta.get("pix_fmt", ""))
        w, h = meta["size"]
        if (fmt is None or w % 2 or h % 2 or meta.get("rotate", 0)
                or tuple(meta.get("source_size", (w, h))) != (w, h)):
            return None
        if fmt[0] != "yuv420p":  # read the planes as stored: no conversion of the range
            frames.close()
            frames = imageio_ffmpeg.read_frames(str(path), pix_fmt=fmt[0], bits_per_pixel=12)
            next(frames)
        n, c = w * h, (w // 2) * (h // 2)
        planes = [np.frombuffer(b, np.uint8) for b in frames]
    finally:
        frames.close()
    out = np.empty((len(planes), h, w, 3), dtype=np.float32)
    for k in range(0, len(planes), FRAMES_AT_ONCE):  # (float64 only a few frames at a time)
        chunk = planes[k:k + FRAMES_AT_ONCE]
        y = np.stack([p[:n].reshape(h, w) for p in chunk])
        cb = np.stack([p[n:n + c].reshape(h // 2, w // 2) for p in chunk])
        cr = np.stack([p[n + c:n + 2 * c].reshape(h // 2, w // 2) for p in chunk])
        out[k:k + len(chunk)] = to_rgb(y, cb, cr, fmt[1], fmt[2])
    return out

"""What a run leaves for a person: ``report.json``, plots and side-by-side videos.

Every file is written under a temporary name in the same folder and then renamed, so an
interrupted write never leaves a half-written file in place of a good one.
"""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from pathlib import Path

import numpy as np


@contextmanager
def atomic_path(path):
    """Yields a temporary path beside ``path`` (same suffix, so writers that pick the
    format from it still do); renamed to ``path`` when the block ends without error."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp{path.suffix}")
    try:
        yield tmp
        tmp.replace(path)
    finally:
        if tmp.exists():
            tmp.unlink()


def write_report(path, body: dict, settings: dict) -> Path:
    """``report.json``: ``body`` (what the job found) plus the runtime (arch, precision,
    threads), every setting and the seed."""
    from gradsim_taichi import runtime

    info = runtime.info()
    report = dict(body)
    report.update(arch=info.get("arch"), precision=info.get("precision"),
                  threads=info.get("threads"), settings=settings, seed=settings.get("seed"))
    text = json.dumps(report, indent=2)
    with atomic_path(path) as tmp:
        tmp.write_text(text)
    return Path(path)


def jsonable(x):
    """A number or a (nested) list of numbers for JSON."""
    arr = np.asarray(x, dtype=np.float64)
    return float(arr) if arr.ndim == 0 else arr.tolist()


def plot_history(path, history: list, reference: dict | None = None, title: str = "",
                 reference_label: str = "true", loss_label: str = "loss") -> Path:
    """The loss (log scale) and every other recorded quantity against iteration, one
    panel each, with ``reference[name]`` as a dashed line where given."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    reference = reference or {}
    names = [k for k in (history[0] if history else {}) if k not in ("iter", "loss")]
    fig, axes = plt.subplots(1, 1 + len(names), figsize=(4 * (1 + len(names)), 3.2),
                             squeeze=False)
    it = [h["iter"] for h in history]
    from matplotlib.ticker import MaxNLocator

    for ax in axes[0]:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # iterations are whole
    ax = axes[0, 0]
    ax.semilogy(it, [max(h["loss"], 1e-30) for h in history], color="tab:blue")
    ax.set_xlabel("iteration")
    ax.set_title(f"{title} {loss_label}".strip())
    for k, name in enumerate(names):
        ax = axes[0, k + 1]
        ax.plot(it, [h[name] for h in history], color="tab:orange", label="per iteration")
        if name in reference:
            ax.axhline(float(np.mean(reference[name])), color="k", ls="--", lw=1,
                       label=reference_label)
        ax.set_xlabel("iteration")
        ax.set_title(name)
        ax.legend(fontsize=7)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=100)
    plt.close(fig)
    return Path(path)


def side_by_side(*panels, labels=None) -> np.ndarray:
    """RGB videos ``[F, H, W, 3+]`` (or single images, repeated) next to each other with a
    white separator, clipped to [0, 1]: ``[F, H', W', 3]``; with ``labels`` (one per
    panel) a header row names each panel."""
    arrays = [np.asarray(_numpy(p))[..., :3] for p in panels]
    frames = max(a.shape[0] for a in arrays if a.ndim == 4)
    arrays = [a if a.ndim == 4 else np.broadcast_to(a, (frames,) + a.shape) for a in arrays]
    sep = np.ones(arrays[0].shape[:2] + (2, 3))
    out = [arrays[0]]
    for a in arrays[1:]:
        out += [sep, a]
    video = np.clip(np.concatenate(out, axis=2), 0.0, 1.0)
    if labels is None:
        return video
    header = _label_row([a.shape[2] for a in arrays], labels, sep.shape[2])
    return np.concatenate([np.broadcast_to(header, (frames,) + header.shape), video], axis=1)


def _label_row(widths, labels, gap: int) -> np.ndarray:
    """A white strip ``[h, sum(widths) + gaps, 3]`` with each label over its panel."""
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.load_default()
    height = 12
    img = Image.new("RGB", (sum(widths) + gap * (len(widths) - 1), height), "white")
    draw = ImageDraw.Draw(img)
    x = 0
    for w, text in zip(widths, labels):
        while len(text) > 1 and draw.textlength(text, font=font) > w - 3:
            text = text[:-1]  # narrow panels: cut the label rather than overlap the next
        draw.text((x + 2, 0), text, fill=(0, 0, 0), font=font)
        x += w + gap
    return np.asarray(img, dtype=np.float64) / 255.0


def save_image(path, image) -> Path:
    """An RGB image ``[H, W, 3]`` in [0, 1] as a PNG."""
    import imageio.v3 as iio

    img = (np.clip(_numpy(image)[..., :3], 0.0, 1.0) * 255 + 0.5).astype(np.uint8)
    with atomic_path(path) as tmp:
        iio.imwrite(tmp, img)
    return Path(path)


def save_videos(out_dir, stem: str, frames, fps: float = 30) -> list[Path]:
    """``STEM.mp4`` and ``STEM.gif`` in ``out_dir``."""
    from gradsim_taichi.render.video import save_video

    paths = []
    for ext in ("mp4", "gif"):
        path = Path(out_dir) / f"{stem}.{ext}"
        with atomic_path(path) as tmp:
            save_video(frames, tmp, fps=fps)
        paths.append(path)
    return paths


def compare_frames(target, estimate, initial=None) -> np.ndarray:
    """Side by side, labelled: target | estimate | absolute difference (4x gain, so small
    differences show) | the initial guess (when given), RGB ``[F, H + 12, W', 3]``."""
    t, e = _numpy(target)[..., :3], _numpy(estimate)[..., :3]
    panels = [t, e, np.clip(4.0 * np.abs(t - e), 0.0, 1.0)]
    labels = ["target", "estimate", "diff x4"]
    if initial is not None:
        panels.append(_numpy(initial)[..., :3])
        labels.append("initial")
    return side_by_side(*panels, labels=labels)


def save_compare_videos(out_dir, target, estimate, fps: float = 30,
                        initial=None) -> list[Path]:
    """``compare.mp4`` and ``compare.gif``: target | estimate | difference | initial."""
    return save_videos(out_dir, "compare", compare_frames(target, estimate, initial), fps)


def save_particles_gif(path, positions, springs=None, fps=30) -> Path:
    """A side-view GIF (x right, y up) of a particle trajectory ``[F, N, 3]``: particles
    as dots, springs as lines, the ground as a grey line."""
    import imageio.v2 as imageio

    frames = draw_particles(np.asarray(positions), springs)
    with atomic_path(path) as tmp:
        imageio.mimsave(tmp, list(frames), duration=1000.0 / fps, loop=0)
    return Path(path)


def draw_particles(positions: np.ndarray, springs=None, size_px: int = 320) -> np.ndarray:
    """Side views of ``positions [F, N, 3]`` as RGB uint8 images ``[F, S, S, 3]``, drawn
    with numpy (a matplotlib figure per frame took 49 of 53 s of ``simulate``)."""
    lo = positions.reshape(-1, 3).min(axis=0)
    hi = positions.reshape(-1, 3).max(axis=0)
    y0 = min(lo[1], 0.0)
    span = max(hi[0] - lo[0], hi[1] - y0, 1e-3) * 1.2  # 10% margin each side
    cx, cy = (lo[0] + hi[0]) / 2, (y0 + hi[1]) / 2

    def pixels(x, y):  # world -> integer pixel (column, row), row 0 at the top
        col = ((x - cx) / span + 0.5) * (size_px - 1)
        row = (0.5 - (y - cy) / span) * (size_px - 1)
        return np.rint(col).astype(int), np.rint(row).astype(int)

    out = np.full((len(positions), size_px, size_px, 3), 255, dtype=np.uint8)
    _, ground = pixels(0.0, 0.0)
    if 0 <= ground < size_px:
        out[:, ground] = 150
    samples = np.linspace(0.0, 1.0, size_px // 4)[:, None]
    for f, x in enumerate(positions):
        if springs is not None and len(springs):
            a, b = x[springs[:, 0]], x[springs[:, 1]]  # points along every spring
            col, row = pixels(a[:, 0] + samples * (b[:, 0] - a[:, 0]),
                              a[:, 1] + samples * (b[:, 1] - a[:, 1]))
            _stamp(out[f], col, row, (120, 160, 220), 0)
        col, row = pixels(x[:, 0], x[:, 1])
        _stamp(out[f], col, row, (210, 50, 40), 2)
    return out


def _stamp(img, col, row, color, radius: int) -> None:
    """Square dots of ``2 radius + 1`` pixels at (col, row), clipped to the image."""
    h, w, _ = img.shape
    for dr in range(-radius, radius + 1):
        for dc in range(-radius, radius + 1):
            r, c = (row + dr).ravel(), (col + dc).ravel()
            keep = (r >= 0) & (r < h) & (c >= 0) & (c < w)
            img[r[keep], c[keep]] = color


def _numpy(x) -> np.ndarray:
    if hasattr(x, "detach"):
        return x.detach().cpu().numpy()
    return np.asarray(x)

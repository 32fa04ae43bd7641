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
    """A side-view GIF (x right, y up) of a particle trajectory ``[F, N, 3]``."""
    import imageio.v2 as imageio

    with atomic_path(path) as tmp:
        imageio.mimsave(tmp, _draw_particles(positions, springs), duration=1.0 / fps, loop=0)
    return Path(path)


def _draw_particles(positions: np.ndarray, springs=None, size_px: int = 320) -> list:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lo = positions.reshape(-1, 3).min(axis=0)
    hi = positions.reshape(-1, 3).max(axis=0)
    pad = 0.1 * max(hi[0] - lo[0], hi[1] - lo[1], 1e-3)
    fig, ax = plt.subplots(figsize=(size_px / 80, size_px / 80), dpi=80)
    frames = []
    for f, x in enumerate(positions):
        ax.clear()
        ax.axhline(0.0, color="0.4", lw=1)
        if springs is not None and len(springs):
            seg = x[springs][:, :, :2]
            for a, b in seg[:: max(1, len(seg) // 400)]:
                ax.plot([a[0], b[0]], [a[1], b[1]], color="tab:blue", lw=0.5, alpha=0.5)
        ax.scatter(x[:, 0], x[:, 1], s=6, color="tab:red")
        ax.set_xlim(lo[0] - pad, hi[0] + pad)
        ax.set_ylim(min(lo[1], 0.0) - pad, hi[1] + pad)
        ax.set_aspect("equal")
        ax.set_title(f"frame {f}", fontsize=8)
        fig.canvas.draw()
        frames.append(np.asarray(fig.canvas.buffer_rgba())[..., :3].copy())
    plt.close(fig)
    return frames


def _numpy(x) -> np.ndarray:
    if hasattr(x, "detach"):
        return x.detach().cpu().numpy()
    return np.asarray(x)

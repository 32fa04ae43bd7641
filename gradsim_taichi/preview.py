"""Quick looks at particle trajectories: a matplotlib drawing per frame -> GIF/MP4."""

from pathlib import Path

import imageio.v2 as imageio
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def draw_particles(positions: np.ndarray, springs: np.ndarray | None = None,
                   size_px: int = 320) -> list[np.ndarray]:
    """Side views (x right, y up) of ``positions [F, N, 3]`` as RGB uint8 images."""
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


def save_particles_gif(path, positions, springs=None, fps=30) -> Path:
    """Write a side-view GIF of a particle trajectory."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    imageio.mimsave(path, draw_particles(positions, springs), duration=1.0 / fps, loop=0)
    return path

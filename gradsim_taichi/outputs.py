"""Plots and videos an estimation run leaves for a person to look at."""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

from gradsim_taichi.render.video import save_video  # noqa: E402


def plot_history(path, history: list, true: dict | None = None, title: str = "") -> Path:
    """``loss.png``: the loss (log scale) and each parameter against iteration, with the
    true value as a dashed line where known."""
    true = true or {}
    names = [k for k in (history[0] if history else {}) if k not in ("iter", "loss")]
    fig, axes = plt.subplots(1, 1 + len(names), figsize=(4 * (1 + len(names)), 3.2),
                             squeeze=False)
    it = [h["iter"] for h in history]
    ax = axes[0, 0]
    ax.semilogy(it, [max(h["loss"], 1e-30) for h in history], color="tab:blue")
    ax.set_xlabel("iteration")
    ax.set_ylabel("loss")
    ax.set_title(title or "loss")
    for k, name in enumerate(names):
        ax = axes[0, k + 1]
        ax.plot(it, [h[name] for h in history], color="tab:orange", label="estimate")
        if name in true:
            ax.axhline(float(np.mean(true[name])), color="k", ls="--", lw=1, label="true")
        ax.set_xlabel("iteration")
        ax.set_title(name)
        ax.legend(fontsize=7)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def compare_frames(target: torch.Tensor, estimate: torch.Tensor) -> np.ndarray:
    """Side by side: target | estimate | absolute difference, RGB ``[F, H, 3 W, 3]``."""
    t = target.detach().cpu().numpy()[..., :3]
    e = estimate.detach().cpu().numpy()[..., :3]
    diff = np.clip(4.0 * np.abs(t - e), 0.0, 1.0)  # 4x gain: small differences show
    sep = np.ones(t.shape[:2] + (2, 3))
    return np.clip(np.concatenate([t, sep, e, sep, diff], axis=2), 0.0, 1.0)


def save_compare_videos(out_dir, target, estimate, fps: float = 30) -> list[Path]:
    """``compare.mp4`` and ``compare.gif`` in ``out_dir``."""
    frames = compare_frames(target, estimate)
    out_dir = Path(out_dir)
    return [save_video(frames, out_dir / "compare.mp4", fps=fps),
            save_video(frames, out_dir / "compare.gif", fps=fps)]

"""The loss along one or two parameters: the paper's loss-landscape figure.

``loss_landscape(scene, target, {"mass": (0.5, 10.0)}, points=40)`` evaluates the
estimation loss (the pixel MSE of the blurred videos, every frame) on a grid of values,
every other parameter held at ``base`` (default: the scene's truth). One parameter gives
a curve, two a heat map; :func:`write_landscape` saves ``landscape.csv`` and
``landscape.png``. Vector parameters take a scalar value (broadcast to every element).
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from gradsim_taichi import runtime
from gradsim_taichi.objectives import blur_frames, check_target, mse
from gradsim_taichi.reports import atomic_path


def loss_landscape(scene, target, ranges: dict, points: int = 40, base: dict | None = None,
                   blur: float | None = None, progress: bool = True) -> dict:
    """The loss on a grid.

    Args:
        scene: a preset; target: its target video ``[F + 1, H, W, 3|4]``.
        ranges: ``{name: (low, high)}`` for one or two of the scene's parameters, in their
            physical units (a positive parameter's grid is log-spaced when ``high / low``
            exceeds 10, else even).
        points: grid points per parameter (>= 2).
        base: ``{name: value}`` of the parameters not swept (default: the truth).
        blur: Gaussian blur of both videos in pixels (default: the scene's).

    Returns:
        ``{"names", "axes": [values per swept name], "loss": array (points,) or
        (points, points) indexed [first, second], "base"}``; a value where the model blew
        up gets ``inf``.
    """
    names = scene.check_params(ranges)
    if not 1 <= len(names) <= 2:
        raise ValueError(f"sweep one or two parameters; got {len(names)}: {names}")
    if isinstance(points, bool) or int(points) != points or points < 2:
        raise ValueError(f"points must be an integer >= 2; got {points!r}")
    axes = [_axis(scene.params[n], n, *ranges[n], int(points)) for n in names]
    scene.ensure_built()
    target = check_target(scene, target, "video")
    blur = scene.blur if blur is None else blur
    compared = blur_frames(target, blur)
    # every parameter set: the Simulation keeps the values of its last rollout
    base = {n: spec.true for n, spec in scene.params.items()} | dict(base or {})
    base = {n: v for n, v in base.items() if n not in names}
    dtype = runtime.torch_dtype()
    grid = list(itertools.product(*[range(len(a)) for a in axes]))
    loss = np.full([len(a) for a in axes], np.inf)
    with torch.no_grad():
        for index in tqdm(grid, desc=f"landscape {scene.name}", disable=not progress):
            values = {n: torch.as_tensor(np.asarray(v, dtype=np.float64), dtype=dtype)
                      for n, v in base.items()}
            for n, a, i in zip(names, axes, index):
                values[n] = torch.as_tensor(a[i], dtype=dtype)
            out = scene.simulate(values)
            if not all(bool(torch.isfinite(x).all()) for x in out.values()):
                continue  # the explicit integrator blew up here: inf
            pred = scene.render(out)[..., : target.shape[-1]]
            loss[index] = float(mse(blur_frames(pred, blur), compared))
    return {"names": names, "axes": [a.tolist() for a in axes], "loss": loss,
            "base": {n: np.asarray(v).tolist() for n, v in base.items()}}


def _axis(spec, name, low, high, points) -> np.ndarray:
    if not (np.isfinite(low) and np.isfinite(high) and low < high):
        raise ValueError(f"range of {name!r} must be finite with low < high; got {low}:{high}")
    if spec.positive and low <= 0:
        raise ValueError(f"{name!r} is positive: its range must start above 0; got {low}")
    if spec.positive and high / low > 10:
        return np.geomspace(low, high, points)
    return np.linspace(low, high, points)


def write_landscape(out_dir, landscape: dict, truth: dict | None = None,
                    title: str = "") -> dict:
    """``landscape.csv`` (one row per grid point: the swept values, the loss) and
    ``landscape.png`` (a curve, or a heat map of log10 loss), with the truth marked where
    given. Returns ``{kind: path}``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir = Path(out_dir)
    names, axes, loss = landscape["names"], landscape["axes"], np.asarray(landscape["loss"])
    rows = [",".join([*names, "loss"])]
    for index in itertools.product(*[range(len(a)) for a in axes]):
        rows.append(",".join([*(repr(axes[k][i]) for k, i in enumerate(index)),
                              repr(float(loss[index]))]))
    csv = out_dir / "landscape.csv"
    with atomic_path(csv) as tmp:
        tmp.write_text("\n".join(rows) + "\n")
    truth = truth or {}
    fig, ax = plt.subplots(figsize=(5, 3.6))
    floor = max(loss[np.isfinite(loss) & (loss > 0)].min(initial=1e-30), 1e-30)
    if len(names) == 1:
        ax.semilogy(axes[0], np.maximum(loss, floor), color="tab:blue", marker=".")
        ax.set_xlabel(names[0])
        ax.set_ylabel("loss")
        if names[0] in truth:
            ax.axvline(float(np.mean(truth[names[0]])), color="k", ls="--", lw=1,
                       label="true")
            ax.legend(fontsize=7)
    else:
        shown = np.log10(np.maximum(np.where(np.isfinite(loss), loss, np.nan), floor))
        mesh = ax.pcolormesh(axes[0], axes[1], shown.T, shading="nearest", cmap="viridis")
        fig.colorbar(mesh, ax=ax, label="log10 loss")
        ax.set_xlabel(names[0])
        ax.set_ylabel(names[1])
        if all(n in truth for n in names):
            ax.plot(*(float(np.mean(truth[n])) for n in names), "r+", ms=12, label="true")
            ax.legend(fontsize=7)
    for k, a in enumerate(axes[: len(names)]):
        if a[-1] / a[0] > 10 and a[0] > 0:
            (ax.set_xscale if k == 0 else ax.set_yscale)("log")
    ax.set_title(title or "loss landscape")
    fig.tight_layout()
    png = out_dir / "landscape.png"
    with atomic_path(png) as tmp:
        fig.savefig(tmp, dpi=100)
    plt.close(fig)
    return {"csv": csv, "plot": png}

"""Live estimation viewer: target frame | current estimate | difference, and the loss curve.

Runs ``gradsim_taichi.estimation.estimate`` on a scene preset (the target video is
rendered from the preset's ground truth) and redraws the window from the estimator's
callback after every iteration. When the run is over, the window plays the target and
the final estimate side by side until it is closed.

    python demos/estimation_viewer.py                      # window, scene rigid-mass
    python demos/estimation_viewer.py --scene fem-ball
    python demos/estimation_viewer.py --headless           # one PNG per iteration + GIF

Here ``--frames`` is the number of estimation iterations (default: the scene's).
Keys: ESC = stop the run (or quit once it is over).
"""

from __future__ import annotations

import numpy as np
from _common import TEXT, Recorder, key_presses, make_gui, parse_args, start_engine

PANEL = 192  # [px] of each image panel
GAP = 16
RES = (3 * PANEL + 4 * GAP, 500)
PANEL_Y = RES[1] - PANEL - 40  # bottom edge of the panels [px]
PLOT = (GAP / RES[0], 16 / RES[1], 1.0 - GAP / RES[0], (PANEL_Y - 72) / RES[1])  # loss box


class _Stop(Exception):
    """Raised from the callback to end the run early."""


def add_options(p) -> None:
    from gradsim_taichi.optimisers import KINDS
    from gradsim_taichi.scenes import SCENES

    p.add_argument("--scene", default="rigid-mass", choices=sorted(SCENES))
    p.add_argument("--scene-frames", type=int, default=None,
                   help="simulated frames (default: the scene's)")
    p.add_argument("--size", type=int, default=None,
                   help="rendered width = height in pixels (default: the scene's)")
    p.add_argument("--optimizer", choices=KINDS, default=None)
    p.add_argument("--lr", type=float, default=None)
    p.add_argument("--seed", type=int, default=0, help="draws the initial guess")
    p.add_argument("--init", action="append", default=[], metavar="NAME=VALUE",
                   help="initial guess of a parameter (e.g. mass=9); repeatable")
    p.add_argument("--show-frame", type=int, default=-1,
                   help="video frame shown while the estimation runs (default: the last)")


def to_canvas(frame: np.ndarray) -> np.ndarray:
    """An RGB(A) image [H, W, C] (row 0 at the top) -> a PANEL x PANEL canvas block [x, y, 3]
    (ti.GUI's layout: x to the right, y up), nearest-neighbour scaled."""
    img = np.clip(np.asarray(frame, dtype=np.float64)[..., :3], 0.0, 1.0)
    rows = np.linspace(0, img.shape[0] - 1, PANEL).round().astype(int)
    cols = np.linspace(0, img.shape[1] - 1, PANEL).round().astype(int)
    return img[rows][:, cols][::-1].transpose(1, 0, 2)


def draw(gui, target, estimate, history: list, lines: list) -> None:
    """Three panels (target | estimate | 4x difference), the loss curve and text."""
    canvas = np.full(RES + (3,), 0.95, dtype=np.float32)
    diff = None if estimate is None else np.clip(4 * np.abs(target[..., :3] - estimate[..., :3]),
                                                 0, 1)
    y0 = PANEL_Y
    for k, img in enumerate((target, estimate, diff)):
        x0 = GAP + k * (PANEL + GAP)
        block = to_canvas(img) if img is not None else np.full((PANEL, PANEL, 3), 0.8)
        canvas[x0: x0 + PANEL, y0: y0 + PANEL] = block
    gui.set_image(canvas)
    for k, label in enumerate(("target", "estimate", "difference x4")):
        gui.text(label, ((GAP + k * (PANEL + GAP)) / RES[0], (y0 + PANEL + 22) / RES[1]),
                 font_size=16, color=TEXT)
    for k, line in enumerate(lines):
        gui.text(line, (GAP / RES[0], (y0 - 6 - 18 * k) / RES[1]), font_size=15, color=TEXT)
    draw_loss(gui, [h["loss"] for h in history])


def draw_loss(gui, losses: list) -> None:
    """The loss (log10 scale) against iteration in the box PLOT."""
    x0, y0, x1, y1 = PLOT
    box = np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]])
    gui.lines(box, np.roll(box, -1, axis=0), radius=1, color=0x888890)
    gui.text("log10 loss", (x0 + 0.01, y1 - 0.005), font_size=14, color=TEXT)
    if not losses:
        return
    y = np.log10(np.maximum(np.asarray(losses, dtype=np.float64), 1e-30))
    lo, hi = y.min(), y.max()
    hi = hi if hi > lo else lo + 1.0
    n = len(y)
    px = x0 + 0.08 + (x1 - x0 - 0.1) * (np.arange(n) / max(n - 1, 1))
    py = y0 + 0.02 + (y1 - y0 - 0.06) * (y - lo) / (hi - lo)
    pts = np.stack([px, py], axis=1)
    if n > 1:
        gui.lines(pts[:-1], pts[1:], radius=2, color=0x2060C0)
    gui.circles(pts, radius=3, color=0x2060C0)
    gui.text(f"{hi:.1f}", (x0 + 0.01, y1 - 0.04), font_size=13, color=TEXT)
    gui.text(f"{lo:.1f}", (x0 + 0.01, y0 + 0.035), font_size=13, color=TEXT)


def describe(values: dict, true: dict) -> str:
    parts = []
    for name, v in values.items():
        v = float(np.mean(np.asarray(v)))
        t = true.get(name)
        parts.append(f"{name} {v:.4g}" + ("" if t is None else f" (true {float(np.mean(t)):.4g})"))
    return "   ".join(parts)


def main(argv=None) -> int:
    """Run the viewer (see the module docstring); returns 0."""
    args = parse_args("estimation_viewer", __doc__.splitlines()[0], argv,
                      frames_help="iterations", extra=add_options, headless_frames=None)
    import taichi as ti

    start_engine("f64")
    from gradsim_taichi.estimation import estimate, render_target
    from gradsim_taichi.scenes import make_scene

    overrides = {}
    if args.scene_frames is not None:
        overrides["frames"] = args.scene_frames
    if args.size is not None:
        overrides["width"] = overrides["height"] = args.size
    scene = make_scene(args.scene, **overrides)
    iters = args.frames or scene.iters
    names = list(scene.default_params)
    init = {}
    for item in args.init:
        name, _, value = item.partition("=")
        if name not in names or not value:
            raise SystemExit(f"--init {item!r}: expected NAME=VALUE with NAME in {names}")
        init[name] = float(value)
    scene.ensure_built()
    target = render_target(scene).detach().cpu().numpy()
    true = {n: np.asarray(scene.params[n].true) for n in names}
    show = args.show_frame % len(target)
    gui = make_gui(f"gradsim-taichi: estimating {scene.name}", RES, args.headless)
    rec = Recorder(gui, args, "estimation_viewer")
    history: list = []
    head = f"{scene.name}: {', '.join(names)}   frame {show}/{len(target) - 1}"
    draw(gui, target[show], None, history, [head, "starting (first iteration compiles)..."])
    rec.show()

    def callback(it, loss, values, rendered):
        history.append({"iter": it, "loss": loss})
        # during warm-up the estimation renders only the frames of its current horizon
        frame = show if rendered is None else min(show, len(rendered) - 1)
        est = rendered.detach().cpu().numpy()[frame] if rendered is not None else None
        head = f"{scene.name}: {', '.join(names)}   frame {frame}/{len(target) - 1}"
        if frame < show:
            head += " (warm-up horizon)"
        lines = [head, f"iteration {it + 1}/{iters}   loss {loss:.3e}",
                 "evaluated at: " + describe({n: v.cpu().numpy() for n, v in values.items()},
                                               true)]
        print(lines[1] + "   " + lines[2])
        draw(gui, target[frame], est, history, lines)
        rec.show()
        for key in key_presses(gui):
            if key == ti.GUI.ESCAPE:
                raise _Stop
        if not gui.running:
            raise _Stop

    status = "done"
    try:
        result = estimate(scene, target, params=names, iters=iters, lr=args.lr,
                          optimizer=args.optimizer, seed=args.seed, init=init, callback=callback,
                          progress=False)
        final = dict(result.params)
    except _Stop:
        status, final = "stopped", None
    if not args.headless and gui.running:
        replay(gui, scene, target, final, history, head, status)
    rec.finish()
    return 0


def replay(gui, scene, target, final, history, head, status) -> None:
    """After the run: play target and final estimate frame by frame until closed."""
    import taichi as ti
    import torch

    from gradsim_taichi import runtime

    video = None
    if final is not None:
        with torch.no_grad():
            values = {n: torch.as_tensor(v, dtype=runtime.torch_dtype()) for n, v in final.items()}
            video = scene.render(scene.simulate(values)).cpu().numpy()
    k = 0
    while gui.running:
        if ti.GUI.ESCAPE in key_presses(gui):
            break
        f = k % len(target)
        draw(gui, target[f], None if video is None else video[f], history,
             [head.split("   ")[0] + f"   frame {f}/{len(target) - 1}",
              f"{status}: playing target and final estimate (ESC: quit)"])
        gui.show()
        k += 1


if __name__ == "__main__":
    raise SystemExit(main())

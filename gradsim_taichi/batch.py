"""Many estimations at once: a manifest of items, run in this process or on Ray.

``gradsim-taichi estimate-batch MANIFEST --out DIR`` (``cli/estimate_batch.py``) reads a
manifest (:func:`read_manifest`), runs every item as the ``estimate`` command would
(:func:`run_item`, into ``DIR/items/ID/``) and writes ``summary.csv``, ``summary.json``
and ``summary.png`` in ``DIR`` (:func:`write_summary`).

The manifest (JSON Lines or CSV) and its keys: :mod:`gradsim_taichi.batch_manifest`.

Failures are isolated: an item whose scene (or scene file: missing, or a value the
schema refuses; the message names the file and the key), shape, video or options are
bad, or whose
run stops on a NaN or diverges, is marked failed with its message and the others go on.
Structural errors of the manifest itself (a line that is not JSON, a missing or
duplicate id, an unknown key, a value of the wrong type) stop before anything runs
(:class:`ManifestError`, naming every bad line).

On Ray each worker is a long-lived actor that initialises Taichi once and reuses the
compiled kernels for every item it runs; a worker lost mid-item (killed, or its node
gone) is replaced and the item retried from its own resume state, up to ``retries``
times, then marked failed.
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections import deque
from dataclasses import asdict
from pathlib import Path

import numpy as np

from gradsim_taichi import runtime
from gradsim_taichi.batch_manifest import (  # noqa: F401 (re-exported)
    KEYS,
    Item,
    ManifestError,
    parse_item,
    read_manifest,
)
from gradsim_taichi.reports import atomic_path

__all__ = ["Item", "ManifestError", "RayMissingError", "read_manifest", "parse_item",
           "run_item", "run_batch", "write_summary", "KEYS", "Worker"]

ITEMS_DIR = "items"
ERROR_FILE = "error.json"
REPORT_FILE = "report.json"
STATE_FILE = "state.pt"
INSTALL_RAY = ("Ray is not installed: pip install 'gradsim-taichi[cluster]' (or "
               "pip install 'ray>=2.9'); or run the items one after another in this "
               "process with --workers 1")


class RayMissingError(ImportError):
    """Ray is needed (more than one worker, or a cluster) and not installed."""


# ---- one item ----------------------------------------------------------------------------

def item_dir(out, item_id: str) -> Path:
    return Path(out) / ITEMS_DIR / item_id


def run_item(item: Item, out, resume: bool = False, attempt: int = 1) -> dict:
    """Estimate one item into ``out/items/ID/`` as the ``estimate`` command does
    (report.json, loss.png, compare.mp4/gif, state.pt), after ``gradsim_taichi.init``.
    Never raises for a bad item: returns its summary row (:func:`row_from_report`) with
    status ``"failed"`` and the message (also in ``error.json`` there) instead. Without
    ``resume`` any earlier resume state of the item is dropped first."""
    from gradsim_taichi.estimation_outputs import (
        chroma_for,
        estimate_into,
        fit_for,
        iters_for,
        load_target,
        loss_for,
        render_for,
        restarts_for,
    )
    from gradsim_taichi.run_loop import locked
    from gradsim_taichi.scenes import make_preset

    folder = item_dir(out, item.id)
    folder.mkdir(parents=True, exist_ok=True)
    runtime.renew_if_full()  # a long-lived worker: Taichi's field trees are never freed
    try:
        with locked(folder):
            for name in (ERROR_FILE, REPORT_FILE) + (() if resume else (STATE_FILE,)):
                (folder / name).unlink(missing_ok=True)
            if item.scene_file is not None:
                scene = _file_scene(item)
            else:
                scene = make_preset(item.scene, frames=item.frames,
                                    resolution=item.resolution,
                                    **({"shape": item.shape} if item.shape else {}))
            names = scene.check_params(item.params or scene.default_params)
            target, truth = None, item.truth
            if item.target is not None:
                scene.check_params(item.truth)
                target = load_target(item.target, scene)
                if item.scene_file is not None:  # the file's true values, to report
                    truth = {**{n: float(scene.params[n].true) for n in names
                                if scene.truth_given[n]}, **truth}
            else:
                if item.truth:
                    scene.set_truth(item.truth)
                if item.scene_file is not None:
                    _check_truth(item, scene, names)
            settings = dict(scene=item.scene, target=item.target, true=truth,
                            frames=scene.frames, substeps=scene.substeps, fps=scene.fps,
                            width=scene.width, height=scene.height, id=item.id,
                            shape=item.shape, attempt=attempt)
            if item.scene_file is not None:
                settings["scene_file"] = item.scene_file
            runtime.seed_generators(item.seed)  # as `estimate --seed` does through init
            scene.ensure_built()
            own = target is not None
            fit = fit_for(own, item.fit, scene, masked=False)
            estimate_into(folder, scene, target, settings, params=names,
                          iters=iters_for(own, scene.iters, item.iters, fit),
                          lr=item.lr, optimizer=item.optimizer,
                          frame_stride=item.frame_stride, blur=item.blur, seed=item.seed,
                          chroma=chroma_for(item.target), resume=resume, progress=False,
                          render=render_for(target is not None, item.render),
                          loss=loss_for(own, item.loss, masked=False), fit=fit or None,
                          stage_contact=item.stage_contact, hold_flight=item.hold_flight,
                          restarts=restarts_for(target is not None, item.restarts),
                          true=truth if item.target is not None else None)
    except Exception as e:  # isolated: the item fails, the batch goes on
        return failed_row(out, item, error_message(e), attempt)
    row = row_from_report(item, folder / REPORT_FILE)
    row["attempts"] = attempt
    return row


def _file_scene(item: Item):
    """The scene of an item whose ``scene`` is a scene file, with its size overrides and
    shape; the builder's checks run (numpy only) so that a bad body fails here."""
    from gradsim_taichi.scenes.registry import size_overrides
    from gradsim_taichi.scenes.scene_file import load_scene_file

    scene = load_scene_file(item.scene_file, shape=item.shape,
                            **size_overrides(item.frames, item.resolution))
    if not scene.params:
        raise ValueError(f"scene file {item.scene_file}: no unknowns to estimate")
    scene.build_model()
    return scene


def _check_truth(item: Item, scene, names) -> None:
    """Without a target video every estimated unknown of a scene file needs a truth."""
    missing = [n for n in names if not scene.truth_given[n]]
    if missing:
        raise ValueError(f"scene file {item.scene_file}: no target video, and neither the "
                         f"file nor the item's truth gives a true value for "
                         f"{', '.join(missing)} to render one from")


def error_message(e: BaseException) -> str:
    """One line for an item's failure (the first of a longer message)."""
    if isinstance(e, KeyError) and e.args:
        text = str(e.args[0])
    elif isinstance(e, (ValueError, FileNotFoundError)) and str(e):
        text = str(e)
    else:
        text = f"{type(e).__name__}: {e}"
    return text.strip().splitlines()[0] if text.strip() else type(e).__name__


def failed_row(out, item: Item, message: str, attempts: int = 1) -> dict:
    """The row of an item that failed before it had a report; also ``error.json``."""
    row = dict(id=item.id, scene=item.scene, shape=item.shape, status="failed",
               message=message, iterations=0, seconds=0.0, attempts=attempts, params={})
    _write_json(item_dir(out, item.id) / ERROR_FILE, {**row, "item": asdict(item)})
    return row


def row_from_report(item: Item, path) -> dict:
    """An item's summary row from its ``report.json``: status ``"done"`` only if the run
    finished (a run stopped by NaN/inf or divergence is ``"failed"``, its message kept),
    per parameter estimate / true / abs_err / rel_err."""
    report = json.loads(Path(path).read_text())
    params = {n: {k: p[k] for k in ("estimate", "true", "abs_err", "rel_err") if k in p}
              for n, p in report["params"].items()}
    return dict(id=item.id, scene=item.scene, shape=item.shape,
                status="done" if report["status"] == "done" else "failed",
                message=report["message"], iterations=report["iterations"],
                seconds=report["seconds"], attempts=1, params=params)


def finished(out, item: Item) -> bool:
    """True when the item's ``report.json`` says done (``--resume`` skips it)."""
    path = item_dir(out, item.id) / REPORT_FILE
    try:
        return json.loads(path.read_text()).get("status") == "done"
    except (OSError, ValueError, AttributeError):
        return False


# ---- the batch ---------------------------------------------------------------------------

def run_batch(items, out, workers: int | None = 1, address: str | None = None,
              resume: bool = False, retries: int = 2, settings: dict | None = None,
              backend: str = "auto", progress: bool = True, plot: bool = True) -> dict:
    """Run every item of ``items`` (:class:`Item`) into ``out`` and write the summary.

    Args:
        workers: items run at once (default None: one per core here, or every CPU of
            the cluster at ``address``).
        address: a running Ray cluster (``ray start --head``); None: Ray on this machine.
        resume: skip the items whose report says done; resume the others from their
            own state.
        retries: times an item is retried after its worker was lost.
        settings: ``gradsim_taichi.init`` keyword arguments for every worker (arch,
            precision, threads; Ray workers default to ``threads=1``).
        backend: ``"process"`` (in this process, one item after another), ``"ray"`` or
            ``"auto"`` (Ray for more than one worker or with ``address``).
    Returns the summary (see :func:`write_summary`).
    """
    from tqdm import tqdm

    from gradsim_taichi.run_loop import locked

    if backend not in ("auto", "process", "ray"):
        raise ValueError(f"backend must be 'auto', 'process' or 'ray'; got {backend!r}")
    if workers is not None and (isinstance(workers, bool) or int(workers) != workers
                                or workers < 1):
        raise ValueError(f"workers must be a positive integer; got {workers!r}")
    if isinstance(retries, bool) or int(retries) != retries or retries < 0:
        raise ValueError(f"retries must be an integer >= 0; got {retries!r}")
    use_ray = backend == "ray" or (backend == "auto" and (address is not None
                                                          or (workers or 2) > 1))
    if use_ray:
        import_ray()
    items = list(items)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    with locked(out):
        rows = {}
        if resume:
            rows = {i.id: row_from_report(i, item_dir(out, i.id) / REPORT_FILE)
                    for i in items if finished(out, i)}
        todo = [i for i in items if i.id not in rows]
        bar = tqdm(total=len(items), initial=len(rows), disable=not progress,
                   desc="estimate-batch", unit="item")
        running = set()

        def event(kind, value):
            if kind == "start":
                running.add(value.id)
            else:
                running.discard(value["id"])
                rows[value["id"]] = value
                bar.update(1)
                write_summary(out, [rows[i.id] for i in items if i.id in rows], plot=False)
            failed = sum(r["status"] == "failed" for r in rows.values())
            bar.set_postfix(done=len(rows) - failed, failed=failed, running=len(running))

        try:
            if use_ray and todo:
                _run_ray(todo, out, resume, retries, settings or {}, workers, address, event)
            else:
                if settings is not None:
                    runtime.init(**settings)
                for item in todo:
                    event("start", item)
                    event("done", run_item(item, out, resume))
        finally:
            bar.close()
        return write_summary(out, [rows[i.id] for i in items], plot=plot)


def import_ray():
    """The ``ray`` module, or :class:`RayMissingError` saying how to install it."""
    try:
        import ray
    except ImportError:
        raise RayMissingError(INSTALL_RAY) from None
    return ray


class Worker:
    """A Ray actor: initialises Taichi once, then runs items with the compiled kernels."""

    def __init__(self, settings: dict):
        runtime.init(**settings)

    def run(self, item: Item, out: str, resume: bool, attempt: int) -> dict:
        return run_item(item, out, resume, attempt)

    def pid(self) -> int:
        return os.getpid()


def _run_ray(todo, out, resume, retries, settings, workers, address, event) -> None:
    """Run ``todo`` on Ray actors, one item per actor at a time; a lost actor is
    replaced and its item retried (resumed) up to ``retries`` times."""
    ray = import_ray()
    env = {k: v for k, v in os.environ.items()
           if k.startswith(("TI_", "GRADSIM_", "OMP_")) or k == "ENABLE_TAICHI_HEADER_PRINT"}
    started = not ray.is_initialized()
    if started and address is not None:
        ray.init(address=address, runtime_env={"env_vars": env}, log_to_driver=False)
    elif started:
        ray.init(num_cpus=workers or os.cpu_count() or 1, include_dashboard=False,
                 log_to_driver=False, runtime_env={"env_vars": env},
                 object_store_memory=100 * 1024 ** 2)
    try:
        if workers is None:
            workers = max(1, int(ray.cluster_resources().get("CPU", 1)))
        actor_class = ray.remote(num_cpus=1, max_restarts=0)(Worker)
        settings = {"threads": 1, **{k: v for k, v in settings.items() if v is not None}}
        queue, attempts, running = deque(todo), {}, {}

        def submit(actor):
            item = queue.popleft()
            attempts[item.id] = attempts.get(item.id, 0) + 1
            first = attempts[item.id] == 1
            ref = actor.run.remote(item, str(out), resume or not first, attempts[item.id])
            running[ref] = (actor, item)
            event("start", item)

        for _ in range(min(workers, len(queue))):
            submit(actor_class.remote(settings))
        while running:
            (ref,), _ = ray.wait(list(running), num_returns=1)
            actor, item = running.pop(ref)
            try:
                event("done", ray.get(ref))
            except ray.exceptions.RayTaskError as e:  # not the item's run: a bug
                event("done", failed_row(out, item, f"{type(e).__name__}: {e}",
                                         attempts[item.id]))
            except ray.exceptions.RayError as e:  # the worker (or its node) was lost
                ray.kill(actor, no_restart=True)
                actor = actor_class.remote(settings)
                if attempts[item.id] <= retries:
                    queue.appendleft(item)
                else:
                    event("done", failed_row(
                        out, item, f"its worker was lost {attempts[item.id]} times; last: "
                        f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}",
                        attempts[item.id]))
            if queue:
                submit(actor)
            else:
                ray.kill(actor, no_restart=True)
    finally:
        if started:
            ray.shutdown()


# ---- the summary -------------------------------------------------------------------------

SUMMARY_COLUMNS = ("id", "scene", "shape", "status", "iterations", "seconds", "attempts")
_PARAM_COLUMNS = ("estimate", "true", "abs_err", "rel_err")


def write_summary(out, rows: list, plot: bool = True) -> dict:
    """``summary.json`` (every row, the failures, per parameter the count and mean /
    median / max relative error of the done items), ``summary.csv`` (one row per item;
    a vector parameter as its mean) and, with ``plot``, ``summary.png`` (per parameter:
    a histogram of the relative errors, estimate against truth); written atomically.
    Returns the summary."""
    out = Path(out)
    names = sorted({n for r in rows for n in r["params"]})
    stats = {}
    for n in names:
        rel = [r["params"][n]["rel_err"] for r in rows
               if r["status"] == "done" and "rel_err" in r["params"].get(n, {})]
        if rel:
            stats[n] = dict(count=len(rel), mean_rel_err=float(np.mean(rel)),
                            median_rel_err=float(np.median(rel)),
                            max_rel_err=float(np.max(rel)))
    summary = dict(items=len(rows), done=sum(r["status"] == "done" for r in rows),
                   failed=sum(r["status"] == "failed" for r in rows),
                   failures=[{"id": r["id"], "message": r["message"]} for r in rows
                             if r["status"] == "failed"],
                   params=stats, rows=rows)
    _write_json(out / "summary.json", summary)
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow([*SUMMARY_COLUMNS, *(f"{n}_{c}" for n in names for c in _PARAM_COLUMNS),
                     "message"])
    for r in rows:
        cells = [r.get(c) for c in SUMMARY_COLUMNS]
        for n in names:
            p = r["params"].get(n, {})
            cells += [_scalar(p.get(c)) for c in _PARAM_COLUMNS]
        writer.writerow([*("" if c is None else c for c in cells), r["message"]])
    with atomic_path(out / "summary.csv") as tmp:
        tmp.write_text(buf.getvalue())
    if plot:
        plot_summary(out / "summary.png", rows, names)
    return summary


def _scalar(x):
    return None if x is None else float(np.mean(x))


def _write_json(path, body) -> None:
    text = json.dumps(body, indent=2)
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def plot_summary(path, rows: list, names: list) -> Path:
    """Per parameter (one column each): a histogram of the done items' relative errors
    (log10) and their estimates against the truth (the line: equal)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    done = [r for r in rows if r["status"] == "done"]
    cols = max(1, len(names))
    fig, axes = plt.subplots(2, cols, figsize=(4 * cols, 7), squeeze=False)
    for k, n in enumerate(names):
        have = [r["params"][n] for r in done if "rel_err" in r["params"].get(n, {})]
        rel = np.array([p["rel_err"] for p in have])
        ax = axes[0, k]
        if len(rel):
            ax.hist(np.log10(np.maximum(rel, 1e-17)), bins=min(30, max(5, len(rel))))
        ax.set(title=f"{n}: relative error", xlabel="log10(relative error)", ylabel="items")
        ax = axes[1, k]
        if have:
            t = np.array([_scalar(p["true"]) for p in have])
            e = np.array([_scalar(p["estimate"]) for p in have])
            ax.scatter(t, e, s=12)
            lo, hi = float(min(t.min(), e.min())), float(max(t.max(), e.max()))
            ax.plot([lo, hi], [lo, hi], "k--", lw=1)
        ax.set(title=f"{n}: estimate vs truth", xlabel="true", ylabel="estimate")
    if not names:
        axes[0, 0].set_title("no parameters to show (no item done)")
    fig.suptitle(f"{len(done)} of {len(rows)} items done")
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=80)
    plt.close(fig)
    return Path(path)

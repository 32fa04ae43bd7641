"""Taichi runtime: backend, precision and thread choice in one place.

Every field the engine allocates takes its float type from :func:`real`, so a
single ``init(precision=...)`` switches the whole engine between float64 (for
gradient checks) and float32 (for speed). Calling :func:`init` again resets
Taichi: fields and models built before become invalid and must be rebuilt.
"""

from __future__ import annotations

import contextlib
import io
import os
import random

os.environ.setdefault("TI_SKIP_VERSION_CHECK", "ON")
os.environ.setdefault("ENABLE_TAICHI_HEADER_PRINT", "0")

import warnings  # noqa: E402

import numpy as np  # noqa: E402
import taichi as ti  # noqa: E402
import torch  # noqa: E402

from gradsim_taichi import taichi_frontend  # noqa: E402
from gradsim_taichi.version import __version__  # noqa: E402

# Taichi inspects `.grad` of every torch tensor passed to a kernel; for non-leaf tensors
# (any tensor computed in an autograd graph) torch then warns on each launch.
warnings.filterwarnings("ignore", message=".*grad attribute of a Tensor that is not a leaf",
                        module=r"taichi\.lang\.kernel_impl")

# Taichi's front end redoes source lookups and error-message formatting on every compile.
taichi_frontend.install()

_ARCHES = ("auto", "cpu", "cuda")
_PRECISIONS = {
    "f64": (ti.f64, torch.float64, np.float64),
    "f32": (ti.f32, torch.float32, np.float32),
}

_state: dict = {"initialized": False, "generation": 0}

# Taichi (1.7, LLVM backends) holds at most 512 field trees per initialisation and never
# frees them: every Model adds a few (a rigid scene 6), and past the limit the process
# crashes (a segfault, no error). Models are refused with a clear error near it
# (check_field_room), and long-running workers start afresh before it (renew_if_full).
FIELD_TREE_LIMIT = 512
FIELD_TREE_MARGIN = 64


def seed_generators(seed: int) -> None:
    """Seed Python's, numpy's and torch's global random generators (what ``init(seed=)``
    does besides Taichi's), e.g. between runs that share one initialisation."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def init(
    arch: str = "auto",
    precision: str = "f64",
    threads: int | None = None,
    seed: int | None = None,
    debug: bool = False,
) -> dict:
    """Initialise (or re-initialise) Taichi for the engine.

    Args:
        arch: ``"auto"`` (CUDA when present, else the CPU), ``"cpu"`` or ``"cuda"``.
            ``ti.gpu`` is never used: it probes OpenGL and crashes on headless machines.
        precision: ``"f64"`` (default, needed for gradient checks) or ``"f32"``.
        threads: CPU worker threads (default: all cores). ``threads=1`` makes
            CPU results bitwise reproducible (atomic adds reorder otherwise).
        seed: seeds Python, numpy, torch and Taichi random generators.
        debug: Taichi debug mode (bounds checks; slow).

    Returns:
        The dict of :func:`info`.
    """
    if arch not in _ARCHES:
        raise ValueError(f"arch={arch!r} is not supported; expected one of {_ARCHES}")
    if precision not in _PRECISIONS:
        raise ValueError(f"precision={precision!r} is not supported; expected 'f64' or 'f32'")
    if threads is not None and (int(threads) != threads or threads < 1):
        raise ValueError(f"threads={threads!r} must be a positive integer or None")
    ti_fp = _PRECISIONS[precision][0]
    kwargs = dict(default_fp=ti_fp, default_ip=ti.i32, debug=debug, log_level=ti.WARN)
    if threads is not None:
        kwargs["cpu_max_num_threads"] = int(threads)
    if seed is not None:
        kwargs["random_seed"] = int(seed)
        seed_generators(seed)
    if _state["initialized"]:
        ti.reset()
    # "auto" asks for CUDA only when a driver is there, so CPU machines stay quiet.
    wanted = ti.cuda if arch == "cuda" or (arch == "auto" and cuda_driver_present()) else ti.cpu
    with contextlib.redirect_stdout(io.StringIO()):  # Taichi prints "Starting on arch=..."
        ti.init(arch=wanted, **kwargs)
    got = ti.lang.impl.current_cfg().arch
    if arch == "cuda" and got != ti.cuda:
        warnings.warn("CUDA was requested but is not available; running on the CPU", stacklevel=2)
    _state.update(
        initialized=True,
        arch="cuda" if got == ti.cuda else "cpu",
        precision=precision,
        threads=int(threads) if threads is not None else (os.cpu_count() or 1),
        seed=seed,
        debug=debug,
        generation=_state["generation"] + 1,
        settings=dict(arch=arch, precision=precision, threads=threads, seed=seed,
                      debug=debug),
    )
    return info()


def field_trees() -> int:
    """How many Taichi field trees this initialisation holds (see FIELD_TREE_LIMIT)."""
    return int(ti.lang.impl.get_runtime().prog.get_snode_tree_size())


def check_field_room(what: str) -> None:
    """A RuntimeError instead of Taichi's crash when building ``what`` could pass the
    field-tree limit."""
    if _state["initialized"] and field_trees() > FIELD_TREE_LIMIT - FIELD_TREE_MARGIN:
        raise RuntimeError(
            f"cannot build {what}: Taichi already holds {field_trees()} field trees of the "
            f"{FIELD_TREE_LIMIT} one initialisation allows (each model adds a few and they "
            "are never freed). Call gradsim_taichi.init() again to start afresh; models, "
            "simulations and scenes built before must then be rebuilt.")


def renew_if_full() -> bool:
    """Re-initialise with the same settings when the field trees near the limit (for
    workers that build a new scene per job; everything built before becomes invalid).
    Returns whether it did."""
    if not _state["initialized"] or field_trees() <= FIELD_TREE_LIMIT - 2 * FIELD_TREE_MARGIN:
        return False
    init(**_state["settings"])
    return True


def cuda_driver_present() -> bool:
    """True when the CUDA driver library can be loaded (says nothing about Taichi's build)."""
    import ctypes

    for name in ("libcuda.so.1", "libcuda.so", "nvcuda.dll"):
        try:
            ctypes.CDLL(name)
            return True
        except OSError:
            continue
    return False


def ensure_init() -> None:
    """Initialise with defaults if nobody called :func:`init` yet."""
    if not _state["initialized"]:
        init()


def info() -> dict:
    """What the runtime chose: arch, precision, threads, seed and library versions."""
    import sys

    out = {
        "gradsim_taichi": __version__,
        "python": sys.version.split()[0],
        "taichi": ".".join(map(str, ti.__version__)),
        "torch": torch.__version__,
        "numpy": np.__version__,
        "initialized": _state["initialized"],
    }
    if _state["initialized"]:
        for key in ("arch", "precision", "threads", "seed", "debug"):
            out[key] = _state[key]
    return out


def debug() -> bool:
    """Whether Taichi runs in debug mode (cheap: called on every fast kernel launch)."""
    return bool(_state.get("debug", False))


def real():
    """The Taichi float type of the current precision."""
    ensure_init()
    return _PRECISIONS[_state["precision"]][0]


def torch_dtype() -> torch.dtype:
    """The torch dtype matching the current precision."""
    ensure_init()
    return _PRECISIONS[_state["precision"]][1]


def np_dtype():
    """The numpy dtype matching the current precision."""
    ensure_init()
    return _PRECISIONS[_state["precision"]][2]


def torch_device() -> torch.device:
    """Where tensors handed to and from the engine live (CUDA when Taichi runs on CUDA)."""
    ensure_init()
    return torch.device("cuda" if _state["arch"] == "cuda" else "cpu")


# On the CPU, a parallel loop wakes Taichi's worker threads, which sleep between
# launches; on the VMs this runs on (vCPUs halt when idle) they join late, so a loop
# needs about 2.5 ms of work before a second thread pays off, and a short parallel loop
# costs ~50 us more than the same loop run serially. Measured in
# benchmarks/bench_launch.py.
SERIAL_WORK_NS = 2.0e6


def serial(count: int, ns_per_item: float = 10.0) -> bool:
    """Whether a loop over ``count`` items of ``ns_per_item`` each should run serially:
    on the CPU when its estimated work is under :data:`SERIAL_WORK_NS`; never on CUDA.
    Read at kernel compile time (``ti.loop_config(serialize=runtime.serial(n))``)."""
    ensure_init()
    return _state["arch"] == "cpu" and count * ns_per_item < SERIAL_WORK_NS


@contextlib.contextmanager
def job_torch_threads():
    """Within: torch's intra-op threads for an estimation's or a training's iterations
    (and an estimation's uncertainty).
    On the CPU one (``GRADSIM_TORCH_THREADS`` overrides): the engine's own loops run on
    Taichi's threads under :func:`serial`, and the torch work around them (projection,
    shading, losses, blur on images of a few MB) paid more for waking a second thread
    than it saved; on a loaded 2-core machine a parallel torch op waits for a core (a
    rigid-mass estimation: 1.9-3.9 s with one torch thread, 3.0-5.8 s with two,
    alternating runs). Unchanged on CUDA. Restored on exit."""
    ensure_init()
    text = os.environ.get("GRADSIM_TORCH_THREADS", "").strip()
    if text and not (text.isdigit() and int(text) > 0):
        raise ValueError(f"GRADSIM_TORCH_THREADS must be a positive integer; got {text!r}")
    want = int(text) if text else (1 if _state["arch"] == "cpu" else None)
    before = torch.get_num_threads()
    if want is not None:
        torch.set_num_threads(want)
    try:
        yield
    finally:
        torch.set_num_threads(before)


# Partial sums a per-body reduction spreads its items over (see reduction_slots).
REDUCTION_SLOTS = {"cpu": 1, "cuda": 64}


def reduction_slots() -> int:
    """How many partial sums a reduction of many items into one slot (a rigid body's
    vertex contact forces into the body) uses: 1 on the CPU (one sum, today's code), 64 on
    CUDA (item ``i`` adds into partial ``i mod 64``, a second loop adds the partials: no
    one hot atomic). ``GRADSIM_REDUCTION_SLOTS`` overrides it (tests run the partial-sum
    path on the CPU with it). Read at build time, like :func:`serial`."""
    ensure_init()
    text = os.environ.get("GRADSIM_REDUCTION_SLOTS", "").strip()
    if not text:
        return REDUCTION_SLOTS[_state["arch"]]
    try:
        slots = int(text)
    except ValueError:
        slots = 0
    if slots < 1:
        raise ValueError(f"GRADSIM_REDUCTION_SLOTS={text!r} must be a positive integer")
    return slots


# How the rasterizer's kernels spread their work (see raster_shape).
RASTER_SHAPES = {"cpu": "tile", "cuda": "pixel"}


def raster_shape() -> str:
    """How the rasterizer's kernels (``render/soft_raster.py``) are laid out: ``"tile"`` on
    the CPU (one thread per (frame, screen tile), a few hundred to thousands of threads:
    enough for a few cores, no atomics), ``"pixel"`` on CUDA (one thread per (frame,
    pixel) in the forward passes and per (tile, face) entry in the backward pass: enough
    threads for a GPU). Both give the same images and gradients.
    ``GRADSIM_RASTER_SHAPE=tile|pixel`` overrides it (tests run the pixel shape on the
    CPU with it). Read on every render call."""
    ensure_init()
    text = os.environ.get("GRADSIM_RASTER_SHAPE", "").strip()
    if not text:
        return RASTER_SHAPES[_state["arch"]]
    if text not in ("tile", "pixel"):
        raise ValueError(f"GRADSIM_RASTER_SHAPE={text!r} must be 'tile' or 'pixel'")
    return text


def generation() -> int:
    """Increments on every :func:`init`; objects holding fields compare it to detect reuse
    after a reset (Taichi's own error for that is an opaque ``IndexError``)."""
    return _state["generation"]


def check_generation(gen: int, what: str) -> None:
    if gen != _state["generation"]:
        raise RuntimeError(
            f"{what} was built before the last gradsim_taichi.init(); its Taichi fields were "
            "freed by the re-initialisation. Build it again."
        )

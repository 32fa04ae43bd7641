"""Shared test setup: every test runs on ``GRADSIM_TEST_ARCH`` (the CPU by default; see
``runtime_arch.py``) in float64 unless marked ``@pytest.mark.precision("f32")``.
Re-initialising Taichi frees all fields, so tests build their models inside the test (or
in fixtures of the same scope)."""

import os

os.environ.setdefault("TI_SKIP_VERSION_CHECK", "ON")
os.environ.setdefault("ENABLE_TAICHI_HEADER_PRINT", "0")
# Taichi's offline kernel cache keys a kernel by its IR, which names the fields it reads by
# their ids: the order fields were allocated in since ti.init. A test module that starts
# from a fresh init (see fresh_taichi_per_module) allocates the same ids on every run, so
# its kernels are found in the cache after the first run (about 1 s instead of 5 s for
# each new rigid model). The suite needs a few hundred MB of them: Taichi's default cache
# (100 MB, shared with every other Taichi program of the user) would evict them.
os.environ.setdefault("TI_OFFLINE_CACHE_FILE_PATH", os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
    "gradsim-taichi", "test-kernels"))
os.environ.setdefault("TI_OFFLINE_CACHE_MAX_SIZE_OF_FILES", str(1 << 30))  # 1 GiB (a C int)

import pytest  # noqa: E402
from runtime_arch import TEST_ARCH  # noqa: E402

import gradsim_taichi as gs  # noqa: E402


def pytest_addoption(parser):
    parser.addoption("--runslow", action="store_true", default=False,
                     help="also run tests marked slow (or set GRADSIM_SLOW=1)")


def pytest_configure(config):
    config.addinivalue_line("markers", "precision(p): run the test under init(precision=p)")
    config.addinivalue_line("markers", "cuda: the smoke subset scripts/gpu_check.sh runs "
                                       "first on a CUDA machine (-m cuda)")
    config.addinivalue_line("markers", "slow: longer than ~20 s; skipped unless --runslow "
                                       "or GRADSIM_SLOW=1 (the default run stays short)")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--runslow") or os.environ.get("GRADSIM_SLOW") == "1":
        return
    skip = pytest.mark.skip(reason="slow: run with --runslow or GRADSIM_SLOW=1")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def quick_calibration(monkeypatch):
    """The frame-0 calibration cut to two Levenberg-Marquardt steps a stage, for tests of
    what reaches a report or a batch's outputs (in this process), not of the calibration
    itself (tests/test_nuisance.py): on a 16 px clip the full one is ~70 s of a run's 90."""
    import gradsim_taichi.fit as fit

    monkeypatch.setattr(fit, "CALIBRATION_ITERS", 2)


@pytest.fixture(scope="module", autouse=True)
def fresh_taichi_per_module():
    """Each test module starts from a fresh Taichi: its field ids (and so its kernels' cache
    keys) do not depend on which tests ran before it in this process. With
    ``--dist loadfile`` (pyproject.toml) a module's tests run in file order on one worker."""
    gs.init(arch=TEST_ARCH, precision="f64")


@pytest.fixture(autouse=True)
def runtime(request):
    marker = request.node.get_closest_marker("precision")
    want = marker.args[0] if marker else "f64"
    current = gs.info()
    if not current["initialized"] or current.get("precision") != want:
        gs.init(arch=TEST_ARCH, precision=want)
    return gs.info()


@pytest.fixture
def one_torch_thread():
    """Torch on one thread for the test (restored after): for tiny tensors, torch's thread
    pool only adds latency, badly so on a loaded 2-core machine."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)

"""Fast kernel launches (gradsim_taichi/kernels.py) and the serial-loop policy
(runtime.serial)."""

import numpy as np
import pytest
import taichi as ti
from runtime_arch import TEST_ARCH, cpu_only

import gradsim_taichi as gs
from gradsim_taichi import runtime
from gradsim_taichi.kernels import FastKernel, WithAdjoint


@pytest.fixture(autouse=True)
def _init():
    gs.init(arch=TEST_ARCH, precision="f64", threads=2)


@ti.data_oriented
class Scaled:
    """y[row, i] = scale * x[row, i]^2 + shift[i]; Taichi's autodiff gives ``.grad``."""

    def __init__(self, n):
        self.n = n
        self.shift = ti.field(ti.f64, n, needs_grad=True)
        self.hand = WithAdjoint(self._double, self._double_adjoint)

    @ti.kernel
    def apply(self, x: ti.template(), y: ti.template(), row: ti.i32, scale: ti.f64):
        for i in range(self.n):
            y[row, i] += scale * x[row, i] ** 2 + self.shift[i]

    @ti.kernel
    def _double(self, x: ti.template(), row: ti.i32):
        for i in range(self.n):
            x[row + 1, i] = 2.0 * x[row, i]

    @ti.kernel
    def _double_adjoint(self, x: ti.template(), row: ti.i32):
        for i in range(self.n):
            x.grad[row, i] += 2.0 * x.grad[row + 1, i]


def fields(n, rows=3, seed=0):
    x = ti.field(ti.f64, shape=(rows, n), needs_grad=True)
    y = ti.field(ti.f64, shape=(rows, n), needs_grad=True)
    x.from_numpy(np.random.default_rng(seed).standard_normal((rows, n)))
    return x, y


@pytest.mark.cuda
def test_fast_kernel_matches_taichi_call_forward_and_generated_adjoint():
    n = 7
    model = Scaled(n)
    model.shift.from_numpy(np.arange(n, dtype=np.float64))
    fast = FastKernel(model.apply)
    (x1, y1), (x2, y2) = fields(n), fields(n)
    for row, scale in ((0, 1.5), (2, -0.25), (1, 3.0), (2, 0.5)):
        model.apply(x1, y1, row, scale)
        fast(x2, y2, row, scale)  # the first call compiles, later ones take the fast path
    np.testing.assert_array_equal(y1.to_numpy(), y2.to_numpy())
    x = x1.to_numpy()
    assert y1.to_numpy()[1] == pytest.approx(3.0 * x[1] ** 2 + np.arange(n))
    # another field as the template argument: launched on that field, not the cached one
    x3, y3 = fields(n, seed=4)
    fast(x3, y3, 0, 2.0)
    np.testing.assert_allclose(y3.to_numpy()[0], 2.0 * x3.to_numpy()[0] ** 2 + np.arange(n))
    np.testing.assert_array_equal(y2.to_numpy(), y1.to_numpy())  # untouched
    # Taichi's generated adjoint through .grad
    for x_, y_, call in ((x1, y1, model.apply.grad), (x2, y2, fast.grad)):
        y_.grad.fill(0)
        y_.grad.from_numpy(np.ones((3, n)))
        x_.grad.fill(0)
        model.shift.grad.fill(0)
        call(x_, y_, 2, 0.5)
        call(x_, y_, 2, 0.5)
    np.testing.assert_allclose(x2.grad.to_numpy()[2], 2 * 2 * 0.5 * x[2])
    np.testing.assert_array_equal(x1.grad.to_numpy(), x2.grad.to_numpy())


def test_fast_kernel_wraps_hand_written_adjoints_and_rejects_other_callables():
    n = 5
    model = Scaled(n)
    fast = FastKernel(model.hand)
    x, _ = fields(n)
    for _ in range(2):
        fast(x, 0)
        fast(x, 1)
    np.testing.assert_allclose(x.to_numpy()[2], 4.0 * x.to_numpy()[0])
    x.grad.fill(0)
    x.grad.from_numpy(np.stack([np.zeros(n), np.zeros(n), np.ones(n)]))
    fast.grad(x, 1)
    fast.grad(x, 0)
    np.testing.assert_allclose(x.grad.to_numpy()[0], 4.0)
    with pytest.raises(TypeError, match="not a Taichi kernel"):
        FastKernel(lambda: None)


@cpu_only
def test_serial_policy_by_estimated_work():
    assert runtime.serial(1000)
    assert not runtime.serial(10**7)
    limit = runtime.SERIAL_WORK_NS
    assert runtime.serial(int(limit / 100) - 1, ns_per_item=100.0)
    assert not runtime.serial(int(limit / 100) + 1, ns_per_item=100.0)


def test_slow_launch_environment_variable_sends_calls_through_taichi(tmp_path):
    import os
    import subprocess
    import sys

    script = tmp_path / "probe.py"  # Taichi kernels must live in real files
    script.write_text(
        "import taichi as ti\n"
        "import gradsim_taichi as gs\n"
        "import gradsim_taichi.kernels as k\n"
        "gs.init(arch='cpu')\n"
        "x = ti.field(ti.f64, ())\n"
        "@ti.kernel\n"
        "def one(x: ti.template()):\n"
        "    x[None] += 1.0\n"
        "launch = k.Launcher(one._primal)\n"
        "for _ in range(3):\n"
        "    launch(x)\n"
        "print(k._DISABLED, launch.fast, len(launch._cache), x[None])\n")
    for value, expected in (("1", "True False 0 3.0"), ("0", "False True 1 3.0")):
        env = dict(os.environ, GRADSIM_TAICHI_SLOW_LAUNCH=value)
        out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                             text=True, check=True).stdout
        assert out.strip().splitlines()[-1] == expected

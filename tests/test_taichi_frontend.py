"""gradsim_taichi.taichi_frontend: Taichi's front end, with its per-compile source lookups and
position texts cached, sees exactly the strings it would compute itself."""

import importlib.util
import sys

import numpy as np
import pytest
import taichi as ti
from runtime_arch import TEST_ARCH
from taichi.lang import impl, kernel_impl
from taichi.lang.ast.ast_transformer_utils import ASTTransformerContext

import gradsim_taichi as gs
from gradsim_taichi import taichi_frontend

# Two versions of one file (edited between imports, as in a notebook): the kernels share the
# file, the name and the line numbers, so a cache keyed by position alone would hand the
# second the first one's text.
SOURCE = '''
import taichi as ti

@ti.kernel
def scale(x: ti.template(), k: ti.template()):
    for i in x:
        if x[i] > 0.0:
            x[i] = x[i] * k{extra}
'''


def load(tmp_path, name, extra):
    path = tmp_path / "kernels.py"
    path.write_text(SOURCE.format(extra=extra))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module.scale


@pytest.fixture
def compared(monkeypatch):
    """Every position text Taichi asks for while compiling, with what Taichi's own method
    gives for the same node."""
    assert taichi_frontend.install()
    cached = ASTTransformerContext.get_pos_info
    own = cached.__wrapped__
    pairs = []

    def both(ctx, node):
        text = cached(ctx, node)
        pairs.append((text, own(ctx, node)))
        return text

    monkeypatch.setattr(ASTTransformerContext, "get_pos_info", both)
    return pairs


def test_cached_texts_equal_taichis_own(tmp_path, compared):
    gs.init(arch=TEST_ARCH, precision="f64", threads=1)
    x = ti.field(ti.f64, shape=4)
    values = [1.0, -1.0, 2.0, 0.5]
    x.from_numpy(np.array(values))
    first = load(tmp_path, "frontend_a", "")
    first(x, 2.0)  # compiled (its source read) before the file changes
    second = load(tmp_path, "frontend_b", " + 1.0")
    second(x, 2.0)
    first(x, 3.0)  # new template instances: the second compile of each kernel
    second(x, 3.0)
    for k in (2.0, 3.0):
        values = [v * k * k + 1.0 if v > 0 else v for v in values]
    assert x.to_numpy().tolist() == values
    assert len(compared) > 20
    assert all(text == reference for text, reference in compared)
    assert any("x[i] = x[i] * k\n" in text for text, _ in compared)
    assert any("x[i] = x[i] * k + 1.0\n" in text for text, _ in compared)


def test_a_compile_error_still_points_at_the_line(tmp_path):
    assert taichi_frontend.install()
    gs.init(arch=TEST_ARCH, precision="f64", threads=1)
    broken = load(tmp_path, "frontend_broken", " + undefined_name")
    x = ti.field(ti.f64, shape=2)
    with pytest.raises(ti.TaichiCompilationError) as e:
        broken(x, 1.0)
    message = str(e.value)
    assert "kernels.py" in message and "line 8" in message
    assert "undefined_name" in message and "^" in message


def test_source_lookups_are_cached_per_function_and_copied():
    assert taichi_frontend.install()

    def f():
        return 1

    lines, start = kernel_impl.getsourcelines(f)
    lines.append("changed by the caller")
    again, start_again = kernel_impl.getsourcelines(f)
    assert start_again == start and "changed by the caller" not in again
    assert again[0].strip() == "def f():"
    assert kernel_impl.getsourcefile(f) == __file__


DECORATED = '''
import taichi as ti

@ti.func
def f(x):
    return x + 1

@ti.kernel
def k(x: ti.template()):
    pass

@ti.data_oriented
class A:
    @ti.func
    def g(self, x):
        return x

    @ti.kernel
    def run(self):
        pass

class B(object):
    @ti.kernel
    def run(self):
        pass

@ti.data_oriented
@ti.data_oriented
class C(A):
    @ti.func
    def h(self):
        return 1

def make():
    @ti.kernel
    def inner():
        pass
    return inner

INNER = make()
'''


def test_the_class_body_check_agrees_with_taichis_own(tmp_path, monkeypatch):
    """Every decoration of a module with kernels and funcs in and out of classes gets the
    answer Taichi's own `inspect`-based check gives, at the same stack depth."""
    assert taichi_frontend.install()
    by_line = kernel_impl._inside_class
    own = by_line.__wrapped__
    answers = []

    def both(level_of_class_stackframe):  # one frame deeper than Taichi's call: +1
        answers.append((by_line(level_of_class_stackframe + 1),
                        own(level_of_class_stackframe + 1)))
        return answers[-1][0]

    monkeypatch.setattr(kernel_impl, "_inside_class", both)
    path = tmp_path / "decorated.py"
    path.write_text(DECORATED)
    spec = importlib.util.spec_from_file_location("frontend_decorated", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    # f, k, A.g, A.run, B.run, C.h, inner
    assert [ours for ours, _ in answers] == [False, False, True, True, True, True, False]
    assert all(ours == theirs for ours, theirs in answers)


def test_only_taichis_generated_adjoints_compile_with_the_cfg_passes(monkeypatch):
    """A primal kernel's launches (its first one compiles it) see `cfg_optimization` off,
    an adjoint Taichi generates sees Taichi's setting (off, an f32 rigid-body adjoint's
    mass gradient came out zero), the setting is restored after each, and the generated
    adjoint's gradient matches central differences of the primal."""
    assert taichi_frontend.install()
    installed = kernel_impl.Kernel.launch_kernel
    assert installed.__wrapped__ is not None
    cfg = impl.current_cfg
    setting = cfg().cfg_optimization
    seen = []

    def recording(kernel, *args):
        seen.append((kernel.autodiff_mode, cfg().cfg_optimization))
        return installed.__wrapped__(kernel, *args)

    monkeypatch.setattr(kernel_impl.Kernel, "launch_kernel",
                        taichi_frontend._primal_without_cfg_passes(
                            recording, cfg, kernel_impl.AutodiffMode.NONE))
    x = ti.field(ti.f64, 4, needs_grad=True)
    y = ti.field(ti.f64, (), needs_grad=True)

    @ti.kernel
    def energy():
        for i in x:
            y[None] += x[i] * x[i] * x[i] - ti.sin(x[i])

    values = np.array([0.5, -1.0, 2.0, 3.0])
    x.from_numpy(values)
    with ti.ad.Tape(loss=y):
        energy()
    grad = x.grad.to_numpy()
    assert cfg().cfg_optimization == setting
    assert (kernel_impl.AutodiffMode.REVERSE, setting) in seen
    assert all(not on for mode, on in seen if mode == kernel_impl.AutodiffMode.NONE)

    def value(v):
        x.from_numpy(v)
        y[None] = 0.0
        energy()
        return y[None]

    h = 1e-5  # y is up to ~30: round-off ~1e-9 of the differences, truncation ~1e-10
    fd = [(value(values + h * e) - value(values - h * e)) / (2 * h) for e in np.eye(4)]
    np.testing.assert_allclose(grad, fd, rtol=1e-7, atol=1e-8)

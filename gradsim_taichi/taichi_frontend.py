"""Cache what Taichi 1.7's Python front end recomputes every time it compiles a kernel.

Each compile of a kernel instance (every template specialisation, every model's fields, the
forward and the adjoint) makes Taichi re-read the kernel's source, which makes `inspect`
scan every loaded module (torch loads thousands), and format a caret-marked source excerpt
for every AST node, with two `textwrap` passes per line, whether or not an error is ever
shown. Both results depend only on the source text, so caching them leaves every string
Taichi sees unchanged. And each `@ti.kernel` / `@ti.func` reads, through the same scan,
the line its caller's caller is executing (is it a class body?): read here with
`linecache` directly. Measured in docs/architecture.md ("Taichi facts").

It also compiles every kernel except Taichi's generated adjoints without Taichi's
``cfg_optimization`` passes (store-to-load forwarding and dead-store elimination over the
control-flow graph, superlinear in a kernel's size): LLVM's optimiser, which runs after
them, does the same work there, so the code runs as fast, and a preset's first gradient
compiles 1.14-1.42x faster. Taichi's generated adjoints keep the passes: without them an
f32 rigid-body adjoint gave a zero mass gradient (tests/test_torch_transfer.py).

`install()` is idempotent, and a no-op with ``GRADSIM_TAICHI_NO_FRONTEND_CACHE=1`` (to
compare: benchmarks/bench_compile.py) or where Taichi's internals differ from what it
expects.
"""

from __future__ import annotations

import linecache
import os
import sys
import weakref

_installed = False


def install() -> bool:
    """Install the caches; returns whether they are in place."""
    global _installed
    if _installed:
        return True
    if os.environ.get("GRADSIM_TAICHI_NO_FRONTEND_CACHE", "") not in ("", "0"):
        return False
    try:
        from taichi.lang import impl, kernel_impl
        from taichi.lang.ast.ast_transformer_utils import ASTTransformerContext
    except ImportError:
        return False
    if not all(callable(getattr(kernel_impl, name, None))
               for name in ("getsourcefile", "getsourcelines", "_inside_class")) \
            or not callable(getattr(ASTTransformerContext, "get_pos_info", None)) \
            or not isinstance(getattr(kernel_impl, "_KERNEL_CLASS_STACKFRAME_STMT_RES", None),
                              list) \
            or not callable(getattr(kernel_impl.Kernel, "launch_kernel", None)) \
            or not hasattr(kernel_impl, "AutodiffMode"):
        return False
    kernel_impl.Kernel.launch_kernel = _primal_without_cfg_passes(
        kernel_impl.Kernel.launch_kernel, impl.current_cfg, kernel_impl.AutodiffMode.NONE)
    kernel_impl.getsourcefile = _by_function(kernel_impl.getsourcefile)
    kernel_impl.getsourcelines = _by_function(kernel_impl.getsourcelines, copy=True)
    ASTTransformerContext.get_pos_info = _positions_cached(ASTTransformerContext.get_pos_info)
    kernel_impl._inside_class = _inside_class_by_line(
        kernel_impl._inside_class, kernel_impl._KERNEL_CLASS_STACKFRAME_STMT_RES)
    _installed = True
    return True


def _by_function(lookup, copy: bool = False):
    """`lookup(func)` remembered per function object, forgotten with the function."""
    cache: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def cached(func):
        try:
            found = cache[func]
        except (KeyError, TypeError):  # TypeError: not weak-referenceable, not hashable
            found = lookup(func)
            try:
                cache[func] = found
            except TypeError:
                pass
        if copy:  # (lines, first line number): callers get their own list
            return list(found[0]), found[1]
        return found

    return cached


_MULTI_LINE_HEADERS = ("For", "While", "FunctionDef", "If")


def _positions_cached(get_pos_info):
    """`ctx.get_pos_info(node)` keyed by everything its text depends on."""
    cache: dict = {}

    def cached(ctx, node):
        if node.end_lineno is None or node.end_col_offset is None:  # a made-up node
            return get_pos_info(ctx, node)
        last = node.end_lineno
        body = getattr(node, "body", None)
        if node.__class__.__name__ in _MULTI_LINE_HEADERS and body:
            last = max(body[0].lineno - 1, node.lineno)  # the header lines only
        key = (ctx.file, ctx.lineno_offset, ctx.indent, ctx.func.func.__name__,
               node.__class__.__name__, node.lineno, node.end_lineno, node.col_offset,
               node.end_col_offset, last, tuple(ctx.src[node.lineno - 1:max(last, node.lineno)]))
        try:
            return cache[key]
        except KeyError:
            text = cache[key] = get_pos_info(ctx, node)
            return text

    cached.__wrapped__ = get_pos_info
    return cached


def _inside_class_by_line(inside_class_by_inspect, patterns):
    """Taichi's `_inside_class(level)`: does the frame ``level`` up execute a ``class`` or
    ``@data_oriented`` line? `inspect.getframeinfo` finds that line by scanning every
    loaded module whenever the frame's file does not exist (the import machinery's
    frames: once for every decorated function); `linecache` reads it directly."""

    def inside_class(level_of_class_stackframe):
        try:
            frame = sys._getframe(level_of_class_stackframe)
        except ValueError:
            return False
        line = linecache.getline(frame.f_code.co_filename, frame.f_lineno, frame.f_globals)
        return any(p.match(line.strip()) for p in patterns)

    inside_class.__wrapped__ = inside_class_by_inspect
    return inside_class


def _primal_without_cfg_passes(launch_kernel, current_cfg, primal_mode):
    """Taichi's `Kernel.launch_kernel`, which compiles a kernel on its first launch, with
    ``cfg_optimization`` off for kernels that are not Taichi's generated adjoints. Only the
    first compile reads the setting (the compiled-kernel cache does not key on it), so the
    hand-written kernels' fast launches (kernels.Launcher) find these compiles."""

    def launch(kernel, *args):
        if kernel.autodiff_mode != primal_mode:
            return launch_kernel(kernel, *args)
        cfg = current_cfg()
        before = cfg.cfg_optimization
        cfg.cfg_optimization = False
        try:
            return launch_kernel(kernel, *args)
        finally:
            cfg.cfg_optimization = before

    launch.__wrapped__ = launch_kernel
    return launch

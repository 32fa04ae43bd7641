"""The code examples in docstrings run as written."""

import os

import gradsim_taichi.render as render


def _example(doc: str) -> str:
    block = doc[doc.index("::") + 2:].split("\n\n", 1)[1]
    lines = [line for line in block.split("\n") if line.startswith("    ") or not line]
    return "\n".join(line[4:] for line in lines)


def test_render_module_example_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    scope: dict = {}
    exec(compile(_example(render.__doc__), "render example", "exec"), scope)
    assert tuple(scope["frames"].shape) == (10, 48, 64, 4)
    grad = scope["height"].grad
    assert grad is not None and bool((grad != 0).all())  # every frame sees the box
    assert os.path.getsize(tmp_path / "out.gif") > 1000

"""What a wheel of this checkout contains, asked of setuptools without building anything.

pyproject.toml leaves `packages` unset so that setuptools discovers them from the
package-dir mapping (gradsim_taichi/, solvers/ -> gradsim_taichi.solvers,
render/ -> gradsim_taichi.render). These tests fail when a package folder or a
data file would be left out of the wheel, or when anything but gradsim_taichi
would land at the top of site-packages. scripts/check_wheel.sh (CI) builds the
wheel itself and runs the CLI from it.
"""

from __future__ import annotations

import fnmatch
import os
import subprocess
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Folder in the checkout -> the package it installs as.
ROOTS = {"gradsim_taichi": "gradsim_taichi", "solvers": "gradsim_taichi.solvers",
         "render": "gradsim_taichi.render"}


def _source_files() -> list[Path]:
    """Files under the three package folders, relative to ROOT: git's tracked (and
    untracked, not ignored) files when this is a git checkout, else a walk."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--",
             *ROOTS],
            cwd=ROOT, capture_output=True, check=True, timeout=30,
        ).stdout.decode()
        files = [Path(f) for f in out.split("\0") if f and (ROOT / f).is_file()]
    except (OSError, subprocess.SubprocessError):
        files = []
        for top in ROOTS:
            for dirpath, dirnames, filenames in os.walk(ROOT / top):
                dirnames[:] = [d for d in dirnames if d != "__pycache__"]
                files += [(Path(dirpath) / f).relative_to(ROOT) for f in filenames]
    return [f for f in files if "__pycache__" not in f.parts and f.suffix not in (".pyc", ".pyo")]


def _package_of(folder: Path) -> str:
    """The dotted name the folder (relative to ROOT) installs as."""
    top, *rest = folder.parts
    return ".".join([ROOTS[top], *rest])


@pytest.fixture(scope="module")
def dist(tmp_path_factory):
    """setuptools' Distribution for pyproject.toml, after its automatic discovery:
    the package list and package data a build of this checkout uses."""
    pytest.importorskip("setuptools", minversion="77")
    from setuptools.dist import Distribution

    cwd = os.getcwd()
    os.chdir(ROOT)  # setuptools reads pyproject.toml from the working directory
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            d = Distribution()
            d.parse_config_files()
            d.set_defaults()  # the automatic discovery a build runs
    finally:
        os.chdir(cwd)
    assert d.packages, "setuptools discovered no packages"
    return d


def test_every_package_folder_is_discovered(dist):
    expected = {_package_of(f.parent) for f in _source_files() if f.name == "__init__.py"}
    assert {"gradsim_taichi", "gradsim_taichi.solvers", "gradsim_taichi.render",
            "gradsim_taichi.scenes", "gradsim_taichi.cli"} <= expected
    missing = sorted(expected - set(dist.packages))
    assert not missing, f"packages left out of the wheel: {missing}"


def test_only_gradsim_taichi_at_the_top(dist):
    tops = {p.split(".")[0] for p in dist.packages}
    assert tops == {"gradsim_taichi"}, f"top-level packages in the wheel: {sorted(tops)}"
    assert not dist.py_modules, f"top-level modules in the wheel: {dist.py_modules}"


def test_packages_map_to_their_folders(dist):
    """Each discovered package resolves (longest package-dir prefix, as build_py does)
    to an existing folder of the checkout, e.g. gradsim_taichi.solvers.x -> solvers/x."""
    mapping = dist.package_dir
    for pkg in dist.packages:
        parts = pkg.split(".")
        for n in range(len(parts), 0, -1):
            base = ".".join(parts[:n])
            if base in mapping:
                folder = ROOT / mapping[base] / Path(*parts[n:])
                break
        else:
            pytest.fail(f"{pkg}: no package-dir entry")
        assert folder.is_dir(), f"{pkg} -> {folder}: not a folder"


def test_every_file_in_the_package_folders_ships(dist):
    """A .py file ships when its folder is a discovered package; any other file (scene
    TOML, mesh, image) also needs a package-data glob. Add the glob in pyproject.toml."""
    packages = set(dist.packages)
    globs = [g for key in ("", "*") for g in dist.package_data.get(key, [])]
    left_out = []
    for f in _source_files():
        if f.name.startswith("."):
            continue
        pkg = _package_of(f.parent)
        globs_here = globs + dist.package_data.get(pkg, [])
        if pkg not in packages:
            left_out.append(f"{f} (folder {f.parent} is not a discovered package)")
        elif f.suffix != ".py" and not any(fnmatch.fnmatch(f.name, g) for g in globs_here):
            left_out.append(f"{f} (no package-data glob matches)")
    assert not left_out, "files that a wheel would leave out:\n" + "\n".join(left_out)

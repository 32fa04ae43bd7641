#!/usr/bin/env bash
# Build a wheel of this checkout, install it (not editable) into a fresh venv and run the
# CLI from a folder outside the checkout. The editable install of scripts/run_tests.sh
# imports straight from the source folders, so it cannot see a package or data file that
# the wheel leaves out; this can. Run by .ci/run after the test suite.
#   bash scripts/check_wheel.sh        (KEEP=1 keeps the temporary folder)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
export TI_SKIP_VERSION_CHECK=ON ENABLE_TAICHI_HEADER_PRINT=0 TI_ENABLE_PYBUF=0
PY=${PYTHON:-python3}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/gradsim-wheel.XXXXXX")
if [ "${KEEP:-0}" = 1 ]; then
  trap 'echo "check_wheel: kept $WORK"' EXIT
else
  trap 's=$SECONDS; rm -rf "$WORK"; echo "check_wheel: removed $WORK ($((SECONDS - s)) s)"' EXIT
fi
start=$SECONDS
step() { echo "check_wheel: $* ($((SECONDS - start)) s)"; }

step "fresh venv in $WORK/venv"
"$PY" -m venv "$WORK/venv"
VPY=$WORK/venv/bin/python
if ! command -v nvidia-smi >/dev/null 2>&1; then
  "$VPY" -m pip install -q --no-compile "torch==2.13.0"  # the CPU build, as scripts/run_tests.sh does
fi
"$VPY" -m pip install -q --no-compile build

# sdist first, then the wheel from the unpacked sdist: no stale build/ folder of the
# checkout can leak into the wheel, and the sdist is checked on the way.
step "building sdist and wheel"
"$VPY" -m build -q --outdir "$WORK/dist" "$ROOT" >"$WORK/build.log" 2>&1 \
  || { cat "$WORK/build.log"; exit 1; }
WHEEL=$(ls "$WORK"/dist/*.whl)

step "checking the contents of $(basename "$WHEEL")"
"$VPY" - "$WHEEL" "$ROOT" <<'EOF'
import subprocess, sys, zipfile
from pathlib import PurePosixPath as P

wheel, root = sys.argv[1], sys.argv[2]
names = {n for n in zipfile.ZipFile(wheel).namelist() if ".dist-info/" not in n}
tops = {n.split("/")[0] for n in names}
if tops != {"gradsim_taichi"}:
    sys.exit(f"check_wheel: top-level entries in the wheel: {sorted(tops)}")
# Every tracked (or untracked, not ignored) file under the package folders must ship.
roots = {"gradsim_taichi": "gradsim_taichi", "solvers": "gradsim_taichi/solvers",
         "render": "gradsim_taichi/render"}
files = subprocess.run(
    ["git", "ls-files", "--cached", "--others", "--exclude-standard", "--", *roots],
    cwd=root, capture_output=True, text=True, check=True).stdout.split()
if not files:
    sys.exit("check_wheel: git lists no source files (not a git checkout?)")
want = {str(P(roots[P(f).parts[0]], *P(f).parts[1:])) for f in files
        if "__pycache__" not in f and not P(f).name.startswith(".")}
missing = sorted(want - names)
if missing:
    sys.exit("check_wheel: files missing from the wheel:\n  " + "\n  ".join(missing))
pkgs = sorted({str(P(n).parent) for n in names if n.endswith("/__init__.py")})
print(f"check_wheel: {len(names)} files, packages: {' '.join(p.replace('/', '.') for p in pkgs)}")
EOF

step "installing the wheel (not editable)"
"$VPY" -m pip install -q --no-compile "$WHEEL"

RUN=$WORK/run
mkdir -p "$RUN"
cd "$RUN"  # outside the checkout: nothing can be imported from the source folders
step "importing every module from $RUN"
"$VPY" - "$ROOT" <<'EOF'
import importlib, pkgutil, sys
from pathlib import Path

import gradsim_taichi

root = Path(sys.argv[1]).resolve()
where = Path(gradsim_taichi.__file__).resolve()
if root in where.parents:
    sys.exit(f"check_wheel: gradsim_taichi imported from the checkout: {where}")
mods = [m.name for m in pkgutil.walk_packages(gradsim_taichi.__path__, "gradsim_taichi.")
        if not m.name.endswith("__main__")]
for name in mods:
    importlib.import_module(name)
print(f"check_wheel: imported {len(mods) + 1} modules from {where.parent}")
EOF

run_cli() {  # OUT, then the CLI's arguments
  local out=$1
  shift
  step "gradsim-taichi $* --out $out"
  "$WORK/venv/bin/gradsim-taichi" "$@" --out "$out" --quiet
  test -s "$out/report.json" || { echo "check_wheel: no $out/report.json"; exit 1; }
  "$VPY" -c "import json, sys; json.load(open(sys.argv[1]))" "$out/report.json"
}
run_cli "$RUN/est" estimate rigid-mass --iters 2
run_cli "$RUN/ctl" control cloth --iters 1
step "ok"

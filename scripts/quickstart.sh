#!/usr/bin/env bash
# Install the project into .venv and run the main job headless; outputs go to results/.
set -euo pipefail
cd "$(dirname "$0")/.."
export TI_SKIP_VERSION_CHECK=ON ENABLE_TAICHI_HEADER_PRINT=0
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
if ! command -v nvidia-smi >/dev/null 2>&1; then
  .venv/bin/python -m pip install -q "torch==2.13.0"
fi
.venv/bin/python -m pip install -q -e .
exec .venv/bin/gradsim-taichi estimate rigid-mass --out results/rigid-mass "$@"

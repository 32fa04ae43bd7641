#!/usr/bin/env bash
# Install the project with its test extras into .venv and run the test suite.
# On a machine without an NVIDIA driver the CPU build of torch is installed first,
# so that the `torch>=2.1` range does not pull a multi-GB CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
export TI_SKIP_VERSION_CHECK=ON ENABLE_TAICHI_HEADER_PRINT=0 TI_ENABLE_PYBUF=0
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
if ! command -v nvidia-smi >/dev/null 2>&1; then
  .venv/bin/python -m pip install -q "torch==2.13.0"
fi
.venv/bin/python -m pip install -q -e ".[test]"
exec .venv/bin/python -m pytest -n 2 -q "$@"

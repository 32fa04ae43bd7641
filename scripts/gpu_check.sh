#!/usr/bin/env bash
# The one prepared check for a machine with an NVIDIA GPU (issue 15): install, run the
# CUDA smoke subset, the whole suite on CUDA, and every benchmark on CUDA, then write one
# JSON summary. Usage (from the repository root):
#
#     bash scripts/gpu_check.sh [OUT_DIR]      # default: $OUT if set, else results/gpu_check
#     QUICK=1 bash scripts/gpu_check.sh        # smoke subset + quick benchmarks (~6 min)
#
# Each step has its own time limit and its own log; a failing step is recorded and the
# next one still runs, so a single run tells everything. Exit code: 0 if every step
# passed, 1 otherwise (on a machine without CUDA it stops after the info step).
set -uo pipefail
cd "$(dirname "$0")/.."
export TI_SKIP_VERSION_CHECK=ON ENABLE_TAICHI_HEADER_PRINT=0 TI_ENABLE_PYBUF=0
OUT_DIR=${1:-${OUT:-results/gpu_check}}
mkdir -p "$OUT_DIR"
PY=${PYTHON:-python3}

step_names=()
step_rcs=()
step_secs=()
run_step() {  # run_step NAME LIMIT_S COMMAND...
  local name=$1 limit=$2
  shift 2
  local t0=$SECONDS
  echo "== $name (limit ${limit}s)"
  timeout "$limit" "$@" >"$OUT_DIR/$name.log" 2>&1
  local rc=$?
  step_names+=("$name")
  step_rcs+=("$rc")
  step_secs+=("$((SECONDS - t0))")
  echo "   rc=$rc in $((SECONDS - t0)) s; last lines:"
  tail -n 3 "$OUT_DIR/$name.log" | sed 's/^/   /'
}

# 1. install. Online: a venv with the project (torch's CUDA build from the machine's
#    index). Offline (a machine that reaches no registry, with its own CUDA torch): the
#    wheels in .whl/ (taichi and the other missing dependencies, and this project's wheel,
#    built elsewhere with `pip wheel --no-deps -w .whl .`) go to $SITE, and everything
#    runs from outside the checkout so that the installed package, not the source
#    folders, is imported.
REPO=$PWD
RUN_DIR=$(mktemp -d)
if [ -d .whl ]; then
  SITE=${SITE:-/tmp/gradsim_site}
  run_step install 300 "$PY" -m pip install -q --no-index --no-deps --no-compile \
    --no-cache-dir --upgrade --target "$SITE" .whl/*.whl
  export PYTHONPATH=$SITE${PYTHONPATH:+:$PYTHONPATH}
else
  [ -x .venv/bin/python ] || "$PY" -m venv .venv
  run_step install 900 bash -c '.venv/bin/python -m pip install -q --upgrade pip &&
    .venv/bin/python -m pip install -q -e ".[test]"'
  PY=$REPO/.venv/bin/python
fi
cd "$RUN_DIR"
run_step info 120 "$PY" -c '
import json, torch, gradsim_taichi as gs
gs.init(arch="cuda")
i = gs.info(); i["torch_cuda"] = torch.cuda.is_available()
i["gpu"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
print(json.dumps(i, default=str))
assert i["arch"] == "cuda", "Taichi did not start on CUDA"'

# QUICK=1: the smoke subset and the quick benchmarks only (a short lease)
QUICK=${QUICK:-0}
PYTEST=("$PY" -m pytest "$REPO/tests" -c "$REPO/pyproject.toml" --rootdir "$REPO" -q -p no:cacheprovider)
if [ "${step_rcs[-1]}" -ne 0 ]; then
  echo "no CUDA for Taichi here (see $OUT_DIR/info.log): tests and benchmarks skipped"
  step_names+=(tests_and_benchmarks) step_rcs+=(1) step_secs+=(0)
  echo skipped >"$OUT_DIR/tests_and_benchmarks.log"
else
export GRADSIM_TEST_ARCH=cuda GRADSIM_BENCH_ARCH=cuda
# 2. the smoke subset first (fast to read when something is wrong; with its slow-tier
# cases, e.g. the parallel rigid partial sums, CUDA's own path), then everything
if [ "$QUICK" = 1 ]; then
  run_step tests_cuda_smoke 200 env GRADSIM_SLOW=1 "${PYTEST[@]}" -m cuda --junitxml="$OUT_DIR/smoke.xml"
else
  run_step tests_cuda_smoke 900 env GRADSIM_SLOW=1 "${PYTEST[@]}" -m cuda -x --junitxml="$OUT_DIR/smoke.xml"
  run_step tests_cuda_all 1800 "${PYTEST[@]}" -n 4 --junitxml="$OUT_DIR/all.xml"
fi

# 3. every benchmark on CUDA, f64 and f32 where the benchmark has both
if [ "$QUICK" = 1 ]; then
  for b in particles rigid render; do
    run_step "bench_$b" 60 "$PY" "$REPO/benchmarks/bench_$b.py" --quick \
      --json "$OUT_DIR/bench_$b.json"
  done
  # the rasterizer in the CPU's kernel shape on the GPU, against bench_render's pixel shape
  run_step bench_render_tile 60 env GRADSIM_RASTER_SHAPE=tile "$PY" \
    "$REPO/benchmarks/bench_render.py" --quick --json "$OUT_DIR/bench_render_tile.json"
  run_step profile_estimation 100 "$PY" "$REPO/benchmarks/profile_estimation.py" \
    --scenes rigid-mass --iters 2 --json "$OUT_DIR/profile_estimation.json"
else
  for b in particles cloth fem rigid render launch; do
    run_step "bench_$b" 900 "$PY" "$REPO/benchmarks/bench_$b.py" --json "$OUT_DIR/bench_$b.json"
  done
  run_step bench_render_tile 900 env GRADSIM_RASTER_SHAPE=tile "$PY" \
    "$REPO/benchmarks/bench_render.py" --json "$OUT_DIR/bench_render_tile.json"
  run_step profile_estimation 900 "$PY" "$REPO/benchmarks/profile_estimation.py" \
    --iters 3 --json "$OUT_DIR/profile_estimation.json"
fi
fi
cd "$REPO"

# 4. one JSON summary: each step's exit code and seconds, the info line, benchmark JSONs
names=$(IFS=,; echo "${step_names[*]}")
rcs=$(IFS=,; echo "${step_rcs[*]}")
secs=$(IFS=,; echo "${step_secs[*]}")
"$PY" - "$OUT_DIR" "$names" "$rcs" "$secs" <<'EOF'
import json, pathlib, sys
out, names, rcs, secs = pathlib.Path(sys.argv[1]), *[a.split(",") for a in sys.argv[2:]]
steps = {n: {"rc": int(r), "seconds": int(s)} for n, r, s in zip(names, rcs, secs)}
info = [line for line in (out / "info.log").read_text(errors="replace").splitlines()
        if line.startswith("{")]
summary = {"steps": steps, "info": json.loads(info[-1]) if info else None, "benchmarks": {}}
for p in sorted(out.glob("*.json")):
    if p.name != "summary.json":
        try:
            summary["benchmarks"][p.stem] = json.loads(p.read_text())
        except ValueError as e:
            summary["benchmarks"][p.stem] = f"unreadable: {e}"
(out / "summary.json").write_text(json.dumps(summary, indent=1))
print(json.dumps(steps, indent=1))
EOF
for rc in "${step_rcs[@]}"; do [ "$rc" -eq 0 ] || exit 1; done
exit 0

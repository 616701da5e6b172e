#!/usr/bin/env bash
# One call on a lent GPU machine (issue #16 / #13): GPU tests, bench_gpu.py, then a sweep, all inside
# the call's 600 s. Run from the repository root with the wheels in .whl and mnist.npz in .devdata
# (both git-ignored, carried): see docs/PERFORMANCE.md, "GPU". Usage: bench/gpu_session.sh SWEEP_ARGS...
# (SWEEP_ARGS empty: no sweep). Everything worth keeping goes to $OUT.
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD DPMIX_DATA_DIR=$PWD/.devdata
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm --format=csv,noheader
python3 -c "import sys, torch, dp_accounting, opacus, kymatio; print(sys.version.split()[0], torch.__version__, torch.cuda.is_available())" || exit 1
echo "cores $(nproc); $(df -h /tmp | tail -1)"
if [ "${SKIP_BENCH:-0}" != 1 ]; then
  timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_cuda.py 2>&1 | tail -4
  timeout 240 python3 bench/bench_gpu.py --data-dir .devdata --json "$OUT/bench_gpu.json" --stream-points "${STREAM_POINTS:-10000000}" 2>&1 | tee "$OUT/bench_gpu.txt" | tail -40
fi
if [ $# -gt 0 ]; then
  rm -f /tmp/dev.sqlite /tmp/dev.sqlite-*  # this script's scratch store (a warm machine keeps the last one)
  # STORE_IN: a store an earlier call brought back (carried): the sweep resumes it (its dead runs re-queued)
  if [ -n "${STORE_IN:-}" ]; then cp "$STORE_IN" /tmp/dev.sqlite && chmod u+w /tmp/dev.sqlite; fi
  left=$(( ${BUDGET_S:-585} - SECONDS ))
  echo "sweep with ${left} s left: $*"
  DPMIX_WORKER_THREADS=${THREADS:-2} timeout "$left" python3 -m dpmix_core sweep "$@" --store /tmp/dev.sqlite --export "$OUT/sweep.csv" > "$OUT/sweep.log" 2>&1
  echo "sweep exit $?"; tail -5 "$OUT/sweep.log"
  pkill -f dpmix_core.cli.worker; sleep 1  # workers still in a run when time ran out: stop them before the copy
  python3 - "$OUT" <<'PY'
import sqlite3, sys
src = sqlite3.connect("/tmp/dev.sqlite")
dst = sqlite3.connect(f"{sys.argv[1]}/dev.sqlite")
src.backup(dst)
for row in src.execute("select status, count(*) from runs group by status"):
    print(row)
PY
fi
echo "total ${SECONDS} s"

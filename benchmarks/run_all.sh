#!/usr/bin/env bash
# Every benchmark of issue 8, one after another; JSON results land in benchmarks/results/ (or $1).
# Run from anywhere: ./benchmarks/run_all.sh [RESULT_DIR]. Quick smoke run: QUICK=1 ./benchmarks/run_all.sh
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
py="${PYTHON:-$root/.venv/bin/python}"
out="${1:-$here/results}"
mkdir -p "$out"
cd "$root"

if [[ "${QUICK:-}" == 1 ]]; then
  wire=(--clients 1,4 --requests 200); startup=(--runs 2); hook=(--runs 5); mcp=(--runs 2)
  pend=(--total 500 --connections 10 --timeout 3); pend_conns=(--total 500 --connections 500 --timeout 3)
else
  wire=(--clients 1,32 --requests 5000); startup=(--runs 10); hook=(--runs 40); mcp=(--runs 15)
  pend=(--total 10000 --connections 100 --timeout 20)
  pend_conns=(--total 10000 --connections 10000 --timeout 15)  # one per hook process, the realistic case
fi

status=0
run() {  # name, command...
  local name="$1"; shift
  echo "== $name"
  "$@" --out "$out/$name.json" || { echo "!! $name failed ($?)"; status=1; }
  echo
}
run wire "$py" benchmarks/wire.py --baseline "${wire[@]}"
run startup "$py" benchmarks/startup.py "${startup[@]}"
run hook_process "$py" benchmarks/hook_process.py "${hook[@]}"
run mcp_ready "$py" benchmarks/mcp_ready.py "${mcp[@]}"
run classify "$py" benchmarks/classify_run.py
run pending_10k "$py" benchmarks/pending_10k.py "${pend[@]}"
run pending_10k_conns "$py" benchmarks/pending_10k.py "${pend_conns[@]}"
"$py" benchmarks/targets.py "$out"
exit $status

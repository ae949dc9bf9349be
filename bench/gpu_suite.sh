#!/usr/bin/env bash
# The whole `pytest -m gpu` suite on the GPU machine, in groups that each fit a device call
# (PyTorch->CUDA candidates build with load_inline: those tests take minutes, not seconds).
#   source scripts/device_env.sh; bash bench/gpu_suite.sh fast execute   # one call, <= 9.5 min
#   source scripts/device_env.sh; bash bench/gpu_suite.sh torch          # one call, <= 9.5 min
#   source scripts/device_env.sh; bash bench/gpu_suite.sh bench          # tests/bench, <= 5 min
# Each group's verbose log goes to $OUT/gpu_<group>.log as the tests run (one line per test,
# so a call cut off by its limit still says what passed); the last lines are printed.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
P=(python3 -m pytest -m gpu -v -rfEs -p no:cacheprovider --tb=short)
run() {  # run GROUP WALL_S PER_TEST_S PATHS...
  local g=$1 wall=$2 per=$3; shift 3
  echo "== $g: $* (limit ${wall}s, ${per}s per test)"
  timeout "$wall" "${P[@]}" --timeout "$per" "$@" > "$OUT/gpu_$g.log" 2>&1
  echo "rc=$?" >> "$OUT/gpu_$g.log"
  grep -E "FAILED|ERROR|passed|failed|rc=" "$OUT/gpu_$g.log" | tail -12
}
T=tests/execute/pytorch/test_gpu.py  # its three batch tests build ~20 extensions each
HEAVY=("$T::test_adversarial_corpus" "$T::test_sample_torch_implementations_pass_the_evaluator"
       "$T::test_torch_faults_get_their_status_and_the_next_candidate_is_ok")
[ $# -gt 0 ] || set -- fast execute torch bench
for g in "$@"; do
  case "$g" in
    fast) run fast 240 150 tests/tasks tests/analyze tests/datagen tests/train ;;  # SmolLM2 GRPO steps: ~1-2 min each
    execute) run execute 330 150 tests/execute "${HEAVY[@]/#/--deselect=}" ;;
    torch) run torch 570 400 "${HEAVY[@]}" ;;
    bench) run bench 300 280 tests/bench ;;  # the dataset smoke's largest families
    *) echo "gpu_suite: unknown group $g (fast, execute, torch, bench)" >&2; exit 2 ;;
  esac
done

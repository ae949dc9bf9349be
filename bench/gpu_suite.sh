#!/usr/bin/env bash
# The whole `pytest -m gpu` suite on the GPU machine, in groups that each fit a device call
# (PyTorch->CUDA candidates build with load_inline: those tests take minutes, not seconds).
#   source scripts/device_env.sh; bash bench/gpu_suite.sh fast execute   # one call, <= 9.5 min
#   source scripts/device_env.sh; bash bench/gpu_suite.sh torch          # one call, <= 9.5 min
#   source scripts/device_env.sh; bash bench/gpu_suite.sh bench          # tests/bench, <= 5 min
#   source scripts/device_env.sh; bash bench/gpu_suite.sh smoke          # bench/eval_dataset_smoke.py
#   source scripts/device_env.sh; bash bench/gpu_suite.sh evalspeed      # 1, 2, 4 workers per GPU
# `smoke` resumes $OUT/eval_dataset_smoke_<gpu>.json (<gpu>: h200, h100, ... from nvidia-smi), or
# starts from the committed bench/results/ one when that was measured at this evaluator; it takes
# SMOKE_S seconds at most (default 560 times WALL_X); families whose tasks changed in the data
# since run again, and so do those named in SMOKE_REDO (comma-separated). `evalspeed` scores a
# GRPO step's shape of C->CUDA candidates, EVALPER (16) of each of EVALN (4) pool tasks, with
# EVALWORKERS (default "1 2 4") workers per GPU (bench/train_eval_speed.py, cold cache,
# EVALSPEED_S seconds at most, default 540): whether several workers per GPU pay. (64 tasks of
# one candidate each spent the whole 400 s on preparing the pool, H200 2026-12-05.)
# Not call-sized: all groups in one background job that outlives the calls (bench/device_bg.sh),
# with WALL_X=3 so that no group is cut at a call's limit:
#   WALL_X=3 bash bench/device_bg.sh start verify -- bash bench/gpu_suite.sh execute smoke evalspeed fast bench torch
# Each group's verbose log goes to $OUT/gpu_<group>.log as the tests run (one line per test,
# so a call cut off by its limit still says what passed); the last lines are printed.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
P=(python3 -m pytest -m gpu -v -rfEs -p no:cacheprovider --tb=short)
run() {  # run GROUP WALL_S PER_TEST_S PATHS... (WALL_S times WALL_X)
  local g=$1 wall=$(( $2 * ${WALL_X:-1} )) per=$3; shift 3
  echo "== $g: $* (limit ${wall}s, ${per}s per test)"
  timeout "$wall" "${P[@]}" --timeout "$per" "$@" > "$OUT/gpu_$g.log" 2>&1
  echo "rc=$?" >> "$OUT/gpu_$g.log"
  grep -E "FAILED|ERROR|passed|failed|rc=" "$OUT/gpu_$g.log" | tail -12
}
T=tests/execute/pytorch/test_gpu.py  # its three batch tests build ~20 extensions each
HEAVY=("$T::test_adversarial_corpus" "$T::test_sample_torch_implementations_pass_the_evaluator"
       "$T::test_torch_faults_get_their_status_and_the_next_candidate_is_ok")
[ $# -gt 0 ] || set -- fast execute torch bench
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1
  nvcc --version 2>&1 | tail -2; python3 -c "import torch; print('torch', torch.__version__)" 2>&1
  git log -1 --format='commit %h' 2>/dev/null
  python3 -c "from cudaperf.execute.build import evaluator_fingerprint as f; print('evaluator', f())" 2>&1
} > "$OUT/env.txt"  # what every log here was measured with
for g in "$@"; do
  case "$g" in
    fast) run fast 240 150 tests/tasks tests/analyze tests/datagen tests/train ;;  # SmolLM2 GRPO steps: ~1-2 min each
    execute) run execute 330 150 tests/execute "${HEAVY[@]/#/--deselect=}" ;;
    torch) run torch 570 400 "${HEAVY[@]}" ;;
    bench) run bench 300 280 tests/bench ;;  # the dataset smoke's largest families
    smoke)
      gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 \
        | grep -oiE '[a-z][0-9]{2,4}[a-z]*' | head -1 | tr '[:upper:]' '[:lower:]')
      lim=${SMOKE_S:-$(( 560 * ${WALL_X:-1} ))}
      echo "== smoke: bench/eval_dataset_smoke.py on ${gpu:=gpu} (limit ${lim}s)"
      timeout "$lim" python3 bench/eval_dataset_smoke.py \
        --out "$OUT/eval_dataset_smoke_$gpu.json" \
        --seed-from "bench/results/eval_dataset_smoke_$gpu.json" \
        ${SMOKE_REDO:+--redo "$SMOKE_REDO"} > "$OUT/gpu_smoke.log" 2>&1
      echo "rc=$?" >> "$OUT/gpu_smoke.log"
      tail -4 "$OUT/gpu_smoke.log" ;;
    evalspeed)
      echo "== evalspeed: bench/train_eval_speed.py, ${EVALWORKERS:-1 2 4} workers per GPU"
      rm -rf /tmp/cudaperf_evalspeed  # a cold start: no references or baselines cached
      timeout "${EVALSPEED_S:-540}" python3 bench/train_eval_speed.py --n "${EVALN:-4}" \
        --per-task "${EVALPER:-16}" \
        --cache-dir /tmp/cudaperf_evalspeed --workers-per-gpu ${EVALWORKERS:-1 2 4} \
        --out "$OUT/train_eval_speed.json" > "$OUT/gpu_evalspeed.log" 2>&1
      echo "rc=$?" >> "$OUT/gpu_evalspeed.log"
      tail -10 "$OUT/gpu_evalspeed.log" ;;
    *) echo "gpu_suite: unknown group $g (fast, execute, torch, bench, smoke, evalspeed)" >&2; exit 2 ;;
  esac
done

#!/usr/bin/env bash
# Baselines of `cudaperf bench` on the GPU machine: scripted:naive (lower reference),
# scripted:best (each task's fastest known implementation: upper reference) and the untrained
# SmolLM2-135M-Instruct on one fixed subset of the test families, then one comparison.
#
#   bash bench/bench_suite.sh quick [ROOT]   # 6 test-family tasks (1 per family), 2 samples,
#                                            # 1 turn: a few minutes warm
#   bash bench/bench_suite.sh full  [ROOT]   # 60 test-family tasks (10 per family), 4 samples
#
# Evaluator settings are lighter than the defaults to spare device time (quick: 20 trials,
# 0.5 s per config; full: 30 trials, 1 s); every run.json records them.
# ROOT defaults to $OUT (the device call's return folder) or bench/results/bench. Each run goes
# to ROOT/MODE/heldout/{naive,best,smollm2}, the comparison to ROOT/MODE/heldout/compare; a
# rerun of the same command resumes every run (finished tasks are skipped), so a call cut off
# by its time limit loses at most the tasks in flight. Optional public suites, read from
# checkouts carried to the machine: KB=PATH (KernelBench root: levels 1-2) and BT=FILE
# (BabelTower test JSONL) add ROOT/MODE/kernelbench and ROOT/MODE/babeltower (naive/best
# only where the suite has implementations: BabelTower has, KernelBench has none);
# HOLDOUT=RUN/holdout.json (a training run's manifest) adds ROOT/MODE/train-unseen; ADAPTER=DIR
# adds a run "trained" (SmolLM2 + that adapter) beside every "smollm2" run.
# Note: KernelBench and BabelTower tasks are new to the evaluator, so their first run pays
# for references and baselines on every config: expect the first run of a suite to be slower.
# On the device: `source scripts/device_env.sh;` first; SmolLM2 needs its GGUF carried
# (bash scripts/device_model.sh prints the calls); without it that run is skipped, saying so.
set -uo pipefail
cd "$(dirname "$0")/.."
MODE=${1:-quick}
ROOT=${2:-${OUT:-bench/results/bench}}
case "$MODE" in
  quick) SUB=(--limit 6 --tasks-per-family 1); S=2; EV=(--trials 20 --time-budget 0.5 --cpu-time-budget 0.5) ;;
  full) SUB=(--limit 60 --tasks-per-family 10); S=4; EV=(--trials 30 --time-budget 1.0 --cpu-time-budget 1.0) ;;
  *) echo "usage: bash bench/bench_suite.sh quick|full [ROOT]" >&2; exit 2 ;;
esac
CP=(python3 -m cudaperf)
COMMON=(--samples "$S" --turns 1 --seed 0 --ranker none --bootstrap 1000 "${EV[@]}")

one() {  # one() SUITE_DIR MODEL NAME SUITE_ARGS...
  local dir=$1 model=$2 name=$3; shift 3
  local extra=()
  [ "$model" = smollm2 ] && extra=(--max-tokens 1024)
  echo "== $model on $* -> $ROOT/$MODE/$dir/$name"
  "${CP[@]}" bench run --model "$model" "$@" "${SUB[@]}" "${COMMON[@]}" "${extra[@]}" \
    --out "$ROOT/$MODE/$dir/$name" || echo "bench_suite: $model on $dir did not finish (see above)"
}

lm() {  # lm SUITE_DIR SUITE_ARGS...: the untrained SmolLM2, and SmolLM2 + $ADAPTER if given
  local dir=$1; shift
  one "$dir" smollm2 smollm2 "$@"
  if [ -n "${ADAPTER:-}" ]; then one "$dir" smollm2 trained "$@" --adapter "$ADAPTER"; fi
}

for m in naive best; do one heldout "scripted:$m" "$m" --suite heldout; done
lm heldout --suite heldout
runs=()
for r in naive best smollm2 trained; do [ -f "$ROOT/$MODE/heldout/$r/run.json" ] && runs+=("$ROOT/$MODE/heldout/$r"); done
[ "${#runs[@]}" -ge 2 ] && "${CP[@]}" bench compare "${runs[@]}" --out "$ROOT/$MODE/heldout/compare"

if [ -n "${KB:-}" ]; then lm kernelbench --suite kernelbench:1,2 --suite-path "$KB"; fi
if [ -n "${HOLDOUT:-}" ]; then
  for m in naive best; do one train-unseen "scripted:$m" "$m" --suite train-unseen --suite-path "$HOLDOUT"; done
  lm train-unseen --suite train-unseen --suite-path "$HOLDOUT"
fi
if [ -n "${BT:-}" ]; then
  for m in naive best; do one babeltower "scripted:$m" "$m" --suite babeltower --suite-path "$BT"; done
  lm babeltower --suite babeltower --suite-path "$BT"
fi
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$ROOT/$MODE/gpu.txt" 2>/dev/null || true
echo "bench_suite: done; reports under $ROOT/$MODE (report.html / report.md per run)"

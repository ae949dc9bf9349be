#!/usr/bin/env bash
# Issue #18's behaviour check: `cudaperf data measure` on a fixed sample of the dataset with the
# code from before the redesign (e4a0cb0's src/, carried in .runs/before/src) and with this
# tree's, in the order after, before, after again (the two `after` runs are the noise floor).
# Each run from a cold build cache of its own, the same secret salt, the same sample.
# The nine result files are packed after every run into one $OUT/measure_before_after.tgz (the
# device tool brings back at most 8 files a call); unpack it and point measure_compare.py there.
#   mkdir -p .runs/before && git archive e4a0cb0 src | tar -x -C .runs/before   # here
#   source scripts/device_env.sh; bash bench/measure_before_after.sh          # carry .whl, .runs
#   python bench/measure_compare.py OUTDIR                                     # here, after
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
RES=${RES:-/tmp/mba_results}; mkdir -p "$RES"
SHARD=${SHARD:-0/200}; SALT=${SALT:-18}; WALL=${WALL:-100}
[ -d .runs/before/src/cudaperf ] || { echo "measure_before_after: .runs/before/src is missing; make it with git archive (see the header)" >&2; exit 2; }
for run in ${RUNS:-after before after2}; do
  src=$PWD/src; [ "$run" = before ] && src=$PWD/.runs/before/src
  cache=/tmp/mba_$run; rm -rf "$cache" "$RES/measure_$run.jsonl"
  echo "== $run: $src, shard $SHARD, salt $SALT (limit ${WALL}s)"
  PYTHONPATH=/tmp/site:$src timeout -s INT -k 15 "$WALL" python3 -m cudaperf data measure \
    data/tasks.jsonl.gz --shard "$SHARD" --seed-salt "$SALT" --cache-dir "$cache" \
    --out "$RES/measure_$run.jsonl" --summary "$RES/summary_$run.json" --progress-every 20 \
    --run-timeout 30 > "$RES/measure_$run.log" 2>&1
  echo "rc=$?" >> "$RES/measure_$run.log"; tail -n 3 "$RES/measure_$run.log"
  tar -C "$RES" -czf "$OUT/measure_before_after.tgz" .
done

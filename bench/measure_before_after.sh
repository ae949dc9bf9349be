#!/usr/bin/env bash
# Issue #18's behaviour check: `cudaperf data measure` on a fixed sample of the dataset with the
# code from before the redesign (e4a0cb0's src/, carried in .runs/before/src) and with this
# tree's, in the order after, before, after again (the two `after` runs are the noise floor).
# Each run from a cold build cache of its own, the same secret salt, the same sample. Default
# order: warm (fills load_cuda's shared cache of PyTorch extensions, so that no compared run
# compiles while it times; compared with nothing), after, before, after2, before2: each tree
# twice, alternating, so a drift over the call shows as one and not as a difference.
# The before tree gets one fix that is not part of the comparison: its PyTorch child hung at
# exit after its last row (fixed in this tree by procpool.stop), which cost every run its
# whole time limit; the script patches that line in .runs/before (once, said on stdout).
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
TT=.runs/before/src/cudaperf/datagen/measure/torch_tasks.py
if [ -f "$TT" ] && ! grep -q "patched: exit fix" "$TT"; then
  python3 - "$TT" <<'PY'
import sys, pathlib
p = pathlib.Path(sys.argv[1])
old = "        pool.shutdown(wait=False, cancel_futures=True)\n"
new = ("        procs = list((pool._processes or {}).values())  # patched: exit fix\n"
       "        pool.shutdown(wait=False, cancel_futures=True)\n"
       "        for p in procs:\n            p.terminate()\n            p.join(2)\n")
p.write_text(p.read_text().replace(old, new, 1))
PY
  echo "measure_before_after: patched the before tree's PyTorch-child exit hang ($TT)"
fi
for run in ${RUNS:-warm after before after2 before2}; do
  src=$PWD/src; case "$run" in before*) src=$PWD/.runs/before/src ;; esac
  cache=/tmp/mba_$run; rm -rf "$cache" "$RES/measure_$run.jsonl"
  echo "== $run: $src, shard $SHARD, salt $SALT (limit ${WALL}s)"
  PYTHONPATH=/tmp/site:$src timeout -s INT -k 15 "$WALL" python3 -m cudaperf data measure \
    data/tasks.jsonl.gz --shard "$SHARD" --seed-salt "$SALT" --cache-dir "$cache" \
    --out "$RES/measure_$run.jsonl" --summary "$RES/summary_$run.json" --progress-every 20 \
    --run-timeout 30 > "$RES/measure_$run.log" 2>&1
  echo "rc=$?" >> "$RES/measure_$run.log"; tail -n 3 "$RES/measure_$run.log"
  tar -C "$RES" -czf "$OUT/measure_before_after.tgz" .
done

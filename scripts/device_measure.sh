#!/usr/bin/env bash
# Measure the dataset on the GPU machine in resumable slices (one device call each).
#
# Here, before each call (keeps what earlier calls measured):
#   mkdir -p .runs            # git-ignored (.git/info/exclude has /.runs/)
# Device call (carry [".whl", ".runs"]), SECONDS_LEFT = how long this call may measure:
#   bash scripts/device_measure.sh 480
# Here, after the call, take the results back before the next one:
#   cp /work/.device/<n>/measure.jsonl.gz .runs/ && gunzip -f .runs/measure.jsonl.gz
# When the summary says nothing is left:
#   cudaperf tasks attach .runs/measure.jsonl data/tasks.jsonl.gz --verified-only --out data/tasks.jsonl.gz
# Every GPU the machine has is used (one runner per GPU); the results JSONL resumes, so a
# slice cut short by its time limit loses only the task in flight.
set -uo pipefail
cd "$(dirname "$0")/.."
LEFT=${1:-480}
source scripts/device_env.sh
mkdir -p .runs "${OUT:-/tmp/out}"
OUT=${OUT:-/tmp/out}
nvidia-smi --query-gpu=index,name,driver_version --format=csv | tee "$OUT/gpus.txt"
# Snapshot the results into $OUT every 20 s: what is under $OUT comes back even when the call
# is cut off, and the results file itself is over the size of a returned file.
( while sleep 20; do gzip -c .runs/measure.jsonl > "$OUT/.m.tmp" 2>/dev/null &&
    mv "$OUT/.m.tmp" "$OUT/measure.jsonl.gz"; done ) &
SNAP=$!
# INT first (the run writes its summary), KILL 20 s later: worker pools can ignore INT.
timeout -k 20 --signal=INT "$LEFT" python3 -m cudaperf data measure "${TASKS:-data/tasks.jsonl.gz}" \
  --out .runs/measure.jsonl --summary "$OUT/measure_summary${TAG:-}.json" --gpus all \
  --progress-every 20 --run-timeout 30 ${MEASURE_ARGS:-} 2>&1 | tee -a "$OUT/measure.log" | tail -n 40
pkill -KILL -f "multiprocessing.spawn|bulk.runner|-m cudaperf data measure" 2>/dev/null
kill "$SNAP" 2>/dev/null
gzip -c .runs/measure.jsonl > "$OUT/measure.jsonl.gz"
ls .runs/measure.runner-gpu*.log >/dev/null 2>&1 && tail -n 200 .runs/measure.runner-gpu*.log > "$OUT/runner_logs.txt"
python3 - <<'PY'
import collections, json
rows = [json.loads(l) for l in open(".runs/measure.jsonl") if l.strip()]
print(len(rows), "rows", dict(collections.Counter(r["status"] for r in rows)))
PY

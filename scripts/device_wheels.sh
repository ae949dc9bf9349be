#!/usr/bin/env bash
# Download the wheels that the GPU machine lacks (its image has torch, numpy, typer, rich,
# pyarrow, sympy, pytest but not these) into .whl/ for the device tool's `carry`.
# (gguf: the bundled SmolLM2 GGUF; lightgbm: the default feature ranker; trl, datasets, dill and
# multiprocess: `cudaperf train` (TRL 1.16 runs on the image's transformers 5.17); peft, narwhals,
# accelerate, pandas, xxhash, scipy and psutil are there already.)
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .whl
for p in pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.7.0 typing-inspection==0.4.5 \
         tree-sitter==0.26.1 tree-sitter-cuda==0.21.2 gguf==0.19.0 lightgbm==4.7.0 \
         trl==1.16.0 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19; do
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d .whl "$p"
done
ls .whl

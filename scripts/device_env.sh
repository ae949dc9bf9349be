# Source this at the start of a command on the GPU machine (after carrying .whl/):
#   source scripts/device_env.sh
# Installs the carried wheels into /tmp/site and puts them and src/ on PYTHONPATH.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl >/dev/null 2>&1 || echo "device_env: wheel install failed" >&2
export PYTHONPATH=/tmp/site:$PWD/src${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1
# nvcc lives in /usr/local/cuda/bin there, which is not always on PATH.
case ":$PATH:" in *:/usr/local/cuda/bin:*) ;; *) export PATH=$PATH:/usr/local/cuda/bin ;; esac

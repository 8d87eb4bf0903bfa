#!/usr/bin/env bash
# The check a lent GPU runs: no network, no install, no vLLM needed (its smoke runs only when
# `import vllm` works). Uses the machine's own python (torch, transformers) with this checkout on
# PYTHONPATH; at most 8 minutes; one JSON of numbers (default runs/gpu_check/result.json).
#
#   bash benchmarks/gpu_check.sh             # on a CUDA GPU
#   bash benchmarks/gpu_check.sh --dry-run   # every check on CPU at small sizes (CI runs this)
#
# Pure-Python dependencies the image may lack (gymnasium, pettingzoo, rich, tqdm) are installed
# from ./wheels when that folder exists (`pip download -d wheels gymnasium pettingzoo rich tqdm`
# on a machine with network, then carry it); otherwise their absence is reported in one line.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
if [ -z "${PYTHON:-}" ] && [ -x .venv/bin/python ]; then PY=.venv/bin/python; fi
missing=$("$PY" - <<'PY'
import importlib.util
need = ["torch", "transformers", "numpy", "gymnasium", "pettingzoo", "rich", "tqdm", "yaml"]
print(" ".join(m for m in need if importlib.util.find_spec(m) is None))
PY
)
if [ -n "$missing" ] && [ -d wheels ]; then
  "$PY" -m pip install -q --no-index --find-links wheels ${missing//yaml/pyyaml}
  missing=""
fi
if [ -n "$missing" ]; then
  echo "gpu_check: missing Python packages: $missing (carry wheels in ./wheels, see the header)" >&2
  exit 2
fi
if [ "${1:-}" != "--dry-run" ] && command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
fi
PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" TOKENIZERS_PARALLELISM=false \
  timeout 480 "$PY" benchmarks/gpu_check.py "$@"

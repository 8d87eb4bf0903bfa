#!/usr/bin/env bash
# Three real training steps with the vLLM backend on one CUDA GPU, then the rollout speed.
#
#   MODEL=/path/to/Qwen3-0.6B bash benchmarks/gpu_smoke.sh
#
# MODEL is any small transformers causal LM directory (default: the hub id Qwen/Qwen3-0.6B, which
# needs network access to download). Installs the vllm extra (vLLM 0.33.0 and its CUDA torch) into
# its own virtual environment. Prints generated tokens/s per step and fails if anything breaks.
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL="${MODEL:-Qwen/Qwen3-0.6B}"
OUT="${OUT:-runs/gpu_smoke}"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
python3 -m venv .venv-gpu
.venv-gpu/bin/pip install -q -e '.[vllm]'
.venv-gpu/bin/python -m trainers --model "$MODEL" --backend vllm --recipe spiral --steps 3 \
  --games KuhnPoker-v0,TicTacToe-v0 --samples-per-step 64 --games-in-flight 64 --max-new-tokens 512 \
  --eval-every 1000 --eval-games 4 --eval-opponents random --eval-env-ids KuhnPoker-v0:rounds=1 \
  --save-every 1000 --no-plots --output-dir "$OUT"
.venv-gpu/bin/python - "$OUT" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(f"{sys.argv[1]}/metrics.jsonl") if '"time_s"' in l]
for r in rows:
    print(f"step {r['step']}: {r['samples']} turns, {r['generated_tokens_per_s']:.0f} generated tokens/s, "
          f"rollout {r['rollout_s']:.1f}s, update {r['update_s']:.1f}s, loss {r.get('loss', float('nan')):.4f}")
assert len(rows) == 3, "expected three training steps"
print("gpu smoke: OK")
PY

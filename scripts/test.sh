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
# OpenEnv's client cannot share a venv with verifiers (mcp 1.x against 2.0): its test runs in a venv of its own.
python3 -m venv .venv-openenv
.venv-openenv/bin/pip install -q -e '.[integrations-openenv]' pytest
.venv/bin/ruff check .
set +e
.venv/bin/python -m pytest "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests: failing" >&2
fi
if [ "$#" -eq 0 ]; then  # the whole suite: also what needs OpenEnv's client, which the run above skipped
  .venv-openenv/bin/python -m pytest tests/test_integrations_openenv.py tests/test_integrations_docs.py
  openenv_rc=$?
  if [ "$rc" -eq 0 ]; then rc=$openenv_rc; fi
fi
set -e
exit "$rc"

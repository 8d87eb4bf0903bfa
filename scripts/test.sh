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
.venv/bin/ruff check .
set +e
.venv/bin/python -m pytest "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests: failing" >&2
fi
exit "$rc"

#!/usr/bin/env bash
# Proves the README's install: with only the given venv (made by `pip install -e '.[train]'`, nothing
# from the dev extra), every spiral-arena subcommand shows its --help and does one tiny real job.
# Any failing command or any traceback on stderr fails the script. Outputs go to a temporary folder.
#
#   bash scripts/smoke.sh .venv
set -euo pipefail
venv="$(cd "${1:?usage: bash scripts/smoke.sh VENV}" && pwd)"
repo="$(cd "$(dirname "$0")/.." && pwd)"
export PATH="$venv/bin:$PATH"
work="$(mktemp -d)"
server=""
server_log=serve.log
cleanup() {
  local status=$?
  if [ -n "$server" ]; then
    kill "$server" 2>/dev/null || true
    if [ "$status" -ne 0 ]; then tail -n 40 "$work/$server_log" >&2; fi
  fi
  rm -rf "$work"
}
trap cleanup EXIT
cd "$work"  # a clean directory: nothing found by accident in the checkout

# Run one command; stop on a non-zero exit or a traceback, showing what it printed.
step() {
  local started=$SECONDS
  if ! "$@" >out.txt 2>err.txt || grep -q Traceback err.txt; then
    echo "smoke: FAILED: $*" >&2
    tail -n 40 out.txt err.txt >&2
    exit 1
  fi
  echo "smoke: ok ($((SECONDS - started)) s): $*"
}

# Fail with a message unless the command (a test of what the last step wrote) succeeds.
check() {
  "$@" || { echo "smoke: FAILED check: $*" >&2; exit 1; }
}

step spiral-arena --version
step spiral-arena --help
for command in envs play serve env-server web train collect sft leaderboard eval; do
  step spiral-arena "$command" --help
done

step spiral-arena envs
check grep -q KuhnPoker-v0 out.txt
step spiral-arena play KuhnPoker-v0 --p0 expert --p1 random --games 5 --seed 0 --quiet
check grep -q "5 game(s) of KuhnPoker-v0" out.txt
step spiral-arena collect --agent expert --games KuhnPoker-v0 --n-games 5 --out expert.jsonl
check test -s expert.jsonl
step spiral-arena sft --data expert.jsonl --model tiny --steps 2 --batch 4 --output-dir sft
check test -f sft/model/config.json
step spiral-arena train --output-dir run --steps 2 --sft-steps 5 --samples-per-step 64 --eval-games 2 --no-plots
check test -f run/checkpoints/step_000002/spiral_arena.json
step spiral-arena leaderboard run --agents random,expert --games KuhnPoker-v0 --games-per-pair 4 \
  --db board.sqlite --no-progress
step spiral-arena leaderboard show --db board.sqlite
step python -c "from trainers.tiny import create_tiny; create_tiny('tiny', ['KuhnPoker-v0'])"
step spiral-arena eval --model hf:tiny --benchmarks math500 --data-dir "$repo/tests/data/evals" --limit 1 \
  --max-new-tokens 8 --output-dir eval --no-progress
check test -f eval/results.json

# serve: a free port, one chat request answered with a legal move, then stop it
port=$(python -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
spiral-arena serve --agent random --port "$port" >serve.log 2>&1 &
server=$!
step python - "$port" <<'PY'
import json
import sys
import time
import urllib.request

url = f"http://127.0.0.1:{sys.argv[1]}/v1/chat/completions"
body = {"model": "random", "messages": [{"role": "user", "content": "Your turn. Legal actions: [check], [bet]."}]}
request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
deadline = time.monotonic() + 60
while True:
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            answer = json.load(response)["choices"][0]["message"]["content"]
        break
    except OSError:  # not listening yet
        if time.monotonic() > deadline:
            raise
        time.sleep(0.3)
assert "[check]" in answer or "[bet]" in answer, answer
print(answer)
PY
kill "$server"
wait "$server" || true  # uvicorn exits non-zero on SIGTERM
server=""
check test -s serve.log
if grep -q Traceback serve.log; then
  cat serve.log >&2
  exit 1
fi

# env-server: a free port, one game of Kuhn poker over its WebSocket (OpenEnv's protocol), then stop it
port=$(python -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
server_log=env-server.log
spiral-arena env-server --env KuhnPoker-v0:rounds=1 --opponent expert --port "$port" >env-server.log 2>&1 &
server=$!
step python - "$port" <<'PY'
import json
import sys
import time

from websockets.sync.client import connect

deadline = time.monotonic() + 60
while True:
    try:
        ws = connect(f"ws://127.0.0.1:{sys.argv[1]}/ws", open_timeout=10)
        break
    except OSError:  # not listening yet
        if time.monotonic() > deadline:
            raise
        time.sleep(0.3)
with ws:
    ws.send(json.dumps({"type": "reset", "data": {"seed": 0}}))
    result = json.loads(ws.recv())["data"]
    while not result["done"]:
        move = result["observation"]["info"]["legal_actions"][0]
        ws.send(json.dumps({"type": "step", "data": {"message": move}}))
        result = json.loads(ws.recv())["data"]
print(result["reward"], result["observation"]["info"]["outcome"])
PY
kill "$server"
wait "$server" || true
server=""
check test -s env-server.log
if grep -q Traceback env-server.log; then
  cat env-server.log >&2
  exit 1
fi
# web: a free port, the page, one watched game of TicTacToe between expert and random, stored; then stop it
port=$(python -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
server_log=web.log
spiral-arena web --db web.sqlite --port "$port" >web.log 2>&1 &
server=$!
step python - "$port" <<'PY'
import json
import sys
import time
import urllib.request

base = f"http://127.0.0.1:{sys.argv[1]}"


def post(path, body):
    request = urllib.request.Request(base + path, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.load(response)


deadline = time.monotonic() + 60
while True:
    try:
        with urllib.request.urlopen(base + "/", timeout=10) as response:
            assert b"spiral-arena" in response.read()
        break
    except OSError:  # not listening yet
        if time.monotonic() > deadline:
            raise
        time.sleep(0.3)
match = post("/api/matches", {"game": "TicTacToe-v0", "seats": ["expert", "random"], "seed": 0})
while not match["over"]:
    match = post(f"/api/matches/{match['id']}/step", {"at": len(match["moves"])})
assert match["stored"]["new"], match
print(match["result"]["ends"][0])
PY
kill "$server"
wait "$server" || true
server=""
check test -s web.sqlite
if grep -q Traceback web.log; then
  cat web.log >&2
  exit 1
fi
echo "smoke: all subcommands ran ($SECONDS s)"

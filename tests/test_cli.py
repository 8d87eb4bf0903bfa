"""The spiral-arena command as a user runs it: a real subprocess."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import spiral_arena

REPO = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "spiral_arena.cli"]


def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], cwd=REPO, input=stdin, capture_output=True, text=True, timeout=300)


def test_envs_lists_every_id_with_a_description_and_its_options():
    out = run("envs")
    assert out.returncode == 0
    lines = [line for line in out.stdout.splitlines() if line and not line[0].isspace()]
    described = [line for line in lines if line.split()[0] in spiral_arena.list_envs()]
    assert [line.split()[0] for line in described] == spiral_arena.list_envs()
    assert all(len(line.split(maxsplit=1)[1]) > 20 for line in described)
    kuhn = out.stdout.split("KuhnPoker-v0", 1)[1].splitlines()[1]
    assert kuhn.split() == ["options:", "rounds=5,", "reward='win',", "ante=1,", "first_player=0"]
    tictactoe = out.stdout.split("TicTacToe-v0", 1)[1].splitlines()[1]  # options that change only the text
    assert tictactoe.split() == ["text", "options:", "board='grid'"]
    assert "ID:key=value;key=value" in out.stdout


def test_version_and_every_subcommand_has_help():
    out = run("--version")
    assert out.returncode == 0 and out.stdout.strip() == f"spiral-arena {spiral_arena.__version__}"
    for command in ("envs", "play", "serve", "env-server", "train", "collect", "sft", "leaderboard", "eval"):
        out = run(command, "--help")
        assert out.returncode == 0 and "usage: spiral-arena " + command in out.stdout, command
    out = run("train", "--help")
    # help comes from the config's field docstrings, with the default
    assert "Evaluate the warm-started policy before the first step too" in " ".join(out.stdout.split())


def test_env_options_work_in_play_and_are_checked():
    out = run(
        "play", "KuhnPoker-v0:rounds=1", "--p0", "expert", "--p1", "random", "--games", "6", "--quiet", "--seed", "0"
    )
    assert out.returncode == 0, out.stderr
    assert "6 game(s) of KuhnPoker-v0:rounds=1" in out.stdout
    out = run("play", "KuhnPoker-v0:rounds=0", "--p0", "random")
    assert out.returncode == 2 and "rounds" in out.stderr and "Traceback" not in out.stderr
    out = run("play", "KuhnPoker-v0:colour=red", "--p0", "random")
    assert out.returncode == 2 and "colour" in out.stderr and "valid: rounds, reward, ante" in out.stderr
    out = run("play", "TwentyQuestions-v0:oracle_api_key=sk-secret", "--p0", "random")
    assert out.returncode == 2 and "looks like a secret" in out.stderr and "sk-secret" not in out.stderr


def test_play_validates_everything_up_front_one_line_per_problem():
    out = run("play", "KuhnPoker-v0", "--p0", "hf:/no/such/model", "--p1", "nonsense", "--games", "-3", "--seed", "-1")
    assert out.returncode == 2 and out.stdout == "" and "Traceback" not in out.stderr
    assert out.stderr.splitlines() == [
        "spiral-arena play: error: --p0: 'hf:/no/such/model': model path /no/such/model does not exist; "
        "give a model name (smollm2-135m), a model or checkpoint directory",
        "spiral-arena play: error: --p1: unknown agent spec 'nonsense'; valid forms: random, expert, human, hf:PATH, "
        "vllm:PATH, openai:MODEL, gemini:MODEL, mistral:MODEL, openrouter:MODEL, PROVIDER:MODEL@URL (any "
        "OpenAI-compatible server, e.g. openai:MODEL@http://127.0.0.1:8000/v1)",
        "spiral-arena play: error: --games: must be at least 1, got -3",
        "spiral-arena play: error: --seed: must be an integer in [0, 2**64 - games), got -1",
    ]


def test_collect_and_sft_validate_before_writing(tmp_path):
    out_file = tmp_path / "out.jsonl"
    out = run(
        "collect",
        "--games",
        "Bogus-v0,KuhnPoker-v0:rounds=x",
        "--agent",
        "human",
        "--n-games",
        "0",
        "--out",
        str(out_file),
    )
    assert out.returncode == 2 and not out_file.exists() and "Traceback" not in out.stderr
    errors = out.stderr.splitlines()
    assert len(errors) == 4
    assert "--games: unknown env id 'Bogus-v0'" in errors[0] and "--games: KuhnPoker-v0: rounds" in errors[1]
    assert "--agent: human cannot play here" in errors[2] and "--n-games: must be at least 1, got 0" in errors[3]
    out = run("collect", "--out", str(tmp_path))
    assert out.returncode == 2 and "is a directory" in out.stderr

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": 1\n')
    output_dir = tmp_path / "sft"
    out = run(
        "sft",
        "--data",
        str(bad),
        "--model",
        "/models/missing",
        "--steps",
        "0",
        "--lr",
        "0",
        "--output-dir",
        str(output_dir),
    )
    assert out.returncode == 2 and not output_dir.exists() and "Traceback" not in out.stderr
    errors = out.stderr.splitlines()
    assert errors[0].startswith("spiral-arena sft: error: --model: model path /models/missing does not exist")
    assert errors[1:3] == [
        "spiral-arena sft: error: --steps: must be at least 1, got 0",
        "spiral-arena sft: error: --lr: must be greater than 0, got 0.0",
    ]
    assert errors[3] == f"spiral-arena sft: error: --data: {bad}:1: not a JSON object (Expecting ',' delimiter)"
    out = run("sft", "--data", str(tmp_path / "missing.jsonl"))
    assert out.returncode == 2 and "--data:" in out.stderr and "is not a file" in out.stderr


def test_missing_model_paths_fail_fast_in_train_eval_and_leaderboard(tmp_path):
    out = run("train", "--model", "/models/Qwen3-4B-Base", "--output-dir", str(tmp_path / "run"))
    assert out.returncode == 2 and not (tmp_path / "run").exists()
    assert "model: model path /models/Qwen3-4B-Base does not exist" in out.stderr and "Traceback" not in out.stderr
    out = run("eval", "--model", "hf:/models/missing", "--benchmarks", "math500", "--output-dir", str(tmp_path / "e"))
    assert out.returncode == 2 and not (tmp_path / "e").exists()
    assert "model path /models/missing does not exist" in out.stderr and "Repo id" not in out.stderr
    db = tmp_path / "lb.sqlite"
    out = run("leaderboard", "run", "--agents", "random,hf:/models/missing", "--db", str(db))
    assert out.returncode == 2 and not db.exists() and "model path /models/missing does not exist" in out.stderr


def test_a_missing_optional_package_is_one_line_naming_the_extra():
    """The import machinery itself refuses the module (None in sys.modules), as when it is not installed."""
    code = (
        "import sys; sys.modules['scipy'] = None; from spiral_arena.cli import main; "
        "sys.exit(main(['leaderboard', 'run', '--agents', 'random,expert', '--games-per-pair', '2', '--db', "
        "sys.argv[1]]))"
    )
    with_db = subprocess.run(
        [sys.executable, "-c", code, "/nonexistent-dir/lb.sqlite"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert with_db.returncode == 2, with_db.stderr
    assert with_db.stderr.strip() == (
        "spiral-arena leaderboard: error: this command needs 'scipy', which is not installed: "
        "pip install -e '.[leaderboard]' (or '.[train]', all)"
    )


def test_play_prints_moves_and_a_summary():
    out = run("play", "TicTacToe-v0", "--p0", "expert", "--p1", "random", "--games", "4", "--seed", "0")
    assert out.returncode == 0, out.stderr
    assert "--- game 1 (seed 0) ---" in out.stdout and "player_0: [" in out.stdout
    assert "4 game(s) of TicTacToe-v0" in out.stdout
    summary = out.stdout.split("4 game(s) of TicTacToe-v0")[1]
    assert "player_1 (random): wins 0" in summary  # the expert never loses


def test_a_human_typo_re_prompts_instead_of_losing():
    # cell 9 does not exist and cell 4 is taken after the first move: both are re-asked
    moves = "9\n4\n4\n0\n1\n2\n3\n5\n6\n7\n8\n"
    out = run("play", "TicTacToe-v0", "--p0", "human", "--p1", "random", "--seed", "3", stdin=moves)
    assert out.returncode == 0, out.stderr
    assert "Not accepted: [9] is not a legal action now" in out.stdout
    assert "invalid moves 0" in out.stdout.split("player_0 (human)")[1]


def test_bad_input_is_a_clear_error():
    out = run("play", "TicTacToe-v1", "--p0", "random")
    assert out.returncode == 2 and "unknown env id 'TicTacToe-v1'" in out.stderr and "TicTacToe-v0" in out.stderr
    out = run("play", "TicTacToe-v0", "--p0", "nonsense")
    assert out.returncode == 2 and "unknown agent spec" in out.stderr


def test_agent_specs_take_options_in_every_command():
    out = run("play", "KuhnPoker-v0:rounds=1", "--p0", "expert#alpha=0.3", "--p1", "random#seed=4", "--games", "4",
              "--quiet", "--seed", "0")  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "player_0 (expert#alpha=0.3)" in out.stdout
    out = run("play", "KuhnPoker-v0", "--p0", "openai:gpt#api_key=sk-hidden", "--p1", "random")
    assert out.returncode == 2 and "looks like a secret" in out.stderr and "sk-hidden" not in out.stderr
    out = run("play", "KuhnPoker-v0", "--p0", "expert#alpha", "--p1", "random")
    assert out.returncode == 2 and "write SPEC#NAME=VALUE" in out.stderr


def test_serve_refuses_a_blank_key_instead_of_serving_openly():
    out = run("serve", "--agent", "random", "--api-key", "  ")
    assert out.returncode == 2 and "--api-key: is empty" in out.stderr and "Uvicorn running" not in out.stderr

"""Our games as verifiers (v1) envs, run for real: ``Env.run_episode`` with each seat's agent served by
``spiral-arena serve`` on 127.0.0.1, through verifiers' own harness (its tool-less chat program in a
local process) and interception server. Each recorded reward is checked against the env's own
returns, by replaying the moves the traces recorded on a fresh env with the same seed.

Time: the harness starts its chat program (a Python process importing openai and mcp, ~1.7 s of CPU)
for every turn of every seat, so this module's cost is its number of turns. Hence short games (Kuhn
poker with one round, Twenty Questions with two questions), and every env's episodes run at once
in one module fixture (``played``), so turns of different episodes overlap."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import spiral_arena
from spiral_arena.agents import make_agent
from spiral_arena.integrations.outcome import game_summary, shaped_rewards
from spiral_arena.play import agent_seed

EXTRA = "needs the integrations-verifiers extra: pip install 'spiral-arena[integrations-verifiers]'"
vf = pytest.importorskip("verifiers.v1", reason=EXTRA)
pytest.importorskip("fastapi", reason="needs the api extra")
from test_serve import Server  # noqa: E402

HUB = Path(spiral_arena.__file__).parent / "integrations" / "hub"
VENV_BIN = str(Path(sys.executable).parent)
KEY_VAR = "SPIRAL_TEST_VF_KEY"
TOKEN = "sk-test-VF-TOKEN"


def uv_available() -> bool:
    """verifiers' null harness builds its chat program's environment with uv (the extra installs it)."""
    return shutil.which("uv", path=VENV_BIN + os.pathsep + os.environ.get("PATH", "")) is not None


pytestmark = pytest.mark.skipif(not uv_available(), reason="needs uv (" + EXTRA + ")")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    server = Server(tmp_path_factory.mktemp("serve"), "--agent", "random", "--api-key", TOKEN)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def hub_on_path() -> Iterator[None]:
    """The Hub packages importable by their ids, as ``pip install`` of them would make them."""
    paths = [str(HUB / "spiral-arena-games"), str(HUB / "spiral-arena-twenty-questions")]
    sys.path[:0] = paths
    os.environ["PATH"] = VENV_BIN + os.pathsep + os.environ.get("PATH", "")
    yield
    for path in paths:
        sys.path.remove(path)


def replies(trace) -> list[str]:
    return [node.message.content for node in trace.nodes if node.message.role == "assistant"]


def replay(game: str, seed: int, moves: dict[int, list[str]], opponents: dict[int, object]) -> object:
    """The game played again from the recorded moves (opponent seats by their own seeded agents)."""
    env = spiral_arena.make(game)
    env.reset(seed=seed)
    moves = {seat: list(texts) for seat, texts in moves.items()}
    while not all(env.terminations.values()):
        name = env.agent_selection
        seat = env.possible_agents.index(name)
        if seat in opponents:
            env.step(opponents[seat].act(env.observe(name), env.infos[name]))
        else:
            env.step(moves[seat].pop(0))
    assert all(not rest for rest in moves.values()), "the traces hold moves the game never read"
    return env


KUHN = "KuhnPoker-v0:rounds=1"  # two or three turns a game
TWENTY_QUESTIONS = "TwentyQuestions-v0:max_questions=2;recap=true;words=builtin_train"


@pytest.fixture(scope="module")
def played(served, hub_on_path) -> dict[str, tuple[list, list]]:
    """Every env this module checks, with its tasks and their episodes, all played at once:
    self-play over three seeds (Kuhn, TicTacToe, Kuhn), the learner against our random agent in both
    seats, and Twenty Questions."""
    from spiral_arena_games import GameEnv
    from spiral_arena_twenty_questions import TwentyQuestionsEnv

    from spiral_arena.integrations.verifiers import GameEnvConfig
    from spiral_arena.integrations.verifiers_twenty_questions import TwentyQuestionsEnvConfig

    two_player = [KUHN, "TicTacToe-v0", "LeducHoldem-v0", "ConnectFour-v0"]
    games = {"id": "spiral-arena-games", "games": two_player, "num_tasks": 5, "seed": 11}
    fixed = {"id": "spiral-arena-games", "games": [KUHN], "num_tasks": 2, "seed": 3}
    # recap: each turn message lists the questions so far, as the served agent reads one message alone
    questions = {"id": "spiral-arena-twenty-questions", "games": [TWENTY_QUESTIONS], "num_tasks": 1}
    envs = {
        "self_play": GameEnv(GameEnvConfig(taskset=games, max_concurrent_agents=None)),
        "fixed": GameEnv(
            GameEnvConfig(taskset=fixed, opponent="random", invalid_penalty=-1.5, max_concurrent_agents=None)
        ),
        "twenty_questions": TwentyQuestionsEnv(TwentyQuestionsEnvConfig(taskset=questions)),
    }
    tasks = {name: list(env.taskset) for name, env in envs.items()}
    os.environ[KEY_VAR] = TOKEN
    ctx = vf.ModelContext(model="random", client=vf.EvalClientConfig(base_url=served.url, api_key_var=KEY_VAR))

    async def main() -> list:
        async with contextlib.AsyncExitStack() as stack:
            for env in envs.values():
                await stack.enter_async_context(env.serving())
            runs = [env.run_episode(task, ctx) for name, env in envs.items() for task in tasks[name]]
            return await asyncio.gather(*runs)

    episodes = iter(asyncio.run(main()))
    return {name: (tasks[name], [next(episodes) for _ in tasks[name]]) for name in envs}


def test_self_play_records_each_seats_zero_sum_return_as_the_env_pays_it(played):
    tasks, episodes = played["self_play"]
    assert [t.data.game for t in tasks] == [KUHN, "TicTacToe-v0", "LeducHoldem-v0", "ConnectFour-v0", KUHN]
    assert [t.data.seed for t in tasks] == [11, 12, 13, 14, 15]
    for task, episode in zip(tasks, episodes, strict=True):
        assert episode.ok, episode.errors
        traces = {trace.agent.name: trace for trace in episode.traces}
        assert sorted(traces) == ["player_0", "player_1"]
        env = replay(task.data.game, task.data.seed, {s: replies(traces[f"player_{s}"]) for s in (0, 1)}, {})
        summary = game_summary(env)
        for seat in (0, 1):
            trace = traces[f"player_{seat}"]
            assert trace.agent.trainable
            assert trace.rewards["game"].score == env.returns[seat] == trace.metrics["return"]
            assert trace.info == {**summary, "seat": seat, "seed": task.data.seed}
            assert trace.info["outcome"]["reason"] in ("normal", "invalid_move")
        assert sum(env.returns) == 0.0


def test_a_fixed_opponent_plays_inside_the_env_and_only_the_learner_has_a_trace(played):
    tasks, episodes = played["fixed"]
    assert [t.data.seat for t in tasks] == [0, 1]  # the learner takes both seats in turn
    for task, episode in zip(tasks, episodes, strict=True):
        assert episode.ok, episode.errors
        (trace,) = episode.traces
        seat, seed = task.data.seat, task.data.seed
        assert trace.agent.name == f"player_{seat}"
        opponent = make_agent("random")
        opponent.reset(seed=agent_seed(seed, 1 - seat))
        replayed = replay(task.data.game, seed, {seat: replies(trace)}, {1 - seat: opponent})
        summary = game_summary(replayed)
        assert trace.rewards["game"].score == shaped_rewards(summary, -1.5)[seat]
        assert trace.metrics["return"] == replayed.returns[seat]


def test_twenty_questions_is_judged_by_the_offline_table_oracle(played):
    (task,), (episode,) = played["twenty_questions"]
    assert episode.ok, episode.errors
    (trace,) = episode.traces
    assert trace.agent.name == "questioner"
    replayed = replay(task.data.game, task.data.seed, {0: replies(trace)}, {})
    assert trace.rewards["game"].score == replayed.returns[0]
    assert trace.info["secret"] == replayed.state_.secret
    assert 1 <= trace.metrics["questions"] == len(replayed.state_.turns) <= 2


def test_the_taskset_refuses_bad_games_with_the_reason(hub_on_path):
    from spiral_arena.integrations.verifiers import GameTasksetConfig

    with pytest.raises(ValueError, match="unknown env id 'Kuhn-v0'"):
        GameTasksetConfig(id="spiral-arena-games", games=["Kuhn-v0"])
    with pytest.raises(ValueError, match="two-player games"):
        GameTasksetConfig(id="spiral-arena-games", games=["TwentyQuestions-v0"])
    from spiral_arena.integrations.verifiers import GameEnvConfig

    with pytest.raises(ValueError, match="unknown agent spec"):
        GameEnvConfig(taskset={"id": "spiral-arena-games"}, opponent="nobody")


def test_the_recipes_invalid_move_shaping_pays_the_offender_the_penalty():
    env = spiral_arena.make("KuhnPoker-v0")
    env.reset(seed=0)
    offender = env.possible_agents.index(env.agent_selection)
    env.step("I fold my arms")
    summary = game_summary(env)
    assert summary["offender"] == offender and summary["outcome"]["reason"] == "invalid_move"
    assert summary["invalid_move"]
    assert shaped_rewards(summary) == summary["returns"]  # no penalty: the env's zero-sum -1 / +1
    shaped = shaped_rewards(summary, -1.5)
    assert shaped[offender] == -1.5 and shaped[1 - offender] == 0.5


def test_vf_eval_plays_the_hub_package_against_a_served_agent(served, tmp_path: Path) -> None:
    """The docs' ``vf-eval`` command as a user runs it: the Hub package found by its id (on PYTHONPATH,
    as ``pip install`` of it would make it), our agent behind an OpenAI-compatible URL, the run's
    traces written to disk. Each task's two seats get opposite rewards equal to the game replayed."""
    import json
    import subprocess

    env = {
        **os.environ,
        "PATH": VENV_BIN + os.pathsep + os.environ.get("PATH", ""),
        "PYTHONPATH": os.pathsep.join([str(HUB / "spiral-arena-games"), os.environ.get("PYTHONPATH", "")]),
        KEY_VAR: TOKEN,
    }
    command = [
        str(Path(VENV_BIN) / "vf-eval"), "spiral-arena-games", "-n", "2", "--no-push", "-o", str(tmp_path),
        "--env.taskset.games", KUHN, "TicTacToe-v0", "--env.taskset.seed", "5",
        "--client.base-url", served.url, "--client.api-key-var", KEY_VAR, "--model", "random",
    ]  # fmt: skip
    done = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    [traces_file] = tmp_path.rglob("traces.jsonl")
    results = [json.loads(line) for line in traces_file.read_text().splitlines()]
    assert sorted((r["task"]["data"]["game"], r["task"]["data"]["seed"]) for r in results) == [
        (KUHN, 5),
        ("TicTacToe-v0", 6),
    ]
    for result in results:
        assert result["ok"], result["errors"]
        by_seat = {trace["info"]["seat"]: trace for trace in result["traces"]}
        assert sorted(by_seat) == [0, 1]
        moves = {seat: [n["message"]["content"] for n in t["nodes"] if n["message"]["role"] == "assistant"]
                 for seat, t in by_seat.items()}  # fmt: skip
        replayed = replay(result["task"]["data"]["game"], result["task"]["data"]["seed"], moves, {})
        for seat, trace in by_seat.items():
            expected = replayed.rewards[replayed.possible_agents[seat]]
            assert trace["rewards"]["game"]["score"] == expected
            assert trace["info"]["returns"][seat] == expected

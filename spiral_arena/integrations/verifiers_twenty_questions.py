"""Twenty Questions as a verifiers (v1) environment: one trained ``questioner``, judged by the game's
offline table oracle (``oracle=table``, the default; ``oracle=openai:MODEL@URL`` in the game id puts an
LLM judge there instead, played by our API agent layer, never trained).

Tasks are seeded like ``GameTaskset``'s (``TwentyQuestions-v0`` with options, seed + i); the seed draws
the secret, so a task is one fixed secret. Each question the questioner asks gets the oracle's verdict
as its next user turn; the game's reward (``delta_belief`` or ``success``) is recorded as ``game``, with
the metrics ``return``, ``won`` and ``questions``, and the summary in ``trace.info`` (the secret too).
Taskset id: ``spiral-arena-twenty-questions`` (the Hub package in ``integrations/hub/``).
"""

from __future__ import annotations

from collections.abc import Iterator

from pydantic import Field, field_validator

from spiral_arena.core.env import SEED_LIMIT
from spiral_arena.integrations.outcome import game_summary
from spiral_arena.integrations.verifiers import SEAT_AGENT, GameTask, check_games, play_seats, seeded_tasks
from spiral_arena.registry import GameSpec, make

try:
    import verifiers.v1 as vf
except ImportError as error:
    raise ImportError(
        "spiral_arena.integrations.verifiers_twenty_questions needs verifiers 0.4: "
        "pip install 'spiral-arena[integrations-verifiers]'"
    ) from error

__all__ = ["TwentyQuestionsEnv", "TwentyQuestionsTaskset"]


class TwentyQuestionsTasksetConfig(vf.TasksetConfig):
    games: list[str] = ["TwentyQuestions-v0:words=builtin_train"]
    """Twenty Questions ids with options; the table oracle knows the built-in nouns."""
    seed: int = Field(0, ge=0, lt=SEED_LIMIT)
    num_tasks: int | None = Field(None, ge=1)

    @field_validator("games")
    @classmethod
    def _games_build(cls, games: list[str]) -> list[str]:
        checked = check_games(games, two_players=False)
        for game in checked:
            if GameSpec.parse(game).env_id != "TwentyQuestions-v0":
                raise ValueError(f"{game} is not Twenty Questions; two-player games go to spiral-arena-games")
        return checked


class TwentyQuestionsTaskset(vf.Taskset[GameTask, TwentyQuestionsTasksetConfig]):
    def __init__(self, config: TwentyQuestionsTasksetConfig) -> None:
        super().__init__(config)
        self.INFINITE = config.num_tasks is None

    def load(self) -> Iterator[GameTask]:
        return seeded_tasks(self.config, GameTask)


class TwentyQuestionsEnvConfig(vf.EnvConfig):
    questioner: vf.AgentConfig = vf.AgentConfig(**SEAT_AGENT)


class TwentyQuestionsEnv(vf.Env[TwentyQuestionsEnvConfig]):
    async def run(self, task: GameTask, agents: vf.Agents) -> None:
        data = task.data
        env = make(data.game)
        env.reset(seed=data.seed)
        seat_task = type(task)(data.model_copy(update={"prompt": None}), task.config)
        async with agents.questioner.interaction(seat_task) as questioner:
            await play_seats(env, {0: questioner}, {})
            summary = game_summary(env)
            trace = questioner.trace
            trace.record_reward("game", summary["returns"][0])
            trace.record_metric("return", summary["returns"][0])
            trace.record_metric("won", float(bool(summary["outcome"]) and summary["outcome"]["winner"] is not None))
            trace.record_metric("questions", float(len(env.state_.turns)))
            trace.info.update({**summary, "seat": 0, "seed": data.seed, "secret": env.state_.secret})

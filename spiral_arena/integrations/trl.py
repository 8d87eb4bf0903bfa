"""Our games in TRL's ``GRPOTrainer`` (1.16): an ``environment_factory`` class per game family, and a
``rollout_func`` that plays self-play games with the trainer's own model.

``environment_factory``: one object per rollout, with the opponent inside (TRL runs one seat per
rollout). ``reset(**row)`` reads the dataset row's ``seed`` and ``seat`` (both optional) and returns the
game's opening messages; the ``move`` tool applies the model's move, lets the opponent answer and returns
what the game said since; ``get_reward()`` is the seat's return as the env pays it (or our recipe's
invalid-move shaping with ``invalid_penalty``). A rollout that ends without finishing its game forfeits
it: the env reads the missing move as an invalid one. TRL needs a chat template that renders tool calls.

``selfplay_rollout_func``: each dataset prompt is a game id (options allowed). GRPO's groups are
``num_generations`` copies of one prompt; each group is filled with finished turns of that game, both
seats' (in the order their games end), from self-play games in which the trainer's model plays both
seats (each turn's prompt is that seat's observation, SPIRAL's shape), played by our trainer's own
rollouts (``spiral_arena.rollout.collect``: every waiting seat of the games in flight answered in one call of
the trainer's generation a wave). The extra fields ``game``,
``seat``, ``seed``, ``returns`` (the env's) and ``game_reward`` reach the reward functions;
``game_reward`` (the reward function ``selfplay_reward`` returns it) is the turn's seat's return, shaped
as above. Each turn's prompt is the trainer's chat template around the raw observation, unless
``prompt_ids`` says otherwise: a ``Policy``'s ``prompt_ids_batch`` prompts as our trainer does (its prompt
template; the observation format is the game id's ``obs_format`` option, e.g. ``KuhnPoker-v0:obs_format=last``).

RAE on TRL's side: not possible without replacing TRL internals. TRL subtracts each group's mean reward
(``advantage = reward - group mean``, inside ``GRPOTrainer._generate_and_score_completions``, with no hook
and ``num_generations >= 2``), so no reward function can give ``reward - baseline(game, role)``; and a
group cannot be one (game, role) in general, because a game can end before a seat moves (an invalid
first move), so the turns of a seat are not guaranteed. Use ``scale_rewards="none"`` (Dr.GRPO) for
unscaled group-mean baselines, or prime-rl's ``rae`` (docs/integrations.md) for SPIRAL's estimator.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from spiral_arena.integrations.outcome import RECIPE_INVALID_OPPONENT_REWARD, game_summary, shaped_rewards
from spiral_arena.integrations.text_env import is_over, make_text_env, new_messages
from spiral_arena.models import Completion, Sampling
from spiral_arena.registry import REGISTRY, GameSpec, make
from spiral_arena.rollout import collect

__all__ = [
    "ENVIRONMENTS",
    "GameEnvironment",
    "chat_prompt_ids",
    "environment_class",
    "game_summary",
    "is_over",
    "selfplay_reward",
    "selfplay_rollout_func",
]


class GameEnvironment:
    """One seat of ``ENV_ID`` for TRL's ``environment_factory`` (see the module docstring); subclasses set
    ``ENV_ID`` and, optionally, ``OPPONENT`` (an agent spec) and ``INVALID_PENALTY``."""

    ENV_ID = "KuhnPoker-v0"
    OPPONENT = "random"
    INVALID_PENALTY: float | None = None
    INVALID_OPPONENT_REWARD = RECIPE_INVALID_OPPONENT_REWARD

    def __init__(self) -> None:
        self._text_env = None
        self._sent = 0

    def reset(self, seed: int | None = None, seat: int = 0, **row: Any) -> str:
        """Start a game (the row's ``seed`` and ``seat``); returns the opening messages."""
        self._text_env = make_text_env(self.ENV_ID, seat=int(seat), opponent=self.OPPONENT)
        self._text_env.reset(seed=None if seed is None else int(seed))
        text, self._sent = new_messages(self._text_env, 0)
        return text

    def move(self, action: str) -> str:
        """Play your move in the game.

        Args:
            action: Your move, written as the game asks (for example "[bet]" or "\\boxed{4}").

        Returns:
            What the game says next: the opponent's answer and your new position, or the result.
        """
        if self._text_env is None or is_over(self._text_env):
            raise ValueError("the game is over; no move can be played")
        self._text_env.step(action)
        text, self._sent = new_messages(self._text_env, self._sent)
        return text

    def get_reward(self) -> float:
        """The seat's reward for the game (a game left unfinished is forfeited as an invalid move)."""
        if self._text_env is None:
            raise RuntimeError("reset() was never called")
        if not is_over(self._text_env):
            self._text_env.step("")  # no move: the env's own invalid-move rule ends the game
        seat = self._text_env.env.possible_agents.index(self._text_env.learner)
        summary = game_summary(self._text_env.env)
        return shaped_rewards(summary, self.INVALID_PENALTY, self.INVALID_OPPONENT_REWARD)[seat]


def environment_class(env_id: str, opponent: str = "random", invalid_penalty: float | None = None) -> type:
    """A ``GameEnvironment`` subclass for ``env_id`` (options allowed) against ``opponent``."""
    name = make(env_id).game.name.replace(" ", "").replace("'", "") + "Environment"
    attributes = {"ENV_ID": env_id, "OPPONENT": opponent, "INVALID_PENALTY": invalid_penalty}
    return type(name, (GameEnvironment,), attributes)


# One class per two-player game family, against a random opponent: environment_factory=KuhnPokerEnvironment
_FAMILIES = {spec.env_id: environment_class(spec.env_id) for spec in REGISTRY.values() if len(spec.game().agents) == 2}
KuhnPokerEnvironment = _FAMILIES["KuhnPoker-v0"]
TicTacToeEnvironment = _FAMILIES["TicTacToe-v0"]
ENVIRONMENTS: dict[str, type] = {cls.__name__: cls for cls in _FAMILIES.values()}


def selfplay_reward(completions: list[Any], game_reward: list[float], **kwargs: Any) -> list[float]:
    """The reward function of ``selfplay_rollout_func``: each turn's seat's game reward."""
    return [float(r) for r in game_reward]


def selfplay_rollout_func(
    invalid_penalty: float | None = None,
    invalid_opponent_reward: float = RECIPE_INVALID_OPPONENT_REWARD,
    first_seed: int = 0,
    max_games: int = 1000,
    prompt_ids: Callable[[list[str]], list[list[int]]] | None = None,
    in_flight: int = 4,
) -> Callable[[list[Any], Any], dict[str, list]]:
    """A ``rollout_func`` playing self-play games with the trainer's model (see the module docstring), through
    our trainer's own rollouts (``spiral_arena.rollout.collect``). Each game's reset seed is drawn from one
    generator seeded with ``first_seed``, across calls. A call that has played ``max_games`` games and still
    lacks turns raises (checked between rounds of ``collect``, so the last round may pass it).
    ``prompt_ids``: observations -> their prompt token ids (default: the trainer's chat template around each
    observation as a user message). ``in_flight``: games of each game played at once (our trainer's recipe
    keeps 256 in flight). The function's ``played`` counts the games and turns played over all calls (turns
    past what the groups take are dropped)."""
    rng = np.random.default_rng(first_seed)

    def rollout_func(prompts: list[Any], trainer: Any) -> dict[str, list]:
        size = trainer.num_generations
        wanted = [str(prompts[g * size]).strip() for g in range(len(prompts) // size)]  # each group's game
        need = {game: size * wanted.count(game) for game in set(wanted)}
        generation = TrainerGeneration(trainer, prompt_ids or chat_prompt_ids(trainer.processing_class))
        pools = _play_selfplay(generation, need, rng, max_games, invalid_penalty, invalid_opponent_reward, in_flight)
        rollout_func.played["games"] += sum(len({t["seed"] for t in pool}) for pool in pools.values())
        rollout_func.played["turns"] += sum(len(pool) for pool in pools.values())
        samples = [pools[game].pop(0) for game in wanted for _ in range(size)]
        out = {key: [sample[key] for sample in samples] for key in samples[0]}
        if all(lp is None for lp in out["logprobs"]):
            out["logprobs"] = None  # transformers generation: TRL computes the old log-probs itself
        return out

    rollout_func.played = {"games": 0, "turns": 0}
    return rollout_func


class TrainerGeneration:
    """A TRL trainer's generation as our rollouts call a policy (``spiral_arena.rollout.Answers``): the prompts
    rendered by ``prompt_ids``, one ``GRPOTrainer._generate_single_turn`` call a wave (transformers or vLLM, as
    the trainer is set, at its own sampling settings: the ``sampling`` and ``seed`` our rollouts pass are not
    used), the completions decoded by its tokenizer. A completion shorter than ``max_completion_length`` ended
    at a stop token; log-probs are None where the trainer's generation reports none (transformers)."""

    def __init__(self, trainer: Any, prompt_ids: Callable[[list[str]], list[list[int]]]) -> None:
        self.trainer = trainer
        self.prompt_ids = prompt_ids
        args = trainer.args
        self.sampling = Sampling(args.temperature, args.top_p if args.top_p is not None else 1.0,
                                 args.max_completion_length)  # fmt: skip

    def answer_batch(
        self, observations: list[str], sampling: Sampling, seed: int
    ) -> tuple[list[list[int]], list[Completion], list[str]]:
        prompts = self.prompt_ids(observations)
        completion_ids, logprobs = self.trainer._generate_single_turn(prompts, None, {}, 1)
        limit = self.sampling.max_new_tokens
        completions = [
            Completion(list(ids), None if logprobs is None else logprobs[i], len(ids) < limit)
            for i, ids in enumerate(completion_ids)
        ]
        texts = self.trainer.processing_class.batch_decode(completion_ids, skip_special_tokens=True)
        return prompts, completions, texts


def chat_prompt_ids(tokenizer: Any) -> Callable[[list[str]], list[list[int]]]:
    """The default prompts of ``selfplay_rollout_func``: ``tokenizer``'s chat template around each raw
    observation, as one user message, with the generation prompt."""

    def render(observations: list[str]) -> list[list[int]]:
        out = []
        for observation in observations:
            chat = [{"role": "user", "content": observation}]
            ids = tokenizer.apply_chat_template(chat, add_generation_prompt=True, tokenize=True)
            out.append(list(ids["input_ids"] if hasattr(ids, "keys") else ids))
        return out

    return render


def _play_selfplay(
    generation: TrainerGeneration,
    need: dict[str, int],
    rng: np.random.Generator,
    max_games: int,
    invalid_penalty: float | None,
    invalid_opponent_reward: float,
    in_flight: int = 4,
) -> dict[str, list[dict[str, Any]]]:
    """Finished turns of each game, both seats', in the order their games end, at least ``need`` of each.
    ``collect`` plays the games still short of their need, each chosen in proportion to the turns it lacks,
    ``in_flight`` games a game at once, until every game has its turns; no game is cut short."""
    specs = {game: GameSpec.parse(game) for game in need}
    pools: dict[str, list[dict[str, Any]]] = {game: [] for game in need}
    played = 0
    while short := {game: need[game] - len(pools[game]) for game in sorted(need) if len(pools[game]) < need[game]}:
        if played >= max_games:
            raise RuntimeError(f"{max_games} self-play games did not give enough turns of {', '.join(short)}")
        lacking = np.array(list(short.values()), dtype=float)
        results = collect(
            generation, [specs[game] for game in short], lacking / lacking.sum(), min_samples=int(lacking.sum()),
            games_in_flight=in_flight * len(short), rng=rng, sampling=generation.sampling, max_game_actions=sys.maxsize,
            invalid_penalty=invalid_penalty, invalid_opponent_reward=invalid_opponent_reward,
        )  # fmt: skip
        by_label = {specs[game].label: game for game in short}
        for result in results:
            played += 1
            game = by_label[result.game]
            pools[game] += [
                {"prompt_ids": turn.prompt_ids, "completion_ids": turn.response_ids, "logprobs": turn.logprobs,
                 "seat": turn.role, "game": game, "seed": result.record.seed,
                 "game_reward": result.shaped[turn.role], "returns": list(result.record.returns)}
                for turn in result.turns
            ]  # fmt: skip
    return pools

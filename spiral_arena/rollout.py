"""Training rollouts: many games in flight, every decision waiting on the model in one generation call.

Each wave gathers the (game, seat) pairs waiting on the policy, renders their prompts, calls the
engine once, and hands completion i back to decision i (SPIRAL's batch-index bug cannot happen:
completions are matched by position in the very list that was sent). Opponent seats, when the
opponent is a fixed agent, answer through ``act_batch``. Finished games turn into samples: each turn
with its prompt and response token ids and log-probs. Our trainer (``trainers.sources``) and the TRL
integration's self-play ``rollout_func`` (``spiral_arena.integrations.trl``) play through here; matches
between agents play through ``spiral_arena.inflight``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from spiral_arena.core.actions import extract_answer
from spiral_arena.models import Completion, Sampling
from spiral_arena.play import GameRecord, read_end, reading
from spiral_arena.registry import GameSpec, SeatText, seat_text_key


class Answers(Protocol):
    """What plays the model's seats: ``models.policy.Policy``, or a trainer's own generation (TRL's)."""

    def answer_batch(
        self, observations: list[str], sampling: Sampling, seed: int
    ) -> tuple[list[list[int]], list[Completion], list[str]]:
        """The prompts' token ids, the completions and their texts, in one generation call."""


@dataclass
class Turn:
    """One training sample: one decision of one player."""

    game: str
    role: int
    prompt: str  # the observation the policy answered
    prompt_ids: list[int]
    response_ids: list[int]
    logprobs: list[float]
    response: str
    finished: bool  # the response ended with the end-of-turn token
    reward: float = 0.0
    advantage: float = 0.0
    game_id: int = 0  # which of its rank's games of the step it came from, and which group: the learner's units
    group_id: int = 0


@dataclass
class GameResult:
    """A finished training game: its record (what ``spiral-arena play`` and the leaderboard keep of a game:
    seed, returns, offenders, outcome, moves) and what training adds to it."""

    game: str  # the spec's label
    record: GameRecord  # record.seed: the reset seed; a group's games share it, so they share the secret
    shaped: tuple[float, ...]  # what training uses (invalid-move shaping, truncation = draw)
    policy_seats: tuple[int, ...]
    turns: list[Turn] = field(default_factory=list)
    # single-player group training (StarPO, delta-belief) reads these:
    penalties: list[float] = field(default_factory=list)  # each policy turn's own reward, end terms excluded
    verdicts: list[str] = field(default_factory=list)  # each policy turn's verdict where the game gives one
    final_observation: str = ""  # what the player saw after its last turn (the last belief is read there)
    secret: str | None = None
    snapshot_step: int | None = None  # population play: the step of the frozen policy in the other seat
    shard: int = 0  # the rollout shard that played it: an actor of its own for RAE with rae_scope "shard"

    def saved(self) -> dict[str, Any]:
        """Plain containers (what ``torch.load(weights_only=True)`` reads back): a checkpoint keeps an async
        run's games already played for later steps."""
        return dataclasses.asdict(self)

    @classmethod
    def restored(cls, saved: dict[str, Any]) -> GameResult:
        fields = dict(saved)
        fields["record"] = GameRecord(**{**saved["record"], "moves": [tuple(m) for m in saved["record"]["moves"]]})
        fields["turns"] = [Turn(**turn) for turn in saved["turns"]]
        return cls(**fields)

    @property
    def won(self) -> bool:
        """A single player's game: whether the game's own verdict names it the winner, whatever the reward."""
        return len(self.record.players) == 1 and self.record.winner is not None


def parse_mixture(games: str, weights: str) -> tuple[list[GameSpec], np.ndarray]:
    specs = [GameSpec.parse(g) for g in games.split(",") if g.strip()]
    if not specs:
        raise ValueError("no games given")
    w = np.array([float(x) for x in weights.split(",")], dtype=float) if weights else np.ones(len(specs))
    if len(w) != len(specs) or (w < 0).any() or w.sum() <= 0:
        raise ValueError(f"game_weights {weights!r} must be {len(specs)} non-negative numbers, not all zero")
    return specs, w / w.sum()


class EnvPool:
    """Envs of finished games, handed out again: ``reset()`` clears everything, and building an env
    costs more than playing a game of Kuhn. ``seat_text``: what each seat reads when a fixed opponent (a
    checkpoint) reads the game in the text it trained on (``registry.make``); the policy's seats read the
    run's own."""

    def __init__(self) -> None:
        self.spare: dict[tuple, list[Any]] = {}

    @staticmethod
    def _key(spec: GameSpec, obs_format: str, seat_text: Sequence[SeatText]) -> tuple:
        return spec.label, obs_format, seat_text_key(seat_text)

    def take(self, spec: GameSpec, obs_format: str, seat_text: Sequence[SeatText] = ()) -> Any:
        spare = self.spare.get(self._key(spec, obs_format, seat_text))
        if spare:
            return spare.pop()
        return spec.make(**({"obs_format": obs_format} if obs_format else {}), seat_text=seat_text)

    def give(self, spec: GameSpec, obs_format: str, env: Any, seat_text: Sequence[SeatText] = ()) -> None:
        self.spare.setdefault(self._key(spec, obs_format, seat_text), []).append(env)


@dataclass
class _Slot:
    env: Any
    spec: GameSpec
    policy_seats: tuple[int, ...]
    seed: int
    opponent: Any = None  # what holds the other seats (an agent or a frozen snapshot); None = self-play
    seat_text: tuple[SeatText, ...] = ()  # what each seat reads, when the opponent reads its own text
    turns: list[Turn] = field(default_factory=list)
    penalties: list[float] = field(default_factory=list)
    verdicts: list[str] = field(default_factory=list)
    moves: list[tuple[str, str]] = field(default_factory=list)  # (player, answer), every seat's


def collect(
    policy: Answers,
    specs: list[GameSpec],
    weights: np.ndarray,
    *,
    min_samples: int,
    games_in_flight: int,
    rng: np.random.Generator,
    sampling: Sampling,
    max_game_actions: int,
    invalid_penalty: float | None,
    invalid_opponent_reward: float,
    opponent: Any = None,
    obs_format: str = "",
    games: int | None = None,
    envs: EnvPool | None = None,
    group_size: int = 1,
    group_seeds: list[int] | None = None,
    snapshots: Any = None,
) -> list[GameResult]:
    """Play games until finished games hold at least ``min_samples`` policy turns.

    No new game starts once the finished and running games are expected to reach the target,
    and running games are always played out, so no decision is wasted and none is off-policy.
    ``opponent`` None is self-play (the policy holds every seat); otherwise the policy holds one
    seat, alternating between games. ``games`` plays exactly that many games instead (evaluation,
    group training). ``group_size`` G > 1 launches games in runs of G with one reset seed (one
    game, one secret), so each group differs from its siblings only in what the policy samples;
    ``group_seeds`` gives those reset seeds instead of drawing them (evaluation on chosen secrets).
    ``snapshots`` (population play, an ``OpponentPool``): in self-play, each new game's other seat
    may go to a frozen snapshot it draws; the policy then holds one seat, as against ``opponent``.
    A game ended by an invalid answer pays its offender ``invalid_penalty`` and the other seats
    ``invalid_opponent_reward``; ``invalid_penalty`` None keeps the env's own returns.
    """
    results: list[GameResult] = []
    slots: list[_Slot] = []
    games_started = 0
    finished_turns = 0
    turns_per_game = 4.0  # running estimate, to stop launching games in time

    envs = envs if envs is not None else EnvPool()

    group: tuple[GameSpec, int] | None = None  # the spec and reset seed of the group being launched

    def launch() -> None:
        nonlocal games_started, group
        if group is None or games_started % group_size == 0:
            spec = specs[int(rng.choice(len(specs), p=weights))]
            seed = int(rng.integers(2**31)) if group_seeds is None else group_seeds[games_started // group_size]
            group = (spec, seed)
        spec, seed = group
        n = spec.players
        against = opponent if opponent is not None or snapshots is None or n == 1 else snapshots.draw(rng)
        seats = tuple(range(n)) if against is None else (games_started % n,)
        text = reading(against, spec).text if against is not None else {}
        seat_text = tuple({} if seat in seats else text for seat in range(n)) if text else ()
        env = envs.take(spec, obs_format, seat_text)
        env.reset(seed=seed)
        slots.append(_Slot(env, spec, seats, seed, against, seat_text))
        games_started += 1

    while True:
        running_turns = sum(len(s.turns) for s in slots)
        while len(slots) < games_in_flight and (
            games_started < games
            if games is not None
            else finished_turns + running_turns + turns_per_game * len(slots) < min_samples
        ):
            launch()
        if not slots:
            break
        # 1. opponents' seats answer first, one batch per opponent (a fixed agent, or each snapshot)
        waiting: dict[int, list[_Slot]] = {}
        for slot in slots:
            if slot.opponent is not None and not _done(slot) and _seat(slot) not in slot.policy_seats:
                waiting.setdefault(id(slot.opponent), []).append(slot)
        for group in waiting.values():
            obs = [s.env.observe(s.env.agent_selection) for s in group]
            infos = [s.env.infos[s.env.agent_selection] for s in group]
            for slot, answer in zip(group, group[0].opponent.act_batch(obs, infos), strict=True):
                _step(slot, answer)
        # 2. every decision waiting on the policy: one generation call, results matched by index
        pending = [s for s in slots if not _done(s) and _seat(s) in s.policy_seats]
        if pending:
            observations = [s.env.observe(s.env.agent_selection) for s in pending]
            prompts, completions, texts = policy.answer_batch(observations, sampling, int(rng.integers(2**31)))
            prefetch_answers(pending, texts)
            for slot, obs, prompt, completion, text in zip(
                pending, observations, prompts, completions, texts, strict=True
            ):
                slot.turns.append(
                    Turn(
                        slot.spec.label,
                        _seat(slot),
                        obs,
                        prompt,
                        completion.token_ids,
                        completion.logprobs,
                        text,
                        completion.finished,
                    )
                )
                _step(slot, text)
                if len(slot.policy_seats) == 1 and slot.opponent is None:  # a single player: group training reads it
                    last_turn = _last_turn(slot)
                    slot.penalties.append(_turn_penalty(slot, last_turn))
                    slot.verdicts.append(str(last_turn.get("verdict", "")))
        # 3. finished games leave
        for slot in [s for s in slots if _done(s) or len(s.moves) >= max_game_actions]:
            slots.remove(slot)
            result = _finish(slot, invalid_penalty, invalid_opponent_reward, truncated=not _done(slot))
            envs.give(slot.spec, obs_format, slot.env, slot.seat_text)
            results.append(result)
            finished_turns += len(result.turns)
            turns_per_game = 0.8 * turns_per_game + 0.2 * max(1, len(result.turns))
    return results


def prefetch_answers(slots: list[_Slot], texts: list[str]) -> None:
    """Hand a wave's moves to each game that answers them itself through a slow oracle (Twenty
    Questions with an LLM judge), all at once, so the judge answers them concurrently before the
    envs step one by one. Envs sharing one oracle are batched together."""
    waves: dict[int, tuple[Any, list]] = {}
    for slot, text in zip(slots, texts, strict=True):
        game = getattr(slot.env, "game", None)
        if hasattr(game, "prefetch_answers"):
            waves.setdefault(id(getattr(game, "oracle", game)), (game, []))[1].append((slot.env.state_, text))
    for game, moves in waves.values():
        game.prefetch_answers(moves)


def _last_turn(slot: _Slot) -> dict[str, Any]:
    """The game's own account of the turn just played (Twenty Questions' ``verdict`` and
    ``turn_penalty``, in the info also after the last turn), or {} for a game that keeps none."""
    info = slot.env.infos.get(slot.env.possible_agents[slot.turns[-1].role], {})
    last_turn = (info.get("view") or {}).get("last_turn")
    if isinstance(last_turn, dict):
        return last_turn
    return {k: info[k] for k in ("verdict", "turn_penalty") if k in info}


def _turn_penalty(slot: _Slot, last_turn: dict[str, Any]) -> float:
    """The reward of the turn just played, apart from end-of-game terms: the game's own account of it
    where it keeps one, else the step reward of a turn that did not end the game (a last turn's reward
    is taken as all end terms)."""
    if "turn_penalty" in last_turn:
        return float(last_turn["turn_penalty"])
    agent = slot.env.possible_agents[slot.turns[-1].role]
    return 0.0 if _done(slot) else float(slot.env.rewards.get(agent, 0.0))


def _seat(slot: _Slot) -> int:
    env = slot.env
    return env.possible_agents.index(env.agent_selection)


def _done(slot: _Slot) -> bool:
    return all(slot.env.terminations.values())


def _step(slot: _Slot, text: str) -> None:
    slot.moves.append((slot.env.agent_selection, text))
    slot.env.step(text)


def _finish(slot: _Slot, invalid_penalty: float | None, invalid_opponent_reward: float, truncated: bool) -> GameResult:
    env = slot.env
    if truncated:  # cut at max_game_actions: no result, as a truncated game in play and the leaderboard
        env.truncate()
    record = read_end(env, GameRecord(slot.seed, tuple(env.possible_agents), moves=slot.moves))
    n, invalid_by = len(env.possible_agents), record.invalid_seat
    if invalid_by is not None and invalid_penalty is not None:
        shaped = tuple(invalid_penalty if i == invalid_by else invalid_opponent_reward for i in range(n))
    else:
        shaped = (0.0,) * n if truncated else tuple(float(r) for r in record.returns)
    for turn in slot.turns:
        turn.reward = shaped[turn.role]
    solo = n == 1  # the extras group training reads, skipped for two-player games
    return GameResult(
        slot.spec.label,
        record,
        shaped,
        slot.policy_seats,
        slot.turns,
        penalties=slot.penalties,
        verdicts=slot.verdicts,
        final_observation=env.observe(env.possible_agents[0]) if solo else "",
        secret=getattr(env.state_, "secret", None) if solo else None,
        snapshot_step=getattr(slot.opponent, "snapshot_step", None),
    )


def response_action(text: str) -> str:
    """The part of a response the game read as the move (for transcripts)."""
    return extract_answer(text)

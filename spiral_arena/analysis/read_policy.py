"""Read a language model's poker policy, exactly off its answer log-probabilities: single-hand Kuhn (also as
it plays, off sampled answers) and Leduc Hold'em.

For each of the 12 information states we build the real observation through our env. The exact read-out
asks the model how likely it is to answer ``\\boxed{[bet]}`` (or call) versus ``\\boxed{[check]}``
(or fold): the two are normalised against each other, and whatever probability is left over is mass on
invalid answers, reported separately, never folded into a move. It sees only those two strings, so a model
that writes its move another way (``I bet. \\boxed{bet}``) reads as invalid there. The behavioural read-out
samples whole answers and parses each as the env does, so it counts every way of writing a move; its price
is sampling error, which it states.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from spiral_arena.analysis.kuhn import KUHN_INFO_STATES, kuhn_exploitability
from spiral_arena.analysis.leduc import LEDUC_RANK_STATES
from spiral_arena.core.actions import InvalidMove
from spiral_arena.core.env import TextGameEnv
from spiral_arena.registry import GameSpec

# history -> (aggressive answer, passive answer)
_ANSWERS = {"": ("[bet]", "[check]"), "p": ("[bet]", "[check]"), "b": ("[call]", "[fold]"), "pb": ("[call]", "[fold]")}

ScoreFn = Callable[[str, list[str]], list[float]]
"""(observation, candidate answers) -> natural log-probability of each whole answer."""


def score_all(score: ScoreFn, items: Sequence[tuple[str, list[str]]]) -> list[list[float]]:
    """Each (observation, answers) item's scores; in batches across observations where the scorer offers
    it (``many``, as ``models.scoring.AnswerScorer`` does), else one observation at a time."""
    many = getattr(score, "many", None)
    return many(items) if many is not None else [score(observation, answers) for observation, answers in items]


def answer_probabilities(logprobs: Sequence[float]) -> tuple[list[float], float]:
    """Each answer's probability normalised over the answers offered (equal shares if the model gives them
    none), and the probability left over: mass on invalid answers, never folded into a move."""
    probs = [math.exp(x) for x in logprobs]
    total = sum(probs)
    shares = [p / total for p in probs] if total > 0 else [1.0 / len(probs)] * len(probs)
    return shares, max(0.0, 1.0 - total)


def replay_moves(game: str, obs_format: str, move_lists: Sequence[Sequence[int]], stride: int) -> Iterator[TextGameEnv]:
    """The env of ``game`` (its options: the text a policy reads) after each ``stride``-th list of moves, each
    move answered as ``[n]`` from a fresh reset (board games: no chance); one env, moved on at each step of
    the iteration, so read it before the next."""
    if stride < 1:
        raise ValueError(f"stride must be a positive integer, got {stride!r}")
    env = GameSpec.parse(game).make(**({"obs_format": obs_format} if obs_format else {}))
    for moves in move_lists[::stride]:
        env.reset(seed=0)
        for move in moves:
            env.step(f"[{move}]")
        yield env


def tactics_read_out(score: ScoreFn, cases: Sequence[tuple]) -> dict[str, float]:
    """A board game's tactics read-out over ``cases``, each (legal moves, wanted moves, a win?, observation,
    answers): ``takes_win``, the mean probability of a wanted move over the win positions (a move that
    completes a line), ``blocks`` the same over the others (the one move that stops the opponent's line),
    each normalised over the legal moves (0 where the model gives them no probability);
    ``invalid_mass``, the mean probability left off the legal moves; and how many positions each mean is over."""
    takes, blocks, invalid = [], [], []
    items = [(observation, answers) for _, _, _, observation, answers in cases]
    for (legal, wanted, win, _, _), scores in zip(cases, score_all(score, items), strict=True):
        probs = [math.exp(x) for x in scores]
        total = sum(probs)
        share = sum(p for c, p in zip(legal, probs, strict=True) if c in wanted) / total if total > 0 else 0.0
        (takes if win else blocks).append(share)
        invalid.append(max(0.0, 1.0 - total))
    return {
        "takes_win": sum(takes) / max(1, len(takes)),
        "blocks": sum(blocks) / max(1, len(blocks)),
        "invalid_mass": sum(invalid) / max(1, len(invalid)),
        "win_positions": float(len(takes)),
        "block_positions": float(len(blocks)),
    }


def answer_text(action: str) -> str:
    """The canonical answer a trained model gives for a move."""
    return f"\\boxed{{{action}}}"


def kuhn_positions(game: str = "KuhnPoker-v0", obs_format: str = "") -> Iterator[tuple[str, TextGameEnv]]:
    """The env of single hands of ``game`` (a Kuhn id with options: its text is what the model is shown;
    rounds is set to 1) at each information state, in ``KUHN_INFO_STATES`` order, as (key, env); one env,
    moved on at each step of the iteration, so read it before the next."""
    kuhn = GameSpec.parse(game).with_options(rounds=1)
    env = kuhn.make(**({"obs_format": obs_format} if obs_format else {}))
    seeds: dict[tuple[int, int], int] = {}
    for seed in range(200):  # a seed that deals each card to each seat
        env.reset(seed=seed)
        for seat in (0, 1):
            seeds.setdefault((seat, env.state_.cards[seat]), seed)
    for key in KUHN_INFO_STATES:
        card, history = "JQK".index(key[0]), key[1:]
        env.reset(seed=seeds[(len(history) % 2, card)])
        for letter in history:
            env.step("[check]" if letter == "p" else "[bet]")
        yield key, env


def kuhn_policy_from_scores(
    score: ScoreFn, obs_format: str = "", game: str = "KuhnPoker-v0"
) -> tuple[dict[str, float], float]:
    """P(bet or call) at each information state, and the mean probability of any other answer, read on
    single hands of ``game`` (a Kuhn id with options, e.g. the ``reward=chips`` a model trained on: its text
    is what the model is shown; rounds is set to 1)."""
    policy, invalid = {}, []
    for key, env in kuhn_positions(game, obs_format):
        aggressive, passive = _ANSWERS[key[1:]]
        shares, left = answer_probabilities(
            score(env.observe(env.agent_selection), [answer_text(aggressive), answer_text(passive)])
        )
        policy[key] = shares[0]
        invalid.append(left)
    return policy, sum(invalid) / len(invalid)


@dataclass(frozen=True)
class PlayedKuhnPolicy:
    """The single-hand policy as a sampler plays it. ``policy``: P(bet or call) among the answers the env
    accepts, per information state (0.5 where it accepted none); ``invalid``: the share of all answers it
    refused; ``exploitability`` of ``policy``, and its ``standard_error`` from ``samples`` answers a state (a
    parametric bootstrap: each state's count redrawn from its binomial). The plug-in estimate leans high: an
    exploitability is lowest at a policy, and sampling noise only moves the estimate away from it."""

    policy: dict[str, float]
    invalid: float
    exploitability: float
    standard_error: float
    samples: int


def kuhn_policy_from_samples(
    act: Callable[[list[str]], list[str]],
    obs_format: str = "",
    game: str = "KuhnPoker-v0",
    samples: int = 200,
    seed: int = 0,
    bootstrap: int = 200,
) -> PlayedKuhnPolicy:
    """``act`` (observations -> one sampled answer each, as the player samples them) answers each
    information state's observation ``samples`` times; each answer is parsed by the game as the env parses
    a move, and counted as the bet or call, the check or fold, or invalid."""
    if samples < 1:
        raise ValueError(f"samples must be at least 1, got {samples!r}")
    counts: dict[str, tuple[int, int]] = {}  # key -> (bets or calls, answers the game accepted)
    refused = 0
    for key, env in kuhn_positions(game, obs_format):
        state = env.state_
        answers = act([env.observe(env.agent_selection)] * samples)
        if len(answers) != samples:
            raise ValueError(f"act returned {len(answers)} answers for {samples} observations")
        aggressive = env.game.parse(state, _ANSWERS[key[1:]][0])
        moves = []
        for answer in answers:
            try:
                moves.append(env.game.parse(state, answer))
            except InvalidMove:
                refused += 1
        counts[key] = (sum(move == aggressive for move in moves), len(moves))
    policy = {key: bets / valid if valid else 0.5 for key, (bets, valid) in counts.items()}
    rng = np.random.default_rng(seed)
    redrawn = [
        kuhn_exploitability({k: rng.binomial(v, policy[k]) / v if v else 0.5 for k, (_, v) in counts.items()})
        for _ in range(bootstrap)
    ]
    error = float(np.std(redrawn, ddof=1)) if bootstrap > 1 else float("nan")
    return PlayedKuhnPolicy(policy, refused / (samples * len(counts)), kuhn_exploitability(policy), error, samples)


def leduc_positions(game: str = "LeducHoldem-v0", obs_format: str = "") -> Iterator[tuple[str, TextGameEnv]]:
    """The env of ``game`` (a Leduc id with options: its text is what the model is shown) at each of the 288
    information states a player who reads ranks can tell apart (``LEDUC_RANK_STATES`` order), as (key, env),
    reached by playing the key's betting through the env from a seed that deals the key's ranks; one env,
    moved on at each step of the iteration, so read it before the next."""
    env = GameSpec.parse(game).make(**({"obs_format": obs_format} if obs_format else {}))
    seeds: dict[tuple[int, int, int], int] = {}  # (seat, its rank, the public rank) -> a seed that deals them
    for seed in range(400):
        env.reset(seed=seed)
        for seat in (0, 1):
            seeds.setdefault((seat, env.state_.cards[seat] // 2, env.state_.public // 2), seed)
    for key in LEDUC_RANK_STATES:
        parts = [part.split(":") for part in key.split("/")]
        histories = [history for _, history in parts]
        seat = len(histories[-1]) % 2
        rank = "JQK".index(parts[0][0])
        public = "JQK".index(parts[1][0]) if len(parts) == 2 else min(q for s, r, q in seeds if (s, r) == (seat, rank))
        env.reset(seed=seeds[(seat, rank, public)])
        for history in histories:
            for i, letter in enumerate(history):
                facing = history[:i].endswith("r")
                env.step({"c": "[call]" if facing else "[check]", "r": "[raise]" if facing else "[bet]"}[letter])
        yield key, env


def leduc_policy_from_scores(
    score: ScoreFn, obs_format: str = "", game: str = "LeducHoldem-v0"
) -> tuple[dict[str, dict[str, float]], float]:
    """The probability of each legal action at each rank information state (``spiral_arena.analysis.leduc``'s
    keys without suits, which ``leduc_exploitability`` takes), read from the log-probability of each legal
    answer normalised over them, and the mean probability of any other answer."""
    items, moves = [], []
    for key, env in leduc_positions(game, obs_format):
        state = env.state_
        legal = env.game.legal_action_strings(state)
        items.append((env.observe(env.agent_selection), [answer_text(answer) for answer in legal]))
        moves.append((key, [env.game.parse(state, answer) for answer in legal]))
    policy, invalid = {}, []
    for (key, actions), logprobs in zip(moves, score_all(score, items), strict=True):
        shares, left = answer_probabilities(logprobs)
        policy[key] = dict(zip(actions, shares, strict=True))
        invalid.append(left)
    return policy, sum(invalid) / len(invalid)

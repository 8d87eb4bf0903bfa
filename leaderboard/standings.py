"""From stored games to standings: ratings, records, payoffs and head-to-head matrices per scope.

A scope is one game id, plus "overall" (the two-player games pooled) when there are several two-player
games. Games ended by an agent's error are left out of everything but the error counts. The payoff of a
game is its chips in games that keep chips (Kuhn poker) and its reward otherwise; chip games are ranked
by mean payoff (expected value), not by games won (docs, section 7: winning many small pots is not
winning chips). An invalid move forfeits: in a chip game the offender's payoff is its chips at that point
but at most -1.

Single-player games (Twenty Questions) have no opponent to rate against: each gets a ``SoloScope``
that ranks agents by success rate, with a Wilson score interval, and never enters the ratings.

Ratings people can trust: a scope with the plain ``random`` agent is anchored on it (random = 1000,
comparable from one leaderboard to the next), else the rated agents' mean is 1000; a rating from fewer
than ``MIN_GAMES`` games or with an interval wider than ``MAX_INTERVAL`` is provisional. The overall fit
counts every game once (``games``) or gives every game id the same total weight (``equal``).

What API agents spend: an agent with usage recorded in a scope's finished games gets a ``Usage`` (tokens
per game from the provider's counts, mean latency per move). With prices (``--price MODEL=IN/OUT``, US
dollars per million input/output tokens, matched by label first, then by model id) ``apply_prices``
adds the cost per game, and a rated agent its rating per cent: (rating - 1000) / (100 x cost per game),
the rating points above the table's 1000 (the random anchor, or the mean) per US cent a game costs.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import ClassVar

import numpy as np

from leaderboard.ratings import DEFAULT_RESAMPLES, ELO_CENTRE, equal_group_weights, rate
from leaderboard.reasoning import ReasoningColumn
from leaderboard.settings import (  # noqa: F401 (re-exported: the rules live beside the code that applies them)
    ANCHOR,
    DEFAULT_WEIGHTING,
    MAX_INTERVAL,
    MIN_GAMES,
    PRICE_EXAMPLE,
    PRICE_FORM,
    RATING_PER_CENT,
    WEIGHTINGS,
)
from leaderboard.store import NO_PLAYER, AgentRecord, StoredGame
from spiral_arena.agents import parse_spec, split_options
from spiral_arena.llm import PROVIDERS
from spiral_arena.registry import GameSpec


@dataclass(frozen=True)
class Price:
    """What a model's tokens cost, in US dollars per million."""

    model: str  # matched against an entrant's label, then its model id
    input_usd: float  # per million prompt tokens
    output_usd: float  # per million completion tokens

    def __str__(self) -> str:
        return f"{self.model}=${self.input_usd:g}/${self.output_usd:g}"


def parse_prices(items: Sequence[str]) -> dict[str, Price]:
    """``--price MODEL=IN/OUT`` values by MODEL, or one ValueError naming every bad item and the valid form."""
    prices: dict[str, Price] = {}
    bad, twice = [], []
    for item in items:
        model, _, rates = str(item).rpartition("=")
        model = model.strip()
        try:
            input_usd, output_usd = map(float, rates.split("/"))
        except ValueError:  # not two numbers
            input_usd = output_usd = math.nan
        if not model or not all(0 <= x < math.inf for x in (input_usd, output_usd)):
            bad.append(repr(item))
        elif model in prices:
            twice.append(model)
        else:
            prices[model] = Price(model, input_usd, output_usd)
    problems = []
    if bad:
        problems.append(
            f"--price {', '.join(bad)}: write {PRICE_FORM}, US dollars per million input/output tokens "
            f"(numbers >= 0), e.g. {PRICE_EXAMPLE}"
        )
    if twice:
        problems.append(f"--price: {', '.join(twice)} priced more than once; give each model one price")
    if problems:
        raise ValueError("; ".join(problems))
    return prices


def model_id(spec: str) -> str | None:
    """The model id of an API agent's spec (``openai:gpt-4o@http://...#max_retries=0`` -> ``gpt-4o``), else None."""
    try:
        parsed = parse_spec(split_options(spec)[0])
    except ValueError:
        return None
    return parsed.target if parsed.kind in PROVIDERS else None


@dataclass
class Usage:
    """What an agent's API moves cost in one table's finished games (games ended by an error are left out,
    as everywhere in the standings). Token counts are the provider's; a game counts towards them only if
    every reply in it stated both counts (``token_games``)."""

    games: int  # finished games with the agent's API moves recorded
    moves: int
    latency_s: float  # summed over the moves: the successful request of each
    token_games: int
    prompt_tokens: int  # summed over the token games
    completion_tokens: int
    price: Price | None = None  # set by ``apply_prices``
    cost_per_game: float | None = None  # US dollars, at ``price``

    def add(self, moves: int, latency_s: float | None, prompt: int | None, completion: int | None) -> None:
        self.games += 1
        self.moves += moves
        self.latency_s += latency_s or 0.0
        if prompt is not None and completion is not None:
            self.token_games += 1
            self.prompt_tokens += prompt
            self.completion_tokens += completion

    @property
    def prompt_tokens_per_game(self) -> float | None:
        return self.prompt_tokens / self.token_games if self.token_games else None

    @property
    def completion_tokens_per_game(self) -> float | None:
        return self.completion_tokens / self.token_games if self.token_games else None

    @property
    def tokens_per_game(self) -> float | None:
        return (self.prompt_tokens + self.completion_tokens) / self.token_games if self.token_games else None

    @property
    def latency_per_move_s(self) -> float | None:
        return self.latency_s / self.moves if self.moves else None


def _tally_usage(usage: dict[str, Usage], label: str, game: StoredGame, seat: int) -> None:
    """Add the seat's usage columns of a finished game to its agent's ``Usage`` (none for seats without)."""
    moves = game.api_moves0 if seat == 0 else game.api_moves1
    if moves is None:
        return
    latency = game.latency_s0 if seat == 0 else game.latency_s1
    prompt = game.prompt_tokens0 if seat == 0 else game.prompt_tokens1
    completion = game.completion_tokens0 if seat == 0 else game.completion_tokens1
    usage.setdefault(label, Usage(0, 0, 0.0, 0, 0, 0)).add(moves, latency, prompt, completion)


OVERALL = "overall"
KUHN_GAME, LEDUC_GAME = "KuhnPoker", "LeducHoldem"  # the games whose tables show an exploitability
CONFIDENCE = 0.95


@dataclass
class AgentStanding:
    label: str
    rating: float | None  # None when every game of the agent in this scope was an error
    low: float | None
    high: float | None
    games: int
    wins: int
    draws: int
    losses: int
    mean_payoff: float | None
    invalid_rate: float | None
    errors: int  # games this agent broke off with an error (not counted anywhere else)
    exploitability: float | None = None  # of the agent's stated policy, at Kuhn and Leduc Hold'em
    provisional: bool = False  # rated from too few games or with too wide an interval (never when unrated)
    anchor: bool = False  # the agent that fixes the scale: rated ELO_CENTRE by definition, with no interval
    usage: Usage | None = None  # API agents with usage recorded in this scope's finished games
    note: str | None = None  # why this agent's games of this game id are marked (``compute``'s ``notes``)

    @property
    def score(self) -> float | None:
        """Points per game, a draw being half a win."""
        return (self.wins + self.draws / 2) / self.games if self.games else None

    @property
    def rating_per_cent(self) -> float | None:
        """``RATING_PER_CENT``; None without a rating or a priced cost above zero."""
        cost = None if self.usage is None else self.usage.cost_per_game
        if self.rating is None or not cost:
            return None
        return (self.rating - ELO_CENTRE) / (100 * cost)


@dataclass
class HeadToHead:
    wins: int = 0
    draws: int = 0
    losses: int = 0
    payoff_sum: float = 0.0

    def add(self, points: float, payoff: float) -> None:
        """One game: ``points`` 1 / 0.5 / 0 for a win / draw / loss."""
        if points == 1.0:
            self.wins += 1
        elif points == 0.5:
            self.draws += 1
        else:
            self.losses += 1
        self.payoff_sum += payoff

    @property
    def games(self) -> int:
        return self.wins + self.draws + self.losses

    @property
    def score(self) -> float | None:
        return (self.wins + self.draws / 2) / self.games if self.games else None

    @property
    def mean_payoff(self) -> float | None:
        return self.payoff_sum / self.games if self.games else None


@dataclass
class Scope:
    name: str  # OVERALL or an env id
    payoff_unit: str | None  # "chips", "reward", or None for OVERALL (units differ between games)
    ranked_by: str
    agents: list[AgentStanding]  # in rank order
    head_to_head: dict[str, dict[str, HeadToHead]]  # row agent -> column agent -> row's record
    games: int
    errors: int
    anchor: str | None = None  # the label rated ELO_CENTRE, or None when the mean of the ratings is
    weighting: str | None = None  # how game ids were weighted in the fit (overall only)

    @property
    def scale(self) -> str:
        """Which fixed point the ratings are measured from, e.g. "random = 1000"."""
        return f"{self.anchor or 'mean'} = {ELO_CENTRE:.0f}"


@dataclass
class SoloStanding:
    """One agent alone in a single-player game: its finished games and how many it succeeded in."""

    label: str
    games: int  # finished games; those broken by its own error are only in ``errors``
    successes: int
    low: float | None  # Wilson score interval of the success rate; None without a finished game
    high: float | None
    mean_turns: float | None  # moves per finished game
    invalid_rate: float | None  # share of finished games the env ended on an invalid move
    errors: int
    usage: Usage | None = None
    note: str | None = None  # as ``AgentStanding.note``

    @property
    def success_rate(self) -> float | None:
        return self.successes / self.games if self.games else None


@dataclass
class SoloScope:
    """The standings of one single-player game: no ratings and no head to head."""

    ranked_by: ClassVar[str] = "success rate"

    name: str  # the env id
    agents: list[SoloStanding]  # in rank order
    games: int
    errors: int


@dataclass
class Standings:
    scopes: list[Scope | SoloScope]  # the rated scopes first (overall, then by game), then single-player games
    errors: list[StoredGame] = field(default_factory=list)
    resamples: int = DEFAULT_RESAMPLES
    seed: int = 0
    reasoning: ReasoningColumn | None = None  # set by ``--reasoning``; the same per agent in every scope
    min_games: int = MIN_GAMES
    max_interval: float = MAX_INTERVAL
    weighting: str = DEFAULT_WEIGHTING
    prices: dict[str, Price] = field(default_factory=dict)  # set by ``apply_prices``


def _points(game: StoredGame) -> float:
    """Seat 0's result: 1 win, 0.5 draw, 0 loss."""
    return 1.0 if game.reward0 > game.reward1 else 0.5 if game.reward0 == game.reward1 else 0.0


def _payoffs(game: StoredGame) -> tuple[float, float]:
    if game.payoff0 is None:
        return game.reward0, game.reward1
    p0, p1 = game.payoff0, game.payoff1
    if game.invalid0:
        p0 = min(p0, -1.0)
        p1 = -p0
    elif game.invalid1:
        p1 = min(p1, -1.0)
        p0 = -p1
    return p0, p1


def _exploitability(env_id: str, record: AgentRecord | None) -> float | None:
    """The exploitability the table of ``env_id`` shows for an agent: its Kuhn policy's at Kuhn, its Leduc
    policy's at Leduc Hold'em, where the table's rules are the analysed game's (the registered defaults,
    however they are spelled; text options change nothing), none elsewhere."""
    try:
        game = GameSpec.parse(env_id)
        analysed = game.rules() == GameSpec(game.env_id).rules()
    except ValueError:  # a game no longer registered
        return None
    if record is None or not analysed:
        return None
    return {KUHN_GAME: record.kuhn_exploitability, LEDUC_GAME: record.leduc_exploitability}.get(
        game.registered.game.name
    )


def _scope(
    name: str,
    games: Sequence[StoredGame],
    env_order: dict[str, int],
    agents: dict[str, AgentRecord],
    resamples: int,
    seed: int,
    weighting: str,
) -> Scope:
    labels = sorted({g.player0 for g in games} | {g.player1 for g in games})
    valid = [g for g in games if g.error is None]
    chips = name != OVERALL and any(g.payoff0 is not None for g in valid)
    total = {label: HeadToHead() for label in labels}
    invalid, errors = defaultdict(int), defaultdict(int)
    usage: dict[str, Usage] = {}
    head = {row: {col: HeadToHead() for col in labels if col != row} for row in labels}
    for g in games:
        if g.error is not None:
            errors[(g.player0, g.player1)[g.error_seat]] += 1
    for g in valid:
        points, pays = _points(g), _payoffs(g)
        for seat, (me, other) in enumerate(((g.player0, g.player1), (g.player1, g.player0))):
            mine = points if seat == 0 else 1.0 - points
            total[me].add(mine, pays[seat])
            head[me][other].add(mine, pays[seat])
            invalid[me] += bool(g.invalid0 if seat == 0 else g.invalid1)
            _tally_usage(usage, me, g, seat)

    # Only agents with a finished game are rated: one that only ever failed has no strength to estimate.
    index = {label: k for k, label in enumerate(label for label in labels if total[label].games)}
    anchor = _anchor(index, agents)
    weighting = weighting if name == OVERALL else None
    ratings = None
    if valid:
        groups = [env_order[g.env_id] for g in valid]
        ratings = rate(
            len(index),
            [index[g.player0] for g in valid],
            [index[g.player1] for g in valid],
            [_points(g) for g in valid],
            [g.seed for g in valid],
            groups,
            resamples=resamples,
            seed=seed,
            anchor=None if anchor is None else index[anchor],
            group_weights=equal_group_weights(groups) if weighting == "equal" else None,
        )
    rows = []
    for label in labels:
        played, k = total[label].games, index.get(label)
        rated = ratings is not None and k is not None
        rows.append(
            AgentStanding(
                label=label,
                rating=float(ratings.rating[k]) if rated else None,
                low=float(ratings.low[k]) if rated else None,
                high=float(ratings.high[k]) if rated else None,
                games=played,
                wins=total[label].wins,
                draws=total[label].draws,
                losses=total[label].losses,
                mean_payoff=total[label].mean_payoff if name != OVERALL else None,
                invalid_rate=invalid[label] / played if played else None,
                errors=errors[label],
                exploitability=None if name == OVERALL else _exploitability(name, agents.get(label)),
                anchor=label == anchor,
                usage=usage.get(label),
            )
        )
    if chips:
        rows.sort(key=lambda r: (r.mean_payoff is None, -(r.mean_payoff or 0.0), -(r.rating or 0.0), r.label))
    else:
        rows.sort(key=lambda r: (r.rating is None, -(r.rating or 0.0), r.label))
    return Scope(
        name=name,
        payoff_unit=None if name == OVERALL else "chips" if chips else "reward",
        ranked_by="mean chips per game" if chips else "rating",
        agents=rows,
        head_to_head=head,
        games=len(valid),
        errors=len(games) - len(valid),
        anchor=anchor,
        weighting=weighting,
    )


def _anchor(index: dict[str, int], agents: dict[str, AgentRecord]) -> str | None:
    """``ANCHOR`` when it is rated in this scope and is the plain random agent: a name such as
    ``random=expert`` or options (stored in its spec) make it another agent."""
    record = agents.get(ANCHOR)
    return ANCHOR if ANCHOR in index and (record is None or record.spec == ANCHOR) else None


def is_provisional(row: AgentStanding, min_games: int = MIN_GAMES, max_interval: float = MAX_INTERVAL) -> bool:
    """A rating too thin to rank on: fewer than ``min_games`` games in its scope, or an interval wider than
    ``max_interval`` Elo points. An unrated agent has no rating to qualify, and the anchor's is exact by
    definition (the scale's zero point; how thin the table is shows in the others' intervals)."""
    if row.rating is None or row.anchor:
        return False
    return row.games < min_games or row.high - row.low > max_interval


def wilson_interval(successes: int, games: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The Wilson score interval of a success rate (``games`` >= 1): unlike the normal approximation it
    stays inside [0, 1] and is not empty at 0 or all successes (6 wins in 6 games: 61% to 100%)."""
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    rate, spread = successes / games, z * z / games
    centre = (rate + spread / 2) / (1 + spread)
    half = z * math.sqrt(rate * (1 - rate) / games + spread / (4 * games)) / (1 + spread)
    # At 0 or all successes a bound is exactly the rate; computed, it could miss it by a rounding error.
    return (0.0 if successes == 0 else centre - half, 1.0 if successes == games else centre + half)


def _solo_scope(name: str, games: Sequence[StoredGame]) -> SoloScope:
    labels = sorted({g.player0 for g in games})
    valid = [g for g in games if g.error is None]
    rows = []
    usage: dict[str, Usage] = {}
    for g in valid:
        _tally_usage(usage, g.player0, g, 0)
    for label in labels:
        mine = [g for g in valid if g.player0 == label]
        successes = sum(bool(g.success) for g in mine)
        low, high = wilson_interval(successes, len(mine)) if mine else (None, None)
        rows.append(
            SoloStanding(
                label=label,
                games=len(mine),
                successes=successes,
                low=low,
                high=high,
                mean_turns=sum(g.steps for g in mine) / len(mine) if mine else None,
                invalid_rate=sum(bool(g.invalid0) for g in mine) / len(mine) if mine else None,
                errors=sum(g.player0 == label and g.error is not None for g in games),
                usage=usage.get(label),
            )
        )
    rows.sort(key=lambda r: (r.success_rate is None, -(r.success_rate or 0.0), r.label))
    return SoloScope(name=name, agents=rows, games=len(valid), errors=len(games) - len(valid))


def compute(
    games: Sequence[StoredGame],
    agents: dict[str, AgentRecord] | None = None,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    weighting: str = DEFAULT_WEIGHTING,
    min_games: int = MIN_GAMES,
    max_interval: float = MAX_INTERVAL,
    notes: Mapping[tuple[str, str], str] | None = None,
) -> Standings:
    """Standings of every game id found in ``games`` (in order of appearance), and overall if there are
    several two-player games; single-player games come last, each in its own ``SoloScope``. ``weighting``
    applies to the overall fit; ``min_games`` and ``max_interval`` mark provisional ratings. ``notes``
    ((label, env id) -> why, as ``store.load_notes``) go on that agent's row of that game id's table only:
    overall pools games whose rules differ, so one game's note would not describe it. A game of an agent
    against itself (the web page lets one agent sit in both seats) says nothing of its strength: left out."""
    if not games:
        raise ValueError("no games stored yet; play some with: spiral-arena leaderboard run")
    games = [g for g in games if g.player0 != g.player1]
    if not games:
        raise ValueError("only games of an agent against itself are stored; they rate no one")
    if weighting not in WEIGHTINGS:
        raise ValueError(f"weighting must be one of {', '.join(WEIGHTINGS)}, got {weighting!r}")
    agents = agents or {}
    env_order: dict[str, int] = {}
    by_env: dict[str, list[StoredGame]] = defaultdict(list)
    for g in games:
        env_order.setdefault(g.env_id, len(env_order))
        by_env[g.env_id].append(g)
    solo = [env_id for env_id in env_order if by_env[env_id][0].player1 == NO_PLAYER]
    paired = [env_id for env_id in env_order if env_id not in solo]
    pooled = [g for g in games if g.env_id in paired]  # single-player games never enter the ratings
    names = ([OVERALL] if len(paired) > 1 else []) + paired
    scopes: list[Scope | SoloScope] = [
        _scope(name, pooled if name == OVERALL else by_env[name], env_order, agents, resamples, seed, weighting)
        for name in names
    ]
    for scope in scopes:
        for row in scope.agents:
            row.provisional = is_provisional(row, min_games, max_interval)
    scopes += [_solo_scope(env_id, by_env[env_id]) for env_id in solo]
    if notes:
        for scope in (s for s in scopes if s.name != OVERALL):
            for row in scope.agents:
                row.note = notes.get((row.label, scope.name))
    errors = [g for g in games if g.error is not None]
    return Standings(
        scopes, errors, resamples, seed, min_games=min_games, max_interval=max_interval, weighting=weighting
    )


def score_matrix(scope: Scope) -> tuple[list[str], np.ndarray]:
    """The row agent's points per game against each column agent (NaN where they never met), in rank order."""
    labels = [r.label for r in scope.agents]
    matrix = np.full((len(labels), len(labels)), np.nan)
    for i, row in enumerate(labels):
        for j, col in enumerate(labels):
            score = scope.head_to_head[row][col].score if row != col else None
            if score is not None:
                matrix[i, j] = score
    return labels, matrix


def apply_prices(standings: Standings, prices: dict[str, Price], specs: dict[str, str]) -> list[str]:
    """Price every agent with token counts: the price named by its label, else by its model id (its spec
    from ``specs``, label -> stored spec; an agent missing there is looked up by its label alone). Sets
    each ``Usage.cost_per_game`` and ``standings.prices``; returns the prices that matched no such agent."""
    standings.prices = dict(prices)
    used: set[str] = set()
    for scope in standings.scopes:
        for row in scope.agents:
            usage = row.usage
            if usage is None or not usage.token_games:
                continue
            price = prices.get(row.label) or prices.get(model_id(specs.get(row.label, row.label)) or "")
            if price is None:
                continue
            used.add(price.model)
            usage.price = price
            spent = usage.prompt_tokens * price.input_usd + usage.completion_tokens * price.output_usd
            usage.cost_per_game = spent / 1e6 / usage.token_games
    return [model for model in prices if model not in used]

"""Random legal play in one process: spiral_arena next to TextArena, PettingZoo and OpenSpiel.

    python benchmarks/env_throughput.py [--seconds S] [--games ID ...] [--json OUT]

Rows (each plays whole games, picking uniformly among the legal actions):

- ours AEC: ``spiral_arena.make(env_id)`` driven through ``agent_iter()`` / ``last()`` / ``step()``, so the acting
  player's observation is rendered every step; actions come from ``info["legal_actions"]`` or, for free-text
  games, ``info["action_examples"]``; finished agents step out with None. Every registered id is run.
- ours rules: ``env.game.new_state(rng)`` then ``legal_actions()`` / ``apply()``, no text at all (games whose
  legal actions are finite).
- TextArena 0.7.4 with the wrappers ``textarena.make`` adds, for its games that match ours. Its observation
  wrappers keep their history across ``reset()`` (docs pitfall #3); a short probe checks this per game and, when
  history leaks, every game gets a fresh ``textarena.make`` (construction is timed, as a careful user pays it).
- PettingZoo ``tictactoe_v3.raw_env()`` and ``env()``; OpenSpiel ``tic_tac_toe`` and ``kuhn_poker`` (one hand).

A step is one move by the player to act (stepping finished agents out and OpenSpiel chance nodes are timed but
not counted). Every game is seeded (reset seed = game number). Random picks for every framework come from the
same kind of buffered, seeded numpy stream, so the agent side costs the same everywhere. Each row gets
``--seconds`` in ``--repeats`` slices; the slices of all rows are interleaved in a rotating order so a noisy
machine does not favour one side, and the best slice is reported. Each target's ratio is also shown per repeat
(lowest-highest): the spread the machine's noise leaves. Time is this process's CPU time by default (``--clock
wall`` for elapsed time), so other work on a shared machine does not count against a row.
Peers that are not installed are skipped with the reason.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import os
import platform
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any, TypeVar

import numpy as np
from rich.console import Console
from rich.markup import escape
from rich.table import Table

import spiral_arena

T = TypeVar("T")
Play = Callable[[], int]  # plays one whole game, returns its number of moves

_BLOCK = 1 << 16
# Game options that make a row what the targets talk about, whatever the registry's defaults become.
OURS_KWARGS: dict[str, dict[str, Any]] = {"KuhnPoker-v0": {"rounds": 5}}
LEAK_PROBE_GAMES = 4


class InvalidPlay(RuntimeError):
    """A random 'legal' action was rejected: the row's action picker is wrong, so its number is void."""


class FreeText(Exception):
    """The rules layer has no finite legal-action list here, so it cannot be played without text."""


class Uniform:
    """Seeded numpy uniforms in [0, 1), drawn in blocks so that one pick is one cheap Python call."""

    def __init__(self, seed: int) -> None:
        rng = np.random.default_rng(seed)
        blocks = (rng.random(_BLOCK).tolist() for _ in itertools.count())
        self.next: Callable[[], float] = itertools.chain.from_iterable(blocks).__next__

    def pick(self, options: Sequence[T]) -> T:
        n = len(options)
        if n == 0:
            raise InvalidPlay("no action to choose from")
        return options[int(self.next() * n)]


@dataclass
class Row:
    key: str  # stable id used by the ratios and the JSON
    game: str  # the env id of ours the row lines up with
    side: str
    setup: str
    play: Play | None = None
    skip: str = ""  # why the row has no number
    note: str = ""
    samples: list[tuple[int, int, float]] = field(default_factory=list)  # (games, moves, seconds) per slice

    @property
    def best(self) -> tuple[float, float, float] | None:
        """(games/s, steps/s, moves/game) of the fastest slice."""
        if self.skip or not self.samples:
            return None
        games, moves, seconds = max(self.samples, key=lambda s: s[0] / s[2])
        return games / seconds, moves / seconds, moves / games


# ---- ours -------------------------------------------------------------------------------


def _kwargs_text(kwargs: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in kwargs.items())


def ours_aec(env_id: str, kwargs: dict[str, Any]) -> Play:
    """Whole games through the PettingZoo AEC loop, as a trainer drives the env."""
    env = spiral_arena.make(env_id, **kwargs)
    pick = Uniform(0).pick
    seeds = itertools.count()

    def play() -> int:
        env.reset(seed=next(seeds))
        moves = 0
        for _agent in env.agent_iter():
            _obs, _reward, terminated, truncated, info = env.last()
            if terminated or truncated:
                if "invalid_move" in info:
                    raise InvalidPlay(f"{env_id}: {info['invalid_move']}")
                env.step(None)
            else:
                env.step(pick(info["legal_actions"] or info["action_examples"]))
                moves += 1
        return moves

    return play


def ours_rules(env_id: str, kwargs: dict[str, Any]) -> Play:
    """Whole games on the rules layer only: the floor the text layer adds to."""
    game = spiral_arena.make(env_id, **kwargs).game
    rng = np.random.default_rng(0)
    pick = Uniform(1).pick

    def play() -> int:
        state = game.new_state(rng)
        moves = 0
        while not state.is_terminal():
            legal = state.legal_actions()
            if legal is None:
                raise FreeText
            state.apply(pick(legal))
            moves += 1
        state.returns()
        return moves

    return play


# ---- TextArena 0.7.4 --------------------------------------------------------------------
# Pickers read TextArena's own state (never its prose) and return an action in its own format.


def _ta_tictactoe(env: Any, player: int, u: Uniform) -> str:
    board = env.state.game_state["board"]
    return u.pick([f"[{3 * r + c}]" for r in range(3) for c in range(3) if board[r][c] == ""])


def _ta_kuhn(env: Any, player: int, u: Uniform) -> str:
    return f"[{u.pick(list(env.state.game_state['current_legal_action_tree']))}]"


def _ta_connect_four(env: Any, player: int, u: Uniform) -> str:
    board = env.state.game_state["board"]  # top row first: a column is open while its top cell is "."
    return u.pick([f"[{c}]" for c in range(len(board[0])) if board[0][c] == "."])


_SNAKE_MOVES = ("[up]", "[down]", "[left]", "[right]")
_PIG_MOVES = ("[roll]", "[hold]")


def _ta_snake(env: Any, player: int, u: Uniform) -> str:
    return u.pick(_SNAKE_MOVES)


def _ta_pig(env: Any, player: int, u: Uniform) -> str:
    return u.pick(_PIG_MOVES)


def _ta_liars_dice(env: Any, player: int, u: Uniform) -> str:
    """TextArena's own (stricter) raise rule; quantities capped at the dice in play, as in ours."""
    state = env.state.game_state
    q0, f0 = state["current_bid"]["quantity"], state["current_bid"]["face_value"]
    total = sum(state["remaining_dice"].values())
    options = [
        f"[Bid: {q}, {f}]" for q in range(max(q0, 1), total + 1) for f in range(max(f0, 1), 7) if (q, f) != (q0, f0)
    ]
    if q0:
        options.append("[Call]")
    return u.pick(options)


_CHAT = ("Let us keep talking.", "I am quite sure about this.", "Which one do you believe?")
_FACTS = ("[Fact 1]", "[Fact 2]")


def _ta_truth(env: Any, player: int, u: Uniform) -> str:
    state = env.state
    return u.pick(_FACTS) if state.turn == state.max_turns - 1 else u.pick(_CHAT)


_OFFER_SLOTS = 8  # offers make up most random moves, as in ours (one offer per slot, built on demand)


def _ta_negotiation(env: Any, player: int, u: Uniform) -> str:
    state = env.state.game_state
    mine = state["player_resources"][player]
    options: list[str | None] = [_CHAT[0], *([None] * _OFFER_SLOTS)]
    offer = state["current_offer"]
    if offer and offer["from_player"] != player:
        options.append("[Deny]")
        if all(mine[r] >= q for r, q in offer["requested_resources"].items()):
            options.append("[Accept]")
    choice = u.pick(options)
    if choice is not None:
        return choice
    give = u.pick([r for r, q in mine.items() if q > 0])
    ask = u.pick([r for r in mine if r != give])
    return f"[Offer: {1 + int(u.next() * min(3, mine[give]))} {give} -> {1 + int(u.next() * 3)} {ask}]"


@dataclass(frozen=True)
class TaPeer:
    ta_id: str
    kwargs: dict[str, Any]
    pick: Callable[[Any, int, Uniform], str] | None
    note: str = ""
    unavailable: str = ""


TA_PEERS: dict[str, TaPeer] = {
    "TicTacToe-v0": TaPeer("TicTacToe-v0", {}, _ta_tictactoe),
    "KuhnPoker-v0": TaPeer("KuhnPoker-v0", {"max_rounds": 5}, _ta_kuhn, "bets move no chips upstream"),
    "Snake-v0": TaPeer("Snake-v0", {}, _ta_snake, "5x5, 2 apples, 40 submissions"),
    "PigDice-v0": TaPeer(
        "PigDice-v0", {"winning_score": 50, "max_turns": 100}, _ta_pig, "limit counts actions upstream"
    ),
    "LiarsDice-v0": TaPeer("LiarsDice-v0", {}, _ta_liars_dice, "stricter bid rule upstream"),
    "TruthAndDeception-v0": TaPeer("TruthAndDeception-v0", {}, _ta_truth, "6 actions"),
    "SimpleNegotiation-v0": TaPeer(
        "SimpleNegotiation-v0", {}, _ta_negotiation, "5 random resources upstream, not SPIRAL's v1"
    ),
    "ConnectFour-v0": TaPeer("ConnectFour-v0", {}, _ta_connect_four),
    "TwentyQuestions-v0": TaPeer(
        "TwentyQuestions-v0",
        {},
        None,
        unavailable="n/a: its game master is a remote LLM (OpenRouter; needs OPENROUTER_API_KEY and network)",
    ),
}


def _unwrap(env: Any) -> Any:
    import textarena as ta

    while isinstance(env, ta.Wrapper):
        env = env.env
    return env


def _ta_game(env: Any, seed: int, peer: TaPeer, u: Uniform, first_obs: list[str] | None = None) -> int:
    """One seeded TextArena game on ``env``; returns its moves (and records the first observation if asked)."""
    env.reset(num_players=2, seed=seed)
    base = _unwrap(env)
    state = base.state
    pick = peer.pick
    done = False
    moves = 0
    while not done:
        player, obs = env.get_observation()
        if first_obs is not None and moves == 0:
            first_obs.append(obs)
        done, _ = env.step(pick(base, player, u))
        moves += 1
        if state.error_count:
            raise InvalidPlay(f"TextArena {peer.ta_id} rejected a move: {state.logs[-1][1][:200]}")
    _, game_info = env.close()
    if any(info.get("invalid_move") for info in game_info.values()):
        raise InvalidPlay(f"TextArena {peer.ta_id} ended on an invalid move")
    return moves


def ta_first_observation_lengths(peer: TaPeer, games: int) -> list[int]:
    """Length of the first observation of each game when one TextArena env is reused across resets."""
    import textarena as ta

    env = ta.make(peer.ta_id, **peer.kwargs)
    u = Uniform(4)
    first: list[str] = []
    for seed in range(games):
        _ta_game(env, seed, peer, u, first)
    return [len(o) for o in first]


def leaks(lengths: list[int]) -> bool:
    return lengths[-1] > 1.5 * lengths[0]


def textarena(peer: TaPeer, fresh: bool) -> Play:
    """Whole TextArena games; ``fresh``: a new ``textarena.make`` per game (its history leaks otherwise)."""
    import textarena as ta

    u = Uniform(2)
    seeds = itertools.count()
    reused = None if fresh else ta.make(peer.ta_id, **peer.kwargs)

    def play() -> int:
        env = ta.make(peer.ta_id, **peer.kwargs) if reused is None else reused
        return _ta_game(env, next(seeds), peer, u)

    return play


# ---- PettingZoo and OpenSpiel -----------------------------------------------------------


def pettingzoo(make_env: Callable[[], Any]) -> Play:
    """Whole PettingZoo games, picking among the cells the action mask allows."""
    env = make_env()
    pick = Uniform(3).pick
    seeds = itertools.count()

    def play() -> int:
        env.reset(seed=next(seeds))
        moves = 0
        for _agent in env.agent_iter():
            obs, _reward, terminated, truncated, _info = env.last()
            if terminated or truncated:
                env.step(None)
            else:
                env.step(int(pick(np.flatnonzero(obs["action_mask"]))))
                moves += 1
        return moves

    return play


def _chance(outcomes: list[tuple[int, float]], x: float) -> int:
    """The outcome that the uniform ``x`` falls on."""
    acc = 0.0
    for action, p in outcomes:
        acc += p
        if x < acc:
            return action
    return outcomes[-1][0]  # x beyond a sum just under 1 (rounding)


def open_spiel(game_name: str) -> Play:
    """Whole OpenSpiel games from Python; chance outcomes drawn with the seeded stream."""
    import pyspiel

    game = pyspiel.load_game(game_name)
    u = Uniform(5)
    pick = u.pick

    def play() -> int:
        state = game.new_initial_state()
        moves = 0
        while not state.is_terminal():
            if state.is_chance_node():
                state.apply_action(_chance(state.chance_outcomes(), u.next()))
            else:
                state.apply_action(pick(state.legal_actions()))
                moves += 1
        state.returns()
        return moves

    return play


# ---- building and measuring -------------------------------------------------------------


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _import_error(module: str) -> str:
    """'' if ``module`` imports, else why not (the peer is then skipped)."""
    try:
        with warnings.catch_warnings():  # peers warn about their own deprecated entry points
            warnings.simplefilter("ignore", DeprecationWarning)
            __import__(module)
    except Exception as error:  # a peer may fail on any missing optional dependency
        return f"{type(error).__name__}: {error}"
    return ""


def _ours_rows(env_id: str) -> list[Row]:
    kwargs = OURS_KWARGS.get(env_id, {})
    setup = _kwargs_text(kwargs) or "defaults"
    rows = [
        Row(f"ours-aec:{env_id}", env_id, "ours AEC", setup, ours_aec(env_id, kwargs)),
        Row(f"ours-rules:{env_id}", env_id, "ours rules", setup, ours_rules(env_id, kwargs)),
    ]
    if env_id == "KuhnPoker-v0":  # the single hand OpenSpiel plays
        rows.append(Row(f"ours-rules:{env_id}:1", env_id, "ours rules", "rounds=1", ours_rules(env_id, {"rounds": 1})))
    return rows


def _textarena_row(env_id: str, probe: dict[str, Any]) -> Row | None:
    """The TextArena row matching ``env_id`` (None if it has no match); records the reuse probe."""
    peer = TA_PEERS.get(env_id)
    if peer is None:
        return None
    version = _version("textarena")
    setup = peer.ta_id + (f" ({_kwargs_text(peer.kwargs)})" if peer.kwargs else "")
    row = Row(f"ta:{env_id}", env_id, f"TextArena {version}" if version else "TextArena", setup, note=peer.note)
    error = _import_error("textarena") if version else "not installed"
    if error:
        row.skip = f"skipped: textarena {error}"
        return row
    if peer.pick is None:
        row.skip = peer.unavailable
        return row
    try:
        lengths = ta_first_observation_lengths(peer, LEAK_PROBE_GAMES)
    except Exception as error:  # construction may need data, keys or network: show why
        row.skip = f"n/a: {type(error).__name__}: {error}"[:160]
        return row
    leaking = leaks(lengths)
    probe[env_id] = {"textarena_id": peer.ta_id, "first_observation_chars": lengths, "leaks": leaking}
    row.setup += ", fresh env per game" if leaking else ", one env reused"
    row.play = textarena(peer, fresh=leaking)
    return row


def _pettingzoo_rows() -> list[Row]:
    error = _import_error("pettingzoo.classic.tictactoe_v3")
    rows = []
    for key, setup in (("pz-raw", "tictactoe_v3.raw_env()"), ("pz-env", "tictactoe_v3.env()")):
        row = Row(key, "TicTacToe-v0", f"PettingZoo {_version('pettingzoo')}", setup)
        if error:
            row.skip = f"skipped: {error} (pip install 'pettingzoo[classic]')"
        else:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                from pettingzoo.classic import tictactoe_v3
            row.play = pettingzoo(tictactoe_v3.raw_env if key == "pz-raw" else tictactoe_v3.env)
        rows.append(row)
    return rows


def _open_spiel_row(env_id: str, name: str, setup: str) -> Row:
    version = _version("open_spiel")
    row = Row(f"spiel:{name}", env_id, f"OpenSpiel {version}" if version else "OpenSpiel", setup + ", Python loop")
    error = _import_error("pyspiel") if version else "not installed"
    if error:
        row.skip = f"skipped: open_spiel {error}"
    else:
        row.play = open_spiel(name)
    return row


# our env id -> OpenSpiel's game of the same rules and the row's setup text
OPEN_SPIEL_PEERS = {
    "TicTacToe-v0": ("tic_tac_toe", "tic_tac_toe"),
    "KuhnPoker-v0": ("kuhn_poker", "kuhn_poker (one hand)"),
    "LeducHoldem-v0": ("leduc_poker", "leduc_poker"),
    "ConnectFour-v0": ("connect_four", "connect_four"),
}


def build_rows(env_ids: list[str]) -> tuple[list[Row], dict[str, Any]]:
    """Every row for ``env_ids``, grouped by game, and the TextArena reuse probe (first-observation lengths)."""
    rows: list[Row] = []
    probe: dict[str, Any] = {}
    for env_id in env_ids:
        rows += _ours_rows(env_id)
        ta_row = _textarena_row(env_id, probe)
        if ta_row is not None:
            rows.append(ta_row)
        if env_id == "TicTacToe-v0":
            rows += _pettingzoo_rows()
        if env_id in OPEN_SPIEL_PEERS:
            rows.append(_open_spiel_row(env_id, *OPEN_SPIEL_PEERS[env_id]))
    return rows, probe


CLOCKS: dict[str, Callable[[], float]] = {"cpu": time.process_time, "wall": time.perf_counter}


def run_for(play: Play, seconds: float, clock: Callable[[], float]) -> tuple[int, int, float]:
    """Whole games until ``seconds`` have passed: (games, moves, elapsed).

    The clock is read once per batch of games, the batch growing until it lasts about a millisecond, so reading
    the clock costs nothing even for the fastest rows.
    """
    games = moves = 0
    batch = 1
    start = clock()
    end = start + seconds
    while True:
        before = clock()
        for _ in range(batch):
            moves += play()
        games += batch
        now = clock()
        if now >= end:
            return games, moves, now - start
        if now - before < 1e-3:
            batch *= 2


def measure(rows: list[Row], seconds: float, repeats: int, warmup: float, clock: Callable[[], float]) -> None:
    """Warm every row up, then time ``repeats`` slices per row, rows interleaved in a rotating order."""
    live = [r for r in rows if not r.skip]
    for row in live:
        try:
            run_for(row.play, warmup, clock)
        except FreeText:
            row.skip = "n/a: free-text actions (no finite legal list)"
        except Exception as error:
            row.skip = f"failed: {type(error).__name__}: {error}"[:160]
    live = [r for r in live if not r.skip]
    for rep in range(repeats):
        shift = (rep * len(live)) // repeats
        order = live[shift:] + live[:shift]
        for row in order if rep % 2 == 0 else reversed(order):
            if row.skip:
                continue
            gc.collect()
            try:
                row.samples.append(run_for(row.play, seconds / repeats, clock))
            except FreeText:
                row.skip = "n/a: free-text actions (no finite legal list)"
            except Exception as error:
                row.skip = f"failed: {type(error).__name__}: {error}"[:160]


# ---- ratios and output ------------------------------------------------------------------


@dataclass(frozen=True)
class Ratio:
    label: str
    ours: str  # row keys
    peer: str
    target: float | None  # None: shown for information
    metric: str = "games/s"


def ratios_for(env_ids: list[str]) -> list[Ratio]:
    out = [
        Ratio("AEC vs TextArena, TicTacToe", "ours-aec:TicTacToe-v0", "ta:TicTacToe-v0", 2.0),
        Ratio("AEC vs TextArena, Kuhn 5 rounds", "ours-aec:KuhnPoker-v0", "ta:KuhnPoker-v0", 2.0),
        Ratio("AEC vs TextArena, Connect Four", "ours-aec:ConnectFour-v0", "ta:ConnectFour-v0", None),
        Ratio("AEC vs PettingZoo raw_env, TicTacToe", "ours-aec:TicTacToe-v0", "pz-raw", 1.0),
        Ratio("rules vs OpenSpiel, tic_tac_toe", "ours-rules:TicTacToe-v0", "spiel:tic_tac_toe", 1 / 3),
        Ratio("rules vs OpenSpiel, kuhn_poker (1 hand)", "ours-rules:KuhnPoker-v0:1", "spiel:kuhn_poker", 1 / 3),
        Ratio("rules vs OpenSpiel, leduc_poker", "ours-rules:LeducHoldem-v0", "spiel:leduc_poker", None),
        Ratio("rules vs OpenSpiel, connect_four", "ours-rules:ConnectFour-v0", "spiel:connect_four", None),
    ]
    for env_id in env_ids:  # the other TextArena matches: rules differ, so compare steps, not games
        if env_id not in ("TicTacToe-v0", "KuhnPoker-v0", "ConnectFour-v0") and env_id in TA_PEERS:
            out.append(Ratio(f"AEC vs TextArena, {env_id}", f"ours-aec:{env_id}", f"ta:{env_id}", None, "steps/s"))
    return out


def per_repeat(ours: Row, peer: Row, index: int) -> list[float]:
    """The ratio within each repeat: both rows' slices of one repeat ran in the same round of slices, so the
    spread over repeats shows how far the machine's noise moves the ratio."""
    if ours.skip or peer.skip:
        return []
    return [(a[index] / a[2]) / (b[index] / b[2]) for a, b in zip(ours.samples, peer.samples, strict=False)]


def ratio_results(rows: list[Row], env_ids: list[str]) -> list[dict[str, Any]]:
    by_key = {r.key: r for r in rows}
    results = []
    for ratio in ratios_for(env_ids):
        ours, peer = by_key.get(ratio.ours), by_key.get(ratio.peer)
        if ours is None or peer is None:
            continue  # game not selected
        index = 0 if ratio.metric == "games/s" else 1
        a, b = ours.best, peer.best
        value = a[index] / b[index] if a and b else None
        repeats = per_repeat(ours, peer, index)
        if value is None:
            verdict = ours.skip or peer.skip or "n/a: no measurement"
        elif ratio.target is None:
            verdict = "info"
        else:
            verdict = "met" if value >= ratio.target else "not met"
        results.append(
            {
                "label": ratio.label,
                "metric": ratio.metric,
                "ours": a[index] if a else None,
                "peer": b[index] if b else None,
                "ratio": value,
                "ratio_per_repeat": repeats,
                "target": ratio.target,
                "verdict": verdict,
            }
        )
    return results


def _num(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:,.0f}" if x >= 100 else f"{x:,.1f}"


def _target(t: float | None) -> str:
    if t is None:
        return "-"
    return ">= 1/3" if abs(t - 1 / 3) < 1e-9 else f">= {t:g}x"


def print_report(console: Console, rows: list[Row], ratios: list[dict[str, Any]], meta: dict[str, Any]) -> None:
    table = Table(title="Random legal play, single process (best slice)", title_justify="left")
    for name, justify in (
        ("game", "left"),
        ("side", "left"),
        ("setup", "left"),
        ("games/s", "right"),
        ("steps/s", "right"),
        ("steps/game", "right"),
        ("note", "left"),
    ):
        table.add_column(name, justify=justify)
    for row in rows:
        best = row.best
        if best is None:
            table.add_row(row.game, row.side, escape(row.setup), "-", "-", "-", escape(row.skip))
        else:
            table.add_row(
                row.game, row.side, escape(row.setup), _num(best[0]), _num(best[1]), f"{best[2]:.1f}", escape(row.note)
            )
    console.print(table)

    targets = Table(title="Targets", title_justify="left")
    for name, justify in (
        ("comparison", "left"),
        ("metric", "left"),
        ("ours", "right"),
        ("peer", "right"),
        ("ratio", "right"),
        ("per repeat", "right"),
        ("target", "right"),
        ("verdict", "left"),
    ):
        targets.add_column(name, justify=justify)
    for r in ratios:
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.2f}x"
        spread = f"{min(r['ratio_per_repeat']):.2f}-{max(r['ratio_per_repeat']):.2f}x" if r["ratio_per_repeat"] else "-"
        targets.add_row(
            r["label"],
            r["metric"],
            _num(r["ours"]),
            _num(r["peer"]),
            ratio,
            spread,
            _target(r["target"]),
            escape(r["verdict"]),
        )
    console.print(targets)
    console.print(
        f"[dim]{meta['python']} on {meta['machine']}, {meta['cpus']} CPUs; {meta['seconds']} s per row in "
        f"{meta['repeats']} interleaved slices after {meta['warmup']} s warm-up, {meta['clock']} clock; "
        f"total {meta['wall_s']:.0f} s wall.[/dim]"
    )


def print_leak_probe(console: Console, probe: dict[str, Any]) -> None:
    if not probe:
        return
    lines = []
    for p in probe.values():
        verdict = "leaks: history kept across reset()" if p["leaks"] else "no leak"
        lines.append(f"  {p['textarena_id']}: {p['first_observation_chars']} -> {verdict}")
    console.print(
        "TextArena, one env reused: chars of each game's first observation\n" + "\n".join(lines), markup=False
    )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="timed seconds per row (default 2)")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved slices per row; the best counts")
    parser.add_argument("--warmup", type=float, default=0.2, help="untimed seconds per row first (default 0.2)")
    parser.add_argument(
        "--clock",
        choices=tuple(CLOCKS),
        default="cpu",
        help="cpu: this process's CPU time, robust on a shared machine (default); wall: elapsed time",
    )
    parser.add_argument("--games", nargs="+", metavar="ENV_ID", help="our env ids to run (default: all registered)")
    parser.add_argument("--json", metavar="OUT", help="also write the results to this JSON file")
    args = parser.parse_args(argv)
    registered = spiral_arena.list_envs()
    unknown = [g for g in args.games or [] if g not in registered]
    if unknown:
        parser.error(f"unknown env id(s) {', '.join(unknown)}; registered: {', '.join(registered)}")
    if args.seconds <= 0 or args.warmup < 0 or args.repeats < 1:
        parser.error("--seconds must be > 0, --warmup >= 0 and --repeats >= 1")
    args.games = args.games or registered
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    console = Console(width=None if sys.stdout.isatty() else 160)
    started = time.perf_counter()
    rows, probe = build_rows(args.games)
    measure(rows, args.seconds, args.repeats, args.warmup, CLOCKS[args.clock])
    ratios = ratio_results(rows, args.games)
    meta = {
        "python": f"Python {platform.python_version()}",
        "machine": f"{platform.system()} {platform.machine()}",
        "cpus": os.cpu_count(),
        "seconds": args.seconds,
        "repeats": args.repeats,
        "warmup": args.warmup,
        "clock": args.clock,
        "versions": {d: _version(d) for d in ("spiral-arena", "textarena", "pettingzoo", "open_spiel", "numpy")},
        "wall_s": time.perf_counter() - started,
    }
    print_report(console, rows, ratios, meta)
    print_leak_probe(console, probe)
    if args.json:
        result = {
            "meta": meta,
            "rows": [
                {
                    "key": r.key,
                    "game": r.game,
                    "side": r.side,
                    "setup": r.setup,
                    "games_per_s": r.best[0] if r.best else None,
                    "steps_per_s": r.best[1] if r.best else None,
                    "steps_per_game": r.best[2] if r.best else None,
                    "samples": r.samples,
                    "skip": r.skip,
                    "note": r.note,
                }
                for r in rows
            ],
            "ratios": ratios,
            "textarena_reuse_probe": probe,
        }
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())

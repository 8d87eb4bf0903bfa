"""Two-player Snake on a small grid with simultaneous moves.

Each round both players pick a direction and both snakes move at once (rules in ``_resolve``).
A death ends the game: the survivor wins, a double death draws. After the last round the snake
that ate more apples wins; equal counts draw. As an AEC env the two choices are submitted in turn
(player 0, then player 1, who is not told player 0's choice); ``SnakeParallelEnv`` takes both in
one step.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
from pettingzoo import ParallelEnv

from spiral_arena.core.actions import InvalidMove, choose
from spiral_arena.core.env import TextGameEnv
from spiral_arena.core.game import TERMINAL, Message, TextGame, winner_returns
from spiral_arena.core.readback import PositionUnreadable, cells, latest_turn

# ---- rules ------------------------------------------------------------------------------

Cell = tuple[int, int]  # (x, y); y grows upwards
DIRECTIONS: dict[str, Cell] = {"up": (0, 1), "down": (0, -1), "left": (-1, 0), "right": (1, 0)}
# Why a snake died, for the text layer.
OFF_BOARD, HEAD_ON, SWAP, OWN_BODY, OTHER_BODY = "off_board", "head_on", "swap", "own_body", "other_body"


class SnakeState:
    def __init__(
        self, rng: np.random.Generator, width: int = 5, height: int = 5, apples: int = 2, rounds: int = 20
    ) -> None:
        self.rng = rng
        self.width, self.height, self.rounds = width, height, rounds
        cells = [(x, y) for y in range(height) for x in range(width)]
        self.bodies: list[list[Cell]] = [[cells.pop(int(rng.integers(len(cells))))] for _ in range(2)]  # head first
        self.apples: list[Cell] = []
        for _ in range(apples):
            self._spawn_apple()
        self.scores = [0, 0]  # apples eaten
        self.round = 0  # rounds resolved so far
        self.pending: str | None = None  # player 0's move of this round, until player 1 has moved
        self.current_player = 0
        self.winner: int | None = None
        # What the last resolution did, for the text layer.
        self.last_moves: tuple[str, str] | None = None
        self.eaten: list[tuple[int, Cell]] = []
        self.spawned: list[Cell] = []
        self.deaths: dict[int, str] = {}

    def _free_cell(self) -> Cell | None:
        """A uniformly drawn cell holding no snake and no apple, or None when there is none."""
        taken = {c for body in self.bodies for c in body}.union(self.apples)
        free = [(x, y) for y in range(self.height) for x in range(self.width) if (x, y) not in taken]
        return free[int(self.rng.integers(len(free)))] if free else None

    def _spawn_apple(self) -> Cell | None:
        cell = self._free_cell()
        if cell is not None:
            self.apples.append(cell)
        return cell

    def legal_actions(self) -> list[str]:
        return [] if self.current_player == TERMINAL else list(DIRECTIONS)

    def apply(self, move: str) -> None:
        """Player 0's move waits for player 1's; the round resolves on the second one."""
        if move not in self.legal_actions():
            raise ValueError(f"{move!r} is not legal; legal: {self.legal_actions()}")
        if self.current_player == 0:
            self.pending, self.current_player = move, 1
            return
        first, self.pending = self.pending, None
        self._resolve((first, move))

    def _resolve(self, moves: tuple[str, str]) -> None:
        """Both moves at once: off the board, then head-on and head swap, then bodies (a tail that
        moves away does not block); survivors move and eat, and eaten apples are replaced last."""
        heads = [body[0] for body in self.bodies]
        targets = [(x + DIRECTIONS[m][0], y + DIRECTIONS[m][1]) for (x, y), m in zip(heads, moves, strict=True)]
        deaths: dict[int, str] = {}
        for p, (x, y) in enumerate(targets):
            if not (0 <= x < self.width and 0 <= y < self.height):
                deaths[p] = OFF_BOARD
        if not deaths and targets[0] == targets[1]:
            deaths = {0: HEAD_ON, 1: HEAD_ON}
        elif not deaths and targets[0] == heads[1] and targets[1] == heads[0]:
            deaths = {0: SWAP, 1: SWAP}
        movers = [p for p in (0, 1) if p not in deaths]
        grows = {p: targets[p] in self.apples for p in movers}
        # A tail that moves away this round is not in the way (a growing snake keeps its tail).
        blocked: dict[Cell, int] = {}
        for p in movers:
            body = self.bodies[p]
            blocked.update(dict.fromkeys(body if grows[p] else body[:-1], p))
        for p in movers:
            owner = blocked.get(targets[p])
            if owner is not None:
                deaths[p] = OWN_BODY if owner == p else OTHER_BODY
        self.eaten = []
        for p in movers:
            if p in deaths:
                continue
            body = self.bodies[p]
            body.insert(0, targets[p])
            if grows[p]:
                self.scores[p] += 1
                self.apples.remove(targets[p])
                self.eaten.append((p, targets[p]))
            else:
                body.pop()
        # New apples only once both snakes stand on their new cells.
        self.spawned = [c for c in (self._spawn_apple() for _ in self.eaten) if c is not None]
        self.round += 1
        self.last_moves, self.deaths = moves, deaths
        if deaths:
            self.winner = None if len(deaths) == 2 else 1 - next(iter(deaths))
        elif self.round == self.rounds:
            s0, s1 = self.scores
            self.winner = None if s0 == s1 else (0 if s0 > s1 else 1)
        else:
            self.current_player = 0
            return
        self.current_player = TERMINAL

    def is_terminal(self) -> bool:
        return self.current_player == TERMINAL

    def returns(self) -> tuple[float, float]:
        return winner_returns(self.winner)


# ---- text -------------------------------------------------------------------------------

_SHORT_FORMS = {"w": "up", "s": "down", "a": "left", "d": "right"}
_OPTIONS = {**{m: m for m in DIRECTIONS}, **_SHORT_FORMS}
_LEGAL_STRINGS = [f"[{m}]" for m in DIRECTIONS]
BODY_MARKS = ("+", "*")
_LEGEND = "'.' empty, '@' apple, '0' and '1' the heads of the snakes, '+' body of snake 0, '*' body of snake 1"
_DEATHS = {
    OFF_BOARD: "Player {p} moved off the board and dies.",
    OWN_BODY: "Player {p} ran into its own body and dies.",
    OTHER_BODY: "Player {p} ran into Player {o}'s snake and dies.",
}

PROMPT = """\
You are Player {me} in Snake, a zero-sum game for two players on a grid {w} cells wide and {h} \
cells high. Each player steers a snake that starts one cell long; {apples} apple{s} lie on the \
board. Cells are written (x, y): x goes from 0 (left) to {xmax} (right), y from 0 (bottom) to \
{ymax} (top), so [up] adds 1 to y. The head of your snake is drawn as '{me}', your opponent's as \
'{other}'.
The game lasts at most {rounds} rounds. Each round both players choose a direction without seeing \
the other's choice (Player 0 answers first, but Player 1 is not told that answer), then both \
snakes move one cell at the same time:
- A snake that moves off the board dies.
- If both heads move onto the same cell, or onto each other's cells, both snakes die.
- A snake that moves onto a cell of a snake's body dies; its own body counts too. The last cell \
of a tail is safe, because that tail moves away in the same round, unless its snake eats an apple.
- A snake that moves onto an apple eats it: it scores a point and grows one cell longer (its tail \
stays), and a new apple appears on a random empty cell.
If one snake dies, the other player wins; if both die in the same round, the game is a draw. If \
both are alive after round {rounds}, the player who ate more apples wins; equal counts are a draw.
On your turn, answer with one direction in square brackets: [up], [down], [left] or [right] \
(short forms [w], [s], [a], [d] mean the same). Anything else is an invalid move and loses the \
game."""


def _cells(cells: list[Cell]) -> str:
    return ", ".join(f"({x}, {y})" for x, y in cells) or "none"


_CELLS_SHOWN = r"(none|\(\d+, \d+\)(?:, \(\d+, \d+\))*)"  # what ``_cells`` writes
_TURN = re.compile(
    r"Round (\d+) of (\d+)\. Apples eaten: you (\d+), opponent (\d+)\.\n"
    r"(?:Last round: Player 0 moved \w+, Player 1 moved \w+\.\n)?"
    r"(?:Player 0 has chosen a move; both moves are shown once you have chosen yours\.\n)?"
    + re.escape(f"Board ({_LEGEND}):")
    + r"\n(.*)\n"
    rf"Your snake \(Player ([01])\): head \((\d+), (\d+)\), body {_CELLS_SHOWN}, length (\d+)\.\n"
    rf"Opponent's snake \(Player ([01])\): head \((\d+), (\d+)\), body {_CELLS_SHOWN}, length (\d+)\.\n"
    rf"Apples: {_CELLS_SHOWN}\.",
    re.DOTALL,
)
_BOARD_ROW = re.compile(r" *(\d+) \| (.*) \|")


def _board_size(board: str) -> tuple[int, int] | None:
    """(width, height) of a board drawn by ``Snake.render``, or None if it is not one."""
    rows = [_BOARD_ROW.fullmatch(line) for line in board.split("\n")[1:-2]]
    if not rows or None in rows:
        return None
    width, height = len(rows[0].group(2).split()), len(rows)
    if any(int(r.group(1)) != height - 1 - i or len(r.group(2).split()) != width for i, r in enumerate(rows)):
        return None
    return width, height


# Every turn draws the whole board: a 20x20 one is about 1,000 characters of the prompt; 3000x3000 took 10 s and
# 45 MB to draw once.
MAX_SIDE = 20


class Snake(TextGame):
    name = "Snake"
    description = "Two snakes on a small grid move simultaneously, eat apples, and must not crash."
    default_obs_format = "first_last"

    def __init__(self, width: int = 5, height: int = 5, apples: int = 2, rounds: int = 20) -> None:
        for name, value in (("width", width), ("height", height), ("apples", apples), ("rounds", rounds)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        for name, value in (("width", width), ("height", height)):
            if value > MAX_SIDE:
                raise ValueError(f"{name} must be at most {MAX_SIDE}, got {value}")
        if width * height < apples + 2:
            raise ValueError(
                f"a {width}x{height} board has no room for 2 snakes and {apples} apples; "
                f"width * height must be at least apples + 2"
            )
        self.width, self.height, self.apples, self.rounds = width, height, apples, rounds

    def new_state(self, rng: np.random.Generator) -> SnakeState:
        return SnakeState(rng, self.width, self.height, self.apples, self.rounds)

    def prompt(self, player: int) -> str:
        return PROMPT.format(
            me=player,
            other=1 - player,
            w=self.width,
            h=self.height,
            xmax=self.width - 1,
            ymax=self.height - 1,
            apples=self.apples,
            s="" if self.apples == 1 else "s",
            rounds=self.rounds,
        )

    def render(self, state: SnakeState) -> str:
        """The board framed, top row first, with y down the left side and x along the bottom."""
        marks: dict[Cell, str] = dict.fromkeys(state.apples, "@")
        for p, body in enumerate(state.bodies):
            marks.update(dict.fromkeys(body[1:], BODY_MARKS[p]))
            marks[body[0]] = str(p)
        pad = len(str(max(state.width, state.height) - 1))
        rows = []
        for y in range(state.height - 1, -1, -1):
            cells = " ".join(marks.get((x, y), ".").rjust(pad) for x in range(state.width))
            rows.append(f"{y:>{pad}} | {cells} |")
        width = (pad + 1) * state.width + 1
        border = f"{'':>{pad}} +{'-' * width}+"
        axis = f"{'':>{pad}}   " + " ".join(str(x).rjust(pad) for x in range(state.width))
        return "\n".join([border, *rows, border, axis])

    def turn_message(self, state: SnakeState, player: int) -> str:
        other = 1 - player
        lines = [
            f"Round {state.round + 1} of {state.rounds}. Apples eaten: you {state.scores[player]}, "
            f"opponent {state.scores[other]}."
        ]
        if state.last_moves is not None:
            m0, m1 = state.last_moves
            lines.append(f"Last round: Player 0 moved {m0}, Player 1 moved {m1}.")
        if state.pending is not None:
            lines.append("Player 0 has chosen a move; both moves are shown once you have chosen yours.")
        lines.append(f"Board ({_LEGEND}):")
        lines.append(self.render(state))
        for who, p in (("Your snake", player), ("Opponent's snake", other)):
            body = state.bodies[p]
            lines.append(
                f"{who} (Player {p}): head ({body[0][0]}, {body[0][1]}), body {_cells(body[1:])}, length {len(body)}."
            )
        lines.append(f"Apples: {_cells(state.apples)}.")
        return "\n".join(lines)

    def player_view(self, state: SnakeState, player: int) -> dict:
        """Cells are (x, y) with y up; *_body lists every cell of the snake, head first; round is
        the round being played (1-based); scores are apples eaten."""
        me, them = state.bodies[player], state.bodies[1 - player]
        return {
            "width": state.width,
            "height": state.height,
            "me": player,
            "my_head": me[0],
            "my_body": list(me),
            "opponent_head": them[0],
            "opponent_body": list(them),
            "apples": list(state.apples),
            "my_score": state.scores[player],
            "opponent_score": state.scores[1 - player],
            "round": state.round + 1,
            "rounds": state.rounds,
        }

    @staticmethod
    def read_position(observation: str) -> dict[str, Any] | None:
        """``player_view`` read back from the observation's latest turn message (any obs_format), or
        None when that is not a Snake turn: the size from the drawn board, the snakes and apples from
        the cell lists under it. Player 0's pending choice is never shown to Player 1, nor read."""
        turn = latest_turn(observation)
        match = None if turn is None else _TURN.fullmatch(turn.message)
        if match is None:
            return None
        (round_, rounds, my_score, their_score, board) = match.group(1, 2, 3, 4, 5)
        size = _board_size(board)
        bodies = []
        for first in (6, 11):  # player, head x, head y, the rest of the body, length
            head = (int(match.group(first + 1)), int(match.group(first + 2)))
            bodies.append([head, *cells(match.group(first + 3))])
            if len(bodies[-1]) != int(match.group(first + 4)):
                bodies = []
                break
        if size is None or not bodies:
            raise PositionUnreadable("Snake", "a readable board and snakes")
        me = int(match.group(6))
        return {
            "width": size[0],
            "height": size[1],
            "me": me,
            "my_head": bodies[0][0],
            "my_body": bodies[0],
            "opponent_head": bodies[1][0],
            "opponent_body": bodies[1],
            "apples": cells(match.group(16)),
            "my_score": int(my_score),
            "opponent_score": int(their_score),
            "round": int(round_),
            "rounds": int(rounds),
        }

    def legal_action_strings(self, state: SnakeState) -> list[str]:
        return [] if state.is_terminal() else list(_LEGAL_STRINGS)

    def parse(self, state: SnakeState, text: str) -> str:
        return choose(text, _OPTIONS, _LEGAL_STRINGS)

    def move_messages(self, state: SnakeState, player: int, move: str) -> list[Message]:
        if state.pending is not None:  # player 0 moved; only player 0 may know which way
            return [(player, f"You chose {move}. Both moves are applied once Player 1 has chosen.")]
        m0, m1 = state.last_moves or ("", "")
        parts = [f"Round {state.round}: Player 0 moved {m0}, Player 1 moved {m1}."]
        for p, (x, y) in state.eaten:
            parts.append(f"Player {p} ate the apple at ({x}, {y}) and has now eaten {state.scores[p]}.")
        if state.spawned:
            parts.append(f"New apple{'s' if len(state.spawned) > 1 else ''} at {_cells(state.spawned)}.")
        causes = set(state.deaths.values())
        if HEAD_ON in causes:
            parts.append("The heads collided on the same cell: both snakes die.")
        elif SWAP in causes:
            parts.append("The heads swapped cells: both snakes die.")
        else:
            parts += [_DEATHS[cause].format(p=p, o=1 - p) for p, cause in sorted(state.deaths.items())]
        return [(None, " ".join(parts))]

    def outcome_reason(self, state: SnakeState) -> str:
        if len(state.deaths) == 2:
            return f"Both snakes died in round {state.round}: a draw."
        if state.deaths:
            return f"Only Player {state.winner}'s snake is alive, so Player {state.winner} wins."
        s0, s1 = state.scores
        played = f"All {state.rounds} rounds are played"
        if state.winner is None:
            return f"{played} and both ate {s0} apple{'' if s0 == 1 else 's'}: a draw."
        return f"{played}; Player {state.winner} ate more apples ({s0} to {s1}) and wins."

    def parallel_env(self, env: TextGameEnv) -> SnakeParallelEnv:
        """The Parallel API view: both moves of a round in one ``step`` (see ``registry.make_parallel``)."""
        return SnakeParallelEnv(env)


# ---- parallel API -----------------------------------------------------------------------


class SnakeParallelEnv(ParallelEnv):
    """Snake with truly simultaneous moves, built on the AEC env's state, message log and spaces.

    ``step({"player_0": a0, "player_1": a1})`` plays one round. An invalid answer ends the game:
    one offender loses (-1/+1), two offenders draw (0/0); each offender's info has ``invalid_move``
    and every info lists ``offenders``.
    """

    def __init__(self, env: TextGameEnv) -> None:
        self.env = env
        self.metadata = env.metadata
        self.render_mode = env.render_mode
        self.possible_agents = list(env.possible_agents)
        self.agents: list[str] = []

    def observation_space(self, agent: str) -> Any:
        return self.env.observation_space(agent)

    def action_space(self, agent: str) -> Any:
        return self.env.action_space(agent)

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        env = self.env
        env.reset(seed=seed, options=options)  # tells player 0 it is its turn
        self._announce_turn(1)
        self.agents = list(self.possible_agents)
        return self._observations(), self._infos()

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        env, game = self.env, self.env.game
        if not self.agents:
            raise RuntimeError("call reset() before step()" if env.state_ is None else "the game is over; call reset()")
        missing = [a for a in self.agents if a not in actions]
        if missing:
            raise ValueError(f"both snakes move every round: missing an action for {', '.join(missing)}")
        for agent in self.agents:
            if not isinstance(actions[agent], str):
                raise TypeError(f"{agent} must act with a str (raw model text), got {type(actions[agent]).__name__}")
        state = env.state_
        moves: list[str] = []
        offences: dict[int, str] = {}
        for p, agent in enumerate(self.possible_agents):
            try:
                moves.append(game.parse(state, actions[agent]))
            except InvalidMove as invalid:
                offences[p] = invalid.reason
        if offences:
            return self._end_on_invalid(offences)
        env._render_infos()  # the moves bypass env.step(): the env's infos of reset are built before they apply
        state.apply(moves[0])
        state.apply(moves[1])
        for to, text in game.move_messages(state, 1, moves[1]):
            env.log.post(to, text)
        if state.is_terminal():
            env._finish(state.returns())
            return self._result(dict(env.rewards), terminated=True)
        self._announce_turn(0)
        self._announce_turn(1)
        return self._result(dict.fromkeys(self.possible_agents, 0.0), terminated=False)

    def _end_on_invalid(self, offences: dict[int, str]) -> tuple[dict, dict, dict, dict, dict]:
        env = self.env
        for p, reason in offences.items():
            env.log.post(None, f"Player {p} made an invalid move: {reason}")
        if len(offences) == 2:
            returns = (0.0, 0.0)
        else:
            returns = (1.0, -1.0) if 1 in offences else (-1.0, 1.0)
        offenders = [self.possible_agents[p] for p in offences]
        env._finish(returns, "invalid_move", {"offenders": offenders})
        for p, reason in offences.items():
            env.infos[self.possible_agents[p]]["invalid_move"] = reason
        return self._result(dict(env.rewards), terminated=True)

    def _announce_turn(self, player: int) -> None:
        """Post ``player``'s turn message, worded as the AEC env words it."""
        env = self.env
        state = env.state_
        legal = ", ".join(env.game.legal_action_strings(state))
        env.log.post(player, f"Your turn. Legal actions: {legal}.\n{env.view(player).turn_message(state, player)}")

    def _observations(self) -> dict[str, str]:
        return {a: self.env.observe(a) for a in self.possible_agents}

    def _infos(self) -> dict[str, dict[str, Any]]:
        """Both players act every round, so both get the legal actions and their view."""
        game, state = self.env.game, self.env.state_
        legal = game.legal_action_strings(state)
        return {
            a: {"game": game.name, "legal_actions": list(legal), "view": game.player_view(state, p)}
            for p, a in enumerate(self.possible_agents)
        }

    def _result(self, rewards: dict[str, float], terminated: bool) -> tuple[dict, dict, dict, dict, dict]:
        agents = self.possible_agents
        if terminated:
            self.agents = []
            infos = {a: dict(self.env.infos[a]) for a in agents}
        else:
            infos = self._infos()
        return self._observations(), rewards, dict.fromkeys(agents, terminated), dict.fromkeys(agents, False), infos

    def render(self) -> str | None:
        return self.env.render()

    def close(self) -> None:
        self.env.close()

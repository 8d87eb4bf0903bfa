"""The contract between a game's rules, its text, and the env that glues them.

Rules (a ``State``) know nothing about text: they hold the position, list legal actions as
plain values, apply them, and report returns. Chance is drawn from the numpy Generator the
env hands to ``TextGame.new_state``. The ``TextGame`` turns states into prompts and messages
and turns a player's answer back into a rules action.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Protocol

import numpy as np

TERMINAL = -1  # current_player of a finished game


def winner_returns(winner: int | None) -> tuple[float, float]:
    """Zero-sum two-player returns: +1/-1 for a winner, 0/0 for a draw (None)."""
    if winner is None:
        return (0.0, 0.0)
    return (1.0, -1.0) if winner == 0 else (-1.0, 1.0)


class State(Protocol):
    """A game position; mutable, advanced in place by ``apply``."""

    current_player: int

    def legal_actions(self) -> list[Any] | None:
        """Every legal action as a plain value, or None for free-form games (chat)."""

    def apply(self, action: Any) -> None:
        """Play a legal action for ``current_player`` (and resolve any chance that follows)."""

    def is_terminal(self) -> bool: ...

    def returns(self) -> tuple[float, ...]:
        """Reward of each player so far (only the terminal value matters for zero-sum games)."""


Message = tuple[int | None, str]  # (recipient player, or None for everyone; text)


class TextGame(ABC):
    """The text layer of one game, holding the game's parameters.

    Subclasses set the class attributes and implement the methods; ``TextGameEnv`` does the rest
    (turn order, invalid moves, histories, rewards, spaces).
    """

    name: ClassVar[str]
    description: ClassVar[str]  # one line, shown by ``spiral-arena envs``
    default_obs_format: ClassVar[str]  # the format SPIRAL used for this game
    agents: ClassVar[tuple[str, ...]] = ("player_0", "player_1")
    roles: ClassVar[tuple[str, ...] | None] = None  # e.g. ("Deceiver", "Guesser")
    step_rewards: ClassVar[bool] = False  # True if returns() changes before the end
    has_chance: ClassVar[bool] = True  # False: new_state gets rng=None (no Generator is built)
    deterministic: bool = True  # False when an outside model decides outcomes (an LLM judge)
    # The constructor options that change only what a player reads (a board's layout, a recap), never the
    # rules or the payoff, each with its valid values: two players may read one match in different texts
    # (``TextGameEnv`` views), and a checkpoint is shown the text it trained on while it plays the match's rules.
    text_options: ClassVar[Mapping[str, tuple[Any, ...]]] = {}

    @abstractmethod
    def new_state(self, rng: np.random.Generator | None) -> State:
        """A fresh initial state; every chance outcome comes from ``rng``."""

    @abstractmethod
    def prompt(self, player: int) -> str:
        """The rules as the player reads them at the start."""

    def start_messages(self, state: State) -> Sequence[Message]:
        """What players are told right after reset, besides the prompt (e.g. their private card)."""
        return []

    @abstractmethod
    def turn_message(self, state: State, player: int) -> str:
        """What the player to act sees of the position (board, own card, holdings...)."""

    @abstractmethod
    def parse(self, state: State, text: str) -> Any:
        """A raw response -> a legal rules action, or raise ``InvalidMove`` with a reason."""

    @abstractmethod
    def legal_action_strings(self, state: State) -> list[str] | None:
        """The bracketed legal actions of the player to act, or None for free-text games."""

    def action_format(self, state: State) -> str:
        """How to write an action; for free-text games, this is the whole grammar."""
        legal = self.legal_action_strings(state)
        return f"one of {', '.join(legal)}" if legal else ""

    def player_view(self, state: State, player: int) -> dict[str, Any]:
        """What ``player`` knows now as plain values (own card, board, holdings...), never more than
        its observation text says. Scripted agents read this instead of parsing prose."""
        return {}

    def view_message(self, view: dict[str, Any]) -> str | None:
        """The turn message, in this game's text, of the position a ``player_view`` describes (what
        ``read_position`` reads back from text), for games whose view holds the whole position; None for
        the others. It lets a server show a player a position it was sent in another text option."""
        return None

    def step_info(self, state: State) -> dict[str, Any]:
        """Extra ``info`` entries after each move, also at the end (e.g. a per-turn verdict)."""
        return {}

    def action_examples(self, state: State) -> list[str]:
        """A few well-formed actions valid now, for free-text games (random play, docs)."""
        return []

    @abstractmethod
    def move_messages(self, state: State, player: int, action: Any) -> Sequence[Message]:
        """What players are told after ``player`` played ``action`` (``state`` is after it)."""

    def outcome_reason(self, state: State) -> str:
        """Why the game ended, for the final message."""
        return ""

    @abstractmethod
    def render(self, state: State) -> str:
        """The position as text, for ``render_mode='ansi'``."""

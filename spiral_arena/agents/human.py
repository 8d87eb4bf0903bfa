"""A person at the terminal."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TextIO

from spiral_arena.agents.base import BaseAgent


class HumanAgent(BaseAgent):
    """Shows the observation and reads one line. ``validate`` (the env's ``check_action``)
    lets a typo re-prompt instead of losing the game."""

    def __init__(
        self,
        validate: Callable[[str], str | None] | None = None,
        input_stream: TextIO | None = None,
        output_stream: TextIO | None = None,
    ) -> None:
        self.validate = validate
        self.input_stream = input_stream
        self.output_stream = output_stream

    def _ask(self, prompt: str) -> str:
        if self.input_stream is None:
            return input(prompt)
        print(prompt, end="", file=self.output_stream, flush=True)
        line = self.input_stream.readline()
        if not line:
            raise EOFError("no more input for the human player")
        return line.rstrip("\n")

    def act(self, observation: str, info: dict[str, Any]) -> str:
        print(f"\n{observation}\n", file=self.output_stream, flush=True)
        legal = info.get("legal_actions")
        hint = f" {' '.join(legal)}" if legal else ""
        while True:
            answer = self._ask(f"your move{hint}> ").strip()
            problem = self.validate(answer) if self.validate else None
            if answer and problem is None:
                return answer
            print(f"Not accepted: {problem or 'empty answer'}. Try again.", file=self.output_stream, flush=True)

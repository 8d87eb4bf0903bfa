"""The words a language model reads around an observation, kept in one place.

API agents send ``SYSTEM_PROMPT`` as a system message and the observation, unchanged, as the user
message (so a server behind the API sees exactly what the env produced). Trainers and models
without a system role use ``single_turn_prompt``: the same sentences folded into one user turn,
framing first and answer instruction last, as SPIRAL's template does.
"""

from __future__ import annotations

GAME_FRAMING = (
    "You are one of the two players in a zero-sum game: whatever you win, your opponent loses. "
    "Play to win, and only make moves the rules allow; an invalid move loses the game."
)

ANSWER_INSTRUCTION = (
    "Reason step by step first if that helps you. Then finish your reply with your move inside "
    "\\boxed{}, written exactly as the game lists it, for example \\boxed{[4]}. Only the last boxed "
    "answer counts. In games where you talk to the other player, the boxed text is the whole message "
    "they receive."
)

SYSTEM_PROMPT = f"{GAME_FRAMING}\n\n{ANSWER_INSTRUCTION}"


def chat_messages(observation: str, system_prompt: str | None = None) -> list[dict[str, str]]:
    """OpenAI-style messages for one decision: the system prompt (``SYSTEM_PROMPT`` when None,
    left out when empty) and the observation as the user turn."""
    system = SYSTEM_PROMPT if system_prompt is None else system_prompt
    messages = [{"role": "system", "content": system}] if system else []
    messages.append({"role": "user", "content": observation})
    return messages


def single_turn_prompt(observation: str) -> str:
    """The whole prompt as one user turn: framing, observation, answer instruction."""
    return f"{GAME_FRAMING}\n\n{observation}\n\n{ANSWER_INSTRUCTION}"

"""The words a language model reads around an observation, kept in one place.

API agents send ``SYSTEM_PROMPT`` as a system message and the observation, unchanged, as the user
message (so a server behind the API sees exactly what the env produced). Trainers and models
without a system role use ``single_turn_prompt``: the same sentences folded into one user turn,
framing first and answer instruction last, as SPIRAL's template does. A Twenty Questions questioner
trained by delta-belief-rl reads ``questioner_messages``: that project's own chat.
"""

from __future__ import annotations

from spiral_arena.wordlists import QuestionerPrompts

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


def questioner_messages(prompts: QuestionerPrompts, questions: list[dict[str, str]]) -> list[dict[str, str]]:
    """A Twenty Questions game so far as delta-belief-rl's questioner reads it: its system prompt and first
    instruction, then each question asked (``questions``: the env's ``read_position``) as the assistant's turn
    and the answer to it, ". " and the next instruction as the user's."""
    replies = {"yes": "Yes", "no": "No", "invalid": prompts.invalid, "repeated": prompts.repeated}
    messages = [{"role": "system", "content": prompts.system}, {"role": "user", "content": prompts.first}]
    for asked in questions:
        reply = replies.get(asked["answer"], "No answer")  # "error": the judge failed (the game is not trained)
        messages += [{"role": "assistant", "content": asked["question"]},
                     {"role": "user", "content": f"{reply}. {prompts.later}"}]  # fmt: skip
    return messages


def stop_token_ids(tokenizer, generation_config=None) -> list[int]:
    """Every token id that ends a model's turn, the chat template's end-of-turn marker first.

    Chat models often end a turn with a token other than the tokenizer's EOS (Qwen's
    ``<|im_end|>`` vs ``<|endoftext|>``); stopping on EOS alone never stops them. The marker is
    found by rendering a short dialogue and reading the special token that follows the assistant's
    text; the tokenizer's EOS and the generation config's ``eos_token_id`` (an int or a list) follow.
    """
    ids: list[int] = []
    marker = "\x01reply\x01"
    try:
        rendered = tokenizer.apply_chat_template(
            [{"role": "user", "content": "hi"}, {"role": "assistant", "content": marker}], tokenize=False
        )
    except Exception:  # no chat template, or one that refuses this dialogue: EOS only
        rendered = ""
    if marker in rendered:
        after = rendered.split(marker, 1)[1]
        first = tokenizer(after, add_special_tokens=False)["input_ids"][:1] if after.strip() else []
        special = set(tokenizer.all_special_ids)
        special |= {i for i, t in getattr(tokenizer, "added_tokens_decoder", {}).items() if t.special}
        if first and first[0] in special:
            ids.append(first[0])
    candidates = [tokenizer.eos_token_id]
    configured = getattr(generation_config, "eos_token_id", None)
    candidates += configured if isinstance(configured, (list, tuple)) else [configured]
    for token in candidates:
        if token is not None and int(token) not in ids:
            ids.append(int(token))
    if not ids:
        raise ValueError("the tokenizer has no EOS token and its chat template no end-of-turn token: cannot stop")
    return ids

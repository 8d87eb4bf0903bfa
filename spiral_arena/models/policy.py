"""A model's side of a decision: observation -> prompt token ids (the chat template, the prompt
template, thinking on or off) -> one batched generation call -> reply text. The trainer's rollouts and
evaluation and the ``hf:``/``vllm:`` agents all render prompts through it, so a checkpoint plays under
the very prompt it was trained with."""

from __future__ import annotations

from array import array
from collections.abc import Sequence

from spiral_arena.games.twenty_questions import TwentyQuestions
from spiral_arena.models import Completion, Engine, Sampling
from spiral_arena.models.prompting import questioner_messages, single_turn_prompt, stop_token_ids
from spiral_arena.wordlists import questioner_prompts

# "spiral": framing + observation + boxed-answer instruction; "bare": the observation alone; "questioner": a
# Twenty Questions game as delta-belief-rl's questioner reads it (its own prompts, one chat turn per question)
PROMPT_TEMPLATES = ("spiral", "bare", "questioner")
PROMPT_CACHE_TOKENS = 4_000_000  # prompt token ids a Policy keeps (16 MB as int32, plus the texts)


class Policy:
    """The model's side of a decision: observation -> prompt token ids; batched generation."""

    _MARKER = "\x00observation\x00"

    def __init__(
        self,
        engine: Engine,
        tokenizer,
        template: str = "spiral",
        stop_ids: list[int] | None = None,
        thinking: bool = True,
    ) -> None:
        if template not in PROMPT_TEMPLATES:
            raise ValueError(f"prompt_template must be one of {', '.join(PROMPT_TEMPLATES)}; got {template!r}")
        self.engine, self.tokenizer, self.template = engine, tokenizer, template
        # Hybrid-thinking chat templates (Qwen3) read enable_thinking; False closes the thinking block
        # before the answer. Other templates ignore the variable.
        self.chat_options = {} if thinking else {"enable_thinking": False}
        # the tokens that end a reply; the first is the chat template's end of turn, which SFT
        # targets and answer scoring append (not EOS: chat models end a turn with another token)
        self.stop_ids = stop_ids or stop_token_ids(tokenizer)
        self.end_of_turn = self.stop_ids[0]
        # Render the chat template once around a marker; each prompt is then prefix + content + suffix,
        # the same text the template would give, without running Jinja for every decision.
        rendered = self._render(self._MARKER)
        self._prefix, found, self._suffix = rendered.partition(self._MARKER)
        self._fast = bool(found)
        self._questioner = questioner_prompts() if template == "questioner" else None
        self._known_prompts: dict[str, array] = {}  # prompt text -> its token ids
        self._known_tokens = 0  # how many ids it holds

    def _render(self, content: str | list[dict[str, str]]) -> str:
        messages = [{"role": "user", "content": content}] if isinstance(content, str) else content
        return self.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=True, **self.chat_options
        )

    def prompt_text(self, observation: str) -> str:
        if self._questioner is not None:
            position = TwentyQuestions.read_position(observation)
            if position is None:
                raise ValueError("prompt_template 'questioner' reads Twenty Questions turns only, not this observation")
            return self._render(questioner_messages(self._questioner, position["questions"]))
        content = single_turn_prompt(observation) if self.template == "spiral" else observation
        return f"{self._prefix}{content}{self._suffix}" if self._fast else self._render(content)

    def prompt_ids(self, observation: str) -> list[int]:
        return self.prompt_ids_batch([observation])[0]

    def prompt_ids_batch(self, observations: list[str]) -> list[list[int]]:
        """Token ids of each observation's prompt. Games revisit the same positions (a Kuhn hand has 12
        information states), so prompts seen before are not tokenised again: tokenising was the largest
        cost of a rollout outside the model. Each caller gets its own copy of the ids."""
        texts = [self.prompt_text(o) for o in observations]
        known = self._known_prompts
        new = list(dict.fromkeys(t for t in texts if t not in known))
        if new:
            encoded = [array("i", ids) for ids in self.tokenizer(new, add_special_tokens=False)["input_ids"]]
            if self._known_tokens + sum(len(ids) for ids in encoded) > PROMPT_CACHE_TOKENS:
                # start over rather than grow without bound, keeping what this batch reads
                kept = {t: known[t] for t in dict.fromkeys(texts) if t in known}
                known.clear()
                known.update(kept)
                self._known_tokens = sum(len(ids) for ids in kept.values())
            self._known_tokens += sum(len(ids) for ids in encoded)
            known.update(zip(new, encoded, strict=True))
        return [known[t].tolist() for t in texts]

    def answer_batch(
        self, observations: list[str], sampling: Sampling, seed: int | Sequence[int], engine: Engine | None = None
    ) -> tuple[list[list[int]], list[Completion], list[str]]:
        """The replies to ``observations`` in one generation call: the prompts' token ids, the completions
        (token ids, log-probs) and their texts. ``engine``: another engine over this tokenizer (a frozen
        snapshot's), else the policy's own; ``seed`` as ``Engine.generate`` takes it."""
        prompts = self.prompt_ids_batch(observations)
        completions = (engine or self.engine).generate(prompts, sampling, seed)
        return prompts, completions, self.decode_batch([c.token_ids for c in completions])

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    def decode_batch(self, ids: list[list[int]]) -> list[str]:
        return self.tokenizer.batch_decode(ids, skip_special_tokens=True)

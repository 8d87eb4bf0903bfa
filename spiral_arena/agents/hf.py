"""A local transformers causal LM as a player (``hf:PATH``), generating through the trainer's own
``HFEngine``; a LoRA checkpoint is played as its base model with the adapter merged."""

from __future__ import annotations

from typing import Any

from spiral_arena.agents.model import ModelAgent
from spiral_arena.analysis import kuhn_policy_from_scores, leduc_policy_from_scores
from spiral_arena.models import loading
from spiral_arena.models.checkpoints import read_settings
from spiral_arena.models.prompting import stop_token_ids
from spiral_arena.models.scoring import answer_scorer


class HFAgent(ModelAgent):
    """A transformers model directory or training checkpoint (see ``ModelAgent`` for prompts and sampling)."""

    def __init__(
        self,
        path: str,
        device: str | None = None,
        temperature: float | None = None,
        top_p: float | None = None,
        max_new_tokens: int | None = None,
        seed: int | None = None,
        **reads: Any,
    ) -> None:
        """``reads``: spec options that override how the checkpoint reads games (``ModelAgent.read_options``)."""
        reads = self.read_options(f"hf:{path}", reads)  # before anything loads
        recorded = read_settings(path)  # its record's fields checked, before the model loads too
        try:
            import torch

            from spiral_arena.models.hf import HFEngine
        except ImportError as error:
            raise ImportError("hf: agents need the train extra: pip install 'spiral-arena[train]'") from error
        self.spec = f"hf:{path}"
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.model, tokenizer = playing_model(path, self.device)
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        # every token that ends a turn, the chat template's end of turn first: chat models end a
        # reply with it (Qwen's <|im_end|>), not with the tokenizer's EOS
        stop_ids = stop_token_ids(tokenizer, self.model.generation_config)
        engine = HFEngine(self.model, stop_ids, tokenizer.pad_token_id)
        self._setup(engine, tokenizer, stop_ids, recorded, temperature, top_p, max_new_tokens, seed, reads)

    def score_answers(self, observation: str, answers: list[str], temperature: float = 1.0) -> list[float]:
        """Log-probability of each whole answer (ending the turn) as the reply to ``observation`` when
        sampled at ``temperature`` (0 = greedy), prompted as this agent prompts."""
        return answer_scorer(self.model, self.policy, temperature)(self.shown(observation), answers)

    def kuhn_policy(self) -> dict[str, float]:
        """Its single-hand Kuhn policy as it plays: answer log-probs at its own sampling temperature
        (greedy: the argmax policy), for exact exploitability."""

        def score(observation: str, answers: list[str]) -> list[float]:
            return self.score_answers(observation, answers, self.sampling.temperature)

        kuhn = self.trained.kuhn_game()
        return kuhn_policy_from_scores(score, self.trained.reading(kuhn).text.get("obs_format", ""), kuhn.canonical)[0]

    def leduc_policy(self) -> dict[str, dict[str, float]]:
        """Its Leduc Hold'em policy as it plays, at the 288 rank information states, read as ``kuhn_policy``."""

        def score(observation: str, answers: list[str]) -> list[float]:
            return self.score_answers(observation, answers, self.sampling.temperature)

        leduc = self.trained.game_of("LeducHoldem-v0")
        obs_format = self.trained.reading(leduc).text.get("obs_format", "")
        return leduc_policy_from_scores(score, obs_format, leduc.canonical)[0]


def playing_model(path: str, device: str) -> tuple[Any, Any]:
    """(model in eval mode on ``device``, tokenizer) of a model directory or checkpoint (a LoRA one merged);
    bf16 on CUDA, fp32 elsewhere."""
    import torch

    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    try:
        model, tokenizer = loading.load_model(path, device, dtype, adapter="merged")
    except OSError as error:
        raise ValueError(f"hf:{path} is not a transformers model directory: {error}") from error
    return model.eval(), tokenizer

"""A local transformers causal LM as a player (``hf:PATH``): chat template, batched sampling."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from spiral_arena.agents.base import BaseAgent
from spiral_arena.agents.prompting import single_turn_prompt, stop_token_ids
from spiral_arena.core.observations import last_message

SETTINGS_FILE = "spiral_arena.json"  # written by the trainer into every checkpoint
DEFAULT_SAMPLING = {"temperature": 1.0, "top_p": 1.0, "max_new_tokens": 256}  # for plain model directories


class HFAgent(BaseAgent):
    """Generates one reply per observation; ``act_batch`` runs one left-padded ``generate`` call.

    The prompt is one user turn (framing, observation, answer instruction) through the model's
    chat template, as in SPIRAL. A training checkpoint's ``spiral_arena.json`` says how it was
    prompted (``prompt_template`` "bare" = the observation alone; ``obs_format`` "last" = only the
    latest message), and the agent prompts it the same way in any env; its ``sampling`` (the run's
    evaluation temperature, top-p and answer length) are the defaults of ``temperature``, ``top_p``
    and ``max_new_tokens``. ``temperature=0`` decodes greedily. Sampling (temperature, then top-p, as
    the trainer samples) draws from the agent's own generator, which ``reset(seed)`` replaces: a
    shallow copy that is reset holds its own random stream but shares the loaded model, so games
    played at once each get a copy and ``HFAgent.act_together`` still answers them in one batch.
    """

    def __init__(
        self,
        path: str,
        device: str | None = None,
        temperature: float | None = None,
        top_p: float | None = None,
        max_new_tokens: int | None = None,
        seed: int | None = None,
    ) -> None:
        try:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError as error:
            raise ImportError("hf: agents need the train extra: pip install 'spiral-arena[train]'") from error
        self.torch = torch
        self.spec = f"hf:{path}"
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        settings_file = Path(path) / SETTINGS_FILE
        settings = json.loads(settings_file.read_text()) if settings_file.exists() else {}
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(path)
            dtype = torch.bfloat16 if self.device.startswith("cuda") else torch.float32
            if (Path(path) / "adapter_config.json").exists():  # a LoRA checkpoint: its base plus the adapter
                from peft import PeftModel

                base = AutoModelForCausalLM.from_pretrained(
                    settings.get("base_model") or _adapter_base(path), dtype=dtype
                )
                self.model = PeftModel.from_pretrained(base, path).merge_and_unload()
            else:
                self.model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
            self.model = self.model.to(self.device).eval()
        except OSError as error:
            raise ValueError(f"hf:{path} is not a transformers model directory: {error}") from error
        self.prompt_template = settings.get("prompt_template", "spiral")
        self.obs_format = settings.get("obs_format", "")
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        # every token that ends a turn, the chat template's end of turn first: chat models end a
        # reply with it (Qwen's <|im_end|>), not with the tokenizer's EOS
        self.stop_ids = stop_token_ids(self.tokenizer, self.model.generation_config)
        # unset sampling settings come from the checkpoint (how its run evaluated it), else 1.0 / 1.0 / 256
        recorded = {**DEFAULT_SAMPLING, **settings.get("sampling", {})}
        self.temperature = recorded["temperature"] if temperature is None else temperature
        self.top_p = recorded["top_p"] if top_p is None else top_p
        self.max_new_tokens = recorded["max_new_tokens"] if max_new_tokens is None else max_new_tokens
        self.reset(seed)

    def reset(self, seed: int | None = None) -> None:
        """A new generator (rebound, never reseeded in place, so copies do not share it). ``None`` keeps
        the one the agent has, or seeds a first one from torch's global generator, so ``torch.manual_seed``
        still fixes an unseeded agent's sampling."""
        if seed is None and hasattr(self, "generator"):
            return
        if seed is None:
            seed = int(self.torch.randint(2**62, ()).item())
        self.generator = self.torch.Generator(device=self.device).manual_seed(seed)

    def prompt_text(self, observation: str) -> str:
        if self.obs_format == "last":
            observation = last_message(observation)
        content = observation if self.prompt_template == "bare" else single_turn_prompt(observation)
        messages = [{"role": "user", "content": content}]
        return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)

    def score_answers(self, observation: str, answers: list[str], temperature: float = 1.0) -> list[float]:
        """Log-probability of each whole answer (ending the turn) as the reply to ``observation`` when
        sampled at ``temperature`` (logits divided by it; 0 is read as 1e-3, i.e. greedy)."""
        torch = self.torch
        tok = self.tokenizer
        prompt = tok(self.prompt_text(observation), add_special_tokens=False)["input_ids"]
        scores = []
        with torch.no_grad():
            for answer in answers:
                target = tok(answer, add_special_tokens=False)["input_ids"] + [self.stop_ids[0]]
                ids = torch.tensor([prompt + target], device=self.device)
                logits = self.model(input_ids=ids).logits[0, :-1].float() / (temperature if temperature > 0 else 1e-3)
                logp = torch.log_softmax(logits, dim=-1)
                positions = torch.arange(len(prompt) - 1, ids.shape[1] - 1, device=self.device)
                scores.append(float(logp[positions, ids[0, len(prompt) :]].sum()))
        return scores

    def kuhn_policy(self) -> dict[str, float]:
        """Its single-hand Kuhn policy as it plays: answer log-probs at its own sampling temperature
        (greedy: the argmax policy), for exact exploitability."""
        from spiral_arena.analysis import kuhn_policy_from_scores

        def score(observation: str, answers: list[str]) -> list[float]:
            return self.score_answers(observation, answers, self.temperature)

        return kuhn_policy_from_scores(score, self.obs_format if self.obs_format != "last" else "")[0]

    def act(self, observation: str, info: dict[str, Any]) -> str:
        return self.act_batch([observation], [info])[0]

    def act_batch(self, observations: list[str], infos: list[dict[str, Any]]) -> list[str]:
        """One ``generate`` call; every row samples from this agent's generator, row after row."""
        return self.act_together([self] * len(observations), observations)

    @property
    def batch_key(self) -> Any:
        """Copies of this agent share the loaded model: their decisions go in one batch
        (``spiral_arena.inflight``)."""
        return self.model

    @staticmethod
    def act_together(agents: Sequence[HFAgent], observations: list[str]) -> list[str]:
        """Replies to ``observations[i]`` by ``agents[i]``: copies of one loaded model (one per game in
        flight), answered in one batch, each row sampled from its own copy's generator. What a row draws
        is then what it would draw alone; its logits may still differ from an unbatched call in the last
        bits (a batched matrix product may round differently), which can change a token only when a
        draw falls within that rounding of a boundary, or two logits tie within it when greedy."""
        if not agents:
            return []
        first = agents[0]
        if any(agent.model is not first.model for agent in agents):
            raise ValueError("act_together answers for copies of one loaded model only")
        return first._generate(observations, [agent.generator for agent in agents])

    def _generate(self, observations: list[str], generators: list[Any]) -> list[str]:
        if not observations:
            return []
        batch = self.tokenizer(
            [self.prompt_text(o) for o in observations], return_tensors="pt", padding=True, add_special_tokens=False
        ).to(self.device)
        sampler = []
        if self.temperature > 0:
            width = batch["input_ids"].shape[1]
            sampler = [_RowSampler(generators, self.temperature, self.top_p, self.stop_ids, width)]
        with self.torch.no_grad():
            out = self.model.generate(
                **batch,
                max_new_tokens=self.max_new_tokens,
                pad_token_id=self.tokenizer.pad_token_id,
                eos_token_id=self.stop_ids,
                do_sample=False,  # greedy, or over the one-hot choice of the sampler
                logits_processor=sampler,
            )
        new_tokens = out[:, batch["input_ids"].shape[1] :]
        return self.tokenizer.batch_decode(new_tokens, skip_special_tokens=True)


class _RowSampler:
    """Sampling as a logits processor: each unfinished row draws its token (temperature, then top-p,
    as the trainer's engine samples) from its own generator, and the scores become that one token, so
    ``generate`` runs greedy over them. A finished row draws nothing: a game's random stream advances
    only by the tokens its own replies hold, whatever else shares the batch."""

    def __init__(self, generators: list[Any], temperature: float, top_p: float, stop_ids: list[int], width: int):
        self.generators, self.temperature, self.top_p = generators, temperature, top_p
        self.stop_ids, self.width = set(stop_ids), width
        self.done = [False] * len(generators)

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        if input_ids.shape[1] > self.width:  # the tokens chosen at the previous step
            last = input_ids[:, -1].tolist()
            self.done = [done or token in self.stop_ids for done, token in zip(self.done, last, strict=True)]
        probs = torch.softmax(scores.float() / self.temperature, dim=-1)
        if self.top_p < 1.0:
            ordered, order = probs.sort(dim=-1, descending=True)
            ordered = ordered.masked_fill(ordered.cumsum(dim=-1) - ordered > self.top_p, 0.0)
            probs = torch.zeros_like(probs).scatter(1, order, ordered)
        chosen = torch.full_like(scores, float("-inf"))
        for row, (generator, done) in enumerate(zip(self.generators, self.done, strict=True)):
            token = 0 if done else torch.multinomial(probs[row], 1, generator=generator)
            chosen[row, token] = 0.0
        return chosen


def _adapter_base(path: str) -> str:
    """The base model a peft adapter directory names."""
    return json.loads((Path(path) / "adapter_config.json").read_text())["base_model_name_or_path"]

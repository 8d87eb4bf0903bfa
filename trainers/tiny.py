"""The tiny default model: a small Qwen3-architecture causal LM and a tokenizer built here.

Nothing is downloaded. The tokenizer is a byte-level BPE trained on text from our own games
(prompts, observations and answers), so every string round-trips exactly through encode/decode
and the env's parser sees what the model wrote.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from spiral_arena import make
from spiral_arena.agents import make_agent
from spiral_arena.models.prompting import single_turn_prompt

CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def game_corpus(env_ids: Iterable[str], games_per_env: int = 50, seed: int = 0, agent: str = "random") -> list[str]:
    """Observations and well-formed answers from play by ``agent`` (the warm start's player), the
    text the model will meet."""
    texts: list[str] = []
    for env_id in env_ids:
        env = make(env_id)
        player = make_agent(agent, seed=seed)
        for g in range(games_per_env):
            env.reset(seed=seed + g)
            for _ in env.agent_iter():
                obs, _, term, trunc, info = env.last()
                if term or trunc:
                    env.step(None)
                    continue
                action = player.act(obs, info)
                texts += [single_turn_prompt(obs), f"The move is \\boxed{{{action}}}"]
                env.step(action)
        # a game's own vocabulary (Twenty Questions' secret nouns), so each name is a token or two
        texts += [f"Is it {word}?" for word in getattr(env.game, "words", ())] * 10
    # the chat template's role names, so each becomes one token instead of a handful of pieces
    return texts + ["user\nassistant\n"] * len(texts)


def build_tokenizer(texts: list[str], vocab_size: int = 1024):
    """A byte-level BPE tokenizer with ChatML markers, as a transformers fast tokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        chat_template=CHAT_TEMPLATE,
    )


def build_model(vocab_size: int, hidden_size: int = 64, layers: int = 2, heads: int = 2, seed: int = 0):
    """A randomly initialised Qwen3ForCausalLM of a few hundred thousand parameters. Two heads of size 32
    (one key/value head): vLLM's CPU attention serves head sizes of 32 and up, not 16."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(seed)
    config = Qwen3Config(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 2,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=max(1, heads // 2),
        head_dim=hidden_size // heads,
        max_position_embeddings=8192,
        tie_word_embeddings=False,
    )
    return Qwen3ForCausalLM(config)


def create_tiny(
    path: str | Path, env_ids: Iterable[str] = ("KuhnPoker-v0", "TicTacToe-v0"), seed: int = 0, agent: str = "random"
) -> Path:
    """Write a fresh tiny model and its tokenizer (trained on ``agent``'s games) to ``path``."""
    path = Path(path)
    tokenizer = build_tokenizer(game_corpus(env_ids, seed=seed, agent=agent))
    model = build_model(len(tokenizer), seed=seed)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path

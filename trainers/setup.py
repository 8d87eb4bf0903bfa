"""What a run starts from: the embedded tiny model on first use, the policy (full weights or LoRA) and its
tokenizer, the frozen KL reference, and the generation engine."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import torch

from spiral_arena.models import loading
from spiral_arena.models.checkpoints import ADAPTER_FILE
from spiral_arena.registry import GameSpec
from trainers.config import TrainConfig
from trainers.rollout import parse_mixture


def tiny_model_dir(config: TrainConfig, run_dir: Path) -> Path:
    """The embedded tiny model of this run, created on first use (tokenizer trained on our games)."""
    from trainers.tiny import create_tiny

    path = run_dir / "tiny_init"
    if not path.exists():
        # the text the model will meet: each game with its options (a board layout, a closed world), except
        # games that ask an outside model (the corpus is played here, offline), which give their plain text
        specs = warm_start_games(config)[0]
        env_ids = [s.canonical if s.make().game.deterministic else s.env_id for s in specs]
        create_tiny(path, env_ids, seed=config.seed, agent=config.sft_agent)
    return path


def warm_start_games(config: TrainConfig) -> tuple[list[GameSpec], np.ndarray]:
    """The games the warm start plays and their weights: ``sft_games`` equally, else the training mixture."""
    if config.sft_games:
        specs = parse_mixture(config.sft_games, "")[0]
        return specs, np.full(len(specs), 1.0 / len(specs))
    return parse_mixture(config.games, config.game_weights)


def load_model(config: TrainConfig, run_dir: Path, previous: Path | None, device):
    """The policy with fp32 weights (bf16 is compute only, see ``autocast``), its tokenizer and the
    directory its weights came from. With LoRA the base comes from ``config.model`` and the adapter
    is new, or on resume the checkpoint's own adapter, trainable, so training continues with it."""
    base = base_model_path(config, run_dir)
    lora_checkpoint = previous is not None and (previous / ADAPTER_FILE).exists()
    if previous is not None and lora_checkpoint != (config.lora_rank > 0):
        saved = "a LoRA adapter" if lora_checkpoint else "full weights"
        raise ValueError(f"cannot resume {previous}: it holds {saved}, but lora_rank is {config.lora_rank}")
    path = previous if previous is not None and not lora_checkpoint else base
    try:
        model, tokenizer = loading.load_model(previous or base, device, torch.float32, "trainable", base=base)
    except OSError as error:
        raise ValueError(f"cannot load model {str(path)!r}: {error}") from error
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    # The model's config stays as loaded: a pad id written into it here would be saved with every checkpoint
    # and come back, when one is loaded, as the embedding's padding_idx (a row that gets no gradient), so a
    # resumed run would train the pad token's embedding differently from the run that never stopped.
    if config.gradient_checkpointing:
        # non-reentrant checkpointing also works when the embeddings are frozen (LoRA)
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if config.lora_rank > 0 and not lora_checkpoint:
        from peft import LoraConfig, get_peft_model

        lora = LoraConfig(
            r=config.lora_rank, lora_alpha=config.lora_alpha, target_modules="all-linear", task_type="CAUSAL_LM"
        )
        model = get_peft_model(model, lora)
    return model, tokenizer, path


def base_model_path(config: TrainConfig, run_dir: Path) -> str:
    """Where the run's initial weights live (absolute for the tiny model, so a LoRA adapter's
    record of its base stays valid from any working directory)."""
    return str((run_dir / "tiny_init").resolve()) if config.model == "tiny" else config.model


def load_reference(config: TrainConfig, run_dir: Path, warm_dir: Path, device):
    """The frozen warm-start policy the KL term anchors to, as saved before RL began (full weights,
    or the base plus the warm-start adapter under LoRA)."""
    if not warm_dir.exists():
        raise ValueError(f"cannot resume a KL-anchored run: its warm start {warm_dir} is missing")
    return loading.load_model(warm_dir, device, torch.float32, "frozen", base=base_model_path(config, run_dir))[0]


def make_engine(config: TrainConfig, model, tokenizer, model_path, stop_ids: list[int]):
    if config.backend == "hf":
        from spiral_arena.models.hf import HFEngine

        # under FSDP the learner holds only a shard: the engine samples from a full copy
        return HFEngine(copy.deepcopy(model) if config.fsdp else model, stop_ids, tokenizer.pad_token_id)
    if config.backend == "vllm":
        from spiral_arena.models.vllm import VLLMEngine, VLLMSettings

        settings = VLLMSettings(
            dtype="bfloat16" if config.bf16 else "float32",  # the learner's compute dtype (see autocast)
            seed=config.seed,
            max_model_len=config.vllm_max_model_len,
            gpu_memory_utilization=config.vllm_gpu_memory_utilization,
            kv_cache_gib=config.vllm_kv_cache_gib,
            sleep=True,
            enforce_eager=config.vllm_enforce_eager,
        )
        return VLLMEngine(settings, model_path, stop_ids, learner=model)
    raise ValueError(f"backend must be 'hf' or 'vllm', got {config.backend!r}")

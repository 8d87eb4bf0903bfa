"""Supervised warm start: teach the answer format (a final ``\\boxed{action}``) on legal play.

The default data is uniformly random legal play from our own envs, so no human or model data
enters; ``spiral-arena sft --data FILE.jsonl`` trains on any transcript file instead (e.g. expert
games written by ``spiral-arena collect``), SPIRAL's SFT-on-expert-trajectories baseline.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

import numpy as np
import torch

from spiral_arena.agents import make_agent
from spiral_arena.agents.experts.twenty_questions import candidates
from spiral_arena.analysis.read_policy import answer_text
from spiral_arena.models import loading
from spiral_arena.models.checkpoints import write_record
from spiral_arena.models.logprobs import pack, response_logprobs
from spiral_arena.models.policy import Policy
from spiral_arena.models.prompting import stop_token_ids
from spiral_arena.play import Notes, seat_texts
from spiral_arena.registry import GameSpec
from trainers.belief import probe_pieces
from trainers.config import WarmStartConfig


def play_transcripts(
    agent_spec: str,
    specs: list[GameSpec],
    weights: np.ndarray,
    games: int,
    seed: int,
    obs_format: str = "",
    naming: float = 0.0,
) -> Iterable[dict]:
    """(observation, answer) records of ``games`` games played by ``agent_spec`` in every seat.

    ``naming``: at this share of Twenty Questions turns, also a record of the noun a naming question
    would pick (a noun that fits every answer so far, uniformly), with the question's opening as
    context: the world's knowledge, trained apart from the agent's choice of when to name. A checkpoint
    agent (``hf:PATH``) reads each game in the text it was trained on, and its records hold that text.
    Each record says its game and the observation format of its prompt."""
    rng = np.random.default_rng(seed)
    naming_rng = np.random.default_rng([seed, 1])  # its own stream: the games do not change with it
    agent = make_agent(agent_spec)
    if hasattr(agent, "reset"):
        agent.reset(seed=seed)
    kwargs = {"obs_format": obs_format} if obs_format else {}
    notes = Notes()
    for _ in range(games):
        spec = specs[int(rng.choice(len(specs), p=weights))]
        env = spec.make(**kwargs, seat_text=seat_texts(spec, [agent] * spec.players, notes))
        env.reset(seed=int(rng.integers(2**31)))
        for name in env.agent_iter():
            obs, _, term, trunc, info = env.last()
            if term or trunc:
                env.step(None)
                continue
            role = env.possible_agents.index(name)
            if naming and spec.env_id == "TwentyQuestions-v0" and naming_rng.random() < naming:
                fitting = candidates(info["view"])  # empty only once every noun was named
                if fitting:
                    opening, noun = probe_pieces(fitting[int(naming_rng.integers(len(fitting)))], "named")
                    yield {"game": spec.label, "role": role, "prompt": obs, "context": opening, "response": noun + "?}"}
            action = agent.act(obs, info)
            yield {
                "game": spec.label,
                "obs_format": env.obs_formats[role],
                "role": role,
                "prompt": obs,
                "response": answer_text(action),
            }
            env.step(action)


def read_transcripts(path: str | Path) -> list[dict]:
    records = []
    for n, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}:{n}: not a JSON object ({error.msg})") from None
        if not isinstance(record, dict) or not {"prompt", "response"} <= record.keys():
            raise ValueError(f"{path}:{n}: each line needs 'prompt' and 'response' fields")
        records.append(record)
    if not records:
        raise ValueError(f"{path} holds no transcript lines")
    return records


def sft(
    model,
    policy: Policy,
    records: list[dict],
    steps: int,
    batch: int,
    lr: float,
    seed: int,
    progress: bool = False,
    autocast: Callable[[], AbstractContextManager] = nullcontext,
    deadline: float | None = None,
) -> list[float]:
    """Cross-entropy on the response tokens (and the end-of-turn token) of random batches; a record's
    ``context`` (the reply's opening, tokenised on its own as the belief probe does) is read, not trained;
    forward passes run inside ``autocast()`` (the trainer's bf16 setting). Stops early, after at least
    one step, once ``time.monotonic()`` passes ``deadline`` (the run's time limit covers its warm start)."""
    tokenizer = policy.tokenizer
    device = next(model.parameters()).device
    contexts = {c: tokenizer(c, add_special_tokens=False)["input_ids"] for c in {r.get("context", "") for r in records}}
    prompt_ids = policy.prompt_ids_batch([r["prompt"] for r in records])
    prompts = [ids + contexts[r.get("context", "")] for ids, r in zip(prompt_ids, records, strict=True)]
    targets = [tokenizer(r["response"], add_special_tokens=False)["input_ids"] + [policy.end_of_turn] for r in records]
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.0)
    rng = np.random.default_rng(seed)
    from tqdm import tqdm

    losses = []
    model.train()
    bar = tqdm(range(steps), desc="SFT", unit="step", disable=not progress, dynamic_ncols=True)
    for _ in bar:
        idx = rng.choice(len(records), size=min(batch, len(records)), replace=False)
        ids, attention, positions, mask = pack(
            [prompts[i] for i in idx], [targets[i] for i in idx], tokenizer.pad_token_id, device
        )
        with autocast():
            logp, m = response_logprobs(model, ids, attention, positions, mask)
            loss = -(logp * m).sum() / m.sum()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        losses.append(loss.item())
        bar.set_postfix(loss=f"{losses[-1]:.3f}", refresh=False)  # the bar's own ETA says how long is left
        if deadline is not None and time.monotonic() >= deadline:
            break
    bar.close()
    return losses


def write_transcripts(records: Iterable[dict], path: str | Path) -> int:
    """JSONL, one decision per line: the format ``sft`` reads (and the trainer's transcripts share)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with open(path, "w") as out:
        for record in records:
            out.write(json.dumps(record) + "\n")
            n += 1
    return n


def run_sft(
    data: str | Path,
    model: str,
    output_dir: str | Path,
    steps: int,
    batch: int,
    lr: float,
    seed: int = 0,
    prompt_template: str = "spiral",
) -> Path:
    """Supervised fine-tuning on a transcript file; the result is a model directory (``hf:PATH``)."""
    from spiral_arena.models.hf import HFEngine

    records = read_transcripts(data)
    output_dir = Path(output_dir)
    if model == "tiny":
        from trainers.tiny import create_tiny

        model = str(
            create_tiny(
                output_dir / "tiny_init",
                sorted({GameSpec.parse(r.get("game", "KuhnPoker-v0")).env_id for r in records}),
                seed=seed,
            )
        )
    torch.manual_seed(seed)
    net, tokenizer = loading.load_model(model, "cpu", torch.float32)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    stops = stop_token_ids(tokenizer, net.generation_config)
    policy = Policy(HFEngine(net, stops, tokenizer.pad_token_id), tokenizer, prompt_template, stops)
    print(f"SFT: {steps} steps of {min(batch, len(records))} examples from {len(records)} in {data}")
    losses = sft(net, policy, records, steps, batch, lr, seed, progress=True)
    print(f"SFT loss {losses[0]:.3f} -> {losses[-1]:.3f}")
    read_games = dict.fromkeys((r.get("game", "KuhnPoker-v0"), r.get("obs_format", "")) for r in records)
    final = output_dir / "model"
    net.save_pretrained(final)
    tokenizer.save_pretrained(final)
    # the games of its records, as each was read (records written before they said their observation format
    # count as the game's default)
    games = ((GameSpec.parse(game), form) for game, form in read_games)
    write_record(
        final, "spiral-arena sft", games, prompt_template, "", True, loss_first=losses[0], loss_last=losses[-1]
    )
    return final


def sft_games(config: WarmStartConfig) -> int:
    """Games of ``sft_agent`` for the warm start: about one per 10 samples trained on (a game yields
    several), at least 50 and at most 2,000, so a short warm start does not wait on data it never reads."""
    return min(2000, max(50, config.sft_steps * config.sft_batch // 10))

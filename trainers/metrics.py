"""What a run writes as it goes: metrics.jsonl (one row per step), transcripts.jsonl, optional TensorBoard
and wandb, the progress bar, and the per-step rollout statistics."""

from __future__ import annotations

import json
import time
from collections import defaultdict
from dataclasses import asdict
from pathlib import Path
from typing import Any

from spiral_arena.rollout import GameResult, Turn, response_action
from trainers.config import TrainConfig


def rollout_metrics(results: list[GameResult], turns: list[Turn], seconds: float) -> dict[str, float]:
    out: dict[str, float] = {}
    by_game: dict[str, list[GameResult]] = defaultdict(list)
    for r in results:
        by_game[r.game].append(r)
    for game, rs in by_game.items():
        out[f"train/{game}/games"] = len(rs)
        records = [r.record for r in rs]
        out[f"train/{game}/invalid"] = sum(g.invalid_seat is not None for g in records) / len(rs)
        drawn = sum(g.invalid_seat is None and (g.truncated or len(set(g.returns)) == 1) for g in records)
        out[f"train/{game}/draw"] = drawn / len(rs)
        won = sum(not g.truncated and g.returns[0] > max(g.returns[1:], default=0) for g in records)
        out[f"train/{game}/p0_win"] = won / len(rs)
        if len(records[0].players) == 1:  # a single player: how often it succeeded, and in how many turns
            out[f"train/{game}/success"] = out.pop(f"train/{game}/p0_win")
            out[f"train/{game}/turns_mean"] = sum(len(r.turns) for r in rs) / len(rs)
    tokens = sum(len(t.response_ids) for t in turns)
    out["response_tokens_mean"] = tokens / max(1, len(turns))
    out["response_chars_mean"] = sum(len(t.response) for t in turns) / max(1, len(turns))
    out["generated_tokens_per_s"] = tokens / max(seconds, 1e-9)
    return out


class MetricsLog:
    """metrics.jsonl (one line per step), transcripts.jsonl, optional TensorBoard and wandb."""

    def __init__(
        self, run_dir: Path, resume_step: int | None, enabled: bool = True, config: TrainConfig | None = None
    ) -> None:
        self.enabled = enabled
        self.last_eval: dict[str, Any] = {}  # the latest row with evaluation numbers, for the final summary
        self.tensorboard = self.wandb = None
        if not enabled:
            return
        if config is not None and config.tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError as error:
                raise ImportError("--tensorboard needs the tensorboard package: pip install tensorboard") from error
            self.tensorboard = SummaryWriter(str(run_dir / "tensorboard"))
        if config is not None and config.wandb:
            try:
                import wandb
            except ImportError as error:
                raise ImportError("--wandb needs the wandb package: pip install wandb") from error
            self.wandb = wandb.init(
                project="spiral-arena", name=run_dir.name, dir=str(run_dir), config=asdict(config), resume="allow"
            )
        names = ("metrics.jsonl", "transcripts.jsonl")
        if resume_step is not None:  # drop what a crashed run wrote after its last checkpoint
            for name in names:
                path = run_dir / name
                kept = [line for line in path.read_text().splitlines() if json.loads(line)["step"] <= resume_step]
                path.write_text("".join(line + "\n" for line in kept))
        self.metrics, self.transcript_file = (
            open(run_dir / name, "a" if resume_step is not None else "w") for name in names
        )

    def write(self, metrics: dict[str, Any]) -> None:
        if not self.enabled:
            return
        if any(k.startswith("eval/") for k in metrics):
            self.last_eval = metrics
        self.metrics.write(json.dumps(metrics) + "\n")
        self.metrics.flush()
        numbers = {k: v for k, v in metrics.items() if k != "step" and isinstance(v, (int, float))}
        if self.tensorboard is not None:
            for key, value in numbers.items():
                self.tensorboard.add_scalar(key, value, metrics["step"])
            self.tensorboard.flush()
        if self.wandb is not None:
            self.wandb.log(numbers, step=metrics["step"])

    def transcripts(self, step: int, games: list[GameResult]) -> None:
        """One line per turn of the step's games. ``game_index`` (the game's place among the step's games,
        in the order the advantages were computed), ``shard`` (whose RAE baselines it moves with rae_scope
        "shard"), ``game_rewards`` (its rewards per seat, as trained on)
        and ``policy_seats`` let the step's advantages be replayed from the file alone."""
        if not self.enabled:
            return
        for index, game in enumerate(games):
            for t in game.turns:
                record = {
                    "step": step,
                    "game": t.game,
                    "role": t.role,
                    "prompt": t.prompt,
                    "response": t.response,
                    "action": response_action(t.response),
                    "reward": t.reward,
                    "advantage": t.advantage,
                    "tokens": len(t.response_ids),
                    "game_index": index,
                    "shard": game.shard,
                    "game_rewards": list(game.shaped),
                    "policy_seats": list(game.policy_seats),
                }
                self.transcript_file.write(json.dumps(record) + "\n")
        self.transcript_file.flush()


class progress_bar:  # noqa: N801 - used like tqdm
    """A tqdm bar over steps, with its ETA, showing the latest key numbers (and the time limit, if any)."""

    def __init__(self, config: TrainConfig, start: int, enabled: bool, deadline: float | None = None) -> None:
        """``deadline``: when ``time_limit_s`` runs out (``time.monotonic``), counted from the run's start, warm
        start included: the bar shows the seconds of it used, not the seconds since the first RL step."""
        from tqdm import tqdm

        self.time_limit_s, self.deadline = config.time_limit_s, deadline
        self.bar = tqdm(total=config.steps, initial=start, disable=not enabled, unit="step", dynamic_ncols=True)

    def update(self, metrics: dict[str, Any]) -> None:
        self.bar.update(1)
        shown = {}
        for key in ("eval/kuhn_exploitability", "loss", "kl"):
            if key in metrics:
                shown[key.split("/")[-1]] = f"{metrics[key]:.3f}"
        if self.deadline is not None:
            shown["time"] = f"{self.time_limit_s - (self.deadline - time.monotonic()):.0f}/{self.time_limit_s:.0f}s"
        self.bar.set_postfix(shown, refresh=False)
        self.bar.refresh()

    def write(self, line: str) -> None:
        """A line above the bar (or plain, when the bar is off)."""
        if self.bar.disable:
            return
        self.bar.write(line)

    def close(self) -> None:
        self.bar.close()

"""PNG plots of a run, drawn from its metrics.jsonl at the end (or any time after)."""

from __future__ import annotations

import json
from pathlib import Path


def plot_run(run_dir: str | Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    run_dir = Path(run_dir)
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    rows = [r for r in rows if "time_s" in r]
    panels = {
        "win_rates.png": ("Win rate vs fixed opponents", lambda k: k.startswith("eval/") and k.endswith("/win")),
        "invalid_rate.png": ("Invalid answers", lambda k: k.endswith("/invalid")),
        "exploitability.png": ("Kuhn single-hand exploitability", lambda k: k == "eval/kuhn_exploitability"),
        "response_length.png": ("Mean response length (tokens)", lambda k: k == "response_tokens_mean"),
        "loss.png": ("Policy loss and KL", lambda k: k in ("loss", "kl")),
        "logprob_gap.png": (
            "On-policy check: |engine log-prob - learner log-prob| per token",
            lambda k: k.startswith("logprob_gap/"),
        ),
        "reasoning.png": (
            "Reasoning benchmarks, fixed subset (accuracy)",
            lambda k: k.startswith("reasoning/") and k.endswith("/accuracy"),
        ),
    }
    written = []
    for name, (title, wanted) in panels.items():
        keys = sorted({k for r in rows for k in r if wanted(k)})
        if not keys:
            continue
        fig, ax = plt.subplots(figsize=(8, 4.5))
        colors = plt.get_cmap("tab20").colors  # enough distinct colours for every game x opponent line
        for i, key in enumerate(keys):
            points = [(r["step"], r[key]) for r in rows if key in r]
            ax.plot(
                [p[0] for p in points],
                [p[1] for p in points],
                marker="o" if len(points) < 30 else None,
                color=colors[i % len(colors)],
                label=key.removeprefix("eval/").removeprefix("train/").removeprefix("reasoning/"),
            )
        ax.set_title(title)
        ax.set_xlabel("policy step")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
        fig.tight_layout()
        fig.savefig(run_dir / name, dpi=100)
        plt.close(fig)
        written.append(run_dir / name)
    return written

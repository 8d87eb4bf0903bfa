"""What a lent GPU checks, with no network and no vLLM needed; one JSON of numbers.

1. ``bf16_update``: one learner step at lr 1e-6 with bf16 compute changes > 90% of the trained
   weights (fp32 master weights; stepping bf16 weights directly changes ~2%).
2. ``fixed_batch``: repeated learner steps on one fixed batch of turns (advantage +1): the loss
   is finite and falls.
3. ``generation``: tokens/s of the hf engine, 64 prompts x ``--new-tokens`` new tokens.
4. ``train``: ``spiral-arena train`` on the tiny model for a few bf16 steps on this device; step
   times, the on-policy log-prob gap, peak memory.
5. ``vllm``: the same run through ``--backend vllm``, only when ``import vllm`` works.

    python benchmarks/gpu_check.py --out runs/gpu_check/result.json        # on a GPU
    python benchmarks/gpu_check.py --dry-run --out /tmp/check.json          # on CPU, small sizes (CI)

Exits non-zero when a check fails; the JSON says which.
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import sys
import tempfile
import time
import traceback
from pathlib import Path

import numpy as np
import torch

from spiral_arena.models import Sampling
from spiral_arena.models.hf import HFEngine
from spiral_arena.rollout import Turn
from trainers.config import TrainConfig
from trainers.distributed import Distributed
from trainers.learner import update
from trainers.loop import train


def build_model(vocab: int, hidden: int, layers: int, device: torch.device):
    """A Qwen3-architecture model from a config (random weights, N(0, 0.02) as in a checkpoint)."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    config = Qwen3Config(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=hidden * 3,
        num_hidden_layers=layers,
        num_attention_heads=max(1, hidden // 128),
        num_key_value_heads=max(1, hidden // 512),
        head_dim=min(128, hidden),
        max_position_embeddings=4096,
        tie_word_embeddings=False,
        pad_token_id=0,
    )
    return Qwen3ForCausalLM(config).to(device)


def fixed_turns(vocab: int, n: int, prompt: int, response: int, seed: int = 0) -> list[Turn]:
    rng = np.random.default_rng(seed)
    turns = []
    for _ in range(n):
        turn = Turn(
            "check",
            0,
            "",
            rng.integers(1, vocab, prompt).tolist(),
            rng.integers(1, vocab, response).tolist(),
            [],  # no engine log-probs: these turns were not sampled
            "",
            True,
        )
        turn.advantage = 1.0
        turns.append(turn)
    return turns


def learner_step(model, turns: list[Turn], lr: float, device: torch.device, optimizer=None) -> tuple[dict, object]:
    config = TrainConfig.build(
        {
            "recipe": "spiral",
            "model": "tiny",
            "lr": lr,
            "bf16": True,
            "loss": "reinforce",
            "epochs": 1,
            "micro_batch": 8,
        }
    )
    optimizer = optimizer or torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95))
    stats = update(model, None, optimizer, turns, config, np.random.default_rng(0), device, Distributed(device))
    return stats, optimizer


def check_bf16_update(model, turns, device) -> dict:
    before = {k: p.detach().clone() for k, p in model.named_parameters() if "embed_tokens" not in k}
    learner_step(model, turns, 1e-6, device)
    after = dict(model.named_parameters())
    changed = sum(int((after[k] != v).sum()) for k, v in before.items()) / sum(v.numel() for v in before.values())
    dtypes = sorted({str(p.dtype) for p in model.parameters()})
    return {"changed_share": changed, "param_dtypes": dtypes, "ok": changed > 0.9 and dtypes == ["torch.float32"]}


def check_fixed_batch(model, turns, device, steps: int) -> dict:
    losses, times, optimizer = [], [], None
    for _ in range(steps):
        t0 = time.perf_counter()
        stats, optimizer = learner_step(model, turns, 1e-4, device, optimizer)
        sync(device)
        times.append(time.perf_counter() - t0)
        losses.append(stats["loss"])
    finite = all(np.isfinite(losses))
    return {"losses": losses, "step_s": times, "ok": finite and losses[-1] < losses[0]}


def check_generation(model, vocab: int, device, prompts: int, prompt_len: int, new_tokens: int) -> dict:
    rng = np.random.default_rng(1)
    batch = [rng.integers(1, vocab, prompt_len).tolist() for _ in range(prompts)]
    engine = HFEngine(model, [vocab + 1], 0)  # a stop id that never comes: every row runs to the end
    with torch.autocast(device.type, dtype=torch.bfloat16):
        engine.generate(batch[:2], Sampling(1.0, 1.0, 4), seed=0)  # warm-up
        sync(device)
        t0 = time.perf_counter()
        out = engine.generate(batch, Sampling(1.0, 1.0, new_tokens), seed=0)
        sync(device)
    seconds = time.perf_counter() - t0
    tokens = sum(len(c.token_ids) for c in out)
    return {"prompts": prompts, "new_tokens": new_tokens, "tokens_per_s": tokens / seconds, "ok": tokens > 0}


def check_train(out_dir: Path, device: torch.device, backend: str, steps: int, async_steps: int = 0) -> dict:
    """A short run of the trainer; with ``async_steps`` the actor plays ahead, so from step 2 on the engine's
    log-probs are one update old (checked through the staleness schedule and the importance ratios instead)."""
    config = TrainConfig.build(
        {
            "output_dir": str(out_dir),
            "async_steps": async_steps,
            "device": device.type,
            "backend": backend,
            "bf16": True,
            "steps": steps,
            "sft_steps": 5 if device.type == "cpu" else 50,
            "samples_per_step": 32 if device.type == "cpu" else 512,
            "games_in_flight": 16 if device.type == "cpu" else 128,
            "eval_every": steps,
            "eval_games": 4,
            "eval_env_ids": "KuhnPoker-v0:rounds=1",
            "eval_opponents": "random",
            "time_limit_s": 0,
            "save_every": steps,
            "plots": False,
        }
    )
    train(config, progress=False)
    rows = [json.loads(line) for line in (out_dir / "metrics.jsonl").read_text().splitlines()]
    steps_rows = [r for r in rows if "update_s" in r]
    gaps = [r["logprob_gap/mean"] for r in steps_rows if "logprob_gap/mean" in r]
    out = {
        "steps": len(steps_rows),
        "rollout_s": [r["rollout_s"] for r in steps_rows],
        "update_s": [r["update_s"] for r in steps_rows],
        "sync_s": [r["sync_s"] for r in steps_rows],
        "generated_tokens_per_s": [r["generated_tokens_per_s"] for r in steps_rows],
        "logprob_gap_mean": gaps,
        "kuhn_exploitability": steps_rows[-1].get("eval/kuhn_exploitability"),
        "step_s": [b["time_s"] - a["time_s"] for a, b in zip(steps_rows, steps_rows[1:], strict=False)],
    }
    if async_steps:
        out["staleness"] = [r["async/staleness"] for r in steps_rows]
        out["learner_idle_s"] = [r["async/learner_idle_s"] for r in steps_rows]
        out["tis_ratio_mean"] = [r["tis/ratio_mean"] for r in steps_rows]
        expected = [min(s, async_steps) for s in range(steps)]
        out["ok"] = out["staleness"] == expected and all(np.isfinite(out["tis_ratio_mean"])) and gaps[0] < 0.05
    else:  # bf16 sampling and bf16 recomputation differ by rounding only
        out["ok"] = len(steps_rows) == steps and all(np.isfinite(gaps)) and max(gaps, default=1.0) < 0.05
    return out


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def peak_memory_gib(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**30
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux


def run_check(name: str, results: dict, func, *args) -> None:
    """Run one check; a crash is recorded as a failed check with its traceback's last lines."""
    t0 = time.perf_counter()
    try:
        results[name] = func(*args)
    except Exception as error:  # noqa: BLE001 - every failure must land in the JSON
        trace = traceback.format_exc()[-2000:]
        results[name] = {"ok": False, "error": f"{type(error).__name__}: {error}", "trace": trace}
    results[name]["seconds"] = time.perf_counter() - t0
    print(f"{name}: {'ok' if results[name]['ok'] else 'FAILED'} ({results[name]['seconds']:.1f} s)", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="run every check on CPU at small sizes (CI)")
    parser.add_argument("--out", default="runs/gpu_check/result.json")
    args = parser.parse_args()
    if not args.dry_run and not torch.cuda.is_available():
        print("gpu_check: torch sees no CUDA GPU; use --dry-run to run the checks on CPU", file=sys.stderr)
        return 2
    device = torch.device("cpu" if args.dry_run else "cuda")
    # sizes: a 151,936-token vocabulary as in Qwen3 on the GPU; small on the CPU dry run
    vocab, hidden, layers = (1024, 64, 2) if args.dry_run else (151936, 1024, 8)
    prompt, response = (32, 16) if args.dry_run else (512, 512)
    results: dict = {
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "cpu",
        "dry_run": args.dry_run,
        "torch": torch.__version__,
        "model": {"vocab": vocab, "hidden": hidden, "layers": layers},
    }
    import transformers

    results["transformers"] = transformers.__version__
    model = build_model(vocab, hidden, layers, device)
    results["model"]["parameters"] = sum(p.numel() for p in model.parameters())
    turns = fixed_turns(vocab, 8, prompt, response)
    run_check("bf16_update", results, check_bf16_update, model, turns, device)
    run_check("fixed_batch", results, check_fixed_batch, model, turns, device, 3 if args.dry_run else 8)
    run_check("generation", results, check_generation, model, vocab, device, 64, prompt, 8 if args.dry_run else 128)
    del model
    work = Path(tempfile.mkdtemp(prefix="gpu_check_"))
    run_check("train", results, check_train, work / "hf", device, "hf", 2 if args.dry_run else 4)
    # the same run with the actor playing one step ahead: both modes' step seconds side by side
    run_check("train_async", results, check_train, work / "hf_async", device, "hf", 3 if args.dry_run else 6, 1)
    try:
        import vllm  # noqa: F401

        has_vllm = not args.dry_run
    except ImportError:
        has_vllm = False
    if has_vllm:
        run_check("vllm", results, check_train, work / "vllm", device, "vllm", 3)
    else:
        results["vllm"] = {"ok": True, "skipped": "vLLM is not importable here (or a dry run)"}
    results["peak_memory_gib"] = peak_memory_gib(device)
    results["ok"] = all(v["ok"] for v in results.values() if isinstance(v, dict) and "ok" in v)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    print(json.dumps({k: v for k, v in results.items() if k != "model"}, indent=None)[:4000])
    print(f"gpu_check: {'OK' if results['ok'] else 'FAILED'}; numbers in {out}")
    return 0 if results["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())

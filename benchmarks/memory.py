"""Peak memory of one learner step for Qwen3-architecture models, with and without gradient
checkpointing and chunked log-probs.

A step is what ``trainers.learner.update`` does with one micro-batch: response log-probs through
``spiral_arena.models.logprobs.response_logprobs``, the PPO loss, backward, gradient clipping and an AdamW
step, on fp32 parameters (what the trainer keeps) with random weights built from a config (nothing
is downloaded) and Qwen's 151,936-token vocabulary. Each case runs in a fresh process. AdamW's
states are created first by a step on zero gradients, as every step after the first finds them;
then the peak RSS is reset (Linux's /proc/self/clear_refs) and ``ru_maxrss`` read after backward
and again after the AdamW step, the second covering the whole step.
Gradients (4 bytes a parameter) are arithmetic: the rest of the forward/backward peak is
activations, logits and temporaries.

    python benchmarks/memory.py [--sizes 25m,150m,0.6b] [--tokens 512] [--prompt-tokens 512]
                                [--batch 1] [--chunk-size 128]
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

VOCAB = 151_936
GIB = 2**30
# Qwen3-0.6B's real shape, and two smaller ones with the same vocabulary (tied embeddings, as 0.6B)
SIZES: dict[str, dict[str, int]] = {
    "25m": {
        "hidden_size": 128,
        "num_hidden_layers": 12,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 32,
        "intermediate_size": 768,
    },
    "150m": {
        "hidden_size": 512,
        "num_hidden_layers": 18,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 64,
        "intermediate_size": 2048,
    },
    "0.6b": {
        "hidden_size": 1024,
        "num_hidden_layers": 28,
        "num_attention_heads": 16,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "intermediate_size": 3072,
    },
}


def current_rss() -> int:
    """Resident bytes now (Linux)."""
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def peak_rss() -> int:
    """The resident high-water mark since the last ``restart_peak`` (``ru_maxrss`` is in KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def restart_peak() -> int:
    """Hands freed heap back to the OS and resets the high-water mark to the RSS now, which it returns."""
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    Path("/proc/self/clear_refs").write_text("5")
    return current_rss()


def learner_step(case: dict) -> dict:
    """One learner step of ``case`` in this process: RSS after imports, at the step's start, and
    the peaks above that start after backward and after the AdamW step; and its seconds."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from spiral_arena.models.logprobs import pack, response_logprobs
    from trainers.losses import policy_loss

    imported = current_rss()
    torch.manual_seed(0)
    config = Qwen3Config(
        vocab_size=VOCAB, tie_word_embeddings=True, max_position_embeddings=40960, **SIZES[case["size"]]
    )
    model = Qwen3ForCausalLM(config)
    if case["checkpointing"]:
        model.gradient_checkpointing_enable()
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6)
    generator = torch.Generator().manual_seed(0)
    prompts = torch.randint(0, VOCAB, (case["batch"], case["prompt_tokens"]), generator=generator).tolist()
    responses = torch.randint(0, VOCAB, (case["batch"], case["tokens"]), generator=generator).tolist()
    ids, attention, positions, response_mask = pack(prompts, responses, 0, "cpu")
    advantages = torch.randn(case["batch"], generator=generator)
    chunk_size = case["chunk_size"] if case["chunked"] else 0
    for parameter in model.parameters():
        parameter.grad = torch.zeros_like(parameter)
    optimizer.step()  # allocates AdamW's states, without a forward pass
    optimizer.zero_grad(set_to_none=True)

    start = restart_peak()
    started = time.perf_counter()
    logp, mask = response_logprobs(model, ids, attention, positions, response_mask, chunk_size=chunk_size)
    # old log-probs = these, detached: the ratio's gradient equals PPO's at any old policy
    loss, _ = policy_loss(logp, logp.detach(), advantages, mask, "ppo", 0.2, "token_mean", case["tokens"])
    loss.backward()
    backward_peak = peak_rss()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    return {
        "params": sum(p.numel() for p in model.parameters()),
        "imported": imported,
        "start": start,
        "backward_peak": backward_peak,
        "peak": peak_rss(),
        "seconds": time.perf_counter() - started,
    }


def run_case(case: dict) -> dict | None:
    """One case in a fresh interpreter, so no earlier case's high-water mark or heap is counted; None if it died."""
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, __file__, "--case", json.dumps(case)],
        capture_output=True,
        text=True,
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
    )
    if done.returncode != 0:
        print(done.stderr[-2000:], file=sys.stderr)
        return None
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="25m,150m,0.6b", help=f"comma-separated, of {', '.join(SIZES)}")
    parser.add_argument("--tokens", type=int, default=512, help="response tokens per row")
    parser.add_argument("--prompt-tokens", type=int, default=512, help="prompt tokens per row")
    parser.add_argument("--batch", type=int, default=1, help="rows in the micro-batch")
    parser.add_argument("--chunk-size", type=int, default=128, help="response tokens per log-prob chunk when chunked")
    parser.add_argument("--case", help=argparse.SUPPRESS)  # internal: run one case, print its JSON
    args = parser.parse_args()
    if args.case:
        print(json.dumps(learner_step(json.loads(args.case))))
        return

    from rich.console import Console
    from rich.table import Table

    console = Console(width=None if sys.stdout.isatty() else 180)  # a file gets the whole table
    sizes = [s for s in args.sizes.split(",") if s]
    unknown = [s for s in sizes if s not in SIZES]
    if unknown:
        parser.error(f"unknown sizes {unknown}; choose from {list(SIZES)}")
    table = Table(
        title=(
            f"One learner step (PPO loss, backward, AdamW), fp32 on CPU: micro-batch {args.batch} x "
            f"({args.prompt_tokens} prompt + {args.tokens} response) tokens, vocab {VOCAB:,}, "
            f"log-prob chunks of {args.chunk_size} tokens; GiB"
        ),
        caption=(
            "peak RSS = imports + at start + whole step. at start: measured RSS above imports before the "
            "step (params + AdamW states; 12 bytes a parameter on paper). fwd+bwd, whole step (to after AdamW): "
            "measured peaks above that start. grads: 4 bytes a parameter. activations + logits = fwd+bwd - grads. "
            "step s is rough: the CPU is shared."
        ),
    )
    columns = (
        "model",
        "params",
        "grad ckpt",
        "chunked",
        "peak RSS",
        "imports",
        "at start",
        "12 B/param",
        "fwd+bwd",
        "grads",
        "activations + logits",
        "whole step",
        "step s",
    )
    for column in columns:
        table.add_column(column, justify="right")
    for size in sizes:
        for checkpointing in (False, True):
            for chunked in (False, True):
                case = {
                    "size": size,
                    "checkpointing": checkpointing,
                    "chunked": chunked,
                    "tokens": args.tokens,
                    "prompt_tokens": args.prompt_tokens,
                    "batch": args.batch,
                    "chunk_size": args.chunk_size,
                }
                started = time.perf_counter()
                result = run_case(case)
                console.log(f"{case} -> {result} in {time.perf_counter() - started:.0f} s")
                flags = ("yes" if checkpointing else "no", "yes" if chunked else "no")
                if result is None:
                    table.add_row(size, "", *flags, "failed (see stderr)", *[""] * (len(columns) - 5))
                    continue
                weights = result["params"] * 4
                backward = result["backward_peak"] - result["start"]
                gib = [
                    result["peak"],
                    result["imported"],
                    result["start"] - result["imported"],
                    3 * weights,
                    backward,
                    weights,
                    backward - weights,
                    result["peak"] - result["start"],
                ]
                table.add_row(
                    size,
                    f"{result['params'] / 1e6:.0f}M",
                    *flags,
                    *(f"{b / GIB:.2f}" for b in gib),
                    f"{result['seconds']:.1f}",
                )
    console.print(table)


if __name__ == "__main__":
    main()

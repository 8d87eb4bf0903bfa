"""``python -m trainers ...`` (and ``torchrun --nproc_per_node N -m trainers ...``): train with flags."""

from __future__ import annotations

import argparse
import sys

from spiral_arena.models.checkpoints import last_checkpoint, read_settings
from trainers.config import ConfigError
from trainers.flags import add_arguments, from_arguments


def run(args: argparse.Namespace, prog: str) -> int:
    """Train with the parsed flags (``add_arguments``): ``spiral-arena train`` and ``python -m trainers`` both
    come here. The whole config is checked before anything is built or written (exit 2, one line per problem)."""
    try:
        config = from_arguments(args)
    except ConfigError as error:
        print(f"{prog}: error: {error}", file=sys.stderr)
        return 2
    from trainers.loop import train  # torch and transformers only for a valid config

    try:
        run_dir = train(config)
    except ValueError as error:  # what only the launch can tell (e.g. torchrun's ranks), before any model
        print(f"{prog}: error: {error}", file=sys.stderr)
        return 2
    last = last_checkpoint(run_dir)  # the last line says whether the run was cut short
    stopped = read_settings(last).get("stopped_early") if last is not None else None
    print(f"run written to {run_dir}" + (f"; STOPPED EARLY {stopped}" if stopped else ""))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainers", description="spiral-arena self-play training")
    add_arguments(parser)
    return run(parser.parse_args(argv), parser.prog)


if __name__ == "__main__":
    sys.exit(main())

"""``python -m trainers ...`` (and ``torchrun --nproc_per_node N -m trainers ...``): train with flags."""

from __future__ import annotations

import argparse
import sys

from trainers.config import ConfigError
from trainers.flags import add_arguments, from_arguments


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainers", description="spiral-arena self-play training")
    add_arguments(parser)
    try:
        config = from_arguments(parser.parse_args(argv))  # checked before anything is built or written
    except ConfigError as error:
        print(f"{parser.prog}: error: {error}", file=sys.stderr)
        return 2
    from trainers.loop import train  # torch and transformers only for a valid config

    train(config)
    return 0


if __name__ == "__main__":
    sys.exit(main())

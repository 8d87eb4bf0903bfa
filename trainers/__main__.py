"""``python -m trainers ...`` (and ``torchrun --nproc_per_node N -m trainers ...``): train with flags."""

import argparse

from trainers.config import add_arguments, from_arguments
from trainers.loop import train

parser = argparse.ArgumentParser(prog="python -m trainers", description="spiral-arena self-play training")
add_arguments(parser)
train(from_arguments(parser.parse_args()))

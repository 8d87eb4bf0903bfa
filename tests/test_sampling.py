"""One sampling type for every engine, agent, evaluation and the trainer (``spiral_arena.models.Sampling``)."""

from __future__ import annotations

import math

import pytest

from spiral_arena.models import Sampling
from trainers.config import TrainConfig


@pytest.mark.parametrize(
    ("fields", "error", "names"),
    [
        ({"temperature": -0.1}, ValueError, "temperature must be >= 0"),
        ({"temperature": math.nan}, ValueError, "temperature must be >= 0"),
        ({"temperature": "0.7"}, TypeError, "temperature must be a number"),
        ({"top_p": 0.0}, ValueError, "top_p must be in (0, 1]"),
        ({"top_p": 1.5}, ValueError, "top_p must be in (0, 1]"),
        ({"max_new_tokens": 0}, ValueError, "max_new_tokens must be an integer >= 1"),
        ({"max_new_tokens": 8.0}, ValueError, "max_new_tokens must be an integer >= 1"),
        ({"max_new_tokens": True}, ValueError, "max_new_tokens must be an integer >= 1"),
    ],
)
def test_bad_sampling_is_refused_with_the_valid_range(fields, error, names):
    with pytest.raises(error, match=names.replace("(", r"\(").replace("]", r"\]")):
        Sampling(**fields)


def test_greedy_and_the_recorded_form_round_trip():
    greedy = Sampling(0, 1.0, 12)  # temperature 0 decodes greedily
    assert Sampling.of(greedy.as_dict()) == greedy
    assert greedy.as_dict() == {"temperature": 0, "top_p": 1.0, "max_new_tokens": 12}


def test_the_config_hands_rollouts_and_evaluation_their_own_sampling():
    config = TrainConfig.build({"temperature": 0.9, "eval_temperature": 0.3, "top_p": 0.95, "max_new_tokens": 20})
    assert config.sampling == Sampling(0.9, 0.95, 20)
    assert config.eval_sampling == Sampling(0.3, 0.95, 20)

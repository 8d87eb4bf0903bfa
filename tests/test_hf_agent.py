"""HFAgent on a tiny Qwen3 model built locally (no hub): batching, decoding, games."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

import spiral_arena  # noqa: E402
from spiral_arena.agents import RandomAgent  # noqa: E402
from spiral_arena.agents.hf import HFAgent  # noqa: E402
from spiral_arena.play import play_game  # noqa: E402
from trainers.tiny import create_tiny, game_corpus  # noqa: E402


@pytest.fixture(scope="module")
def tiny_path(tmp_path_factory):
    return str(create_tiny(tmp_path_factory.mktemp("tiny") / "model"))


def observations(env_id, n):
    env = spiral_arena.make(env_id)
    agent = RandomAgent(0)
    seen = []
    for seed in range(n):
        env.reset(seed=seed)
        obs, _, _, _, info = env.last()
        seen.append((obs, info))
        env.step(agent.act(obs, info))
        obs, _, term, _, info = env.last()
        if not term:
            seen.append((obs, info))
    return seen


def test_tokenizer_round_trips_game_text(tiny_path):
    agent = HFAgent(tiny_path)
    for text in game_corpus(["KuhnPoker-v0"], games_per_env=2, seed=9)[:40] + ["\\boxed{[bet]} ünïcode ✓"]:
        ids = agent.tokenizer(text, add_special_tokens=False)["input_ids"]
        assert agent.tokenizer.decode(ids) == text


def test_batched_greedy_equals_one_by_one(tiny_path):
    """Each prompt gets its own completion: left padding must not mix or shift the batch."""
    agent = HFAgent(tiny_path, temperature=0, max_new_tokens=12)
    seen = observations("TicTacToe-v0", 3) + observations("KuhnPoker-v0", 3)
    obs = [o for o, _ in seen]
    infos = [i for _, i in seen]
    assert len({len(o) for o in obs}) > 1  # different lengths, so padding is exercised
    batched = agent.act_batch(obs, infos)
    single = [agent.act(o, i) for o, i in zip(obs, infos, strict=True)]
    assert batched == single
    assert len(set(batched)) > 1


def test_sampling_is_reproducible_with_reset(tiny_path):
    agent = HFAgent(tiny_path, temperature=1.0, max_new_tokens=8)
    obs, info = observations("KuhnPoker-v0", 1)[0]
    agent.reset(seed=3)
    first = agent.act_batch([obs] * 4, [info] * 4)
    agent.reset(seed=3)
    assert agent.act_batch([obs] * 4, [info] * 4) == first


def test_untrained_model_plays_whole_games(tiny_path):
    """An untrained model mostly writes nonsense: the game must end cleanly as an invalid move."""
    env = spiral_arena.make("KuhnPoker-v0")
    agent = spiral_arena.agents.make_agent(f"hf:{tiny_path}", max_new_tokens=8)
    for seed in range(3):
        record = play_game(env, [agent, RandomAgent(seed)], seed=seed)
        assert sum(record.returns) == 0
        if record.invalid:
            assert set(record.invalid) <= {"player_0"}


def test_bad_path_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="not a transformers model directory"):
        HFAgent(str(tmp_path / "missing"))

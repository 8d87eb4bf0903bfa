"""HFAgent on a tiny Qwen3 model built locally (no hub): batching, decoding, games."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

import copy  # noqa: E402
import json  # noqa: E402

import torch  # noqa: E402

import spiral_arena  # noqa: E402
from spiral_arena.agents import RandomAgent  # noqa: E402
from spiral_arena.agents.hf import HFAgent  # noqa: E402
from spiral_arena.models.checkpoints import SETTINGS_FILE  # noqa: E402
from spiral_arena.play import play_game  # noqa: E402
from trainers.tiny import build_model, build_tokenizer, create_tiny, game_corpus  # noqa: E402


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


def test_torch_manual_seed_still_fixes_an_unseeded_agent(tiny_path):
    obs, info = observations("KuhnPoker-v0", 1)[0]
    replies = []
    for _ in range(2):
        torch.manual_seed(7)
        replies.append(HFAgent(tiny_path, temperature=1.0, max_new_tokens=8).act_batch([obs] * 3, [info] * 3))
    assert replies[0] == replies[1]


def test_copies_sample_together_what_each_samples_alone(tiny_path):
    """Each copy of the model (one per game in flight) samples its rows from its own generator, and a row
    that ends early draws nothing more: batching games changes no game's replies, now or later."""
    agent = HFAgent(tiny_path, temperature=1.0, top_p=0.9, max_new_tokens=10)
    seen = [o for o, _ in observations("KuhnPoker-v0", 3) + observations("TicTacToe-v0", 3)]

    def copies() -> list[HFAgent]:
        fresh = [copy.copy(agent) for _ in seen]
        for seed, own in enumerate(fresh):
            own.reset(seed=seed)
        return fresh

    together, alone = copies(), copies()
    for _ in range(2):  # the second call checks that the generators moved on alike
        replies = HFAgent.act_together(together, seen)
        assert replies == [own.act(o, {}) for own, o in zip(alone, seen, strict=True)]
    assert len(set(replies)) > 1


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


@pytest.fixture(scope="module")
def chat_model(tmp_path_factory):
    """A tiny model whose tokenizer's EOS (``<|endoftext|>``) is not its end of turn (``<|im_end|>``),
    as in Qwen's chat models, taught to answer "Say one." with "one bet<|im_end|> check fold": an agent
    that stops on EOS alone says the tail too."""
    from transformers import PreTrainedTokenizerFast

    base = build_tokenizer(game_corpus(["KuhnPoker-v0"], games_per_env=5))
    tok = PreTrainedTokenizerFast(
        tokenizer_object=base.backend_tokenizer,
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
        chat_template=base.chat_template,
    )
    model = build_model(len(tok))
    model.generation_config.eos_token_id = tok.eos_token_id
    path = tmp_path_factory.mktemp("chat") / "model"
    model.save_pretrained(path)
    tok.save_pretrained(path)
    (path / SETTINGS_FILE).write_text(json.dumps({"prompt_template": "bare"}))  # short prompts: quick to teach
    agent = HFAgent(str(path), temperature=0, max_new_tokens=8)

    def encode(text: str) -> list[int]:
        return agent.tokenizer(text, add_special_tokens=False)["input_ids"]

    prompt = encode(agent.prompt_text("Say one."))
    reply = encode("one bet") + [tok.convert_tokens_to_ids("<|im_end|>")] + encode(" check fold")
    optimizer = torch.optim.Adam(agent.model.parameters(), lr=1e-2)
    for _ in range(40):
        logits = agent.model(input_ids=torch.tensor([prompt + reply])).logits[0, len(prompt) - 1 : -1]
        loss = torch.nn.functional.cross_entropy(logits, torch.tensor(reply))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    agent.model.eval()
    with torch.no_grad():  # teacher-forced argmax: the whole reply, tail included, was learned
        logits = agent.model(input_ids=torch.tensor([prompt + reply])).logits[0, len(prompt) - 1 : -1]
        assert logits.argmax(dim=-1).tolist() == reply
    return agent, prompt, reply


def test_stops_and_scores_with_the_end_of_turn_token(chat_model):
    agent, prompt, reply = chat_model
    end_of_turn = agent.tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert agent.tokenizer.eos_token_id != end_of_turn
    assert agent.act("Say one.", {}) == "one bet"  # nothing of the tail after <|im_end|>
    with torch.no_grad():
        ids = torch.tensor([prompt + reply])
        logp = torch.log_softmax(agent.model(input_ids=ids).logits[0, :-1].float(), dim=-1)
    answer = reply[: reply.index(end_of_turn) + 1]
    expected = sum(float(logp[len(prompt) - 1 + i, token]) for i, token in enumerate(answer))
    assert agent.score_answers("Say one.", ["one bet"]) == [pytest.approx(expected, abs=1e-4)]

"""Kuhn exploitability read the way a policy plays: answer probabilities at its sampling temperature
(greedy: the argmax policy), against a hand-computed softmax of the tiny model's own logits."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from spiral_arena.models.policy import Policy  # noqa: E402
from spiral_arena.models.scoring import answer_scorer  # noqa: E402
from trainers.readouts import kuhn_metrics  # noqa: E402

ANSWERS = ["\\boxed{[bet]}", "\\boxed{[check]}"]
OBSERVATION = "[GAME] Your card: J. Your turn. Legal actions: [check], [bet]."


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from spiral_arena.models.hf import HFEngine
    from trainers.tiny import create_tiny

    path = create_tiny(tmp_path_factory.mktemp("tiny") / "model", ["KuhnPoker-v0"], seed=3)
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    stops = [tokenizer.eos_token_id]
    return path, model, Policy(HFEngine(model, stops, tokenizer.pad_token_id), tokenizer, "bare", stops)


def by_hand(model, policy, answer: str, temperature: float) -> float:
    """log P(answer, then end of turn) with every token drawn from softmax(logits / temperature)."""
    prompt = policy.prompt_ids(OBSERVATION)
    target = policy.tokenizer(answer, add_special_tokens=False)["input_ids"] + [policy.end_of_turn]
    ids = torch.tensor([prompt + target])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0].double() / temperature
    total = 0.0
    for i, token in enumerate(target):
        row = logits[len(prompt) + i - 1]
        total += float(row[token] - torch.logsumexp(row, dim=0))
    return total


@pytest.mark.parametrize("temperature", [0.5, 1.0, 2.0])
def test_answer_scores_are_the_softmax_at_the_temperature(tiny, temperature):
    _, model, policy = tiny
    scores = answer_scorer(model, policy, temperature)(OBSERVATION, ANSWERS)
    expected = [by_hand(model, policy, a, temperature) for a in ANSWERS]
    assert scores == pytest.approx(expected, abs=1e-4)
    # the policy read-out normalises over the two legal answers
    p_bet = math.exp(scores[0]) / (math.exp(scores[0]) + math.exp(scores[1]))
    assert 0 < p_bet < 1


def test_many_positions_scored_together_give_each_its_own_scores_in_order(tiny):
    """Rows are batched by length across observations (3 rows a pass here); each observation still gets
    its own answers' scores, in the order asked, as when it is scored alone."""
    _, model, policy = tiny
    scorer = answer_scorer(model, policy, 1.0)
    scorer.rows = 3
    items = [
        (OBSERVATION, ANSWERS),
        ("[GAME] Round 1 of 1. You open. Pot: 2 chips. Your card: K.", ["\\boxed{[check]}"]),
        ("[GAME] x", ["\\boxed{[fold]}", "[call]", "\\boxed{[bet]}"]),
        (OBSERVATION, ANSWERS[::-1]),
    ]
    together = scorer.many(items)
    assert [len(s) for s in together] == [2, 1, 3, 2]
    for (observation, answers), scores in zip(items, together, strict=True):
        assert scores == pytest.approx(scorer(observation, answers), abs=1e-5)
    assert together[3] == pytest.approx(together[0][::-1], abs=1e-5)
    assert len({round(s, 4) for s in together[2]}) == 3  # different answers, different scores: a swap would show


def test_exploitability_at_the_evaluation_temperature_and_greedy(tiny):
    path, model, policy = tiny
    at_one = kuhn_metrics(model, policy, "last")
    assert "eval/kuhn_exploitability_at_eval_t" not in at_one  # temperature 1: one read-out
    cooler = kuhn_metrics(model, policy, "last", temperature=0.6)
    assert cooler["eval/kuhn_exploitability"] == pytest.approx(at_one["eval/kuhn_exploitability"])
    assert 0 <= cooler["eval/kuhn_exploitability_at_eval_t"] <= 1
    greedy = answer_scorer(model, policy, 0.0)(OBSERVATION, ANSWERS)
    probabilities = sorted(math.exp(s) for s in greedy)
    assert probabilities[0] < 1e-6  # greedy decoding produces at most one of the two answers

    from spiral_arena.agents import make_agent

    # an hf: agent states the policy it plays: at its own temperature, not always at 1
    greedy_agent = make_agent(f"hf:{path}", temperature=0).kuhn_policy()
    sampled = make_agent(f"hf:{path}", temperature=1.0).kuhn_policy()
    warm = make_agent(f"hf:{path}", temperature=2.0).kuhn_policy()
    assert set(greedy_agent) == set(sampled) == set(warm) and greedy_agent != sampled != warm
    # a hotter policy is closer to uniform between the two answers
    assert sum(abs(p - 0.5) for p in warm.values()) < sum(abs(p - 0.5) for p in sampled.values())


def test_a_run_that_trains_leduc_evaluates_its_exact_exploitability(tiny):
    """The evaluation reads the Leduc policy at the 288 rank states on the text of the Leduc the run trains, at
    temperature 1 and at the evaluation's, and logs each policy's exact exploitability."""
    from spiral_arena.analysis import leduc_exploitability, leduc_policy_from_scores
    from spiral_arena.rollout import parse_mixture
    from trainers.config import TrainConfig
    from trainers.evaluate import evaluate

    _, model, policy = tiny
    game = "LeducHoldem-v0:reward=win"
    config = TrainConfig.build({"games": game, "eval_temperature": 0.6, "obs_format": "last"})
    scores = evaluate(model, policy, config, parse_mixture(game, "")[0], play=False)
    for key, temperature in (("eval/leduc_exploitability", 1.0), ("eval/leduc_exploitability_at_eval_t", 0.6)):
        read, _ = leduc_policy_from_scores(answer_scorer(model, policy, temperature), "last", game)
        assert scores[key] == pytest.approx(leduc_exploitability(read), abs=1e-9)
    assert scores["eval/leduc_exploitability"] != scores["eval/leduc_exploitability_at_eval_t"]
    assert 0 <= scores["eval/leduc_invalid_mass"] <= 1 and "eval/kuhn_exploitability" not in scores


@pytest.mark.parametrize(
    "games, rounds", [("KuhnPoker-v0", 5), ("KuhnPoker-v0:rounds=1", 1), ("KuhnPoker-v0:rounds=3", 3)]
)
def test_an_evaluation_logs_the_rounds_its_kuhn_is_trained_with(tiny, games, rounds):
    """The read-out is of single hands either way; the rounds the run trains on (the game's default, 5,
    when not given) are logged beside it, so the labels can say so."""
    from spiral_arena.rollout import parse_mixture
    from trainers.config import TrainConfig
    from trainers.evaluate import evaluate

    _, model, policy = tiny
    config = TrainConfig.build({"games": games, "obs_format": "last"})
    scores = evaluate(model, policy, config, parse_mixture(games, "")[0], play=False)
    assert scores["eval/kuhn_trained_rounds"] == rounds and "eval/kuhn_exploitability" in scores


def test_an_evaluation_reads_kuhn_as_played_beside_the_exact_read_out(tiny):
    """eval_kuhn_samples answers a state, sampled from the evaluation's own generator: the same numbers
    twice, none of training's random streams touched, and nothing when it is 0."""
    from spiral_arena.rollout import parse_mixture
    from trainers.config import TrainConfig
    from trainers.evaluate import evaluate

    _, model, policy = tiny
    games = "KuhnPoker-v0:rounds=1"
    specs = parse_mixture(games, "")[0]
    config = TrainConfig.build({"games": games, "obs_format": "last", "eval_kuhn_samples": 20})
    rng_state = torch.get_rng_state()
    first = evaluate(model, policy, config, specs, play=False)
    assert torch.equal(rng_state, torch.get_rng_state())
    second = evaluate(model, policy, config, specs, play=False)
    played = {k: v for k, v in first.items() if "played" in k}
    assert set(played) == {
        "eval/kuhn_exploitability_played",
        "eval/kuhn_exploitability_played_se",
        "eval/kuhn_played_invalid",
    }
    assert played == {k: second[k] for k in played}
    assert 0 <= played["eval/kuhn_exploitability_played"] <= 1 and played["eval/kuhn_exploitability_played_se"] >= 0
    assert 0 <= played["eval/kuhn_played_invalid"] <= 1
    off = TrainConfig.build({"games": games, "obs_format": "last", "eval_kuhn_samples": 0})
    assert not any("played" in k for k in evaluate(model, policy, off, specs, play=False))

"""Trainer pieces against hand-computed values: RAE, losses, rollouts' batching, config."""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from spiral_arena.models import Completion, Sampling  # noqa: E402
from spiral_arena.models.policy import Policy  # noqa: E402
from spiral_arena.registry import GameSpec  # noqa: E402
from spiral_arena.rollout import collect, parse_mixture  # noqa: E402
from trainers.config import ConfigError, TrainConfig  # noqa: E402
from trainers.flags import add_arguments, from_arguments  # noqa: E402
from trainers.losses import KL_ESTIMATORS, kl_per_token, policy_loss, row_coefficients  # noqa: E402
from trainers.marshal import Episode, marshal_advantages, turn_rewards  # noqa: E402
from trainers.rae import RAE, state_advantages  # noqa: E402


def test_rae_reads_baseline_before_update():
    rae = RAE(decay=0.95)
    # b starts at 0: A1 = 1 - 0; b = 0.05
    assert rae.advantage("Kuhn", 0, 1.0) == pytest.approx(1.0)
    assert rae.baselines["Kuhn/0"] == pytest.approx(0.05)
    # A2 = -1 - 0.05; b = 0.95*0.05 - 0.05 = -0.0025
    assert rae.advantage("Kuhn", 0, -1.0) == pytest.approx(-1.05)
    assert rae.baselines["Kuhn/0"] == pytest.approx(-0.0025)
    # roles and games are independent
    assert rae.advantage("Kuhn", 1, 1.0) == pytest.approx(1.0)
    assert rae.advantage("TicTacToe", 0, 0.0) == 0.0
    state = rae.state_dict()
    other = RAE()
    other.load_state_dict(state)
    assert other.advantage("Kuhn", 0, 0.5) == rae.advantage("Kuhn", 0, 0.5)


def test_rae_converges_to_mean_return():
    rae = RAE(decay=0.9)
    for _ in range(300):
        rae.advantage("g", 0, 0.4)
    assert rae.baselines["g/0"] == pytest.approx(0.4, abs=1e-6)
    assert rae.advantage("g", 0, 0.4) == pytest.approx(0.0, abs=1e-6)


def test_state_baseline_is_the_mean_of_the_other_samples_at_the_same_position():
    # Kuhn opening with the king four times (bet, bet, check, check) and the jack twice; one lone queen
    keys = [("Kuhn", 0, "K")] * 4 + [("Kuhn", 0, "J")] * 2 + [("Kuhn", 1, "K"), ("Kuhn", 0, "Q")]
    returns = [2.0, 1.0, 1.0, 0.0, -1.0, -2.0, 1.0, 1.0]
    # K: others' means (2/3, 1, 1, 4/3); J: (-2, -1); seat 1's K and the Q are alone -> None (RAE's)
    expected = [2 - 2 / 3, 1 - 1, 1 - 1, 0 - 4 / 3, -1 + 2, -2 + 1, None, None]
    got = state_advantages(keys, returns, min_others=1)
    assert got[6] is None and got[7] is None
    assert got[:6] == pytest.approx(expected[:6])
    # the card's value is gone: the K and J advantages each sum to zero (before, K was all positive)
    assert sum(got[:4]) == pytest.approx(0.0) and sum(got[4:6]) == pytest.approx(0.0)
    # a position needs min_others *other* samples: K has 3, J only 1
    need3 = state_advantages(keys, returns, min_others=3)
    assert need3[:4] == pytest.approx(expected[:4]) and need3[4:] == [None] * 4


def test_state_baseline_is_refused_outside_two_player_self_play():
    with pytest.raises(ConfigError, match="state_baseline"):
        TrainConfig.build({"algo": "starpo", "state_baseline": 4})
    with pytest.raises(ConfigError, match="state_baseline"):
        TrainConfig.build({"state_baseline": -1})


def test_marshal_advantages_by_hand():
    """The released pipeline on two games of one kind. Game A: seat 0 plays turns of 3 and 2 tokens and
    wins, seat 1 turns of 1 and 2 tokens; game B: one turn each (2 and 1 tokens), a draw paying 0. By hand:
    1. seat 0's turn rewards 0, 1, 0 have mean 1/3, seat 1's 0, -1, 0 mean -1/3: A0 (-1/3, 2/3), B0 -1/3,
       A1 (1/3, -2/3), B1 1/3;
    2. over 11 tokens the mean is 0 and the unbiased variance (4/3)/10: each reward times u = sqrt(7.5);
    3. reward-to-go: A0 (u/3, 2u/3), B0 -u/3, A1 (-u/3, -2u/3), B1 u/3;
    4. seat 0's distinct returns with the padding's 0: {-u/3, 0, u/3, 2u/3}, mean u/6 = a; seat 1's mean -a:
       in units of a, A0 (1, 3), B0 -3, A1 (-1, -3), B1 3;
    5. token-weighted mean -a/11, unbiased variance (67 - 1/11)/10 a^2: A = (k + 1/11) / sqrt(6.690909)."""
    episodes = [
        Episode("G", 0, [0.0, 1.0], [3, 2]),
        Episode("G", 1, [0.0, -1.0], [1, 2]),
        Episode("G", 0, [0.0], [2]),
        Episode("G", 1, [0.0], [1]),
    ]
    final = [[(k + 1 / 11) / math.sqrt((67 - 1 / 11) / 10) for k in ks] for ks in ([1, 3], [-1, -3], [-3], [3])]
    got = marshal_advantages(episodes)
    for row, want in zip(got, final, strict=True):
        assert row == pytest.approx(want, abs=1e-6)  # 1e-8 inside the square roots
    assert got[0] == pytest.approx([0.421741, 1.194933], abs=1e-6)
    # the released rewards: 0.05 a valid turn, a draw 0.1 (the same games; a float32 run of the released
    # pipeline gives these to 1e-6)
    shipped = [
        Episode("G", 0, turn_rewards(2, 1.0, False, 0.05), [3, 2]),
        Episode("G", 1, turn_rewards(2, -1.0, False, 0.05), [1, 2]),
        Episode("G", 0, turn_rewards(1, 0.1, False, 0.05), [2]),
        Episode("G", 1, turn_rewards(1, 0.1, False, 0.05), [1]),
    ]
    assert shipped[0].rewards == pytest.approx([0.05, 1.05]) and shipped[3].rewards == pytest.approx([0.15])
    want = [[0.316624, 1.187339], [-0.474936, -1.187339], [-0.949871], [1.424807]]
    for row, expected in zip(marshal_advantages(shipped), want, strict=True):
        assert row == pytest.approx(expected, abs=2e-6)
    # an invalid answer ends the game: no format reward at that turn, the penalty instead
    assert turn_rewards(3, -11.0, True, 0.05) == pytest.approx([0.05, 0.05, -11.0])
    # the game key separates step 1: a lone turn per (game, seat) is its own mean, so nothing is left to learn
    lone = [Episode("A", 0, [1.0], [1]), Episode("B", 0, [0.0], [1]), Episode("A", 1, [-1.0], [1])]
    assert marshal_advantages(lone) == [[0.0], [0.0], [0.0]]
    # identical batches: nothing to learn, 0 not nan
    assert marshal_advantages([Episode("K", 0, [1.0], [2]), Episode("K", 0, [1.0], [2])]) == [[0.0], [0.0]]
    assert marshal_advantages([Episode("K", 0, [1.0], [1])]) == [[0.0]]  # one token: no variance


def test_marshal_is_refused_where_it_does_not_apply():
    with pytest.raises(ConfigError, match="marshal is for two-player self-play"):
        TrainConfig.build({"advantage": "marshal", "algo": "starpo", "games": "TwentyQuestions-v0"})
    with pytest.raises(ConfigError, match="advantage marshal has none"):
        TrainConfig.build({"advantage": "marshal", "rae": False})
    with pytest.raises(ConfigError, match="advantage: must be one of rae, marshal"):
        TrainConfig.build({"advantage": "grpo"})
    with pytest.raises(ConfigError, match="turn_reward: is a per-turn reward of advantage marshal"):
        TrainConfig.build({"turn_reward": 0.05})


def test_marshal_takes_the_released_rewards_unless_set():
    released = TrainConfig.build({"advantage": "marshal"})
    assert (released.turn_reward, released.draw_reward) == (0.05, 0.1)
    assert (released.invalid_penalty, released.invalid_opponent_reward) == (-11.0, 0.0)
    mine = TrainConfig.build({"advantage": "marshal", "draw_reward": 0.0, "invalid_penalty": -1.5})
    assert (mine.turn_reward, mine.draw_reward, mine.invalid_penalty) == (0.05, 0.0, -1.5)
    assert TrainConfig.build({}).invalid_penalty == -1.5  # RAE keeps its own shaping


def test_rae_rejects_bad_decay():
    with pytest.raises(ValueError, match="decay"):
        RAE(decay=1.0)


def test_reinforce_and_ppo_losses_by_hand():
    logp = torch.tensor([[-1.0, -2.0, 0.0], [-0.5, 0.0, 0.0]])
    old = torch.tensor([[-1.0, -2.5, 0.0], [-0.5, 0.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    adv = torch.tensor([2.0, -1.0])
    token_mean = row_coefficients(mask.sum(1), "token_mean", 10)
    loss, _ = policy_loss(logp, old, adv, mask, token_mean, "reinforce")
    # -(2*(-1) + 2*(-2) + (-1)*(-0.5)) / 3 tokens
    assert float(loss) == pytest.approx(-(-2 - 4 + 0.5) / 3)
    loss, _ = policy_loss(logp, old, adv, mask, row_coefficients(mask.sum(1), "dr_grpo", 10), "reinforce")
    # per sequence sums: 6, -0.5 -> /10 -> mean over 2
    assert float(loss) == pytest.approx((6 / 10 - 0.5 / 10) / 2)
    loss, info = policy_loss(logp, old, adv, mask, token_mean, "ppo", clip=0.2)
    ratio = math.exp(0.5)  # token 2 of row 0, clipped to 1.2 with positive advantage
    expected = -(1 * 2 + min(ratio, 1.2) * 2 + 1 * -1) / 3
    assert float(loss) == pytest.approx(expected)
    assert info["clip_fraction"] == pytest.approx(1 / 3)


def test_ppo_gradient_is_zero_when_clipped():
    logp = torch.tensor([[0.0]], requires_grad=True)
    old = torch.tensor([[-1.0]])  # ratio e > 1.2, positive advantage: clipped, no gradient
    loss, _ = policy_loss(logp, old, torch.tensor([1.0]), torch.ones(1, 1), torch.ones(1), "ppo")
    loss.backward()
    assert float(logp.grad) == 0.0


@pytest.mark.parametrize("estimator", KL_ESTIMATORS)
def test_kl_is_zero_at_reference_and_positive_elsewhere(estimator):
    same = torch.tensor([[-1.0, -2.0, -0.5]])
    assert torch.allclose(kl_per_token(same, same, estimator), torch.zeros(1, 3))
    assert bool((kl_per_token(same, same - 0.3, estimator) > 0).all())
    assert bool((kl_per_token(same, same + 0.3, estimator) > 0).all())


def test_kl_rejects_an_unknown_estimator():
    with pytest.raises(ValueError, match="k3"):
        kl_per_token(torch.zeros(1, 1), torch.zeros(1, 1), "k1")


def test_aggregate_rejects_unknown():
    with pytest.raises(ValueError, match="aggregation"):
        row_coefficients(torch.ones(1), "mean", 1)


class EchoEngine:
    """A scripted engine: answers each prompt with ``answer(prompt_ids)`` and records every batch of
    prompts it was sent. Stands in for a model; no GPU."""

    def __init__(self, tokenizer, answer):
        self.tokenizer, self.answer, self.calls = tokenizer, answer, []

    def generate(self, prompts, sampling, seed):
        self.calls.append(prompts)
        return [Completion(self.tokenizer.encode(self.answer(p)), [0.0], True) for p in prompts]

    def load_weights(self, model):
        pass


class CharTokenizer:
    """One token per character; enough for Policy without any model files."""

    eos_token_id = 0

    def apply_chat_template(self, messages, tokenize, add_generation_prompt):
        return messages[0]["content"]

    def __call__(self, text, add_special_tokens=False):
        if isinstance(text, list):
            return {"input_ids": [self.encode(t) for t in text]}
        return {"input_ids": self.encode(text)}

    def encode(self, text):
        return [ord(c) for c in text]

    def decode(self, ids, skip_special_tokens=True):
        return "".join(chr(i) for i in ids if i)

    def batch_decode(self, batch, skip_special_tokens=True):
        return [self.decode(ids) for ids in batch]


def play(policy, specs, weights, **options):
    """``collect`` with the settings these tests share (short answers, SPIRAL's shaping)."""
    settings = dict(
        sampling=Sampling(1.0, 1.0, 8),
        max_game_actions=50,
        invalid_penalty=-1.5,
        invalid_opponent_reward=0.5,
    )
    return collect(policy, specs, weights, **{**settings, **options})


def kuhn_answer(prompt_ids: list[int]) -> str:
    """A reply fixed by the prompt's own card: bet or call with the king, call with the queen, else
    check or fold. Under this policy the higher card always wins the hand."""
    text = "".join(chr(i) for i in prompt_ids)
    card = text.rsplit("Your card: ", 1)[1][0]
    if "[bet]" in text:
        move = "[bet]" if card == "K" else "[check]"
    else:
        move = "[call]" if card in "KQ" else "[fold]"
    return f"Holding {card}: \\boxed{{{move}}}"


class RotatedEngine:
    """Hands prompt i the completion meant for prompt i + 1: a batching mix-up."""

    def __init__(self, engine: EchoEngine) -> None:
        self.engine = engine

    def generate(self, prompts, *args, **kwargs):
        completions = self.engine.generate(prompts, *args, **kwargs)
        return completions[1:] + completions[:1]


class FirstForAllEngine:
    """SPIRAL's batch-index bug: every prompt gets the first prompt's completion."""

    def __init__(self, engine: EchoEngine) -> None:
        self.engine = engine

    def generate(self, prompts, *args, **kwargs):
        completions = self.engine.generate(prompts, *args, **kwargs)
        return [completions[0]] * len(completions)


def play_kuhn_hands(engine) -> list:
    """Single Kuhn hands, eight at a time; each prompt is the latest message, holding its own card."""
    policy = Policy(engine, CharTokenizer(), "bare")
    specs, weights = parse_mixture("KuhnPoker-v0:rounds=1", "")
    return play(
        policy, specs, weights, min_samples=60, games_in_flight=8, rng=np.random.default_rng(0), obs_format="last"
    )


def check_each_game_got_its_own_replies(results) -> None:
    """Every turn holds the reply to its own prompt, and every hand ended as its own cards say."""
    for r in results:
        assert r.record.invalid_seat is None
        cards = {t.role: t.prompt.rsplit("Your card: ", 1)[1][0] for t in r.turns}
        for t in r.turns:
            assert t.response == kuhn_answer(t.prompt_ids)
            assert t.reward == r.shaped[t.role]
        assert sorted(cards) == [0, 1]  # both seats decide at least once in a hand
        winner = max(cards, key=lambda seat: "JQK".index(cards[seat]))
        assert r.record.returns[winner] == 1.0


def test_each_game_gets_its_own_completion():
    """Completion i must go back to game i; the same check catches engines that mix them up."""
    engine = EchoEngine(CharTokenizer(), kuhn_answer)
    results = play_kuhn_hands(engine)
    assert sum(len(r.turns) for r in results) >= 60
    # really batched, and waves mix prompts that need different replies, so a mix-up would show
    assert sum(len({kuhn_answer(p) for p in wave}) > 1 for wave in engine.calls) >= 5
    check_each_game_got_its_own_replies(results)
    for wrong in (RotatedEngine, FirstForAllEngine):
        with pytest.raises(AssertionError):
            check_each_game_got_its_own_replies(play_kuhn_hands(wrong(EchoEngine(CharTokenizer(), kuhn_answer))))


def test_invalid_answers_are_shaped_and_attributed():
    tok = CharTokenizer()
    engine = EchoEngine(tok, lambda p: "\\boxed{[9]}")  # never a legal cell
    policy = Policy(engine, tok, "bare")
    specs, weights = parse_mixture("TicTacToe-v0", "")
    results = play(policy, specs, weights, min_samples=5, games_in_flight=4, rng=np.random.default_rng(1))
    for r in results:
        assert r.record.invalid_seat == 0 and r.shaped == (-1.5, 0.5) and r.record.returns == (-1.0, 1.0)
        assert r.record.invalid == {"player_0": r.record.invalid["player_0"]} and r.record.winner == "player_1"
        assert r.record.moves == [("player_0", "\\boxed{[9]}")]  # the record play and the leaderboard keep


def test_truncation_is_a_draw():
    tok = CharTokenizer()

    def answer(prompt_ids):
        text = "".join(chr(i) for i in prompt_ids)
        return "[Deny]" if "Open offer to you" in text else "Let us talk."

    policy = Policy(EchoEngine(tok, answer), tok, "bare")
    specs, weights = parse_mixture("SimpleNegotiation-v0", "")
    results = play(
        policy, specs, weights, min_samples=4, games_in_flight=2, rng=np.random.default_rng(2), max_game_actions=4
    )
    assert all(r.record.truncated and r.shaped == (0.0, 0.0) and r.record.steps == 4 for r in results)
    assert all(r.record.outcome == {"winner": None, "reason": "truncation"} for r in results)


def test_fixed_opponent_trains_one_seat_alternating():
    from spiral_arena.agents import RandomAgent

    tok = CharTokenizer()

    def answer(prompt_ids):
        text = "".join(chr(i) for i in prompt_ids)
        return text.rsplit("Legal actions: ", 1)[1].split("\n")[0].split(",")[0].rstrip(".")

    policy = Policy(EchoEngine(tok, answer), tok, "bare")
    specs, weights = parse_mixture("KuhnPoker-v0:rounds=1", "")
    results = play(
        policy,
        specs,
        weights,
        min_samples=0,
        games_in_flight=4,
        rng=np.random.default_rng(3),
        opponent=RandomAgent(0),
        games=10,
        obs_format="last",
    )
    assert len(results) == 10
    assert sorted(r.policy_seats[0] for r in results) == [0] * 5 + [1] * 5
    for r in results:
        assert all(t.role == r.policy_seats[0] for t in r.turns)


def test_game_spec_and_mixture_parsing():
    spec = GameSpec.parse("KuhnPoker-v0:rounds=1;reward=chips")
    assert spec.env_id == "KuhnPoker-v0" and spec.options == {"rounds": 1, "reward": "chips"}
    specs, weights = parse_mixture("TicTacToe-v0,KuhnPoker-v0", "3,1")
    assert [s.env_id for s in specs] == ["TicTacToe-v0", "KuhnPoker-v0"] and list(weights) == [0.75, 0.25]
    with pytest.raises(ValueError, match="game_weights"):
        parse_mixture("TicTacToe-v0", "1,2")
    with pytest.raises(ValueError, match="key=value"):
        GameSpec.parse("KuhnPoker-v0:rounds")


def test_config_recipes_files_and_flags(tmp_path):
    import argparse

    assert TrainConfig.build({}).recipe == "tiny"
    spiral = TrainConfig.build({"model": "Qwen/Qwen3-4B-Base"})
    assert (spiral.recipe, spiral.lr, spiral.epochs, spiral.clip, spiral.rae_decay) == ("spiral", 1e-6, 2, 0.2, 0.95)
    (tmp_path / "c.toml").write_text('lr = 0.01\ngames = "TicTacToe-v0"\n')
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    config = from_arguments(parser.parse_args(["--config", str(tmp_path / "c.toml"), "--no-rae", "--steps", "7"]))
    assert (config.lr, config.games, config.rae, config.steps, config.recipe) == (
        0.01,
        "TicTacToe-v0",
        False,
        7,
        "tiny",
    )
    with pytest.raises(ValueError, match="unknown config field"):
        TrainConfig.build({"learning_rate": 1})
    with pytest.raises(ValueError, match="recipe"):
        TrainConfig.build({"recipe": "huge"})


def test_a_multi_round_run_says_its_exploitability_is_read_on_single_hands():
    from types import SimpleNamespace

    from trainers.summary import eval_line, final_summary

    scores = {"eval/kuhn_exploitability": 0.3, "eval/KuhnPoker-v0/random/win": 0.6}
    config = SimpleNamespace(recipe="tiny", steps=4, eval_temperature=0.6, eval_games=2)
    single = eval_line(4, scores, ["KuhnPoker-v0"]) + final_summary(scores, 4, 60.0, config, ["KuhnPoker-v0"])
    assert "round" not in single.replace("Round", "")
    five = {**scores, "eval/kuhn_trained_rounds": 5}
    assert "single-hand read-out; this run plays 5-round Kuhn" in eval_line(4, five, ["KuhnPoker-v0"])
    summary = final_summary(five, 4, 60.0, config, ["KuhnPoker-v0"])
    assert "read on single hands although this run plays 5-round Kuhn" in summary


def test_the_final_table_shows_the_invalid_rate_the_target_checks():
    """The invalid target pools a game's matches against every opponent; the table's column once showed the
    worse opponent's rate (1.2% beside a met 0.8% target), so the two disagreed on a passing run."""
    from types import SimpleNamespace

    from trainers.summary import eval_line, final_summary

    game = "TicTacToe-v0:board=lines"
    scores = {f"eval/{game}/random/invalid": 0.004, f"eval/{game}/expert/invalid": 0.012}
    scores |= {f"eval/{game}/{o}/win": 0.5 for o in ("random", "expert")}
    config = SimpleNamespace(recipe="tiny", steps=4, eval_temperature=0.6, eval_games=2)
    summary = final_summary(scores, 4, 60.0, config, [game])
    row = next(line for line in summary.splitlines() if line.strip().startswith(game))
    assert row.split()[-1] == "0.8%"
    assert "invalid answers <= 1% in every game: 0.8% met" in summary
    other = final_summary(scores, 4, 60.0, SimpleNamespace(**{**vars(config), "recipe": "smollm2-135m"}), [game])
    assert "README targets" not in other and "0.8%" in other  # its targets are not the tiny recipe's
    assert "(invalid 1%)" in eval_line(4, scores, [game])  # 0.8% rounded in the one-line form


def test_policy_tokenises_a_prompt_once_and_gives_the_tokenizers_ids(monkeypatch):
    import spiral_arena
    from spiral_arena.models import policy as policy_module
    from trainers.tiny import build_tokenizer, game_corpus

    tokenizer = build_tokenizer(game_corpus(["KuhnPoker-v0"], 5), vocab_size=300)
    tokenised: list[str] = []

    class Spy:  # the real tokenizer, counting the texts it is asked to tokenise
        def __getattr__(self, name):
            return getattr(tokenizer, name)

        def __call__(self, texts, **kwargs):
            tokenised.extend(texts)
            return tokenizer(texts, **kwargs)

    policy = Policy(EchoEngine(tokenizer, str), Spy())
    tokenised.clear()  # building the policy reads its stop tokens
    env = spiral_arena.make("KuhnPoker-v0", rounds=1)
    observations = []
    for seed in range(8):  # 8 deals of 6 possible: first observations repeat
        env.reset(seed=seed)
        observations.append(env.observe(env.agent_selection))
    expected = tokenizer([policy.prompt_text(o) for o in observations], add_special_tokens=False)["input_ids"]
    assert policy.prompt_ids_batch(observations) == expected
    assert len(tokenised) == len(set(observations)) < len(observations)
    got = policy.prompt_ids_batch(observations)
    assert got == expected and len(tokenised) == len(set(observations))  # nothing tokenised again
    got[0].append(-1)  # a caller's copy is its own
    assert policy.prompt_ids_batch(observations[:1]) == expected[:1]
    monkeypatch.setattr(policy_module, "PROMPT_CACHE_TOKENS", len(expected[0]) + 1)  # room for one prompt
    fresh = Policy(EchoEngine(tokenizer, str), tokenizer)
    for _ in range(2):
        assert fresh.prompt_ids_batch(observations) == expected
        assert fresh._known_tokens <= sum(len(ids) for ids in expected)
    assert len(fresh._known_prompts) == len(set(observations))  # one batch past the limit, then cleared
    assert fresh.prompt_ids_batch(observations[:1]) == expected[:1]
    mixed = Policy(EchoEngine(tokenizer, str), tokenizer)  # a batch of known and new prompts past the limit:
    assert mixed.prompt_ids_batch(observations[:1]) == expected[:1]  # the known one was cleared with the rest
    assert mixed.prompt_ids_batch(observations) == expected  # and read as a KeyError (a 20 Questions run)


# ---- resuming from damaged checkpoints (issue 27) ------------------------------------------------


def write_checkpoint(directory, step: int):
    """A checkpoint directory with every file ``checkpoint.save`` leaves (tiny stand-ins for the weights)."""
    import json

    from safetensors.torch import save_file

    from trainers import checkpoint

    path = directory / f"step_{step:06d}"
    path.mkdir(parents=True)
    save_file({"weight": torch.arange(64, dtype=torch.float32)}, str(path / "model.safetensors"))
    torch.save({"step": step}, path / checkpoint.STATE_FILE)
    (path / checkpoint.SETTINGS_FILE).write_text(json.dumps({"step": step}))
    return path


def test_a_damaged_checkpoint_is_named_and_the_previous_complete_one_is_resumed(tmp_path, capsys):
    """Before: a half-truncated model.safetensors was picked and failed as a raw SafetensorError traceback."""
    from trainers import checkpoint

    folder = tmp_path / "run" / "checkpoints"
    two, four = write_checkpoint(folder, 2), write_checkpoint(folder, 4)
    assert checkpoint.latest(folder) == four and capsys.readouterr().err == ""
    weights = four / "model.safetensors"
    size = weights.stat().st_size
    weights.write_bytes(weights.read_bytes()[: size // 2])
    assert checkpoint.problem(four) == f"{weights} is truncated ({size // 2} of {size} bytes)"
    assert checkpoint.latest(folder) == two
    assert capsys.readouterr().err == (
        f"spiral-arena train: warning: {weights} is truncated ({size // 2} of {size} bytes); resuming from "
        "step_000002, the previous complete checkpoint\n"
    )
    state = (four / checkpoint.STATE_FILE).read_bytes()
    (four / checkpoint.STATE_FILE).write_bytes(state[:100])
    assert checkpoint.problem(four) == f"{four / checkpoint.STATE_FILE} is truncated or not a torch checkpoint"
    (four / checkpoint.STATE_FILE).write_bytes(state)
    weights.write_bytes(b"\x05")
    assert checkpoint.problem(four) == f"{weights} has no readable safetensors header"


def test_resume_names_the_missing_file_when_no_checkpoint_is_complete(tmp_path, capsys):
    """Before: a deleted trainer_state.pt said "holds no checkpoint" while step_000002/ was there."""
    from spiral_arena.cli import main as cli_main
    from trainers import checkpoint

    run = tmp_path / "run"
    two = write_checkpoint(run / "checkpoints", 2)
    (two / checkpoint.STATE_FILE).unlink()
    assert cli_main(["train", f"--output-dir={run}", "--resume"]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"spiral-arena train: error: resume: {two / checkpoint.STATE_FILE} is missing, and no earlier checkpoint is "
        "complete; drop --resume to start a new run\n"
    )


def test_the_bar_counts_the_time_limit_from_the_runs_start_warm_start_included():
    """A run 100 s from its deadline has used 200 s of a 300 s limit, whatever its RL steps took (time_s)."""
    import time

    from trainers.metrics import progress_bar

    bar = progress_bar(TrainConfig.build({"time_limit_s": 300}), 0, enabled=True, deadline=time.monotonic() + 100)
    bar.update({"time_s": 12.0})
    assert bar.bar.postfix in ("time=200/300s", "time=199/300s")
    bar.close()
    assert "time" not in (progress_bar(TrainConfig.build({}), 0, enabled=True).bar.postfix or "")


def test_cpu_bf16_is_native_only_where_its_flags_name_bf16_instructions(tmp_path):
    from trainers.distributed import cpu_has_bf16

    for flags, native in (("fma avx avx2", False), ("avx2 avx512f avx512_bf16", True), ("avx2 amx_bf16", True)):
        (tmp_path / "cpuinfo").write_text(f"processor\t: 0\nflags\t\t: {flags}\n")
        assert cpu_has_bf16(str(tmp_path / "cpuinfo")) is native, flags
    assert cpu_has_bf16(str(tmp_path / "absent")) is None  # unreadable: unknown, so no warning and no auto bf16
    (tmp_path / "cpuinfo").write_text("processor\t: 0\n")
    assert cpu_has_bf16(str(tmp_path / "cpuinfo")) is None


def test_bf16_auto_is_resolved_when_the_config_is_built(tmp_path):
    """The default computes in bf16 only where this CPU has it; an explicit value stays; config files may say auto;
    a wrong word names the three that are valid."""
    from trainers.distributed import cpu_has_bf16
    from trainers.flags import read_config_file

    native = cpu_has_bf16() is True
    assert TrainConfig.build({"model": "some/model", "device": "cpu"}).bf16 is native
    assert TrainConfig.build({"model": "some/model", "device": "cpu", "bf16": "no"}).bf16 is False
    assert TrainConfig.build({"device": "cpu", "bf16": True}).bf16 is True
    assert TrainConfig.build({"device": "cpu"}).bf16 is False  # the tiny recipe's fp32
    (tmp_path / "run.toml").write_text('bf16 = "auto"\ndevice = "cpu"\n')
    assert TrainConfig.build(read_config_file(tmp_path / "run.toml")).bf16 is native
    with pytest.raises(ConfigError, match="bf16: must be true, false or auto"):
        TrainConfig.build({"bf16": "maybe"})

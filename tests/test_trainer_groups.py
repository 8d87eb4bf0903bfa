"""Single-player group training (StarPO, delta-belief) on Twenty Questions: grouping and seeding, the
per-turn bookkeeping the advantages read, and end-to-end CPU runs of both algorithms."""

from __future__ import annotations

import json

import numpy as np
import pytest

import spiral_arena

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from test_trainer_units import CharTokenizer, EchoEngine, play  # noqa: E402

from spiral_arena.models import Sampling  # noqa: E402
from spiral_arena.models.policy import Policy  # noqa: E402
from spiral_arena.rollout import parse_mixture  # noqa: E402
from trainers.belief import log_beliefs  # noqa: E402
from trainers.config import TrainConfig  # noqa: E402
from trainers.groups import group_advantages  # noqa: E402
from trainers.loop import train  # noqa: E402
from trainers.recipes import CLOSED_WORLD  # noqa: E402
from trainers.starpo import delta_belief_rewards, starpo_advantages, turnwise_advantages  # noqa: E402

SCRIPT = ["Is it alive?", "Is it alive?", "bad", "Is it a dog?"]  # fine, repeated, invalid, the secret


def scripted(prompt_ids: list[int]) -> str:
    """The next question of SCRIPT, by how many questions the observation already holds."""
    asked = "".join(chr(i) for i in prompt_ids).count("[GAME] Question ")
    return f"\\boxed{{{SCRIPT[min(asked, len(SCRIPT) - 1)]}}}"


def counting_engine():
    """Asks question n of a fixed list on its n-th call overall, so games of one group differ."""
    calls = iter(range(10**6))
    return EchoEngine(CharTokenizer(), lambda p: f"\\boxed{{Is it number {next(calls)}?}}")


def test_a_group_shares_its_seed_and_secret_and_nothing_else():
    policy = Policy(counting_engine(), CharTokenizer(), "bare")
    specs, weights = parse_mixture("TwentyQuestions-v0:max_questions=3", "")

    def groups(seed: int):
        return play(
            policy, specs, weights, min_samples=0, games=12, group_size=4, games_in_flight=12,
            rng=np.random.default_rng(seed), obs_format="full",
        )  # fmt: skip

    results = groups(0)
    assert len(results) == 12
    by_seed: dict[int, list] = {}
    for r in results:
        by_seed.setdefault(r.record.seed, []).append(r)
    assert sorted(len(g) for g in by_seed.values()) == [4, 4, 4]  # three groups of four
    for games in by_seed.values():
        assert len({g.secret for g in games}) == 1  # one secret per group
        questions = [tuple(t.response for t in g.turns) for g in games]
        assert len(set(questions)) == 4  # what was sampled differs
    assert len({games[0].secret for games in by_seed.values()}) == 3  # and the groups' secrets differ
    again = groups(0)
    assert [(r.record.seed, r.secret) for r in sorted(again, key=lambda r: r.record.seed)] == [
        (r.record.seed, r.secret) for r in sorted(results, key=lambda r: r.record.seed)
    ]  # seeded: the same groups again
    assert {r.record.seed for r in groups(1)}.isdisjoint(by_seed)


def test_turn_penalties_end_reward_and_final_observation():
    policy = Policy(EchoEngine(CharTokenizer(), scripted), CharTokenizer(), "bare")
    specs, weights = parse_mixture("TwentyQuestions-v0:secret=dog", "")
    [game] = play(policy, specs, weights, min_samples=0, games=1, games_in_flight=1, rng=np.random.default_rng(0))
    assert [t.response for t in game.turns] == [f"\\boxed{{{q}}}" for q in SCRIPT]
    assert game.penalties == [0.0, -1.0, -5.0, 0.0]
    assert game.won and game.secret == "dog"
    assert game.shaped[0] == pytest.approx(2.0 - 0.05 * 4 - 6.0)  # win, length, repeat, invalid
    assert game.shaped[0] - sum(game.penalties) == pytest.approx(1.8)  # the end reward delta-belief adds per turn
    assert "You found it" in game.final_observation and game.final_observation != game.turns[-1].prompt


def lost_game(policy, seed: int):
    specs, weights = parse_mixture("TwentyQuestions-v0:secret=dog;max_questions=3", "")
    return play(policy, specs, weights, min_samples=0, games=1, games_in_flight=1, rng=np.random.default_rng(seed))[0]


def test_starpo_gives_each_game_its_group_normalised_return_on_every_turn():
    won = play(
        Policy(EchoEngine(CharTokenizer(), scripted), CharTokenizer(), "bare"),
        *parse_mixture("TwentyQuestions-v0:secret=dog", ""),
        min_samples=0, games=1, games_in_flight=1, rng=np.random.default_rng(0),
    )[0]  # fmt: skip
    lost = [lost_game(Policy(counting_engine(), CharTokenizer(), "bare"), s) for s in (1, 2)]
    results = [won, *lost]
    config = TrainConfig.build({"algo": "starpo"})
    stats = group_advantages(results, ["g", "g", "g"], config, model=None, policy=None)
    assert stats == {"judge/dropped_games": 0.0}
    expected = starpo_advantages([-4.2, -0.15, -0.15], ["g"] * 3)
    for game, advantage in zip(results, expected, strict=True):
        assert [t.advantage for t in game.turns] == pytest.approx([advantage] * len(game.turns))
    assert expected[0] < 0 < expected[1]  # the penalties outweigh the win here


def test_a_wave_asks_the_judge_at_once_and_failed_games_leave_the_update():
    """collect() hands each wave's questions to the LLM judge together (real HTTP on 127.0.0.1); a
    game whose question failed keeps an "error" verdict and gets no advantage; the rest are compared
    among themselves only."""
    from test_twenty_questions_judge_batch import KnowingJudgeServer

    calls = iter(range(10**6))

    def ask(prompt_ids: list[int]) -> str:
        n = next(calls)
        return f"\\boxed{{Is it number {n}{' muddle' if n == 2 else ''}?}}"

    policy = Policy(EchoEngine(CharTokenizer(), ask), CharTokenizer(), "bare")
    with KnowingJudgeServer(delay=0.05) as server:
        spec = f"TwentyQuestions-v0:max_questions=2;oracle=openai:judge-model;oracle_base_url={server.base_url}"
        results = play(
            policy, *parse_mixture(spec, ""), min_samples=0, games=6, group_size=3, games_in_flight=6,
            rng=np.random.default_rng(0),
        )  # fmt: skip
        assert server.most_in_flight > 1 and len(server.questions) == 12
    [failed] = [r for r in results if "error" in r.verdicts]
    assert failed.verdicts == ["error", "no"] and all(r.verdicts == ["no", "no"] for r in results if r is not failed)
    config = TrainConfig.build({"algo": "starpo", "games": spec})
    for index, game in enumerate(results):
        game.shaped = (float(index**2),)  # every game its own return, so a group's normalisation shows who is in it
    keys = [r.record.seed for r in results]
    stats = group_advantages(results, keys, config, model=None, policy=None)
    assert stats == {"judge/dropped_games": 1.0}
    assert all(t.advantage == 0.0 for t in failed.turns)
    answered = [r for r in results if r is not failed]
    expected = starpo_advantages([g.shaped[0] for g in answered], [g.record.seed for g in answered])
    for game, advantage in zip(answered, expected, strict=True):
        assert [t.advantage for t in game.turns] == pytest.approx([advantage] * 2)
    # had the failed game stayed in its group, the others' advantages would differ
    with_failed = starpo_advantages([g.shaped[0] for g in results], keys)
    kept = [a for game, a in zip(results, with_failed, strict=True) if game is not failed]
    assert max(abs(a - b) for a, b in zip(expected, kept, strict=True)) > 0.1


@pytest.fixture(scope="module")
def tiny_policy(tmp_path_factory):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from spiral_arena.models.hf import HFEngine
    from trainers.tiny import create_tiny

    path = create_tiny(tmp_path_factory.mktemp("tiny") / "model", ["TwentyQuestions-v0"])
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path)
    stops = [tokenizer.eos_token_id]
    return model, Policy(HFEngine(model, stops, tokenizer.pad_token_id), tokenizer, "bare", stops)


def test_delta_belief_reads_belief_before_each_turn_and_after_the_last(tiny_policy):
    model, policy = tiny_policy
    scripted_policy = Policy(EchoEngine(CharTokenizer(), scripted), CharTokenizer(), "bare")
    won = play(
        scripted_policy, *parse_mixture("TwentyQuestions-v0:secret=dog", ""),
        min_samples=0, games=1, games_in_flight=1, rng=np.random.default_rng(0),
    )[0]  # fmt: skip
    lost = lost_game(Policy(counting_engine(), CharTokenizer(), "bare"), 1)
    config = TrainConfig.build({"algo": "delta-belief", "turn_norm": "active", "belief_coef": 0.5})
    stats = group_advantages([won, lost], ["g", "g"], config, model, policy)
    expected_rewards, gains = [], []
    for game in (won, lost):  # belief b_0 on the first prompt, b_t before turn t + 1, b_T after the last answer
        histories = [t.prompt for t in game.turns] + [game.final_observation]
        beliefs = log_beliefs(model, policy, histories, ["dog"] * len(histories), probe="named")  # the tiny recipe's
        gains += [later - earlier for earlier, later in zip(beliefs[:-1], beliefs[1:], strict=True)]
        end = game.shaped[0] - sum(game.penalties)
        expected_rewards.append(delta_belief_rewards(beliefs, game.penalties, end, game.won, lam=0.5))
    assert config.belief_probe == "named"
    expected = turnwise_advantages(expected_rewards, ["g", "g"], 4, mode="active")
    got = [[t.advantage for t in g.turns] for g in (won, lost)]
    assert [len(a) for a in got] == [4, 3]
    assert [a for game in got for a in game] == pytest.approx([a for game in expected for a in game])
    assert expected[0][3] == 0.0  # turn 4: only the won game was still running
    mean, positive_share = sum(gains) / len(gains), sum(g > 0 for g in gains) / len(gains)
    expected_stats = {"judge/dropped_games": 0, "belief/gain_mean": mean, "belief/positive_share": positive_share}
    assert stats == pytest.approx(expected_stats, rel=1e-5, abs=1e-6)


def three_games(secret: str) -> list:
    """Three games on ``secret`` with different returns and lengths: a win after a repeated and an
    invalid question (4 turns), a win at the first question, and a loss (4 questions)."""
    specs, weights = parse_mixture(f"TwentyQuestions-v0:secret={secret};max_questions=4", "")
    script = ["Is it alive?", "Is it alive?", "bad", f"Is it a {secret}?"]

    def scripted_win(prompt_ids: list[int]) -> str:
        asked = "".join(chr(i) for i in prompt_ids).count("[GAME] Question ")
        return f"\\boxed{{{script[min(asked, 3)]}}}"

    answers = [scripted_win, lambda p: f"\\boxed{{Is it a {secret}?}}", None]
    games = []
    for seed, answer in enumerate(answers):
        engine = counting_engine() if answer is None else EchoEngine(CharTokenizer(), answer)
        policy = Policy(engine, CharTokenizer(), "bare")
        rng = np.random.default_rng(seed)
        games += play(policy, specs, weights, min_samples=0, games=1, games_in_flight=1, rng=rng)
    assert [len(g.turns) for g in games] == [4, 1, 4] and [g.won for g in games] == [True, True, False]
    assert len({g.shaped[0] for g in games}) == 3
    return games


def test_delta_belief_advantages_and_statistics_in_groups_of_three(tiny_policy):
    """Two groups of three games (secrets dog and cat), each game's belief in its own secret read by the
    tiny model: every turn's advantage and the belief/* statistics equal the values computed here from
    those beliefs, lambda = belief_coef = 0.5 and the default per-turn normalisation (padded). The
    beliefs matter: without the bonus, with the default lambda, or with one secret for both groups, the
    advantages would differ, and the gains have both signs."""
    model, policy = tiny_policy
    results = three_games("dog") + three_games("cat")
    keys = ["dog"] * 3 + ["cat"] * 3
    config = TrainConfig.build({"algo": "delta-belief", "belief_coef": 0.5, "belief_probe": "quoted"})  # upstream's
    assert config.turn_norm == "padded"
    stats = group_advantages(results, keys, config, model, policy)

    def beliefs_for(secrets: list[str]) -> list[list[float]]:
        out = []
        for game, secret in zip(results, secrets, strict=True):
            histories = [t.prompt for t in game.turns] + [game.final_observation]
            out.append(log_beliefs(model, policy, histories, [secret] * len(histories)))
        return out

    def advantages(beliefs: list[list[float]], lam: float) -> list[float]:
        rewards = [
            delta_belief_rewards(b, g.penalties, g.shaped[0] - sum(g.penalties), g.won, lam)
            for g, b in zip(results, beliefs, strict=True)
        ]
        return [a for game in turnwise_advantages(rewards, keys, 4) for a in game]

    beliefs = beliefs_for(keys)
    expected = advantages(beliefs, 0.5)
    got = [t.advantage for g in results for t in g.turns]
    assert got == pytest.approx(expected, rel=1e-5, abs=1e-6)  # beliefs batched otherwise: float rounding
    gains = [later - earlier for game in beliefs for earlier, later in zip(game[:-1], game[1:], strict=True)]
    assert len(gains) == len(got) and min(gains) < 0 < max(gains)
    assert stats == pytest.approx(
        {
            "judge/dropped_games": 0.0,
            "belief/gain_mean": sum(gains) / len(gains),
            "belief/positive_share": sum(g > 0 for g in gains) / len(gains),
        },
        rel=1e-5,
        abs=1e-6,
    )
    # what a test with these games can tell apart: each of these would give other advantages
    for other in (advantages(beliefs, 0.0), advantages(beliefs, 0.1), advantages(beliefs_for(["dog"] * 6), 0.5)):
        assert max(abs(a - b) for a, b in zip(other, expected, strict=True)) > 1e-3


SMALL = {
    "steps": 2, "sft_steps": 2, "sft_batch": 8, "group_size": 4, "groups_per_step": 2, "obs_format": "last",
    "max_new_tokens": 8, "eval_every": 2, "eval_games": 4, "games_in_flight": 8, "time_limit_s": 0,
    "save_every": 2, "micro_batch": 16, "eval_samples_per_secret": 1,
}  # fmt: skip


@pytest.mark.parametrize("algo", ["starpo", "delta-belief"])
def test_end_to_end_run_of_each_algorithm(tmp_path, algo):
    out = tmp_path / algo
    longer_budget = {"eval_long_questions": 50} if algo == "delta-belief" else {}  # the costlier evaluation once
    # one evaluation (the last), not also the warm start's: the evaluation is most of this test's time
    settings = {**SMALL, **longer_budget, "algo": algo, "output_dir": str(out), "eval_at_start": False}
    train(TrainConfig.build(settings), progress=False)
    config = json.loads((out / "config.json").read_text())
    assert config["games"] == config["eval_env_ids"] == CLOSED_WORLD
    assert CLOSED_WORLD == "TwentyQuestions-v0:recap=true;world=32;max_questions=7;candidates=true;one_guess=true"
    assert config["clip_high"] == 0.28 and config["dual_clip"] == 3.0
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 1, 2]
    for row in rows[1:]:
        assert row["samples"] >= 8 and row["advantage_s"] >= 0
        assert f"train/{CLOSED_WORLD}/success" in row
        assert ("belief/gain_mean" in row) == (algo == "delta-belief")
    # evaluated on every secret of the world it trains in, never on two-player games
    assert f"eval/{CLOSED_WORLD}/pass_at_1" in rows[-1]
    assert 1 <= rows[-1][f"eval/{CLOSED_WORLD}/questions_mean"] <= 7
    longer = "eval/TwentyQuestions-v0:recap=true;world=32;candidates=true;one_guess=true;max_questions=50"
    if longer_budget:
        assert 0 <= rows[-1][f"{longer}/mean_at_1"] <= 1 and 7 < rows[-1][f"{longer}/questions_mean"] <= 50
    else:
        assert f"{longer}/mean_at_1" not in rows[-1]
    for rate in ("invalid_rate", "repeated_rate"):
        assert 0 <= rows[-1][f"eval/{CLOSED_WORLD}/{rate}"] <= 1
    assert not any("Snake" in k for k in rows[-1])
    transcripts = [json.loads(line) for line in (out / "transcripts.jsonl").read_text().splitlines()]
    assert {t["game"] for t in transcripts} == {CLOSED_WORLD}
    assert all("Questions left" in t["prompt"] and "You are the questioner" not in t["prompt"] for t in transcripts)
    assert (out / "checkpoints" / "step_000002" / "spiral_arena.json").exists()
    assert (out / "summary.png").read_bytes()[:4] == b"\x89PNG"


def test_group_algorithms_refuse_games_that_do_not_fit(tmp_path, capsys):
    from spiral_arena.cli import main
    from trainers.config import ConfigError

    with pytest.raises(ConfigError, match="starpo is for single-player games; KuhnPoker-v0 has two players"):
        TrainConfig.build({"algo": "starpo", "games": "KuhnPoker-v0"})
    with pytest.raises(ConfigError, match="groups_per_step: must be a multiple of rollout_shards"):
        TrainConfig.build({"algo": "starpo", "groups_per_step": 3, "rollout_shards": 2})
    with pytest.raises(ConfigError, match="group_size: must be at least 2"):
        TrainConfig.build({"algo": "delta-belief", "group_size": 1})
    never = tmp_path / "never"  # the command refuses before it creates the run directory
    assert main(["train", "--algo", "starpo", "--games", "KuhnPoker-v0", "--output-dir", str(never)]) == 2
    assert "starpo is for single-player games" in capsys.readouterr().err and not never.exists()


def test_held_out_evaluation_plays_every_secret_k_times(tmp_path):
    """Mean@k and Pass@k over every secret: a questioner that only ever asks about a dog finds the dog
    every time and nothing else, so both are 1/3 over three secrets."""
    from spiral_arena.registry import GameSpec
    from trainers.evaluate import covering_seeds, play_against

    words = tmp_path / "words.txt"
    words.write_text("dog\ncat\napple\n")
    spec = GameSpec.parse(f"TwentyQuestions-v0:words_file={words};max_questions=3")
    seeds = covering_seeds(spec, 100)
    assert covering_seeds(spec, 100) == seeds and len(set(seeds)) == 3  # seeded: the same seeds again
    env = spiral_arena.make(spec.label)
    drawn = []
    for seed in seeds:
        env.reset(seed=seed)
        drawn.append(env.state_.secret)
    assert drawn == ["dog", "cat", "apple"]  # one seed per secret, in word-list order
    policy = Policy(EchoEngine(CharTokenizer(), lambda p: "\\boxed{Is it a dog?}"), CharTokenizer(), "bare")
    generation = dict(sampling=Sampling(1.0, 1.0, 8), max_game_actions=20, obs_format="")
    metrics = play_against(policy, [spec], ["random"], 5, seed=100, secret_samples=4, **generation)
    key = f"eval/{spec.label}"
    assert metrics[f"{key}/mean_at_4"] == pytest.approx(1 / 3) and metrics[f"{key}/pass_at_4"] == pytest.approx(1 / 3)
    assert metrics[f"{key}/solo/win"] == metrics[f"{key}/mean_at_4"]
    assert metrics[f"{key}/mean_at_4_low"] <= 1 / 3 <= metrics[f"{key}/mean_at_4_high"]
    assert metrics[f"{key}/questions_mean"] == pytest.approx((1 + 3 + 3) / 3)  # the dog at once, else all 3


def test_the_4b_recipe_carries_the_upstream_settings(tmp_path, monkeypatch):
    from test_twenty_questions import WORDS_DIR, needs_shared_lists

    if needs_shared_lists.args[0]:
        pytest.skip(needs_shared_lists.kwargs["reason"])
    (tmp_path / "twenty_questions").mkdir()
    for name in ("coca_plus_train", "coca_plus_test"):  # the word lists, offline
        (tmp_path / "twenty_questions" / f"{name}.txt").write_bytes((WORDS_DIR / f"{name}.txt").read_bytes())
    monkeypatch.setenv("SPIRAL_ARENA_CACHE", str(tmp_path))
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # where the judge would be served
    monkeypatch.setattr("spiral_arena.models.vllm.install_problem", lambda: None)  # as if vLLM were installed
    c = TrainConfig.build({"recipe": "delta-belief-4b"})
    assert (c.algo, c.model, c.backend, c.thinking) == ("delta-belief", "Klingspor/Qwen3-4B-SFT", "vllm", False)
    assert c.prompt_template == "questioner"  # the questioner's own prompts, as it was trained
    assert (c.lora_rank, c.lora_alpha, c.lr, c.adam_beta1, c.adam_beta2) == (64, 64, 3e-5, 0.9, 0.95)
    assert (c.weight_decay, c.grad_clip, c.group_size, c.groups_per_step) == (0.01, 1.0, 16, 240)
    assert (c.temperature, c.max_new_tokens, c.max_game_actions) == (1.0, 50, 20)
    assert (c.loss, c.clip, c.clip_high, c.dual_clip, c.epochs, c.kl_coef) == ("ppo", 0.2, 0.28, 3.0, 1, 0.0)
    # verl's update as delta-belief-rl runs it: 3 mini-batches of 80 groups, zero advantages kept, no <|im_end|>
    assert (c.mini_batches, c.filter_zero_adv, c.train_stop_token) == (3, False, False)
    assert c.aggregation == "group_mean_token_mean" and (c.eval_samples_per_secret, c.eval_long_questions) == (8, 50)
    assert c.games == "TwentyQuestions-v0:oracle=openai:Qwen/Qwen3-14B;words=coca_plus_train"
    assert c.eval_env_ids.endswith("words=coca_plus_test")
    assert TrainConfig.build({"recipe": "delta-belief-4b", "algo": "starpo"}).aggregation == "game_mean_token_mean"


def test_thinking_off_reaches_the_chat_template(tiny_policy):
    """thinking=False renders a template that reads enable_thinking (as Qwen3's does) with an empty
    thinking block before the answer; the default leaves the template alone."""
    import copy

    tokenizer = copy.deepcopy(tiny_policy[1].tokenizer)
    tokenizer.chat_template = (
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
        "<|im_start|>assistant\n{% if enable_thinking is defined and not enable_thinking %}"
        "<think>\n\n</think>\n\n{% endif %}"
    )
    engine = tiny_policy[1].engine
    on, off = Policy(engine, tokenizer, "bare"), Policy(engine, tokenizer, "bare", thinking=False)
    assert on.prompt_text("Q?").endswith("Q?<|im_end|>\n<|im_start|>assistant\n")
    assert off.prompt_text("Q?").endswith("Q?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert TrainConfig.build({"thinking": "false"}).thinking is False


def test_the_tiny_tokenizer_spells_each_secret_noun_in_a_few_tokens(tiny_policy):
    """The tokenizer corpus carries the game's own vocabulary (Twenty Questions' nouns), so naming a
    noun is a token or two, not a string of letters the model must learn to spell."""
    from spiral_arena.games.twenty_questions_oracles import TableOracle

    tokenizer = tiny_policy[1].tokenizer
    frame = len(tokenizer("Is it a ?")["input_ids"])
    lengths = [len(tokenizer(f"Is it a {noun}?")["input_ids"]) - frame for noun in TableOracle().nouns]
    assert max(lengths) <= 3 and sum(lengths) / len(lengths) < 1.5


def test_the_warm_start_plays_about_one_game_per_ten_samples():
    from trainers.sft import sft_games

    sizes = [sft_games(TrainConfig.build({"sft_steps": steps, "sft_batch": 64})) for steps in (0, 2, 100, 400, 600)]
    assert sizes == [50, 50, 640, 2000, 2000]


def test_a_bare_twenty_questions_game_gets_the_recap_the_tiny_recipe_reads(caplog):
    """Issue 26: --games TwentyQuestions-v0 (no recap) with the tiny recipe used the full transcript, whose
    warm start alone took more than 20 minutes here. The recipe adds recap=true and says so; recap=false,
    asked for, keeps the whole transcript (one message would show only the last answer)."""
    with caplog.at_level("WARNING", logger="trainers.config"):
        games = "TwentyQuestions-v0:max_questions=5,TwentyQuestions-v0"
        bare = TrainConfig.build({"algo": "delta-belief", "games": games})
    assert bare.obs_format == "last"
    assert bare.games == "TwentyQuestions-v0:max_questions=5;recap=true,TwentyQuestions-v0:recap=true"
    assert "games gets recap=true: TwentyQuestions-v0:max_questions=5;recap=true" in caplog.text
    asked = TrainConfig.build({"algo": "starpo", "games": "TwentyQuestions-v0:recap=false"})
    assert asked.obs_format == "" and asked.games == "TwentyQuestions-v0:recap=false"
    recap = TrainConfig.build({"algo": "starpo", "games": "TwentyQuestions-v0:recap=true;max_questions=10"})
    assert recap.obs_format == "last" and recap.games == "TwentyQuestions-v0:recap=true;max_questions=10"
    chosen = TrainConfig.build({"algo": "starpo", "games": "TwentyQuestions-v0", "obs_format": "full"})
    assert chosen.obs_format == "full" and chosen.games == "TwentyQuestions-v0"  # what the user asks for stands
    assert TrainConfig.build({"algo": "starpo"}).obs_format == "last"  # the recipe's own games have recap


def test_the_time_limit_covers_the_warm_start(tmp_path, capsys):
    """Issue 26: --time-limit-s did not stop a long warm start. It now counts from the start of the run:
    SFT stops early, one RL step follows, and the run ends with its checkpoint; the evaluations the limit has
    passed are skipped, each said in one line (issue 41: the limit bounds the whole run)."""
    out = tmp_path / "run"
    settings = {**SMALL, "algo": "starpo", "output_dir": str(out), "eval_at_start": False, "plots": False}
    train(TrainConfig.build({**settings, "sft_steps": 100_000, "steps": 50, "time_limit_s": 3}), progress=False)
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert 1 <= rows[0]["sft/steps"] < 100_000
    assert [r["step"] for r in rows] == [0, 1] and rows[1]["stopped_by_time_limit"] == 1.0
    assert f"eval/{CLOSED_WORLD}/mean_at_1" not in rows[1] and rows[1]["eval_skipped_by_time_limit"] == 1.0
    assert (out / "checkpoints" / "step_000001").is_dir()
    err = capsys.readouterr().err
    assert "the warm start stopped at SFT step" in err and "STOPPED EARLY by time_limit_s=3 at step 1 of 50" in err
    assert "the evaluation of step 1 was skipped: time_limit_s=3 has passed" in err


def test_naming_records_name_a_noun_that_fits_with_the_opening_as_context():
    """Issue 26: the warm start's naming records carry the world's knowledge (a noun that fits every answer
    so far) apart from the agent's choice of when to name; they leave the agent's own games unchanged."""
    from spiral_arena.agents.experts.twenty_questions import candidates
    from spiral_arena.registry import GameSpec
    from trainers.sft import play_transcripts

    specs, weights = [GameSpec.parse(CLOSED_WORLD)], np.array([1.0])
    plain = list(play_transcripts("expert#guess_prob=0.3", specs, weights, 20, 3, "last"))
    mixed = list(play_transcripts("expert#guess_prob=0.3", specs, weights, 20, 3, "last", naming=0.5))
    naming = [r for r in mixed if "context" in r]
    assert [r for r in mixed if "context" not in r] == plain
    assert 0.3 < len(naming) / len(plain) < 0.7
    env = spiral_arena.make("TwentyQuestions-v0", world=32)
    for record in naming:
        fitting = record["prompt"].split("Still possible (")[1].split("): ")[1].split(".\n")[0].split(", ")
        assert record["context"] == "\\boxed{Is it"
        noun = record["response"].removeprefix(" a ").removeprefix(" an ").removesuffix("?}")
        assert noun in fitting and noun in env.game.world
    view = {"questions": [{"question": "Is it an animal?", "answer": "yes"}], "world": env.game.world}
    assert set(candidates(view)) < set(env.game.world)  # the answers narrow what a record may name


def test_a_context_is_read_and_not_trained(tiny_policy):
    """sft trains the response after a record's context, not the context: its tokens' log-probs move
    only through what the model shares, while the response's rise to near certainty."""
    import copy

    import torch

    from trainers.sft import sft

    model, policy = tiny_policy
    model = copy.deepcopy(model)
    prompt, context, response = "[GAME] Your turn.", "\\boxed{Is it", " a owl?}"
    tokenizer = policy.tokenizer

    def logprob(ids_before: list[int], text: str) -> float:
        target = tokenizer(text, add_special_tokens=False)["input_ids"]
        ids = torch.tensor([ids_before + target])
        with torch.no_grad():
            logits = model(ids).logits[0, len(ids_before) - 1 : -1].log_softmax(-1)
        return float(logits[torch.arange(len(target)), torch.tensor(target)].sum())

    opening = policy.prompt_ids(prompt)
    with_context = opening + tokenizer(context, add_special_tokens=False)["input_ids"]
    before = logprob(opening, context), logprob(with_context, response)
    records = [{"prompt": prompt, "context": context, "response": response}]
    sft(model, policy, records, steps=30, batch=1, lr=1e-2, seed=0)
    after = logprob(opening, context), logprob(with_context, response)
    assert after[1] > -0.5 > before[1]  # the response is learned
    assert after[0] < -5  # the context was never a target: still unlikely on its own

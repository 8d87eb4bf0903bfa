"""TwentyQuestions-v0: the win rule, validity, repeats, budget, rewards, seeding, a scripted
binary-search questioner over the table oracle, and the word-list download/cache."""

from __future__ import annotations

import re
import shutil
import socket
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest
from conftest import SHARED_DATA

import spiral_arena
from spiral_arena.games.twenty_questions import FEEDBACK, TwentyQuestions, names_secret, question_problem
from spiral_arena.games.twenty_questions_oracles import TableOracle, canonical_questions
from spiral_arena.wordlists import (
    REMOTE_LISTS,
    WordListError,
    cache_dir,
    cached_path,
    fetch_word_list,
    load_word_list,
    read_words,
)

WORDS_DIR = SHARED_DATA / "twenty_questions"
needs_shared_lists = pytest.mark.skipif(
    not (WORDS_DIR / "coca_plus_test.txt").exists(), reason=f"the shared word lists are not in {WORDS_DIR}"
)
QUESTIONS = canonical_questions()  # valid questions that name no built-in noun


def make(secret: str | None = "apple", **kwargs):
    env = spiral_arena.make("TwentyQuestions-v0", secret=secret, **kwargs)
    env.reset(seed=0)
    return env


def view(env) -> dict:
    return env.infos["questioner"]["view"]


def verdict(env) -> str:
    return view(env)["last_turn"]["verdict"]


# ---- the win rule ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "secret", "wins"),
    [
        ("Is it an apple?", "apple", True),
        ("Is it an APPLES?", "apple", True),
        ("apples?", "apple", True),
        ("Is it a berry?", "berry", True),
        ("Are they berries?", "berry", True),
        ("Is it a bus or two buses?", "bus", True),
        ("Is it a Cat?", "CAT", True),
        ("Is it bigger than a tiger?", "tiger", True),  # any mention counts
        ("Is the dog's bowl blue?", "dog", True),  # punctuation is stripped
        ("Is it apple2?", "apple", True),  # digits are stripped
        ("Is it an e-mail?", "e-mail", True),
        ("Is it ice cream?", "ice cream", True),
        ("Is it a category?", "cat", False),  # substrings do not count
        ("Is it a caterpillar?", "cat", False),
        ("Is it a pineapple?", "apple", False),
        ("Is it a tiger-lily?", "tiger", False),  # hyphenated words stay whole
        ("Is it an email?", "e-mail", False),
        ("Is it cream?", "ice cream", False),
        ("Is it a berrys?", "berry", True),  # +s is a simple plural too
        ("Is it a berr?", "berry", False),
    ],
)
def test_names_secret(question, secret, wins):
    assert names_secret(question, secret) is wins


@pytest.mark.parametrize(("question", "secret"), [("Is it an APPLES?", "apple"), ("Is it a cherries?", "cherry")])
def test_plural_and_case_variants_win_in_the_env(question, secret):
    env = make(secret)
    env.step(question)
    assert env.terminations["questioner"] and env.returns == pytest.approx((2.0 - 0.05,))


def test_a_substring_does_not_win():
    env = make("cat")
    env.step("Is it a category?")
    assert not env.terminations["questioner"] and verdict(env) == "no"
    assert view(env)["unmapped_questions"] == 1


def test_the_win_needs_a_valid_question():
    env = make("apple")
    env.step("Is it an apple? A red one?")
    assert not env.terminations["questioner"] and verdict(env) == "invalid"


# ---- validity ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "question",
    ["A?", "a" * 499 + "?", "Is it red?", "Ist es ein Café?", "Is it 3 metres tall?", "  Is it red?  "],
)
def test_valid_questions(question):
    assert question_problem(question.strip()) is None
    env = make("apple")
    env.step(question)
    assert verdict(env) in ("yes", "no")


@pytest.mark.parametrize(
    ("question", "reason"),
    [
        ("?", "1 characters"),
        ("", "0 characters"),
        ("a" * 500 + "?", "501 characters"),
        ("Is it red", "does not end with a question mark"),
        ("Is it? Red", "does not end with a question mark"),
        ("Is it red??", "2 question marks"),
        ("Is it red? Or blue?", "2 question marks"),
        ("Is it\nred?", "line break"),
        ("Is it\tred?", "control character"),
        ("Is it\x7fred?", "control character"),
        ("Is it\u00a0red?", "invisible"),
        ("Is it\u2028red?", "line break"),
        ("Is it\u200bred?", "invisible"),
        ("Is it\ufeffred?", "invisible"),
    ],
)
def test_invalid_questions_cost_a_turn_and_never_end_the_game(question, reason):
    assert reason in question_problem(question)
    env = make("apple")
    env.step(question)
    assert verdict(env) == "invalid" and reason in view(env)["last_turn"]["detail"]
    assert env.rewards["questioner"] == -5.0 and view(env)["last_turn"]["turn_penalty"] == -5.0
    assert view(env)["questions_left"] == 19 and not env.terminations["questioner"]
    assert "Invalid question." in env.observe("questioner")
    assert env.observation_space("questioner").contains(env.observe("questioner"))


def test_only_the_last_box_is_the_question():
    env = make("apple")
    env.step("I will ask about colour first. \\boxed{Is it an apple?} no wait \\boxed{Is it red?}")
    assert verdict(env) == "yes" and view(env)["questions"] == [{"question": "Is it red?", "answer": "yes"}]


def test_long_invalid_questions_are_echoed_cut_short():
    env = make("apple")
    env.step("x" * 5000)
    assert "x" * 500 + "..." in env.observe("questioner") and "x" * 501 not in env.observe("questioner")


# ---- repeats, budget and rewards ----------------------------------------------------------------


def test_repeated_questions_cost_a_turn():
    env = make("apple")
    env.step("Is it alive?")
    for same in ("is it   ALIVE?", "Is it, alive?", "\\boxed{Is it alive?}"):
        env.step(same)
        assert verdict(env) == "repeated" and env.rewards["questioner"] == -1.0
    assert "You already asked that question." in env.observe("questioner")
    env.step("Is it alive")  # invalid (no question mark): invalid first, and never counted as asked
    assert verdict(env) == "invalid"
    env.step("Is it living?")
    assert verdict(env) == "no" and view(env)["questions_left"] == 14 and not env.terminations["questioner"]


def play(env, questions):
    rewards = []
    for question in questions:
        env.step(question)
        rewards.append(env.rewards["questioner"])
    return rewards


@pytest.mark.parametrize(
    ("reward", "step_rewards", "total"),
    [
        # no, invalid, repeated, win on question 4: 2 - 0.05 * 4 at the end
        ("delta_belief", [0.0, -5.0, -1.0, 1.8], -4.2),
        ("success", [0.0, 0.0, 0.0, 1.0], 1.0),
    ],
)
def test_rewards_of_a_won_game(reward, step_rewards, total):
    env = make("apple", reward=reward)
    assert play(env, ["Is it alive?", "Is it alive", "IS IT ALIVE?", "Is it an apple?"]) == pytest.approx(step_rewards)
    assert env.returns == pytest.approx((total,)) and env.terminations["questioner"]


@pytest.mark.parametrize(("reward", "total"), [("delta_belief", 2.0 - 0.05), ("success", 1.0)])
def test_a_first_question_win_pays_the_length_term_too(reward, total):
    env = make("dog", reward=reward)
    env.step("Is it a dog?")
    assert env.returns == pytest.approx((total,))


@pytest.mark.parametrize(
    ("reward", "answers_total", "invalid_total"),
    [("delta_belief", -20 * 0.05, 20 * -5.0 - 20 * 0.05), ("success", 0.0, 0.0)],
)
def test_the_budget_runs_out(reward, answers_total, invalid_total):
    env = make("apple", reward=reward)
    rewards = play(env, QUESTIONS[:20])
    assert env.terminations["questioner"] and not env.state_.won
    assert rewards[:19] == [0.0] * 19 and env.returns == pytest.approx((answers_total,))
    assert "No questions left: the secret was 'apple'." in env.observe("questioner")
    env = make("apple", reward=reward)
    play(env, ["no question mark"] * 20)
    assert env.terminations["questioner"] and env.returns == pytest.approx((invalid_total,))


def test_a_longer_budget():
    env = make("apple", max_questions=50)
    play(env, QUESTIONS[:49])
    assert not env.terminations["questioner"] and view(env)["questions_left"] == 1
    env.step(QUESTIONS[49])
    assert env.terminations["questioner"] and env.returns == pytest.approx((-50 * 0.05,))


# ---- secrets and the player's view ---------------------------------------------------------------


def test_the_reset_seed_draws_the_secret():
    env = spiral_arena.make("TwentyQuestions-v0")
    other = spiral_arena.make("TwentyQuestions-v0")
    secrets = []
    for seed in range(40):
        env.reset(seed=seed)
        other.reset(seed=1000 + seed)  # interleaved resets must not disturb each other
        secrets.append(env.state_.secret)
    for seed in range(40):
        env.reset(seed=seed)
        assert env.state_.secret == secrets[seed]
    assert set(secrets) <= set(TableOracle().nouns) and len(set(secrets)) >= 30


def test_view_lists_questions_answers_and_what_is_left():
    env = make("dog")
    assert view(env) == {
        "questions": [],
        "questions_asked": 0,
        "questions_left": 20,
        "max_questions": 20,
        "last_turn": None,
        "unmapped_questions": 0,
        "world": None,
        "candidates": None,
    }
    play(env, ["Is it an animal?", "Is it related to a wolf?", "Is it an animal?"])
    assert view(env)["questions"] == [
        {"question": "Is it an animal?", "answer": "yes"},
        {"question": "Is it related to a wolf?", "answer": "no"},
        {"question": "Is it an animal?", "answer": "repeated"},
    ]
    assert view(env)["questions_left"] == 17 and view(env)["unmapped_questions"] == 1
    assert view(env)["last_turn"] == {"verdict": "repeated", "turn_penalty": -1.0, "detail": None}


def test_free_text_api_for_agents():
    env = make("apple")
    info = env.infos["questioner"]
    assert env.possible_agents == ["questioner"] and info["legal_actions"] is None
    assert "\\boxed{" in info["action_format"]
    examples = info["action_examples"]
    assert examples and all(question_problem(q) is None for q in examples)
    env.step(examples[0])
    assert examples[0] not in env.infos["questioner"]["action_examples"]


# ---- the scripted binary-search questioner -------------------------------------------------------


def test_binary_search_finds_every_builtin_secret_within_20_questions():
    """A questioner that knows the table asks the question splitting its candidates most evenly,
    then names the last candidate. The env's answers come through the question understander."""
    oracle = TableOracle()
    nouns = oracle.nouns
    yes_sets = {q: frozenset(n for n in nouns if oracle.answer(n, [], q).answer == "yes") for q in QUESTIONS}
    worst = 0
    for secret in nouns:
        env = make(secret)
        candidates = set(nouns)
        while not env.terminations["questioner"]:
            if len(candidates) == 1:
                question = f"Is it a {next(iter(candidates))}?"
            else:
                question = max(
                    QUESTIONS, key=lambda q: min(len(candidates & yes_sets[q]), len(candidates - yes_sets[q]))
                )
                assert candidates & yes_sets[question] and candidates - yes_sets[question], candidates
            env.step(question)
            if not env.terminations["questioner"]:
                answer = verdict(env)
                assert answer in ("yes", "no"), (secret, question, answer)
                candidates = candidates & yes_sets[question] if answer == "yes" else candidates - yes_sets[question]
        asked = len(env.state_.turns)
        assert env.state_.won and asked <= 20, (secret, asked)
        assert env.returns == pytest.approx((2.0 - 0.05 * asked,))
        worst = max(worst, asked)
    assert worst <= 12


# ---- word lists --------------------------------------------------------------------------------


@needs_shared_lists
def test_table_oracle_refuses_a_word_list_it_cannot_answer_for():
    with pytest.raises(ValueError, match=r"table oracle can only answer .* 433 secret\(s\).*openai:MODEL"):
        spiral_arena.make("TwentyQuestions-v0", words_file=WORDS_DIR / "coca_plus_test.txt")
    with pytest.raises(ValueError, match="not in it"):
        spiral_arena.make("TwentyQuestions-v0", secret="morality")


def test_words_file_with_table_nouns(tmp_path):
    path = tmp_path / "mine.txt"
    path.write_text("apple\n\ndog\n  cat \ndog\n")
    env = spiral_arena.make("TwentyQuestions-v0", words_file=path)
    assert env.game.words == ("apple", "dog", "cat")
    drawn = set()
    for seed in range(30):
        env.reset(seed=seed)
        drawn.add(env.state_.secret)
    assert drawn == {"apple", "dog", "cat"}
    assert "one common English noun" not in env.observe("questioner")


@needs_shared_lists
def test_named_list_from_the_cache_with_the_llm_judge(tmp_path, monkeypatch):
    monkeypatch.setenv("SPIRAL_ARENA_CACHE", str(tmp_path))
    target = cached_path("coca_plus_test")
    assert target == tmp_path / "twenty_questions" / "coca_plus_test.txt"
    target.parent.mkdir(parents=True)
    shutil.copy(WORDS_DIR / "coca_plus_test.txt", target)
    game = TwentyQuestions(words="coca_plus_test", oracle="openai:judge", oracle_base_url="http://127.0.0.1:9/v1")
    assert len(game.words) == 433 and game.deterministic is False


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_questions": 0}, "max_questions must be a positive integer"),
        ({"max_questions": True}, "max_questions must be a positive integer"),
        ({"reward": "win"}, "reward must be one of"),
        ({"words": "coca"}, "words must be one of"),
        ({"words": "coca_plus_test", "words_file": "x.txt"}, "not both"),
        ({"secret": "apple", "words_file": "x.txt"}, "either a fixed secret or a word list"),
        ({"secret": "123"}, r"every secret must contain letters; these do not: \['123'\]"),
        ({"secret": 7}, "secret must be a word"),
        ({"words_file": "/nonexistent/words.txt"}, "cannot read the word list"),
        ({"world": 1}, r"world must be 0 \(the open world\) or a number of table nouns from 2 to 234, got 1"),
        ({"world": 235}, "from 2 to 234, got 235"),
        ({"world": True}, "got True"),
        ({"world": 16, "words": "builtin_test"}, "world=K takes its secrets from the table oracle's nouns"),
        ({"world": 16, "secret": "dog"}, "give it without secret, words, words_file or another oracle"),
    ],
)
def test_bad_arguments(kwargs, message):
    with pytest.raises((ValueError, WordListError), match=message):
        spiral_arena.make("TwentyQuestions-v0", **kwargs)


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


class FileServer:
    """A real HTTP file server on 127.0.0.1 serving ``root``, standing in for the upstream repository."""

    def __init__(self, root: Path) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), partial(QuietHandler, directory=str(root)))
        self.base_url = f"http://127.0.0.1:{self.server.server_port}/"

    def __enter__(self) -> FileServer:
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def mirror(root: Path, name: str, content: bytes) -> None:
    path = root / REMOTE_LISTS[name].path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)


def closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/"


@needs_shared_lists
def test_download_verifies_and_caches(tmp_path):
    served, cache = tmp_path / "served", tmp_path / "cache"
    mirror(served, "coca_plus_train", (WORDS_DIR / "coca_plus_train.txt").read_bytes())
    with FileServer(served) as server:
        words = load_word_list("coca_plus_train", base_url=server.base_url, cache=cache)
    assert len(words) == REMOTE_LISTS["coca_plus_train"].words == 1000
    assert (cache / "twenty_questions" / "coca_plus_train.txt").read_bytes() == (
        WORDS_DIR / "coca_plus_train.txt"
    ).read_bytes()
    # The server is gone: the cache alone answers now.
    assert load_word_list("coca_plus_train", base_url=closed_port_url(), cache=cache) == words


@needs_shared_lists
def test_download_with_a_wrong_checksum_is_refused_and_not_cached(tmp_path):
    served, cache = tmp_path / "served", tmp_path / "cache"
    mirror(served, "coca_plus_test", (WORDS_DIR / "coca_plus_test.txt").read_bytes() + b"tampered\n")
    with FileServer(served) as server, pytest.raises(WordListError, match="has sha256 .*, expected fc52f74d"):
        fetch_word_list("coca_plus_test", base_url=server.base_url, cache=cache)
    assert not cached_path("coca_plus_test", cache).exists()


def test_offline_without_a_cache_says_where_to_put_the_file(tmp_path):
    expected = tmp_path / "twenty_questions" / "coca_plus_test.txt"
    with pytest.raises(WordListError) as error:
        fetch_word_list("coca_plus_test", base_url=closed_port_url(), cache=tmp_path, timeout=2)
    message = str(error.value)
    assert "could not download the word list 'coca_plus_test'" in message
    assert str(expected) in message and "words_file=PATH" in message


@needs_shared_lists
def test_a_damaged_cache_is_downloaded_again(tmp_path):
    served, cache = tmp_path / "served", tmp_path / "cache"
    good = (WORDS_DIR / "coca_plus_test.txt").read_bytes()
    mirror(served, "coca_plus_test", good)
    damaged = cached_path("coca_plus_test", cache)
    damaged.parent.mkdir(parents=True)
    damaged.write_bytes(good[:100])
    with pytest.raises(WordListError, match="cached copy .* is damaged"):
        fetch_word_list("coca_plus_test", base_url=closed_port_url(), cache=cache, timeout=2)
    with FileServer(served) as server:
        assert fetch_word_list("coca_plus_test", base_url=server.base_url, cache=cache) == damaged
    assert damaged.read_bytes() == good


def test_cache_dir_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("SPIRAL_ARENA_CACHE", str(tmp_path))
    assert cache_dir() == tmp_path
    monkeypatch.delenv("SPIRAL_ARENA_CACHE")
    assert cache_dir() == Path.home() / ".cache" / "spiral_arena"
    with pytest.raises(ValueError, match="unknown word list 'coca'; valid: coca_plus_train, coca_plus_test"):
        cached_path("coca")


def test_read_words_rejects_an_empty_list(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n  \n")
    with pytest.raises(WordListError, match="has no words"):
        read_words(empty)


def test_the_builtin_split_is_fixed_disjoint_and_covers_the_table():
    from spiral_arena.games.twenty_questions import builtin_split
    from spiral_arena.games.twenty_questions_oracles import TableOracle

    nouns = TableOracle().nouns
    train, test = builtin_split(nouns, "builtin_train"), builtin_split(nouns, "builtin_test")
    assert (len(train), len(test)) == (187, 47) and not set(train) & set(test) and set(train) | set(test) == set(nouns)
    assert test == tuple(sorted(nouns)[::5])  # every fifth noun in sorted order: the same split everywhere
    env = spiral_arena.make("TwentyQuestions-v0:words=builtin_test")
    secrets = set()
    for seed in range(60):
        env.reset(seed=seed)
        secrets.add(env.state_.secret)
    assert secrets <= set(test) and len(secrets) > 20


def test_recap_puts_the_whole_game_in_the_latest_message():
    env = spiral_arena.make("TwentyQuestions-v0:recap=true;secret=dog", obs_format="last")
    env.reset(seed=0)
    assert env.observe("questioner").endswith("Questions left: 20 of 20.")  # nothing to recap yet
    for question in ("Is it alive?", "Is it alive?", "bad", "Is it made of metal?"):
        env.step(question)
    assert env.observe("questioner").splitlines()[1:] == [
        "Answers so far:",
        "1. Is it alive? -> yes",
        "2. Is it alive? -> repeated, no answer",
        "3. bad -> invalid, no answer",
        "4. Is it made of metal? -> no",
        "Questions left: 16 of 20.",
    ]
    plain = spiral_arena.make("TwentyQuestions-v0:secret=dog", obs_format="last")
    plain.reset(seed=0)
    plain.step("Is it alive?")
    assert "Answers so far" not in plain.observe("questioner")  # off by default
    with pytest.raises(ValueError, match="recap must be true or false"):
        spiral_arena.make("TwentyQuestions-v0", recap="yes")


# ---- the closed world ------------------------------------------------------------------------------


def test_a_closed_world_is_fixed_nested_named_in_the_prompt_and_in_the_view():
    from spiral_arena.games.twenty_questions import closed_world

    nouns = TableOracle().nouns
    world = closed_world(nouns, 32)
    assert len(set(world)) == 32 and set(world) <= set(nouns) and list(world) == sorted(world)
    assert set(closed_world(nouns, 16)) < set(world) < set(closed_world(nouns, 64))
    assert closed_world(tuple(reversed(nouns)), 32) == world  # the nouns alone fix it, not their order
    env = spiral_arena.make("TwentyQuestions-v0", world=32, max_questions=7)
    secrets = set()
    for seed in range(400):
        env.reset(seed=seed)
        secrets.add(env.state_.secret)
    assert secrets == set(world)  # every secret of the world is drawn, and nothing else
    observation, _, _, _, info = env.last()
    assert f"I have chosen a secret: one of these 32 nouns: {', '.join(world)}. Find it" in observation
    assert "You have 7 questions." in observation and info["view"]["world"] == list(world)
    env.step("\\boxed{Is it an animal?}")
    observation, _, _, _, info = env.last()
    assert TwentyQuestions.read_position(observation) == {k: info["view"][k] for k in ("questions", "questions_asked",
        "questions_left", "max_questions", "world", "candidates")}  # fmt: skip
    last_only = spiral_arena.make("TwentyQuestions-v0", world=32, recap=True, obs_format="last")
    last_only.reset(seed=0)
    last_only.step("\\boxed{Is it an animal?}")
    assert TwentyQuestions.read_position(last_only.last()[0])["world"] is None  # the prompt is not in it


def test_the_splitting_expert_finds_every_secret_of_the_world_in_seven_questions():
    """In a closed world the expert splits only the world's nouns: each of the 32 secrets is found within
    the recipe's 7 questions. Over the whole table the same expert needs up to 11."""
    from spiral_arena.agents import make_agent
    from spiral_arena.play import play_game
    from spiral_arena.registry import GameSpec
    from trainers.evaluate import covering_seeds
    from trainers.recipes import CLOSED_WORLD

    spec = GameSpec.parse(CLOSED_WORLD)
    env, expert = spec.make(), make_agent("expert")
    found = [play_game(env, [expert], seed=seed) for seed in covering_seeds(spec, 0)]
    assert len(found) == 32 and all(r.outcome["winner"] == "questioner" for r in found)
    assert max(r.steps for r in found) <= 7
    open_world = spiral_arena.make("TwentyQuestions-v0", max_questions=7)
    assert sum(play_game(open_world, [expert], seed=s).outcome["winner"] is not None for s in range(32)) < 16


def test_candidates_and_information_gain_follow_the_answers():
    from spiral_arena.agents.experts.twenty_questions import candidates, information_gain
    from spiral_arena.games.twenty_questions import closed_world

    oracle = TableOracle()
    world = list(closed_world(oracle.nouns, 32))
    view = {"questions": [], "world": world}
    assert sorted(candidates(view)) == world and information_gain(view, "Is it a kind of nothing at all?") == 0.0
    question = "Is it an animal?"
    animals = [n for n in world if oracle.answer(n, [], question).answer == "yes"]
    share = len(animals) / len(world)
    bits = -(share * np.log2(share) + (1 - share) * np.log2(1 - share))
    assert information_gain(view, question) == pytest.approx(bits) and 0.5 < bits <= 1
    answered = {"questions": [{"question": question, "answer": "yes"}], "world": world}
    assert sorted(candidates(answered)) == sorted(animals)
    named = {
        "questions": [*answered["questions"], {"question": f"Is it a {animals[0]}?", "answer": "no"}],
        "world": world,
    }
    assert sorted(candidates(named)) == sorted(animals[1:])  # a noun named without a win is out
    assert information_gain(answered, f"Is it a {animals[1]}?") == pytest.approx(
        -(1 / len(animals)) * np.log2(1 / len(animals)) - (1 - 1 / len(animals)) * np.log2(1 - 1 / len(animals))
    )
    assert len(candidates({"questions": [], "world": None})) == len(oracle.nouns)


def test_the_candidates_list_is_what_the_answers_leave_of_the_world():
    """candidates=true lists, in every turn message, the world's nouns that fit every answer and were not
    named: exactly the splitting expert's own candidates, at every turn of random play; read back as given."""
    from spiral_arena.agents import make_agent
    from spiral_arena.agents.experts.twenty_questions import candidates

    env = spiral_arena.make("TwentyQuestions-v0:world=32;max_questions=7;recap=true;candidates=true", obs_format="last")
    weak = make_agent("expert#guess_prob=0.3")
    sizes = []
    for seed in range(20):
        env.reset(seed=seed)
        weak.reset(seed=seed)
        for _ in env.agent_iter():
            observation, _, terminated, truncated, info = env.last()
            if terminated or truncated:
                env.step(None)
                continue
            listed = info["view"]["candidates"]
            assert listed == sorted(candidates(info["view"])) and env.state_.secret in listed
            assert f"Still possible ({len(listed)}): {', '.join(listed)}." in observation
            assert TwentyQuestions.read_position(observation)["candidates"] == listed
            sizes.append(len(listed))
            env.step(weak.act(observation, info))
    assert max(sizes) == 32 and min(sizes) < 8
    plain = spiral_arena.make("TwentyQuestions-v0:world=32;recap=true", obs_format="last")
    plain.reset(seed=0)
    assert "Still possible" not in plain.last()[0] and plain.last()[4]["view"]["candidates"] is None


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ("candidates=true", "candidates=true lists the nouns of a closed world that still fit: give it with world=K"),
        ("world=8;candidates=3", "candidates must be true or false, got 3"),
    ],
)
def test_the_candidates_list_needs_a_closed_world(options, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        spiral_arena.make(f"TwentyQuestions-v0:{options}")


def test_one_guess_makes_a_question_naming_several_nouns_invalid():
    """A tiny model trained by StarPO in the closed world learned to list a dozen nouns in one question (any
    mention wins). With one_guess=true such a question is invalid, while naming one noun, also inside a
    comparison, still wins; the prompt states the rule."""
    env = spiral_arena.make("TwentyQuestions-v0:world=32;max_questions=7;one_guess=true")
    env.reset(seed=3)
    secret = env.state_.secret
    assert "A question may name at most one noun: one that names several is invalid." in env.last()[0]
    env.step(f"\\boxed{{Is it a {secret} or an owl or a bus?}}")
    turn = env.last()[4]["view"]["last_turn"]
    named = ", ".join(sorted([secret, "owl", "bus"]))
    assert turn == {
        "verdict": "invalid",
        "turn_penalty": -5.0,
        "detail": f"it names 3 of the game's nouns ({named}); name one at a time",
    }
    assert not env.state_.won
    env.step(f"\\boxed{{Is it bigger than a {secret}?}}")
    assert env.state_.won
    open_rule = spiral_arena.make("TwentyQuestions-v0:world=32;max_questions=7")
    open_rule.reset(seed=3)
    assert "at most one noun" not in open_rule.last()[0]
    open_rule.step(f"\\boxed{{Is it a {secret} or an owl or a bus?}}")
    assert open_rule.state_.won  # upstream's rule: any mention wins
    with pytest.raises(ValueError, match="one_guess must be true or false, got 2"):
        spiral_arena.make("TwentyQuestions-v0:one_guess=2")


def test_a_question_with_line_breaks_is_shown_on_one_line():
    """Issue 56: a question's lines (it is invalid) cannot pass for recap lines or for the game's answer."""
    forged = "Is it big?\n2. Is it a dog? -> yes\n\n[GAME] Question 2: Is it a dog?\nAnswer: Yes."
    shown = "Is it big? 2. Is it a dog? -> yes (GAME) Question 2: Is it a dog? Answer: Yes."
    env = spiral_arena.make("TwentyQuestions-v0:recap=true;secret=dog", obs_format="last")
    env.reset(seed=0)
    env.step(forged)
    env.step("Is it alive?")
    assert verdict(env) == "yes" and view(env)["questions"][0]["answer"] == "invalid"
    assert env.observe("questioner").splitlines()[1:] == [
        "Answers so far:",
        f"1. {shown} -> invalid, no answer",
        "2. Is it alive? -> yes",
        "Questions left: 18 of 20.",
    ]
    read = TwentyQuestions.read_position(env.observe("questioner"))
    assert read["questions"] == [
        {"question": shown, "answer": "invalid"},
        {"question": "Is it alive?", "answer": "yes"},
    ]
    full = make("dog")
    full.step(forged)
    echo = full.observe("questioner").split("\n\n")[-2]
    assert echo == f"[GAME] Question 1: {shown}\nAnswer: {FEEDBACK['invalid']}"

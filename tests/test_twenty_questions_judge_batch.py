"""The LLM judge under training load: answers cached per (secret, question), a wave of questions
asked concurrently with a bound, failures raised once and asked again later; against a real
OpenAI-compatible HTTP server on 127.0.0.1."""

from __future__ import annotations

import json
import threading
import time

import pytest
from conftest import JSONEndpoint

import spiral_arena
from spiral_arena.games.twenty_questions_oracles import LLMJudge, OracleError


class KnowingJudgeServer:
    """Answers from the question itself: "yes" when it mentions fruit, HTTP 500 when it mentions a
    crash, a reply without a verdict when it mentions a muddle, else "no"; each request takes
    ``delay`` seconds. Records every question and the most requests ever in flight at once."""

    def __init__(self, delay: float = 0.05) -> None:
        self.delay = delay
        self.questions: list[str] = []
        self.in_flight = self.most_in_flight = 0
        self.lock = threading.Lock()

    def __enter__(self) -> KnowingJudgeServer:
        self.http = JSONEndpoint(self.answer)
        self.base_url = self.http.url
        return self

    def answer(self, body: dict, headers: object) -> tuple[int, dict]:
        question = json.loads(body["messages"][-1]["content"].rpartition("Current question: ")[2])  # quoted
        with self.lock:
            self.questions.append(question)
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
        time.sleep(self.delay)
        with self.lock:
            self.in_flight -= 1
        if "crash" in question:
            return 500, {"error": {"message": "out of memory"}}
        verdict = "yes" if "fruit" in question else "no"
        content = "Hard to say." if "muddle" in question else f"<answer>{verdict}</answer>"
        message = {"role": "assistant", "content": content}
        return 200, {"object": "chat.completion", "choices": [{"index": 0, "message": message}]}

    def __exit__(self, *exc_info: object) -> None:
        self.http.stop()


def judge(server: KnowingJudgeServer, **kwargs) -> LLMJudge:
    return LLMJudge("judge-model", server.base_url, max_retries=0, backoff=0.0, **kwargs)


def test_answers_are_cached_per_secret_and_normalised_question():
    with KnowingJudgeServer() as server:
        oracle = judge(server)
        assert oracle.answer("apple", [], "Is it a fruit?").answer == "yes"
        assert oracle.answer("apple", ["Is it red?"], "is it a FRUIT ?").answer == "yes"  # same words
        assert oracle.answer("pear", [], "Is it a fruit?").answer == "yes"  # another secret: asked
        assert oracle.answer("apple", [], "Is it a tool?").answer == "no"
    assert server.questions == ["Is it a fruit?", "Is it a fruit?", "Is it a tool?"]
    assert oracle.requests == 3 and len(oracle.cache) == 3


def test_a_wave_goes_out_concurrently_within_the_bound():
    with KnowingJudgeServer(delay=0.1) as server:
        oracle = judge(server, concurrency=4)
        queries = [("apple", [], f"Is it number {n} of the fruit bowl?") for n in range(16)]
        started = time.monotonic()
        oracle.prefetch(queries + queries[:5])  # duplicates are asked once
        elapsed = time.monotonic() - started
        assert len(server.questions) == 16 and 1 < server.most_in_flight <= 4
        assert elapsed < 16 * 0.1 * 0.6  # about 4 rounds of 0.1 s, not 16 in a row
        assert all(oracle.answer(*q).answer == "yes" for q in queries)  # from the cache
    assert len(server.questions) == 16


def test_a_failed_prefetch_is_raised_once_then_asked_again():
    with KnowingJudgeServer() as server:
        oracle = judge(server)
        oracle.prefetch([("apple", [], "Did it crash?"), ("apple", [], "Is it a fruit?")])
        assert len(server.questions) == 2
        with pytest.raises(OracleError, match=r"the judge request failed \(HTTP 500, 1 attempt\(s\)\)$"):
            oracle.answer("apple", [], "Did it crash?")
        with pytest.raises(OracleError):  # not cached: the next call asks the server again
            oracle.answer("apple", [], "Did it crash?")
        assert len(server.questions) == 3 and oracle.answer("apple", [], "Is it a fruit?").answer == "yes"


def test_the_game_prefetches_only_questions_the_oracle_will_answer():
    with KnowingJudgeServer() as server:
        env = spiral_arena.make(
            "TwentyQuestions-v0", secret="apple", oracle="openai:judge-model", oracle_base_url=server.base_url
        )
        env.reset(seed=0)
        env.step("\\boxed{Is it a fruit?}")
        game, state = env.game, env.state_
        moves = ["\\boxed{Is it a fruit?}", "\\boxed{Is it an apple?}", "no question mark", "\\boxed{Is it red?}"]
        game.prefetch_answers([(state, text) for text in moves])  # a repeat, a win, an invalid, a new one
        assert server.questions == ["Is it a fruit?", "Is it red?"]
        env.step("\\boxed{Is it red?}")
        assert env.infos["questioner"]["view"]["last_turn"]["verdict"] == "no"
        assert len(server.questions) == 2  # the step found its answer ready


def test_games_built_from_one_spec_share_one_judge_and_its_cache(monkeypatch):
    with KnowingJudgeServer() as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        envs = [spiral_arena.make("TwentyQuestions-v0", secret="apple", oracle="openai:judge-model") for _ in range(2)]
        assert envs[0].game.oracle is envs[1].game.oracle
        for env in envs:
            env.reset(seed=0)
            env.step("\\boxed{Is it a fruit?}")
        assert server.questions == ["Is it a fruit?"]
        other = spiral_arena.make("TwentyQuestions-v0", secret="apple", oracle="openai:other-model")
        assert other.game.oracle is not envs[0].game.oracle

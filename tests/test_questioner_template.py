"""The "questioner" prompt template: a Twenty Questions game rendered as delta-belief-rl's SFT questioner was
trained to read it (``llm_agent/generation.py`` and ``llm_agent/prompts.py: get_question_prompt`` at f173b54):
the system prompt and first instruction of its coca_plus prompts, each question as the assistant's turn, and
``"{answer}. "`` + the later instruction as the user's. The prompt files are fetched from upstream once and
cached, their string constants read without running them; here a real HTTP server on 127.0.0.1 stands in
for the repository, serving files with the same constants (the real ones cannot be downloaded offline)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from test_twenty_questions import FileServer, closed_port_url

import spiral_arena
from spiral_arena import wordlists
from spiral_arena.wordlists import QuestionerPrompts, WordListError, questioner_prompts

FILES = {  # what each upstream module defines, and a line that would end the process if it were run
    "coca_plus_prompts": 'SYSTEM_PROMPT_ORIGINAL = """SYSTEM: find the word."""\nDIRECT_PROMPT = "FIRST: ask."\n',
    "llm_agent_prompts": (
        'INVALID_ANSWER = ("INVALID: not a question.")\nREPEATED_ANSWER = """REPEATED: asked before."""\n'
        'DIRECT_PROMPT = """LATER: ask again. """\nCOT_PROMPT = "unused"\nimport os\nos._exit(3)\n'
    ),
}
EXPECTED = QuestionerPrompts(
    "SYSTEM: find the word.", "FIRST: ask.", "LATER: ask again. ", "INVALID: not a question.", "REPEATED: asked before."
)


@pytest.fixture
def upstream(tmp_path, monkeypatch) -> Path:
    """The stand-in repository's root; the pinned checksums are the stand-ins'."""
    root = tmp_path / "served"
    pinned = {}
    for name, text in FILES.items():
        remote_path = wordlists.REMOTE_PROMPT_FILES[name][0]
        (root / remote_path).parent.mkdir(parents=True, exist_ok=True)
        (root / remote_path).write_text(text)
        pinned[name] = (remote_path, hashlib.sha256(text.encode()).hexdigest())
    monkeypatch.setattr(wordlists, "REMOTE_PROMPT_FILES", pinned)
    return root


def test_the_prompts_are_downloaded_read_without_running_them_and_cached(upstream, tmp_path):
    cache = tmp_path / "cache"
    with FileServer(upstream) as server:
        assert questioner_prompts(base_url=server.base_url, cache=cache) == EXPECTED  # os._exit never ran
    assert questioner_prompts(base_url=closed_port_url(), cache=cache) == EXPECTED  # the cache alone now


def test_offline_without_a_cache_says_what_to_save_where(tmp_path):
    with pytest.raises(WordListError) as error:
        questioner_prompts(base_url=closed_port_url(), cache=tmp_path, timeout=2)
    message = str(error.value)
    assert "could not download the prompt file 'coca_plus_prompts'" in message
    assert str(tmp_path / "twenty_questions" / "coca_plus_prompts.py") in message and "questioner" in message


def test_a_tampered_prompt_file_is_refused(upstream, tmp_path):
    path = upstream / wordlists.REMOTE_PROMPT_FILES["llm_agent_prompts"][0]
    path.write_text(path.read_text().replace("LATER", "Ignore the rules"))
    with FileServer(upstream) as server, pytest.raises(WordListError, match="has sha256 .*nothing was cached"):
        questioner_prompts(base_url=server.base_url, cache=tmp_path / "cache")


def test_a_game_renders_as_the_questioners_chat(upstream, tmp_path, monkeypatch):
    """Three questions (answered no, invalid, repeated) become three assistant turns, each answered by the
    verdict's reply, ". " and the later instruction, after the system prompt and the first instruction."""
    from test_trainer_units import EchoEngine
    from transformers import AutoTokenizer

    from spiral_arena.models.policy import Policy
    from trainers.tiny import create_tiny

    monkeypatch.setenv("SPIRAL_ARENA_CACHE", str(tmp_path / "cache"))
    with FileServer(upstream) as server:
        questioner_prompts(base_url=server.base_url)  # fills the cache the policy reads
    tokenizer = AutoTokenizer.from_pretrained(create_tiny(tmp_path / "tiny", ["TwentyQuestions-v0"]))
    policy = Policy(EchoEngine(tokenizer, lambda ids: ""), tokenizer, "questioner")
    env = spiral_arena.make("TwentyQuestions-v0:words=builtin;max_questions=5")
    env.reset(seed=0)
    first = policy.prompt_text(env.observe(env.agent_selection))
    assert first == tokenizer.apply_chat_template(
        [{"role": "system", "content": EXPECTED.system}, {"role": "user", "content": EXPECTED.first}],
        tokenize=False, add_generation_prompt=True,
    )  # fmt: skip
    asked = ["Is it a vehicle?", "hello", "Is it a vehicle?"]
    for question in asked:  # bare questions, as the SFT questioner writes them: the env reads them unboxed
        env.step(question)
    verdicts = [q["answer"] for q in env.infos[env.agent_selection]["view"]["questions"]]
    assert verdicts[1:] == ["invalid", "repeated"]
    replies = {"yes": "Yes", "no": "No"}[verdicts[0]], EXPECTED.invalid, EXPECTED.repeated
    messages = [{"role": "system", "content": EXPECTED.system}, {"role": "user", "content": EXPECTED.first}]
    for question, reply in zip(asked, replies, strict=True):
        messages += [
            {"role": "assistant", "content": question},
            {"role": "user", "content": f"{reply}. {EXPECTED.later}"},
        ]
    rendered = policy.prompt_text(env.observe(env.agent_selection))
    assert rendered == tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert (
        policy.prompt_ids(env.observe(env.agent_selection))
        == tokenizer(rendered, add_special_tokens=False)["input_ids"]
    )
    with pytest.raises(ValueError, match="reads Twenty Questions turns only"):
        policy.prompt_text("[GAME] You are Player 0 in Kuhn Poker.")

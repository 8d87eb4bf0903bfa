"""The one answer parser (last ``\\boxed{}``, else last bracketed token), alone and through the envs.

The fuzzing half checks the promise every env makes to a trainer: ``step()`` takes any string. A string
is either a legal move or an invalid move that ends the game (-1/+1) and leaves the rules state as it was.
"""

from __future__ import annotations

import copy
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import spiral_arena
from spiral_arena.agents import RandomAgent
from spiral_arena.core.actions import InvalidMove, choose, extract_answer, extract_token, last_boxed

ENV_IDS = spiral_arena.list_envs()

# ---- units ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("\\boxed{4}", "4"),
        ("\\boxed{ 4 }", "4"),
        ("\\boxed {4}", "4"),
        ("\\boxed{[4]}", "[4]"),
        ("\\boxed{\\text{4}}", "4"),
        ("\\boxed{\\text { bet }}", "bet"),
        ("\\boxed{\\frac{1}{2}}", "\\frac{1}{2}"),  # braces inside the box are matched, not cut short
        ("first \\boxed{2}, then \\boxed{7}", "7"),
        ("\\boxed{2} and a broken \\boxed{7", "2"),  # an unclosed last box does not count
        ("\\boxed{}", ""),
        ("no box here [4]", None),
        ("\\fbox{4}", None),
        ("\\boxed 4", None),
        ("", None),
    ],
)
def test_last_boxed(text, expected):
    assert last_boxed(text) == expected


def test_last_boxed_is_linear_on_degenerate_output():
    """A rollout that repeats ``\\boxed{`` 30,000 times must not stall a step (quadratic took minutes)."""
    text = "\\boxed{" * 30_000 + "\\boxed{4}"
    start = time.perf_counter()
    assert last_boxed(text) == "4"
    assert last_boxed("\\boxed{" * 30_000) is None
    assert time.perf_counter() - start < 2.0


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("  reasoning... \\boxed{ [bet] }  ", "[bet]"),
        ("  plain answer \n", "plain answer"),
        ("\\boxed{3} no, \\boxed{\\text{5}}", "5"),
    ],
)
def test_extract_answer(text, expected):
    assert extract_answer(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[4]", "4"),
        ("\\boxed{4}", "4"),
        ("\\boxed{[4]}", "4"),
        ("\\boxed{\\text{4}}", "4"),
        ("\\boxed{ Bet }", "bet"),
        ("[ CHECK ]", "check"),
        ("[  Big \t  Bet ]", "big bet"),
        ("I could [check], but with a King I [bet]", "bet"),  # the last bracketed token
        ("\\boxed{[check] or [call]}", "call"),
        ("[[4]]", "4"),
        ("bet", "bet"),
        ("  Bet  ", "bet"),
        ("one two three four five", "one two three four five"),  # five bare words still count
        ("one two three four five six", None),  # six do not: that is prose, not an answer
        ("", None),
        ("   ", None),
        ("\\boxed{}", None),
    ],
)
def test_extract_token(text, expected):
    assert extract_token(text) == expected


def test_choose_maps_tokens_and_names_legal_actions_when_it_fails():
    options = {"check": "CHECK", "bet": "BET"}
    legal = ["[check]", "[bet]"]
    assert choose("[check]", options, legal) == "CHECK"
    assert choose("hmm... \\boxed{BET}", options, legal) == "BET"
    for text in ("[call]", "", "I would rather not say what I will do here"):
        with pytest.raises(InvalidMove) as caught:
            choose(text, options, legal)
        assert "[check]" in caught.value.reason and "[bet]" in caught.value.reason
    with pytest.raises(InvalidMove, match=r"\[call\]"):
        choose("[call]", options, legal)


def test_choose_reason_quotes_player_text_safely():
    """The reason is shown to both players, so the quoted token stays printable ASCII and short."""
    with pytest.raises(InvalidMove) as caught:
        choose("[ж\x07" + "x" * 500 + "]", {"bet": 1}, ["[bet]"])
    reason = caught.value.reason
    assert reason.isascii() and reason.isprintable()
    assert len(reason) < 200
    assert "[bet]" in reason


# ---- through the envs -------------------------------------------------------------------


def fresh(env_id: str, **kwargs):
    env = spiral_arena.make(env_id, **kwargs)
    env.reset(seed=0)
    return env


@pytest.mark.parametrize(
    "text",
    [
        "[4]",
        " [4] ",
        "4",
        "\\boxed{4}",
        "\\boxed{[4]}",
        "\\boxed{\\text{4}}",
        "\\boxed{ 4 }",
        "The centre controls four lines, so I take it. \\boxed{4}",
        "\\boxed{2}... on second thought \\boxed{4}",
        "Corners are strong [0] but the centre is stronger: [4]",
    ],
)
def test_tictactoe_reads_every_form_of_cell_4(text):
    env = fresh("TicTacToe-v0")
    env.step(text)
    assert env.state_.board[4] == 0
    assert env.agent_selection == "player_1"
    assert not any(env.terminations.values())


@pytest.mark.parametrize(
    "text", ["[bet]", "[Bet]", "[BET]", "bet", "\\boxed{ Bet }", "\\boxed{\\text{bet}}", "With a K I will [bet]"]
)
def test_kuhn_reads_case_and_spacing_variants(text):
    env = fresh("KuhnPoker-v0")
    env.step(text)
    assert env.state_.history == "b"
    assert env.state_.legal_actions() == ["fold", "call"]


@pytest.mark.parametrize(
    ("env_id", "text", "legal"),
    [
        ("TicTacToe-v0", "[9]", ["[0]", "[4]", "[8]"]),
        ("TicTacToe-v0", "[4] no wait [9]", ["[0]", "[4]", "[8]"]),  # the last token counts, and it is illegal
        ("TicTacToe-v0", "", ["[0]", "[8]"]),
        ("TicTacToe-v0", "I am not sure which cell is the best one here", ["[0]", "[8]"]),
        ("KuhnPoker-v0", "[call]", ["[check]", "[bet]"]),
        ("KuhnPoker-v0", "\\boxed{raise}", ["[check]", "[bet]"]),
        ("KuhnPoker-v0", "\\boxed{}", ["[check]", "[bet]"]),
    ],
)
def test_unreadable_or_illegal_answers_are_invalid_moves_naming_the_legal_actions(env_id, text, legal):
    env = fresh(env_id)
    env.step(text)
    reason = env.infos["player_0"]["invalid_move"]
    assert all(action in reason for action in legal)
    assert env.returns == (-1.0, 1.0)


def test_occupied_cell_is_an_invalid_move():
    env = fresh("TicTacToe-v0")
    env.step("[4]")
    legal = env.infos["player_1"]["legal_actions"]
    assert "[4]" not in legal and len(legal) == 8
    env.step("\\boxed{4}")
    assert env.infos["player_1"]["offender"] == "player_1"
    assert all(action in env.infos["player_1"]["invalid_move"] for action in legal)
    assert env.returns == (1.0, -1.0)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_degenerate_long_output_is_handled_quickly(env_id):
    env = fresh(env_id)
    start = time.perf_counter()
    env.step("\\boxed{" * 30_000 + "[" * 10_000 + " " * 50_000 + ", and" * 10_000)
    assert time.perf_counter() - start < 3.0
    for agent in env.possible_agents:
        assert env.observation_space(agent).contains(env.observe(agent))


# ---- fuzzing: any string is a legal move or an invalid move -----------------------------

FRAGMENTS = [
    "\\boxed{",
    "\\boxed",
    "\\text{",
    "{",
    "}",
    "[",
    "]",
    " ",
    "\n",
    "\x00",
    "\x1b[31m",
    "é",
    "漢字",
    "😀",
    "\u200b",
    "[4]",
    "[0]",
    "[bet]",
    "[Check]",
    "[call]",
    "[fold]",
    "[Accept]",
    "[Deny]",
    "[Offer: 3 Wood -> 2 Gold]",
    "[Offer: 30 Wood -> 1 Gold]",
    "[Offer: 1 Stone -> 1 Gold]",
    "[Offer]",
    "[Accept] [Deny]",
    "[Offer: ",
    " -> ",
    "->",
    "Wood",
    "Golds",
    "12",
    "0",
    ",",
    " and ",
    "I give ",
]
ANSWERS = st.one_of(
    st.text(max_size=60),
    st.sampled_from(FRAGMENTS),
    st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=8)), max_size=14).map("".join),
)


def comparable(value):
    """A deep copy of ``value`` that compares by content: a Generator by its bit state, and plain
    objects (an oracle, a word table) by their attributes rather than by identity."""
    if isinstance(value, np.random.Generator):
        return copy.deepcopy(value.bit_generator.state)
    if isinstance(value, dict):
        return {k: comparable(v) for k, v in value.items()}
    if type(value) in (list, tuple):
        return type(value)(comparable(v) for v in value)
    if type(value).__eq__ is object.__eq__ and hasattr(value, "__dict__"):
        return (type(value).__name__, comparable(vars(value)))
    return copy.deepcopy(value)


def rules_snapshot(env) -> dict:
    """Everything in the rules state, deep-copied so that a later change shows up as a difference."""
    return comparable(vars(env.state_))


def advance(env, moves: int, seed: int) -> None:
    """Play up to ``moves`` random legal moves, so the fuzzed answer meets mid-game positions too."""
    agents = [RandomAgent(seed=seed + i) for i in range(len(env.possible_agents))]
    for _ in range(moves):
        agent = env.agent_selection
        if env.terminations[agent] or env.truncations[agent]:
            return
        env.step(agents[env.possible_agents.index(agent)].act(env.observe(agent), env.infos[agent]))


@pytest.mark.parametrize("env_id", ENV_IDS)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=ANSWERS, moves=st.integers(0, 8), seed=st.integers(0, 2**16))
def test_step_accepts_any_string(env_id, text, moves, seed):
    env = spiral_arena.make(env_id)
    env.reset(seed=seed)
    advance(env, moves, seed)
    agent = env.agent_selection
    if env.terminations[agent] or env.truncations[agent]:
        return
    before = rules_snapshot(env)
    expected_reason = env.check_action(text)

    env.step(text)  # must not raise, whatever the text

    for a in env.possible_agents:
        assert env.observation_space(a).contains(env.observe(a)), a
    if len(env.possible_agents) == 2:
        assert sum(env.rewards.values()) == 0
    reason = env.infos[agent].get("invalid_move")
    assert reason == expected_reason
    if reason is None:
        return
    assert isinstance(reason, str) and reason
    assert rules_snapshot(env) == before
    assert all(env.terminations.values())
    assert all(info["offender"] == agent for info in env.infos.values())
    offender = env.possible_agents.index(agent)
    assert env.returns == tuple(-1.0 if i == offender else 1.0 for i in range(len(env.possible_agents)))


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_action_space_samples_never_raise(env_id):
    """Gymnasium's own sampler (printable strings up to 4096 chars) makes legal or invalid moves."""
    env = spiral_arena.make(env_id)
    for seed in range(25):
        env.reset(seed=seed)
        space = env.action_space(env.agent_selection)
        space.seed(seed)
        env.step(space.sample())
        assert all(env.observation_space(a).contains(env.observe(a)) for a in env.possible_agents)

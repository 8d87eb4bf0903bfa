"""ExpertAgent: each game's scripted expert checked by exact analysis where the game is small, and by
its record against RandomAgent through the AEC env otherwise (the numbers are in the test names)."""

from __future__ import annotations

import copy
import itertools
import math
import zlib
from collections import Counter

import numpy as np
import pytest

import spiral_arena
from spiral_arena.agents import RandomAgent, make_agent
from spiral_arena.agents.expert import EXPERTS, ExpertAgent, nash_policy
from spiral_arena.agents.experts.liars_dice import bid_probability
from spiral_arena.agents.experts.snake import round_deaths
from spiral_arena.agents.experts.tictactoe import move_scores
from spiral_arena.agents.experts.truth_and_deception import pushed_fact
from spiral_arena.analysis.kuhn import KUHN_INFO_STATES, kuhn_exploitability, kuhn_policy_value
from spiral_arena.games.kuhn_poker import CARD_NAMES
from spiral_arena.games.snake import DIRECTIONS, Snake
from spiral_arena.games.tictactoe import EMPTY, TicTacToe
from spiral_arena.games.twenty_questions_oracles import Reply, TableOracle


def play(env, agents, seed):
    """One game through the AEC env; returns (returns, offender or None, reason or None).

    Seeds used with it: game ``g``, random seats ``10_000 + g`` / ``20_000 + g``, experts ``30_000 + g`` /
    ``40_000 + g``. Never give an agent the env's own seed: two generators seeded alike draw correlated
    numbers (an expert seeded like the Kuhn deal seemed to win twice as often as it does)."""
    env.reset(seed=seed)
    offender = reason = None
    for name in env.agent_iter():
        obs, _, term, trunc, info = env.last()
        if term or trunc:
            if "invalid_move" in info:
                offender, reason = name, info["invalid_move"]
            env.step(None)
            continue
        env.step(agents[env.possible_agents.index(name)].act(obs, info))
    return env.returns, offender, reason


def expert_vs_random(env_id, games, seat, expert_params=None, **env_kwargs):
    """The expert's return in each of ``games`` games in ``seat`` against seeded random play, and the
    invalid moves seen (offender, reason)."""
    env = spiral_arena.make(env_id, **env_kwargs)
    results, invalid = [], []
    for g in range(games):
        agents = [RandomAgent(seed=10_000 + g), RandomAgent(seed=20_000 + g)]
        agents[seat] = ExpertAgent(seed=30_000 + g, **(expert_params or {}))
        returns, offender, reason = play(env, agents, seed=g)
        results.append(returns[seat])
        if offender is not None:
            invalid.append((offender, reason))
    return results, invalid


# ---- the agent itself -----------------------------------------------------------------------------


@pytest.mark.parametrize("env_id", spiral_arena.list_envs())
def test_every_registered_game_has_an_expert(env_id):
    assert spiral_arena.make(env_id).game.name in {expert.game for expert in EXPERTS}


def test_make_agent_builds_the_expert_with_its_options():
    agent = make_agent("expert", seed=3, alpha=0.0)
    assert isinstance(agent, ExpertAgent)
    assert agent.experts["KuhnPoker"].policy == nash_policy(0.0)


def test_unknown_game_is_a_clear_error():
    with pytest.raises(ValueError, match=r"no strategy for game 'Chess'.*TicTacToe"):
        ExpertAgent().act("", {"game": "Chess", "view": {"board": []}})


def test_missing_view_is_a_clear_error():
    with pytest.raises(ValueError, match=r"needs info\['view'\]"):
        ExpertAgent().act("", {"game": "TicTacToe", "view": {}})


def test_unknown_parameter_is_a_clear_error():
    with pytest.raises(TypeError, match=r"unknown parameter\(s\) bluff; valid: alpha"):
        ExpertAgent(bluff=0.1)


@pytest.mark.parametrize("alpha", [-0.01, 0.34, "1/3", True, math.nan])
def test_alpha_outside_the_nash_family_is_rejected(alpha):
    with pytest.raises(ValueError, match=r"alpha must be a number in \[0, 1/3\]"):
        ExpertAgent(alpha=alpha)


def test_reset_seed_replays_the_same_choices():
    info = {"game": "KuhnPoker", "view": {"card": 1, "history": "pb", "opener": 0, "round": 1, "rounds": 5}}
    agent = ExpertAgent(alpha=1 / 6)
    agent.reset(seed=7)
    first = [agent.act("", info) for _ in range(50)]
    agent.reset(seed=7)
    assert [agent.act("", info) for _ in range(50)] == first
    assert set(first) == {"[call]", "[fold]"}  # Q after check-bet calls with probability 1/2


# ---- TicTacToe --------------------------------------------------------------------------------------


def test_tictactoe_perfect_play_never_loses_to_any_opponent():
    """Exhaustive: the opponent tries every legal move, the expert every move it may pick (all tied best
    cells), from both seats. No line of play ends in a loss, and the empty board is a draw."""
    game = TicTacToe()
    leaves = Counter()

    def explore(state, expert_seat):
        if state.is_terminal():
            leaves[state.returns()[expert_seat]] += 1
            return
        if state.current_player == expert_seat:
            scores = move_scores(tuple(state.board), expert_seat)
            moves = [c for c, s in scores.items() if s == max(scores.values())]
        else:
            moves = state.legal_actions()
        for cell in moves:
            child = copy.deepcopy(state)
            child.apply(cell)
            explore(child, expert_seat)

    for seat in (0, 1):
        explore(game.new_state(np.random.default_rng(0)), seat)
    assert leaves[-1.0] == 0
    assert leaves[1.0] > 0 and leaves[0.0] > 0
    assert max(move_scores((EMPTY,) * 9, 0).values()) == 0


def test_tictactoe_prefers_the_quickest_win():
    """Player 0 (cells 0, 4) can win at once on 8, or later; player 1 threatens nothing urgent."""
    board = [0, 1, EMPTY, EMPTY, 0, EMPTY, 1, EMPTY, EMPTY]
    info = {"game": "TicTacToe", "view": {"board": board, "me": 0}}
    assert {ExpertAgent(seed=s).act("", info) for s in range(20)} == {"[8]"}


def test_tictactoe_blocks_an_immediate_threat():
    board = [1, 1, EMPTY, EMPTY, 0, EMPTY, EMPTY, EMPTY, EMPTY]
    info = {"game": "TicTacToe", "view": {"board": board, "me": 0}}
    assert {ExpertAgent(seed=s).act("", info) for s in range(20)} == {"[2]"}


@pytest.mark.parametrize("seat", [0, 1])
def test_tictactoe_expert_never_loses_2000_games_vs_random(seat):
    results, invalid = expert_vs_random("TicTacToe-v0", 2000, seat)
    counts = Counter(results)
    assert not invalid
    assert counts[-1.0] == 0
    # Measured: 97% wins as player 0, 77% as player 1; random play itself wins 58.5% / 28.8%.
    assert counts[1.0] / len(results) > (0.9 if seat == 0 else 0.7)


# ---- Kuhn poker -----------------------------------------------------------------------------------

ALPHAS = [0.0, 1 / 12, 1 / 6, 1 / 4, 1 / 3]
OPENER_STATES = tuple(s for s in KUHN_INFO_STATES if s[1:] in ("", "pb"))


@pytest.mark.parametrize("alpha", ALPHAS)
def test_kuhn_policy_is_a_nash_equilibrium(alpha):
    policy = nash_policy(alpha)
    assert sorted(policy) == sorted(KUHN_INFO_STATES)
    assert kuhn_exploitability(policy) == pytest.approx(0.0, abs=1e-9)
    assert kuhn_policy_value(policy) == pytest.approx(-1 / 18, abs=1e-12)


def test_kuhn_policy_off_the_family_is_exploitable():
    """The exploitability check can fail: nudging one probability off the family makes it positive."""
    policy = nash_policy(1 / 6)
    policy["Qb"] += 0.1
    assert kuhn_exploitability(policy) > 1e-3


@pytest.mark.parametrize("state", KUHN_INFO_STATES)
def test_kuhn_expert_plays_its_policy_at_every_info_state(state):
    """Action frequencies over 4,000 decisions at each of the 12 info states, within 5 standard errors."""
    alpha, n = 1 / 6, 4000
    card, history = CARD_NAMES.index(state[0]), state[1:]
    info = {"game": "KuhnPoker", "view": {"card": card, "history": history, "opener": 1, "round": 2, "rounds": 5}}
    agent = ExpertAgent(seed=3, alpha=alpha)
    answers = Counter(agent.act("", info) for _ in range(n))
    aggressive, passive = ("[call]", "[fold]") if history.endswith("b") else ("[bet]", "[check]")
    assert set(answers) <= {aggressive, passive}
    p = nash_policy(alpha)[state]
    freq = answers[aggressive] / n
    assert abs(freq - p) <= 5 * math.sqrt(p * (1 - p) / n) + 1e-12


def kuhn_reference(alpha, opener):
    """Exact chips per hand of the Nash expert against uniform random, as opener or responder."""
    nash, uniform = nash_policy(alpha), dict.fromkeys(KUHN_INFO_STATES, 0.5)
    if opener:
        return kuhn_policy_value({s: (nash if s in OPENER_STATES else uniform)[s] for s in KUHN_INFO_STATES})
    return -kuhn_policy_value({s: (uniform if s in OPENER_STATES else nash)[s] for s in KUHN_INFO_STATES})


def test_kuhn_reference_values():
    """Against uniform random the family earns 1/18 + alpha/3 as opener and 1/6 as responder."""
    for alpha in ALPHAS:
        assert kuhn_reference(alpha, opener=True) == pytest.approx(1 / 18 + alpha / 3)
        assert kuhn_reference(alpha, opener=False) == pytest.approx(1 / 6)


@pytest.mark.parametrize(("seat", "alpha"), [(0, 0.0), (1, 1 / 3), (1, 0.0)])
def test_kuhn_expert_wins_chips_vs_random_3000_five_round_games(seat, alpha):
    """Mean chips per hand within 4 standard errors of the exact reference for the seat (player 0 opens
    rounds 1, 3, 5), and clearly positive. References: 0.1 (seat 0, alpha 0), 1/6 (seat 1, alpha 1/3),
    0.1222 (seat 1, alpha 0)."""
    games, rounds = 3000, 5
    results, invalid = expert_vs_random(
        "KuhnPoker-v0", games, seat, rounds=rounds, reward="chips", expert_params={"alpha": alpha}
    )
    assert not invalid
    opened = (rounds + 1) // 2 if seat == 0 else rounds // 2
    reference = (opened * kuhn_reference(alpha, True) + (rounds - opened) * kuhn_reference(alpha, False)) / rounds
    per_hand = np.asarray(results) / rounds
    mean, se = per_hand.mean(), per_hand.std(ddof=1) / math.sqrt(games)
    assert abs(mean - reference) < 4 * se, (mean, reference, se)
    assert mean - 4 * se > 0.03


# ---- SimpleNegotiation --------------------------------------------------------------------------


def negotiation_view(holdings, values, pending, actions_left):
    return {
        "game": "SimpleNegotiation",
        "view": {"holdings": holdings, "values": values, "pending": pending, "actions_left": actions_left},
    }


def test_negotiation_accepts_only_trades_that_win_items():
    """Player 0 (Wood 5, Gold 15) is offered trades by player 1 at its second turn (8 actions left)."""
    agent = ExpertAgent(seed=0)

    def answer(give, ask):
        return agent.act("", negotiation_view((10, 10), (5, 15), {"proposer": 1, "give": give, "ask": ask}, 8))

    assert "[Accept]" in answer((0, 2), (1, 0))  # +1 item, +25 value
    assert "[Accept]" in answer((2, 0), (0, 1))  # +1 item though -5 value: more items is what wins
    assert "[Accept]" in answer((0, 1), (1, 0))  # as many items, +10 value
    assert "[Deny]" in answer((1, 0), (0, 1))  # as many items, -10 value
    assert "[Deny]" in answer((0, 1), (2, 0))  # +5 value but -1 item: that trade loses the game
    assert "[Accept]" not in answer((0, 11), (0, 1))  # player 1 holds only 10 Gold: it could not pay


def test_negotiation_offers_are_affordable_and_win_one_item():
    """Player 0 prefers giving Wood (worth 5 to it) for Gold; it never gives more than it holds, and
    when the opponent has too little Gold left it asks for Wood instead."""
    agent = ExpertAgent()
    offers = Counter()
    for s in range(60):
        agent.reset(seed=s)
        only_one_wood = agent.act("", negotiation_view((1, 10), (5, 15), None, 6))
        assert only_one_wood.endswith("[Offer: 1 Wood -> 2 Gold]"), only_one_wood
        opponent_short_of_gold = agent.act("", negotiation_view((1, 19), (5, 15), None, 6))
        offers[opponent_short_of_gold[opponent_short_of_gold.index("[") :]] += 1
    assert set(offers) == {f"[Offer: {k} Gold -> {k + 1} Wood]" for k in (1, 2, 3)}


def test_negotiation_makes_no_offer_when_nobody_can_answer():
    text = ExpertAgent(seed=0).act("", negotiation_view((10, 10), (15, 5), None, 1))
    assert "[Offer" not in text


@pytest.mark.parametrize("seat", [0, 1])
def test_negotiation_expert_never_loses_and_wins_75pct_of_500_games_vs_random(seat):
    """Measured: about 81% wins as player 0 and 86% as player 1, the rest draws, no invalid move."""
    results, invalid = expert_vs_random("SimpleNegotiation-v0", 500, seat)
    counts = Counter(results)
    assert not invalid
    assert counts[-1.0] == 0
    assert counts[1.0] / len(results) >= 0.75


# ---- expert against expert ------------------------------------------------------------------------


@pytest.mark.parametrize("env_id", spiral_arena.list_envs())
def test_expert_vs_expert_makes_no_invalid_move(env_id):
    env = spiral_arena.make(env_id)
    for seed in range(40):
        returns, offender, reason = play(env, [ExpertAgent(seed=30_000 + seed), ExpertAgent(seed=40_000 + seed)], seed)
        assert offender is None, (seed, offender, reason)
        if len(returns) == 2:
            assert sum(returns) == 0
        if env_id in ("TicTacToe-v0", "SimpleNegotiation-v0"):  # neither side can lose: always a draw
            assert returns == (0.0, 0.0)


# ---- PigDice ------------------------------------------------------------------------------------


def pig_answer(my_score, opponent_score, turn_total, turns_left, target=50, **params):
    view = {
        "my_score": my_score,
        "opponent_score": opponent_score,
        "turn_total": turn_total,
        "turns_left": turns_left,
        "target": target,
    }
    return ExpertAgent(**params).act("", {"game": "PigDice", "view": view})


def test_pig_holds_at_20_and_at_the_target():
    assert pig_answer(0, 0, 18, 40) == "[roll]"
    assert pig_answer(0, 0, 20, 40) == "[hold]"
    assert pig_answer(40, 0, 10, 40) == "[hold]"  # 50 reaches the target
    assert pig_answer(0, 0, 20, 40, hold_at=25) == "[roll]"


def test_pig_last_turns_play_for_the_lead():
    assert pig_answer(10, 30, 20, 1) == "[roll]"  # the game's last turn: 30 only draws
    assert pig_answer(10, 30, 21, 1) == "[hold]"
    assert pig_answer(31, 30, 0, 1) == "[hold]"  # already ahead: bank nothing and win
    assert pig_answer(0, 30, 25, 2) == "[roll]"  # the opponent would hold 0 and win
    assert pig_answer(10, 30, 25, 2) == "[hold]"


@pytest.mark.parametrize("hold_at", [0, -5, 2.5, True])
def test_pig_bad_threshold_is_rejected(hold_at):
    with pytest.raises(ValueError, match="hold_at must be a positive integer"):
        ExpertAgent(hold_at=hold_at)


@pytest.mark.parametrize("seat", [0, 1])
def test_pig_expert_wins_over_90pct_of_600_games_vs_random(seat):
    """Measured: about 98% (player 0) and 97% (player 1) at the default target 50, 50 turns."""
    results, invalid = expert_vs_random("PigDice-v0", 600, seat)
    assert not invalid
    assert Counter(results)[1.0] / len(results) > 0.9


def test_pig_last_turn_rule_wins_short_games_vs_random():
    """With 4 turns and an unreachable target the turn limit decides, and player 1 plays the last turn.
    Measured over 2,000 games: the expert wins 82% there, plain hold-at-20 only 62% (draws 16%)."""
    results, invalid = expert_vs_random("PigDice-v0", 600, 1, target=1000, max_turns=4)
    assert not invalid
    assert Counter(results)[1.0] / len(results) > 0.75


# ---- LiarsDice ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("bid", "mine", "unseen"), [((2, 3), [3, 5], 2), ((3, 6), [1, 2, 6], 3), ((1, 4), [4], 1)])
def test_liars_dice_bid_probability_matches_enumeration(bid, mine, unseen):
    q, f = bid
    hands = list(itertools.product(range(1, 7), repeat=unseen))
    exact = sum((mine + list(h)).count(f) >= q for h in hands) / len(hands)
    assert bid_probability(bid, mine, unseen) == pytest.approx(exact, abs=1e-12)


def liars_answer(my_dice, opponent_dice, current=None):
    view = {
        "my_dice": my_dice,
        "my_dice_count": len(my_dice),
        "opponent_dice_count": opponent_dice,
        "dice_in_play": len(my_dice) + opponent_dice,
        "current_bid": current,
        "bidder": None if current is None else 1,
        "history": [] if current is None else [(1, *current)],
        "round": 1,
    }
    return ExpertAgent().act("", {"game": "LiarsDice", "view": view})


def test_liars_dice_opens_with_what_its_own_dice_prove():
    assert liars_answer([2, 5, 5, 5, 6], 5) == "[Bid: 3, 5]"


def test_liars_dice_calls_an_unlikely_bid_and_raises_a_likely_one():
    assert liars_answer([1, 2, 3, 4, 6], 5, current=(4, 5)) == "[Call]"  # needs four 5s among 5 unseen dice
    assert liars_answer([5, 5, 5, 2, 3], 5, current=(3, 5)) == "[Bid: 4, 5]"  # proven; 4 x 5 is 60% likely


@pytest.mark.parametrize("seat", [0, 1])
def test_liars_dice_expert_wins_95pct_of_300_games_vs_random(seat):
    """Measured: 500 of 500 games won in each seat."""
    results, invalid = expert_vs_random("LiarsDice-v0", 300, seat)
    assert not invalid
    assert Counter(results)[1.0] / len(results) >= 0.95


# ---- Snake -------------------------------------------------------------------------------------


def test_snake_death_rule_matches_the_game_rules():
    """``round_deaths`` predicts exactly which snakes the real rules kill, for all 16 move pairs in
    every position of 150 random games (longer snakes included: apples are eaten along the way)."""
    directions = list(DIRECTIONS)
    checked = 0
    for seed in range(150):
        rng = np.random.default_rng(seed)
        state = Snake(apples=4).new_state(rng)
        while not state.is_terminal():
            bodies = (list(state.bodies[0]), list(state.bodies[1]))
            for moves in itertools.product(directions, repeat=2):
                trial = copy.deepcopy(state)
                trial.apply(moves[0])
                trial.apply(moves[1])
                predicted = round_deaths(bodies, list(state.apples), (state.width, state.height), moves)
                assert predicted == (0 in trial.deaths, 1 in trial.deaths), (bodies, state.apples, moves)
                checked += 1
            state.apply(directions[int(rng.integers(4))])
            state.apply(directions[int(rng.integers(4))])
    assert checked > 5000


def snake_answer(my_body, opponent_body, apples, seed=0):
    view = {
        "width": 5,
        "height": 5,
        "me": 0,
        "my_head": my_body[0],
        "my_body": my_body,
        "opponent_head": opponent_body[0],
        "opponent_body": opponent_body,
        "apples": apples,
        "my_score": 0,
        "opponent_score": 0,
        "round": 1,
        "rounds": 20,
    }
    return ExpertAgent(seed=seed).act("", {"game": "Snake", "view": view})


def test_snake_goes_for_the_nearest_apple():
    assert snake_answer([(0, 0)], [(4, 4)], [(2, 0), (0, 4)]) == "[right]"


def test_snake_avoids_a_possible_head_on_collision():
    """The apple at (2, 2) is one step away for both heads; the expert will not risk the collision."""
    answers = {snake_answer([(1, 2)], [(3, 2)], [(2, 2), (4, 0)], seed=s) for s in range(10)}
    assert "[right]" not in answers


def test_snake_avoids_a_dead_end():
    """Moving up into (0, 4) leads into a pocket closed by its own body; it goes the other way."""
    body = [(0, 3), (1, 3), (1, 4), (2, 4)]
    assert snake_answer(body, [(4, 0)], [(0, 4)]) == "[down]"


@pytest.mark.parametrize("seat", [0, 1])
def test_snake_expert_wins_90pct_of_200_games_vs_random(seat):
    """Measured over 500 games: 98% wins and 2% draws in each seat, no loss."""
    results, invalid = expert_vs_random("Snake-v0", 200, seat)
    counts = Counter(results)
    assert not invalid
    assert counts[1.0] / len(results) >= 0.9
    assert counts[-1.0] <= 2


# ---- TruthAndDeception --------------------------------------------------------------------------


def test_pushed_fact_reads_claims_and_denials():
    assert pushed_fact(["Fact 2 is the true one.", "Trust me."]) == 2
    assert pushed_fact(["Fact 1 is a myth; believe fact 2? No: fact 1 is simply wrong."]) == 2
    assert pushed_fact(["One of these is a well-known myth.", "Why should I believe you?"]) is None
    assert pushed_fact(["Fact 1 is right.", "Fact 2 is right."]) is None


def truth_game_records(agents_for_game, games=400):
    """(Guesser's return, the fact the Deceiver's messages pushed, the false fact) for each game."""
    env = spiral_arena.make("TruthAndDeception-v0")
    records = []
    for g in range(games):
        returns, offender, reason = play(env, agents_for_game(g), seed=g)
        assert offender is None, (g, reason)
        deceiver_said = [text for player, text in env.state_.conversation if player == 0]
        records.append((returns[1], pushed_fact(deceiver_said), 3 - env.state_.true_fact))
    return records


def test_truth_deceiver_always_argues_for_the_false_fact_vs_random():
    """Against a random Guesser the Deceiver can only hold 1/2; it must push the false fact every game."""
    records = truth_game_records(lambda g: [ExpertAgent(seed=30_000 + g), RandomAgent(seed=20_000 + g)])
    assert all(pushed == false for _, pushed, false in records)
    wins = Counter(r for r, _, _ in records)[1.0] / len(records)
    assert abs(wins - 0.5) < 4 * math.sqrt(0.25 / len(records))


@pytest.mark.parametrize(("contrarian", "expected"), [(0.75, 7 / 8), (1.0, 1.0), (0.0, 0.5)])
def test_truth_guesser_vs_expert_deceiver_wins_half_plus_contrarian_over_2(contrarian, expected):
    """The expert Deceiver always pushes the false fact, so the Guesser wins 1/2 + contrarian/2 of 400."""
    records = truth_game_records(
        lambda g: [ExpertAgent(seed=30_000 + g), ExpertAgent(seed=40_000 + g, contrarian=contrarian)]
    )
    wins = Counter(r for r, _, _ in records)[1.0] / len(records)
    assert abs(wins - expected) <= 4 * math.sqrt(expected * (1 - expected) / len(records)) + 1e-12


def test_truth_guesser_vs_random_deceiver_holds_one_half():
    records = truth_game_records(lambda g: [RandomAgent(seed=10_000 + g), ExpertAgent(seed=40_000 + g)])
    wins = Counter(r for r, _, _ in records)[1.0] / len(records)
    assert abs(wins - 0.5) < 4 * math.sqrt(0.25 / len(records))


@pytest.mark.parametrize("contrarian", [-0.1, 1.5, "high"])
def test_truth_bad_contrarian_is_rejected(contrarian):
    with pytest.raises(ValueError, match=r"contrarian must be a probability in \[0, 1\]"):
        ExpertAgent(contrarian=contrarian)


# ---- TwentyQuestions ------------------------------------------------------------------------------


class LyingOracle:
    """The table oracle, except that it gives the wrong answer to a fixed share of the questions
    (chosen by a checksum of secret and question): a stand-in for an imperfect LLM judge."""

    name = "lying-table"
    deterministic = True

    def __init__(self, share: float) -> None:
        self.table = TableOracle()
        self.share = share

    def check_secrets(self, words):
        self.table.check_secrets(words)

    def answer(self, secret, earlier, question):
        reply = self.table.answer(secret, earlier, question)
        if zlib.crc32(f"{secret}|{question}".encode()) % 1000 < self.share * 1000:
            return Reply("no" if reply.answer == "yes" else "yes")
        return reply


def twenty_questions_games(nouns, **env_kwargs):
    """(won, questions asked) for one game per secret noun; fails on any invalid or repeated question."""
    results = []
    for k, noun in enumerate(nouns):
        env = spiral_arena.make("TwentyQuestions-v0", secret=noun, **env_kwargs)
        play(env, [ExpertAgent(seed=30_000 + k)], seed=k)
        verdicts = [t.verdict for t in env.state_.turns]
        assert "invalid" not in verdicts and "repeated" not in verdicts, (noun, env.state_.turns)
        results.append((env.state_.won, len(verdicts)))
    return results


def test_twenty_questions_expert_finds_every_table_noun_within_13_questions():
    """Measured: all 234 nouns found, 8.4 questions on average, 11 at most (binary search over 234
    nouns needs at least 8 on average)."""
    nouns = TableOracle().nouns
    results = twenty_questions_games(nouns)
    assert all(won for won, _ in results), [n for n, (won, _) in zip(nouns, results, strict=True) if not won]
    lengths = [n for _, n in results]
    assert max(lengths) <= 13
    assert np.mean(lengths) < 10


def test_twenty_questions_expert_survives_a_lying_oracle():
    """With 5% of the answers wrong, measured over all nouns: 98% found. Checked on every third noun."""
    nouns = TableOracle().nouns[::3]
    results = twenty_questions_games(nouns, oracle=LyingOracle(0.05))
    assert sum(won for won, _ in results) / len(results) >= 0.85


def test_twenty_questions_expert_never_repeats_a_guess_that_was_denied():
    view = {"questions": [{"question": "Is it a dog?", "answer": "no"}], "questions_left": 2}
    agent = ExpertAgent()
    for s in range(30):
        agent.reset(seed=s)
        assert agent.act("", {"game": "TwentyQuestions", "view": view}) != "Is it a dog?"


def test_the_weak_twenty_questions_expert_knows_the_table_but_has_no_strategy():
    """guess_prob: random table questions, and with that probability (always on the last question) a
    noun that fits every answer so far; it finds far fewer held-out nouns than the splitting expert."""
    from spiral_arena.agents.experts.twenty_questions import _bank
    from spiral_arena.games.twenty_questions_oracles import normalize_question

    bank = _bank()
    table_questions = set(bank.questions)
    env = spiral_arena.make("TwentyQuestions-v0:words=builtin_test")
    agent = make_agent("expert#guess_prob=0.3", seed=0)
    wins, guesses = [], 0
    for seed in range(60):
        env.reset(seed=seed)
        asked = []
        for _ in env.agent_iter():
            obs, _, term, trunc, info = env.last()
            if term or trunc:
                wins.append(info["outcome"]["winner"] is not None)
                env.step(None)
                continue
            question = agent.act(obs, info)
            if question not in table_questions:  # a guess: the noun fits every answer so far
                guesses += 1
                noun = bank.nouns.index(question.removeprefix("Is it ").removeprefix("an ").removeprefix("a ")[:-1])
                for q, verdict in asked:
                    assert bank.answers[bank.index[normalize_question(q)], noun] == (verdict == "yes")
            env.step(question)
            if question in table_questions:
                asked.append((question, env.infos["questioner"]["view"]["last_turn"]["verdict"]))
    assert 0.2 * 60 * 19 < guesses < 0.45 * 60 * 20
    assert 0.05 <= np.mean(wins) <= 0.5  # measured 23% over 8 games of each held-out noun
    with pytest.raises(ValueError, match=r"guess_prob must be a number in \(0, 1\]"):
        make_agent("expert#guess_prob=0")

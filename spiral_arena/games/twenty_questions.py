"""Twenty Questions (after bethgelab/delta-belief-rl): one questioner, an oracle inside the env.

The questioner asks up to ``max_questions`` yes/no questions about a secret noun. Each turn gets one
verdict, and every verdict uses up a turn:

- ``win``: a valid question that names the secret ends the game. The game decides this itself, never
  the oracle: the secret must appear as a whole word, case-insensitively, after punctuation (not
  hyphens) and digits are stripped, and a simple plural counts (s, es, y -> ies). Any mention wins,
  also inside a comparison ("Is it bigger than a tiger?" for tiger). "cat" does not win for "category".
  With ``one_guess=true`` a question may name at most one of the game's nouns: one that names several
  ("Is it a cat, a dog or a cow?") is ``invalid``. Without it, a questioner trained by RL learns to list
  nouns in one question, each list a handful of guesses for one turn (a tiny model did, within 100 steps).
- ``yes`` / ``no``: the oracle's answer (see ``twenty_questions_oracles``).
- ``invalid``: not 2-500 characters, not ending with a single ``?``, or holding control or invisible
  characters (C0 controls, DEL to NBSP, line and paragraph separators, and format characters such as
  zero-width spaces). ``repeated``: the same question (compared word by word, case-insensitively) was
  already answered. Both get a fixed feedback text and never end the game. Every echo of a question (its
  answer's message, the ``recap``) shows it on one line, its line breaks as spaces (``one_line``), so an
  invalid question's lines cannot pass for the game's answer or for recap lines.
- ``error``: the oracle had no answer (an LLM endpoint failed or replied without a clear yes/no). The
  turn is used up without an answer or a penalty. The player's view and info say only ``"judge error"``
  (``JUDGE_ERROR``): the judge's text may hold the secret, and an upstream error its address; the
  reason goes to the log (``logging``), free of both.

Rewards (``reward=``):
- ``"delta_belief"`` (default, delta-belief-rl's values): +2 for a win, -5 per invalid question, -1 per
  repeated one, and -0.05 x the number of questions asked, charged once when the game ends. Unlike
  upstream, the length term also applies to a game that ends after one question, so a shorter game is
  always worth more (a first-question win scores 1.95, not 2).
- ``"success"``: 1 for a win, else 0.
Per-turn penalties arrive as step rewards (``step_rewards``) and are listed in the view.

Secrets come from the built-in nouns of the table oracle by default, or from ``words="coca_plus_train"``
/ ``"coca_plus_test"`` (downloaded and cached, see ``spiral_arena.wordlists``) or ``words_file=PATH``;
``secret=`` fixes one. The table oracle only knows its own nouns, so other word lists need the LLM judge
(``oracle="openai:MODEL"``): asking the table for them is an error at construction.

``world=K`` closes the world: the secret is one of K fixed table nouns (``closed_world``), the prompt lists
them, and the questioner's view holds them (``world``): a world a small model can be taught, where no noun
outside a warm start's games is ever the secret. With a short ``max_questions`` the choice and order of the
questions decide the game (docs/twenty-questions.md has the success rates of the scripted questioners per
world and budget). ``candidates=true`` (with ``world``) also lists, in each
turn message, the world's nouns that still fit every answer: naming the secret is then a matter of copying
a listed noun, and what remains is choosing the questions that shorten the list.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import os
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from spiral_arena.core.actions import extract_answer
from spiral_arena.core.game import TERMINAL, Message, TextGame
from spiral_arena.core.observations import one_line, sanitize
from spiral_arena.core.readback import PositionUnreadable, latest_turn, transcript
from spiral_arena.games.twenty_questions_oracles import (
    JUDGE_ERROR,
    Oracle,
    OracleError,
    TableOracle,
    canonical_questions,
    make_oracle,
    normalize_question,
    plural_forms,
)
from spiral_arena.wordlists import REMOTE_LISTS, load_word_list, read_words

log = logging.getLogger(__name__)

# ---- rules ------------------------------------------------------------------------------

MIN_QUESTION_CHARS, MAX_QUESTION_CHARS = 2, 500
plural_variants = plural_forms  # a word and its simple plurals (s, es, y -> ies): the win rule's plurals
_CONTROL = re.compile("[\x00-\x1f\x7f-\xa0\u2028\u2029]")
_DIGITS = re.compile(r"\d")
_NOT_WORD = re.compile(r"[^\w\s-]|_")


@dataclass(frozen=True)
class RewardConfig:
    win: float
    per_question: float  # times the number of questions, once at the end
    invalid: float
    repeated: float


REWARD_CONFIGS = {
    "delta_belief": RewardConfig(win=2.0, per_question=-0.05, invalid=-5.0, repeated=-1.0),
    "success": RewardConfig(win=1.0, per_question=0.0, invalid=0.0, repeated=0.0),
}


def question_problem(question: str) -> str | None:
    """Why ``question`` is not a valid question, or None if it is."""
    if not MIN_QUESTION_CHARS <= len(question) <= MAX_QUESTION_CHARS:
        return f"it has {len(question)} characters; a question has {MIN_QUESTION_CHARS} to {MAX_QUESTION_CHARS}"
    if not question.endswith("?"):
        return "it does not end with a question mark"
    if question.count("?") != 1:
        return f"it has {question.count('?')} question marks; ask exactly one question"
    if _CONTROL.search(question) or any(unicodedata.category(c) == "Cf" for c in question):
        return "it contains a line break, a control character or an invisible character"
    return None


def words_of(text: str) -> list[str]:
    """Lowercase words with digits removed and punctuation split off; inner hyphens stay ("e-mail")."""
    text = _NOT_WORD.sub(" ", _DIGITS.sub("", text.casefold()))
    return [w for w in (word.strip("-") for word in text.split()) if w]


def names_secret(question: str, secret: str) -> bool:
    """Whether ``question`` mentions ``secret`` as whole word(s), its last word possibly plural."""
    return _mentions(words_of(question), secret)


def nouns_named(question: str, nouns: Sequence[str]) -> list[str]:
    """The ``nouns`` that ``question`` names (``names_secret``), in their order; the question is read once."""
    words = words_of(question)
    return [noun for noun in nouns if _mentions(words, noun)]


def _mentions(words: list[str], secret: str) -> bool:
    target = words_of(secret)
    if not target:
        return False
    head, last = target[:-1], plural_variants(target[-1])
    n = len(target)
    return any(words[i : i + n - 1] == head and words[i + n - 1] in last for i in range(len(words) - n + 1))


def repeat_key(question: str) -> str:
    """Two questions are the same when their words are: case, spacing and punctuation do not count."""
    return normalize_question(question)


@dataclass(frozen=True)
class Asked:
    """One question of the game and the verdict it got."""

    question: str
    verdict: str  # yes, no, win, invalid, repeated or error
    penalty: float  # the turn's own reward (invalid / repeated), before end-of-game terms
    understood: bool = True  # False: the table oracle could not map the question and said "no"
    detail: str | None = None  # why invalid, or JUDGE_ERROR (never the oracle's own words)


class TwentyQuestionsState:
    """The secret, the questions so far and their verdicts; the oracle answers inside ``apply``."""

    def __init__(
        self,
        secret: str,
        oracle: Oracle,
        max_questions: int = 20,
        reward: str = "delta_belief",
        nouns: Sequence[str] | None = None,
    ) -> None:
        """``nouns``: the game's nouns, of which a question may name one (``one_guess``); None = any number."""
        if not words_of(secret):
            raise ValueError(f"the secret {secret!r} has no letters; it must be a word")
        self.secret = secret
        self.oracle = oracle
        self.max_questions = max_questions
        self.reward = REWARD_CONFIGS[reward]
        self.turns: list[Asked] = []
        self.won = False
        self.current_player = 0
        self._answered: dict[str, str] = {}  # repeat key -> the question as first asked
        self.nouns = nouns

    def legal_actions(self) -> None:
        return None  # any text; its validity is a verdict, not an illegal move

    @property
    def questions_left(self) -> int:
        return self.max_questions - len(self.turns)

    @property
    def answered_questions(self) -> list[str]:
        """The questions the oracle answered so far, as asked: what an LLM judge is shown."""
        return list(self._answered.values())

    @property
    def unmapped_questions(self) -> int:
        return sum(not t.understood for t in self.turns)

    def apply(self, question: str) -> None:
        if self.is_terminal():
            raise ValueError("the game is over")
        turn = self.rule_verdict(question)
        if turn is None:
            try:
                reply = self.oracle.answer(self.secret, self.answered_questions, question)
            except OracleError as error:
                log.warning("Twenty Questions: %s had no answer: %s", self.oracle.name, error.reason)
                turn = Asked(question, "error", 0.0, detail=JUDGE_ERROR)
            else:
                turn = Asked(question, reply.answer, 0.0, understood=reply.understood)
                self._answered[repeat_key(question)] = question
        self.won = turn.verdict == "win"
        self.turns.append(turn)
        if self.won or not self.questions_left:
            self.current_player = TERMINAL

    def rule_verdict(self, question: str) -> Asked | None:
        """The turn the game's own rules decide (invalid, repeated or a win), or None when the
        question goes to the oracle."""
        cfg = self.reward
        problem = question_problem(question)
        if problem is None and self.nouns is not None:
            named = nouns_named(question, self.nouns)
            if len(named) > 1:
                shown = ", ".join(named[:3]) + (", ..." if len(named) > 3 else "")
                problem = f"it names {len(named)} of the game's nouns ({shown}); name one at a time"
        if problem is not None:
            return Asked(question, "invalid", cfg.invalid, detail=problem)
        if repeat_key(question) in self._answered:
            return Asked(question, "repeated", cfg.repeated)
        if names_secret(question, self.secret):
            return Asked(question, "win", 0.0)
        return None

    def is_terminal(self) -> bool:
        return self.current_player == TERMINAL

    def returns(self) -> tuple[float]:
        total = sum(t.penalty for t in self.turns)
        if self.is_terminal():
            total += (self.reward.win if self.won else 0.0) + self.reward.per_question * len(self.turns)
        return (total,)


# ---- text -------------------------------------------------------------------------------

FEEDBACK = {
    "yes": "Yes.",
    "no": "No.",
    "invalid": (
        "Invalid question. Ask one yes/no question of 2 to 500 characters that ends with a single question "
        "mark, without line breaks. This turn is used up."
    ),
    "repeated": "You already asked that question. This turn is used up.",
    "error": "The answerer could not answer this question, so it gets no answer. This turn is used up.",
}
_SHOWN_QUESTION_CHARS = MAX_QUESTION_CHARS  # echo of an over-long question, cut to this
ACTION_FORMAT = "Ask one yes/no question ending in a single '?', inside \\boxed{}, e.g. \\boxed{Is it an animal?}"
_EXAMPLES_SHOWN = 5

PROMPT = """\
You are the questioner in a game of Twenty Questions. I have chosen a secret: {secret_kind}. Find it \
by asking yes/no questions; I answer each one with yes or no. You have {max_questions} questions.
You win as soon as one of your questions names the secret word, e.g. "Is it a <word>?".
Rules: ask exactly one question per turn, 2 to 500 characters long, ending with a single question \
mark and without line breaks.{one_guess} An invalid question, or one you already asked, uses up a turn \
and gets no answer.
{scoring}
Write your question inside \\boxed{{}}, for example \\boxed{{Is it an animal?}}; only the boxed text \
is read."""

ONE_GUESS_RULE = " A question may name at most one noun: one that names several is invalid."
SCORING = {
    "delta_belief": (
        "Scoring: +2 for finding the secret; -0.05 for every question asked, counted when the game ends; "
        "-5 for each invalid question and -1 for each repeated one."
    ),
    "success": "Scoring: 1 if you find the secret within the limit, else 0.",
}
BUILTIN_SECRET_KIND = "one common English noun for a concrete thing (an animal, plant, food, object or place)"
LIST_SECRET_KIND = "one English noun"
WORLD_SECRET_KIND = "one of these {size} nouns: {nouns}"
_WORLD = re.compile(r"I have chosen a secret: one of these (\d+) nouns: ([a-z ,-]+)\. Find it")
# A fixed split of the table's nouns for training and held-out evaluation: every fifth noun in sorted
# order is held out (47 of 234), so the split never changes and both halves cover the alphabet.
BUILTIN_SPLITS = ("builtin_train", "builtin_test")
WORD_SOURCES = ("builtin", *BUILTIN_SPLITS, *REMOTE_LISTS)
RECAP_WORDS = {"yes": "yes", "no": "no", "invalid": "invalid, no answer", "repeated": "repeated, no answer"}


_VERDICT_OF_FEEDBACK = {text: verdict for verdict, text in FEEDBACK.items()}
_VERDICT_OF_RECAP = {**{text: verdict for verdict, text in RECAP_WORDS.items()}, "no answer": "error"}
_TURN = re.compile(
    r"(?:Answers so far:\n(.*?)\n)?(?:Still possible \((\d+)\): ([a-z ,-]*)\.\n)?Questions left: (\d+) of (\d+)\.",
    re.DOTALL,
)
_RECAP_LINE = re.compile(r"(\d+)\. (.*) -> (" + "|".join(map(re.escape, _VERDICT_OF_RECAP)) + r")")
_ANSWERED = re.compile(
    r"Question (\d+): (.*)\nAnswer: (" + "|".join(map(re.escape, _VERDICT_OF_FEEDBACK)) + r")", re.DOTALL
)


def _read_questions(observation: str, recap: str | None) -> list[dict[str, str]]:
    """The questions so far with their verdicts: from the turn message's recap when it has one (a line
    per question, ``one_line``), else from the "Question N: ... Answer: ..." messages of a full
    transcript. [] when they are not numbered 1, 2..."""
    if recap is not None:
        matches = (_RECAP_LINE.fullmatch(line) for line in recap.split("\n"))
        found = [(int(m[1]), m[2], _VERDICT_OF_RECAP[m[3]]) if m else (0, "", "") for m in matches]
    else:
        matches = (_ANSWERED.fullmatch(m) for m in transcript(observation))
        found = [(int(m[1]), m[2], _VERDICT_OF_FEEDBACK[m[3]]) for m in matches if m is not None]
    if [n for n, _, _ in found] != list(range(1, len(found) + 1)):
        return []
    return [{"question": question, "answer": verdict} for _, question, verdict in found]


def _unasked_examples(bank: Sequence[str], asked: set[str]) -> list[str]:
    return list(itertools.islice((q for q in bank if repeat_key(q) not in asked), _EXAMPLES_SHOWN))


def closed_world(nouns: Sequence[str], size: int) -> tuple[str, ...]:
    """The ``world=size`` secrets, sorted: the ``size`` nouns first in the order of their SHA-256 digests.
    The order is fixed by the nouns alone (no random generator whose stream a library may change), so a
    world never changes, and a smaller world lies inside every larger one."""
    ranked = sorted(nouns, key=lambda noun: hashlib.sha256(noun.encode()).hexdigest())
    return tuple(sorted(ranked[:size]))


def builtin_split(nouns: Sequence[str], split: str) -> tuple[str, ...]:
    """The ``builtin_train`` or ``builtin_test`` part of the table's nouns."""
    held_out = split == "builtin_test"
    return tuple(w for i, w in enumerate(sorted(nouns)) if (i % 5 == 0) == held_out)


class TwentyQuestions(TextGame):
    name = "TwentyQuestions"
    description = "Twenty Questions: find a secret noun with yes/no questions; one questioner, oracle inside."
    default_obs_format = "full"
    agents = ("questioner",)
    step_rewards = True
    text_options = {"recap": (False, True), "candidates": (False, True)}

    def __init__(
        self,
        secret: str | None = None,
        max_questions: int = 20,
        reward: str = "delta_belief",
        oracle: str | Oracle = "table",
        oracle_base_url: str | None = None,
        oracle_api_key: str | None = None,
        oracle_timeout: float | None = None,
        oracle_retries: int | None = None,
        words: str = "builtin",
        words_file: str | os.PathLike[str] | None = None,
        recap: bool = False,
        world: int = 0,
        candidates: bool = False,
        one_guess: bool = False,
    ) -> None:
        """``secret`` fixes the secret; otherwise each reset draws one from ``words`` (or ``words_file``):
        ``builtin_train`` / ``builtin_test`` are a fixed 187 / 47 split of the table's nouns.

        ``world``: K > 0 picks the secrets from ``closed_world(table nouns, K)`` and names them in the
        prompt; 0 (the default) is the open world of ``words``. ``candidates`` (with ``world``): every turn
        message lists the world's nouns that fit every answer so far (and were not named). ``one_guess``: a
        question naming more than one of the game's nouns (its word list or world) is invalid.

        ``recap``: every turn message also lists the questions so far with their answers, one line each (an
        invalid question's line breaks shown as spaces), so the latest message alone (``obs_format="last"``)
        holds the whole game in a few lines: short prompts for small models, where the full transcript
        repeats the instructions at every turn.

        ``oracle``: ``"table"`` (offline, built-in nouns only), ``"openai:MODEL"`` (an LLM judge at
        ``oracle_base_url`` or ``$OPENAI_BASE_URL``, key from ``oracle_api_key`` or ``$OPENAI_API_KEY``),
        or an ``Oracle`` object. ``deterministic`` is False with an LLM judge. ``oracle_timeout`` (seconds
        per request attempt, default 60) and ``oracle_retries`` (attempts after a failed one, default 4)
        bound how long a stalled judge holds a turn.
        """
        if not isinstance(recap, bool):
            raise ValueError(f"recap must be true or false, got {recap!r}")
        self.recap = recap
        if isinstance(max_questions, bool) or not isinstance(max_questions, int) or max_questions < 1:
            raise ValueError(f"max_questions must be a positive integer, got {max_questions!r}")
        if reward not in REWARD_CONFIGS:
            raise ValueError(f"reward must be one of {tuple(REWARD_CONFIGS)}, got {reward!r}")
        if words not in WORD_SOURCES:
            raise ValueError(f"words must be one of {WORD_SOURCES} (or use words_file=PATH), got {words!r}")
        if words_file is not None and words != "builtin":
            raise ValueError(f"give either words={words!r} or words_file, not both")
        if secret is not None and (words != "builtin" or words_file is not None):
            raise ValueError("give either a fixed secret or a word list (words / words_file), not both")
        if secret is not None and not isinstance(secret, str):
            raise ValueError(f"secret must be a word (a str), got {secret!r}")
        table_size = len(TableOracle().nouns)
        if isinstance(world, bool) or not isinstance(world, int) or not (world == 0 or 2 <= world <= table_size):
            raise ValueError(
                f"world must be 0 (the open world) or a number of table nouns from 2 to {table_size}, got {world!r}"
            )
        if not isinstance(one_guess, bool):
            raise ValueError(f"one_guess must be true or false, got {one_guess!r}")
        self.one_guess = one_guess
        if not isinstance(candidates, bool):
            raise ValueError(f"candidates must be true or false, got {candidates!r}")
        if candidates and not world:
            raise ValueError("candidates=true lists the nouns of a closed world that still fit: give it with world=K")
        self.candidates = candidates
        self._alike: dict[tuple[str, str], frozenset[str]] = {}
        if world and (secret is not None or words != "builtin" or words_file is not None or oracle != "table"):
            raise ValueError(
                "world=K takes its secrets from the table oracle's nouns: give it without secret, words, "
                "words_file or another oracle"
            )
        self.oracle = make_oracle(oracle, oracle_base_url, oracle_api_key, oracle_timeout, oracle_retries)
        self.deterministic = self.oracle.deterministic
        self.max_questions, self.reward = max_questions, reward
        self.secret = secret.strip() if secret is not None else None
        self.world = closed_world(TableOracle().nouns, world) if world else None
        if self.world is not None:
            pool: Sequence[str] = self.world
        elif self.secret is not None:
            pool = (self.secret,)
        elif words_file is not None:
            pool = read_words(words_file)
        elif words == "builtin":
            pool = TableOracle().nouns
        elif words in BUILTIN_SPLITS:
            pool = builtin_split(TableOracle().nouns, words)
        else:
            pool = load_word_list(words)
        wordless = [w for w in pool if not words_of(w)]
        if wordless:
            raise ValueError(f"every secret must contain letters; these do not: {wordless[:5]}")
        self.oracle.check_secrets(pool)
        self.words = tuple(pool)
        builtin = words in ("builtin", *BUILTIN_SPLITS) and words_file is None
        self.secret_kind = BUILTIN_SECRET_KIND if builtin else LIST_SECRET_KIND
        if self.world is not None:
            self.secret_kind = WORLD_SECRET_KIND.format(size=len(self.world), nouns=", ".join(self.world))
        self.example_bank = canonical_questions()

    def new_state(self, rng: np.random.Generator) -> TwentyQuestionsState:
        secret = self.words[int(rng.integers(len(self.words)))] if self.secret is None else self.secret
        nouns = self.words if self.one_guess else None
        return TwentyQuestionsState(secret, self.oracle, self.max_questions, self.reward, nouns)

    def prompt(self, player: int) -> str:
        return PROMPT.format(
            secret_kind=self.secret_kind,
            max_questions=self.max_questions,
            one_guess=ONE_GUESS_RULE if self.one_guess else "",
            scoring=SCORING[self.reward],
        )

    def turn_message(self, state: TwentyQuestionsState, player: int) -> str:
        lines = [f"Questions left: {state.questions_left} of {state.max_questions}."]
        if self.candidates:
            fitting = self.fitting(state)
            lines.insert(0, f"Still possible ({len(fitting)}): {', '.join(fitting)}.")
        if self.recap and state.turns:
            lines[:0] = [
                "Answers so far:",
                *(
                    f"{n}. {one_line(t.question)} -> {RECAP_WORDS.get(t.verdict, 'no answer')}"
                    for n, t in enumerate(state.turns, 1)
                ),
            ]
        return "\n".join(lines)

    def fitting(self, state: TwentyQuestionsState) -> list[str]:
        """The world's nouns that the table answers as the game was answered, and that no question named."""
        fits = set(self.world or ())
        for turn in state.turns:
            if turn.verdict in ("yes", "no"):
                fits &= self._answered_alike(turn.question, turn.verdict)
        return [noun for noun in self.world or () if noun in fits]

    def _answered_alike(self, question: str, verdict: str) -> frozenset[str]:
        """The world's nouns the table gives ``verdict`` for ``question`` and that it does not name; cached
        per question (a game asks each at several turns, a run the same few hundred again and again)."""
        key = (question, verdict)
        if key not in self._alike:
            if len(self._alike) >= 100_000:  # a bound on what a long run's free-text questions can hold
                self._alike.clear()
            named = set(nouns_named(question, self.world or ()))
            self._alike[key] = frozenset(
                noun
                for noun in self.world or ()
                if noun not in named and self.oracle.answer(noun, [], question).answer == verdict
            )
        return self._alike[key]

    def parse(self, state: TwentyQuestionsState, text: str) -> str:
        """The question: the last boxed text, else the whole answer. Never an invalid move: a bad
        question is a verdict that costs a turn."""
        return extract_answer(text)

    def prefetch_answers(self, moves: Sequence[tuple[TwentyQuestionsState, str]]) -> None:
        """Let the oracle answer many games' next questions at once (an LLM judge asks them
        concurrently and caches the answers); only questions that will reach the oracle are sent,
        not invalid, repeated or winning ones. A no-op for the table oracle."""
        prefetch = getattr(self.oracle, "prefetch", None)
        if prefetch is None:
            return
        queries = []
        for state, text in moves:
            question = self.parse(state, text)
            if not state.is_terminal() and state.rule_verdict(question) is None:
                queries.append((state.secret, state.answered_questions, question))
        prefetch(queries)

    def legal_action_strings(self, state: TwentyQuestionsState) -> None:
        return None

    def action_format(self, state: TwentyQuestionsState) -> str:
        return ACTION_FORMAT

    def action_examples(self, state: TwentyQuestionsState) -> list[str]:
        """The next few table questions not yet answered (the same for every secret)."""
        return _unasked_examples(self.example_bank, {repeat_key(t.question) for t in state.turns})

    @staticmethod
    def examples_from_view(view: dict[str, Any]) -> list[str]:
        """``action_examples`` from the questioner's view (what ``read_position`` gives)."""
        return _unasked_examples(canonical_questions(), {repeat_key(q["question"]) for q in view["questions"]})

    @staticmethod
    def read_position(observation: str) -> dict[str, Any] | None:
        """The questioner's view read back from its observation, or None when the latest turn message is
        not a Twenty Questions turn. It holds ``questions`` (each as shown: over-long questions cut, line
        breaks as spaces and characters outside the observation charset as '?'), ``questions_asked``,
        ``questions_left`` and ``max_questions``, ``world`` (the closed world's nouns when the observation
        holds the prompt that lists them, else None) and ``candidates`` (the listed nouns that still fit,
        with ``candidates=true``, else None); the verdicts' penalties and the oracle's details are not
        shown, so not read.
        The questions come from a full transcript (``obs_format="full"``, the default) or from the
        recap of ``recap=true``; other observations raise ``PositionUnreadable`` once a question was asked.
        """
        turn = latest_turn(observation)
        match = None if turn is None else _TURN.fullmatch(turn.message)
        if match is None:
            return None
        recap, left, max_questions = match.group(1), int(match.group(4)), int(match.group(5))
        asked = max_questions - left
        questions = _read_questions(observation, recap) if asked else []
        if len(questions) != asked:
            raise PositionUnreadable(
                "TwentyQuestions",
                f"the {asked} question{'' if asked == 1 else 's'} asked so far with their answers "
                "(obs_format='full', the default, or recap=true shows them)",
            )
        world = _WORLD.search(observation)
        return {
            "questions": questions,
            "questions_asked": asked,
            "questions_left": left,
            "max_questions": max_questions,
            "world": world[2].split(", ") if world and len(world[2].split(", ")) == int(world[1]) else None,
            "candidates": None if match.group(2) is None else [n for n in match.group(3).split(", ") if n],
        }

    def player_view(self, state: TwentyQuestionsState, player: int) -> dict[str, Any]:
        """questions: each asked question with its verdict (yes, no, invalid, repeated, error);
        last_turn: the latest verdict, its penalty and any reason; unmapped_questions: how many
        questions the table oracle could not read (each was answered "no"); world: the closed world's
        nouns (``world=K``, the prompt lists them too), else None; candidates: with ``candidates=true``
        the world's nouns that still fit every answer, as the turn message lists them, else None."""
        last = state.turns[-1] if state.turns else None
        return {
            "questions": [{"question": t.question, "answer": t.verdict} for t in state.turns],
            "questions_asked": len(state.turns),
            "questions_left": state.questions_left,
            "max_questions": state.max_questions,
            "last_turn": None
            if last is None
            else {"verdict": last.verdict, "turn_penalty": last.penalty, "detail": last.detail},
            "unmapped_questions": state.unmapped_questions,
            "world": None if self.world is None else list(self.world),
            "candidates": self.fitting(state) if self.candidates else None,
        }

    def step_info(self, state: TwentyQuestionsState) -> dict[str, Any]:
        """verdict, turn_penalty and detail of the latest question (also after the last one), and
        how many questions the table oracle could not read, for turn-level credit assignment."""
        if not state.turns:
            return {"unmapped_questions": state.unmapped_questions}
        last = state.turns[-1]
        return {
            "verdict": last.verdict,
            "turn_penalty": last.penalty,
            "detail": last.detail,
            "unmapped_questions": state.unmapped_questions,
        }

    def move_messages(self, state: TwentyQuestionsState, player: int, question: str) -> list[Message]:
        turn = state.turns[-1]
        shown = question if len(question) <= _SHOWN_QUESTION_CHARS else question[:_SHOWN_QUESTION_CHARS] + "..."
        found = f"Yes! You found it: the secret is {sanitize(state.secret)}."
        reply = found if turn.verdict == "win" else FEEDBACK[turn.verdict]
        return [(0, f"Question {len(state.turns)}: {one_line(shown)}\nAnswer: {reply}")]

    def winner(self, state: TwentyQuestionsState) -> int | None:
        """The questioner (player 0) when it found the secret, else None: the env's ``outcome`` winner.
        There is no opponent to win instead, and the rewards cannot tell (penalties can make a win
        score below zero)."""
        return 0 if state.won else None

    def outcome_reason(self, state: TwentyQuestionsState) -> str:
        n = len(state.turns)
        if state.won:
            return f"The questioner found the secret '{sanitize(state.secret)}' with question {n}."
        return f"No questions left: the secret was '{sanitize(state.secret)}'."

    def render(self, state: TwentyQuestionsState) -> str:
        lines = [f"Secret: {sanitize(state.secret)}  questions: {len(state.turns)}/{state.max_questions}"]
        lines += [f"{i}. {sanitize(t.question[:80])} -> {t.verdict}" for i, t in enumerate(state.turns, 1)]
        return "\n".join(lines)

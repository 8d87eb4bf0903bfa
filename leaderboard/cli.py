"""``spiral-arena leaderboard [run|show]``: arguments here, work in the modules they call.

Without a subcommand it plays the default round robin (built-in agents and the latest checkpoint of
every run under ./runs, on the three training games) and prints the table. ``--reasoning DIR`` adds the
``spiral-arena eval`` average of each ``hf:`` entrant that has a run there (see ``leaderboard.reasoning``);
it is checked before any game is played. Single-player games (Twenty Questions) in ``--games`` are played
by every agent alone on the same seeds and get a success-rate table instead of ratings. ``--weighting``,
``--min-games`` and ``--max-interval`` (``run`` and ``show``) set how the overall fit weighs game ids and
when a rating is provisional; their defaults live in ``leaderboard.settings``. ``--price MODEL=IN/OUT``
(``run`` and ``show``, repeatable) prices API agents' tokens for the cost columns; bad prices fail
before any game is played. ``run --reference-pool FILE`` takes its entrants, games, games per pair and
seed from a frozen benchmark file and adds the ``--agents`` to it (see ``leaderboard.reference_pool``).
Every file a command writes (``run --db``, ``show --html/--png/--csv/--json``) is checked for
writability before any game is played or any result read, and a ``--db`` that is not a usable leaderboard
database (garbage, cut short, damaged, another program's SQLite file) is refused in one line before anything
is played or shown (``store.check_database``); another program's file is never written.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

DEFAULT_DB = "leaderboard.sqlite"
DEFAULT_GAMES_PER_PAIR = 20
# The default board (no subcommand: random, expert and local checkpoints, nothing that costs money) plays more:
# a checkpoint that wins 57% of 5-round Kuhn games against random landed on either side of it at 20 per pair.
DEFAULT_BOARD_GAMES_PER_PAIR = 100
REPORT_KINDS = ("html", "png", "csv", "json")  # show's report files: --KIND PATH, written by report.write_KIND
REASONING_HELP = (
    "an eval run directory (spiral-arena eval --output-dir), or a folder of them: adds a Reasoning column "
    "with the run's benchmark average for the hf: entrant of the same model"
)


def _csv(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def _add_rating_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags that decide how standings are fitted and judged, the same for ``run`` and ``show``."""
    from leaderboard.settings import DEFAULT_WEIGHTING, MAX_INTERVAL, MIN_GAMES, WEIGHTINGS

    parser.add_argument(
        "--weighting",
        default=DEFAULT_WEIGHTING,
        metavar="|".join(WEIGHTINGS),
        help="how the overall table weighs game ids: games = every game counts once, the plain fit to all "
        "games played, whose intervals are their sampling error (the default, so the intervals keep that "
        "meaning); equal = every game id weighs the same whatever its number of games, so one heavily "
        "played game cannot settle the overall order (wider intervals). Per-game tables are unaffected "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--min-games",
        default=MIN_GAMES,
        metavar="N",
        help="a rating from fewer than N games in its table is marked provisional (default: %(default)s)",
    )
    parser.add_argument(
        "--max-interval",
        default=MAX_INTERVAL,
        metavar="ELO",
        help="a rating whose 95%% interval is wider than ELO points is marked provisional (default: %(default).0f)",
    )


def _add_price_argument(parser: argparse.ArgumentParser) -> None:
    from leaderboard.settings import PRICE_EXAMPLE, PRICE_FORM, RATING_PER_CENT

    parser.add_argument(
        "--price",
        action="append",
        default=[],
        metavar=PRICE_FORM,
        help="US dollars per million input (prompt) and output (completion) tokens of a model, e.g. "
        f"{PRICE_EXAMPLE}; repeatable. MODEL is matched against an entrant's label first, then its model id "
        "(openai:gpt-4o@URL has model id gpt-4o). Adds, for API agents with token counts, $/game (per finished "
        f"game) and Elo/cent = {RATING_PER_CENT}".replace("%", "%%"),
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from leaderboard.schedule import DEFAULT_GAMES

    parser.description = (
        "Cross-play ratings. Without a subcommand: a duplicate round robin of random, expert and the latest "
        "checkpoint of every run under ./runs on the training games, stored in leaderboard.sqlite, then the table."
    )
    parser.add_argument(
        "--reasoning", dest="default_reasoning", type=Path, metavar="DIR", help=f"default run only: {REASONING_HELP}"
    )
    sub = parser.add_subparsers(dest="leaderboard_command")
    run = sub.add_parser(
        "run", help="play a duplicate round robin (single-player games: every agent alone) and store every game"
    )
    run.add_argument(
        "--agents",
        default=None,
        help="comma-separated entries [NAME=]SPEC[#OPTION=VALUE...], e.g. random,expert#alpha=0.2,hf:PATH,vllm:PATH "
        "(default: random, expert and the latest checkpoint of each run under ./runs; with --reference-pool: "
        "the agents to add to the pool, none by default)",
    )
    run.add_argument(
        "--reference-pool",
        type=Path,
        metavar="FILE",
        help="a frozen benchmark (TOML: agents, games, games_per_pair, seed; see "
        "leaderboard/reference_pool.example.toml): its agents play each other and every --agents entry plays "
        "each of them, on its games and seeds; games already stored are reused, never replayed. Replaces "
        "--games, --games-per-pair and --seed",
    )
    # --games, --games-per-pair and --seed default to None so that giving one with --reference-pool is an error
    run.add_argument(
        "--games",
        default=None,
        help="comma-separated env ids, each with options if any (ID:key=value;key=value); "
        f"options are part of the game's identity (default: {','.join(DEFAULT_GAMES)})",
    )
    run.add_argument(
        "--games-per-pair",
        type=int,
        default=None,
        help="games per pair and game id, even: each seed is played from both seats; in single-player games, "
        "games per agent (any number >= 1, seeds SEED, SEED+1, ... for every agent) "
        f"(default: {DEFAULT_GAMES_PER_PAIR})",
    )
    run.add_argument("--db", default=DEFAULT_DB, help="SQLite file of results (default: %(default)s)")
    run.add_argument("--workers", type=int, default=1, help="worker processes (default: %(default)s)")
    run.add_argument(
        "--concurrency",
        metavar="N",
        help="games in flight at once in each process, stored exactly as if played one by one: API agents' "
        "requests overlap and hf: agents generate in batches (default: 32 when an entrant is an API or hf: "
        "agent, else 1)",
    )
    run.add_argument("--seed", type=int, default=None, help="first game seed; seeds are SEED, SEED+1, ... (default: 0)")
    run.add_argument("--retry-errors", action="store_true", help="play again the games stored as errors")
    run.add_argument("--runs", default="runs", help="where to look for checkpoints without --agents (default: runs)")
    run.add_argument("--no-progress", action="store_true", help="no progress bar")
    run.add_argument("--reasoning", type=Path, metavar="DIR", help=REASONING_HELP)
    _add_rating_arguments(run)
    _add_price_argument(run)

    show = sub.add_parser("show", help="ratings, success rates and tables from a results database")
    show.add_argument("--db", default=DEFAULT_DB, help="SQLite file of results (default: %(default)s)")
    show.add_argument("--game", default=None, help="only this env id (with its options, if it was run with any)")
    show.add_argument("--html", type=Path, help="write a self-contained HTML page here")
    show.add_argument("--png", type=Path, help="write the ratings plot and heatmap here")
    show.add_argument("--csv", type=Path, help="write the standings as CSV here")
    show.add_argument("--json", type=Path, help="write the standings and head-to-head records as JSON here")
    show.add_argument("--reasoning", type=Path, metavar="DIR", help=REASONING_HELP)
    _add_rating_arguments(show)
    _add_price_argument(show)


def _price(standings, prices: dict, agents: dict) -> None:
    """Cost columns for the priced agents; a price that matches no agent with token counts is named on stderr."""
    from leaderboard.standings import apply_prices

    if not prices:
        return
    labels = {row.label for scope in standings.scopes for row in scope.agents}
    specs = {label: agents[label].spec if label in agents else label for label in labels}
    for model in apply_prices(standings, prices, specs):
        print(
            f"spiral-arena leaderboard: note: --price {model} matches no agent with token counts "
            "(by label or model id)",
            file=sys.stderr,
        )


def _show(standings, args: argparse.Namespace) -> None:
    """The tables, then each report file asked for; a write that fails anyway (checked beforehand, so a
    full disk, say) is a RuntimeError of one line."""
    from leaderboard import report
    from spiral_arena.outputs import write_failure

    report.print_tables(standings)
    for kind in REPORT_KINDS:
        path = getattr(args, kind, None)
        if path is not None:
            try:
                getattr(report, f"write_{kind}")(standings, path)
            except OSError as error:
                raise RuntimeError(write_failure(f"--{kind}", path, error)) from None
            print(f"wrote {path}")


def _concurrency(text: str | None) -> int | None:
    """``--concurrency`` as a number (None: the run's default), or a one-line ValueError."""
    if text is None:
        return None
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"--concurrency: must be a whole number of games >= 1, got {text!r}")
    return value


def _parsed(text: Any, kind: Callable[[str], Any]) -> Any:
    """``kind(text)``, or None when ``text`` does not read as one."""
    try:
        return kind(str(text))
    except ValueError:
        return None


def _rating_options(args: argparse.Namespace) -> dict[str, Any]:
    """``--weighting``, ``--min-games`` and ``--max-interval`` as ``compute`` keywords, or one ValueError
    naming every bad value and what is valid, raised before any game is played."""
    from leaderboard.settings import WEIGHTINGS

    problems = []
    if args.weighting not in WEIGHTINGS:
        problems.append(f"--weighting: must be {' or '.join(WEIGHTINGS)}, got {args.weighting!r}")
    min_games = _parsed(args.min_games, int)
    if min_games is None or min_games < 0:
        problems.append(f"--min-games: must be a whole number of games >= 0, got {args.min_games!r}")
    max_interval = _parsed(args.max_interval, float)
    if max_interval is None or not 0 < max_interval < math.inf:
        problems.append(f"--max-interval: must be a finite number of Elo points > 0, got {args.max_interval!r}")
    if problems:
        raise ValueError("; ".join(problems))
    return {"weighting": args.weighting, "min_games": min_games, "max_interval": max_interval}


def _field(args: argparse.Namespace) -> tuple[list, list[str], int, int, list[str] | None]:
    """Who plays what: (entrants, env ids, games per pair, first seed, the reference pool's labels or None),
    from ``--reference-pool`` and ``--agents``, or from ``--agents``, ``--games``, ``--games-per-pair`` and
    ``--seed``; every check that needs no database, as one ValueError."""
    from leaderboard.entrants import default_entrants, parse_entrant, parse_entrants
    from leaderboard.reference_pool import load_pool
    from leaderboard.schedule import DEFAULT_GAMES, check_games

    if args.reference_pool is None:
        entrants = default_entrants(Path(args.runs)) if args.agents is None else parse_entrants(args.agents)
        games = check_games(_csv(args.games if args.games is not None else ",".join(DEFAULT_GAMES)))
        per_pair = DEFAULT_GAMES_PER_PAIR if args.games_per_pair is None else args.games_per_pair
        return entrants, games, per_pair, 0 if args.seed is None else args.seed, None
    given = [flag for flag in ("games", "games_per_pair", "seed") if getattr(args, flag) is not None]
    if given:
        flags = ", ".join(f"--{flag.replace('_', '-')}" for flag in given)
        raise ValueError(
            f"{flags}: the reference pool {args.reference_pool} fixes the games, games per pair and seed; drop {flags}"
        )
    pool = load_pool(args.reference_pool)
    entrants = pool.with_agents([parse_entrant(item) for item in _csv(args.agents or "")])
    return entrants, list(pool.games), pool.games_per_pair, pool.seed, pool.labels


def cmd_run(args: argparse.Namespace) -> int:
    from leaderboard import store
    from leaderboard.reference_pool import stored_problems
    from leaderboard.runner import run
    from leaderboard.standings import compute, parse_prices
    from spiral_arena.agents import options_problem, spec_problem

    concurrency = _concurrency(args.concurrency)
    rating_options = _rating_options(args)
    prices = parse_prices(args.price)
    entrants, games, games_per_pair, seed, reference = _field(args)  # canonical ids, before any model loads
    problems = [
        p for e in entrants if (p := spec_problem(e.spec, human=False) or options_problem(e.stored_spec, e.kwargs))
    ]
    problems += _output_problems(args, database=True)
    if store.database_problem(args.db) is None:  # (a database the run cannot write is not even read)
        try:  # a broken or foreign file fails now, not after the games; stored games are reused by label
            store.check_database(args.db)
            problems += stored_problems(args.db, entrants)  # so each label must be the same agent
        except store.StoreError as error:
            problems.append(str(error))
    if problems:  # a missing model, a bad option or an unwritable output fails now, not game by game
        raise ValueError("; ".join(problems))
    reasoning = None
    if args.reasoning is not None:  # a wrong DIR should fail now, not after the games
        from leaderboard.reasoning import load_column

        reasoning = load_column(args.reasoning, {e.label: e.spec for e in entrants})
    if reference is not None:
        added = [e.label for e in entrants if e.label not in reference]
        print(
            f"reference pool {args.reference_pool}: {len(reference)} agents, {games_per_pair} games per pair from "
            f"seed {seed} on {', '.join(games)}; added: {', '.join(added) or 'none'}"
        )
    summary = run(
        args.db,
        entrants,
        games,
        games_per_pair,
        seed=seed,
        workers=args.workers,
        retry_errors=args.retry_errors,
        progress=False if args.no_progress else None,
        concurrency=concurrency,
        reference=reference,
    )
    print(
        f"{summary.scheduled} games scheduled: {summary.already_stored} already stored, {summary.played} played, "
        f"{len(summary.errors)} ended by an agent error (stored, not rated) -> {args.db}"
    )
    conn = store.connect(args.db)
    try:
        labels = [e.label for e in entrants]
        agents = store.load_agents(conn)
        rated = store.load_games(conn, games, labels)
        if reference is not None:  # the pool's games and seeds only: no other game between these labels
            rated = [g for g in rated if (g.env_id, g.player0, g.player1, g.seed) in summary.keys]
        standings = compute(rated, agents, notes=store.load_notes(conn), **rating_options)
    finally:
        conn.close()
    standings.reasoning = reasoning
    _price(standings, prices, agents)
    _show(standings, args)
    if summary.errors:  # stored and shown, but the run did not do all it was asked
        print(
            f"{len(summary.errors)} game(s) ended by an agent error; fix the agent and play them again with "
            "--retry-errors",
            file=sys.stderr,
        )
        return 1
    return 0


def _output_problems(args: argparse.Namespace, database: bool) -> list[str]:
    """Report files (and with ``database``, a run's ``--db``) that cannot be written, found before any
    game is played or any database is read: hours of games must not end in a PermissionError."""
    from leaderboard.store import database_problem
    from spiral_arena.outputs import write_problem

    problems = []
    if database and (problem := database_problem(args.db)) is not None:
        problems.append(f"--db {args.db} {problem}")
    for kind in REPORT_KINDS:
        path = getattr(args, kind, None)
        if path is not None and (problem := write_problem(path, make_parents=False)) is not None:
            problems.append(f"--{kind} {path} {problem}")
    return problems


def cmd_show(args: argparse.Namespace) -> int:
    from leaderboard import store
    from leaderboard.standings import compute, parse_prices
    from spiral_arena.registry import GameSpec

    problems = _output_problems(args, database=False)
    if problems:
        raise ValueError("; ".join(problems))
    rating_options = _rating_options(args)
    prices = parse_prices(args.price)

    store.check_database(args.db)  # a broken or foreign file is one line, whichever of its rows is damaged
    conn = store.open_readonly(args.db)  # showing never creates, migrates or writes the file
    try:
        game = None if args.game is None else GameSpec.parse(args.game).canonical
        games = store.load_games(conn, None if game is None else [game])
        if not games and args.game is not None:
            stored = store.stored_env_ids(conn)
            raise ValueError(f"no games of {args.game} in {args.db}; stored games: {', '.join(stored) or 'none'}")
        agents = store.load_agents(conn)
        standings = compute(games, agents, notes=store.load_notes(conn), **rating_options)
    finally:
        conn.close()
    if args.reasoning is not None:
        from leaderboard.reasoning import load_column

        # agents whose model never loaded have no record; their label is then their spec (or a name)
        labels = {row.label for scope in standings.scopes for row in scope.agents}
        specs = {label: agents[label].spec if label in agents else label for label in labels}
        standings.reasoning = load_column(args.reasoning, specs)
    _price(standings, prices, agents)
    _show(standings, args)
    return 0


def main(args: argparse.Namespace) -> int:
    """Entry from ``spiral-arena leaderboard``; no subcommand means the default run."""
    command = args.leaderboard_command
    reasoning = args.default_reasoning
    if command is None:
        parser = argparse.ArgumentParser()
        add_arguments(parser)
        per_pair = ["--games-per-pair", str(DEFAULT_BOARD_GAMES_PER_PAIR)]
        args = parser.parse_args(["run", *per_pair] + ([] if reasoning is None else ["--reasoning", str(reasoning)]))
    elif reasoning is not None:
        raise ValueError(f"give --reasoning after the subcommand: spiral-arena leaderboard {command} --reasoning DIR")
    try:
        return cmd_show(args) if command == "show" else cmd_run(args)
    except RuntimeError as error:
        print(f"spiral-arena leaderboard: {error}", file=sys.stderr)
        return 1

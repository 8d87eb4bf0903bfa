"""The ``spiral-arena`` command. Each subcommand imports what it needs when it runs."""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

import spiral_arena
from spiral_arena.core.env import SEED_LIMIT


class UsageError(ValueError):
    """Bad arguments, one line per problem ("--flag: what is wrong, what is valid"), found before
    anything is loaded or written."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("\n".join(problems))


def _check(problems: list[str]) -> None:
    if problems:
        raise UsageError(problems)


def _count_problem(flag: str, value: int, low: int = 1) -> list[str]:
    return [] if value >= low else [f"{flag}: must be at least {low}, got {value}"]


def _seed_problem(seed: int | None, games: int = 1) -> list[str]:
    """Seeds SEED .. SEED + games - 1 must all obey the envs' seed rule, [0, 2**64)."""
    if seed is None or 0 <= seed and seed + max(games, 1) - 1 < SEED_LIMIT:
        return []
    return [f"--seed: must be an integer in [0, 2**64 - games), got {seed}"]


def _env_problems(flag: str, env_ids: list[str], obs_format: str = "") -> list[str]:
    """Each env id (with options) that ``make`` refuses; built once, exactly as the command will."""
    from spiral_arena.registry import env_id_problem

    if not env_ids:
        return [f"{flag}: give at least one env id, e.g. KuhnPoker-v0 (spiral-arena envs lists them)"]
    return [f"{flag}: {problem}" for env_id in env_ids if (problem := env_id_problem(env_id, obs_format))]


def _spec_problems(flag: str, spec: str, human: bool) -> list[str]:
    from spiral_arena.agents import spec_problem

    problem = spec_problem(spec, human=human)
    return [] if problem is None else [f"{flag}: {problem}"]


def _output_problem(flag: str, path: str, directory: bool = False) -> list[str]:
    """An output file (or with ``directory``, folder) this user cannot write, found before the work."""
    from spiral_arena.outputs import write_problem

    problem = write_problem(path, directory=directory)
    return [] if problem is None else [f"{flag}: {path} {problem}"]


def _kept_problem(flag: str, path: Path, overwrite: bool) -> list[str]:
    """Earlier output is replaced only when asked (``--overwrite``): nothing is lost by running twice. (A
    device such as /dev/stdout is written to, not replaced.)"""
    if overwrite or not (path.is_file() or path.is_dir()):
        return []
    return [f"{flag}: {path} exists already; add --overwrite to replace it, or give another path"]


def _about(error: OSError, path: str) -> bool:
    """Whether ``error`` came from writing ``path``: it names that file or a folder above it, or no
    file at all (a write to an open file that fails, a full disk)."""
    if error.filename is None:
        return True
    target = Path(path).absolute()
    return Path(error.filename).absolute() in (target, *target.parents)


def cmd_envs(args: argparse.Namespace) -> int:
    from spiral_arena.registry import REGISTRY

    width = max(len(env_id) for env_id in REGISTRY)
    for env_id, spec in REGISTRY.items():
        print(f"{env_id:<{width}}  {spec.game.description}")
        text = spec.game.text_options
        for kind, names in (("options", [n for n in spec.options if n not in text]), ("text options", list(text))):
            if names:
                print(f"{'':<{width}}  {kind}: {', '.join(f'{n}={spec.options[n]!r}' for n in names)}")
    print(
        "\nOptions go after the id, ID:key=value;key=value (e.g. KuhnPoker-v0:rounds=1), in every command and in "
        "spiral_arena.make. Every env also takes obs_format (full, first_last, last) and invalid_move (lose, retry). "
        "Text options (and obs_format) change only what a player reads: a checkpoint is shown each game in the text "
        "it trained on, and plays the match's rules (docs/agents.md)."
    )
    return 0


def cmd_play(args: argparse.Namespace) -> int:
    from spiral_arena.agents import make_agent, parse_spec, split_options
    from spiral_arena.core.actions import extract_answer
    from spiral_arena.inflight import default_concurrency
    from spiral_arena.llm import PROVIDERS
    from spiral_arena.play import play_games
    from spiral_arena.registry import make

    problems = _env_problems("env_id", [args.env_id])
    problems += _spec_problems("--p0", args.p0, human=True) + _spec_problems("--p1", args.p1, human=True)
    problems += _count_problem("--games", args.games) + _seed_problem(args.seed, args.games)
    if args.concurrency is not None:
        problems += _count_problem("--concurrency", args.concurrency)
    _check(problems)
    env = make(args.env_id)
    specs = [args.p0, args.p1][: len(env.possible_agents)]
    human = "human" in specs
    concurrency = args.concurrency or (1 if human else min(args.games, default_concurrency(specs)))
    if human and concurrency > 1:
        _check(["--concurrency: a human player plays one game at a time; leave it out"])

    def built(spec: str):  # an API agent gets a connection per game in flight unless its spec sets one
        own = parse_spec(split_options(spec)[0]).kind in PROVIDERS and "concurrency" not in split_options(spec)[1]
        return make_agent(spec, concurrency=concurrency) if own else make_agent(spec)

    agents = [built(s) for s in specs]
    verbose = not args.quiet and not human  # a human already sees everything
    moves = verbose and concurrency == 1  # with games in flight, moves would interleave: each game's verdict only

    def show_move(agent: str, text: str) -> None:
        answer = " ".join(extract_answer(text).split())
        print(f"  {agent}: {answer[:120]}{'...' if len(answer) > 120 else ''}")

    def show_start(index: int, seed: int | None) -> None:
        print(f"--- game {index + 1} (seed {seed}) ---")

    seeds = [None if args.seed is None else args.seed + g for g in range(args.games)]
    totals = [0.0] * len(agents)
    wins, draws, invalid, errors = [0] * len(agents), 0, [0] * len(agents), 0
    played = play_games(
        args.env_id, agents, seeds, concurrency, show_move if moves else None, show_start if moves else None
    )
    for g, record in played:
        if record.error is not None:  # an interrupted game is reported, never scored
            errors += 1
            print(f"game {g + 1} (seed {record.seed}) stopped by {record.error}")
            continue
        for i, r in enumerate(record.returns):
            totals[i] += r
        if len(agents) == 1:
            wins[0] += record.returns[0] > 0
        elif record.returns[0] == record.returns[1]:
            draws += 1
        else:
            wins[record.returns.index(max(record.returns))] += 1
        for name in record.invalid:
            invalid[env.possible_agents.index(name)] += 1
        if human or moves:
            print(record.ends[specs.index("human") if human else 0])
        elif verbose:
            print(f"game {g + 1} (seed {record.seed}): {record.ends[0]}")
    played = args.games - errors
    print(f"\n{played} game(s) of {args.env_id}" + (f", {errors} stopped by errors (not scored)" if errors else ""))
    for i, spec in enumerate(specs):
        label = "games with a positive reward" if len(agents) == 1 else "wins"
        print(
            f"  {env.possible_agents[i]} ({spec}): {label} {wins[i]}, losses {played - wins[i] - draws}, "
            f"mean reward {totals[i] / max(1, played):+.3f}, invalid moves {invalid[i]}"
        )
    if len(agents) == 2:
        print(f"  draws: {draws}")
    return 1 if errors else 0


def _api_key(given: str | None, variable: str) -> str | None:
    """A server's bearer token: ``--api-key``, else ``$variable`` (which keeps it out of the process
    list). A blank one (an unset shell variable, say) must not silently open the server to everyone."""
    import os

    given = given if given is not None else os.environ.get(variable)
    if given is not None and not given.strip():
        _check([f"--api-key: is empty; give a token, or leave out --api-key and {variable} to serve openly"])
    return given.strip() if given else None


def _port_problem(port: int) -> list[str]:
    """A port the server could not listen on (0, "any free port", is refused too: clients need the port
    the banner names)."""
    return [] if 1 <= port <= 65535 else [f"--port: must be a port number from 1 to 65535, got {port}"]


def _add_server_arguments(parser: argparse.ArgumentParser, port: int, key_variable: str) -> None:
    """--host, --port, --api-key and --allow-host, as every server command takes them."""
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: loopback only)")
    parser.add_argument("--port", type=int, default=port, help="(default: %(default)s)")
    parser.add_argument("--api-key", default=None, help=f"require this bearer token (default: ${key_variable})")
    parser.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="also answer requests whose Host (or Origin) is NAME; repeatable (default: the loopback names when "
        "bound to loopback, the --host address when bound to another one, any name when bound to 0.0.0.0 or ::, "
        "where --allow-host restricts it to the names given)",
    )


def cmd_web(args: argparse.Namespace) -> int:
    from leaderboard.web import web
    from leaderboard.web.policy import Policy

    api_key = _api_key(args.api_key, "SPIRAL_ARENA_WEB_KEY")
    _check(_port_problem(args.port))
    rules = Policy.make(args.agents, args.model_root, args.allow_hub)
    web(args.db, host=args.host, port=args.port, api_key=api_key, allow_hosts=tuple(args.allow_host), rules=rules)
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from spiral_arena.serve import serve

    api_key = _api_key(args.api_key, "SPIRAL_ARENA_SERVE_KEY")
    problems = _port_problem(args.port)
    if not 0 <= args.latency_ms < float("inf"):
        problems.append(f"--latency-ms: must be a number of milliseconds >= 0, got {args.latency_ms}")
    _check(problems)
    serve(
        args.agent,
        host=args.host,
        port=args.port,
        api_key=api_key,
        allow_hosts=tuple(args.allow_host),
        latency_s=args.latency_ms / 1000,
    )
    return 0


def cmd_env_server(args: argparse.Namespace) -> int:
    problems = _env_problems("--env", [args.env]) + _spec_problems("--opponent", args.opponent, human=False)
    problems += _count_problem("--max-sessions", args.max_sessions) + _port_problem(args.port)
    if not 0 <= args.idle_timeout_s < float("inf"):
        problems.append(f"--idle-timeout-s: must be a number of seconds >= 0 (0: no limit), got {args.idle_timeout_s}")
    if not problems:
        from spiral_arena.registry import make

        seats = len(make(args.env).possible_agents)
        if not 0 <= args.seat < seats:
            problems.append(f"--seat: {args.env.split(':')[0]} has seats 0..{seats - 1}, got {args.seat}")
    _check(problems)
    api_key = _api_key(args.api_key, "SPIRAL_ARENA_ENV_SERVER_KEY")
    from spiral_arena.integrations.env_server import env_serve

    env_serve(
        args.env,
        seat=args.seat,
        opponent=args.opponent,
        host=args.host,
        port=args.port,
        api_key=api_key,
        allow_hosts=tuple(args.allow_host),
        max_sessions=args.max_sessions,
        idle_timeout_s=args.idle_timeout_s,
    )
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    from trainers.__main__ import run

    return run(args, "spiral-arena train")


def cmd_collect(args: argparse.Namespace) -> int:
    from spiral_arena.outputs import write_failure
    from spiral_arena.rollout import parse_mixture
    from trainers.sft import play_transcripts, write_transcripts

    games = [g.strip() for g in args.games.split(",") if g.strip()]
    problems = _env_problems("--games", games, args.obs_format) + _spec_problems("--agent", args.agent, human=False)
    problems += _count_problem("--n-games", args.n_games) + _seed_problem(args.seed, args.n_games)
    _check(problems + (_output_problem("--out", args.out) or _kept_problem("--out", Path(args.out), args.overwrite)))
    specs, weights = parse_mixture(args.games, "")
    try:
        n = write_transcripts(
            play_transcripts(args.agent, specs, weights, args.n_games, args.seed, args.obs_format), args.out
        )
    except OSError as error:
        if not _about(error, args.out):  # an agent's own failure keeps its traceback
            raise
        print(f"spiral-arena collect: error: {write_failure('--out:', args.out, error)}", file=sys.stderr)
        return 1
    print(f"wrote {n} decisions from {args.n_games} games to {args.out}")
    return 0


def cmd_sft(args: argparse.Namespace) -> int:
    from spiral_arena.agents import model_path_problem
    from trainers.sft import read_transcripts, run_sft

    problems = (
        [] if args.model == "tiny" else [f"--model: {p} (or tiny)" for p in [model_path_problem(args.model)] if p]
    )
    problems += _count_problem("--steps", args.steps) + _count_problem("--batch", args.batch) + _seed_problem(args.seed)
    if not args.lr > 0:
        problems.append(f"--lr: must be greater than 0, got {args.lr}")
    problems += _output_problem("--output-dir", args.output_dir, directory=True) or _kept_problem(
        "--output-dir", Path(args.output_dir) / "model", args.overwrite
    )
    if not Path(args.data).is_file():
        problems.append(f"--data: {args.data} is not a file (a JSONL of prompt/response lines, e.g. from collect)")
    else:
        try:
            read_transcripts(args.data)
        except ValueError as error:
            problems.append(f"--data: {error}")
    _check(problems)
    if args.overwrite:  # the earlier model and the tiny model it started from, so neither is mixed with the new
        for old in (Path(args.output_dir) / "model", Path(args.output_dir) / "tiny_init"):
            shutil.rmtree(old, ignore_errors=True)
    path = run_sft(
        args.data, args.model, args.output_dir, args.steps, args.batch, args.lr, args.seed, args.prompt_template
    )
    print(f"model written to {path} (play it as hf:{path})")
    return 0


def cmd_leaderboard(args: argparse.Namespace) -> int:
    from leaderboard.cli import main as leaderboard_main

    return leaderboard_main(args)


def cmd_models(args: argparse.Namespace) -> int:
    from spiral_arena.models.named import NAMED_MODELS, cached_dir, local_dir, source_of

    if args.fetch is not None:
        if args.fetch not in NAMED_MODELS:
            _check([f"--fetch: unknown model {args.fetch!r}; named models: {', '.join(NAMED_MODELS)}"])
        local_dir(args.fetch)
    for name, model in NAMED_MODELS.items():
        where = cached_dir(name)
        state = f"cached at {where}, from {source_of(where)}" if where else "not cached (fetched on first use)"
        print(f"{name}  {model.about}\n  hub {model.hub_id}; offline: {model.requirement} on PyPI\n  {state}")
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from spiral_arena.evals.cli import main as eval_main

    return eval_main(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="spiral-arena", description="Two-player text games for training and evaluating LLMs by self-play."
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {spiral_arena.__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("envs", help="list the games")
    p.set_defaults(func=cmd_envs)

    p = sub.add_parser("play", help="play games between two agents (e.g. --p0 human --p1 random)")
    p.add_argument("env_id", help="a game id, with options if any: KuhnPoker-v0:rounds=1 (see spiral-arena envs)")
    p.add_argument("--p0", default="human", help="agent spec for player_0 (default: human)")
    p.add_argument("--p1", default="random", help="agent spec for player_1 (default: random)")
    p.add_argument("--games", type=int, default=1, help="how many games (default: 1)")
    p.add_argument("--seed", type=int, default=None, help="seed of game 1; game i plays SEED + i - 1 (default: random)")
    p.add_argument(
        "--concurrency",
        type=int,
        default=None,
        help="games in flight at once: API requests overlap, an hf: or vllm: model answers in batches; the same games "
        "as one at a time (default: 32 with an API, hf: or vllm: agent, else 1; a human plays one at a time)",
    )
    p.add_argument("--quiet", action="store_true", help="print only the summary")
    p.set_defaults(func=cmd_play)

    p = sub.add_parser("serve", help="serve an agent as an OpenAI-compatible chat endpoint (/v1/chat/completions)")
    p.add_argument("--agent", required=True, help="agent spec, e.g. random, expert, gemini:MODEL")
    _add_server_arguments(p, 8000, "SPIRAL_ARENA_SERVE_KEY")
    p.add_argument(
        "--latency-ms",
        type=float,
        default=0.0,
        metavar="MS",
        help="benchmarking aid: wait MS milliseconds before answering each chat request, a stand-in for a real "
        "provider's latency; concurrent requests wait together (default: 0)",
    )
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser(
        "env-server",
        help="serve one seat of a game (the opponent inside) as an OpenEnv environment (WebSocket /ws, reset/step)",
    )
    p.add_argument("--env", required=True, help="a game id, with options if any: KuhnPoker-v0:rounds=1")
    p.add_argument("--seat", type=int, default=0, help="the client's seat; a reset may pick another (default: 0)")
    p.add_argument(
        "--opponent",
        default="random",
        help="agent spec for the other seat, each session its own (default: random; one-player games have none)",
    )
    _add_server_arguments(p, 8001, "SPIRAL_ARENA_ENV_SERVER_KEY")
    p.add_argument(
        "--max-sessions",
        type=int,
        default=32,
        help="sessions at once: WebSocket episodes and stateless POST /reset calls under way; more are refused "
        "(default: 32)",
    )
    p.add_argument(
        "--idle-timeout-s",
        type=float,
        default=300.0,
        metavar="S",
        help="close a WebSocket session that sends nothing for S seconds, freeing its slot (default: 300; 0: never)",
    )
    p.set_defaults(func=cmd_env_server)

    p = sub.add_parser(
        "web", help="a page in the browser: play any agent, watch two agents play, follow the leaderboard live"
    )
    p.add_argument(
        "--db",
        default="leaderboard.sqlite",
        help="the leaderboard database shown, where the games played on the page are stored (default: %(default)s)",
    )
    p.add_argument(
        "--agents",
        action="append",
        default=[],
        metavar="[NAME=]SPEC",
        help="an agent the page offers beyond the scripted ones and local models, e.g. an API model with its key "
        "(gpt=openai:gpt-4o-mini); repeatable. Clients never name API agents, keys or URLs themselves",
    )
    p.add_argument(
        "--model-root",
        action="append",
        default=[],
        metavar="DIR",
        help="a folder whose model and checkpoint directories clients may play as hf:/vllm: PATH; repeatable "
        "(default: the current folder)",
    )
    p.add_argument(
        "--allow-hub", action="store_true", help="let clients name model hub ids (hf:ORG/NAME), downloaded on first use"
    )
    _add_server_arguments(p, 8002, "SPIRAL_ARENA_WEB_KEY")
    p.set_defaults(func=cmd_web)

    p = sub.add_parser("train", help="self-play RL with RAE (no arguments: the tiny CPU recipe)")
    from trainers.flags import add_arguments

    add_arguments(p)
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("collect", help="write game transcripts of an agent (e.g. expert) for SFT")
    p.add_argument("--agent", default="expert", help="agent spec playing every seat (default: expert)")
    p.add_argument(
        "--games",
        default="KuhnPoker-v0,TicTacToe-v0,SimpleNegotiation-v0",
        help="comma-separated env ids, each with options if any (ID:key=value;key=value) (default: %(default)s)",
    )
    p.add_argument("--n-games", type=int, default=1000, help="games to play, spread over --games (default: 1000)")
    p.add_argument("--seed", type=int, default=0, help="seed of the first game (default: 0)")
    p.add_argument(
        "--obs-format", default="", choices=["", "full", "first_last", "last"], help="default: each game's own"
    )
    p.add_argument("--out", default="transcripts.jsonl", help="JSONL file to write (default: %(default)s)")
    p.add_argument("--overwrite", action="store_true", help="replace --out if it exists (else refused)")
    p.set_defaults(func=cmd_collect)

    p = sub.add_parser("sft", help="supervised fine-tuning on a transcript file (SPIRAL's SFT baseline)")
    p.add_argument("--data", required=True, help="JSONL with 'prompt' and 'response' per line")
    p.add_argument("--model", default="tiny", help="a transformers model directory, a hub id, or tiny (default: tiny)")
    p.add_argument(
        "--output-dir", default="runs/sft", help="the model is written to OUTPUT_DIR/model (default: %(default)s)"
    )
    p.add_argument(
        "--steps",
        type=int,
        default=500,
        help="optimizer steps (default: 500; a progress bar shows the loss and time left)",
    )
    p.add_argument("--overwrite", action="store_true", help="replace OUTPUT_DIR/model if it exists (else refused)")
    p.add_argument("--batch", type=int, default=32, help="examples per step (default: 32)")
    p.add_argument("--lr", type=float, default=1e-4, help="AdamW learning rate (default: 1e-4)")
    p.add_argument("--seed", type=int, default=0, help="seed of batch sampling and of the tiny model (default: 0)")
    p.add_argument(
        "--prompt-template",
        default="spiral",
        choices=["spiral", "bare"],
        help="spiral: SPIRAL's instructions around the observation; bare: the observation alone (default: spiral)",
    )
    p.set_defaults(func=cmd_sft)

    p = sub.add_parser("leaderboard", help="cross-play ratings: run a duplicate round robin, or show stored results")
    from leaderboard.cli import add_arguments as add_leaderboard_arguments

    add_leaderboard_arguments(p)
    p.set_defaults(func=cmd_leaderboard)

    p = sub.add_parser("models", help="the pretrained models named here (hf:smollm2-135m) and whether each is cached")
    p.add_argument("--fetch", metavar="NAME", help="fetch and cache this model now (else on first use)")
    p.set_defaults(func=cmd_models)

    p = sub.add_parser("eval", help="reasoning benchmarks (MATH500, AIME, GPQA, ...): run, regrade or compare runs")
    from spiral_arena.evals.cli import add_arguments as add_eval_arguments

    add_eval_arguments(p)
    p.set_defaults(func=cmd_eval)
    return parser


# The extra that brings each optional top-level module (every one of them comes with `train`).
EXTRA_OF = {
    "torch": "train",
    "transformers": "train",
    "tokenizers": "train",
    "peft": "train",
    "gguf": "train",
    "yaml": "train",
    "fastapi": "api",
    "uvicorn": "api",
    "httpx": "api",
    "websockets": "api",
    "scipy": "leaderboard",
    "matplotlib": "leaderboard",
    "tqdm": "leaderboard",
    "math_verify": "eval",
    "vllm": "vllm",
}


def missing_extra(error: ModuleNotFoundError) -> str:
    """One line naming the missing package and the install that brings it."""
    module = (error.name or "").split(".")[0]
    extra = EXTRA_OF.get(module)
    if extra is None:
        return f"No module named {module!r}: the install is incomplete; pip install -e '.[train]'"
    return f"this command needs {module!r}, which is not installed: pip install -e '.[{extra}]' (or '.[train]', all)"


def main(argv: list[str] | None = None) -> int:
    from spiral_arena.llm import APIError

    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except UsageError as error:
        for problem in error.problems:
            print(f"spiral-arena {args.command}: error: {problem}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as error:  # an optional dependency that is not installed
        print(f"spiral-arena {args.command}: error: {missing_extra(error)}", file=sys.stderr)
        return 2
    except (ValueError, TypeError) as error:  # one prefix for every error line: the command's, as argparse's
        print(f"spiral-arena {args.command}: error: {error}", file=sys.stderr)
        return 2
    except APIError as error:  # already free of keys
        print(f"spiral-arena {args.command}: error: {error}", file=sys.stderr)
        return 1
    except (KeyboardInterrupt, EOFError):
        print("\nstopped.", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

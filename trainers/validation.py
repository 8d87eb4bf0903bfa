"""What each training config field accepts, and the checks across fields and against the outside world
(games that build, agents that exist, files that can be read, packages that are installed): one
``ConfigError`` listing every problem, before anything is built or written."""

from __future__ import annotations

import difflib
import importlib.util
import math
import re
from dataclasses import Field, dataclass, fields
from pathlib import Path
from typing import Any

from spiral_arena.agents import model_path_problem, spec_problem
from spiral_arena.evals.data import DataError, load_benchmark
from spiral_arena.outputs import write_problem
from spiral_arena.registry import GameSpec, env_id_problem
from trainers import rundir


class ConfigError(ValueError):
    """A training config with problems; ``problems`` holds one line per problem, "field: what is wrong"."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        if len(self.problems) == 1:
            super().__init__(self.problems[0])
        else:
            super().__init__("\n  ".join([f"{len(self.problems)} problems in the training config:", *self.problems]))


# ---- what each field accepts (declared with each field in trainers.config) ---------------------------------

@dataclass(frozen=True)
class Range:
    """An interval of valid numbers; ``open_low`` / ``open_high`` exclude that end."""

    low: float | None = None
    high: float | None = None
    open_low: bool = False
    open_high: bool = False
    text: str = ""  # how to say it, when the numbers would not read well

    def __contains__(self, x: float) -> bool:
        if self.low is not None and (x < self.low or (self.open_low and x == self.low)):
            return False
        return self.high is None or (x < self.high or (not self.open_high and x == self.high))

    def __str__(self) -> str:
        if self.text:
            return self.text
        if self.high is None:
            return f"greater than {self.low:g}" if self.open_low else f"at least {self.low:g}"
        return f"in {'(' if self.open_low else '['}{self.low:g}, {self.high:g}{')' if self.open_high else ']'}"


POSITIVE = Range(0, open_low=True)
NON_NEGATIVE = Range(0)
AT_LEAST_1 = Range(1)
FRACTION = Range(0, 1, open_high=True)  # [0, 1)
_TRUE, _FALSE = ("true", "yes", "1"), ("false", "no", "0")
_DEVICE = re.compile(r"auto|cpu|cuda(:\d+)?")


def shown(value: Any) -> str:
    """A value as a user writes it in a flag or a TOML file."""
    if isinstance(value, bool):
        return str(value).lower()
    if value is None:  # a bool field's "auto"
        return "auto"
    return '""' if value == "" else str(value)


def _coerce(kind: str, value: Any) -> tuple[Any, str | None]:
    """``value`` as a field of type ``kind`` wants it, or the problem. Strings are parsed (flags are
    text), whole floats are ints, and a bool is never taken for a number."""
    if kind == "bool | None":  # a bool, or None ("auto") for the device to decide
        if value is None or (isinstance(value, str) and value.strip().lower() == "auto"):
            return None, None
        coerced, problem = _coerce("bool", value)
        return coerced, problem and f"must be true, false or auto (or yes/no, 1/0), got {value!r}"
    if kind == "bool":
        if isinstance(value, bool):
            return value, None
        text = str(value).strip().lower() if isinstance(value, (str, int)) else None
        if text in _TRUE or text in _FALSE:
            return text in _TRUE, None
        return value, f"must be true or false (or yes/no, 1/0), got {value!r}"
    if kind in ("int", "float"):
        number = _number(value)
        if number is None:
            return value, f"must be {'an integer' if kind == 'int' else 'a number'}, got {value!r}"
        if kind == "float":
            try:
                return float(number), None
            except OverflowError:  # an int beyond any float
                return value, f"must be a number below 1e308, got {value!r}"
        if isinstance(number, float):
            return (int(number), None) if number.is_integer() else (value, f"must be a whole number, got {value!r}")
        return number, None
    if kind == "str":
        return value, None if isinstance(value, str) else f"must be a string, got {value!r}"
    return value, None if isinstance(value, dict) else f"must be a table of keys and values, got {value!r}"


def _number(value: Any) -> int | float | None:
    """An int or finite float from a number or its text; None for anything else, bools included."""
    if isinstance(value, str):
        text = value.strip()
        try:
            value = int(text) if text.lstrip("+-").isdigit() else float(text)
        except ValueError:
            return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value if isinstance(value, int) or math.isfinite(value) else None


def _value_problem(f: Field, value: Any) -> str | None:
    """What is wrong with one well-typed field on its own (its choices, its range, its syntax), or None."""
    name, choices, valid = f.name, f.metadata["choices"], f.metadata["valid"]
    if choices and value not in choices:
        return f"must be one of {', '.join(map(shown, choices))}; got {shown(value)!r}"
    if valid is not None and value not in valid:
        return f"must be {valid}, got {value!r}"
    if name == "dual_clip" and value != 0 and not value > 1:
        return f"must be 0 (off) or greater than 1, got {value!r}"
    if name == "device" and not _DEVICE.fullmatch(value):
        return f"must be auto, cpu, cuda or cuda:N (N a GPU index), got {value!r}"
    if name in ("games", "model") and not value.strip():
        return "must not be empty"
    return None


def with_recap(games: Any) -> str | None:
    """``games`` with ``recap=true`` added to each Twenty Questions spec that does not set ``recap``, or
    None when none lacks it (or the text does not parse: validate() reports that). Without it the
    latest message alone (obs_format "last") holds only the last answer, and the full transcript a
    small model would read instead repeats the instructions at every turn: its warm start alone took
    more than 20 minutes on 2 cores."""
    specs = _parsed_games(games)
    if specs is None or not any(s.env_id == "TwentyQuestions-v0" and "recap" not in s.options for s in specs):
        return None
    return ",".join(
        s.with_options(recap=True).label if s.env_id == "TwentyQuestions-v0" and "recap" not in s.options else s.label
        for s in specs
    )


def _parsed_games(games: Any) -> list[GameSpec] | None:
    """The specs of a ``games`` string; None if it is not a string or a spec does not parse (validate()
    reports those)."""
    if not isinstance(games, str):
        return None
    try:
        return [GameSpec.parse(part) for part in games.split(",") if part.strip()]
    except ValueError:
        return None


def hides_history(games: Any) -> bool:
    """Whether a user's games include Twenty Questions with ``recap=false``: its latest message alone
    (obs_format "last") then holds only the last answer, not the game so far."""
    specs = _parsed_games(games) or []
    return any(s.env_id == "TwentyQuestions-v0" and s.options.get("recap") is not True for s in specs)


def count_entries(text: Any) -> int | None:
    """How many comma-separated entries ``text`` holds (None when it is not a string)."""
    return sum(bool(part.strip()) for part in text.split(",")) if isinstance(text, str) else None


def _game_problems(games: str, obs_format: str) -> list[str]:
    """Each game spec that does not parse, names no env, or gives options its env refuses. The env is
    built exactly as rollouts build it, so an option is checked against the env itself."""
    items = filter(None, (g.strip() for g in games.split(",")))
    return [problem for item in items if (problem := env_id_problem(item, obs_format))]


def _run_problem(config: Any) -> str | None:
    """A directory holding a run is trained into only to continue it (resume) or replace it (overwrite)."""
    if config.resume and config.overwrite:
        return "resume continues the run there and overwrite replaces it: give one of them"
    held = rundir.run_files(config.output_dir)
    if held and not (config.resume or config.overwrite):
        shown = ", ".join(p.name for p in held[:4]) + (", ..." if len(held) > 4 else "")
        return (
            f"{config.output_dir} holds a run ({shown}): add --resume to continue it, --overwrite to replace it "
            "(its files are removed first), or choose another output_dir"
        )
    return None


def _algo_problems(algo: str, games: str, opponent: str) -> list[str]:
    """Group algorithms train a single player against its own group: every game must have one
    player, and delta-belief needs a secret to measure belief in (Twenty Questions)."""
    problems = [] if opponent == "self" else [f"{algo} trains a single player; opponent must be self"]
    for item in filter(None, (g.strip() for g in games.split(","))):
        game = GameSpec.parse(item)
        env_id = game.env_id
        if game.players != 1:
            problems.append(f"{algo} is for single-player games; {env_id} has two players (use algo rae)")
        elif algo == "delta-belief" and env_id != "TwentyQuestions-v0":
            problems.append(f"delta-belief measures belief in a secret; {env_id} has none (TwentyQuestions-v0 has)")
    return problems


def _kl_coefs_problem(coefs: str, n_games: int) -> str | None:
    try:
        values = [float(c) for c in coefs.split(",")]
    except ValueError:
        return f"must be comma-separated numbers, one per game, got {coefs!r}"
    if len(values) != n_games:
        return f"gives {len(values)} KL weights for {n_games} game(s); give one per game, or none for kl_coef"
    if not all(math.isfinite(v) and v >= 0 for v in values):
        return f"must be non-negative numbers, got {coefs!r}"
    return None


def _weights_problem(weights: str, n_games: int) -> str | None:
    parts = [w.strip() for w in weights.split(",")]
    try:
        values = [float(w) for w in parts]
    except ValueError:
        return f"must be comma-separated numbers, one per game, got {weights!r}"
    if len(values) != n_games:
        return f"gives {len(values)} weights for {n_games} game(s); give one per game, or none for equal weights"
    if not all(math.isfinite(v) and v >= 0 for v in values) or not any(values):
        return f"must be non-negative numbers, not all zero, got {weights!r}"
    return None


def _agent_problem(spec: str, self_allowed: bool = False) -> str | None:
    """What is wrong with an opponent spec, checked without loading anything."""
    problem = spec_problem(spec, human=False)
    if problem is not None and self_allowed and problem.startswith("unknown agent spec"):
        return f"{problem}; or self (one policy plays both seats)"
    return problem


def _reasoning_problems(spec: str, data_dir: str) -> list[str]:
    """A reasoning spec that does not parse, or whose benchmarks have no local file and no other source."""
    if importlib.util.find_spec("math_verify") is None:
        return ["needs math-verify: pip install 'spiral-arena[eval]'"]
    from spiral_arena.evals.training import parse_eval_spec  # imports torch

    try:
        names = [name for name, _ in parse_eval_spec(spec)]
        if data_dir and not Path(data_dir).is_dir():
            return [f"eval_reasoning_data {data_dir} is not a directory"]
        for name in names:
            load_benchmark(name, Path(data_dir) if data_dir else None)
    except DataError as error:
        return [str(error)]
    return []


def unknown_field(name: str, names: list[str]) -> str:
    close = difflib.get_close_matches(name.replace("-", "_"), names, n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    return f"{name}: unknown config field{hint}"


# ---- the whole config ---------------------------------------------------------------------


def check(config: Any, problems: list[str] | None = None) -> None:
    """Check every field of ``config`` (a ``TrainConfig``) and raise one ``ConfigError`` listing each
    problem (plus ``problems`` already found, such as unknown keys), or return with accepted spellings
    normalised in place: "7" or 7.0 for an int, "1e-5" for a float, "no" for a bool."""
    problems = list(problems or [])
    bad: set[str] = set()  # fields with a problem of their own, left out of the checks that read them
    for f in fields(config):
        value, problem = _coerce(str(f.type), getattr(config, f.name))
        if problem is None:
            setattr(config, f.name, value)
            problem = _value_problem(f, value)
        if problem is not None:
            bad.add(f.name)
            problems.append(f"{f.name}: {problem}")
    problems += [f"{name}: {problem}" for name, problem in relation_problems(config, bad)]
    if problems:
        raise ConfigError(problems)


def relation_problems(config: Any, bad: set[str]) -> list[tuple[str, str]]:
    """Checks that read other fields or the outside world; fields already reported are skipped."""
    found: list[tuple[str, str]] = []
    obs_format = config.obs_format if "obs_format" not in bad else ""
    for name in ("games", "eval_env_ids", "sft_games"):
        if name not in bad:
            found += [(name, problem) for problem in _game_problems(getattr(config, name), obs_format)]
    if "games" not in bad and not count_entries(config.games):
        found.append(("games", f"no games given in {config.games!r}; give env ids, e.g. KuhnPoker-v0,TicTacToe-v0"))
    if not bad & {"games", "game_weights"} and config.game_weights:
        problem = _weights_problem(config.game_weights, count_entries(config.games))
        if problem is not None:
            found.append(("game_weights", problem))
    if not bad & {"games", "game_kl_coefs"} and config.game_kl_coefs:
        problem = _kl_coefs_problem(config.game_kl_coefs, count_entries(config.games))
        if problem is not None:
            found.append(("game_kl_coefs", problem))
    if "opponent" not in bad and config.opponent != "self":
        problem = _agent_problem(config.opponent, self_allowed=True)
        if problem is not None:
            found.append(("opponent", problem))
    if "sft_agent" not in bad and config.sft_steps > 0:
        problem = _agent_problem(config.sft_agent)
        if problem is not None:
            found.append(("sft_agent", problem))
    if "eval_opponents" not in bad:
        for spec in filter(None, (s.strip() for s in config.eval_opponents.split(","))):
            problem = _agent_problem(spec)
            if problem is not None:
                found.append(("eval_opponents", problem))
    if "output_dir" not in bad and config.output_dir:
        if (problem := write_problem(config.output_dir, directory=True)) is not None:
            found.append(("output_dir", f"{config.output_dir} {problem}"))
        elif not bad & {"resume", "overwrite"} and (problem := _run_problem(config)) is not None:
            found.append(("output_dir", problem))
    if not bad & {"algo", "games", "opponent"} and config.algo != "rae":
        found += [("algo", problem) for problem in _algo_problems(config.algo, config.games, config.opponent)]
    if not bad & {"algo", "opponent", "opponent_pool"} and config.opponent_pool:
        if config.algo != "rae" or config.opponent != "self":
            found.append(("opponent_pool", "is for two-player self-play (algo rae, opponent self)"))
    if not bad & {"games", "sft_naming"} and config.sft_naming:
        specs = _parsed_games(config.games)
        if specs is not None and all(spec.env_id != "TwentyQuestions-v0" for spec in specs):
            found.append(("sft_naming", "teaches Twenty Questions' naming answers; no game is TwentyQuestions-v0"))
    if not bad & {"algo", "advantage", "rae", "state_baseline"} and config.advantage == "marshal":
        if config.algo != "rae":
            found.append(("advantage", f"marshal is for two-player self-play (algo rae), not {config.algo}"))
        if not config.rae:
            found.append(("rae", "false turns RAE's baseline off; advantage marshal has none (use advantage rae)"))
        if config.state_baseline:
            found.append(("state_baseline", "replaces RAE's advantages; with advantage marshal use 0"))
    if not bad & {"tis", "tis_lower", "tis_drop_masked"} and config.tis != "mask":
        for name in ("tis_lower", "tis_drop_masked"):
            if getattr(config, name):
                found.append((name, f"applies to tis mask (tis is {config.tis})"))
    if not bad & {"advantage", "turn_reward", "draw_reward"} and config.advantage != "marshal":
        for name in ("turn_reward", "draw_reward"):
            if getattr(config, name):
                found.append((name, "is a per-turn reward of advantage marshal; with advantage rae use 0"))
    if not bad & {"algo", "state_baseline"} and config.algo != "rae" and config.state_baseline:
        found.append(("state_baseline", f"is for algo rae (two-player self-play); {config.algo} compares groups"))
    if not bad & {"algo", "groups_per_step", "rollout_shards"} and config.algo != "rae":
        if config.groups_per_step % config.rollout_shards:
            found.append(("groups_per_step", f"must be a multiple of rollout_shards ({config.rollout_shards})"))
    if "eval_reasoning" not in bad and config.eval_reasoning:
        found += [("eval_reasoning", p) for p in _reasoning_problems(config.eval_reasoning, config.eval_reasoning_data)]
    if "resume" not in bad and config.resume:
        from trainers import checkpoint

        if not config.output_dir:
            found.append(("resume", "needs output_dir: the run directory to continue"))
        else:
            complete, broken = checkpoint.scan(Path(config.output_dir) / "checkpoints")
            if complete is None:
                where = f"{config.output_dir} holds no checkpoint (checkpoints/step_N)"
                if broken:  # the newest one's problem, naming its file
                    where = f"{broken[0]}, and no earlier checkpoint is complete"
                found.append(("resume", f"{where}; drop --resume to start a new run"))
    if "model" not in bad and config.model != "tiny":
        problem = model_path_problem(config.model)
        if problem is not None:
            found.append(("model", f"{problem} (or tiny, the embedded CPU model)"))
    if "backend" not in bad and config.backend == "vllm":
        from spiral_arena.models.vllm import install_problem

        if (problem := install_problem()) is not None:
            found.append(("backend", f"vllm: {problem}; or use backend hf"))
    if not bad & {"fsdp", "async_steps"} and config.fsdp and config.async_steps:
        found.append(("async_steps", "runs in one process (an actor thread beside the learner), fsdp under torchrun"))
    if not bad & {"fsdp", "lora_rank"} and config.fsdp and config.lora_rank > 0:
        found.append(("fsdp", "shards a full model and cannot train a LoRA adapter; set lora_rank to 0"))
    for name in ("tensorboard", "wandb"):
        if name not in bad and getattr(config, name) and importlib.util.find_spec(name) is None:
            found.append((name, f"needs the {name} package: pip install {name}"))
    return found

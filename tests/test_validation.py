"""A training config is checked as a whole before anything is built or written.

Each case runs the real entry point (``spiral-arena train`` in-process, a few as subprocesses) and
checks the error names the field and what is valid, the exit code is 2 without a traceback, and the
working directory holds nothing new afterwards.
"""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest

import spiral_arena
from spiral_arena import cli
from trainers.__main__ import main as trainers_main
from trainers.config import FIELDS, SECTIONS, ConfigError, TrainConfig
from trainers.recipes import ALGO_RECIPES, RECIPES
from trainers.validation import _coerce, _value_problem

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """An empty working directory (a run without --output-dir would land in ./runs here)."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def refused(capsys, workdir: Path, *args: str, entry=None) -> str:
    """Run ``spiral-arena train ARGS`` (or another entry point); it must fail cleanly and write nothing."""
    before = sorted(workdir.rglob("*"))
    code = entry(list(args)) if entry else cli.main(["train", *args, "--output-dir", str(workdir / "run")])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err
    assert sorted(workdir.rglob("*")) == before, "a refused config must not write anything"
    return err


def config_file(workdir: Path, text: str, name: str = "run.toml") -> str:
    path = workdir / name
    path.write_text(text)
    return str(path)


# ---- types --------------------------------------------------------------------------------


def test_a_word_for_an_integer_in_a_toml_file(capsys, workdir):
    err = refused(capsys, workdir, "--config", config_file(workdir, 'steps = "ten"\n'))
    assert err.startswith("spiral-arena train: error: steps: must be an integer, got 'ten'")


@pytest.mark.parametrize(("text", "expected"), [("steps = 5.5", "whole number"), ('steps = "5.5"', "whole number")])
def test_a_fraction_for_an_integer_is_refused(capsys, workdir, text, expected):
    err = refused(capsys, workdir, "--config", config_file(workdir, text + "\n"))
    assert "steps: must be a " + expected in err


def test_whole_floats_and_numeric_strings_are_accepted_as_integers(workdir):
    config = TrainConfig.build({"steps": 5.0, "epochs": "3", "lr": "1e-5", "micro_batch": "1e2"})
    assert (config.steps, config.epochs, config.lr, config.micro_batch) == (5, 3, 1e-5, 100)
    assert type(config.steps) is int and type(config.lr) is float


def test_a_bool_is_not_a_number(capsys, workdir):
    err = refused(capsys, workdir, "--config", config_file(workdir, "eval_games = true\nlr = false\n"))
    assert "eval_games: must be an integer, got True" in err and "lr: must be a number, got False" in err


def test_a_list_for_a_string_field(capsys, workdir):
    err = refused(capsys, workdir, "--config", config_file(workdir, 'games = ["KuhnPoker-v0"]\n'))
    assert "games: must be a string, got ['KuhnPoker-v0']" in err


# ---- ranges -------------------------------------------------------------------------------


def test_negative_steps_flag(capsys, workdir):
    err = refused(capsys, workdir, "--steps", "-5")
    assert err == "spiral-arena train: error: steps: must be at least 1, got -5\n"


@pytest.mark.parametrize(
    ("flag", "value", "line"),
    [
        ("--samples-per-step", "0", "samples_per_step: must be at least 1, got 0"),
        ("--sft-steps", "-3", "sft_steps: must be at least 0, got -3"),
        ("--warmup-steps", "-1", "warmup_steps: must be at least 0, got -1"),
        ("--eval-games", "-2", "eval_games: must be at least 1, got -2"),
        ("--seed", "-1", "seed: must be in [0, 2**64), got -1"),
        ("--lora-rank", "-4", "lora_rank: must be at least 0, got -4"),
    ],
)
def test_negative_counts(capsys, workdir, flag, value, line):
    assert line in refused(capsys, workdir, flag, value)


@pytest.mark.parametrize(
    ("flag", "value", "line"),
    [
        ("--top-p", "1.5", "top_p: must be in (0, 1], got 1.5"),
        ("--top-p", "0", "top_p: must be in (0, 1], got 0.0"),
        ("--temperature", "-0.1", "temperature: must be at least 0, got -0.1"),
        ("--eval-temperature", "-1", "eval_temperature: must be at least 0, got -1.0"),
        ("--rae-decay", "1", "rae_decay: must be in [0, 1), got 1.0"),
        ("--rae-decay", "-0.5", "rae_decay: must be in [0, 1), got -0.5"),
        ("--adam-beta2", "1.0", "adam_beta2: must be in [0, 1), got 1.0"),
        ("--vllm-gpu-memory-utilization", "0", "vllm_gpu_memory_utilization: must be in (0, 1], got 0.0"),
        ("--lr", "0", "lr: must be greater than 0, got 0.0"),
        ("--lr", "nan", "lr: must be a number, got 'nan'"),
    ],
)
def test_probabilities_temperatures_and_rates_out_of_range(capsys, workdir, flag, value, line):
    assert line in refused(capsys, workdir, flag, value)


def test_rae_decay_zero_is_valid():
    assert TrainConfig.build({"rae_decay": 0}).rae_decay == 0.0


# ---- choices ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "valid"),
    [
        ("loss", "ppo, reinforce"),
        ("aggregation", "dr_grpo, token_mean, seq_mean_token_mean, game_mean_token_mean, group_mean_token_mean"),
        ("lr_schedule", "constant, warmup, cosine"),
        ("backend", "hf, vllm"),
        ("prompt_template", "spiral, bare, questioner"),
        ("obs_format", '"", full, first_last, last'),
        ("recipe", "auto, tiny, smollm2-135m, spiral, delta-belief-4b"),
    ],
)
def test_choices(capsys, workdir, field, valid):
    err = refused(capsys, workdir, "--" + field.replace("_", "-"), "nonsense")
    assert f"{field}: must be one of {valid}; got 'nonsense'" in err


# ---- booleans -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("written", "value"),
    [
        ('"no"', False),
        ('"No"', False),
        ('"false"', False),
        ('"0"', False),
        ("0", False),
        ('"YES"', True),
        ('"1"', True),
    ],
)
def test_booleans_written_as_strings_mean_what_they_say(workdir, written, value):
    from trainers.flags import read_config_file

    config = TrainConfig.build(read_config_file(config_file(workdir, f"rae = {written}\nplots = {written}\n")))
    assert config.rae is value and config.plots is value


def test_an_unclear_boolean_is_an_error_never_true(capsys, workdir):
    err = refused(capsys, workdir, "--config", config_file(workdir, 'rae = "nope"\n'))
    assert "rae: must be true or false (or yes/no, 1/0), got 'nope'" in err


# ---- games --------------------------------------------------------------------------------


def test_unknown_env_id_in_games_suggests_the_close_one(capsys, workdir):
    err = refused(capsys, workdir, "--games", "KuhnPokr-v0,TicTacToe-v0")
    assert "games: unknown env id 'KuhnPokr-v0'. Did you mean KuhnPoker-v0" in err
    assert "TicTacToe-v0'" not in err  # the valid entry is not reported


def test_unknown_env_id_in_eval_env_ids(capsys, workdir):
    err = refused(capsys, workdir, "--eval-env-ids", "tictactoe-v0")
    assert "eval_env_ids: unknown env id 'tictactoe-v0'" in err and "TicTacToe-v0" in err


@pytest.mark.parametrize(
    ("games", "expected"),
    [
        (
            "KuhnPoker-v0:round=1",
            "games: KuhnPoker-v0 got unexpected keyword argument(s) round",
        ),
        ("KuhnPoker-v0:rounds=0", "games: KuhnPoker-v0: rounds must be a positive integer, got 0"),
        ("KuhnPoker-v0:rounds", "games: game option 'rounds' of KuhnPoker-v0 must look like key=value"),
        ("TicTacToe-v0:obs_format=full", "got multiple values for keyword argument 'obs_format'"),
    ],
)
def test_game_options_the_env_does_not_accept(capsys, workdir, games, expected):
    err = refused(capsys, workdir, "--games", games, "--obs-format", "last")
    assert expected in err


def test_empty_games(capsys, workdir):
    assert "games: must not be empty" in refused(capsys, workdir, "--games", " ")


def test_user_given_weights_must_match_the_games(capsys, workdir):
    err = refused(capsys, workdir, "--games", "KuhnPoker-v0,TicTacToe-v0", "--game-weights", "1,2,3")
    assert "game_weights: gives 3 weights for 2 game(s)" in err
    err = refused(capsys, workdir, "--games", "KuhnPoker-v0", "--game-weights", "4,1")
    assert "game_weights: gives 2 weights for 1 game(s)" in err
    err = refused(capsys, workdir, "--game-weights", "1,x")
    assert "game_weights: must be comma-separated numbers" in err
    err = refused(capsys, workdir, "--game-weights", "0,0,0")  # one per game of the recipe's three
    assert "game_weights: must be non-negative numbers, not all zero" in err


def test_per_game_kl_weights_must_match_the_games(capsys, workdir):
    err = refused(capsys, workdir, "--games", "KuhnPoker-v0,TicTacToe-v0", "--game-kl-coefs", "0.3")
    assert "game_kl_coefs: gives 1 KL weights for 2 game(s); give one per game, or none for kl_coef" in err
    err = refused(capsys, workdir, "--game-kl-coefs", "0.3,high")
    assert "game_kl_coefs: must be comma-separated numbers, one per game, got '0.3,high'" in err
    err = refused(capsys, workdir, "--game-kl-coefs", "0.3,-1,0.3")
    assert "game_kl_coefs: must be non-negative numbers, got '0.3,-1,0.3'" in err


def test_per_game_kl_weights_replace_kl_coef_game_by_game():
    config = TrainConfig.build({"games": "KuhnPoker-v0:rounds=1,TicTacToe-v0", "game_kl_coefs": "0.3,0"})
    assert config.kl_by_game == {"KuhnPoker-v0:rounds=1": 0.3, "TicTacToe-v0": 0.0}
    config = TrainConfig.build({"games": "KuhnPoker-v0,TicTacToe-v0", "game_kl_coefs": "", "kl_coef": 0.2})
    assert config.kl_by_game == {"KuhnPoker-v0": 0.2, "TicTacToe-v0": 0.2}  # none given: kl_coef for each


def test_the_tiny_recipes_weights_give_way_to_the_users_games():
    assert TrainConfig.build({}).game_weights == "4,2,2"  # the recipe's own three games keep them
    config = TrainConfig.build({"games": "KuhnPoker-v0"})
    assert (config.games, config.game_weights) == ("KuhnPoker-v0", "")
    assert TrainConfig.build({"games": "PigDice-v0,TicTacToe-v0"}).game_weights == ""  # two games: equal
    assert TrainConfig.build({"games": "PigDice-v0,TicTacToe-v0,Snake-v0"}).game_weights == "4,2,2"  # three: kept
    # the recipe's per-game KL weights likewise, and your kl_coef replaces them for every game
    assert TrainConfig.build({"games": "KuhnPoker-v0"}).kl_by_game == {"KuhnPoker-v0": TrainConfig.build({}).kl_coef}
    assert set(TrainConfig.build({"kl_coef": 0}).kl_by_game.values()) == {0.0}


# ---- opponents ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("bogus", "unknown agent spec 'bogus'"),
        ("human", "human cannot play here: these games run many at once, unattended"),
        ("hf:no/such/dir", "hf:no/such/dir': model path no/such/dir does not exist"),
        ("openai:", "needs a model id after 'openai:'"),
        ("openai:gpt@ftp://host/v1", "must be an http:// or https:// URL"),
    ],
)
def test_bad_opponents(capsys, workdir, spec, expected):
    err = refused(capsys, workdir, "--opponent", spec)
    assert "opponent: " in err and expected in err
    err = refused(capsys, workdir, "--eval-opponents", f"random,{spec}")
    assert "eval_opponents: " in err and expected in err


def test_the_opponent_error_mentions_self(capsys, workdir):
    assert "or self (one policy plays both seats)" in refused(capsys, workdir, "--opponent", "selff")


def test_good_opponents_are_accepted_without_loading_anything(workdir):
    (workdir / "model").mkdir()
    (workdir / "model" / "config.json").write_text('{"model_type": "llama"}')  # read, no weights loaded
    config = TrainConfig.build(
        {
            "opponent": f"hf:{workdir / 'model'}",
            "eval_opponents": "random,expert,openai:gpt-4o-mini@http://127.0.0.1:9/v1",
        }
    )
    assert config.opponent.startswith("hf:")


# ---- device, output dir, combinations -------------------------------------------------------


@pytest.mark.parametrize("device", ["gpu", "cuda:x", "cuda:", "CPU "])
def test_device_syntax(capsys, workdir, device):
    assert f"device: must be auto, cpu, cuda or cuda:N (N a GPU index), got {device!r}" in refused(
        capsys, workdir, "--device", device
    )


def test_device_syntax_only_is_checked():
    assert TrainConfig.build({"device": "cuda:3"}).device == "cuda:3"  # whether it exists is the trainer's question


def test_output_dir_that_is_a_file(capsys, workdir):
    (workdir / "taken").write_text("x")
    err = refused(capsys, workdir, "--output-dir", str(workdir / "taken"), entry=lambda a: cli.main(["train", *a]))
    assert f"output_dir: {workdir / 'taken'} is a file; give a directory" in err


def test_resume_without_an_output_dir(capsys, workdir):
    err = refused(capsys, workdir, "--resume", entry=lambda a: cli.main(["train", *a]))
    assert "resume: needs output_dir" in err


def test_sft_naming_without_twenty_questions(capsys, workdir):
    err = refused(capsys, workdir, "--sft-naming", "1", "--games", "KuhnPoker-v0")
    assert "sft_naming: teaches Twenty Questions' naming answers; no game is TwentyQuestions-v0" in err
    TrainConfig.build({"algo": "starpo", "sft_naming": 1.0})  # the Twenty Questions recipe's own use of it


def test_fsdp_with_lora(capsys, workdir):
    assert "fsdp: shards a full model and cannot train a LoRA adapter" in refused(
        capsys, workdir, "--fsdp", "--lora-rank", "4"
    )


# ---- files --------------------------------------------------------------------------------


def test_missing_config_file(capsys, workdir):
    err = refused(capsys, workdir, "--config", str(workdir / "nope.toml"))
    assert f"--config: no such file: {workdir / 'nope.toml'}" in err


def test_config_file_of_an_unknown_kind(capsys, workdir):
    err = refused(capsys, workdir, "--config", config_file(workdir, "[x]\n", "run.ini"))
    assert "--config: " in err and "must end in .toml, .yaml, .yml or .json" in err


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("run.toml", "steps = \n", "is not valid TOML"),
        ("run.json", "{steps: 1}", "is not valid JSON"),
        ("run.yaml", "steps: [1\n", "is not valid YAML"),
        ("run.yaml", "- 1\n- 2\n", "must hold keys and values at the top level, not list"),
    ],
)
def test_config_files_that_do_not_parse(capsys, workdir, name, text, expected):
    err = refused(capsys, workdir, "--config", config_file(workdir, text, name))
    assert expected in err and "\n" not in err.rstrip("\n")  # one line, even for a multi-line parser message


def test_unknown_key_in_a_config_file_suggests_the_field(capsys, workdir):
    err = refused(capsys, workdir, "--config", config_file(workdir, "sampels_per_step = 8\n"))
    assert "sampels_per_step: unknown config field; did you mean samples_per_step" in err


def test_every_problem_is_listed_at_once_one_line_each(capsys, workdir):
    path = config_file(workdir, 'steps = "ten"\nloss = "ppx"\nrae = "maybe"\nlearning_rate = 1\n')
    err = refused(capsys, workdir, "--config", path, "--top-p", "2", "--games", "Chess-v0")
    lines = err.splitlines()
    assert lines[0] == "spiral-arena train: error: 6 problems in the training config:"
    named = [line.strip().split(":")[0] for line in lines[1:]]
    assert sorted(named) == sorted(["learning_rate", "steps", "loss", "rae", "top_p", "games"])


def test_config_error_is_a_value_error_with_its_lines():
    with pytest.raises(ValueError) as caught:
        TrainConfig.build({"steps": -1, "epochs": 0})
    assert isinstance(caught.value, ConfigError)
    assert caught.value.problems == ["steps: must be at least 1, got -1", "epochs: must be at least 1, got 0"]


# ---- entry points -------------------------------------------------------------------------


def test_python_m_trainers_refuses_the_same_way(capsys, workdir):
    err = refused(capsys, workdir, "--steps", "-5", "--output-dir", str(workdir / "run"), entry=trainers_main)
    assert err == "python -m trainers: error: steps: must be at least 1, got -5\n"


@pytest.mark.parametrize(
    "command", [[sys.executable, "-m", "spiral_arena.cli", "train"], [sys.executable, "-m", "trainers"]]
)
def test_as_a_real_process_exit_2_one_line_no_traceback_nothing_written(tmp_path, command):
    out = tmp_path / "run"
    done = subprocess.run(
        [*command, "--steps", "-5", "--loss", "ppx", "--output-dir", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert re.search(r"train.*: error: 2 problems in the training config:\n  steps: .*\n  loss: ", done.stderr)
    assert not out.exists()


# ---- help and version ---------------------------------------------------------------------


def train_help(capsys) -> str:
    with pytest.raises(SystemExit) as caught:
        cli.main(["train", "--help"])
    assert caught.value.code == 0
    return " ".join(capsys.readouterr().out.split())  # argparse wraps lines


def test_every_field_has_help_and_a_section():
    assert [f.name for f in fields(TrainConfig) if not f.metadata.get("help")] == []
    in_sections = [f.name for section in SECTIONS for f in fields(section)]
    assert in_sections + ["extra"] == [f.name for f in fields(TrainConfig)]  # each field once, in the sections' order


@pytest.mark.parametrize(
    "expected",
    [
        "--rae-decay FLOAT EMA decay of the RAE baselines: baseline <- decay * baseline + (1 - decay) * return. "
        "Valid: in [0, 1). (default: 0.95)",
        "Peak learning rate of AdamW. Valid: greater than 0. (default: 1e-06; tiny recipe: 0.001)",
        '--loss {ppo,reinforce} "ppo" (clipped ratio) or "reinforce". One of: ppo, reinforce. '
        "(default: ppo; tiny recipe: reinforce)",
        "--rae, --no-rae Role-conditioned advantage:",
        "(default: true)",
        "--steps INT Policy steps",
    ],
)
def test_help_teaches_from_the_fields(capsys, expected):
    assert expected in train_help(capsys)


@pytest.mark.parametrize("kind, tables", [("recipe", RECIPES), ("algorithm", ALGO_RECIPES)])
def test_every_recipe_sets_real_fields_to_valid_values(kind, tables):
    for name, table in tables.items():
        assert set(table) <= set(FIELDS), (kind, name, set(table) - set(FIELDS))
        for key, value in table.items():
            value, problem = _coerce(str(FIELDS[key].type), value)
            assert (problem or _value_problem(FIELDS[key], value)) is None, (kind, name, key)


def test_a_recipe_table_extends_another():
    assert ALGO_RECIPES["starpo"]["clip_high"] == ALGO_RECIPES["delta-belief"]["clip_high"] == 0.28  # group-ppo's
    assert ALGO_RECIPES["starpo"]["aggregation"] != ALGO_RECIPES["delta-belief"]["aggregation"]
    assert ALGO_RECIPES["delta-belief/tiny"] == ALGO_RECIPES["starpo/tiny"] and "extends" not in ALGO_RECIPES["starpo"]
    assert TrainConfig.build({"algo": "delta-belief"}).clip_high == 0.28


def test_help_text_follows_the_field_so_a_new_field_documents_itself(capsys):
    text = train_help(capsys)
    for name in ("seed", "device", "top_p", "eval_every", "plots"):
        assert FIELDS[name].metadata["help"] in text, name
    for section in SECTIONS:  # grouped by section, each under its title
        assert f"{section.__name__.removesuffix('Config').lower()}: {section.__doc__}" in text, section


def test_version(capsys):
    with pytest.raises(SystemExit) as caught:
        cli.main(["--version"])
    assert caught.value.code == 0
    assert capsys.readouterr().out.strip() == f"spiral-arena {spiral_arena.__version__}"

"""Nothing lost, nothing half-started (issue 41): a run directory is trained into only with --resume or
--overwrite, every damaged model or checkpoint file is found, and named, before anything is written, and the
time limit bounds the whole run. Each case runs the real entry point; a refused one exits 2 with one line
and leaves every file as it was."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from spiral_arena.cli import main as cli_main  # noqa: E402
from trainers.config import TrainConfig  # noqa: E402
from trainers.loop import train  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SMALL = {
    "steps": 2, "sft_steps": 2, "sft_batch": 8, "samples_per_step": 16, "games_in_flight": 8, "eval_every": 2,
    "eval_games": 2, "eval_env_ids": "KuhnPoker-v0:rounds=1", "eval_opponents": "random", "time_limit_s": 0,
    "save_every": 1, "micro_batch": 8, "eval_tactics": False, "plots": False,
    "games": "KuhnPoker-v0:rounds=1;reward=chips", "game_weights": "", "game_kl_coefs": "",
}  # fmt: skip


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` with its bytes: what a refused command must leave exactly as it was."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def refused(capsys, args: list[str], *watched: Path) -> str:
    """``spiral-arena ARGS`` exits 2 with one line on stderr, no traceback, and changes nothing under ``watched``."""
    before = [snapshot(w) if w.exists() else None for w in watched]
    code = cli_main(args)
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert [snapshot(w) if w.exists() else None for w in watched] == before, "a refused command must write nothing"
    return err.strip()


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("safety") / "run"
    train(TrainConfig.build({**SMALL, "output_dir": str(out)}), progress=False)
    return out


# ---- a run is never overwritten ---------------------------------------------------------------


def test_training_into_a_run_needs_resume_or_overwrite(capsys, finished_run):
    err = refused(capsys, ["train", "--output-dir", str(finished_run), "--steps", "3"], finished_run.parent)
    assert err.startswith(f"spiral-arena train: error: output_dir: {finished_run} holds a run (config.json, ")
    assert "add --resume to continue it, --overwrite to replace it" in err


def test_resume_and_overwrite_together_are_refused(capsys, finished_run):
    err = refused(capsys, ["train", "--output-dir", str(finished_run), "--resume", "--overwrite"], finished_run.parent)
    assert "resume continues the run there and overwrite replaces it: give one of them" in err


def test_overwrite_removes_the_old_runs_files_and_keeps_the_users(tmp_path, capsys):
    out = tmp_path / "run"
    stale = out / "checkpoints" / "step_000005"  # a longer old run's checkpoint: --resume would have picked it
    stale.mkdir(parents=True)
    (stale / "model.safetensors").write_bytes(b"old")
    (out / "config.json").write_text('{"steps": 5}')
    (out / "notes.txt").write_text("mine")
    train(TrainConfig.build({**SMALL, "output_dir": str(out), "overwrite": True}), progress=False)
    assert "removed the run in" in capsys.readouterr().out
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["step_000001", "step_000002"]
    assert json.loads((out / "config.json").read_text())["steps"] == 2
    assert (out / "notes.txt").read_text() == "mine"


def test_an_empty_or_failed_directory_is_not_a_run(tmp_path):
    """A directory made for the run, or left by a start that failed before its config, takes a new run."""
    from trainers import rundir

    (tmp_path / "tiny_init").mkdir()
    assert rundir.run_files(tmp_path) == []
    (tmp_path / "metrics.jsonl").write_text("")
    assert [p.name for p in rundir.run_files(tmp_path)] == ["metrics.jsonl", "tiny_init"]


def test_collect_and_sft_outputs_are_not_overwritten_without_asking(tmp_path, capsys):
    out = tmp_path / "t.jsonl"
    assert cli_main(["collect", "--agent", "random", "--n-games", "2", "--out", str(out)]) == 0
    capsys.readouterr()
    err = refused(capsys, ["collect", "--agent", "random", "--n-games", "3", "--out", str(out)], tmp_path)
    assert err == f"spiral-arena collect: error: --out: {out} exists already; add --overwrite to replace it, " + (
        "or give another path"
    )
    assert cli_main(["collect", "--agent", "random", "--n-games", "3", "--out", str(out), "--overwrite"]) == 0
    model = tmp_path / "sft" / "model"
    model.mkdir(parents=True)
    (model / "config.json").write_text("{}")
    err = refused(capsys, ["sft", "--data", str(out), "--output-dir", str(tmp_path / "sft")], tmp_path)
    assert err == f"spiral-arena sft: error: --output-dir: {model} exists already; add --overwrite to replace it, " + (
        "or give another path"
    )


# ---- everything checked before anything is written ----------------------------------------------


def model_dir(folder: Path, config: object, weights: bytes | None = None) -> Path:
    """A model directory with the given config.json content and, optionally, a weights file."""
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(config) if not isinstance(config, str) else config)
    if weights is not None:
        (folder / "model.safetensors").write_bytes(weights)
    return folder


def safetensors(n_floats: int) -> bytes:
    header = json.dumps({"w": {"dtype": "F32", "shape": [n_floats], "data_offsets": [0, 4 * n_floats]}}).encode()
    return struct.pack("<Q", len(header)) + header + b"\0" * (4 * n_floats)


@pytest.mark.parametrize(
    ("config", "weights", "says"),
    [
        ({"model_type": "llama"}, safetensors(64)[:-100], "model.safetensors is truncated ("),
        ({"model_type": "llama"}, b"\x01\x02", "model.safetensors has no readable safetensors header"),
        ([], None, "config.json holds a JSON list, not an object"),
        ("{bad", None, "config.json is not valid JSON ("),
        ({"model_type": "no-such-arch"}, None, "config.json: model_type 'no-such-arch' is unknown to the installed"),
    ],
)
def test_a_damaged_model_is_named_before_the_run_writes_anything(tmp_path, capsys, config, weights, says):
    model = model_dir(tmp_path / "model", config, weights)
    out = tmp_path / "run"
    err = refused(capsys, ["train", "--model", str(model), "--output-dir", str(out)], tmp_path)
    assert err.startswith(f"spiral-arena train: error: model: {model}/") and says in err, err
    assert not out.exists()


@pytest.mark.parametrize(
    ("damaged", "content", "says"),
    [
        ("tokenizer.json", '{"version": "1.0", "trunc', "tokenizer.json is not valid JSON ("),
        ("spiral_arena.json", "{bad", "spiral_arena.json is not valid JSON ("),
        ("config.json", "[]", "config.json holds a JSON list, not an object"),
    ],
)
def test_a_damaged_checkpoint_is_named_and_resume_keeps_the_runs_config(
    tmp_path, capsys, finished_run, damaged, content, says
):
    run = tmp_path / "run"
    subprocess.run(["cp", "-r", str(finished_run), str(run)], check=True)
    for step in (run / "checkpoints").iterdir():  # every checkpoint, so none is left to fall back on
        (step / damaged).write_text(content)
    err = refused(capsys, ["train", "--output-dir", str(run), "--resume", "--steps", "4"], run)
    assert err.startswith("spiral-arena train: error: resume: ") and says in err, err
    assert "no earlier checkpoint is complete; drop --resume to start a new run" in err


def test_no_games_in_the_games_list(tmp_path, capsys):
    err = refused(capsys, ["train", "--games", ",", "--output-dir", str(tmp_path / "run")], tmp_path)
    assert (
        err == "spiral-arena train: error: games: no games given in ','; give env ids, e.g. KuhnPoker-v0,TicTacToe-v0"
    )


def test_an_output_dir_that_cannot_be_made(tmp_path, capsys):
    (tmp_path / "afile.txt").write_text("x")
    err = refused(capsys, ["train", "--output-dir", str(tmp_path / "afile.txt" / "sub")], tmp_path)
    assert err == (
        f"spiral-arena train: error: output_dir: {tmp_path / 'afile.txt' / 'sub'} cannot be made: "
        f"{tmp_path / 'afile.txt'} is a file, not a directory"
    )


def test_an_output_dir_the_system_refuses_is_one_line_as_a_process(tmp_path):
    """/proc takes no new folder even for root (who passes every permission check): the mkdir's own error."""
    done = subprocess.run(
        [sys.executable, "-m", "spiral_arena.cli", "train", "--output-dir", "/proc/nope", "--steps", "1"],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.count("\n") == 1 and "/proc/nope" in done.stderr and "output_dir" in done.stderr


# ---- the time limit bounds the whole run ---------------------------------------------------------


def test_the_time_limit_skips_the_evaluations_it_has_passed(tmp_path, capsys):
    out = tmp_path / "run"
    settings = {**SMALL, "output_dir": str(out), "sft_steps": 100_000, "steps": 50, "time_limit_s": 2}
    train(TrainConfig.build(settings))
    captured = capsys.readouterr()
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 1]  # the warm start cut short, then one RL step, no more
    assert not any(k.startswith("eval/") for r in rows for k in r)
    assert rows[1]["stopped_by_time_limit"] == 1.0 and rows[1]["eval_skipped_by_time_limit"] == 1.0
    assert "the evaluation of the warm start (step 0) was skipped: time_limit_s=2 has passed" in captured.err
    assert "the evaluation of step 1 was skipped: time_limit_s=2 has passed" in captured.err
    assert "No evaluation ran: time_limit_s=2 passed first (checkpoints/step_000001)" in captured.out
    assert (out / "checkpoints" / "step_000001").is_dir()

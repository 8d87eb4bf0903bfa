"""``spiral-arena eval`` end to end: the tiny model on CPU, an endpoint served by ``spiral-arena serve``,
manifests, regrading, GPQA's no-echo rule, and the training hook (``vllm:`` models: test_vllm_integration.py)."""

from __future__ import annotations

import csv
import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("math_verify", reason="needs the eval extra")

from spiral_arena.cli import main  # noqa: E402
from spiral_arena.evals.data import file_sha256  # noqa: E402
from spiral_arena.evals.run import MANIFEST_FILE, RESULTS_FILE, SAMPLES_FILE, EvalOptions, run_eval  # noqa: E402

DATA = Path(__file__).parent / "data" / "evals"
SCRIPT = Path(sys.executable).with_name("spiral-arena")
COMMAND = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "spiral_arena.cli"]


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> str:
    from trainers.tiny import create_tiny

    return str(create_tiny(tmp_path_factory.mktemp("tiny") / "model", ["KuhnPoker-v0"]))


def read_samples(directory: Path) -> list[dict]:
    return [json.loads(line) for line in (directory / SAMPLES_FILE).read_text().splitlines()]


def options(tiny: str, out: Path, **changes) -> EvalOptions:
    base = {
        "model": f"hf:{tiny}",
        "benchmarks": ["math500", "mmlu_pro"],
        "output_dir": out,
        "overrides": {"max_new_tokens": "6", "samples": "2"},
        "limit": 3,
        "data_dir": DATA,
        "batch_size": 4,
        "resamples": 200,
        "progress": False,
    }
    return EvalOptions(**(base | changes))


# ---- the command, as a user runs it ------------------------------------------------------------------


def test_the_command_runs_end_to_end_on_the_tiny_model(tiny, tmp_path):
    out = tmp_path / "run"
    done = subprocess.run(
        [*COMMAND, "eval", "--model", f"hf:{tiny}", "--benchmarks", "math500,amc23,mmlu_pro", "--data-dir", str(DATA),
         "--limit", "3", "--max-new-tokens", "6", "--output-dir", str(out), "--seed", "3", "--no-progress"],
        capture_output=True, text=True, timeout=240, env=os.environ | {"HF_HUB_OFFLINE": "1"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "math500" in done.stdout and f"run written to {out}" in done.stdout
    assert "amc23: 16 samples per item by default" in " ".join(done.stdout.split())
    samples = read_samples(out)
    assert len(samples) == 3 * 4 + 3 * 16 + 3 * 1  # spiral-offline: 4 samples, 1 on MMLU-Pro, 16 on AMC
    first = samples[0]
    assert first["prompt"].startswith("<|im_start|>user\nWork through the problem step by step")
    assert set(first) >= {"response", "extracted", "correct", "status", "gold", "tokens", "finished"}
    assert 1 <= first["tokens"] <= 6 and first["gold"] == ["47"]
    mmlu = [s for s in samples if s["benchmark"] == "mmlu_pro"]
    assert mmlu[0]["option_count"] == 10 and mmlu[0]["gold"] == "C" and "option_order" not in mmlu[0]
    results = json.loads((out / RESULTS_FILE).read_text())
    amc = results["benchmarks"]["amc23"]
    assert amc["samples_per_item"] == 16 and set(amc["pass_at_k"]) == {"1", "2", "4", "8", "16"}
    assert results["averages"]["math"]["benchmarks"] == ["amc23", "math500"]
    assert results["headline_metrics"] == {"math": "first-sample", "choice": "mean"}
    assert results["benchmarks"]["mmlu_pro"]["samples_per_item"] == 1
    assert results["averages"]["math"]["complete"] is False and results["averages"]["general"]["of"] == [
        "gpqa_diamond",
        "mmlu_pro",
    ]
    manifest = json.loads((out / MANIFEST_FILE).read_text())
    protocol = manifest["protocol"]
    assert protocol["preset"]["name"] == "spiral-offline" and protocol["overrides"] == {"max_new_tokens": "6"}
    assert protocol["preset"]["math"]["template"].startswith("<|im_start|>user\n{instruction}")
    assert len(protocol["template_sha256"]["math"]) == 64 and protocol["samples_per_item"]["amc23"] == 16
    assert protocol["benchmarks"]["math500"]["item_ids"] == [s["item_id"] for s in samples[:12:4]]
    assert protocol["grader"]["math"]["version"] == "0.9.0" and protocol["grader"]["choice"]["mode"] == "spiral"
    assert manifest["seed"] == 3 and manifest["engine"]["backend"] == "hf" and manifest["engine"]["batch_size"] == 32
    assert manifest["engine"]["versions"]["torch"] and len(manifest["model"]["weights_sha256"]) == 64
    assert manifest["data"]["math500"]["sha256"] == file_sha256(DATA / "math500.jsonl")
    assert manifest["package"]["spiral-arena"] and manifest["timing"]["wall_time_s"] > 0


def test_bad_input_is_one_line(tiny, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    cases = [
        (["eval", "--benchmarks", "math500"], "eval needs --model SPEC"),
        (["eval", "--model", "random", "--benchmarks", "math500"], "random is a game agent, not a language model"),
        (["eval", "--model", f"hf:{tiny}", "--benchmarks", "math5000"], "unknown benchmark 'math5000'"),
        (["eval", "--model", f"hf:{tiny}", "--preset", "qwen3", "--benchmarks", "math500"], "unknown preset"),
        (["eval", "--model", f"hf:{tiny}", "--benchmarks", "aime25", "--data-dir", str(tmp_path)], "aime25.jsonl"),
        (["eval", "--model", f"vllm:{tiny}", "--benchmarks", "math500", "--data-dir", str(DATA),
          "--output-dir", str(tmp_path / "v")], f"vllm:{tiny}: vLLM is not installed: pip install"),
        (["eval", "--model", "vllm:/nowhere", "--benchmarks", "math500", "--output-dir", str(tmp_path / "n")],
         "--model vllm:PATH: model path /nowhere does not exist"),
        (["eval", "--model", "openai:m@http://127.0.0.1:9/v1", "--benchmarks", "math500", "--data-dir", str(DATA),
          "--output-dir", str(tmp_path / "o")], "an API endpoint takes chat messages: use --preset chat"),
        (["eval", "--model", "gemini:g", "--preset", "chat", "--benchmarks", "mmlu_pro", "--data-dir", str(DATA),
          "--output-dir", str(tmp_path / "g")], "gemini:g needs an API key: set GEMINI_API_KEY"),
        (["eval", "regrade", str(tmp_path)], "is not an eval run"),
    ]  # fmt: skip
    if importlib.util.find_spec("vllm") is not None:  # vLLM is installed: no error to see
        cases = [c for c in cases if "vllm" not in c[1]]
    for argv, message in cases:
        assert main(argv) == 2, argv
        error = capsys.readouterr().err.strip()
        assert message in error and "\n" not in error, (argv, error)


# ---- identity, regrading ----------------------------------------------------------------------------


def test_identical_runs_give_identical_manifests_samples_and_results(tiny, tmp_path):
    run_eval(options(tiny, tmp_path / "a"))
    run_eval(options(tiny, tmp_path / "b"))
    a, b = (json.loads((tmp_path / d / MANIFEST_FILE).read_text()) for d in "ab")
    a.pop("timing"), b.pop("timing")  # wall times differ; nothing else may
    assert a == b
    assert (tmp_path / "a" / SAMPLES_FILE).read_bytes() == (tmp_path / "b" / SAMPLES_FILE).read_bytes()
    assert (tmp_path / "a" / RESULTS_FILE).read_bytes() == (tmp_path / "b" / RESULTS_FILE).read_bytes()
    # another seed: the same protocol, other samples
    run_eval(options(tiny, tmp_path / "c", seed=1))
    c = json.loads((tmp_path / "c" / MANIFEST_FILE).read_text())
    assert c["protocol_hash"] == a["protocol_hash"] and c["seed"] == 1
    assert [s["response"] for s in read_samples(tmp_path / "c")] != [
        s["response"] for s in read_samples(tmp_path / "a")
    ]
    with pytest.raises(ValueError, match="already holds a run"):
        run_eval(options(tiny, tmp_path / "a"))


def test_regrade_reads_the_stored_responses_again(tiny, tmp_path, capsys):
    out = tmp_path / "run"
    run_eval(options(tiny, out))
    samples = read_samples(out)
    samples[0]["response"] = "It is 51 - 4, so \\boxed{47}."  # math500's first item: gold 47
    samples[1]["response"] = "First \\boxed{40}, no: \\boxed{47}."
    mmlu = next(i for i, s in enumerate(samples) if s["benchmark"] == "mmlu_pro")
    samples[mmlu]["response"] = "\\boxed{c}"  # the right letter, lowercase: only SPIRAL's rule accepts it
    (out / SAMPLES_FILE).write_text("".join(json.dumps(s) + "\n" for s in samples))
    before = json.loads((out / MANIFEST_FILE).read_text())["protocol_hash"]

    assert main(["eval", "regrade", str(out), "--no-progress"]) == 0
    regraded = read_samples(out)
    assert [(s["extracted"], s["correct"]) for s in regraded[:2]] == [("47", True), ("47", True)]
    assert (regraded[mmlu]["extracted"], regraded[mmlu]["correct"]) == ("C", True)
    manifest = json.loads((out / MANIFEST_FILE).read_text())
    assert manifest["protocol_hash"] == before  # same grader, same protocol
    assert json.loads((out / RESULTS_FILE).read_text())["benchmarks"]["math500"]["mean_at_n"]["value"] == 2 / 6
    assert "regraded" in capsys.readouterr().out

    assert main(["eval", "regrade", str(out), "--math-extraction", "all-boxes", "--choice-extraction", "default",
                 "--no-progress"]) == 0  # fmt: skip
    regraded = read_samples(out)
    assert regraded[1]["correct"] is False and regraded[1]["extracted"] == "40,47"  # the boxes joined into a set
    assert regraded[mmlu]["correct"] is False  # the default extractor takes uppercase letters only
    manifest = json.loads((out / MANIFEST_FILE).read_text())
    assert manifest["protocol_hash"] != before and manifest["regraded_from_protocol_hash"] == before
    assert manifest["protocol"]["grader"]["math"]["extraction"] == "all-boxes"
    assert manifest["protocol"]["overrides"]["choice.extraction"] == "default"


# ---- GPQA: items never leave the file they came from -----------------------------------------------------


def test_gpqa_items_never_reach_logs_output_or_files(tiny, tmp_path, capsys, caplog):
    marker = "ZQX-UNIQUE-GPQA-MARKER-7731"
    path = tmp_path / "private" / "my_gpqa.csv"
    path.parent.mkdir()
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["Question", "Correct Answer", "Incorrect Answer 1", "Incorrect Answer 2",
                         "Incorrect Answer 3", "Explanation", "Record ID"])  # fmt: skip
        for i in range(3):
            writer.writerow([f"{marker} question {i}?", f"{marker} right", f"{marker} w1", f"{marker} w2",
                             f"{marker} w3", f"{marker} because", f"rec{i}"])  # fmt: skip
    out = tmp_path / "run"
    argv = ["eval", "--model", f"hf:{tiny}", "--benchmarks", "gpqa_diamond", "--gpqa-path", str(path),
            "--limit", "3", "--max-new-tokens", "6", "--output-dir", str(out)]  # fmt: skip
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert marker not in captured.out + captured.err + caplog.text
    for name in (SAMPLES_FILE, RESULTS_FILE, MANIFEST_FILE):
        assert marker not in (out / name).read_text(), name
    samples = read_samples(out)
    assert len(samples) == 30 and all(s["response"] is None and len(s["prompt_sha256"]) == 64 for s in samples)
    assert all(sorted(s["option_order"]) == [0, 1, 2, 3] for s in samples)
    assert len({tuple(s["option_order"]) for s in samples}) > 1  # a fresh seeded order per (item, sample)
    assert all(s["gold"] == "ABCD"[s["option_order"].index(0)] for s in samples)  # the correct one moved with it


# ---- an OpenAI-compatible endpoint: spiral-arena serve on 127.0.0.1 -----------------------------------


class Served:
    """``spiral-arena serve`` in a subprocess on a free loopback port."""

    def __init__(self, log: Path, *args: str) -> None:
        import httpx

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{port}/v1"
        with log.open("w") as handle:
            self.process = subprocess.Popen([*COMMAND, "serve", "--port", str(port), *args], stdout=handle,
                                            stderr=subprocess.STDOUT)  # fmt: skip
        deadline = time.monotonic() + 60
        while True:
            assert self.process.poll() is None, log.read_text()
            try:
                if httpx.get(f"{self.url}/models", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Iterator[Served]:
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    server = Served(tmp_path_factory.mktemp("serve") / "serve.log", "--agent", "random")
    yield server
    server.stop()


def test_an_openai_compatible_endpoint_end_to_end(served, tmp_path, monkeypatch, capsys):
    """The served random agent picks among the legal actions a prompt lists, so a template listing
    boxed letters gets answers the grader can read: right about a third of the time."""
    secret = "sk-test-EVAL-SECRET-42"
    monkeypatch.setenv("OPENAI_API_KEY", secret)  # sent to the server, never written anywhere
    template = tmp_path / "choice.txt"
    template.write_text("{question}\n{options}\nYour turn. Legal actions: [\\boxed{A}], [\\boxed{B}], [\\boxed{C}].")
    out = tmp_path / "run"
    argv = ["eval", "--model", f"openai:served-random@{served.url}", "--benchmarks", "mmlu_pro,gpqa_diamond",
            "--data-dir", str(DATA), "--preset", "chat", "--set", f"choice.template=@{template}", "--samples", "8",
            "--concurrency", "4", "--output-dir", str(out), "--no-progress"]  # fmt: skip
    assert main(argv) == 0
    printed = capsys.readouterr()
    samples = read_samples(out)
    assert len(samples) == 3 * 8 * 2
    assert all(s["status"] == "graded" and s["extracted"] in "ABC" and s["tokens"] is None for s in samples)
    assert 0 < sum(s["correct"] for s in samples) < len(samples)
    mmlu = [s for s in samples if s["benchmark"] == "mmlu_pro"]
    assert all(s["correct"] == (s["extracted"] == s["gold"]) for s in mmlu)
    manifest = json.loads((out / MANIFEST_FILE).read_text())
    assert manifest["engine"] | {"versions": None} == {
        "backend": "api",
        "provider": "openai",
        "model": "served-random",
        "base_url": served.url,
        "concurrency": 4,
        "max_retries": 4,
        "seeded": False,
        "versions": None,
    }
    assert manifest["model"] == {"spec": f"openai:served-random@{served.url}", "kind": "api"}
    everything = printed.out + printed.err + "".join((out / f).read_text() for f in os.listdir(out))
    assert secret not in everything


def test_failed_requests_keep_the_finished_samples_and_resume_asks_only_for_the_rest(tmp_path, monkeypatch, capsys):
    """Issue 27: one request that failed after its retries discarded every finished sample of the run."""
    from conftest import JSONEndpoint

    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    state = {"down": True, "requests": 0}

    def reply(body: dict, headers: object) -> tuple[int, dict]:
        state["requests"] += 1
        if state["down"] and state["requests"] == 6:  # the last request, a client error: not retried
            return 400, {"error": {"message": "this request cannot be served"}}
        return 200, {"choices": [{"message": {"role": "assistant", "content": "\\boxed{A}"}, "finish_reason": "stop"}]}

    server = JSONEndpoint(reply)
    out = tmp_path / "run"
    argv = ["eval", "--model", f"openai:m@{server.url}", "--benchmarks", "mmlu_pro", "--data-dir", str(DATA),
            "--preset", "chat", "--samples", "2", "--limit", "3", "--concurrency", "1", "--output-dir", str(out),
            "--no-progress"]  # fmt: skip
    try:
        assert main(argv) == 1
        error = capsys.readouterr().err.strip()
        assert error == (
            f"spiral-arena eval: 1 of 6 samples have no response (m at {server.url}: HTTP 400: this request cannot "
            f"be served); the 5 finished samples are kept in {out}: run the same command with --resume to ask for "
            "the rest"
        )
        kept = read_samples(out)
        assert len(kept) == 5 and not (out / RESULTS_FILE).exists()
        assert json.loads((out / MANIFEST_FILE).read_text())["incomplete"]["missing_samples"] == 1
        assert main(["eval", "compare", str(out), str(out)]) == 2
        assert f"{out / SAMPLES_FILE} holds 5 samples where manifest.json lists 6 (1 missing: mmlu_pro 1)" in (
            capsys.readouterr().err
        )
        assert main(["eval", "regrade", str(out), "--no-progress"]) == 2
        assert "before regrading" in capsys.readouterr().err and not (out / RESULTS_FILE).exists()

        state["down"], sent = False, state["requests"]
        assert main([*argv, "--resume"]) == 0
        assert state["requests"] - sent == 1  # only the missing sample was asked for
        samples = read_samples(out)
        assert len(samples) == 6 and samples[:5] == kept
        assert "incomplete" not in json.loads((out / MANIFEST_FILE).read_text())
        assert main(["eval", "compare", str(out), str(out)]) == 0
        capsys.readouterr()

        results = (out / RESULTS_FILE).read_bytes()  # a run cut by hand is not regraded as a complete one
        (out / SAMPLES_FILE).write_text("".join(json.dumps(s) + "\n" for s in samples[:3]))
        assert main(["eval", "regrade", str(out), "--no-progress"]) == 2
        assert "holds 3 samples where manifest.json lists 6" in capsys.readouterr().err
        assert (out / RESULTS_FILE).read_bytes() == results
    finally:
        server.stop()


def early_stopping_copy(tiny: str, out: Path) -> str:
    """The tiny model with its end-of-turn logit raised towards where its last hidden states point, so
    its answers end after different numbers of tokens (the untrained model almost never stops)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from spiral_arena.models.prompting import stop_token_ids

    tokenizer = AutoTokenizer.from_pretrained(tiny)
    model = AutoModelForCausalLM.from_pretrained(tiny)
    stop = stop_token_ids(tokenizer, model.generation_config)[0]
    ids = tokenizer("Work through the problem step by step and give the answer.", return_tensors="pt")["input_ids"]
    with torch.no_grad():
        direction = model(ids, output_hidden_states=True).hidden_states[-1][0].mean(0)
        model.get_output_embeddings().weight[stop] = 5.0 * direction / direction.norm() ** 2
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return str(out)



def test_each_sample_is_its_requests_output(tiny, tmp_path, monkeypatch):
    """A sample's text, token count and finished flag are those of the completion the engine returned for
    its request (on a model whose answers end after different numbers of tokens)."""
    from transformers import AutoTokenizer

    from spiral_arena.models.hf import HFEngine

    tiny = early_stopping_copy(tiny, tmp_path / "model")
    generated = []  # what the engine returned: (token ids, finished) per request
    original = HFEngine.generate

    def recording(self, *args, **kwargs):
        completions = original(self, *args, **kwargs)
        generated.extend((list(c.token_ids), c.finished) for c in completions)
        return completions

    monkeypatch.setattr(HFEngine, "generate", recording)
    run_eval(options(tiny, tmp_path / "run", benchmarks=["math500"]))
    tokenizer = AutoTokenizer.from_pretrained(tiny)
    expected = [(tokenizer.decode(ids, skip_special_tokens=True), len(ids), done) for ids, done in generated]
    samples = read_samples(tmp_path / "run")
    assert len(samples) == 6 and {done for _, _, done in expected} == {True, False}  # some stopped early
    assert sorted((s["response"], s["tokens"], s["finished"]) for s in samples) == sorted(expected)


# ---- the training hook -----------------------------------------------------------------------------------


def test_reasoning_eval_runs_on_the_learners_engine(tiny):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from spiral_arena.evals.training import parse_eval_spec, reasoning_eval
    from spiral_arena.models.hf import HFEngine
    from spiral_arena.models.prompting import stop_token_ids

    class RecordingEngine(HFEngine):
        """The trainer's engine, keeping the token-id prompts it was given."""

        prompts: list[list[int]] = []

        def generate(self, prompts, *args, **kwargs):
            self.prompts.extend(prompts)
            return super().generate(prompts, *args, **kwargs)

    tokenizer = AutoTokenizer.from_pretrained(tiny)
    model = AutoModelForCausalLM.from_pretrained(tiny)
    engine = RecordingEngine(model, stop_token_ids(tokenizer), tokenizer.pad_token_id)
    model.train()
    kwargs = {"data_dir": DATA, "overrides": {"max_new_tokens": "5"}, "batch_size": 8}
    metrics = reasoning_eval(engine, tokenizer, "math500:4,mmlu_pro:2", seed=5, **kwargs)
    assert model.training  # the engine puts the learner back in training mode
    assert set(metrics) == {
        *(f"reasoning/{b}/{m}" for b in ("math500", "mmlu_pro")
          for m in ("accuracy", "no_answer_rate", "truncation_rate", "response_tokens_mean")),
        "reasoning/average/accuracy",
    }  # fmt: skip
    assert all(0 <= v <= 1 for k, v in metrics.items() if not k.endswith("tokens_mean"))
    assert metrics["reasoning/math500/truncation_rate"] == 1.0  # 5 tokens never finish a solution
    first = [tokenizer.decode(p) for p in engine.prompts]
    assert len(first) == 6 and all(t.startswith("<|im_start|>user\nQuestion: ") for t in first)  # spiral-online
    engine.prompts.clear()
    assert reasoning_eval(engine, tokenizer, "math500:4,mmlu_pro:2", seed=5, **kwargs) == metrics  # fixed subset
    assert sorted(tokenizer.decode(p) for p in engine.prompts) == sorted(first)
    assert parse_eval_spec("math500:32, aime24") == [("math500", 32), ("aime24", None)]
    with pytest.raises(ValueError, match="must be a positive integer"):
        parse_eval_spec("math500:0")

"""Presets: each renders exactly its documented text (golden files), and every field can be overridden."""

from __future__ import annotations

from pathlib import Path

import pytest

from spiral_arena.evals.presets import (
    PresetError,
    apply_overrides,
    apply_stop,
    load_preset,
    parse_overrides,
    preset_from_record,
    preset_names,
    render,
)

GOLDEN = Path(__file__).parent / "data" / "evals" / "golden"
MATH_QUESTION = "What is the value of $2 + 3 \\cdot 4$?"
CHOICE_QUESTION, OPTIONS = "Which of these is a prime number?", ("4", "6", "7", "9")


def test_the_four_presets_exist_with_their_settings():
    assert preset_names() == ["chat", "fewshot-4", "spiral-offline", "spiral-online"]
    offline = load_preset("spiral-offline")
    assert (offline.temperature, offline.top_p, offline.max_new_tokens, offline.samples) == (0.6, 0.95, 8192, 4)
    assert offline.math.format == "raw" and offline.choice.format == "chat"
    assert (offline.math.metric, offline.choice.metric) == ("first-sample", "mean")  # GPQA: SPIRAL's mean of 10
    assert offline.samples_by_benchmark == {"gpqa_diamond": 10, "mmlu_pro": 1}
    assert offline.choice.extraction == "spiral" and not offline.math.shots
    online = load_preset("spiral-online")
    assert (online.max_new_tokens, online.samples, online.math.extraction) == (4096, 1, "last-box")
    fewshot = load_preset("fewshot-4")
    assert len(fewshot.math.shots) == len(fewshot.choice.shots) == 4 and fewshot.math.stop == ("\nQuestion:",)
    chat = load_preset("chat")
    assert chat.math.format == chat.choice.format == "chat" and chat.math.metric == chat.choice.metric == "mean"


@pytest.mark.parametrize("name", ["spiral-offline", "spiral-online", "fewshot-4", "chat"])
def test_presets_render_exactly_the_golden_text(name):
    preset = load_preset(name)
    assert render(preset.math, MATH_QUESTION) == (GOLDEN / f"{name}.math.txt").read_text()
    assert render(preset.choice, CHOICE_QUESTION, OPTIONS) == (GOLDEN / f"{name}.choice.txt").read_text()


def test_spiral_templates_have_their_documented_shape():
    offline = render(load_preset("spiral-offline").math, "Q")
    assert offline.startswith("<|im_start|>user\n") and offline.endswith(
        "Question: Q<|im_end|>\n<|im_start|>assistant\n"
    )
    assert "\\boxed{}" in offline and "system" not in offline and "<think>" not in offline
    online = render(load_preset("spiral-online").math, "Q")
    assert online.startswith("<|im_start|>user\nQuestion: Q\n")  # question first, instruction after


def test_rendering_leaves_braces_in_questions_alone():
    preset = load_preset("spiral-offline")
    text = render(preset.math, "Is {instruction} a {question}? \\frac{1}{2}")
    assert "Question: Is {instruction} a {question}? \\frac{1}{2}<|im_end|>" in text
    ten = render(preset.choice, "Pick one", tuple("abcdefghij"))
    assert "J) j" in ten and "one of A, B, C, D, E, F, G, H, I, J" in ten


def test_overrides_reach_every_field(tmp_path):
    template = tmp_path / "t.txt"
    template.write_text("Q: {question}\nA:")
    base = load_preset("fewshot-4")
    pairs = [
        "temperature=0",
        "top_p=1",
        "max_new_tokens=16",
        "samples=2",
        "math.metric=first-sample",
        "samples_by_benchmark.aime24=32",
        "math.shots=2",
        "choice.shots=0",
        "choice.template={question}\n{options}\nAnswer:",
        'math.stop=["\\n\\n", "Question"]',
        "math.extraction=last-box",
    ]
    changed = apply_overrides(base, parse_overrides(pairs))
    assert (changed.temperature, changed.top_p, changed.max_new_tokens, changed.samples) == (0.0, 1.0, 16, 2)
    assert changed.math.metric == "first-sample" and changed.samples_by_benchmark == {"aime24": 32}
    assert changed.math.shots == base.math.shots[:2] and changed.choice.shots == ()
    assert changed.math.stop == ("\n\n", "Question") and changed.math.extraction == "last-box"
    assert render(changed.choice, "q", ("x", "y")) == "q\nA) x\nB) y\nAnswer:"
    from_file = apply_overrides(base, {"math.template": f"@{template}", "math.shots": "0"})
    assert render(from_file.math, "2+2?") == "Q: 2+2?\nA:"
    assert base.template_hashes() != from_file.template_hashes()
    assert base.template_hashes()["choice"] == from_file.template_hashes()["choice"]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"temprature": "0"}, "unknown preset key 'temprature'; valid: temperature, top_p"),
        ({"temperature": "hot"}, "bad value for temperature"),
        ({"top_p": "0"}, "0 < top_p <= 1"),
        ({"samples": "0"}, "samples >= 1"),
        ({"choice.metric": "best"}, "choice.metric 'best' is not one of first-sample, mean"),
        ({"samples_by_benchmark.aime24": "0"}, "samples_by_benchmark.aime24 = 0: need a benchmark"),
        ({"samples_by_benchmark.aime26": "4"}, "unknown preset key 'samples_by_benchmark.aime26'"),
        ({"math.extraction": "first-box"}, "math.extraction 'first-box' is not one of last-box-or-text"),
        ({"choice.format": "jinja"}, "choice.format 'jinja' is not one of raw, chat"),
        ({"math.template": "no placeholder"}, "math.template has no {question} placeholder"),
        ({"choice.template": "{question} only"}, "choice.template has no {options} placeholder"),
        ({"math.shots": "5"}, "math.shots must be 0 to 4"),
        ({"math.stop": "Question"}, "bad value for math.stop"),
        ({"math.template": "@/nonexistent/t.txt"}, "override file /nonexistent/t.txt does not exist"),
    ],
)
def test_bad_overrides_are_one_clear_line(overrides, message):
    with pytest.raises(PresetError, match=message.replace("(", r"\(").replace("+", r"\+")):
        apply_overrides(load_preset("fewshot-4"), overrides)


def test_preset_files_and_records(tmp_path):
    with pytest.raises(PresetError, match="unknown preset 'qwen3'; valid: chat, fewshot-4, spiral-offline"):
        load_preset("qwen3")
    with pytest.raises(PresetError, match="--set takes KEY=VALUE"):
        parse_overrides(["temperature"])
    custom = tmp_path / "mine.toml"
    source = (Path(__file__).parents[1] / "spiral_arena" / "evals" / "presets" / "chat.toml").read_text()
    custom.write_text(source.replace('name = "chat"', 'name = "mine"'))
    assert load_preset(str(custom)).name == "mine"
    for name in preset_names():
        preset = load_preset(name)
        assert preset_from_record(preset.to_dict()) == preset


def test_stop_strings_cut_the_response():
    assert apply_stop("x = 2. \\boxed{2}\nQuestion: next one", ("\nQuestion:",)) == "x = 2. \\boxed{2}"
    assert apply_stop("no stop here", ("\nQuestion:",)) == "no stop here"
    assert apply_stop("a STOP b stop", ("stop", "STOP")) == "a "

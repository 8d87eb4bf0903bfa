"""Benchmark loaders on the project's own synthetic files (one per schema), and the offline errors."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from spiral_arena.evals.data import (
    BENCHMARKS,
    DataError,
    file_sha256,
    load_benchmark,
    load_file,
    parse_benchmark_list,
)

DATA = Path(__file__).parent / "data" / "evals"


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # never the network, even where `datasets` is installed


def test_every_benchmark_loads_from_the_project_files():
    for name in BENCHMARKS:
        loaded = load_benchmark(name, DATA)
        path = next(DATA.glob(f"{name}.*"))
        licence = BENCHMARKS[name].licence
        assert loaded.source == {"source": "file", "path": str(path), "sha256": file_sha256(path), "licence": licence}
        assert len(loaded.items) == len({item.id for item in loaded.items}) >= 3
        for item in loaded.items:
            assert item.question
            if BENCHMARKS[name].kind == "math":
                assert item.answers and not item.options and item.gold is None
            else:
                assert item.options and item.gold in "ABCDEFGHIJ"[: len(item.options)] and not item.answers


def test_math_schemas_become_one_item_shape():
    math500 = load_benchmark("math500", DATA).items
    assert math500[0].id == "synthetic/prealgebra/1.json" and math500[0].answers == ("47",)
    assert math500[0].metadata == {"subject": "Prealgebra", "level": 1}
    aime24 = load_benchmark("aime24", DATA).items
    assert [i.id for i in aime24] == ["60", "61", "62"] and aime24[0].answers == ("24",)
    aime25 = load_benchmark("aime25", DATA).items  # no id column: ids from the row number
    assert [i.id for i in aime25] == ["item-1", "item-2", "item-3"]
    amc = load_benchmark("amc23", DATA).items  # stored as floats: 25.0 -> "25", 0.3 stays 0.3
    assert [i.answers for i in amc] == [("25",), ("50",), ("0.3",)]
    minerva = load_benchmark("minerva", DATA).items  # the last row has only a solution: its last box
    assert minerva[0].answers == ("9.6 \\text{ eV}",) and minerva[2].answers == ("12",)


def test_olympiadbench_keeps_every_listed_answer():
    items = {i.id: i for i in load_benchmark("olympiadbench", DATA).items}
    assert items["2001"].answers == ("$\\frac{1}{2}$",)  # raw; the grader strips the stray $
    assert items["2002"].answers == ("1,3,5",) and items["2002"].metadata["is_multiple_answer"] is True
    assert items["2003"].answers == ("$2$", "$x=2$")  # a list: any entry may match


def test_multiple_choice_schemas():
    mmlu = load_benchmark("mmlu_pro", DATA).items
    assert [len(i.options) for i in mmlu] == [10, 10, 7]
    assert [i.gold for i in mmlu] == ["C", "E", "C"] and mmlu[0].options[2] == "Mercury"
    assert mmlu[0].id == "90001" and mmlu[0].metadata == {"category": "other", "src": "synthetic"}
    gpqa = load_benchmark("gpqa_diamond", DATA).items  # the CSV lists the correct answer first
    assert gpqa[0].id == "recSYNTH0001" and gpqa[0].options == ("Neutron", "Proton", "Electron", "Positron")
    assert all(i.gold == "A" for i in gpqa)


def test_limit_keeps_the_first_items_and_the_content_hash_ignores_the_file_layout(tmp_path):
    loaded = load_benchmark("math500", DATA)
    assert [i.id for i in loaded.head(2).items] == [i.id for i in loaded.items[:2]]
    with pytest.raises(DataError, match="--limit must be at least 1"):
        loaded.head(0)
    rows = [json.loads(line) for line in (DATA / "math500.jsonl").read_text().splitlines()]
    (tmp_path / "math500.jsonl").write_text("\n".join(json.dumps(r, indent=None, sort_keys=True) for r in rows))
    (tmp_path / "math500.jsonl.provenance.json").write_text('{"hub_id": "HuggingFaceH4/MATH-500", "revision": "abc"}')
    copy = load_benchmark("math500", tmp_path)
    assert copy.source["sha256"] != loaded.source["sha256"] and copy.items_sha256 == loaded.items_sha256
    assert copy.source["provenance"] == {"hub_id": "HuggingFaceH4/MATH-500", "revision": "abc"}


def test_benchmark_lists():
    assert parse_benchmark_list("all") == list(BENCHMARKS)
    assert parse_benchmark_list("aime24, math500,aime24") == ["aime24", "math500"]
    with pytest.raises(DataError, match="unknown benchmark 'math5000'; valid: math500, aime24"):
        parse_benchmark_list("math5000")


def test_offline_without_a_local_file_names_both_ways(tmp_path):
    with pytest.raises(DataError) as error:
        load_benchmark("math500", tmp_path)
    message = str(error.value)
    assert "\n" not in message
    assert f"looked in {tmp_path}" in message and "math500.jsonl" in message and "--data-dir" in message
    assert "HuggingFaceH4/MATH-500" in message and "split test" in message and "datasets" in message
    with pytest.raises(DataError, match=r"no --data-dir given.*opencompass/AIME2025 config AIME2025-I, AIME2025-II"):
        load_benchmark("aime25")


def test_a_directory_named_like_the_data_file_is_named_as_such(tmp_path):
    """Issue 27: a directory math500.jsonl got "put math500.jsonl ... in --data-dir"."""
    (tmp_path / "math500.jsonl").mkdir()
    with pytest.raises(DataError) as error:
        load_benchmark("math500", tmp_path)
    assert str(error.value) == (
        f"{tmp_path / 'math500.jsonl'} is a directory, not a data file; put the math500 rows in a file of that name"
    )


def test_gpqa_is_never_fetched_and_comes_from_a_path_you_give(tmp_path):
    with pytest.raises(DataError, match=r"gated and never downloaded.*--gpqa-path FILE.*gpqa_diamond\.csv"):
        load_benchmark("gpqa_diamond", tmp_path)
    assert len(load_benchmark("gpqa_diamond", None, DATA / "gpqa_diamond.csv").items) == 3
    with pytest.raises(DataError, match="is not a file"):
        load_benchmark("gpqa_diamond", None, tmp_path / "missing.csv")


def test_bad_rows_are_named_by_number_and_field_never_by_content(tmp_path):
    marker = "SECRET-QUESTION-TEXT-1234"
    path = tmp_path / "gpqa_diamond.csv"
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["Question", "Correct Answer", "Incorrect Answer 1", "Incorrect Answer 2", "Record ID"])
        writer.writerow([marker, marker, marker, marker, "rec1"])
    with pytest.raises(DataError) as error:
        load_file(BENCHMARKS["gpqa_diamond"], path)
    assert "row 1 has none of the fields Incorrect Answer 3" in str(error.value) and marker not in str(error.value)
    (tmp_path / "mmlu_pro.jsonl").write_text(json.dumps({"question": "q", "options": ["a", "b"], "answer": "D"}))
    with pytest.raises(DataError, match="row 1: its answer letter is not one of its 2 options"):
        load_benchmark("mmlu_pro", tmp_path)
    (tmp_path / "aime24.jsonl").write_text(
        '{"id": 1, "problem": "p", "answer": "1"}\n{"id": 1, "problem": "q", "answer": "2"}'
    )
    with pytest.raises(DataError, match="item id '1' appears twice"):
        load_benchmark("aime24", tmp_path)
    (tmp_path / "mmlu_pro.jsonl").write_text(json.dumps({"question": "q", "options": 5, "answer": "A"}))
    with pytest.raises(DataError, match=r"row 1 does not have the mmlu_pro schema \(TypeError\)"):
        load_benchmark("mmlu_pro", tmp_path)
    (tmp_path / "amc23.jsonl").write_text("{not json")
    with pytest.raises(DataError, match="line 1 is not valid JSON"):
        load_benchmark("amc23", tmp_path)


def test_parquet_files_load_like_jsonl(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet", reason="pyarrow comes with the eval extra: pip install -e '.[eval]'")
    import pyarrow

    rows = [json.loads(line) for line in (DATA / "mmlu_pro.jsonl").read_text().splitlines()]
    pq.write_table(pyarrow.Table.from_pylist(rows), tmp_path / "mmlu_pro.parquet")
    assert load_benchmark("mmlu_pro", tmp_path).items_sha256 == load_benchmark("mmlu_pro", DATA).items_sha256

"""Reading the release: column mapping, every option layout, answer resolution, and errors that name the row."""

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from builders.errors import InputError
from builders.options import LETTERS
from builders.sureon.release import ColumnMapping, ReleaseError, check_leakage, find_split_files, read_release


def by_id(release):
    return {r["question_id"]: r for split in release.splits.values() for r in split.records}


def first_mcq(rows, split="test"):
    return next(r for r in rows[split] if r["options"])


def test_sample_release_reads_with_default_mapping(rows):
    from conftest import SAMPLE_RELEASE

    release = read_release(SAMPLE_RELEASE)
    assert {s: len(v.records) for s, v in release.splits.items()} == {s: len(r) for s, r in rows.items()}
    records = by_id(release)
    for split_rows in rows.values():
        for row in split_rows:
            record = records[row["question_id"]]
            if row["options"]:  # structs: presentation order is the letter order, the answer is the flagged text
                assert record["options"] == [o["text"] for o in row["options"]]
                assert record["answer"] == row["answer"]
                assert row["options"][record["answer_index"]]["correct"] is True
            assert record["passes_blind_curation"] is row["passes_blind_curation"]
    assert release.unknown_categories == {"object_localization": 1}


def test_missing_required_column_names_it_and_lists_found_columns(rows, write_rows):
    for split_rows in rows.values():
        for row in split_rows:
            row["question_text"] = row.pop("question")
    folder = write_rows(rows, schema=None)
    with pytest.raises(ReleaseError) as err:
        read_release(folder)
    message = str(err.value)
    assert "question (column 'question')" in message
    assert "question_text" in message and "--column" in message
    # the fix the message suggests works
    release = read_release(folder, ColumnMapping.from_cli(["question=question_text"]))
    assert all(r["question"] for r in release.splits["test"].records)


def test_explicitly_mapped_optional_column_must_exist(write_rows, rows):
    folder = write_rows(rows)
    with pytest.raises(ReleaseError, match="specialty \\(column 'speciality'\\)"):
        read_release(folder, ColumnMapping.from_cli(["specialty=speciality"]))


def test_mapping_rejects_unknown_fields_and_malformed_pairs(tmp_path):
    with pytest.raises(ReleaseError, match="unknown mapping field"):
        ColumnMapping.from_cli(["questoin=q"])
    with pytest.raises(InputError, match="write KEY=VALUE, e.g. --column question=question_text"):
        ColumnMapping.from_cli(["question"])
    mapping_file = tmp_path / "mapping.yaml"
    mapping_file.write_text("question: prompt\noption_columns: opt1, opt2\ntranscript: none\n")
    mapping = ColumnMapping.from_cli(None, str(mapping_file))
    assert (mapping.question, mapping.option_columns, mapping.transcript) == ("prompt", ["opt1", "opt2"], None)


def test_unknown_extra_columns_are_carried_through(rows, write_rows):
    for split_rows in rows.values():
        for i, row in enumerate(split_rows):
            row["video_title"] = f"lecture {i}"
            row["answer_index"] = i  # an output column name: carried as release_answer_index
    folder = write_rows(rows, schema=None)
    release = read_release(folder)
    test = release.splits["test"]
    assert [f.name for f in test.extra_fields] == ["video_title", "release_answer_index"]
    assert test.records[2]["_extras"] == {"video_title": "lecture 2", "release_answer_index": 2}


def _relayout(rows, convert):
    for split_rows in rows.values():
        for row in split_rows:
            structs = row.pop("options")
            row.update(convert(row, structs))
    return rows


@pytest.mark.parametrize(
    "layout",
    [
        "structs",
        "strings",
        "letter_columns",
        "option_x_columns",
        "json_string",
        "letter_mapping_json",
        "answer_letter",
    ],
)
def test_every_option_layout_gives_the_same_records(layout, rows, write_rows):
    from conftest import SAMPLE_RELEASE

    expected = by_id(read_release(SAMPLE_RELEASE))
    width = max(len(r["options"]) for s in rows.values() for r in s)

    def convert(row, structs):
        texts = [o["text"] for o in structs]
        letter = LETTERS[next((i for i, o in enumerate(structs) if o["correct"]), 0)]
        if layout == "structs":
            return {"options": [dict(o, correct=None) for o in reversed(structs)]}  # letters decide the order
        if layout == "strings":
            return {"options": texts}
        if layout == "letter_columns":
            return {LETTERS[i]: (texts[i] if i < len(texts) else None) for i in range(width)}
        if layout == "option_x_columns":
            return {f"option_{LETTERS[i].lower()}": (texts[i] if i < len(texts) else "") for i in range(width)}
        if layout == "json_string":
            return {"options": json.dumps(structs)}
        if layout == "letter_mapping_json":
            return {"options": json.dumps({o["letter"]: o["text"] for o in structs})}
        return {"options": texts, "answer": letter if texts else row["answer"]}  # answer given as a letter

    folder = write_rows(_relayout(rows, convert), schema=None)
    got = by_id(read_release(folder))
    for qid, record in expected.items():
        for key in ("options", "answer", "answer_index", "answer_order", "answer_format"):
            assert got[qid][key] == record[key], (layout, qid, key)


def test_seven_options_and_any_count(rows, write_rows):
    row = first_mcq(rows)
    assert len(row["options"]) == 7
    extra = [{"letter": "H", "text": "Dividing the ligament", "correct": False}]
    row["options"] = row["options"] + extra
    release = read_release(write_rows(rows))
    assert len(by_id(release)[row["question_id"]]["options"]) == 8


def test_distractor_pool_is_shuffled_with_a_seed_from_the_question_id(rows, write_rows):
    def convert(row, structs):
        return {"distractors": [o["text"] for o in structs if not o["correct"]]}  # [] for open-ended questions

    folder = write_rows(_relayout(rows, convert), schema=None)
    first, second = by_id(read_release(folder)), by_id(read_release(folder))
    mcq = [r for r in first.values() if r["answer_format"] == "mcq"]
    assert all(r["options"][r["answer_index"]] == r["answer"] for r in mcq)
    assert {r["answer_index"] for r in mcq} != {0}  # the answer is not always first
    assert all(first[q]["options"] == second[q]["options"] for q in first)


def test_shuffle_options_flag_reorders_stably_and_keeps_the_answer(rows, write_rows):
    folder = write_rows(rows)
    stored = by_id(read_release(folder))
    shuffled = by_id(read_release(folder, shuffle_options=True))
    again = by_id(read_release(folder, shuffle_options=True))
    moved = 0
    stored = {qid: r for qid, r in stored.items() if r["options"]}
    for qid, record in stored.items():
        assert sorted(shuffled[qid]["options"]) == sorted(record["options"])
        assert shuffled[qid]["options"][shuffled[qid]["answer_index"]] == record["answer"]
        assert shuffled[qid]["options"] == again[qid]["options"]
        moved += shuffled[qid]["options"] != record["options"]
    assert moved > len(stored) // 2


def test_bad_rows_are_all_reported_with_file_row_and_question_id(rows, write_rows):
    rows["test"][0]["answer"] = "Stapling the appendix"  # matches no option
    rows["train"][3]["clip_id"] = "not-a-clip-id"  # no source_id column to fall back on
    rows["train"][8]["answer"] = "A,A,B"  # not a permutation
    rows["validation"][1]["passes_blind_curation"] = None
    folder = write_rows(rows)
    with pytest.raises(ReleaseError) as err:
        read_release(folder)
    message = str(err.value)
    assert message.startswith("3 row(s)")
    assert "data/test-00000-of-00001.parquet row 0 question_id='sureon_test_0030'" in message
    assert "'Stapling the appendix' matches no option" in message and "A. " in message
    assert "data/train-00000-of-00001.parquet row 3" in message and "not-a-clip-id" in message
    assert "not a permutation" in message


def test_answer_must_agree_with_the_flagged_option(rows, write_rows):
    row = first_mcq(rows)
    wrong = next(o for o in row["options"] if not o["correct"])
    row["answer"] = wrong["text"]
    with pytest.raises(ReleaseError, match="flag"):
        read_release(write_rows(rows))


def test_duplicate_question_ids_are_an_error(rows, write_rows):
    rows["validation"][0]["question_id"] = rows["train"][0]["question_id"]
    with pytest.raises(ReleaseError, match="duplicate question_id"):
        read_release(write_rows(rows))


def test_temporal_ordering_keeps_question_letters_answer_and_parsed_order(rows, write_rows):
    row = next(r for r in rows["train"] if r["category"] == "temporal_ordering")
    row["answer"] = "C -> B -> A"
    record = by_id(read_release(write_rows(rows)))[row["question_id"]]
    assert record["answer_format"] == "ordering" and record["category"] == "TO"
    assert record["answer"] == "C -> B -> A" and record["answer_order"] == ["C", "B", "A"]
    assert "A: clipping of the cystic duct" in record["question"]
    assert record["options"] == [] and record["answer_index"] == -1


def test_window_from_columns_time_window_or_clip_id(rows, write_rows):
    for row in rows["test"]:
        row["start"] = row["end"] = row["time_window"] = None
    rows["test"][0]["start"], rows["test"][0]["end"] = 3.0, "00:00:09.5"
    rows["test"][1]["time_window"] = "00:00:12.00 → 00:00:18.00"
    folder = write_rows(rows, schema=None)
    release = read_release(folder)
    records = by_id(release)
    assert (records["sureon_test_0030"]["start"], records["sureon_test_0030"]["end"]) == (3.0, 9.5)
    assert (records["sureon_test_0031"]["start"], records["sureon_test_0031"]["end"]) == (12.0, 18.0)
    assert (records["sureon_test_0032"]["start"], records["sureon_test_0032"]["end"]) == (12.0, 19.0)  # clip_id
    assert any("differ from the clip_id window" in w for w in release.warnings)  # 3.0 vs 2.5 is reported


def test_source_id_column_rescues_unparseable_clip_ids(rows, write_rows):
    for split_rows in rows.values():
        for row in split_rows:
            row["source_id"] = row["clip_id"].split("_")[0] if len(row["clip_id"]) > 0 else None
    row = rows["test"][0]
    row["clip_id"], row["source_id"], row["start"], row["end"] = "clip-0001", "Tt4Kk9Jj2Hh", 2.5, 10.5
    record = by_id(read_release(write_rows(rows, schema=None)))[row["question_id"]]
    assert (record["clip_id"], record["source_id"], record["start"]) == ("clip-0001", "Tt4Kk9Jj2Hh", 2.5)


def test_flag_values_keep_three_states(rows, write_rows):
    values = ["true", "False", "", None, "yes"]
    for split_rows in rows.values():
        for row in split_rows:
            row["passes_blind_curation"] = "null"
    for row, value in zip(rows["train"], values, strict=False):
        row["passes_blind_curation"] = value
    folder = write_rows(rows, schema=None)
    records = read_release(folder).splits["train"].records
    assert [r["passes_blind_curation"] for r in records[:5]] == [True, False, None, None, True]


def test_split_files_are_found_by_name(tmp_path):
    table = pa.table({"x": [1]})
    for rel in (
        "data/train-00000-of-00002.parquet",
        "data/train-00001-of-00002.parquet",
        "val/part-0.parquet",
        "benchmark.parquet",
        ".cache/huggingface/test.parquet",
    ):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, tmp_path / rel)
    found = {
        split: [p.relative_to(tmp_path).as_posix() for p in paths]
        for split, paths in find_split_files(tmp_path).items()
    }
    assert found == {
        "train": ["data/train-00000-of-00002.parquet", "data/train-00001-of-00002.parquet"],
        "validation": ["val/part-0.parquet"],
        "test": ["benchmark.parquet"],
    }
    pq.write_table(table, tmp_path / "data" / "extra.parquet")
    with pytest.raises(ReleaseError, match="cannot tell the split"):
        find_split_files(tmp_path)


def test_missing_release_folder_says_how_to_download(tmp_path):
    with pytest.raises(ReleaseError, match="hf download aleperez24/sureon"):
        read_release(tmp_path / "nope")
    with pytest.raises(ReleaseError, match="no parquet files"):
        read_release(tmp_path)


def test_every_release_file_cut_short_is_named_with_the_command_that_downloads_it_again(rows, write_rows):
    """A release file is a download: a cut one is named (all of them at once) with `hf download` to fetch it again,
    never taken for a file sureon built ("rebuild it")."""
    release = write_rows(rows)
    for split in ("validation", "test"):
        path = release / "data" / f"{split}-00000-of-00001.parquet"
        path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(ReleaseError) as error:
        read_release(release)
    message = str(error.value)
    assert message.startswith(f"2 file(s) of the release in {release} cannot be read as parquet: ")
    assert "data/validation-00000-of-00001.parquet (Parquet magic bytes not found in footer" in message
    assert (
        "download them again with `hf download aleperez24/sureon data/test-00000-of-00001.parquet "
        "data/validation-00000-of-00001.parquet --repo-type dataset" in message
    )
    assert "rebuild" not in message


def test_leakage_check_names_the_shared_source(rows, write_rows):
    leaked = dict(rows["train"][0], question_id="leak-1")
    rows["test"].append(leaked)
    release = read_release(write_rows(rows))
    with pytest.raises(ReleaseError, match="aB3_dE-5fGh in train, test"):
        check_leakage(release)

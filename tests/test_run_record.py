"""The run record (``training_complete.json``) is defined once: what the scripts write, what readers get back."""

import json

import pytest
from conftest import REPO

from builders.errors import InputError
from recipes.model_io.run_record import (
    COMPLETE_MARKER,
    FIELDS,
    GRPO,
    SFT,
    fields_table,
    read_run_record,
    run_record,
    write_run_record,
)


def values(kind: str) -> dict:
    return {name: f"value of {name}" for name, field in FIELDS.items() if kind in field.kinds}


@pytest.mark.parametrize("kind", [SFT, GRPO])
def test_a_record_has_exactly_its_kinds_fields_in_the_defined_order(kind):
    record = run_record(kind, dict(reversed(values(kind).items())))
    assert list(record) == [name for name, field in FIELDS.items() if kind in field.kinds]


def test_a_missing_or_undefined_field_is_refused():
    incomplete = values(SFT)
    del incomplete["max_frames"]
    with pytest.raises(ValueError, match="max_frames"):
        run_record(SFT, incomplete)
    with pytest.raises(ValueError, match="reward_means"):  # a GRPO field in an SFT record
        run_record(SFT, {**values(SFT), "reward_means": {}})


def test_a_record_reads_back_with_every_field(tmp_path):
    write_run_record(tmp_path, run_record(SFT, values(SFT)))
    record = read_run_record(str(tmp_path))
    assert set(record) == set(FIELDS)
    assert record["max_frames"] == "value of max_frames" and record["reward_means"] is None


def test_an_older_record_reads_with_nulls_and_a_newer_field_is_kept(tmp_path):
    (tmp_path / COMPLETE_MARKER).write_text(json.dumps({"name": None, "system_prompt": "S", "added_later": 1}))
    record = read_run_record(str(tmp_path))
    assert record["system_prompt"] == "S" and record["max_frames"] is None and record["added_later"] == 1


@pytest.mark.parametrize("text, phrase", [('{"name": ', "not JSON"), ("[1, 2]", "a list, not a training run")])
def test_a_damaged_record_is_one_line_naming_the_file(tmp_path, text, phrase):
    (tmp_path / COMPLETE_MARKER).write_text(text)
    with pytest.raises(InputError, match=phrase) as raised:
        read_run_record(str(tmp_path))
    assert str(tmp_path / COMPLETE_MARKER) in str(raised.value) and "\n" not in str(raised.value)


def test_a_folder_without_a_record_is_not_a_run(tmp_path):
    assert read_run_record(str(tmp_path)) is None


def test_the_docs_list_every_field():
    page = (REPO / "docs" / "training" / "run_record.md").read_text()
    assert fields_table() in page, "regenerate the table with: python -m recipes.model_io.run_record"

"""VLMEvalKit's prediction files read as this project's prediction records, for `sureon report` and the exported
datasets' own scoring.

VLMEvalKit (``ms-vlmeval`` 0.0.20, ``vlmeval/inference.py``) writes one table per model and dataset,
``{work_dir}/{model}/{model}_{dataset}.xlsx`` (``.tsv`` with ``PRED_FORMAT=tsv``): every column of the dataset but
``image``, plus ``prediction``, the model's output text. The datasets ``sureon export vlmevalkit`` writes carry in
each row the build's record (:data:`RECORD_COLUMN`, JSON: every field but the frames) and the condition
(:data:`MODE_COLUMN`), so a table alone is scored exactly as ``sureon eval`` scores its outputs: the Sureon rows by
:func:`recipes.evaluation.sureon.evaluate.score_all` (the project's answer parser), the public benchmark rows by
:func:`recipes.evaluation.public.evaluate.prediction_record` (the corpus's JSON answer parser). The records are the
lines ``sureon eval sureon`` / ``sureon eval public`` write to ``predictions.jsonl``.

Cells are read as written (openpyxl for ``.xlsx``, the csv module for ``.tsv``), never through pandas' guessing: an
output reading ``None`` or ``NA`` stays that text; an empty cell is an empty output (VLMEvalKit writes
``str(output)``). The xlsx writer VLMEvalKit uses (xlsxwriter) stores a control character as the OOXML escape
``_xHHHH_``; it is unescaped on reading, so a raw output reads back as generated.
"""

import csv
import json
import sys
from collections.abc import Iterable
from pathlib import Path

from builders.errors import InputError


RECORD_COLUMN = "sureon_record"  # the build's record as JSON (every field but the frames)
MODE_COLUMN = "mode"  # visual | blind (the Sureon benchmark); visual for the public benchmarks
PREDICTION_COLUMN = "prediction"  # VLMEvalKit's column of model outputs
TABLE_SUFFIXES = (".xlsx", ".tsv")


class TableError(InputError):
    """A prediction table that cannot be scored; the message names the file and row."""


def is_prediction_table(path: str | Path) -> bool:
    return Path(path).suffix.lower() in TABLE_SUFFIXES


def read_table(path: str | Path) -> list[dict[str, str]]:
    """The rows of a VLMEvalKit ``.xlsx`` (first sheet) or ``.tsv`` as header -> text (an empty cell is "")."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such prediction file")
    if path.suffix.lower() == ".xlsx":
        from openpyxl import load_workbook
        from openpyxl.utils.escape import unescape

        workbook = load_workbook(path, read_only=True, data_only=True)
        try:
            rows = [
                ["" if cell is None else unescape(str(cell)) for cell in row]
                for row in workbook.worksheets[0].iter_rows(values_only=True)
            ]
        finally:
            workbook.close()
    elif path.suffix.lower() == ".tsv":
        csv.field_size_limit(sys.maxsize)
        with path.open(encoding="utf-8", newline="") as handle:
            rows = list(csv.reader(handle, delimiter="\t"))
    else:
        raise TableError(f"{path}: not a VLMEvalKit prediction table (.xlsx or .tsv)")
    if not rows:
        raise TableError(f"{path}: empty table")
    header = rows[0]
    return [dict(zip(header, row + [""] * (len(header) - len(row)), strict=False)) for row in rows[1:] if any(row)]


def table_model_name(path: str | Path) -> str | None:
    """The model of a table VLMEvalKit named ``{work_dir}/{model}/{model}_{dataset}.xlsx``; None if not so named."""
    path = Path(path)
    model = path.parent.name
    return model if model and path.stem.startswith(f"{model}_") else None


def _scorable(path: Path, rows: list[dict[str, str]]) -> None:
    columns = set(rows[0]) if rows else set()
    missing = [c for c in (RECORD_COLUMN, MODE_COLUMN, PREDICTION_COLUMN) if c not in columns]
    if missing:
        raise TableError(
            f"{path}: no column(s) {', '.join(missing)}; only the predictions of datasets exported by `sureon export "
            "vlmevalkit` can be scored (they carry each question's record)"
        )


def _record(row: dict[str, str], where: str) -> dict:
    try:
        record = json.loads(row[RECORD_COLUMN])
    except json.JSONDecodeError as err:
        raise TableError(f"{where}: column {RECORD_COLUMN} is not valid JSON ({err.msg}); was the cell cut?") from None
    if not isinstance(record, dict):
        raise TableError(f"{where}: column {RECORD_COLUMN} must hold a JSON object")
    return record


def _table_rows(path: str | Path, rows: list[dict[str, str]] | None):
    """``(where, row, record)`` per row of a scorable table; ``where`` names its file and row (row 1: the header)."""
    path = Path(path)
    rows = read_table(path) if rows is None else rows
    _scorable(path, rows)
    for number, row in enumerate(rows, start=2):
        where = f"{path}:row {number}"
        yield where, row, _record(row, where)


def sureon_records(path: str | Path, model: str, rows: list[dict[str, str]] | None = None) -> list[tuple[str, dict]]:
    """``("file:row N", prediction record)`` per row of a Sureon table (``sureon eval sureon``'s records)."""
    from recipes.evaluation.sureon.evaluate import score_all

    found = []
    for where, row, record in _table_rows(path, rows):
        if "category" not in record or "answer_format" not in record:
            raise TableError(
                f"{where}: not a Sureon benchmark row (a public benchmark's table: `sureon report public`)"
            )
        mode = row[MODE_COLUMN]
        if mode not in ("visual", "blind"):
            raise TableError(f"{where}: mode {mode!r} is neither 'visual' nor 'blind'")
        outputs = {(record["question_id"], mode): row[PREDICTION_COLUMN]}
        found.append((where, score_all([record], [mode], outputs, model)[0]))
    return found


def public_records(path: str | Path, model: str, rows: list[dict[str, str]] | None = None) -> list[tuple[str, dict]]:
    """``("file:row N", prediction record)`` per row of a public benchmark table (``sureon eval public``'s)."""
    from recipes.evaluation.public.evaluate import prediction_record

    found = []
    for where, row, record in _table_rows(path, rows):
        if "answer_shape" not in record or "benchmark" not in record:
            raise TableError(f"{where}: not a public benchmark row (a Sureon table: `sureon report sureon`)")
        found.append((where, prediction_record(record, row[PREDICTION_COLUMN], model)))
    return found


def records_of(path: str | Path, model: str | None, kind: str) -> Iterable[tuple[str, dict]]:
    """The records of one table for ``sureon report sureon`` (``kind`` "sureon") or ``report public``; the model is
    ``model`` (NAME=PATH) or the name VLMEvalKit gave the file."""
    name = model or table_model_name(path)
    if name is None:
        raise TableError(
            f"{path}: the model cannot be read from the file name (VLMEvalKit writes MODEL/MODEL_DATASET.xlsx); "
            f"name it on the command line: NAME={path}"
        )
    return sureon_records(path, name) if kind == "sureon" else public_records(path, name)

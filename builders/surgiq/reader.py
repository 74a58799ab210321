"""Read SurgiQ source files (JSON, JSONL, CSV, TSV or parquet) into validated records in the stored option order.

The release is not on the Hub (the SurgiQ paper points at an anonymous review mirror) and its column names are not
known [``docs/release_format.md``], so every file is read through one declared :class:`SurgiqColumns` mapping whose
defaults are the proposed schema (``id``, ``question``, ``options``, ``answer``, ``explanation``, ``domain``,
``question_type``, ``source_type``). Options come as a list (or a JSON list in a CSV cell, or ``{letter: text}``) or
as one column per letter (``A``..``D``, ``option_a``..); the answer as a letter or as the option text. Every row
problem is collected and raised at once with its file, line and value: an unknown domain / question type / source
type, a question with other than four options, an answer matching no option, an empty field, a repeated id. Unmapped
columns are carried through unchanged.

Apart from the build (:mod:`builders.surgiq.build`) because the near-duplicate search reads the same files, and
a reading problem is the user's to fix whatever is then done with the records.
"""

import codecs
import csv
import io
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pyarrow as pa
import pyarrow.parquet as pq

from builders.arguments import key_value
from builders.columns import ColumnMapping, RowError, raise_row_errors
from builders.errors import InputError
from builders.options import LETTERS, OptionError, read_options, resolve_answer
from builders.schema import TEXT_MCQ_FEATURES
from builders.surgiq.vocabulary import BUILTIN_ALIASES, VOCABULARIES, value_key


NUM_OPTIONS = 4
SOURCE_SUFFIXES = (".json", ".jsonl", ".ndjson", ".csv", ".tsv", ".parquet")


class SurgiqError(InputError):
    """SurgiQ source files that cannot be read as they stand; the message says what, where and how to fix it."""


@dataclass
class SurgiqColumns(ColumnMapping):
    """Which source column holds each field (defaults: the proposed schema). ``None`` disables an optional field."""

    id: str = "id"
    question: str = "question"
    options: str | None = "options"
    option_columns: list[str] | None = None
    answer: str = "answer"
    explanation: str | None = "explanation"
    domain: str = "domain"
    question_type: str = "question_type"
    source_type: str | None = "source_type"

    REQUIRED: ClassVar[tuple[str, ...]] = ("id", "question", "answer", "domain", "question_type")
    ERROR: ClassVar[type[ValueError]] = SurgiqError


def parse_aliases(pairs: list[str] | None) -> dict[str, dict[str, str]]:
    """``["domain:Ortho=orthopedic_surgery"]`` -> ``{"domain": {"ortho": "orthopedic_surgery"}}``, validated."""
    aliases: dict[str, dict[str, str]] = {}
    for pair in pairs or []:
        target, canonical = key_value(pair, "--alias", "domain:Ortho=orthopedic_surgery")
        name, _, value = target.partition(":")
        if name not in VOCABULARIES or not value:
            raise SurgiqError(
                f"--alias {pair!r}: expected FIELD:VALUE=CANONICAL with FIELD one of {list(VOCABULARIES)}, "
                "e.g. --alias domain:Ortho=orthopedic_surgery"
            )
        if canonical not in VOCABULARIES[name]:
            raise SurgiqError(
                f"--alias {pair!r}: {canonical!r} is not a {name}; choose from {list(VOCABULARIES[name])}"
            )
        aliases.setdefault(name, {})[value_key(value)] = canonical
    return aliases


def canonical_value(name: str, value, aliases: dict[str, dict[str, str]]) -> str:
    """The canonical slug of a domain / question type / source type value; ``ValueError`` naming it if unknown."""
    key = value_key(value if value is not None else "")
    vocabulary = VOCABULARIES[name]
    if key in vocabulary:
        return key
    for table in (aliases.get(name, {}), BUILTIN_ALIASES[name]):
        if key in table:
            return table[key]
    raise InputError(
        f"unknown {name} {value!r}; expected one of {list(vocabulary)} "
        f"(map other spellings with --alias {name}:VALUE=CANONICAL)"
    )


@dataclass
class SourceRows:
    path: Path
    rows: list[tuple[str, dict]]  # (where, row)
    columns: list[str]


def _decoded(path: Path) -> str:
    """The text of a source file (UTF-8, a leading byte-order mark dropped); a byte that is not UTF-8 is an error
    naming the file, the line and the column (a file saved as Latin-1 or Windows-1252 fails here, not mid-read)."""
    data = path.read_bytes()
    data = data.removeprefix(codecs.BOM_UTF8)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        column = err.start - data.rfind(b"\n", 0, err.start)
        raise SurgiqError(
            f"{path} line {line}, column {column}: byte {data[err.start]:#04x} is not UTF-8; save the file as UTF-8 "
            "(e.g. iconv -f latin1 -t utf-8)"
        ) from None


def _json_rows(path: Path) -> list[dict]:
    try:
        data = json.loads(_decoded(path))
    except json.JSONDecodeError as err:
        raise SurgiqError(
            f"{path} line {err.lineno}, column {err.colno}: not valid JSON ({err.msg}); "
            "is it JSON Lines? name it .jsonl"
        ) from None
    if isinstance(data, dict) and data and all(isinstance(value, dict) for value in data.values()):
        return [{"id": key} | value for key, value in data.items()]  # keyed by id (PubMedQA-style)
    if isinstance(data, dict):
        lists = [value for value in data.values() if isinstance(value, list)]
        if len(lists) != 1:
            raise SurgiqError(f"{path}: expected a list of questions, or an object holding exactly one such list")
        data = lists[0]
    if not isinstance(data, list):
        raise SurgiqError(f"{path}: expected a list of questions, got {type(data).__name__}")
    return data


def _jsonl_rows(path: Path) -> list[tuple[str, dict]]:
    rows = []
    for number, line in enumerate(_decoded(path).split("\n"), start=1):
        if not line.strip():
            continue
        try:
            rows.append((f"{path.name} line {number}", json.loads(line)))
        except json.JSONDecodeError as err:
            raise SurgiqError(
                f"{path} line {number}, column {err.colno}: not valid JSON ({err.msg}); each line of a JSON Lines "
                "file is one question object"
            ) from None
    return rows


def _csv_rows(path: Path, delimiter: str) -> list[tuple[str, dict]]:
    reader = csv.DictReader(io.StringIO(_decoded(path), newline=""), delimiter=delimiter)
    rows = []
    try:
        header = reader.fieldnames or []
        repeated = sorted({name for name in header if header.count(name) > 1})
        if repeated:
            raise SurgiqError(f"{path} line 1: column(s) {repeated} appear twice in the header; rename one")
        for row in reader:
            where = f"{path.name} line {reader.line_num}"
            if None in row:  # more fields than the header names
                raise SurgiqError(
                    f"{path} line {reader.line_num}: {len(header) + len(row[None])} fields, the header has "
                    f"{len(header)}; quote fields that hold a {'tab' if delimiter == chr(9) else 'comma'}"
                )
            rows.append((where, dict(row)))
    except csv.Error as err:
        raise SurgiqError(f"{path} line {reader.line_num}: not valid CSV ({err})") from None
    return rows


def _parquet_rows(path: Path) -> list[tuple[str, dict]]:
    try:
        table = pq.read_table(path)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError) as err:
        raise SurgiqError(f"{path}: not a readable parquet file ({str(err).splitlines()[0]})") from None
    try:
        rows = table.to_pylist()
    except UnicodeDecodeError:
        raise SurgiqError(_bad_parquet_text(path, table)) from None
    return [(f"{path.name} row {i}", row) for i, row in enumerate(rows)]


def _bad_parquet_text(path: Path, table: pa.Table) -> str:
    """Which row and column of a parquet table hold text that is not UTF-8 (pyarrow writes such strings unchecked)."""
    for name, column in zip(table.column_names, table.columns, strict=True):
        try:
            column.to_pylist()
        except UnicodeDecodeError:
            for row in range(len(column)):
                try:
                    column[row].as_py()
                except UnicodeDecodeError as err:
                    return (
                        f"{path.name} row {row} column {name!r}: its text is not UTF-8 ({err.reason} at byte "
                        f"{err.start}); rewrite the file with UTF-8 strings"
                    )
    return f"{path}: some text is not UTF-8; rewrite the file with UTF-8 strings"


def read_source(path: Path) -> SourceRows:
    """Rows of one source file with where each comes from (``line N`` for text formats, ``row N`` otherwise); a file
    that cannot be read (not UTF-8, malformed, empty) is an error naming the file and the line."""
    path = Path(path)
    if not path.is_file():
        raise SurgiqError(f"{path}: no such file" + (" (it is a folder)" if path.is_dir() else ""))
    suffix = path.suffix.lower()
    if suffix not in SOURCE_SUFFIXES:
        raise SurgiqError(f"{path}: unsupported format {suffix!r}; use one of {', '.join(SOURCE_SUFFIXES)}")
    if suffix in (".jsonl", ".ndjson"):
        rows = _jsonl_rows(path)
    elif suffix == ".json":
        rows = [(f"{path.name} row {i}", row) for i, row in enumerate(_json_rows(path))]
    elif suffix in (".csv", ".tsv"):
        rows = _csv_rows(path, "\t" if suffix == ".tsv" else ",")
    else:
        rows = _parquet_rows(path)
    if not rows:
        raise SurgiqError(f"{path}: holds no questions (an empty file, or a header only); is it the file meant?")
    not_objects = [where for where, row in rows if not isinstance(row, dict)]
    if not_objects:
        raise SurgiqError(f"{path}: rows must be objects with named fields; {not_objects[0]} is not")
    columns = list(dict.fromkeys(key for _, row in rows for key in row))
    return SourceRows(path, rows, columns)


def _text(value) -> str:
    return "" if value is None else str(value).strip()


def _answer_text(value) -> str:
    answer = _text(value)
    letter = re.fullmatch(r"\(?([a-z])\)?[.):]?", answer)
    return letter.group(1).upper() if letter else answer


def normalise_row(row: dict, cols: dict, letter_columns: list[str], aliases: dict) -> dict:
    """One source row -> one record in the stored option order; ``ValueError`` naming the value on bad input."""
    question_id = _text(row.get(cols["id"]))
    if not question_id:
        raise InputError("empty id")
    question = _text(row.get(cols["question"]))
    if not question:
        raise InputError("empty question")
    if letter_columns:
        options = [_text(row.get(c)) for c in letter_columns if _text(row.get(c))]
        flagged = None
    else:
        options, flagged = read_options(row.get(cols["options"]))
        options = [_text(option) for option in options]
    if len(options) != NUM_OPTIONS or not all(options):
        raise InputError(f"{len([o for o in options if o])} non-empty options, SurgiQ needs exactly 4: {options}")
    answer_index = resolve_answer(_answer_text(row.get(cols["answer"])), options, flagged)
    return {
        "id": question_id,
        "question": question,
        "options": options,
        "answer": LETTERS[answer_index],
        "answer_index": answer_index,
        "option_order": list(range(NUM_OPTIONS)),
        "explanation": _text(row.get(cols["explanation"])) if cols["explanation"] else "",
        "domain": canonical_value("domain", row.get(cols["domain"]), aliases),
        "question_type": canonical_value("question_type", row.get(cols["question_type"]), aliases),
        "source_type": canonical_value("source_type", row.get(cols["source_type"]), aliases)
        if cols["source_type"] and _text(row.get(cols["source_type"]))
        else "",
    }


def _carry_name(column: str) -> str:
    return f"source_{column}" if column in TEXT_MCQ_FEATURES else column


def read_surgiq(paths: list[Path], mapping: SurgiqColumns | None = None, aliases: dict | None = None):
    """Read and validate every source file: ``(records, extra column names)``; raise listing all row problems."""
    mapping = mapping or SurgiqColumns()
    aliases = aliases or {}
    errors: list[RowError] = []
    records: list[dict] = []
    extras: list[str] = []
    given = [Path(path).resolve() for path in paths]
    twice = [str(path) for path, resolved in zip(paths, given, strict=True) if given.count(resolved) > 1]
    if twice:
        raise SurgiqError(f"{twice[0]} is given twice in --source; name each file once")
    for path in paths:
        source = read_source(path)
        cols = mapping.resolve(source.columns, str(path))
        letter_columns = [] if cols["options"] else mapping.letter_columns(source.columns)
        if not cols["options"] and not letter_columns:
            raise SurgiqError(
                f"{path}: no options column {mapping.options!r} and no per-letter columns (A..D, option_a..); "
                f"columns found: {source.columns}. Map them with --column options=... or --column option_columns=..."
            )
        consumed = {c for c in cols.values() if c} | set(letter_columns)
        carried = [c for c in source.columns if c not in consumed]
        extras += [_carry_name(c) for c in carried if _carry_name(c) not in extras]
        for where, row in source.rows:
            try:
                record = normalise_row(row, cols, letter_columns, aliases)
            except (ValueError, OptionError) as err:
                errors.append(RowError(where, _text(row.get(cols["id"])) or None, str(err)))
                continue
            record["_extras"] = {_carry_name(c): row.get(c) for c in carried}
            record["_where"] = where
            records.append(record)
    seen: dict[str, str] = {}
    for record in records:
        for name in extras:
            record["_extras"].setdefault(name, None)
        if record["id"] in seen:
            errors.append(RowError(record["_where"], record["id"], f"duplicate id (first at {seen[record['id']]})"))
        seen.setdefault(record["id"], record["_where"])
    raise_row_errors(errors, ", ".join(str(p) for p in paths), SurgiqError)
    return records, extras


def read_id_list(path: Path) -> list[str]:
    """Ids of a dedupe list: the first word of each line; blank lines and ``#`` comments are ignored."""
    path = Path(path)
    if not path.is_file():
        raise SurgiqError(
            f"--exclude-ids {path}: no such file; give the dedupe list `sureon near-duplicates surgiq` wrote "
            "(OUT/dedupe_ids.txt), or leave the option out"
        )
    ids = []
    for line in _decoded(path).splitlines():
        words = line.split("#", 1)[0].split()
        if words:
            ids.append(words[0])
    return ids

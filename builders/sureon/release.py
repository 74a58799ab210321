"""Read the official Sureon release (annotation-only parquet, Hub layout) into normalised video-QA records.

Only ``question_id``, ``clip_id`` and ``passes_blind_curation`` are confirmed by the release card; every other
column name is inferred from the project's website [``docs/release_format.md``]. So all columns go
through one declared :class:`ColumnMapping` whose defaults are the inferred names; a column the mapping requires but
the files lack is an error naming it and listing what was found. Columns the mapping does not consume are carried
through to the output under their own names (``release_<name>`` on a clash), never dropped.

Every row problem of a release is collected and reported at once (file, row, ``question_id``, what to fix). A file
that is not readable parquet (a cut or damaged download) is named, every such file at once, with the command that
downloads it again: the release is a download, not a file sureon built.
"""

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pyarrow as pa
import pyarrow.parquet as pq

from builders.columns import MAX_ERRORS_SHOWN, RowError, raise_row_errors
from builders.columns import ColumnMapping as BaseColumnMapping
from builders.errors import InputError
from builders.options import (
    LETTERS,
    OptionError,
    lettered_events,
    options_from_pool,
    parse_order,
    read_options,
    resolve_answer,
    seeded_shuffle,
)
from builders.outputs import atomic_file
from builders.sureon.categories import BY_CODE, MCQ, OPEN, ORDERING, resolve_category
from builders.sureon.clips import ClipIdError, clip_id_time, parse_clip_id, parse_seconds, transcript_line


# The release's option layout as inferred from the project website: one struct per option, the correct one flagged
# (docs/release_format.md; the other layouts builders/options.py reads stay accepted).
RELEASE_OPTIONS_TYPE = pa.list_(pa.struct([("letter", pa.string()), ("text", pa.string()), ("correct", pa.bool_())]))
# The columns a release is written with by the project's own release writers (the sample release, the synthetic
# world): the confirmed three plus the website's display fields, in the layout above.
RELEASE_SCHEMA = pa.schema(
    [
        ("question_id", pa.string()),
        ("clip_id", pa.string()),
        ("question", pa.string()),
        ("answer", pa.string()),
        ("options", RELEASE_OPTIONS_TYPE),
        ("category", pa.string()),
        ("specialty", pa.string()),
        ("subject", pa.string()),
        ("procedure", pa.string()),
        ("transcript", pa.string()),
        ("reasoning", pa.string()),
        ("passes_blind_curation", pa.bool_()),
    ]
)


def release_row(
    *,
    question_id: str,
    source_id: str,
    category: str,
    start: float,
    end: float,
    question: str,
    answer: str,
    option_texts: list[str],
    topic: tuple[str, str, str],
    narration: str,
    reasoning: str = "",
    passes_blind_curation: bool | None = None,
    time_separator: str = ".",
) -> dict:
    """One row in :data:`RELEASE_SCHEMA`, as the project's release writers (the sample release, the synthetic world)
    write it: the ``clip_id`` from the source video, the category slug and the window; the options lettered A, B, ...
    with the correct one flagged; ``topic`` = (specialty, subject, procedure); one transcript line over the window."""
    specialty, subject, procedure = topic
    return {
        "question_id": question_id,
        "clip_id": f"{source_id}_{category}_{clip_id_time(start, time_separator)}_{clip_id_time(end, time_separator)}",
        "question": question,
        "answer": answer,
        "options": [{"letter": LETTERS[i], "text": t, "correct": t == answer} for i, t in enumerate(option_texts)],
        "category": category,
        "specialty": specialty,
        "subject": subject,
        "procedure": procedure,
        "transcript": transcript_line(start, end, narration),
        "reasoning": reasoning,
        "passes_blind_curation": passes_blind_curation,
    }


def write_release_splits(out: Path, rows: dict[str, list[dict]], schema: pa.Schema | None = RELEASE_SCHEMA) -> Path:
    """Write ``rows`` as ``out/data/<split>-00000-of-00001.parquet`` (the Hub layout), each file atomically;
    ``schema=None`` lets pyarrow infer one (tests write malformed releases so)."""
    (out / "data").mkdir(parents=True, exist_ok=True)
    for split, split_rows in rows.items():
        path = out / "data" / f"{split}-00000-of-00001.parquet"
        with atomic_file(path) as partial:
            pq.write_table(pa.Table.from_pylist(split_rows, schema=schema), partial)
    return out


SPLITS = ("train", "validation", "test")
_SPLIT_WORDS = {
    "train": "train",
    "training": "train",
    "validation": "validation",
    "valid": "validation",
    "val": "validation",
    "dev": "validation",
    "test": "test",
    "bench": "test",
    "benchmark": "test",
}
OUTPUT_COLUMNS = (
    "question_id",
    "clip_id",
    "source_id",
    "start",
    "end",
    "category",
    "category_slug",
    "question",
    "options",
    "answer",
    "answer_index",
    "answer_format",
    "answer_order",
    "passes_blind_curation",
    "specialty",
    "subject",
    "procedure",
    "transcript",
    "reasoning",
    "frames",
    "frame_timestamps",
)


class ReleaseError(InputError):
    """A release that cannot be read as it stands; the message says what and where, and how to fix it."""


@dataclass
class ColumnMapping(BaseColumnMapping):
    """Which release column holds each field. Defaults are the inferred release names.

    ``None`` disables an optional field. Override on the command line with ``--column field=release_name`` or with a
    YAML file of ``field: release_name`` (``--columns-file``).
    """

    question_id: str = "question_id"
    clip_id: str = "clip_id"
    question: str = "question"
    answer: str = "answer"
    passes_blind_curation: str = "passes_blind_curation"
    category: str | None = "category"
    options: str | None = "options"
    option_columns: list[str] | None = None
    distractors: str | None = "distractors"
    source_id: str | None = "source_id"
    start: str | None = "start"
    end: str | None = "end"
    time_window: str | None = "time_window"
    specialty: str | None = "specialty"
    subject: str | None = "subject"
    procedure: str | None = "procedure"
    transcript: str | None = "transcript"
    reasoning: str | None = "reasoning"

    REQUIRED: ClassVar[tuple[str, ...]] = ("question_id", "clip_id", "question", "answer", "passes_blind_curation")
    ERROR: ClassVar[type[ValueError]] = ReleaseError


@dataclass
class SplitRecords:
    split: str
    files: list[Path]
    records: list[dict]
    extra_fields: list[pa.Field]


@dataclass
class Release:
    splits: dict[str, SplitRecords]
    warnings: list[str]

    @property
    def unknown_categories(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for split in self.splits.values():
            for record in split.records:
                if record["category"] not in BY_CODE:
                    counts[record["category"]] = counts.get(record["category"], 0) + 1
        return dict(sorted(counts.items()))


RELEASE_REPO = "aleperez24/sureon"


def find_split_files(release_dir: Path) -> dict[str, list[Path]]:
    """Assign each parquet file under ``release_dir`` to train / validation / test by the words in its path."""
    if not release_dir.is_dir():
        raise ReleaseError(
            f"release folder {release_dir} does not exist. Download it with "
            f"`hf download {RELEASE_REPO} --repo-type dataset --local-dir DIR` (gated: accept the terms first)."
        )
    files = sorted(
        p
        for p in release_dir.rglob("*.parquet")
        if not any(part.startswith(".") for part in p.relative_to(release_dir).parts)
    )
    if not files:
        raise ReleaseError(f"no parquet files under {release_dir}: is this the downloaded release folder?")
    by_split: dict[str, list[Path]] = {}
    unassigned = []
    for path in files:
        rel = path.relative_to(release_dir)
        split = None
        for part in reversed(rel.parts):  # the file name decides before its folders
            words = [_SPLIT_WORDS[w] for w in re.split(r"[^a-z]+", Path(part).stem.lower()) if w in _SPLIT_WORDS]
            if len(set(words)) == 1:
                split = words[0]
                break
        if split is None:
            unassigned.append(str(rel))
        else:
            by_split.setdefault(split, []).append(path)
    if unassigned:
        raise ReleaseError(
            f"cannot tell the split of {unassigned} under {release_dir}: "
            "name files or folders with train / validation / test"
        )
    return by_split


def _download_again(release_dir: Path, broken: dict[Path, str]) -> ReleaseError:
    """The error for release files that are not readable parquet: each named with the reader's reason, and the
    command that downloads them again (they are a download, not something sureon built)."""
    listed = "; ".join(f"{path.relative_to(release_dir)} ({why})" for path, why in broken.items())
    names = " ".join(path.relative_to(release_dir).as_posix() for path in broken)
    return ReleaseError(
        f"{len(broken)} file(s) of the release in {release_dir} cannot be read as parquet: {listed}. The download is "
        f"truncated or damaged: download them again with `hf download {RELEASE_REPO} {names} --repo-type dataset "
        f"--local-dir {release_dir} --force-download`"
    )


def _reason(error: Exception) -> str:
    return " ".join(str(error).split()) or type(error).__name__


def _check_readable(release_dir: Path, files: list[Path]) -> None:
    """Every release file's parquet footer reads (a cut download has none), all checked before any row is read, so
    that one run names every file to download again."""
    broken = {}
    for path in files:
        try:
            pq.read_metadata(path)
        except (pa.ArrowException, OSError) as error:
            broken[path] = _reason(error)
    if broken:
        raise _download_again(release_dir, broken)


def _read_table(release_dir: Path, path: Path) -> pa.Table:
    """One release file; its pages damaged behind a readable footer is the same download error."""
    try:
        return pq.read_table(path)
    except (pa.ArrowException, OSError) as error:
        raise _download_again(release_dir, {path: _reason(error)}) from None


def _read_flag(value) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    if text in ("", "none", "null", "nan"):
        return None
    raise InputError(f"passes_blind_curation {value!r} is not true / false / null")


def _text(value, column: str | None = None) -> str:
    """A text cell as ``str``: UTF-8 bytes (a binary column) are decoded, never stored as their Python repr."""
    if value is None:
        return ""
    if isinstance(value, bytes | bytearray):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError as err:
            raise InputError(
                f"column {column!r} holds bytes that are not UTF-8 text (byte {err.start}: "
                f"{bytes(value)[err.start : err.start + 4]!r}); write the column as UTF-8 strings"
            ) from None
    if isinstance(value, list | dict):
        raise InputError(f"column {column!r} holds a {type(value).__name__}, not text")
    return str(value)


def _finite_window(start: float, end: float) -> tuple[float, float]:
    for name, value in (("start", start), ("end", end)):
        if not math.isfinite(value) or value < 0:
            raise InputError(f"window {name} is {value}: times must be finite, non-negative seconds")
    if end <= start:
        raise InputError(f"window ends ({end}s) at or before it starts ({start}s): a clip needs start < end")
    return start, end


def _window(row: dict, cols: dict, clip) -> tuple[float, float]:
    if cols["start"] and cols["end"] and row[cols["start"]] is not None and row[cols["end"]] is not None:
        return _finite_window(parse_seconds(row[cols["start"]]), parse_seconds(row[cols["end"]]))
    if cols["time_window"] and row[cols["time_window"]]:
        parts = re.split(r"\s*(?:→|->|–|\bto\b|,)\s*", str(row[cols["time_window"]]).strip())
        if len(parts) != 2:
            raise InputError(f"time_window {row[cols['time_window']]!r} is not 'start → end'")
        return _finite_window(parse_seconds(parts[0]), parse_seconds(parts[1]))
    if clip is None:
        raise InputError("no start/end columns and the clip_id does not encode the window")
    return _finite_window(clip.start, clip.end)


def normalise_row(row: dict, cols: dict, letter_columns: list[str], shuffle_options: bool) -> dict:
    """One release row -> one record of the output schema (without frames); raise InputError on bad input."""
    question_id = _text(row[cols["question_id"]], cols["question_id"]).strip()
    clip_id = _text(row[cols["clip_id"]], cols["clip_id"]).strip()
    if not question_id:
        raise InputError("empty question_id")
    try:
        clip = parse_clip_id(clip_id)
    except ClipIdError:
        if not (cols["source_id"] and row[cols["source_id"]]):
            raise
        clip = None
    source_id = (
        _text(row[cols["source_id"]], cols["source_id"]).strip()
        if cols["source_id"] and row[cols["source_id"]]
        else clip.source_id
    )
    start, end = _window(row, cols, clip)

    raw_category = row[cols["category"]] if cols["category"] else None
    if not raw_category:
        if clip is None:
            raise InputError("no category value and the clip_id does not encode one")
        raw_category = clip.category_slug
    category, known = resolve_category(_text(raw_category, cols["category"]))
    category_slug = known.slug if known else category

    question = _text(row[cols["question"]], cols["question"])
    if not question.strip():
        raise InputError(f"empty question (column {cols['question']!r})")
    answer = _text(row[cols["answer"]], cols["answer"]).strip()
    if letter_columns:
        options = [_text(row[c], c) for c in letter_columns if row[c] not in (None, "")]
        flagged = None
    elif cols["options"]:
        options, flagged = read_options(row[cols["options"]])
    else:
        options, flagged = [], None
    pool = read_options(row[cols["distractors"]])[0] if cols["distractors"] and not options else []
    if pool:
        options, flagged = options_from_pool(answer, pool, question_id), None
    elif options and shuffle_options:
        order = seeded_shuffle(range(len(options)), "options", question_id)
        flagged = order.index(flagged) if flagged is not None else None
        options = [options[i] for i in order]
    if options and not 2 <= len(options) <= len(LETTERS):
        raise InputError(
            f"{len(options)} options: a multiple-choice question has 2 to {len(LETTERS)} (lettered A-Z; the Sureon "
            "release has 4 on train and validation, 7 on test)"
        )
    answer_index = resolve_answer(answer, options, flagged)
    if answer_index >= 0:
        answer = options[answer_index]

    answer_format = known.answer_format if known else (MCQ if options else OPEN)
    answer_order: list[str] = []
    if answer_format == ORDERING and not options:
        events = lettered_events(question)
        answer_order = parse_order(answer, len(events) or None)
    elif answer_format == MCQ and not options:
        raise InputError(f"{category} is a multiple-choice category but the row has no options")

    return {
        "question_id": question_id,
        "clip_id": clip_id,
        "source_id": source_id,
        "start": start,
        "end": end,
        "category": category,
        "category_slug": category_slug,
        "question": question,
        "options": options,
        "answer": answer,
        "answer_index": answer_index,
        "answer_format": answer_format,
        "answer_order": answer_order,
        "passes_blind_curation": _read_flag(row[cols["passes_blind_curation"]]),
        "specialty": _text(row[cols["specialty"]], cols["specialty"]) if cols["specialty"] else "",
        "subject": _text(row[cols["subject"]], cols["subject"]) if cols["subject"] else "",
        "procedure": _text(row[cols["procedure"]], cols["procedure"]) if cols["procedure"] else "",
        "transcript": _text(row[cols["transcript"]], cols["transcript"]) if cols["transcript"] else "",
        "reasoning": _text(row[cols["reasoning"]], cols["reasoning"]) if cols["reasoning"] else "",
        "_clip_window": (clip.start, clip.end) if clip else None,
    }


def _carry_name(column: str) -> str:
    return f"release_{column}" if column in OUTPUT_COLUMNS else column


def read_release(
    release_dir: str | Path, mapping: ColumnMapping | None = None, shuffle_options: bool = False
) -> Release:
    """Read and validate every split of a release folder; raise :class:`ReleaseError` listing all row problems."""
    release_dir = Path(release_dir)
    mapping = mapping or ColumnMapping()
    errors: list[RowError] = []
    warnings: list[str] = []
    splits: dict[str, SplitRecords] = {}
    by_split = find_split_files(release_dir)
    _check_readable(release_dir, [path for files in by_split.values() for path in files])
    for split, files in sorted(by_split.items(), key=lambda kv: SPLITS.index(kv[0])):
        records: list[dict] = []
        extra_fields: dict[str, pa.Field] = {}
        for path in files:
            table = _read_table(release_dir, path)
            where = str(path.relative_to(release_dir))
            cols = mapping.resolve(table.column_names, where)
            letter_columns = mapping.letter_columns(table.column_names) if not cols["options"] else []
            consumed = {c for c in cols.values() if c} | set(letter_columns)
            extras = [c for c in table.column_names if c not in consumed]
            for name in extras:
                carried = table.schema.field(name).with_name(_carry_name(name))
                if carried.name in extra_fields and not extra_fields[carried.name].type.equals(carried.type):
                    raise ReleaseError(
                        f"{where}: column {name!r} is {carried.type} here but {extra_fields[carried.name].type} "
                        f"in another {split} file"
                    )
                extra_fields.setdefault(carried.name, carried)
            for row_number, row in enumerate(table.to_pylist()):
                qid = row.get(cols["question_id"])
                try:
                    record = normalise_row(row, cols, letter_columns, shuffle_options)
                except (ValueError, OptionError) as err:
                    errors.append(RowError(f"{where} row {row_number}", qid, str(err)))
                    continue
                record["_extras"] = {_carry_name(c): row[c] for c in extras}
                record["_where"] = f"{where} row {row_number}"
                records.append(record)
        if not any(pq.read_metadata(path).num_rows for path in files):
            listed = ", ".join(str(path.relative_to(release_dir)) for path in files)
            errors.append(RowError(listed, None, f"the {split} split has no rows (an incomplete download?)"))
        for record in records:
            for name in extra_fields:
                record["_extras"].setdefault(name, None)
        splits[split] = SplitRecords(split, files, records, list(extra_fields.values()))

    seen: dict[str, str] = {}
    for split in splits.values():
        for record in split.records:
            qid = record["question_id"]
            if qid in seen:
                errors.append(RowError(record["_where"], qid, f"duplicate question_id (first at {seen[qid]})"))
            else:
                seen[qid] = record["_where"]
            window = record.pop("_clip_window")
            if window and (abs(window[0] - record["start"]) > 0.05 or abs(window[1] - record["end"]) > 0.05):
                warnings.append(
                    f"{record['_where']}: start/end columns ({record['start']}, {record['end']}) differ from the "
                    f"clip_id window {window}; the columns are used"
                )
    raise_row_errors(errors, str(release_dir), ReleaseError)
    return Release(splits=splits, warnings=warnings)


def check_leakage(release: Release) -> None:
    """Fail if a source video feeds more than one split (the release promises video-level disjoint splits)."""
    owners: dict[str, set[str]] = {}
    for split in release.splits.values():
        for record in split.records:
            owners.setdefault(record["source_id"], set()).add(split.split)
    leaked = {source: sorted(s, key=SPLITS.index) for source, s in sorted(owners.items()) if len(s) > 1}
    if leaked:
        listing = "; ".join(f"{source} in {', '.join(s)}" for source, s in list(leaked.items())[:MAX_ERRORS_SHOWN])
        raise ReleaseError(
            f"{len(leaked)} source video(s) appear in more than one split (train / validation / test must be "
            f"disjoint by source video): {listing}"
        )

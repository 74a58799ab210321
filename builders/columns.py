"""Declared column mappings and row errors, shared by the builders' readers (Sureon release, SurgiQ files).

A reader declares one dataclass of ``field: source column`` (defaults are the expected names) and subclasses
:class:`ColumnMapping`; users override it with ``--column field=column`` or a YAML ``--columns-file``. A column the
mapping requires (or one the user mapped explicitly) that the files lack is an error naming it and listing what was
found. Row problems are collected as :class:`RowError` and raised together, so one run shows every fix to make.
"""

import difflib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import ClassVar

from builders.arguments import key_values
from builders.options import LETTERS
from builders.yaml_file import load_yaml_mapping


MAX_ERRORS_SHOWN = 20


@dataclass
class ColumnMapping:
    """Base of the readers' mappings: subclasses add one ``str | None`` field per record field.

    ``None`` disables an optional field; ``option_columns`` (if a subclass declares it) lists one column per option
    letter. ``REQUIRED`` fields must be present; ``ERROR`` is the reader's error class.
    """

    explicit: frozenset[str] = field(default=frozenset(), repr=False, compare=False, kw_only=True)

    REQUIRED: ClassVar[tuple[str, ...]] = ()
    ERROR: ClassVar[type[ValueError]] = ValueError

    @classmethod
    def from_overrides(cls, overrides: dict[str, object], where: str = "--column"):
        """The mapping with ``overrides`` (``field: column``) applied; an unknown field (with the field likely meant),
        a value that is not a column name, or a required field switched off is an error naming it."""
        known = {f.name for f in fields(cls) if f.name != "explicit"}
        unknown = sorted(set(overrides) - known, key=str)
        if unknown:
            close = difflib.get_close_matches(str(unknown[0]), sorted(known), n=1)
            meant = f" (did you mean {close[0]!r}?)" if close else ""
            raise cls.ERROR(f"{where}: unknown mapping field(s) {unknown}{meant}; known fields: {sorted(known)}")
        values = {}
        for name, value in overrides.items():
            if name == "option_columns" and isinstance(value, str):
                value = [part.strip() for part in value.split(",") if part.strip()]
            elif isinstance(value, str) and value.strip().lower() in ("", "none", "null"):
                value = None
            elif isinstance(value, int | float) and not isinstance(value, bool):
                value = str(value)  # a column named 2024 is read by YAML as a number
            if name == "option_columns":
                if value is not None and not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
                    raise cls.ERROR(f"{where}: option_columns: {value!r} is not a list of column names (A, B, C, D)")
            elif value is not None and not isinstance(value, str):
                raise cls.ERROR(f"{where}: {name}: {value!r} is not a column name (give one column, or none)")
            if value is None and name in cls.REQUIRED:
                raise cls.ERROR(f"{where}: {name} is required and cannot be none; map it to the column that holds it")
            values[name] = value
        return cls(**values, explicit=frozenset(values))

    @classmethod
    def from_cli(cls, pairs: list[str] | None, columns_file: str | None = None):
        overrides: dict[str, object] = {}
        if columns_file:
            overrides.update(read_columns_file(columns_file, cls.ERROR))
        overrides.update(key_values(pairs, "--column", "question=question_text", allow_empty=True))
        where = " / ".join([f"--columns-file {columns_file}"] * bool(columns_file) + ["--column"] * bool(pairs))
        return cls.from_overrides(overrides, where or "--column")

    def resolve(self, found: list[str], where: str) -> dict[str, str | None]:
        """Field -> column actually present; raise if a required or explicitly mapped column is absent."""
        present = set(found)
        resolved: dict[str, str | None] = {}
        missing = []
        for f in fields(self):
            if f.name in ("explicit", "option_columns"):
                continue
            column = getattr(self, f.name)
            if column is not None and column in present:
                resolved[f.name] = column
            elif column is not None and (f.name in self.REQUIRED or f.name in self.explicit):
                missing.append(f"{f.name} (column {column!r})")
            else:
                resolved[f.name] = None
        declared = getattr(self, "option_columns", None)
        if declared:
            absent = [c for c in declared if c not in present]
            if absent:
                missing.append(f"option_columns {absent}")
        if missing:
            raise self.ERROR(
                f"{where}: missing required column(s): {', '.join(missing)}. Columns found: {sorted(found)}. "
                "Map them with --column field=column (or --columns-file)."
            )
        return resolved

    def letter_columns(self, found: list[str]) -> list[str]:
        """One column per option letter: the declared list, else auto-detected ``A``.. / ``option_a``.. columns."""
        declared = getattr(self, "option_columns", None)
        if declared:
            return list(declared)
        for pattern in ("{}", "option_{}", "option_{l}", "opt_{l}", "choice_{}", "choice_{l}"):
            names = []
            for letter in LETTERS:
                name = pattern.format(letter, l=letter.lower())
                if name not in found:
                    break
                names.append(name)
            if len(names) >= 2:
                return names
        return []


def read_columns_file(path: str | Path, error: type[ValueError] = ValueError) -> dict:
    """The ``field: column`` mapping of a ``--columns-file``; a missing file, a file that is not UTF-8 or not YAML
    (with the line of the problem), or YAML that is not a mapping is ``error`` naming the file and the fix."""
    example = "question: stem (one field: column a line)"
    return load_yaml_mapping(path, "--columns-file", example, allow_empty=True, error=error)


@dataclass
class RowError:
    where: str
    question_id: str | None
    message: str

    def __str__(self) -> str:
        qid = f" question_id={self.question_id!r}" if self.question_id is not None else ""
        return f"{self.where}{qid}: {self.message}"


def raise_row_errors(errors: list[RowError], what: str, error: type[ValueError]) -> None:
    """Raise ``error`` listing the first :data:`MAX_ERRORS_SHOWN` row errors of ``what``, if there are any."""
    if not errors:
        return
    shown = "\n  ".join(str(e) for e in errors[:MAX_ERRORS_SHOWN])
    more = f"\n  ... and {len(errors) - MAX_ERRORS_SHOWN} more" if len(errors) > MAX_ERRORS_SHOWN else ""
    raise error(f"{len(errors)} row(s) of {what} cannot be read:\n  {shown}{more}")

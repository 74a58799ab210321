"""The canonical vocabulary: one reverse lookup from each source's label spellings to a shared name (the Sureon paper,
C.1).

Each source declares its table as data (``SourceSpec.labels``: kind -> native label -> canonical name). Readers map
every label they read through a ``LabelMapper``, which records where an unmapped label was seen instead of failing
on the first; ``raise_if_unmapped`` then lists every unmapped label of the source at once, with its file and row, so
one run tells the user the whole fix.
"""

from __future__ import annotations

import re
from pathlib import Path

from builders.errors import InputError
from public_converters.schema import LABEL_KINDS


CANONICAL_NAME = re.compile(r"^[a-z0-9][a-z0-9 ()'/+.-]*$")


class UnmappedLabels(InputError):
    pass


def check_label_table(source: str, labels: dict[str, dict[str, str]]) -> None:
    """A declared table must use known kinds and lower-case canonical names with spaces, not underscores."""
    problems = [f"unknown kind {kind!r}" for kind in labels if kind not in LABEL_KINDS]
    for kind, table in labels.items():
        for native, canonical in table.items():
            if not CANONICAL_NAME.match(canonical) or "_" in canonical or canonical != canonical.strip():
                problems.append(f"{kind} {native!r} -> {canonical!r} is not a canonical name (lower case, spaces)")
    if problems:
        raise InputError(f"{source}: bad label table: " + "; ".join(problems))


class LabelMapper:
    """Maps native labels to canonical names, collecting misses (kind, label, first file and row, count)."""

    def __init__(self, source: str, labels: dict[str, dict[str, str]]):
        check_label_table(source, labels)
        self.source = source
        self.labels = labels
        self.misses: dict[tuple[str, str], list] = {}

    def map(self, kind: str, native, path: str | Path, row: int | str | None = None) -> str:
        table = self.labels.get(kind, {})
        key = str(native).strip()
        if key in table:
            return table[key]
        miss = self.misses.setdefault((kind, key), [str(path), row, 0])
        miss[2] += 1
        return key

    def kind_of(self, native: str, kinds=("tool", "anatomy")) -> str | None:
        """The kind whose table holds ``native`` (masks and instances name tools and anatomy in one namespace)."""
        for kind in kinds:
            if native in self.labels.get(kind, {}):
                return kind
        return None

    def raise_if_unmapped(self) -> None:
        if not self.misses:
            return
        lines = [
            f"  {kind} {label!r}: {count} time(s), first in {path}" + (f" row {row}" if row is not None else "")
            for (kind, label), (path, row, count) in sorted(self.misses.items())
        ]
        raise UnmappedLabels(
            f"{self.source}: {len(self.misses)} label(s) have no canonical name:\n"
            + "\n".join(lines)
            + f"\nAdd them to the source's label table (public_converters/sources/{self.source}.py), "
            "or check that the files are this source's release."
        )

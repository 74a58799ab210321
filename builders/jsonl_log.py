"""The append-only JSON Lines store behind every resumable cache (generations, guesser scoring, SurgiQ scores, the
video fetcher's archive).

Each batch of entries is appended, flushed and fsynced as soon as it is done, so a killed run keeps everything it
finished. A cache is a file sureon wrote, and only such a file is opened for writing:

- **Recognised by its header.** A new cache starts with one header line, ``{"sureon_cache": KIND, "format": 1}``,
  naming what it caches; a file opened as a cache must carry the header of the same kind, or be a cache written
  before the header existed: a file whose every complete line is an entry of that cache (a JSON object with the
  fields its key reads). Anything else (a parquet file, a user's notes, another kind's cache, a cache of a newer
  format) is refused in one line before a byte of it changes, as is a folder.
- **Repaired only then.** A run killed mid-write leaves a partial last line: it is cut off when a recognised cache is
  next opened (a complete line of a headed cache that still cannot be read is skipped with a warning), so nothing is
  lost but the entry being written.
- **An empty file** holds nothing to lose (and is what a crash between creating a cache and writing its header would
  leave): it is used, and gets the header with the first entries.
"""

import json
import logging
import os
from collections.abc import Callable, Hashable
from pathlib import Path

from builders.errors import InputError


logger = logging.getLogger(__name__)

HEADER_FIELD = "sureon_cache"  # the header line's field naming the cache's kind
FORMAT = 1  # the layout of the lines after the header; a cache of a higher format is refused, never rewritten


def header_line(kind: str) -> str:
    return json.dumps({HEADER_FIELD: kind, "format": FORMAT}) + "\n"


def _header_of(line: bytes) -> dict | None:
    """The header ``line`` is, or ``None`` (an entry, or no JSON at all)."""
    try:
        value = json.loads(line)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    return value if isinstance(value, dict) and HEADER_FIELD in value else None


class AppendOnlyJsonl:
    """``entries``: every stored entry (a dict) by ``key(entry)``; the last one written wins. ``kind`` names what the
    file caches (its header says it); ``label`` names the file in messages (``--cache``, by default "cache file")."""

    def __init__(self, path: str | Path, key: Callable[[dict], Hashable], kind: str, label: str = "cache file"):
        self.path = Path(path)
        self.key = key
        self.kind = kind
        self.label = label
        self.entries: dict = {}
        self.ignored_lines = 0
        if self.path.is_dir():
            raise InputError(
                f"{label} {self.path} is a folder: give the cache's file name (made if absent), e.g. "
                f"{self.path / 'cache.jsonl'}"
            )
        if not self.path.exists():
            return
        if not self.path.is_file():
            raise InputError(f"{label} {self.path} is not a regular file: give the path of a cache file")
        data = self.path.read_bytes()
        complete = data[: data.rfind(b"\n") + 1]
        lines = complete.splitlines()
        header = _header_of(lines[0]) if lines else None
        if header is not None:
            self._check_header(header)
            self._read(lines[1:])
        elif data:
            self._read_headless(lines)
        if len(complete) < len(data):  # a recognised cache: the partial last line a killed run left is cut off
            with self.path.open("r+b") as handle:
                handle.truncate(len(complete))
        if self.ignored_lines:
            logger.warning("%s: skipped %d unreadable line(s)", self.path, self.ignored_lines)

    def _not_ours(self, why: str) -> InputError:
        return InputError(
            f"{self.label} {self.path} is not a {self.kind} cache sureon wrote ({why}): sureon never writes into a "
            f"file it did not write; choose a new file name for the {self.label}"
        )

    def _check_header(self, header: dict) -> None:
        if header[HEADER_FIELD] != self.kind:
            raise self._not_ours(f"it is a {header[HEADER_FIELD]} cache")
        if not isinstance(header.get("format"), int) or header["format"] > FORMAT:
            raise self._not_ours(
                f"its format {header.get('format')!r} is newer than this version's {FORMAT}: update sureon-recipes"
            )

    def _entry(self, line: bytes) -> tuple[Hashable, dict]:
        entry = json.loads(line)
        if not isinstance(entry, dict):
            raise TypeError("not a JSON object")
        return self.key(entry), entry

    def _read(self, lines: list[bytes]) -> None:
        """The lines of a headed cache: an unreadable complete line is skipped (counted); another header (two runs
        that created the file at once each wrote one) is passed over."""
        for line in lines:
            if _header_of(line) is not None:
                continue
            try:
                key, entry = self._entry(line)
            except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError):
                self.ignored_lines += 1
                continue
            self.entries[key] = entry

    def _read_headless(self, lines: list[bytes]) -> None:
        """A file without the header: a cache of a version before it only if every complete line is an entry."""
        if not lines:
            raise self._not_ours("it holds no complete line")
        entries = {}
        for number, line in enumerate(lines, start=1):
            try:
                key, entry = self._entry(line)
            except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError):
                raise self._not_ours(f"no sureon cache header, and line {number} is no {self.kind} entry") from None
            entries[key] = entry
        self.entries = entries

    def add(self, entries: list[dict]) -> None:
        if not entries:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        lines = "".join(json.dumps(entry, ensure_ascii=False) + "\n" for entry in entries)
        with self.path.open("a", encoding="utf-8") as handle:
            if handle.tell() == 0:  # a new (or empty) cache: its header first, in the same write
                lines = header_line(self.kind) + lines
            handle.write(lines)
            handle.flush()
            os.fsync(handle.fileno())
        self.entries.update({self.key(entry): entry for entry in entries})

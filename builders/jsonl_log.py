"""The append-only JSON Lines store behind every resumable cache (generations, guesser scoring, SurgiQ scores).

Each batch of entries is appended, flushed and fsynced as soon as it is done, so a killed run keeps everything it
finished. A run killed mid-write leaves a partial last line: it is cut off when the file is next opened (a complete
line that still cannot be read is skipped with a warning), so nothing is lost but the entry being written.
"""

import json
import logging
import os
from collections.abc import Callable, Hashable
from pathlib import Path


logger = logging.getLogger(__name__)


class AppendOnlyJsonl:
    """``entries``: every stored entry (a dict) by ``key(entry)``; the last one written wins."""

    def __init__(self, path: str | Path, key: Callable[[dict], Hashable]):
        self.path = Path(path)
        self.key = key
        self.entries: dict = {}
        self.ignored_lines = 0
        if not self.path.is_file():
            return
        data = self.path.read_bytes()
        complete = data[: data.rfind(b"\n") + 1]
        if len(complete) < len(data):
            with self.path.open("r+b") as handle:
                handle.truncate(len(complete))
        for line in complete.decode("utf-8").splitlines():
            try:
                entry = json.loads(line)
                self.entries[key(entry)] = entry
            except (json.JSONDecodeError, KeyError, TypeError):
                self.ignored_lines += 1
        if self.ignored_lines:
            logger.warning("%s: skipped %d unreadable line(s)", self.path, self.ignored_lines)

    def add(self, entries: list[dict]) -> None:
        if not entries:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        lines = "".join(json.dumps(entry, ensure_ascii=False) + "\n" for entry in entries)
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(lines)
            handle.flush()
            os.fsync(handle.fileno())
        self.entries.update({self.key(entry): entry for entry in entries})

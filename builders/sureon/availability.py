"""``availability.json``: what ``sureon videos fetch`` found for each source video, read back by the Sureon build.

One entry per source id: ``status`` (``downloaded``, ``supplied``: a file the user put there, ``unavailable``: the
video is removed, private, blocked or otherwise out of reach with these options, ``deferred``: not fetched yet for a
reason that says nothing about the video, its ``cause`` being ``rate-limited``, ``bot-check``, ``later`` or
``transient``, ``invalid``: downloaded but failed the integrity check, ``not_fetchable``: a 32-hex id, which has no
public URL), ``reason`` when there is no good file, the file, its duration and resolution, and how many ``test`` /
``train`` / ``validation`` questions it feeds. The build names that reason for every question it skips, a deferred
source's as missing for now (the next ``sureon videos fetch`` retries it), never as removed.
"""

import json
from pathlib import Path

from builders.errors import InputError
from builders.outputs import write_atomic


FILENAME = "availability.json"
GOOD = ("downloaded", "supplied")


def read_availability(videos_dir: str | Path) -> dict[str, dict]:
    """``source_id -> entry``; empty when the folder has no availability.json (videos put there by hand)."""
    path = Path(videos_dir) / FILENAME
    if not path.is_file():
        return {}
    try:
        return json.loads(path.read_text())["sources"]
    except (json.JSONDecodeError, KeyError, TypeError) as err:
        raise InputError(
            f"{path} is not an availability file ({err}); rerun `sureon videos fetch` or delete it"
        ) from err


def missing_reason(entry: dict | None) -> str:
    """Why a source has no video, in the words of the skip manifest."""
    if entry is None or entry.get("status") in GOOD:
        return "video not found"
    if entry["status"] == "deferred":
        return f"video not fetched yet (rerun `sureon videos fetch`): {entry.get('reason', 'no reason recorded')}"
    return f"video {entry['status'].replace('_', ' ')}: {entry.get('reason', 'no reason recorded')}"


def write_availability(videos_dir: Path, sources: dict[str, dict]) -> Path:
    path = videos_dir / FILENAME
    return write_atomic(path, json.dumps({"sources": dict(sorted(sources.items()))}, indent=2, sort_keys=True) + "\n")

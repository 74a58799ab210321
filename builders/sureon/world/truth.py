"""Reading a world's ground truth back: which questions carry a planted shortcut, which a decoy.

Apart from the writer because its callers (``sureon reproduce``, the curation tests) score what curation decided
against what was planted, on a world made earlier.
"""

import json
from pathlib import Path

from builders.errors import InputError


def read_truth(path: Path) -> list[dict]:
    """The entries of a world's ``shortcuts.jsonl`` (or of the folder holding it), one per question."""
    path = Path(path)
    if path.is_dir():
        path = path / "shortcuts.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no shortcut ground truth here (a world made by `sureon world` has one)")
    entries = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if line.strip():
            try:
                entry = json.loads(line)
            except json.JSONDecodeError as err:
                raise InputError(f"{path}, line {number}: not JSON ({err})") from err
            if not isinstance(entry, dict) or "question_id" not in entry:
                raise InputError(f"{path}, line {number}: not a shortcut entry (no question_id)")
            entries.append(entry)
    return entries


def read_shortcuts(path: Path) -> dict[str, str | None]:
    """``{question_id: kind or None}`` from a world's ``shortcuts.jsonl`` (or the folder holding it)."""
    return {entry["question_id"]: entry.get("shortcut") for entry in read_truth(path)}


def row_kind(entry: dict) -> str:
    """What a question's text does for a blind model: ``"<kind> shortcut"`` (its cue gives the answer away),
    ``"<kind> decoy"`` (its cue points at a distractor) or ``"plain"``. A world written before decoys had kinds
    records ``"decoy": true``: a ``length`` decoy."""
    if entry.get("shortcut"):
        return f"{entry['shortcut']} shortcut"
    decoy = entry.get("decoy")
    if decoy:
        return f"{'length' if decoy is True else decoy} decoy"
    return "plain"


def row_kinds(path: Path) -> dict[str, str]:
    """``{question_id: row kind}`` (:func:`row_kind`) of a world's questions."""
    return {e["question_id"]: row_kind(e) for e in read_truth(path)}

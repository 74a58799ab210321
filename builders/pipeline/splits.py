"""The video-level train / validation split of a new corpus, stratified by subject, made once and stored.

About ``fraction`` of the videos go to validation: :func:`builders.sureon.folds.assign_folds` deals the videos into
``round(1 / fraction)`` subject-stratified folds and fold 0 is validation (the Sureon paper's split is ~10 %, 267 of
2,478 videos). Corpora too small for that many folds take a seeded draw of videos instead. The split is written to
``splits.json`` and read back on later runs, so adding prompts or rerunning a stage never moves a video; a video
missing from a stored split is an error (extend the file, or delete it to re-split everything).
"""

import json
from pathlib import Path

from builders.errors import InputError
from builders.options import seeded_shuffle
from builders.outputs import write_atomic
from builders.sureon.folds import assign_folds


def make_split(videos: dict[str, str], fraction: float = 0.1, seed: int = 42) -> dict[str, str]:
    """``{source_id: subject}`` -> ``{source_id: "train" | "validation"}``."""
    if not 0 < fraction < 1:
        raise InputError(f"validation fraction must be in (0, 1), got {fraction}")
    num_folds = max(2, round(1 / fraction))
    if len(videos) >= num_folds:
        folds = assign_folds(videos, num_folds, seed)
        return {source: "validation" if folds[source] == 0 else "train" for source in sorted(videos)}
    count = max(1, round(len(videos) * fraction))
    held_out = set(seeded_shuffle(sorted(videos), "validation-split", str(seed))[:count])
    return {source: "validation" if source in held_out else "train" for source in sorted(videos)}


def load_or_make_split(path: Path, videos: dict[str, str], fraction: float = 0.1, seed: int = 42) -> dict[str, str]:
    """The stored split at ``path``, or a new one written there; fail if a video is missing from a stored split."""
    path = Path(path)
    if path.exists():
        split = json.loads(path.read_text())
        missing = sorted(set(videos) - set(split))
        if missing:
            raise InputError(
                f"{path} has no split for {len(missing)} video(s) ({missing[:5]}...): add them to the file by hand "
                "(keeping existing assignments), or delete it to re-split the whole corpus"
            )
        return {source: split[source] for source in sorted(videos)}
    split = make_split(videos, fraction, seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(split, indent=1, sort_keys=True) + "\n")
    return split

"""Video-level folds stratified by subject (the Sureon paper's B.4.1), shared by the guesser recipes and blind
curation.

All questions of one source video land in the same fold, so a guesser never sees a held-out video's text; folds
are balanced over subjects by scikit-learn's ``StratifiedGroupKFold``. Videos are sorted by id before splitting and
the shuffle is seeded, so the assignment depends only on the set of videos, their subjects and the random seed.
"""

import warnings
from collections import Counter

from builders.errors import InputError


def assign_folds(videos: dict[str, str], num_folds: int = 4, seed: int = 42) -> dict[str, int]:
    """``{source_id: subject}`` -> ``{source_id: fold}`` with folds in ``range(num_folds)``."""
    # imported here: scikit-learn costs every process that imports the training mixture ~0.6 s, and few runs fold
    from sklearn.model_selection import GroupKFold, StratifiedGroupKFold

    if num_folds < 2:
        raise InputError(f"num_folds must be at least 2, got {num_folds}")
    if len(videos) < num_folds:
        raise InputError(f"{len(videos)} videos cannot fill {num_folds} folds: every fold needs a video")
    ids = sorted(videos)
    subjects = [videos[source_id] or "unknown" for source_id in ids]
    if max(Counter(subjects).values()) >= num_folds:
        splitter = StratifiedGroupKFold(n_splits=num_folds, shuffle=True, random_state=seed)
    else:
        # No subject has a video per fold (tiny corpora): stratifying is impossible, split by video only.
        warnings.warn(f"every subject has fewer than {num_folds} videos: folds are not stratified", stacklevel=2)
        splitter = GroupKFold(n_splits=num_folds, shuffle=True, random_state=seed)
    folds = {}
    with warnings.catch_warnings():
        # A subject with fewer videos than folds cannot be in every fold; that is expected, not an error.
        warnings.filterwarnings("ignore", message="The least populated class", category=UserWarning)
        for fold, (_, held_out) in enumerate(splitter.split(ids, subjects, groups=ids)):
            folds.update({ids[i]: fold for i in held_out})
    return folds


def fold_table(records: list[dict], folds: dict[str, int], key: str = "category") -> dict[int, Counter]:
    """Counts of ``key`` per fold (the Sureon paper's Tables 9-10 report them per category and per fold)."""
    table: dict[int, Counter] = {fold: Counter() for fold in sorted(set(folds.values()))}
    for record in records:
        table[folds[record["source_id"]]][record.get(key) or "unknown"] += 1
    return table

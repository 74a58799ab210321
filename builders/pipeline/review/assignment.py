"""Who reviews what: a balanced, seeded random design (the Sureon paper, B.5.2).

Within each question type the samples are put in a seeded random order and dealt to the reviewers in a seeded random
cyclic order that carries over from one type to the next. Each sample's reviewer is therefore uniform over the panel,
every reviewer gets the same number of samples of every type (within one), and the same seed and ids always give
the same assignment.

A stratified ``dual_fraction`` of each type goes to two reviewers instead, dealt over all reviewer pairs in a seeded
cyclic order, so every pairing reviews the same number of samples (within one); the app never shows one reviewer
the other's decision.
"""

import itertools
from collections import defaultdict

from builders.errors import InputError
from builders.options import seeded_shuffle
from builders.pipeline.review.store import Assignment


def assign(
    sample_types: dict[str, str], reviewers: list[str], dual_fraction: float = 0.0, seed: str = "sureon-review"
) -> list[Assignment]:
    """Assignments for ``sample_types`` (sample id -> question type) over ``reviewers``; see the module docstring."""
    panel = sorted(set(reviewers))
    if not panel:
        raise InputError("no reviewers to assign to; create accounts with `sureon review add-user`")
    if not 0.0 <= dual_fraction <= 1.0:
        raise InputError(f"dual_fraction must be within [0, 1], got {dual_fraction}")
    if dual_fraction > 0 and len(panel) < 2:
        raise InputError("dual review needs at least two reviewers")
    by_type: dict[str, list[str]] = defaultdict(list)
    for sample_id, qa_type in sample_types.items():
        by_type[qa_type].append(sample_id)

    dual, single = [], []
    for qa_type in sorted(by_type):
        ordered = seeded_shuffle(sorted(by_type[qa_type]), seed, "order", qa_type)
        n_dual = round(dual_fraction * len(ordered))
        dual += ordered[:n_dual]
        single += ordered[n_dual:]

    pairs = itertools.cycle(seeded_shuffle(list(itertools.combinations(panel, 2)), seed, "pairs"))
    singles = itertools.cycle(seeded_shuffle(panel, seed, "reviewers"))
    out = [Assignment(sample_id, next(singles), "single") for sample_id in single]
    for sample_id in dual:
        out += [Assignment(sample_id, reviewer, "dual") for reviewer in next(pairs)]
    return out

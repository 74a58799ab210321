"""Distractor hardening, Algorithm 1 of the Sureon paper (B.4.3), run by ``sureon curate --harden-guesser`` on the
questions blind curation retained.

For each retained question, up to M = 32 configurations are drawn from its ``distractor_pool`` under the cross-model
diversity constraint (random seed 42, as the Sureon paper's B.4.3 draws them); the first on which the hardening
guesser's S < tau is kept (``hardening_attempts`` records its rank), else the question is discarded. A question
without a pool has one configuration, its own. Apart from the curation's decisions because it rewrites questions
(new options in a new order) where curation only flags them; it scores them with the same cached blind scoring
(:func:`recipes.curation.guessers.score_records`).
"""

from builders.options import seeded_shuffle
from builders.sureon.distractor_pool import clean_pool, draw_configurations
from recipes.curation.guessers import (
    DEFAULT_SAMPLING,
    DEFAULT_TAU,
    Guesser,
    Sampling,
    ScoreCache,
    is_scored,
    score_records,
)


HARDENING_ATTEMPTS = 32
HARDENING_SEED = 42


def configuration_record(record: dict, distractors: list[str], seed: int, attempt: int) -> dict:
    """``record`` with options = answer + ``distractors`` in a seeded order (the answer text is unchanged)."""
    options = seeded_shuffle(
        [record["answer"], *distractors], "hardening", str(seed), record["question_id"], str(attempt)
    )
    return record | {"options": options, "answer_index": options.index(record["answer"])}


def candidate_configurations(record: dict, attempts: int, seed: int) -> list[dict]:
    """Up to ``attempts`` diverse configurations from the record's pool; without a pool, the record itself."""
    pool = clean_pool(record.get("distractor_pool") or [], record["answer"]) if record.get("options") else []
    size = len(record.get("options") or []) - 1
    if size < 1 or len(pool) < size:
        return [record]
    draws = draw_configurations(pool, size, attempts, "hardening", str(seed), record["question_id"])
    return [configuration_record(record, [c["text"] for c in draw], seed, i) for i, draw in enumerate(draws)]


def harden(
    records: list[dict],
    guesser: Guesser,
    cache: ScoreCache,
    *,
    sampling: Sampling = DEFAULT_SAMPLING,
    tau: float = DEFAULT_TAU,
    attempts: int = HARDENING_ATTEMPTS,
    seed: int = HARDENING_SEED,
) -> tuple[list[dict], list[dict]]:
    """Algorithm 1 over the retained ``records``: returns (hardened records, discarded records with the attempts
    made). Attempt k of every unresolved question is scored in one pass, so batches stay full. Questions blind
    curation does not score (SM) pass through unchanged, with ``hardening_attempts`` 0."""
    candidates = {r["question_id"]: candidate_configurations(r, attempts, seed) for r in records if is_scored(r)}
    kept: dict[str, dict] = {r["question_id"]: r | {"hardening_attempts": 0} for r in records if not is_scored(r)}
    for attempt in range(max((len(c) for c in candidates.values()), default=0)):
        trying = [c[attempt] for qid, c in candidates.items() if qid not in kept and attempt < len(c)]
        scores = score_records(guesser, trying, sampling, cache, stage="hardening")
        for record in trying:
            if scores[record["question_id"]]["consistency"] < tau:
                kept[record["question_id"]] = record | {"hardening_attempts": attempt + 1}
    hardened = [kept[r["question_id"]] for r in records if r["question_id"] in kept]
    discarded = [
        {"question_id": r["question_id"], "category": r.get("category"), "attempts": len(candidates[r["question_id"]])}
        for r in records
        if r["question_id"] not in kept
    ]
    return hardened, discarded

"""The distractor pool of a question (the Sureon paper's Stage 2, B.3) and the draws made from it.

Stage 2 asks three generator models for N distractors each; the pool keeps every candidate with the model that wrote
it. The final option set, and every configuration the hardening search (Stage 3, Algorithm 1) tries, is a draw from
the pool under the **cross-model diversity constraint**: the drawn distractors must not all come from one model
(when the pool holds more than one model). Draws are seeded from stable ids, so they repeat across runs.

A pool travels with its record as the ``distractor_pool`` column: a list of ``{"text", "model"}``.
"""

import random
from collections.abc import Sequence
from itertools import combinations
from math import comb

import pyarrow as pa

from builders.errors import InputError
from builders.options import normalise_option, stable_seed


POOL_TYPE = pa.list_(pa.struct([("text", pa.string()), ("model", pa.string())]))


def clean_pool(pool: Sequence[dict], answer: str) -> list[dict]:
    """The pool without empty texts, without the answer itself, and without repeats (first writer kept)."""
    seen = {normalise_option(answer)}
    kept = []
    for candidate in pool:
        key = normalise_option(candidate.get("text") or "")
        if key and key not in seen:
            seen.add(key)
            kept.append({"text": str(candidate["text"]).strip(), "model": str(candidate.get("model") or "unknown")})
    return kept


def is_diverse(draw: Sequence[dict], pool: Sequence[dict]) -> bool:
    """The cross-model constraint: not every drawn distractor from one model, unless the pool has only one."""
    if len({c["model"] for c in pool}) < 2 or len(draw) < 2:
        return True
    return len({c["model"] for c in draw}) > 1


def draw_configurations(pool: Sequence[dict], size: int, limit: int, *seed_parts: str) -> list[list[dict]]:
    """Up to ``limit`` distinct diverse draws of ``size`` distractors, in a seeded order (the first is the default).

    Draws are sampled at random (``random.Random`` seeded from ``seed_parts``) without repeating a set; when the
    pool is small, every diverse set is enumerated and shuffled instead, so ``limit`` is met whenever it can be.
    """
    if size > len(pool):
        raise InputError(f"cannot draw {size} distractors from a pool of {len(pool)}")
    rng = random.Random(stable_seed("distractors", *seed_parts))
    total = comb(len(pool), size)
    if total <= 4 * limit:
        candidates = [list(c) for c in combinations(range(len(pool)), size)]
        rng.shuffle(candidates)
        draws = [sorted(c) for c in candidates]
    else:
        draws, seen, diverse = [], set(), 0
        while diverse < limit and len(seen) < total:  # count diverse draws only, so `limit` is met when it can be
            indices = tuple(sorted(rng.sample(range(len(pool)), size)))
            if indices not in seen:
                seen.add(indices)
                draws.append(list(indices))
                diverse += is_diverse([pool[i] for i in indices], pool)
    configurations = []
    for indices in draws:
        draw = [pool[i] for i in indices]
        if is_diverse(draw, pool):
            configurations.append(draw)
            if len(configurations) == limit:
                break
    return configurations


def draw_distractors(pool: Sequence[dict], size: int, *seed_parts: str) -> list[dict]:
    """The one seeded diverse draw used as a question's final distractors."""
    draws = draw_configurations(pool, size, 1, *seed_parts)
    if not draws:
        raise InputError(f"no diverse set of {size} distractors in this pool")
    return draws[0]

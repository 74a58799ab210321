"""What every filler returns (:class:`Fill`: the case and its slot values) and the fills both branches make alike: a
yes/no pair, a grounded JSON answer, the procedure type, a list of words in English.

Apart from the two branches' fillers because both use them and the templating engine reads :class:`Fill`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from public_converters.grounded import dump
from public_converters.schema import Instance


@dataclass
class Fill:
    case: str  # the answers key, or "json" for grounded templates
    slots: dict
    answer: str | None = None  # the JSON answer of a grounded template
    overlay: Instance | None = None  # the instance whose contour the image shows (mask classification)


def join(words: list[str]) -> str:
    words = list(words)
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def yes_no_pair(present: list[str], vocabulary: list[str], rng: random.Random, slot: str) -> list[Fill]:
    """A "yes" fill for a present label and a "no" fill for an absent one of the vocabulary (each drawn by ``rng``),
    where there is one."""
    fills = [Fill("yes", {slot: rng.choice(present)})] if present else []
    absent = [label for label in vocabulary if label not in present]
    if absent:
        fills.append(Fill("no", {slot: rng.choice(absent)}))
    return fills


def json_answer(value) -> list[Fill]:
    """The one fill of a grounded template: its answer is ``value`` as JSON."""
    return [Fill("json", {}, answer=dump(value))]


def fill_procedure_type(item, ctx, rng):
    return [Fill("one", {})]

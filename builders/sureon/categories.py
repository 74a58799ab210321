"""The ten Sureon question categories (the Sureon paper, Tables 2, 3 and 7) and the release slugs that map onto them.

The release names categories by slug (``object_existence``, ``forecast_cot``, ...); the paper by code (EE, F, ...).
Slugs outside the ten (the website also shows ``decision_reasoning`` and ``object_localization``) are kept under
their own name by :func:`resolve_category`, never folded into a code, so that nothing is silently relabelled.
"""

from dataclasses import dataclass


MCQ = "mcq"
ORDERING = "ordering"
OPEN = "open"


@dataclass(frozen=True)
class Category:
    code: str
    name: str
    slug: str
    granularity: str  # "short-window" | "long-horizon"
    group: str  # "perception" | "reasoning"
    answer_format: str  # MCQ | ORDERING | OPEN

    @property
    def is_open_ended(self) -> bool:
        return self.answer_format != MCQ

    @property
    def accuracy_scored(self) -> bool:
        """SM is judged by an LLM and reported apart from the pooled accuracy (the Sureon paper, D.1)."""
        return self.answer_format in (MCQ, ORDERING)


CATEGORIES: tuple[Category, ...] = (
    Category("AD", "Action Description", "action_description", "short-window", "perception", MCQ),
    Category("EE", "Entity Existence", "object_existence", "short-window", "perception", MCQ),
    Category("EA", "Entity Attribute", "object_attribute", "short-window", "perception", MCQ),
    Category(
        "PAD", "Procedure-Agnostic Action Description", "pa_action_description", "short-window", "perception", MCQ
    ),
    Category(
        "IAI", "Instrument-Action Interaction", "instrument_action_interaction", "short-window", "perception", MCQ
    ),
    Category("LAR", "Local Action Reasoning", "local_action_reasoning", "short-window", "reasoning", MCQ),
    Category("SPI", "Safety Practice Identification", "safety", "short-window", "reasoning", MCQ),
    Category("F", "Forecasting", "forecast_cot", "long-horizon", "reasoning", MCQ),
    Category("TO", "Temporal Ordering", "temporal_ordering", "long-horizon", "reasoning", ORDERING),
    Category("SM", "Sequence Summarization", "sequence_summarization", "long-horizon", "reasoning", OPEN),
)
BY_CODE: dict[str, Category] = {c.code: c for c in CATEGORIES}

# Every spelling seen or plausible for a category: code, slug, display name, and known variants.
_ALIASES: dict[str, str] = {}
for _c in CATEGORIES:
    for _alias in (_c.code, _c.slug, _c.name):
        _ALIASES[_alias.lower()] = _c.code
_ALIASES.update(
    {
        "forecast": "F",
        "forecasting": "F",
        "safety_practice": "SPI",
        "safety_practice_identification": "SPI",
        "safety practice description": "SPI",
        "instrument-action interaction": "IAI",
        "instrument–action interaction": "IAI",
        "procedure-agnostic action description": "PAD",
        "procedure_agnostic_action_description": "PAD",
        "entity_existence": "EE",
        "entity_attribute": "EA",
    }
)


def normalize_slug(value: str) -> str:
    return value.strip().lower().replace("-", "_").replace(" ", "_")


def resolve_category(value: str) -> tuple[str, Category | None]:
    """Return ``(category, Category-or-None)`` for a release value.

    ``category`` is the paper code for the ten known categories and the normalised slug otherwise.
    """
    key = value.strip().lower()
    code = _ALIASES.get(key) or _ALIASES.get(normalize_slug(value))
    if code is not None:
        return code, BY_CODE[code]
    return normalize_slug(value), None

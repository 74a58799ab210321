"""SurgiQ's label vocabularies: the SurgiQ paper's six domains, four question types and three source kinds.

Apart from the reader because the evaluation reports group scores by the same domains and question types, in the
same order, and need nothing else of the builder: canonical slugs with their display names, the spellings accepted
for them, and the paper's order.
"""

import re


# Canonical values (slugs) and their display names; the paper's six domains, four formats and three source kinds.
DOMAINS = {
    "general_surgery": "General surgery",
    "neurosurgery": "Neurosurgery",
    "robotic_surgery": "Robotic surgery",
    "orthopedic_surgery": "Orthopedic surgery",
    "critical_care": "Critical care",
    "laparoscopic_surgery": "Laparoscopic surgery",
}
QUESTION_TYPES = {
    "case_based": "Case-based",
    "reasoning": "Reasoning",
    "best_option": "Best-option",
    "negative": "Negative",
}
SOURCE_TYPES = {"textbook": "Textbook", "research_paper": "Research paper", "exam": "Exam"}
VOCABULARIES = {"domain": DOMAINS, "question_type": QUESTION_TYPES, "source_type": SOURCE_TYPES}
# Spellings seen in the paper and in common MCQ releases; keys are normalised with :func:`value_key`.
BUILTIN_ALIASES = {
    "domain": {
        "general": "general_surgery",
        "neuro_surgery": "neurosurgery",
        "neurological_surgery": "neurosurgery",
        "robotic": "robotic_surgery",
        "robot_assisted_surgery": "robotic_surgery",
        "orthopaedic_surgery": "orthopedic_surgery",
        "orthopedic": "orthopedic_surgery",
        "orthopaedic": "orthopedic_surgery",
        "orthopedics": "orthopedic_surgery",
        "orthopaedics": "orthopedic_surgery",
        "surgical_critical_care": "critical_care",
        "critical_care_surgery": "critical_care",
        "laparoscopic": "laparoscopic_surgery",
        "laparoscopy": "laparoscopic_surgery",
    },
    "question_type": {
        "case": "case_based",
        "clinical_case": "case_based",
        "casebased": "case_based",
        "best_answer": "best_option",
        "bestoption": "best_option",
        "negation": "negative",
        "except": "negative",
    },
    "source_type": {
        "book": "textbook",
        "textbooks": "textbook",
        "paper": "research_paper",
        "research": "research_paper",
        "article": "research_paper",
        "journal_article": "research_paper",
        "examination": "exam",
        "exam_material": "exam",
        "exams": "exam",
    },
}


def in_vocabulary_order(values, vocabulary: dict) -> list[str]:
    """``values`` in the vocabulary's (the paper's) order, then any others alphabetically."""
    values = set(values)
    return [v for v in vocabulary if v in values] + sorted(values - set(vocabulary))


def value_key(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", str(text).casefold()).strip("_")

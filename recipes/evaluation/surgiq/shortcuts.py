"""Shortcut baselines (the SurgiQ paper's D.3, Table A4): can surface cues answer the questions without a model?

    sureon shortcuts surgiq --dataset DIR_OR_ID [--config default] [--out DIR]

- ``longest_option``: pick the longest option (characters);
- ``lexical_overlap``: pick the option sharing the most content words with the question;
- ``unique_tokens``: pick the option with the most distinct content words (a specificity proxy).

Words are lower-cased alphanumeric runs; content words drop scikit-learn's English stop words. Ties are not broken
by position (that would reward a letter): a question whose best score is shared by ``m`` options, one of them
correct, counts ``1 / m``, the expected accuracy of a uniform tie-break. Accuracy is reported overall and per
question type (or any grouping column: ``sureon audit`` groups Sureon by category), next to uniform guessing.
"""

import json
import re
from collections.abc import Callable
from pathlib import Path

from builders.errors import InputError


def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.casefold())


def content_words(text: str) -> set[str]:
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return {w for w in words(text) if w not in ENGLISH_STOP_WORDS}


def longest_option(question: str, options: list[str]) -> list[float]:
    return [len(option.strip()) for option in options]


def lexical_overlap(question: str, options: list[str]) -> list[float]:
    stem = content_words(question)
    return [len(content_words(option) & stem) for option in options]


def unique_tokens(question: str, options: list[str]) -> list[float]:
    return [len(content_words(option)) for option in options]


BASELINES: dict[str, Callable[[str, list[str]], list[float]]] = {
    "longest_option": longest_option,
    "lexical_overlap": lexical_overlap,
    "unique_tokens": unique_tokens,
}


def expected_credit(scores: list[float], answer_index: int) -> float:
    """1 / (number of top-scoring options) if the answer is among them, else 0."""
    best = max(scores)
    winners = [i for i, s in enumerate(scores) if s == best]
    return 1 / len(winners) if answer_index in winners else 0.0


def shortcut_accuracy(records: list[dict], group_key: str = "question_type") -> dict:
    """Accuracy of each baseline overall and per ``group_key`` (SurgiQ's question type, Sureon's category...), next
    to uniform guessing (the mean of 1 / number of options)."""
    from builders.sureon.categories import BY_CODE
    from builders.surgiq.vocabulary import QUESTION_TYPES, in_vocabulary_order

    if not records:
        raise InputError("no questions to score")
    vocabulary = {"question_type": QUESTION_TYPES, "category": BY_CODE}.get(group_key, {})
    random = sum(1 / len(r["options"]) for r in records) / len(records)
    result: dict = {"num_questions": len(records), "random": random, "group_key": group_key, "baselines": {}}
    for name, baseline in BASELINES.items():
        credits = [expected_credit(baseline(r["question"], r["options"]), r["answer_index"]) for r in records]
        per_type: dict[str, list[float]] = {}
        for record, credit in zip(records, credits, strict=True):
            per_type.setdefault(record.get(group_key) or "unknown", []).append(credit)
        result["baselines"][name] = {
            "accuracy": sum(credits) / len(credits),
            "per_type": {t: sum(per_type[t]) / len(per_type[t]) for t in in_vocabulary_order(per_type, vocabulary)},
        }
    return result


def shortcuts_markdown(result: dict, title: str) -> str:
    types = list(next(iter(result["baselines"].values()))["per_type"])
    lines = [f"# Shortcut baselines: {title}", "", f"{result['num_questions']} questions.", ""]
    lines += ["| baseline | accuracy (%) | " + " | ".join(types) + " |", "| --- | --- |" + " --- |" * len(types)]
    lines.append(f"| random | {100 * result['random']:.2f} | " + " | ".join("-" for _ in types) + " |")
    for name, b in result["baselines"].items():
        per_type = " | ".join(f"{100 * b['per_type'].get(t, 0):.2f}" for t in types)
        lines.append(f"| {name} | {100 * b['accuracy']:.2f} | {per_type} |")
    return "\n".join(lines) + "\n"


def run_shortcuts(dataset: str, config: str = "default", split: str = "test", out: Path | None = None) -> str:
    from recipes.evaluation.surgiq.evaluate import load_surgiq

    result = shortcut_accuracy(load_surgiq(dataset, config, split))
    markdown = shortcuts_markdown(result, f"{dataset} ({config})")
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "shortcuts.json").write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
        (out / "shortcuts.md").write_text(markdown)
    return markdown

"""Verifiable rewards for GRPO (``recipes/grpo.py``), each scoring through the evaluation's own parsers, so a reward
and the benchmark never disagree on what counts as correct.

TRL's reward signature: ``reward(completions, **columns) -> list[float | None]``, ``completions`` being
conversations (``[{"role": "assistant", "content": ...}]``) or strings, and ``columns`` the dataset's columns as
keyword lists (``recipes.training.grpo_data.REFERENCE_COLUMNS``). A row a reward does not apply to gets ``None``, which
TRL leaves out of that reward's mean and of the weighted sum.

- ``mcq_accuracy``: 1 when the parsed letter is the answer, 0 when wrong, ambiguous ("A or B") or unparsed: the
  evaluation's ``recipes.model_io.answers.parse_answer`` verdict itself (``<think>`` blocks dropped first).
- ``order_accuracy``: 1 for the exact order (the evaluation's verdict), otherwise the share of event pairs in the
  right relative order, ``(1 + Kendall tau) / 2``, which is below 1 for any other permutation; 0 unparsed.
- ``format``: the answer part (after ``<think>``) in the shape the prompt asks for: a bare letter (``B``, ``(B)``,
  ``B.``), the event letters separated by commas, or JSON that ``public_converters.grounded.parse_answer`` accepts
  for the row's shape without the evaluation's lenient JSON-span fallback.
- ``label_accuracy`` (grounded ``label`` rows: phase, step, action): 1 when the label the public evaluation reads
  (``recipes.model_io.answers.read_answer``) equals the reference, compared as the metrics compare
  labels (``label_key``: case and separators ignored).
- ``box_iou`` (grounded ``boxes`` rows): predicted and reference boxes matched one to one (Hungarian, same label
  only, labels canonicalised as mAP50 does), the matched IoUs summed over ``max(#predicted, #reference)``, so missing
  and extra boxes count 0; 1 when both are empty; 0 unparsed. IoU on the 0-1000 grid equals IoU in pixels.
- ``temporal_iou`` (grounded ``window`` rows): intersection over union of the predicted and reference
  ``{"start", "end"}`` windows; 0 unparsed.
"""

import re
from collections.abc import Callable

import numpy as np

from builders.errors import InputError
from builders.options import LETTERS
from public_converters.grounded import GroundedAnswerError
from public_converters.grounded import parse_answer as parse_grounded
from recipes.model_io.answers import (
    canonical_label,
    clean_output,
    drop_reasoning,
    label_key,
    parse_answer,
    read_answer,
)


_BARE_LETTER = re.compile(r"[(\[]?([A-Z])[)\]]?\.?")


def completion_text(completion) -> str:
    """The generated text of one completion: a string, or the last message of a conversation (string or parts)."""
    if isinstance(completion, str):
        return completion
    content = completion[-1]["content"] if completion else ""
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if part.get("type") == "text")


def _rows(completions, columns: dict) -> list[tuple[str, dict]]:
    """``(text, row)`` per completion, ``row`` holding that completion's entry of every column."""
    return [
        (
            completion_text(completion),
            {name: values[i] for name, values in columns.items() if isinstance(values, list)},
        )
        for i, completion in enumerate(completions)
    ]


def _record(row: dict) -> dict:
    """The row as the evaluation's ``parse_answer`` reads a benchmark record."""
    return {
        "question_id": row.get("question_id"),
        "question": row.get("question"),
        "options": row.get("options") or [],
        "answer_order": row.get("answer_order") or [],
        "answer_format": row.get("answer_format"),
    }


def mcq_accuracy(completions, **columns) -> list[float | None]:
    scores = []
    for text, row in _rows(completions, columns):
        if not row.get("options"):
            scores.append(None)
            continue
        scores.append(float(bool(parse_answer(_record(row), text, row["answer"]).correct)))
    return scores


def order_agreement(predicted: list[str], reference: list[str]) -> float:
    """The share of event pairs whose relative order ``predicted`` keeps: ``(1 + Kendall tau) / 2``."""
    rank = {letter: position for position, letter in enumerate(predicted)}
    pairs = [(a, b) for i, a in enumerate(reference) for b in reference[i + 1 :]]
    if not pairs:
        return 1.0
    return sum(rank[a] < rank[b] for a, b in pairs) / len(pairs)


def order_accuracy(completions, **columns) -> list[float | None]:
    scores = []
    for text, row in _rows(completions, columns):
        order = row.get("answer_order")
        if not order or row.get("options"):
            scores.append(None)
            continue
        parsed = parse_answer(_record(row), text, row["answer"])
        if parsed.correct:
            scores.append(1.0)
        elif parsed.parsed is None:
            scores.append(0.0)
        else:
            scores.append(order_agreement(parsed.parsed.split(","), list(order)))
    return scores


def _bare_letter(answer: str, num_options: int) -> bool:
    match = _BARE_LETTER.fullmatch(answer)
    return bool(match) and match.group(1) in LETTERS[:num_options]


def _letter_list(answer: str, num_events: int) -> bool:
    letters = [part.strip() for part in answer.strip().rstrip(".").split(",")]
    return len(letters) == num_events and sorted(letters) == list(LETTERS[:num_events])


def format_reward(completions, **columns) -> list[float | None]:
    scores = []
    for text, row in _rows(completions, columns):
        answer = clean_output(text)  # letters and orders; JSON keeps its Markdown code fence
        if row.get("options"):
            scores.append(float(_bare_letter(answer, len(row["options"]))))
        elif row.get("answer_order"):
            scores.append(float(_letter_list(answer, len(row["answer_order"]))))
        elif row.get("answer_shape"):
            try:
                parse_grounded(row["answer_shape"], drop_reasoning(text), None, row.get("answer_key"))
                scores.append(1.0)
            except GroundedAnswerError:
                scores.append(0.0)
        else:
            scores.append(None)
    return scores


format_reward.__name__ = "format"  # TRL logs each reward under its function's name: rewards/format/mean


def _grounded_pair(row: dict, text: str) -> tuple[object, object]:
    """(prediction or None, reference) as the public evaluation reads them; ``<think>`` dropped first."""
    prediction, _ = read_answer(row, drop_reasoning(text))
    reference, error = read_answer(row, row["answer"])
    if error is not None:
        raise InputError(f"{row.get('question_id')}: the reference answer does not parse ({error})")
    return prediction, reference


def label_accuracy(completions, **columns) -> list[float | None]:
    scores = []
    for text, row in _rows(completions, columns):
        if row.get("answer_shape") != "label":
            scores.append(None)
            continue
        prediction, reference = _grounded_pair(row, text)
        scores.append(float(prediction is not None and label_key(prediction) == label_key(reference)))
    return scores


def iou(a: list[float], b: list[float]) -> float:
    """IoU of two ``[x1, y1, x2, y2]`` boxes."""
    width = min(a[2], b[2]) - max(a[0], b[0])
    height = min(a[3], b[3]) - max(a[1], b[1])
    inter = max(0.0, width) * max(0.0, height)
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else float(a == b)


def matched_box_iou(predicted: list[dict], reference: list[dict]) -> float:
    """One-to-one matching of same-label boxes maximising total IoU, over ``max(len(predicted), len(reference))``."""
    from scipy.optimize import linear_sum_assignment

    if not predicted and not reference:
        return 1.0
    if not predicted or not reference:
        return 0.0
    matrix = np.array(
        [
            [
                iou(p["bbox"], r["bbox"]) if canonical_label(p["label"]) == canonical_label(r["label"]) else 0.0
                for r in reference
            ]
            for p in predicted
        ]
    )
    rows, cols = linear_sum_assignment(matrix, maximize=True)
    return float(matrix[rows, cols].sum()) / max(len(predicted), len(reference))


def box_iou(completions, **columns) -> list[float | None]:
    scores = []
    for text, row in _rows(completions, columns):
        if row.get("answer_shape") != "boxes":
            scores.append(None)
            continue
        prediction, reference = _grounded_pair(row, text)
        scores.append(0.0 if prediction is None else matched_box_iou(prediction, reference))
    return scores


def window_iou(a: dict, b: dict) -> float:
    inter = max(0.0, min(a["end"], b["end"]) - max(a["start"], b["start"]))
    union = max(a["end"], b["end"]) - min(a["start"], b["start"])
    return inter / union if union > 0 else float(a["start"] == b["start"])


def temporal_iou(completions, **columns) -> list[float | None]:
    scores = []
    for text, row in _rows(completions, columns):
        if row.get("answer_shape") != "window":
            scores.append(None)
            continue
        prediction, reference = _grounded_pair(row, text)
        scores.append(0.0 if prediction is None else window_iou(prediction, reference))
    return scores


REWARDS: dict[str, Callable] = {
    "mcq_accuracy": mcq_accuracy,
    "order_accuracy": order_accuracy,
    "format": format_reward,
    "label_accuracy": label_accuracy,
    "box_iou": box_iou,
    "temporal_iou": temporal_iou,
}


def reward_functions(names: list[str]) -> list[Callable]:
    """The reward functions named in a recipe (``reward_funcs: [name, ...]``), in order."""
    unknown = [name for name in names if name not in REWARDS]
    if unknown:
        raise InputError(f"reward_funcs: unknown {unknown}; known: {sorted(REWARDS)}")
    if len(set(names)) != len(names):
        raise InputError(f"reward_funcs: {names} names a reward twice")
    if not names:
        raise InputError("reward_funcs is empty: name at least one of " + ", ".join(sorted(REWARDS)))
    return [REWARDS[name] for name in names]

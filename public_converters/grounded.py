"""Grounded (structured JSON) answers: one builder and one parser per answer shape (the Sureon paper's C.2 / C.3).

Every grounded answer the templates write is parsed back by ``parse_answer`` before it is kept, and the same parser
reads a model's output at evaluation time, so what the corpus teaches is exactly what the evaluation accepts.

Shapes:
- ``boxes``: ``[{"index": 1, "label": str, "box": [x1, y1, x2, y2]}, ...]`` (1-based index, 0-1000 grid);
- ``presence``: ``{class: true|false}`` over the whole vocabulary;
- ``count``: ``{"count": n}``;
- ``label``: ``{key: class}`` with key ``phase`` / ``step`` / ``action``;
- ``triplets``: ``[{"instrument", "verb", "target"}, ...]``;
- ``tool_actions``: ``[{"tool", "action"}, ...]``;
- ``window``: ``{"start": s, "end": e}``, a temporal window in seconds from the clip's start (no template writes it
  yet; the GRPO reward ``temporal_iou`` and any benchmark row with ``answer_shape: window`` read it).
"""

from __future__ import annotations

import json
import re

from builders.errors import InputError


SHAPES = ("boxes", "presence", "count", "label", "triplets", "tool_actions", "window")
_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL)


class GroundedAnswerError(InputError):
    pass


def dump(value) -> str:
    """The canonical serialisation: compact, keys in insertion order, so two builds are byte-identical."""
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


def _check_label(value, allowed: set[str] | None, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise GroundedAnswerError(f"{what} must be a non-empty string, got {value!r}")
    if allowed is not None and value not in allowed:
        raise GroundedAnswerError(f"{what} {value!r} is not one of the listed classes")
    return value


def _check_box(box) -> list[float]:
    if not isinstance(box, list) or len(box) != 4 or not all(isinstance(v, int | float) for v in box):
        raise GroundedAnswerError(f"box must be [x1, y1, x2, y2], got {box!r}")
    if not all(0 <= v <= 1000 for v in box) or box[0] > box[2] or box[1] > box[3]:
        raise GroundedAnswerError(f"box {box} is not ordered inside the 0-1000 grid")
    return [float(v) for v in box]


def _objects(value, keys: tuple[str, ...]) -> list[dict]:
    if not isinstance(value, list):
        raise GroundedAnswerError(f"expected a JSON array, got {type(value).__name__}")
    for item in value:
        if not isinstance(item, dict) or set(item) != set(keys):
            raise GroundedAnswerError(f"each element must have exactly the keys {keys}, got {item!r}")
    return value


def parse_answer(shape: str, text: str, vocabulary: dict[str, set[str]] | None = None, key: str | None = None):
    """Parse and validate one grounded answer; ``vocabulary`` (kind -> classes) restricts labels when given."""
    vocabulary = vocabulary or {}
    fenced = _FENCE.match(text)
    try:
        value = json.loads(fenced.group(1) if fenced else text)
    except json.JSONDecodeError as error:
        raise GroundedAnswerError(f"not JSON: {error}") from error
    if shape == "boxes":
        items = _objects(value, ("index", "label", "box"))
        for position, item in enumerate(items, start=1):
            if item["index"] != position:
                raise GroundedAnswerError(f"indices must run 1..n, element {position} has {item['index']!r}")
            _check_label(item["label"], vocabulary.get(key), "label")
            _check_box(item["box"])
        return items
    if shape == "presence":
        if not isinstance(value, dict) or not all(isinstance(v, bool) for v in value.values()):
            raise GroundedAnswerError("expected an object mapping each class to true or false")
        allowed = vocabulary.get(key)
        if allowed is not None and set(value) != allowed:
            raise GroundedAnswerError(f"classes differ from the listed ones: {sorted(set(value) ^ allowed)}")
        return value
    if shape == "count":
        if not isinstance(value, dict) or set(value) != {"count"} or not isinstance(value["count"], int):
            raise GroundedAnswerError('expected {"count": n}')
        if value["count"] < 0:
            raise GroundedAnswerError("count must not be negative")
        return value
    if shape == "label":
        if not isinstance(value, dict) or set(value) != {key}:
            raise GroundedAnswerError(f'expected {{"{key}": name}}')
        _check_label(value[key], vocabulary.get(key), key)
        return value
    if shape == "triplets":
        for item in _objects(value, ("instrument", "verb", "target")):
            _check_label(item["instrument"], vocabulary.get("tool"), "instrument")
            _check_label(item["verb"], vocabulary.get("verb"), "verb")
            _check_label(item["target"], vocabulary.get("target"), "target")
        return value
    if shape == "tool_actions":
        for item in _objects(value, ("tool", "action")):
            _check_label(item["tool"], vocabulary.get("tool"), "tool")
            _check_label(item["action"], vocabulary.get("action"), "action")
        return value
    if shape == "window":
        if not isinstance(value, dict) or set(value) != {"start", "end"}:
            raise GroundedAnswerError('expected {"start": s, "end": e} in seconds')
        if not all(isinstance(t, int | float) and not isinstance(t, bool) for t in value.values()):
            raise GroundedAnswerError(f"window times must be numbers, got {value}")
        if not 0 <= value["start"] <= value["end"]:
            raise GroundedAnswerError(f"window {value} must have 0 <= start <= end")
        return value
    raise InputError(f"unknown grounded shape {shape!r}; known: {SHAPES}")

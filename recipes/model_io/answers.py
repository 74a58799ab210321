"""Read the answer out of a model's free text: the option letter of a multiple-choice question, the event order of a
temporal-ordering question (the Sureon paper, D.1: exact, order-sensitive equality), the cleaned text of a sequence
summary.

Extraction is deliberately forgiving of form and strict about meaning. Accepted for a letter: ``B``, ``(B)``, ``b.``,
``**B**``, ``Answer: B. ...``, ``The correct option is (C)``, ``B Dissecting tissue``, the option's text itself, a
sentence naming exactly one option letter. Accepted for an order: ``B, C, A``, ``B -> C -> A``, ``BCA``, ``(B) (C)
(A)``, a numbered list, ``Event B, then event C, then event A``, or the events' own texts in order. Reasoning models'
``<think>...</think>`` blocks are dropped first. Anything ambiguous (two options named, no permutation found) is
``None``: counted wrong and listed, never guessed.
"""

import re
from dataclasses import dataclass

from builders.errors import InputError
from builders.options import LETTERS
from builders.sureon.categories import MCQ, ORDERING
from public_converters.grounded import GroundedAnswerError
from public_converters.grounded import parse_answer as parse_grounded


_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_MARKDOWN = re.compile(r"\*\*|__|`|^#+\s*", re.MULTILINE)
_WHOLE_LETTER = re.compile(r"^[\s(\[]*([A-Za-z])[\s)\].:]*$")
_ANSWER_WORDS = r"(?i:(?:final\s+|correct\s+|best\s+)?(?:answer|option|choice))"
_EXPLICIT_UPPER = re.compile(
    _ANSWER_WORDS + r"(?i:\s*(?:is|would\s+be|:|=|-)?\s*(?:option|choice|letter)?)\s*[:(\[]?\s*([A-Z])(?![A-Za-z'’])"
)
_EXPLICIT_LOWER = re.compile(
    _ANSWER_WORDS
    + r"(?i:\s*(?:is|would\s+be|:|=|-)?\s*(?:option|choice|letter)?)\s*[:(\[]?\s*([a-z])(?=\s*(?:$|[.)\],:;]))"
)
_LEADING_LETTER = re.compile(r"^[(\[]?([A-Z])(?:[).:\]]|\s+-)\s*")
_LEADING_BARE = re.compile(r"^([A-Z])\s+(\S.*)$", re.DOTALL)
_LONE_LETTER = re.compile(r"(?<![A-Za-z'’])([A-Z])(?![A-Za-z'’])")
_ARTICLE = re.compile(  # "A surgeon", "I think": a word, not an option letter ("A or B", "A is" stay letters)
    r"(?<![A-Za-z'’])[AI]\s+(?!(?:or|and|nor|is|was|seems|looks|would|could|might|vs|versus)\b)[a-z]"
)
_NON_WORD = re.compile(r"[^\w]+")
_LIST_MARKER = re.compile(r"^\s*(?:\d+[.)]|[-*•])\s*", re.MULTILINE)
_EVENT_WORD = re.compile(r"(?i)\b(?:events?|steps?)\b")
_PAREN_LETTER = re.compile(r"[(\[]([A-Za-z])[)\]]")
_SEPARATOR = (
    r"(?:\s*(?:,|;|->|→|=>|>|-|–|—|\bthen\b|\band\b|\bfollowed\s+by\b|\bfinally\b|\bnext\b|\blastly\b)\s*|\s+)+"
)
_LETTER_RUN = re.compile(rf"(?<![A-Za-z'’])[A-Z](?:{_SEPARATOR}[A-Z])+(?![A-Za-z'’])")
_ANSWER_MARKER = re.compile(r"(?i)(?:final\s+)?(?:answer|order(?:ing)?|sequence)\s*(?:is|:)")
_SINGLE_LETTER = re.compile(r"(?<![A-Za-z])[A-Z](?![A-Za-z])")
_EVENT_MARKER = re.compile(r"(?:^|(?<=[\s(\[]))([A-Z])\s*[:)]\s+")


def drop_reasoning(text: str | None) -> str:
    """A raw output without its ``<think>...</think>`` block (what structured answers, e.g. JSON, are read from)."""
    text = _THINK.sub("", text or "")
    if "</think>" in text:  # an opening tag eaten by the chat template
        text = text.rsplit("</think>", 1)[1]
    return text.strip()


def clean_output(text: str | None) -> str:
    """The answer part of a raw output: no reasoning block, no Markdown emphasis, trimmed."""
    return _MARKDOWN.sub("", drop_reasoning(text)).strip()


def _norm(text: str) -> str:
    return " ".join(_NON_WORD.sub(" ", text.casefold()).split())


def _option_by_text(text: str, options: list[str]) -> int | None:
    """The one option whose text the output equals or contains (options inside other matched options ignored)."""
    said = _norm(text)
    normalised = [_norm(option) for option in options]
    exact = [i for i, option in enumerate(normalised) if option and option == said]
    if len(exact) == 1:
        return exact[0]
    padded = f" {said} "
    found = [i for i, option in enumerate(normalised) if option and f" {option} " in padded]
    found = [i for i in found if not any(i != j and normalised[i] in normalised[j] for j in found)]
    return found[0] if len(found) == 1 else None


def extract_letter(text: str | None, options: list[str]) -> str | None:
    """The option letter a model answered, or ``None`` when there is none or more than one."""
    valid = LETTERS[: len(options)]
    answer = clean_output(text)
    if not answer:
        return None
    if (match := _WHOLE_LETTER.match(answer)) and match.group(1).upper() in valid:
        return match.group(1).upper()
    explicit = [
        (m.start(), m.group(1).upper())
        for regex in (_EXPLICIT_UPPER, _EXPLICIT_LOWER)
        for m in regex.finditer(answer)
        if m.group(1).upper() in valid
    ]
    if explicit:
        return max(explicit)[1]  # the last one stated: the conclusion of any reasoning
    if (match := _LEADING_LETTER.match(answer)) and match.group(1) in valid:
        return match.group(1)
    if (match := _LEADING_BARE.match(answer)) and match.group(1) in valid:
        index = valid.index(match.group(1))
        if _norm(match.group(2)).startswith(_norm(options[index])):
            return match.group(1)
    index = _option_by_text(answer, options)
    if index is not None:
        return valid[index]
    articles = {m.start() for m in _ARTICLE.finditer(answer)}
    lone = {m.group(1) for m in _LONE_LETTER.finditer(answer) if m.start() not in articles and m.group(1) in valid}
    return lone.pop() if len(lone) == 1 else None


def event_texts(question: str) -> dict[str, str]:
    """``"A: mesh placement B: incision ..."`` -> ``{"A": "mesh placement", "B": "incision ...", ...}``."""
    markers = [m for m in _EVENT_MARKER.finditer(question)]
    events: dict[str, str] = {}
    for position, marker in enumerate(markers):
        if marker.group(1) != LETTERS[len(events)]:
            continue
        end = markers[position + 1].start() if position + 1 < len(markers) else len(question)
        events[marker.group(1)] = question[marker.end() : end].strip().rstrip(".;,")
    return events


def _order_from_letters(text: str, num_events: int) -> list[str] | None:
    """The last full permutation of event letters written in ``text`` (a run like ``B, C, A`` or ``BCA``)."""
    text = _PAREN_LETTER.sub(r" \1 ", _EVENT_WORD.sub(" ", _LIST_MARKER.sub(" ", text)))
    candidates: list[tuple[int, list[str]]] = []  # (where it ends, letters)
    whole = text.strip().rstrip(".")
    if re.fullmatch(rf"[A-Za-z](?:{_SEPARATOR}[A-Za-z])*", whole):  # the whole answer, any case
        candidates.append((len(text), _SINGLE_LETTER.findall(whole.upper())))
    elif re.fullmatch(rf"[A-Za-z]{{{num_events}}}", whole):
        candidates.append((len(text), list(whole.upper())))
    candidates += [(m.end(), _SINGLE_LETTER.findall(m.group(0))) for m in _LETTER_RUN.finditer(text)]
    compact = re.compile(rf"(?<![A-Za-z])[A-Z]{{{num_events}}}(?![A-Za-z])")
    candidates += [(m.end(), list(m.group(0))) for m in compact.finditer(text)]
    orders = [(end, letters) for end, letters in candidates if sorted(letters) == list(LETTERS[:num_events])]
    return max(orders)[1] if orders else None


def _order_from_event_texts(text: str, events: dict[str, str]) -> list[str] | None:
    said = f" {_norm(text)} "
    positions = {letter: said.find(f" {_norm(event)} ") for letter, event in events.items() if _norm(event)}
    if len(positions) != len(events) or min(positions.values()) < 0 or len(set(positions.values())) != len(events):
        return None
    return sorted(positions, key=positions.get)


def extract_order(text: str | None, num_events: int, question: str | None = None) -> list[str] | None:
    """The event letters in the predicted order, or ``None`` without a full permutation of the events."""
    answer = clean_output(text)
    markers = list(_ANSWER_MARKER.finditer(answer))
    segments = ([answer[markers[-1].end() :]] if markers else []) + [answer]
    for segment in segments:
        order = _order_from_letters(segment, num_events)
        if order is not None:
            return order
    events = event_texts(question or "")
    if len(events) == num_events:
        for segment in segments:
            order = _order_from_event_texts(segment, events)
            if order is not None:
                return order
    return None


@dataclass(frozen=True)
class ParsedAnswer:
    parsed: str | None  # a letter, a comma-joined letter order, or the cleaned free text
    correct: bool | None  # None: not scored here (open-ended answers go to the judge)


def parse_answer(record: dict, raw_output: str, target: str) -> ParsedAnswer:
    """Parse ``raw_output`` for ``record`` and score it against ``target`` (``builders.prompt.answer_target``)."""
    if record.get("options"):
        letter = extract_letter(raw_output, record["options"])
        return ParsedAnswer(letter, letter == target)
    if record.get("answer_format") == ORDERING or record.get("answer_order"):
        order = extract_order(raw_output, len(record["answer_order"]), record.get("question"))
        parsed = ",".join(order) if order is not None else None
        return ParsedAnswer(parsed, parsed == target)
    if record.get("answer_format", MCQ) == MCQ:
        raise InputError(f"{record.get('question_id')}: a multiple-choice record without options")
    cleaned = clean_output(raw_output)
    return ParsedAnswer(cleaned or None, None)


# ---- the public benchmarks' answers: a label, yes / no, boxes or a window (`sureon eval public`) ----------------


def label_key(text: str) -> str:
    """Case- and separator-insensitive key of a class label."""
    return re.sub(r"[^0-9a-z]+", "", str(text).lower())


def canonical_label(text: str) -> str:
    """Lowercase, with underscores, hyphens and runs of whitespace as one space."""
    return re.sub(r"[\s_\-]+", " ", str(text).lower()).strip()


def _json_span(text: str) -> str | None:
    starts = [i for i in (text.find("{"), text.find("[")) if i >= 0]
    if not starts:
        return None
    start = min(starts)
    end = text.rfind("}" if text[start] == "{" else "]")
    return text[start : end + 1] if end > start else None


def read_answer(row: dict, text: str | None) -> tuple[object, str | None]:
    """(prediction, None) or (None, why): a label (phase, action), "yes"/"no" (cvs), ``[{label, bbox}]`` boxes, or
    the whole value of a shape without a key (a ``{"start", "end"}`` window)."""
    if text is None:
        return None, "no output"
    shape, key = row["answer_shape"], row["answer_key"]
    try:
        value = parse_grounded(shape, text, None, key)
    except GroundedAnswerError as error:
        span = _json_span(text)
        try:
            value = parse_grounded(shape, span, None, key) if span else None
        except GroundedAnswerError:
            value = None
        if value is None:
            return None, str(error)
    if shape == "boxes":
        return [{"label": item["label"], "bbox": [float(v) for v in item["box"]]} for item in value], None
    return (value if key is None else value[key]), None

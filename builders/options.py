"""Answer options: read every layout a release may use, resolve the answer, order them reproducibly.

Layouts accepted [the release's real layout is inferred, see ``docs/release_format.md``]:
a list of strings; a list of ``{letter, text, correct}`` structs (key spellings vary, see ``_TEXT_KEYS``);
a ``{letter: text}`` mapping; one column per letter; a correct answer plus a pool of distractors; any of the
list forms JSON-encoded in a string column. Any option count is supported (4 on the website, 7 in the paper).
"""

import hashlib
import json
import random
import re
from collections.abc import Sequence

from builders.errors import InputError


LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_TEXT_KEYS = ("text", "option", "value", "content", "answer")
_LETTER_KEYS = ("letter", "label", "key", "id")
_CORRECT_KEYS = ("correct", "is_correct", "isCorrect")
_LETTER_ANSWER = re.compile(r"^\(?\s*([A-Z])\s*\)?[.):]?$")
_ORDER_SEPARATORS = re.compile(r"\s*(?:,|;|->|→|>|-|\s)\s*")


class OptionError(InputError):
    pass


def stable_seed(*parts: str) -> int:
    """A seed from stable ids (never Python's salted ``hash``): same ids, same seed, on every machine."""
    digest = hashlib.sha256("\x1f".join(parts).encode()).digest()
    return int.from_bytes(digest[:8], "big")


def seeded_shuffle(items: Sequence, *seed_parts: str) -> list:
    shuffled = list(items)
    random.Random(stable_seed(*seed_parts)).shuffle(shuffled)
    return shuffled


def normalise_option(text: str) -> str:
    return re.sub(r"\s+", " ", str(text)).strip().rstrip(".").casefold()


def _as_text(value) -> str:
    """An option's text; UTF-8 bytes (a binary column) are decoded, never kept as their Python repr."""
    if isinstance(value, bytes | bytearray):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            raise OptionError(f"option {bytes(value)[:40]!r} is not UTF-8 text; write options as strings") from None
    return str(value)


def _pick(struct: dict, keys: Sequence[str]):
    for key in keys:
        if key in struct and struct[key] is not None:
            return struct[key]
    return None


def read_options(value) -> tuple[list[str], int | None]:
    """Return ``(texts in presentation order, index flagged correct or None)`` from one cell of any layout."""
    if value is None:
        return [], None
    if isinstance(value, str):
        stripped = value.strip()
        if not stripped:
            return [], None
        if stripped[0] not in "[{":
            raise OptionError(f"options cell is a plain string, not a list: {value[:80]!r}")
        try:
            value = json.loads(stripped)
        except json.JSONDecodeError as err:
            raise OptionError(f"options cell is not valid JSON ({err}): {value[:80]!r}") from None
    if isinstance(value, dict):
        if not all(isinstance(k, str) and len(k.strip()) == 1 for k in value):
            raise OptionError(f"options mapping must be keyed by letters, got keys {sorted(value)}")
        return [_as_text(value[k]) for k in sorted(value, key=str.upper)], None
    items = list(value)
    if not items:
        return [], None
    if all(isinstance(item, str | bytes) for item in items):
        return [_as_text(item) for item in items], None
    if not all(isinstance(item, dict) for item in items):
        raise OptionError(f"options mix strings and structs: {items[:3]!r}")
    texts, letters, correct = [], [], []
    for position, item in enumerate(items):
        text = _pick(item, _TEXT_KEYS)
        if text is None:
            raise OptionError(f"option struct {item!r} has no text field (looked for {', '.join(_TEXT_KEYS)})")
        texts.append(_as_text(text))
        letter = _pick(item, _LETTER_KEYS)
        letters.append(str(letter).strip().upper() if letter is not None else LETTERS[position])
        if bool(_pick(item, _CORRECT_KEYS)):
            correct.append(position)
    if len(set(letters)) != len(letters):
        raise OptionError(f"option letters repeat: {letters}")
    order = sorted(range(len(items)), key=lambda i: letters[i])
    if len(correct) > 1:
        raise OptionError(f"{len(correct)} options are flagged correct (letters {[letters[i] for i in correct]})")
    flagged = order.index(correct[0]) if correct else None
    return [texts[i] for i in order], flagged


def options_from_pool(answer: str, pool: list[str], question_id: str) -> list[str]:
    """Correct answer + distractor pool, in an order seeded by ``question_id`` (the release fixes none)."""
    if normalise_option(answer) in {normalise_option(d) for d in pool}:
        raise OptionError(f"the answer {answer!r} is also listed among the distractors")
    return seeded_shuffle([answer, *pool], "options", question_id)


def resolve_answer(answer: str, options: list[str], flagged: int | None) -> int:
    """Index of the correct option, from the answer's text or letter; raise :class:`OptionError` if none matches."""
    if not options:
        return -1
    normalised = [normalise_option(o) for o in options]
    if len(set(normalised)) != len(normalised):
        raise OptionError(f"two options have the same text: {options}")
    by_text = [i for i, option in enumerate(normalised) if option == normalise_option(answer)]
    letter = _LETTER_ANSWER.match(str(answer).strip())
    if by_text:
        index = by_text[0]
    elif letter and LETTERS.index(letter.group(1)) < len(options):
        index = LETTERS.index(letter.group(1))
    else:
        lettered = "; ".join(f"{LETTERS[i]}. {o}" for i, o in enumerate(options))
        raise OptionError(f"answer {answer!r} matches no option text or letter (options: {lettered})")
    if flagged is not None and flagged != index:
        raise OptionError(
            f"answer {answer!r} is option {LETTERS[index]} but the options flag {LETTERS[flagged]} as correct"
        )
    return index


def parse_order(answer: str, num_events: int | None = None) -> list[str]:
    """``"C,A,B"`` (or ``C-A-B``, ``C → A → B``, ``CAB``) -> ``["C", "A", "B"]``, validated as a permutation."""
    text = str(answer).strip().upper()
    if re.fullmatch(r"[A-Z]{2,}", text):
        letters = list(text)
    else:
        letters = [part for part in _ORDER_SEPARATORS.split(text) if part]
    if not letters or not all(re.fullmatch(r"[A-Z]", letter) for letter in letters):
        raise OptionError(f"ordering answer {answer!r} is not a sequence of event letters like 'C,A,B'")
    expected = sorted(LETTERS[: num_events or len(letters)])
    if sorted(letters) != expected:
        raise OptionError(f"ordering answer {answer!r} is not a permutation of {','.join(expected)}")
    return letters


def lettered_events(question: str) -> list[str]:
    """Event letters written inline in a temporal-ordering question (``A: ... B: ... C: ...``), in order."""
    events: list[str] = []
    for letter in re.findall(r"(?:^|[\s(\[])([A-Z])\s*[:)]\s", question):
        if letter == LETTERS[len(events)]:
            events.append(letter)
    return events

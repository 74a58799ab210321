"""Argument types for every command's numeric options: a value out of range is refused by argparse, with the range.

``--jpeg-quality 500`` or ``--trials 0`` would otherwise be accepted, recorded in a manifest, and fail later (or
never). Each type names the range in its error: ``argument --jpeg-quality: 500 is not an integer from 1 to 100``.
Sizes are one syntax everywhere: :func:`byte_size` reads ``500MB``, ``2GB``, ``64KB`` or plain bytes. ``KEY=VALUE``
options are one syntax too (:func:`key_value`): split at the first ``=``, both sides stripped.
"""

import argparse
import math


def _number(text: str, kind: type, name: str):
    try:
        value = kind(text)
    except (TypeError, ValueError):
        raise argparse.ArgumentTypeError(f"{text!r} is not {name}") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def _describe(kind: str, low, high, low_open: bool = False) -> str:
    if low_open:
        return f"{kind} greater than {low}" + (f" and at most {high}" if high is not None else "")
    if high is None:
        return f"{kind} of at least {low}"
    if low is None:
        return f"{kind} of at most {high}"
    return f"{kind} from {low} to {high}"


def int_range(low: int | None = None, high: int | None = None):
    """An ``int`` argument type accepting ``low <= value <= high`` (either bound may be ``None``)."""
    expected = _describe("an integer", low, high)

    def parse(text: str) -> int:
        value = _number(text, int, "an integer")
        if (low is not None and value < low) or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"{value} is not {expected}")
        return value

    parse.__name__ = expected
    return parse


def float_range(low: float | None = None, high: float | None = None, *, low_open: bool = False):
    """A finite ``float`` argument type accepting ``low <= value <= high`` (``low < value`` with ``low_open``)."""
    expected = _describe("a number", low, high, low_open)

    def parse(text: str) -> float:
        value = _number(text, float, "a number")
        below = low is not None and (value < low or (low_open and value == low))
        if below or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"{text} is not {expected}")
        return value

    parse.__name__ = expected
    return parse


positive_int = int_range(1)
non_negative_int = int_range(0)
positive_float = float_range(0, low_open=True)
non_negative_float = float_range(0)
fraction = float_range(0.0, 1.0)
seed = int_range(0, 2**32 - 1)  # what numpy and torch accept as a seed

_UNITS = {"KB": 1024, "MB": 1024**2, "GB": 1024**3, "TB": 1024**4, "B": 1}


def byte_size(text: str) -> int:
    """``500MB``, ``2GB``, ``64KB`` (powers of 1024) or a plain number of bytes; at least one byte."""
    stripped = text.strip().upper().replace(" ", "")
    unit = next((unit for unit in _UNITS if stripped.endswith(unit)), "")
    number, factor = stripped[: len(stripped) - len(unit)], _UNITS.get(unit, 1)
    try:
        value = float(number)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size such as 500MB, 2GB or a number of bytes") from None
    if not math.isfinite(value) or value * factor < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive size")
    return int(value * factor)


def key_value(text: str, option: str, example: str, *, allow_empty: bool = False) -> tuple[str, str]:
    """``KEY=VALUE`` -> ``(key, value)``: split at the first ``=``, both sides stripped; a missing ``=`` or key (or
    value, unless ``allow_empty``) is an :class:`~builders.errors.InputError` naming the option and an example."""
    from builders.errors import InputError

    key, sep, value = text.partition("=")
    key, value = key.strip(), value.strip()
    if not sep or not key or (not value and not allow_empty):
        raise InputError(f"{option} {text!r}: write KEY=VALUE, e.g. {option} {example}")
    return key, value


def key_values(texts: list[str] | None, option: str, example: str, *, allow_empty: bool = False) -> dict[str, str]:
    """Several :func:`key_value` options as a dict; a key given twice is refused."""
    from builders.errors import InputError

    pairs: dict[str, str] = {}
    for text in texts or []:
        key, value = key_value(text, option, example, allow_empty=allow_empty)
        if key in pairs:
            raise InputError(f"{option}: {key} given twice ({pairs[key]!r} and {value!r}); give it once")
        pairs[key] = value
    return pairs

"""Parse Sureon clip ids and time strings.

A release ``clip_id`` reads ``<source_id>_<category>_<HH-MM-SS.ss>_<HH-MM-SS.ss>`` [inferred from the project site's
clip files], where ``source_id`` is an 11-character YouTube id (which may itself hold ``_`` and ``-``) or a 32-hex
hash, the category slug holds underscores, and times have 2-3 decimals with ``.`` or ``_`` as the decimal separator
(``00-11-14_767``). The times are anchored at the end and the id at the start, so the slug in between may be anything.
"""

import re
from dataclasses import dataclass

from builders.errors import InputError


_TIME = r"(\d{1,3})-(\d{2})-(\d{2})(?:[._](\d+))?"
_CLIP_TAIL = re.compile(rf"_(?P<category>.+)_(?P<start>{_TIME})_(?P<end>{_TIME})$")
# a 32-hex id names a source with no public URL: the user supplies its video, `sureon videos fetch` cannot
HASH_ID = re.compile(r"^[0-9a-fA-F]{32}$")
_YOUTUBE_ID = re.compile(r"^[A-Za-z0-9_-]{11}$")
_CLOCK = re.compile(r"^\s*(?:(\d+):)?(\d{1,2}):(\d{1,2}(?:\.\d+)?)\s*$")


class ClipIdError(InputError):
    pass


@dataclass(frozen=True)
class ClipRef:
    source_id: str
    category_slug: str
    start: float
    end: float


def _dashed_seconds(hours: str, minutes: str, seconds: str, fraction: str | None) -> float:
    value = int(hours) * 3600 + int(minutes) * 60 + int(seconds)
    return round(value + (float(f"0.{fraction}") if fraction else 0.0), 6)


def parse_clip_id(clip_id: str) -> ClipRef:
    """Split a clip id into source id, category slug and window (seconds); raise :class:`ClipIdError` if it fails."""
    if len(clip_id) > 33 and clip_id[32] == "_" and HASH_ID.match(clip_id[:32]):
        source_id, rest = clip_id[:32], clip_id[32:]
    elif len(clip_id) > 12 and clip_id[11] == "_" and _YOUTUBE_ID.match(clip_id[:11]):
        source_id, rest = clip_id[:11], clip_id[11:]
    else:
        raise ClipIdError(
            f"clip_id {clip_id!r} does not start with an 11-character YouTube id or a 32-hex hash followed by '_'"
        )
    match = _CLIP_TAIL.match(rest)
    if match is None:
        raise ClipIdError(
            f"clip_id {clip_id!r} does not end in '_<category>_<HH-MM-SS.ss>_<HH-MM-SS.ss>' "
            "(decimal separator '.' or '_')"
        )
    groups = match.groups()
    start = _dashed_seconds(*groups[2:6])
    end = _dashed_seconds(*groups[7:11])
    if end < start:
        raise ClipIdError(f"clip_id {clip_id!r} ends ({end}s) before it starts ({start}s)")
    return ClipRef(source_id=source_id, category_slug=match["category"], start=start, end=end)


def parse_seconds(value) -> float:
    """Read a time given as seconds (number or numeric string), ``[h:]mm:ss[.fff]`` or ``HH-MM-SS[._]ff``."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    text = str(value).strip()
    try:
        return float(text)
    except ValueError:
        pass
    clock = _CLOCK.match(text)
    if clock:
        hours, minutes, seconds = clock.groups()
        return round(int(hours or 0) * 3600 + int(minutes) * 60 + float(seconds), 6)
    dashed = re.fullmatch(_TIME, text)
    if dashed:
        return _dashed_seconds(*dashed.groups())
    raise InputError(f"not a time: {value!r} (expected seconds, [h:]mm:ss[.fff] or HH-MM-SS.ff)")


def format_clock(seconds: float) -> str:
    """``754.25`` -> ``00:12:34.25``: the form used in prompts and cards."""
    hundredths = round(seconds * 100)
    whole, frac = divmod(hundredths, 100)
    hours, rem = divmod(whole, 3600)
    minutes, secs = divmod(rem, 60)
    return f"{hours:02d}:{minutes:02d}:{secs:02d}.{frac:02d}"


def clip_id_time(seconds: float, separator: str = ".") -> str:
    """``754.25`` -> ``00-12-34.25``: a time as the release writes it inside a ``clip_id`` (``_`` as the decimal
    separator is the other spelling seen); :func:`parse_clip_id` reads both back."""
    hundredths = round(seconds * 100)
    whole, frac = divmod(hundredths, 100)
    return f"{whole // 3600:02d}-{whole % 3600 // 60:02d}-{whole % 60:02d}{separator}{frac:02d}"


def transcript_line(start: float, end: float, text: str) -> str:
    """One ASR line as the release's ``transcript`` holds them: ``[h:mm:ss → h:mm:ss] text``."""

    def hms(t: float) -> str:
        return f"{int(t) // 3600}:{int(t) % 3600 // 60:02d}:{int(t) % 60:02d}"

    return f"[{hms(start)} → {hms(end)}] {text}"

"""Timestamped transcripts of narrated videos, read from JSON / JSONL, SRT / WebVTT or the SurgLaVi SQLite database.

A transcript is a list of ``(sentence, start, end)`` lines plus the video's metadata (specialty, subject, procedure
type, title). Accepted layouts:

- **JSON / JSONL**: one video object per line (JSONL) or a list of them / one object (JSON), with ``source_id`` (or
  ``video_id`` / ``id``), metadata fields, and ``segments`` (or ``sentences`` / ``transcript``) as a list of
  ``{"text", "start", "end"}`` (``sentence`` for ``text`` is accepted).
- **SRT / WebVTT**: cues are the lines; the file stem is the ``source_id``; metadata comes from a separate
  ``--metadata`` file (JSON / JSONL / CSV keyed by ``source_id``).
- **SurgLaVi SQLite** (``surglavi_beta.db``): tables ``videos`` and ``transcriptions`` (as the public
  ``cc_explore_utils.py`` loads them). The column names inside ``transcriptions`` are not published [uncertain], so
  they are detected among the usual spellings and the error lists what was found when none matches.

Every problem is reported with the file and the row; nothing is dropped silently.
"""

import csv
import io
import json
import math
import re
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from builders.errors import InputError


ID_KEYS = ("source_id", "video_id", "id", "youtube_id")
SEGMENT_KEYS = ("segments", "sentences", "transcript", "transcription", "lines")
TEXT_KEYS = ("text", "sentence", "segment_text", "caption", "transcription")
START_KEYS = ("start", "start_time", "start_sec", "begin")
END_KEYS = ("end", "end_time", "end_sec", "stop")
METADATA_KEYS = {
    "specialty": ("specialty", "speciality", "surgical_specialty"),
    "subject": ("subject", "anatomy", "organ"),
    "procedure": ("procedure", "procedure_type", "procedure_name"),
    "title": ("title", "video_title", "name"),
}
_CUE_TIME = re.compile(r"(?:(\d+):)?(\d{1,2}):(\d{2})[.,](\d{1,3})")
_TAGS = re.compile(r"<[^>]+>")


class TranscriptError(InputError):
    """A transcript that cannot be read; the message names the file, the row and the fix."""


@dataclass(frozen=True)
class Line:
    text: str
    start: float
    end: float


@dataclass
class Transcript:
    source_id: str
    lines: list[Line]
    specialty: str = ""
    subject: str = ""
    procedure: str = ""
    title: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def duration(self) -> float:
        return max((line.end for line in self.lines), default=0.0)

    def window(self, start: float, end: float) -> list[Line]:
        """Lines overlapping ``[start, end]``."""
        return [line for line in self.lines if line.end > start and line.start < end]


def clock(seconds: float) -> str:
    whole = int(seconds)
    return f"{whole // 3600}:{whole % 3600 // 60:02d}:{whole % 60:02d}"


def format_lines(lines: list[Line]) -> str:
    """The release's transcript text: one ``[h:mm:ss → h:mm:ss] sentence`` per line."""
    return "\n".join(f"[{clock(line.start)} → {clock(line.end)}] {line.text}" for line in lines)


def _pick(row: dict, keys) -> object:
    for key in keys:
        if key in row and row[key] not in (None, ""):
            return row[key]
    return None


def _line(row: dict, where: str) -> Line:
    text, start, end = _pick(row, TEXT_KEYS), _pick(row, START_KEYS), _pick(row, END_KEYS)
    if text is None or start is None or end is None:
        raise TranscriptError(
            f"{where}: a line needs text, start and end (looked for {TEXT_KEYS} / {START_KEYS} / {END_KEYS}); "
            f"found keys {sorted(row)}"
        )
    try:
        start, end = float(start), float(end)
    except (TypeError, ValueError):
        raise TranscriptError(f"{where}: start {start!r} / end {end!r} are not seconds") from None
    if not (math.isfinite(start) and math.isfinite(end) and start >= 0):
        raise TranscriptError(f"{where}: start {start} / end {end} are not finite, non-negative seconds")
    if end < start:
        raise TranscriptError(f"{where}: line ends ({end}s) before it starts ({start}s)")
    return Line(str(text).strip(), start, end)


def _metadata(row: dict) -> dict:
    return {name: str(_pick(row, keys) or "") for name, keys in METADATA_KEYS.items()}


def _video(obj: dict, where: str) -> Transcript:
    if not isinstance(obj, dict):
        raise TranscriptError(f"{where}: a transcript is a JSON object with a video id and its lines, got {obj!r:.60}")
    source_id = _pick(obj, ID_KEYS)
    if source_id is None:
        raise TranscriptError(f"{where}: no video id (looked for {ID_KEYS}); found keys {sorted(obj)}")
    segments = _pick(obj, SEGMENT_KEYS)
    if not isinstance(segments, list):
        raise TranscriptError(f"{where}: video {source_id!r} has no list of lines under any of {SEGMENT_KEYS}")
    if not all(isinstance(segment, dict) for segment in segments):
        raise TranscriptError(f"{where}: video {source_id!r}: each line is a JSON object with text, start and end")
    lines = [_line(seg, f"{where} line {i}") for i, seg in enumerate(segments)]
    consumed = {*ID_KEYS, *SEGMENT_KEYS, *(k for keys in METADATA_KEYS.values() for k in keys)}
    extra = {k: v for k, v in obj.items() if k not in consumed}
    return Transcript(str(source_id), sorted(lines, key=lambda x: (x.start, x.end)), **_metadata(obj), extra=extra)


def _read_text(path: Path) -> str:
    """A transcript file's text; one that is not UTF-8 is an error naming its line."""
    data = path.read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        raise TranscriptError(
            f"{path}: line {line} is not UTF-8 (byte {data[err.start]:#04x}); save it as UTF-8"
        ) from None


def read_json(path: Path) -> list[Transcript]:
    text = _read_text(path)
    if path.suffix == ".jsonl":
        objects = []
        for number, line in enumerate(text.splitlines()):
            if line.strip():
                try:
                    objects.append((json.loads(line), f"{path} row {number}"))
                except json.JSONDecodeError as err:
                    raise TranscriptError(f"{path} row {number}: not valid JSON ({err})") from None
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise TranscriptError(f"{path}: not valid JSON (line {err.lineno}: {err.msg})") from None
        data = data if isinstance(data, list) else [data]
        objects = [(obj, f"{path} item {i}") for i, obj in enumerate(data)]
    return [_video(obj, where) for obj, where in objects]


def _cue_seconds(match: re.Match) -> float:
    hours, minutes, seconds, millis = match.groups()
    return int(hours or 0) * 3600 + int(minutes) * 60 + int(seconds) + int(millis.ljust(3, "0")) / 1000


def read_subtitles(path: Path, metadata: dict[str, dict] | None = None) -> Transcript:
    """An SRT or WebVTT file: each cue is a line (tags stripped, multi-line cue text joined)."""
    lines: list[Line] = []
    blocks = re.split(r"\n\s*\n", _read_text(path).replace("\r\n", "\n"))
    for number, block in enumerate(blocks):
        rows = [r for r in block.strip().split("\n") if r.strip()]
        timing = next((i for i, r in enumerate(rows) if "-->" in r), None)
        if timing is None:
            if rows and not rows[0].startswith(("WEBVTT", "NOTE", "STYLE", "REGION")) and not rows[0].isdigit():
                raise TranscriptError(f"{path} block {number}: no 'start --> end' timing line in {rows[0][:60]!r}")
            continue
        times = list(_CUE_TIME.finditer(rows[timing]))
        if len(times) < 2:
            raise TranscriptError(f"{path} block {number}: cannot read the timing {rows[timing]!r}")
        text = " ".join(_TAGS.sub("", r).strip() for r in rows[timing + 1 :]).strip()
        if text:
            lines.append(Line(text, _cue_seconds(times[0]), _cue_seconds(times[1])))
    meta = (metadata or {}).get(path.stem, {})
    return Transcript(path.stem, lines, **_metadata(meta))


def read_metadata(path: Path) -> dict[str, dict]:
    """Video metadata keyed by source id, from JSON (list or mapping), JSONL or CSV."""
    if not path.is_file():
        raise TranscriptError(f"--metadata {path}: no such file")
    text = _read_text(path)
    try:
        if path.suffix == ".csv":
            rows = list(csv.DictReader(io.StringIO(text, newline="")))
        elif path.suffix == ".jsonl":
            rows = [json.loads(line) for line in text.splitlines() if line.strip()]
        else:
            data = json.loads(text)
            rows = [{"source_id": k, **v} for k, v in data.items()] if isinstance(data, dict) else data
    except json.JSONDecodeError as err:
        raise TranscriptError(f"--metadata {path}: not valid JSON ({err})") from None
    by_id = {}
    for number, row in enumerate(rows):
        source_id = _pick(row, ID_KEYS)
        if source_id is None:
            raise TranscriptError(f"{path} row {number}: no video id (looked for {ID_KEYS})")
        by_id[str(source_id)] = row
    return by_id


def _columns(db: sqlite3.Connection, table: str, path: Path) -> list[str]:
    columns = [row[1] for row in db.execute(f"PRAGMA table_info({table})")]
    if not columns:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        raise TranscriptError(f"{path}: no table {table!r} (tables: {tables}); is this surglavi_beta.db?")
    return columns


def read_surglavi(path: Path) -> list[Transcript]:
    """Transcripts of the SurgLaVi SQLite database: one row per line, or one row per video holding a JSON list."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    db.row_factory = sqlite3.Row
    try:
        video_columns = _columns(db, "videos", path)
        columns = _columns(db, "transcriptions", path)
        id_column = next((c for c in ID_KEYS if c in columns), None)
        if id_column is None:
            raise TranscriptError(f"{path}: table transcriptions has no video id column {ID_KEYS}; found {columns}")
        videos = {}
        if id_column in video_columns:
            videos = {str(r[id_column]): dict(r) for r in db.execute(f"SELECT * FROM videos ORDER BY {id_column}")}
        lines: dict[str, list[Line]] = {}
        rows = db.execute(f"SELECT * FROM transcriptions ORDER BY {id_column}, rowid")
        for number, row in enumerate(rows):
            row = dict(row)
            source_id, where = str(row[id_column]), f"{path} table transcriptions row {number}"
            segments = _pick(row, SEGMENT_KEYS)
            if _pick(row, START_KEYS) is None and isinstance(segments, str) and segments.lstrip().startswith("["):
                parsed = json.loads(segments)
                lines.setdefault(source_id, []).extend(_line(s, f"{where} line {i}") for i, s in enumerate(parsed))
            else:
                lines.setdefault(source_id, []).append(_line(row, where))
    finally:
        db.close()
    return [
        Transcript(source_id, sorted(found, key=lambda x: (x.start, x.end)), **_metadata(videos.get(source_id, {})))
        for source_id, found in sorted(lines.items())
    ]


def read_transcripts(paths: list[Path], metadata: Path | None = None) -> list[Transcript]:
    """Every transcript in ``paths`` (files or folders), sorted by source id; a repeated source id is an error."""
    meta = read_metadata(metadata) if metadata else {}
    files = []
    for path in map(Path, paths):
        if not path.exists():
            raise TranscriptError(f"--transcripts {path}: no such file or folder")
        files.extend(sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path])
    transcripts: list[Transcript] = []
    for path in files:
        suffix = path.suffix.lower()
        if suffix in (".json", ".jsonl"):
            found = read_json(path)
        elif suffix in (".srt", ".vtt"):
            found = [read_subtitles(path, meta)]
        elif suffix in (".db", ".sqlite", ".sqlite3"):
            found = read_surglavi(path)
        else:
            raise TranscriptError(f"{path}: unknown transcript format {suffix!r} (json, jsonl, srt, vtt, db)")
        if not found:
            raise TranscriptError(f"{path}: holds no transcript (an empty file?)")
        for transcript in found:
            for name, value in _metadata(meta.get(transcript.source_id, {})).items():
                if value and not getattr(transcript, name):
                    setattr(transcript, name, value)
        transcripts.extend(found)
    seen: dict[str, int] = {}
    for transcript in transcripts:
        seen[transcript.source_id] = seen.get(transcript.source_id, 0) + 1
    repeated = sorted(s for s, n in seen.items() if n > 1)
    if repeated:
        raise TranscriptError(f"source ids given more than once: {repeated[:10]} (one transcript per video)")
    return sorted(transcripts, key=lambda t: t.source_id)

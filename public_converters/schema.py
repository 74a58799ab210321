"""The common relational schema every public source is read into (the Sureon paper's Appendix C.1).

A reader turns one source's native files into a ``SourceTables``: five tables with the source's own label
spellings, plus references to the semantic masks it ships. Everything after that is shared and written once:
the canonical vocabulary (``vocabulary.py``), seg-to-box (``seg_to_box.py``), templating and clip sampling.

Time is counted in frames of the video's own frame rate (``Video.fps``): a frame index is the 0-based frame number in
the original video, so labels given at different rates (Cholec80: phases at 25 fps, tools at 1 fps) join exactly.
Image-only sources without a video use a running index per video and ``fps=None``. Segment ends are inclusive.

Boxes are ``[x1, y1, x2, y2]`` normalised to [0, 1000] (C.2); masks are COCO RLE (pycocotools) with ``counts`` as a
string. In ``Frame``, ``None`` means "not annotated at this frame" and an empty list "annotated, none present".
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from builders.errors import InputError


CAPABILITIES = (
    "has_phase",
    "has_step",
    "has_actions",
    "has_tool_presence",
    "has_anatomy_presence",
    "has_tool_bbox",
    "has_anatomy_bbox",
    "has_masks",
    "has_triplets",
    "has_cvs",
)
BRANCHES = ("image", "clip")
# Label kinds of the canonical vocabulary; instances and presence lists are "tool" or "anatomy".
LABEL_KINDS = ("phase", "step", "action", "tool", "anatomy", "verb", "target")
SEGMENT_KINDS = ("phase", "step", "action", "tool")
SEG_POLICIES = ("single", "components", "semantic", "instances")
CVS_CRITERIA = ("two structures", "hepatocystic triangle cleared", "cystic plate")


class SourceError(InputError):
    """Bad native input: names the file (and row) and says what to fix."""

    def __init__(self, path: str | Path, message: str, *, row: int | str | None = None, fix: str | None = None):
        where = f"{path}" + (f", row {row}" if row is not None else "")
        super().__init__(f"{where}: {message}" + (f" ({fix})" if fix else ""))
        self.path = str(path)
        self.row = row


@dataclass(frozen=True)
class Video:
    video_id: str
    split: str
    fps: float | None = None
    total_frames: int | None = None
    width: int | None = None
    height: int | None = None
    video_path: str | None = None  # relative to the source root; clip sources decode their frames from it


@dataclass(frozen=True)
class Frame:
    video_id: str
    frame_index: int
    image_path: str | None = None  # relative to the source root
    phase: str | None = None
    step: str | None = None
    actions: list[str] | None = None
    tools: list[str] | None = None
    anatomy: list[str] | None = None
    cvs: list[float] | None = None  # the three CVS criteria (C1, C2, C3), each in [0, 1]


@dataclass(frozen=True)
class Instance:
    video_id: str
    frame_index: int
    kind: str  # "tool" or "anatomy"
    label: str
    box: list[float] | None = None  # [x1, y1, x2, y2] in [0, 1000]; None = presence only (strict-semantic)
    mask: dict | None = None  # COCO RLE {"size": [h, w], "counts": str}
    instance_id: int = 0
    actions: list[str] | None = None  # what this tool is doing, where the source says so (GraSP: one or more)


@dataclass(frozen=True)
class Segment:
    video_id: str
    kind: str  # one of SEGMENT_KINDS
    label: str
    start_frame: int
    end_frame: int  # inclusive
    # frames one label sample covers: 1 for per-frame labels, 25 for 1-fps labels of a 25-fps video. The last sample
    # of a run covers ``period`` frames, which can run past the video's end (a 1,010-frame video with 1-fps labels):
    # the media check clips such an end at the video's last frame and refuses an end further out
    period: int = 1


@dataclass(frozen=True)
class Relation:
    video_id: str
    frame_index: int
    instrument: str
    verb: str
    target: str


@dataclass(frozen=True)
class SemanticMask:
    """A class mask file a reader found; seg-to-box decodes it. ``palette`` maps a grey level (int) or an RGB tuple
    to the source's label, or to None for background / unlabelled values. A pixel value absent from the palette is
    an error, never silently background. An exhaustive mask also sets its frame's presence for the kinds its palette
    names."""

    video_id: str
    frame_index: int
    path: str  # relative to the source root
    palette: dict
    size: tuple[int, int] | None = None  # expected (height, width), when the source states it
    # True when the mask labels every class of its palette that is visible (class masks); False for a mask of one
    # structure among others that may be visible unlabelled (DSAD's per-structure folders, HemoSet's blood masks)
    exhaustive: bool = True


@dataclass(frozen=True)
class Coverage:
    """How much of its video a time-complete annotation file labels: ``frames`` frames from frame 0 (the last
    sample's ``period`` included), read from ``path`` (relative to the source root). The media check compares it with
    the video's frame count from its header: an annotation that ends a period or more before its video (a file cut
    short, a copy that labels only part of the video) is a named, counted warning of the build, not a silent loss."""

    frames: int
    path: str
    what: str = "labels"  # what the file labels, for the warning ("phase labels", "action labels")
    period: int = 1  # frames one row covers: a shortfall below one period is sampling, not a missing row


@dataclass
class SourceTables:
    videos: list[Video] = field(default_factory=list)
    frames: list[Frame] = field(default_factory=list)
    instances: list[Instance] = field(default_factory=list)
    segments: list[Segment] = field(default_factory=list)
    relations: list[Relation] = field(default_factory=list)
    masks: list[SemanticMask] = field(default_factory=list)
    # what the reader counted beyond the tables, e.g. annotation rows read and not kept (by reason) or the file variant
    # it met; the build manifest reports it per source as ``read_counts``, so no row is dropped silently
    read_counts: dict[str, int] = field(default_factory=dict)
    # video -> how far its time-complete annotation reaches, for sources that label every frame (or every sample)
    # of a video they ship; not a table: the media check reads it against the video's header
    coverage: dict[str, Coverage] = field(default_factory=dict)
    # video -> why a reader that reads a video's header while reading (its frame rate times the labels) could not:
    # the media check lists it with every other media problem of the source, so one run names them all
    unreadable: dict[str, str] = field(default_factory=dict)


TABLES = {"videos": Video, "frames": Frame, "instances": Instance, "segments": Segment, "relations": Relation}

_ARROW_TYPES = {
    "video_id": pa.string(),
    "split": pa.string(),
    "fps": pa.float64(),
    "total_frames": pa.int64(),
    "width": pa.int32(),
    "height": pa.int32(),
    "video_path": pa.string(),
    "frame_index": pa.int64(),
    "image_path": pa.string(),
    "phase": pa.string(),
    "step": pa.string(),
    "actions": pa.list_(pa.string()),
    "tools": pa.list_(pa.string()),
    "anatomy": pa.list_(pa.string()),
    "cvs": pa.list_(pa.float64()),
    "kind": pa.string(),
    "label": pa.string(),
    "box": pa.list_(pa.float64()),
    "mask": pa.struct([("size", pa.list_(pa.int32())), ("counts", pa.string())]),
    "instance_id": pa.int32(),
    "start_frame": pa.int64(),
    "end_frame": pa.int64(),
    "period": pa.int32(),
    "instrument": pa.string(),
    "verb": pa.string(),
    "target": pa.string(),
}


def arrow_schema(row_type) -> pa.Schema:
    return pa.schema([(f.name, _ARROW_TYPES[f.name]) for f in fields(row_type)])


def to_arrow(rows: list, row_type) -> pa.Table:
    schema = arrow_schema(row_type)
    return pa.Table.from_pylist([asdict(row) for row in rows], schema=schema)


def from_arrow(table: pa.Table, row_type) -> list:
    return [row_type(**row) for row in table.to_pylist()]


def write_tables(tables: SourceTables, info: dict, out: Path) -> None:
    """The normalised layer of one source: a parquet file per table plus ``source.json``."""
    out.mkdir(parents=True, exist_ok=True)
    for name, row_type in TABLES.items():
        pq.write_table(to_arrow(getattr(tables, name), row_type), out / f"{name}.parquet")
    (out / "source.json").write_text(json.dumps(info, indent=2, sort_keys=True) + "\n")


def read_tables(folder: Path) -> tuple[SourceTables, dict]:
    tables = SourceTables(
        **{name: from_arrow(pq.read_table(folder / f"{name}.parquet"), row_type) for name, row_type in TABLES.items()}
    )
    return tables, json.loads((folder / "source.json").read_text())


def sort_tables(tables: SourceTables) -> SourceTables:
    """A canonical order so two reads of the same files give byte-identical parquet."""
    return SourceTables(
        videos=sorted(tables.videos, key=lambda v: v.video_id),
        frames=sorted(tables.frames, key=lambda f: (f.video_id, f.frame_index)),
        instances=sorted(tables.instances, key=lambda i: (i.video_id, i.frame_index, i.kind, i.label, i.instance_id)),
        segments=sorted(tables.segments, key=lambda s: (s.video_id, s.kind, s.start_frame, s.label)),
        relations=sorted(tables.relations, key=lambda r: (r.video_id, r.frame_index, r.instrument, r.verb, r.target)),
        masks=sorted(tables.masks, key=lambda m: (m.video_id, m.frame_index, m.path)),
        read_counts=dict(sorted(tables.read_counts.items())),
        coverage=dict(sorted(tables.coverage.items())),
        unreadable=dict(sorted(tables.unreadable.items())),
    )


def check_tables(tables: SourceTables, source: str) -> None:
    """Structural checks every reader's output must pass: known videos, kinds, boxes in range, ordered segments."""
    videos = {v.video_id for v in tables.videos}
    problems = []
    for name in ("frames", "instances", "segments", "relations", "masks"):
        unknown = sorted({row.video_id for row in getattr(tables, name)} - videos)
        if unknown:
            problems.append(f"{name} name videos missing from the videos table: {unknown[:5]}")
    duplicates = len(tables.frames) - len({(f.video_id, f.frame_index) for f in tables.frames})
    if duplicates:
        problems.append(f"{duplicates} duplicate (video, frame) rows in frames")
    for instance in tables.instances:
        if instance.kind not in ("tool", "anatomy"):
            problems.append(f"instance kind {instance.kind!r} is not tool/anatomy")
        if instance.box is not None and (
            len(instance.box) != 4
            or not all(0 <= value <= 1000 for value in instance.box)
            or instance.box[0] > instance.box[2]
            or instance.box[1] > instance.box[3]
        ):
            problems.append(f"box {instance.box} of {instance.label} in {instance.video_id}:{instance.frame_index}")
    for segment in tables.segments:
        if segment.kind not in SEGMENT_KINDS or segment.start_frame > segment.end_frame or segment.period < 1:
            problems.append(f"segment {segment}")
    if problems:
        raise InputError(f"{source}: the reader's tables are inconsistent: " + "; ".join(problems[:10]))


def read_text(path: str | Path, fix: str = "re-download or re-extract this file") -> str:
    """A text annotation file, UTF-8 (a byte-order mark is dropped). A missing file, a folder in its place or bytes
    that are not UTF-8 are an error naming the file (and, for bad bytes, the line), never a bare decode error."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError as error:
        raise SourceError(path, "file not found", fix=fix) from error
    except IsADirectoryError as error:
        raise SourceError(path, "is a folder, expected a text file", fix=fix) from error
    except OSError as error:
        raise SourceError(path, f"cannot read the file ({error.strerror or error})", fix=fix) from error
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise SourceError(
            path,
            f"not UTF-8 text (byte 0x{data[error.start]:02x} at offset {error.start})",
            row=line,
            fix="save the file as UTF-8, or re-download it if it should be plain ASCII",
        ) from error


def finite_number(value, path: str | Path, row, what: str, minimum: float | None = None) -> float:
    """``value`` as a finite float (at least ``minimum``); NaN, infinity, a negative size or a non-number is an error
    naming the file and row rather than a box that silently turns into nonsense."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise SourceError(path, f"{what} {value!r} is not a number", row=row)
    try:
        number = float(value)
    except ValueError:
        raise SourceError(path, f"{what} {value!r} is not a number", row=row) from None
    if not math.isfinite(number):
        raise SourceError(path, f"{what} is {value!r}, expected a finite number", row=row, fix="fix or drop the row")
    if minimum is not None and number < minimum:
        raise SourceError(path, f"{what} is {value!r}, expected at least {minimum:g}", row=row, fix="fix the row")
    return number


def normalise_box(x1: float, y1: float, x2: float, y2: float, width: float, height: float) -> list[float]:
    """Pixel corners -> [x1, y1, x2, y2] in [0, 1000], clipped to the image and rounded to 0.1."""

    def scale(value: float, size: float) -> float:
        return round(min(max(value / size, 0.0), 1.0) * 1000, 1)

    return [scale(x1, width), scale(y1, height), scale(x2, width), scale(y2, height)]


def segments_from_labels(video_id: str, kind: str, labelled: list[tuple[int, str | None]], step: int = 1) -> list:
    """Run-length encode per-frame labels (sorted ``(frame, label)`` pairs, one every ``step`` frames) into segments.

    A run ends at its last labelled frame plus ``step - 1`` (a 1-fps label covers its whole second) unless the next
    label starts earlier; a gap longer than ``step`` or a ``None`` label closes the run. Segments carry ``step`` as
    their ``period``, so the media check can clip a last second that runs past the video's end."""
    segments: list[Segment] = []
    run_label, run_start, last = None, None, None
    for frame, label in labelled:
        if run_label is not None and (label != run_label or frame - last > step):
            segments.append(Segment(video_id, kind, run_label, run_start, min(last + step - 1, frame - 1), step))
            run_label = None
        if label is not None and run_label is None:
            run_label, run_start = label, frame
        last = frame
    if run_label is not None:
        segments.append(Segment(video_id, kind, run_label, run_start, last + step - 1, step))
    return segments


def frames_from_segments(video_id: str, segments: list[Segment], frame_indices) -> list[Frame]:
    """Frames labelled from a video's segments, for sources whose image branch samples frames of a video (the frames
    are decoded from ``Video.video_path`` when the corpus is built). A kind the video has segments of is annotated at
    every frame (an empty list where nothing of it is active); a kind it has none of stays None."""
    own = [s for s in segments if s.video_id == video_id]
    kinds = {s.kind for s in own}

    def active(kind: str, frame: int) -> list[str]:
        return sorted({s.label for s in own if s.kind == kind and s.start_frame <= frame <= s.end_frame})

    frames = []
    for frame in frame_indices:
        phase, step = active("phase", frame), active("step", frame)
        frames.append(
            Frame(
                video_id,
                frame,
                phase=phase[0] if len(phase) == 1 else None,
                step=step[0] if len(step) == 1 else None,
                actions=active("action", frame) if "action" in kinds else None,
                tools=active("tool", frame) if "tool" in kinds else None,
            )
        )
    return frames

"""Cholec80 (Twinanda et al. 2016): 80 cholecystectomy videos with phases at 25 fps and tool presence at 1 fps.

Layout read (``docs/sources/cholec80.md``)::

    videos/video01.mp4 ...                 25 fps
    phase_annotations/video01-phase.txt    the phase of each frame
    tool_annotations/video01-tool.txt      header "Frame<sep>Grasper<sep>...<sep>SpecimenBag", one row per second

Three variants of the annotation files, told apart by the phase file's first line (each video's files on their own):

- the release's: tab-separated, header "Frame\tPhase", one row per 25-fps frame, CamelCase phase names;
- the copy in the sample assets of the EndovisML visualiser (github.com/Cardio-AI/endovis-ml ``src/assets/``, 60
  videos): comma-separated, header "Frame,Phase", one row per 25 frames (0, 25, 50, ...), phase ids 0-6 in the order
  of ``PHASES`` (its ``param.json`` lists the same order), tool files "Frame,Grasper,..." at 1 fps. A phase row
  covers its 25 frames (``Segment.period``);
- the phase files phase-recognition repositories ship for the test videos (YuemingJin/TMRNet
  ``code/eval/matlab-phase/gt-phase/video41-phase.txt`` ... ``video80-phase.txt``, commit ab1b51ca; read from the
  files): no header, the first line already a row of two tab-separated integers, ``frame<TAB>phase_id`` on frames 0,
  25, 50, ..., ids 0-6 (video41: 1 from frame 7975, 2 from 39150, 3 from 43450, last row ``77575<TAB>6``). The ids
  are in ``PHASES`` order: inferred from the same lineage's code (Trans-SVNet's ``phase_dict_key`` lists the phases
  in that order), not stated beside the files. TMRNet ships no tool files: the tool files are the release's
  (tab-separated, with their header), and a missing one is an error naming it, as in every variant. A row of
  another shape in such a file (a header, a phase name, a comma), an id that is not an integer 0-6, or a frame off
  the 25-frame grid is an error naming the file and row.

Confirmed (third-party loaders and the TF-Cholec80 readme): the file names, the phase strings, the tool columns and
their order, 0-based frame indices, tools sampled on multiples of 25. Inferred: nothing else is needed; the
``videoXX-timestamp.txt`` files are not read (format unverified). Tool rows past the last phase frame have no phase
to join: one sample at the end of some release videos, and in the EndovisML copy 933 rows in 59 of its 60 videos
(2-39 samples in 57). They are clipped and counted in the manifest's ``read_counts``, as is a tool row repeated with
the same values (the copy's video12 repeats two); a repeat with other values is an error. A tool sample covers its
second (25 frames): the last one of a video whose length is not a whole number of seconds ends past the last frame,
and the media check clips it there. A phase file that ends before its video does (a file cut at a line boundary:
300 rows for a 1,010-frame video) leaves the rest of the video unlabelled: the clips cover only the labelled part,
and the build names the file in a counted warning (``Coverage``; ``docs/sources/README.md``).

Splits: there is no split file. The default is EndoNet's (videos 1-40 train, 41-80 test); ``32-8-40`` keeps the last
8 training videos for validation, as many works do.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from public_converters.schema import (
    Coverage,
    Frame,
    SourceError,
    SourceTables,
    Video,
    read_text,
    segments_from_labels,
)
from public_converters.spec import SourceSpec


FPS = 25
TOOL_COLUMNS = ("Grasper", "Bipolar", "Hook", "Scissors", "Clipper", "Irrigator", "SpecimenBag")
PHASES = {
    "Preparation": "preparation",
    "CalotTriangleDissection": "calot triangle dissection",
    "ClippingCutting": "clipping and cutting",
    "GallbladderDissection": "gallbladder dissection",
    "GallbladderPackaging": "gallbladder packaging",
    "CleaningCoagulation": "cleaning and coagulation",
    "GallbladderRetraction": "gallbladder retraction",
}
TOOLS = {
    "Grasper": "grasper",
    "Bipolar": "bipolar forceps",
    "Hook": "electrocautery hook",
    "Scissors": "scissors",
    "Clipper": "clip applier",
    "Irrigator": "irrigator",
    "SpecimenBag": "specimen bag",
}
VIDEO_NAME = re.compile(r"^video(\d{2})\.mp4$")
PHASE_NAME = re.compile(r"^video(\d{2})-phase\.txt$")
TOOL_NAME = re.compile(r"^video(\d{2})-tool\.txt$")


def _split(number: int, validation: int) -> str:
    if number > 40:
        return "test"
    return "validation" if number > 40 - validation else "train"


SPLITS = {
    "endonet": {f"video{n:02d}": _split(n, 0) for n in range(1, 81)},
    "32-8-40": {f"video{n:02d}": _split(n, 8) for n in range(1, 81)},
}


@dataclass(frozen=True)
class Variant:
    """How one copy of the annotation files is written."""

    name: str  # as counted in the manifest
    separator: str
    phase_step: int  # frames between two phase rows
    phase_ids: bool  # phases as 0-based ids in PHASES order rather than by name
    phase_header: bool = True  # the phase file starts with a "Frame<sep>Phase" header (tool files always do)


SEPARATOR_NAMES = {"\t": "tab", ",": "comma"}
VARIANTS = {
    "Frame\tPhase": Variant("release (tab-separated, phase names per frame)", "\t", 1, False),
    "Frame,Phase": Variant("EndovisML copy (comma-separated, phase ids per second)", ",", FPS, True),
}
# told apart by its first line's shape, as it has no header: a row of two tab-separated integers
HEADERLESS = Variant("TMRNet-style (headerless, tab-separated, phase ids per second)", "\t", FPS, True, False)
HEADERLESS_FIRST_ROW = re.compile(r"[0-9]+\t[0-9]+")
PHASE_COLUMNS = ("Frame", "Phase")


def _lines(path: Path) -> list[str]:
    return read_text(path, fix="every video needs its phase and tool annotation files").splitlines()


def _variant(path: Path) -> Variant:
    lines = _lines(path)
    found = lines[0].strip() if lines else ""
    if found in VARIANTS:
        return VARIANTS[found]
    if HEADERLESS_FIRST_ROW.fullmatch(found):
        return HEADERLESS
    accepted = " or ".join(repr(h) for h in VARIANTS)
    raise SourceError(
        path,
        f"header is {found!r}, expected {accepted}, or no header and rows 'frame\\tphase id' (TMRNet's shape)",
        row=1,
    )


def _rows(path: Path, columns: tuple[str, ...], separator: str, header: bool = True) -> list[tuple[int, list[str]]]:
    """(line number, cells) of a ``separator``-separated file of ``columns``, whose first line, with ``header``, must
    name them."""
    lines = _lines(path)
    if header:
        found = tuple(lines[0].strip().split(separator)) if lines else ()
        if found != columns:
            raise SourceError(
                path, f"header is {separator.join(found)!r}, expected {separator.join(columns)!r}", row=1
            )
    first = 2 if header else 1
    rows = []
    for number, line in enumerate(lines[first - 1 :], start=first):
        if not line.strip():
            continue
        cells = line.strip().split(separator)
        if len(cells) != len(columns):
            raise SourceError(
                path,
                f"malformed row {line!r}",
                row=number,
                fix=f"expected {len(columns)} {SEPARATOR_NAMES[separator]}-separated cells",
            )
        if not cells[0].isdecimal():
            raise SourceError(
                path, f"frame {cells[0]!r} is not a frame number", row=number, fix="a frame is a whole number from 0"
            )
        rows.append((number, cells))
    return rows


def _phase(variant: Variant, cell: str, path: Path, number: int, labels) -> str:
    if not variant.phase_ids:
        return labels.map("phase", cell, path, number)
    names = list(PHASES)
    if not cell.isdecimal() or int(cell) >= len(names):
        raise SourceError(
            path,
            f"phase id {cell!r} is not 0-{len(names) - 1}",
            row=number,
            fix=f"the file is read as the {variant.name} variant, from its first line: the ids are 0 = {names[0]} "
            f"... {len(names) - 1} = {names[-1]}, in PHASES order",
        )
    return labels.map("phase", names[int(cell)], path, number)


def read_video(root: Path, video_id: str, labels) -> tuple[list[Frame], list, Counter]:
    phase_path = root / "phase_annotations" / f"{video_id}-phase.txt"
    tool_path = root / "tool_annotations" / f"{video_id}-tool.txt"
    variant = _variant(phase_path)
    counts = Counter({f"videos in the {variant.name} variant": 1})
    phases: dict[int, str] = {}
    step = variant.phase_step
    phase_rows = _rows(phase_path, PHASE_COLUMNS, variant.separator, variant.phase_header)
    for position, (number, (frame, phase)) in enumerate(phase_rows):
        if int(frame) != step * position:
            raise SourceError(
                phase_path,
                f"frame {frame}, expected {step * position}: frame indices are not 0, {step}, {2 * step}, ... "
                "without gaps",
                row=number,
                fix=f"the file is incomplete, or its rows are off the {step}-frame grid of the {variant.name} variant",
            )
        phases[int(frame)] = _phase(variant, phase, phase_path, number, labels)
    if not phases:
        raise SourceError(phase_path, "no phase rows", fix="the file is empty or holds only its header")
    last = step * (len(phases) - 1)
    rows: dict[int, tuple[int, list[str]]] = {}  # frame -> (line number, tool cells)
    for number, cells in _rows(tool_path, ("Frame", *TOOL_COLUMNS), variant.separator):
        frame = int(cells[0])
        if frame % FPS:
            raise SourceError(tool_path, f"tool row at frame {frame}, not a multiple of {FPS}", row=number)
        if any(value not in ("0", "1") for value in cells[1:]):
            raise SourceError(tool_path, f"tool values must be 0 or 1, got {cells[1:]}", row=number)
        if frame in rows:
            if rows[frame][1] != cells[1:]:
                raise SourceError(tool_path, f"frame {frame} is listed twice with different tools", row=number)
            counts["tool rows repeated with the same values (dropped)"] += 1
            continue
        rows[frame] = (number, cells[1:])
    past = [frame for frame in rows if frame > last]
    if past:  # no phase to join them to
        counts["tool rows past the last phase frame (clipped)"] += len(past)
        counts["videos with tool rows past the last phase frame"] += 1
    frames = []
    for frame in sorted(f for f in rows if f <= last):
        number, cells = rows[frame]
        tools = sorted(
            labels.map("tool", name, tool_path, number)
            for name, v in zip(TOOL_COLUMNS, cells, strict=True)
            if v == "1"
        )
        frames.append(Frame(video_id, frame, phase=phases[frame], tools=tools))
    segments = segments_from_labels(video_id, "phase", sorted(phases.items()), step=step)
    for tool in TOOLS.values():
        presence = [(f.frame_index, tool if tool in f.tools else None) for f in frames]
        segments += segments_from_labels(video_id, "tool", presence, step=FPS)
    return frames, segments, counts


def _video_ids(root: Path) -> list[str]:
    """Every video the release has files of: a video, a phase or a tool file. Each needs all three; a video file
    that is missing or misnamed (``VIDEO41.MP4``) is named by the media check, never silently left out."""
    named = [
        (folder, pattern)
        for folder, pattern in (
            ("videos", VIDEO_NAME),
            ("phase_annotations", PHASE_NAME),
            ("tool_annotations", TOOL_NAME),
        )
        if (root / folder).is_dir()
    ]
    if not named:
        raise SourceError(
            root / "videos", "folder not found", fix="point --source cholec80= at the extracted cholec80/ folder"
        )
    return sorted(
        {
            f"video{match[1]}"
            for folder, pattern in named
            for path in (root / folder).iterdir()
            if (match := pattern.match(path.name))
        }
    )


def read(root: Path, labels) -> SourceTables:
    tables, read_counts = SourceTables(), Counter()
    for video_id in _video_ids(root):
        path = root / "videos" / f"{video_id}.mp4"
        split = SPLITS["endonet"].get(video_id)
        if split is None:
            raise SourceError(path, "video number outside 01-80", fix="Cholec80 has video01..video80")
        frames, segments, counts = read_video(root, video_id, labels)
        read_counts.update(counts)
        phase = [s for s in segments if s.kind == "phase"]
        total = max(s.end_frame for s in phase) + 1
        tables.videos.append(Video(video_id, split, FPS, total, video_path=f"videos/{path.name}"))
        # every frame has a phase: a phase file that ends before the video is cut short (the media check says so)
        phase_file = f"phase_annotations/{video_id}-phase.txt"
        tables.coverage[video_id] = Coverage(total, phase_file, "phase labels", phase[0].period)
        tables.frames += frames
        tables.segments += segments
    if not tables.videos:
        raise SourceError(root / "videos", "no videoNN.mp4 files", fix="the videos/ folder of the release is empty")
    tables.read_counts = dict(read_counts)
    return tables


SPEC = SourceSpec(
    name="cholec80",
    title="Cholec80",
    procedure="laparoscopic cholecystectomy",
    branches=("clip",),
    capabilities=frozenset({"has_phase", "has_tool_presence"}),
    labels={"phase": PHASES, "tool": TOOLS},
    read=read,
    split_variants=SPLITS,
    default_split_variant="endonet",
    homepage="http://camma.u-strasbg.fr/datasets (request form)",
    license="CC BY-NC-SA 4.0 (non-commercial, via request form)",
    unconfirmed=(
        "videoXX-timestamp.txt format (not read)",
        "per-video resolution",
        "the headerless (TMRNet-style) phase ids in PHASES order (from the same lineage's code, not the files)",
    ),
)

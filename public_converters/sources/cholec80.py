"""Cholec80 (Twinanda et al. 2016): 80 cholecystectomy videos with phases at 25 fps and tool presence at 1 fps.

Layout read (``docs/sources/cholec80.md``)::

    videos/video01.mp4 ...                 25 fps
    phase_annotations/video01-phase.txt    TSV, header "Frame\tPhase", one row per 25-fps frame, CamelCase names
    tool_annotations/video01-tool.txt      TSV, header "Frame\tGrasper\t...\tSpecimenBag", one row per second

Confirmed (third-party loaders and the TF-Cholec80 readme): the file names, the phase strings, the tool columns and
their order, 0-based frame indices, tools sampled on multiples of 25. Inferred: nothing else is needed; the
``videoXX-timestamp.txt`` files are not read (format unverified). Tool rows past the last phase frame (an off-by-one
seen at the end of some videos) are an error only if more than one sample past it. A tool sample covers its second
(25 frames): the last one of a video whose length is not a whole number of seconds ends past the last frame, and the
media check clips it there.

Splits: there is no split file. The default is EndoNet's (videos 1-40 train, 41-80 test); ``32-8-40`` keeps the last
8 training videos for validation, as many works do.
"""

from __future__ import annotations

import re
from pathlib import Path

from public_converters.schema import Frame, SourceError, SourceTables, Video, segments_from_labels
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


def _split(number: int, validation: int) -> str:
    if number > 40:
        return "test"
    return "validation" if number > 40 - validation else "train"


SPLITS = {
    "endonet": {f"video{n:02d}": _split(n, 0) for n in range(1, 81)},
    "32-8-40": {f"video{n:02d}": _split(n, 8) for n in range(1, 81)},
}


def _rows(path: Path, header: tuple[str, ...]) -> list[tuple[int, list[str]]]:
    """(line number, cells) of a tab-separated file whose header must match."""
    if not path.is_file():
        raise SourceError(path, "file not found", fix="every video needs its phase and tool annotation files")
    lines = path.read_text().splitlines()
    found = tuple(lines[0].strip().split("\t")) if lines else ()
    if found != header:
        raise SourceError(path, f"header is {found}, expected {header}", row=1)
    rows = []
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        cells = line.strip().split("\t")
        if len(cells) != len(header) or not cells[0].isdigit():
            raise SourceError(
                path, f"malformed row {line!r}", row=number, fix=f"expected {len(header)} tab-separated cells"
            )
        rows.append((number, cells))
    return rows


def read_video(root: Path, video_id: str, labels) -> tuple[list[Frame], list]:
    phase_path = root / "phase_annotations" / f"{video_id}-phase.txt"
    tool_path = root / "tool_annotations" / f"{video_id}-tool.txt"
    phases: dict[int, str] = {}
    for number, (frame, phase) in _rows(phase_path, ("Frame", "Phase")):
        phases[int(frame)] = labels.map("phase", phase, phase_path, number)
    if sorted(phases) != list(range(len(phases))):
        raise SourceError(phase_path, "frame indices are not contiguous from 0", fix="the file is incomplete")
    last = len(phases) - 1
    frames = []
    for number, cells in _rows(tool_path, ("Frame", *TOOL_COLUMNS)):
        frame = int(cells[0])
        if frame > last + FPS or frame % FPS:
            raise SourceError(tool_path, f"tool row at frame {frame}, phases end at {last}", row=number)
        if any(value not in ("0", "1") for value in cells[1:]):
            raise SourceError(tool_path, f"tool values must be 0 or 1, got {cells[1:]}", row=number)
        if frame > last:  # the documented one-sample tail past the phase file
            continue
        tools = sorted(
            labels.map("tool", name, tool_path, number)
            for name, v in zip(TOOL_COLUMNS, cells[1:], strict=True)
            if v == "1"
        )
        frames.append(Frame(video_id, frame, phase=phases[frame], tools=tools))
    segments = segments_from_labels(video_id, "phase", sorted(phases.items()))
    for tool in TOOLS.values():
        presence = [(f.frame_index, tool if tool in f.tools else None) for f in frames]
        segments += segments_from_labels(video_id, "tool", presence, step=FPS)
    return frames, segments


def read(root: Path, labels) -> SourceTables:
    video_dir = root / "videos"
    if not video_dir.is_dir():
        raise SourceError(
            video_dir, "folder not found", fix="point --source cholec80= at the extracted cholec80/ folder"
        )
    tables = SourceTables()
    for path in sorted(video_dir.iterdir()):
        match = VIDEO_NAME.match(path.name)
        if not match:
            continue
        video_id = path.stem
        frames, segments = read_video(root, video_id, labels)
        total = max(s.end_frame for s in segments if s.kind == "phase") + 1
        split = SPLITS["endonet"].get(video_id)
        if split is None:
            raise SourceError(path, "video number outside 01-80", fix="Cholec80 has video01..video80")
        tables.videos.append(Video(video_id, split, FPS, total, video_path=f"videos/{path.name}"))
        tables.frames += frames
        tables.segments += segments
    if not tables.videos:
        raise SourceError(video_dir, "no videoNN.mp4 files", fix="the videos/ folder of the release is empty")
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
    unconfirmed=("videoXX-timestamp.txt format (not read)", "per-video resolution"),
)

"""PhaKIR (Rueckert et al., EndoVis 2024): 8 public cholecystectomy videos with phases on every frame and instrument
instance masks on every 25th frame (``docs/sources/phakir.md``).

Layout read (the most strongly supported one; many facts are unconfirmed, see ``SPEC.unconfirmed``)::

    Video_01.mp4                                   25 fps
    Video_01/Video_01_Phases.csv                   header "Frame,Phase", one row per frame, phase names
    Video_01/Video_01_Cuts.csv                     header "Frame", frames where anonymisation removed frames
    Video_01/Video_01_Masks/0/frame_000000.png     RGB, one colour per instrument class, every 25th frame
    Video_01/Video_01_Keypoints.json               not read (schema unknown; no keypoint table in the schema)
    Frames/Video_01/0/frame_000000.png             the official ``split_video_in_frames.py`` output

The per-video files may also sit directly next to the videos. Confirmed [official]: ``Video_XX`` names, the 6-digit
0-based frame names in 1000-frame bucket folders, the ``*_Phases.csv`` / ``*_Masks`` / ``*_Cuts.csv`` names and the
cut file's form (submission template). Inferred and checked loudly: phases are written as the Cholec80-style names a
participant's template writes (a numeric phase stops the reader: the id order is unknown); masks exist at every 25th
frame from 0 (19,435 x 25 = 485,875 frames); mask colours are the participant's category table (an unknown colour
stops seg-to-box with the file's name: that is also how per-instance colours would show). The organisers' dummy
table gives Drainage (255,0,0) instead of (255,100,0): both are read as Drainage. Instances of one class are not
separable in a class-colour mask, so seg-to-box splits them into 8-connected components.

Cuts: a listed frame is taken as the first frame after removed footage; phase segments are split there, so a
segment never spans a time jump (two adjacent segments with the same phase mean a cut). The frame size is read from
the header of the first annotated frame (resolutions may differ by centre); masks must match it.

Overlap: PhaKIR ``Video_07`` is HeiChole's ``Hei-Chole2`` (the same surgery): keep them apart across splits.
Splits: the 8 public videos (1, 2, 3, 4, 5, 7, 11, 13) are the challenge training set ("train"); other numbers up
to 13 are taken as the withheld test videos (ids not published).
"""

from __future__ import annotations

import re
from pathlib import Path

from public_converters.schema import (
    Coverage,
    Frame,
    SemanticMask,
    SourceError,
    SourceTables,
    Video,
    read_text,
    segments_from_labels,
)
from public_converters.seg_to_box import image_size
from public_converters.sources.cholec80 import PHASES  # the same names, spelled as Cholec80 does
from public_converters.spec import SourceSpec


FPS = 25
MASK_STEP = 25
# native class -> (canonical tool, mask colour), the participant's copy of the official category table
CLASSES = {
    "Argonbeamer": ("argon beamer", (60, 50, 50)),
    "Bipolar-Clamp": ("bipolar forceps", (89, 134, 179)),
    "Blunt-Grasper": ("blunt grasper", (128, 128, 128)),
    "Blunt-Grasper-Curved": ("curved blunt grasper", (200, 102, 235)),
    "Blunt-Grasper-Spec.": ("blunt grasper (spec.)", (179, 102, 235)),
    "Clip-Applicator": ("clip applier", (0, 0, 255)),
    "Dissection-Hook": ("electrocautery hook", (80, 140, 0)),
    "Drainage": ("drainage", (255, 100, 0)),
    "Grasper": ("grasper", (255, 130, 0)),
    "HF-Coagulation-Probe": ("hf coagulation probe", (255, 0, 153)),
    "Hook-Clamp": ("hook clamp", (0, 80, 80)),
    "Needle-Probe": ("needle probe", (204, 153, 153)),
    "Overholt": ("overholt clamp", (255, 200, 170)),
    "Palpation-Probe": ("palpation probe", (255, 102, 255)),
    "PE-Forceps": ("pe forceps", (30, 144, 1)),
    "Scissor": ("scissors", (255, 255, 0)),
    "Sponge-Clamp": ("sponge clamp", (40, 120, 80)),
    "Suction-Rod": ("suction irrigator", (153, 0, 204)),
    "Trocar-Tip": ("trocar", (153, 102, 0)),
}
TOOLS = {native: canonical for native, (canonical, _) in CLASSES.items()}
# background, the table's colours, and the organisers' dummy template's Drainage colour
PALETTE = {(0, 0, 0): None, **{colour: native for native, (_, colour) in CLASSES.items()}, (255, 0, 0): "Drainage"}
PUBLIC_VIDEOS = (1, 2, 3, 4, 5, 7, 11, 13)
SPLITS = {"challenge": {f"Video_{n:02d}": "train" if n in PUBLIC_VIDEOS else "test" for n in range(1, 14)}}
VIDEO_NAME = re.compile(r"^Video_(\d{2})\.mp4$")
ANNOTATED = re.compile(r"^Video_(\d{2})(?:_Phases\.csv)?$")  # a video's annotation folder, or its phase file
MASK_NAME = re.compile(r"^frame_(\d{6})\.png$")


def bucket_path(frame: int) -> str:
    return f"{frame // 1000 * 1000}/frame_{frame:06d}.png"


def _csv(path: Path, header: tuple[str, ...], fix: str) -> list[tuple[int, list[str]]]:
    lines = read_text(path, fix=fix).splitlines()
    found = tuple(cell.strip() for cell in lines[0].split(",")) if lines else ()
    if found != header:
        raise SourceError(path, f"header is {found}, expected {header}", row=1)
    rows = []
    for number, line in enumerate(lines[1:], start=2):
        cells = [cell.strip() for cell in line.split(",")]
        if not line.strip():
            continue
        if len(cells) != len(header) or not cells[0].isdigit():
            raise SourceError(path, f"malformed row {line!r}", row=number, fix=f"expected {','.join(header)}")
        rows.append((number, cells))
    return rows


def _phases(path: Path, labels) -> list[str]:
    phases = []
    for number, (frame, phase) in _csv(path, ("Frame", "Phase"), "every video needs its Phases.csv"):
        if int(frame) != len(phases):
            raise SourceError(path, f"frame {frame} where {len(phases)} was expected", row=number)
        if phase.isdigit():
            raise SourceError(
                path,
                f"phase is the number {phase}, expected a phase name such as 'Preparation'",
                row=number,
                fix="the numeric phase order is not confirmed; add an id table to public_converters/sources/phakir.py",
            )
        phases.append(labels.map("phase", phase, path, number))
    if not phases:
        raise SourceError(path, "no rows", fix="the file is empty")
    return phases


def _cuts(path: Path, total: int) -> list[int]:
    if not path.is_file():
        return []
    cuts = [int(cells[0]) for _, cells in _csv(path, ("Frame",), "")]
    if cuts != sorted(set(cuts)) or any(not 0 < cut < total for cut in cuts):
        raise SourceError(path, f"cuts {cuts} are not increasing frames inside 1..{total - 1}")
    return cuts


EXTRACT_FRAMES = "extract the frames with the official split_video_in_frames.py"


def _mask_frames(masks_dir: Path, total: int, phases: str) -> list[int]:
    """Every 25th frame from 0 must have a mask, and nothing else may; ``phases`` names the file ``total`` is from."""
    if not masks_dir.is_dir():
        raise SourceError(masks_dir, "folder not found", fix="every video needs its Video_XX_Masks folder")
    found = {}
    for path in sorted(masks_dir.glob("*/*")):
        if path.name.startswith("."):  # .DS_Store and the like
            continue
        match = MASK_NAME.match(path.name)
        frame = int(match.group(1)) if match else None
        if frame is None or path.relative_to(masks_dir).as_posix() != bucket_path(frame):
            raise SourceError(path, "unexpected file", fix="masks are <bucket>/frame_NNNNNN.png, 1000 frames a bucket")
        if frame >= total:
            raise SourceError(
                path,
                f"mask at frame {frame}, past the {total} frames {phases} labels",
                fix="is the phase file cut short? re-download the video's annotations",
            )
        if frame % MASK_STEP:
            raise SourceError(path, f"mask at frame {frame}; expected every {MASK_STEP}th frame below {total}")
        found[frame] = path
    for frame in range(0, total, MASK_STEP):
        if frame not in found:
            raise SourceError(masks_dir / bucket_path(frame), f"file not found (a mask every {MASK_STEP}th frame)")
    return sorted(found)


def read_video(root: Path, video_id: str, labels, tables: SourceTables) -> None:
    split = SPLITS["challenge"].get(video_id)
    if split is None:
        raise SourceError(root / f"{video_id}.mp4", "video number outside 01-13", fix="PhaKIR has Video_01..Video_13")
    folder = root / video_id if (root / video_id).is_dir() else root
    phases = _phases(folder / f"{video_id}_Phases.csv", labels)
    total = len(phases)
    cuts = _cuts(folder / f"{video_id}_Cuts.csv", total)
    masks_dir = folder / f"{video_id}_Masks"
    annotated = _mask_frames(masks_dir, total, f"{video_id}_Phases.csv")
    frame_dir = f"Frames/{video_id}"
    width, height = image_size(root / frame_dir / bucket_path(annotated[0]), fix=EXTRACT_FRAMES)
    tables.videos.append(Video(video_id, split, FPS, total, width, height, f"{video_id}.mp4"))
    phase_file = (folder / f"{video_id}_Phases.csv").relative_to(root).as_posix()
    tables.coverage[video_id] = Coverage(total, phase_file, "phase labels")  # one row per frame
    for frame in annotated:
        tables.frames.append(Frame(video_id, frame, f"{frame_dir}/{bucket_path(frame)}", phase=phases[frame]))
        mask = (masks_dir / bucket_path(frame)).relative_to(root).as_posix()
        tables.masks.append(SemanticMask(video_id, frame, mask, PALETTE, (height, width)))
    labelled = list(enumerate(phases))
    for start, end in zip([0, *cuts], [*cuts, total], strict=True):  # no segment spans a cut
        tables.segments += segments_from_labels(video_id, "phase", labelled[start:end])


def read(root: Path, labels) -> SourceTables:
    """Every video with a video file or its annotations (a ``Video_XX`` folder or ``Video_XX_Phases.csv``): each
    needs both, and a video file that is missing or misnamed is named by the media check, never silently left out."""
    tables = SourceTables()
    names = {path.name for path in root.iterdir()}
    found = {match[1] for name in names if (match := VIDEO_NAME.match(name) or ANNOTATED.match(name))}
    for number in sorted(found):
        read_video(root, f"Video_{number}", labels, tables)
    if not tables.videos:
        raise SourceError(root, "no Video_XX.mp4 files", fix="point --source phakir= at the folder of the videos")
    return tables


SPEC = SourceSpec(
    name="phakir",
    title="Phakir",
    procedure="laparoscopic cholecystectomy",
    branches=("image", "clip"),
    capabilities=frozenset({"has_phase", "has_tool_presence", "has_tool_bbox", "has_masks"}),
    labels={"phase": PHASES, "tool": TOOLS},
    read=read,
    mask_policies=dict.fromkeys(TOOLS, "components"),
    split_variants=SPLITS,
    default_split_variant="challenge",
    homepage="https://phakir.re-mic.de (data on Zenodo, on request)",
    license="unknown",
    unconfirmed=(
        "license",
        "phase column written as names (a numeric column stops the reader) and the phase list",
        "mask colour table (a participant's copy; Drainage (255,100,0) vs (255,0,0)) and how instances are encoded",
        "where the per-video annotation files sit (Video_XX/ or next to the videos)",
        "cut semantics: a listed frame is the first after removed footage",
        "test video ids (taken as the numbers 1-13 not in the public release)",
        "keypoints: Video_XX_Keypoints.json not read (schema unknown; the common schema has no keypoint table)",
    ),
)

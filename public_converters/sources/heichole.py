"""HeiChole (Wagner et al., MedIA 2023; EndoVis 2019): 24 public cholecystectomy videos, phases, actions, instruments.

Layout read (``docs/sources/heichole.md``; third-party loaders, no official listing)::

    Videos/Full/Hei-Chole1.mp4                                  25 or 50 fps (also accepted: Videos/ or the root)
    Annotations/Phase/Hei-Chole1_Annotation_Phase.csv           no header, "frame,phase_id", one row per frame
    Annotations/Instrument/Hei-Chole1_Annotation_Instrument.csv no header, frame + 7 or 21 category columns
    Annotations/Action/Hei-Chole1_Annotation_Action.csv         no header, frame + 4 binary columns
    Annotations/Skill/Hei-Chole1[_Calot|_Dissection]_Skill.csv  one line of 5 integers: shape checked, not read
    (annotation files directly under Annotations/ or the root are accepted too)

Names are matched case-insensitively (copies differ: ``hei-chole1_annotation_phase.csv``) and exactly (``Hei-Chole1``
never matches ``Hei-Chole10`` or the skill-rated ``Hei-Chole1_Calot.mp4`` segment videos, which are not read).

Frame rate: the annotations label every frame of the video at the video's own rate, and the rates differ (videos
16-20, 23 and 24 are 50 fps, the others 25), so the rate is read from each video's header (``_itec.probe_clip``),
never assumed. Every video with a phase file must be there (its rate times the labels, its frames show them): a
missing one, or one under another name (``Hei-Chole1.mkv``), is named by the media check and stops the build.

Confirmed by several loaders: headerless phase rows, phase ids 0-6 in the Cholec80 order. The instrument CSV comes in
two widths, told apart by the first row; any other width is an error naming the file, the count and the widths read:

- 8 cells: frame + the 7 categories (Grasper, Clipper, Coagulation instruments, Scissors, Suction-irrigation,
  Specimen bag, Stapler);
- 22 cells (the release's ``_Annotation_Instrument.csv``, per a third-party audit of a full copy): frame + 21
  category slots: 0-6 the same 7 categories, 7-19 reserved (always 0), 20 "undefined instrument shaft". The audit's
  category counts equal the sums of the ``_Instrument_Detailed.csv`` types per category (e.g. clipper = metal +
  Hem-O-Lok clip appliers), so the slots are categories, not the paper's 21 instrument types in order (reading
  them as types would turn the clipper column into a toothed grasper). A 1 in a reserved slot is an error naming the
  file, row and column (a file of that shape is not the layout read here); rows with the undefined shaft are
  counted in ``read_counts`` and give no tool label (no category says which instrument it is).

The paper's 21 instrument types and their categories (``docs/sources/heichole.md``) belong to the
``_Instrument_Detailed.csv`` files, which are not read. The action columns (Grasp, Hold, Cut, Clip) are checked by
their count too. Instrument and action rows are read at whatever uniform frame step the file has (one row per frame is
inferred); a non-uniform step is an error.

Skill files (a loader by one of the Sureon paper's authors, anitarau/SurgBenchKit
``vlmeval/dataset/heichole_tasks.py``: code, not data, third-party and author-adjacent): one line,
``depth_perception, bimanual_dexterity, efficiency, tissue_handling, difficulty`` (``SKILL_DIMENSIONS``),
comma-separated integers; the Calot-triangle and dissection segments' files are told apart by name
(``_Calot_Skill.csv``, ``_Dissection_Skill.csv``; the loader skips names with "Dissection"). No QA template asks
about skill, so no skill label is built: each skill file found is checked for that shape (one line of 5 integers,
else an error naming the file and row) and counted in ``read_counts``. The same loader agrees with the rest of this
reader: ``Annotations/<Task>/Hei-Chole<N>_Annotation_<Task>.csv``, headerless comma-separated integers with the frame
first, "videos with 25 or 50 fps", the 7 tool categories in ``INSTRUMENT_COLUMNS`` order with the wider file's other
columns "padded with zeros" (it quotes the dataset: "Tools 7-20 Reserved for future additions", and keeps the first
7), and the action order of ``ACTION_COLUMNS``.

Branches: both, as in the Sureon paper. The release has videos only, so the image branch takes one frame every
``IMAGE_EVERY_SECONDS`` (25 s of the video's own rate: about the Sureon paper's 2,064 items over 24 videos), labelled
from the segments, and the builder decodes those frames from the video.
Splits: videos 1-24 are the public training set; 25-33 are the challenge test set (labels withheld).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import replace
from pathlib import Path

from public_converters.schema import (
    Coverage,
    SourceError,
    SourceTables,
    Video,
    frames_from_segments,
    read_text,
    segments_from_labels,
)
from public_converters.sources._itec import probe_or_defer
from public_converters.spec import SourceSpec


IMAGE_EVERY_SECONDS = 25  # image-branch sampling of the videos (one frame every 25 s)
PHASE_IDS = (
    "Preparation",
    "CalotTriangleDissection",
    "ClippingCutting",
    "GallbladderDissection",
    "GallbladderPackaging",
    "CleaningCoagulation",
    "GallbladderRetraction",
)
PHASES = {
    "Preparation": "preparation",
    "CalotTriangleDissection": "calot triangle dissection",
    "ClippingCutting": "clipping and cutting",
    "GallbladderDissection": "gallbladder dissection",
    "GallbladderPackaging": "gallbladder packaging",
    "CleaningCoagulation": "cleaning and coagulation",
    "GallbladderRetraction": "gallbladder retraction",
}
INSTRUMENT_COLUMNS = (
    "Grasper",
    "Clipper",
    "Coagulation instruments",
    "Scissors",
    "Suction-irrigation",
    "Specimen bag",
    "Stapler",
)
TOOLS = {
    "Grasper": "grasper",
    "Clipper": "clip applier",
    "Coagulation instruments": "coagulation instrument",
    "Scissors": "scissors",
    "Suction-irrigation": "suction irrigator",
    "Specimen bag": "specimen bag",
    "Stapler": "stapler",
}
CATEGORY_SLOTS = 21  # the release's category file: frame + 21 slots (0-6 categories, 7-19 reserved, 20 shaft)
UNDEFINED_SHAFT = 20
INSTRUMENT_WIDTHS = {
    1 + len(INSTRUMENT_COLUMNS): "frame + the 7 categories",
    1 + CATEGORY_SLOTS: "frame + 21 category slots: 0-6 the categories, 7-19 reserved, 20 undefined instrument shaft",
}
SHAFT_ROWS = "instrument rows with an undefined instrument shaft (slot 20; no tool label)"
ACTION_COLUMNS = ("Grasp", "Hold", "Cut", "Clip")
ACTIONS = {"Grasp": "grasp", "Hold": "hold", "Cut": "cut", "Clip": "clip"}
KINDS = ("Phase", "Instrument", "Action")
SKILL_DIMENSIONS = ("depth perception", "bimanual dexterity", "efficiency", "tissue handling", "difficulty")
SKILL_NAME = re.compile(r"^hei-chole\d+(_calot|_dissection)?_skill\.csv$")
SKILL_FILES = "skill files (shape checked; not read: no QA asks about skill)"
VIDEO_NAME = re.compile(r"^hei-chole(\d+)\.mp4$")
PHASE_NAME = re.compile(r"^hei-chole(\d+)_annotation_phase\.csv$")
SPLITS = {"public": {f"Hei-Chole{n}": "train" if n <= 24 else "test" for n in range(1, 34)}}


def _index(*folders: Path) -> dict[str, Path]:
    """Lower-case file name -> path over the folders that exist (the first folder wins)."""
    found: dict[str, Path] = {}
    for folder in folders:
        if folder.is_dir():
            for path in sorted(folder.iterdir()):
                found.setdefault(path.name.lower(), path)
    return found


def _rows(path: Path, width: int, what: str) -> list[tuple[int, int, list[str]]]:
    """(line number, frame, cells after the frame) of a headerless CSV with ``width`` cells per row."""
    rows = []
    for number, line in enumerate(read_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) != width:
            raise SourceError(
                path, f"row {line!r} has {len(cells)} cells", row=number, fix=f"expected headerless {what}"
            )
        if not cells[0].isdigit():
            raise SourceError(
                path, f"frame {cells[0]!r} is not a frame number", row=number, fix="a frame is a whole number from 0"
            )
        rows.append((number, int(cells[0]), cells[1:]))
    if not rows:
        raise SourceError(path, "no rows", fix="the annotation file is empty")
    return rows


def _instrument_rows(path: Path, counts: Counter) -> list[tuple[int, int, list[str]]]:
    """The instrument CSV's rows as (line, frame, the 7 category cells), from either width (``INSTRUMENT_WIDTHS``)."""
    first = next(((n, line) for n, line in enumerate(read_text(path).splitlines(), start=1) if line.strip()), None)
    width = len(first[1].split(",")) if first else 1 + len(INSTRUMENT_COLUMNS)
    if width not in INSTRUMENT_WIDTHS:
        accepted = "; ".join(f"{count} ({what})" for count, what in INSTRUMENT_WIDTHS.items())
        raise SourceError(
            path,
            f"instrument rows have {width} cells; the widths read are {accepted}",
            row=first[0],
            fix="_Instrument_Detailed.csv has 32 cells: the reader wants the _Annotation_Instrument.csv",
        )
    rows = _rows(path, width, f"rows of {INSTRUMENT_WIDTHS[width]} (the first row's width)")
    if width == 1 + len(INSTRUMENT_COLUMNS):
        return rows
    categories = []
    for number, frame, cells in rows:
        reserved = next((slot for slot in range(len(INSTRUMENT_COLUMNS), UNDEFINED_SHAFT) if cells[slot] != "0"), None)
        if reserved is not None:
            raise SourceError(
                path,
                f"column {reserved + 2} (category slot {reserved}) is {cells[reserved]!r}; slots 7-19 are reserved "
                "and empty in the release's category file",
                row=number,
                fix="a file that lists 21 instrument types, not categories, is not a layout this reader knows",
            )
        if cells[UNDEFINED_SHAFT] not in ("0", "1"):
            raise SourceError(
                path, f"undefined instrument shaft is {cells[UNDEFINED_SHAFT]!r}, expected 0 or 1", row=number
            )
        counts[SHAFT_ROWS] += cells[UNDEFINED_SHAFT] == "1"
        categories.append((number, frame, cells[: len(INSTRUMENT_COLUMNS)]))
    return categories


def _check_skill(path: Path) -> None:
    """A skill file is one line of ``SKILL_DIMENSIONS`` scores, comma-separated integers; anything else is a file of
    another layout, named rather than passed over (the scores are not read)."""
    order = ", ".join(SKILL_DIMENSIONS)
    lines = [(number, line) for number, line in enumerate(read_text(path).splitlines(), start=1) if line.strip()]
    if len(lines) != 1:
        raise SourceError(
            path,
            f"{len(lines)} lines; a skill file is one line of {len(SKILL_DIMENSIONS)} integers ({order})",
            row=lines[1][0] if lines else None,
        )
    number, line = lines[0]
    cells = [cell.strip() for cell in line.split(",")]
    if len(cells) != len(SKILL_DIMENSIONS) or not all(re.fullmatch(r"[0-9]+", cell) for cell in cells):
        raise SourceError(
            path,
            f"skill row {line.strip()!r} is not {len(SKILL_DIMENSIONS)} comma-separated integers ({order})",
            row=number,
        )


def _presence_segments(path, video_id, kind, columns, last, labels, phase_path, rows=None) -> list:
    """Presence segments of a binary-column CSV (``rows``: already read, else read with ``len(columns)`` columns)."""
    if rows is None:
        rows = _rows(path, len(columns) + 1, f"frame + {len(columns)} binary columns ({', '.join(columns)})")
    frames = [frame for _, frame, _ in rows]
    step = frames[1] - frames[0] if len(frames) > 1 else 1
    for (number, frame, _), previous in zip(rows[1:], frames, strict=False):
        if frame - previous != step or step < 1:
            raise SourceError(path, f"frame {frame} after {previous}: the step is not {step}", row=number)
    if frames[-1] > last + step:
        raise SourceError(
            path,
            f"rows run to frame {frames[-1]}, but {phase_path.name} labels frames 0-{last} only",
            row=rows[-1][0],
            fix="one of the two files is cut short; re-download the video's annotations",
        )
    segments = []
    for position, column in enumerate(columns):
        name = labels.map(kind, column, path)
        presence = []
        for number, frame, values in rows:
            if values[position] not in ("0", "1"):
                raise SourceError(path, f"{column} is {values[position]!r}, expected 0 or 1", row=number)
            if frame <= last:
                presence.append((frame, name if values[position] == "1" else None))
        segments += segments_from_labels(video_id, kind, presence, step=step)
    return [replace(s, end_frame=min(s.end_frame, last)) for s in segments]  # a 1-fps sample covers its second


def read(root: Path, labels) -> SourceTables:
    videos = _index(root / "Videos" / "Full", root / "Videos", root)
    notes = {kind: _index(root / "Annotations" / kind, root / "Annotations", root) for kind in KINDS}
    tables, counts = SourceTables(), Counter()
    skills = _index(root / "Annotations" / "Skill", root / "Annotations", root)
    for path in (path for name, path in sorted(skills.items()) if SKILL_NAME.match(name)):
        _check_skill(path)
        counts[SKILL_FILES] += 1
    shipped = {int(m.group(1)): videos[name] for name in videos if (m := VIDEO_NAME.match(name))}
    annotated = {int(m.group(1)) for m in map(PHASE_NAME.match, notes["Phase"]) if m}
    # where an annotated video missing from the copy is expected: beside the copy's other videos
    folder = next((path.parent for _, path in sorted(shipped.items())), root / "Videos" / "Full")
    for number in sorted(set(shipped) | annotated):
        video_id = f"Hei-Chole{number}"
        video_path = shipped.get(number, folder / f"{video_id}.mp4")
        files = {}
        for kind, index in notes.items():
            file_name = f"hei-chole{number}_annotation_{kind.lower()}.csv"
            if file_name not in index:
                expected = root / "Annotations" / kind / f"{video_id}_Annotation_{kind}.csv"
                raise SourceError(expected, "file not found", fix="every video needs its phase/instrument/action CSV")
            files[kind] = index[file_name]
        phase_path = files["Phase"]
        phases = []
        for row, frame, (phase,) in _rows(phase_path, 2, "'frame,phase_id' rows"):
            native = PHASE_IDS[int(phase)] if phase.isdigit() and int(phase) < len(PHASE_IDS) else phase
            phases.append((frame, labels.map("phase", native, phase_path, row)))
        if [frame for frame, _ in phases] != list(range(len(phases))):
            raise SourceError(phase_path, "frame indices are not contiguous from 0", fix="the file is incomplete")
        last = len(phases) - 1
        tables.segments += segments_from_labels(video_id, "phase", phases)
        rows = _instrument_rows(files["Instrument"], counts)
        tables.segments += _presence_segments(
            files["Instrument"], video_id, "tool", INSTRUMENT_COLUMNS, last, labels, phase_path, rows
        )
        tables.segments += _presence_segments(
            files["Action"], video_id, "action", ACTION_COLUMNS, last, labels, phase_path
        )
        # 25 or 50: the labels are per frame of the video at its own rate. A video that is missing or unreadable has
        # none: the media check names it (with the file probably meant) among every media problem, and the build stops
        header = probe_or_defer(video_path, video_id, tables)
        fps = header[0] if header else None
        if fps:
            sampled = range(0, last + 1, max(1, round(IMAGE_EVERY_SECONDS * fps)))
            tables.frames += frames_from_segments(video_id, tables.segments, sampled)
        split = SPLITS["public"].get(video_id)
        if split is None:
            raise SourceError(video_path, "video number outside 1-33", fix="HeiChole has Hei-Chole1..Hei-Chole33")
        relative = video_path.relative_to(root).as_posix()
        tables.videos.append(Video(video_id, split, fps, len(phases), video_path=relative))
        # one phase row per frame: a file that ends before the video is short (a warning of the media check)
        tables.coverage[video_id] = Coverage(len(phases), phase_path.relative_to(root).as_posix(), "phase labels")
    if not tables.videos:
        raise SourceError(root / "Videos" / "Full", "no Hei-Chole<N>.mp4 videos", fix="point the source at HeiChole/")
    tables.read_counts = {key: count for key, count in sorted(counts.items()) if count}
    return tables


SPEC = SourceSpec(
    name="heichole",
    title="HeiChole",
    procedure="laparoscopic cholecystectomy",
    branches=("image", "clip"),
    capabilities=frozenset({"has_phase", "has_actions", "has_tool_presence"}),
    labels={"phase": PHASES, "tool": TOOLS, "action": ACTIONS},
    read=read,
    video_frames_as_images=True,
    split_variants=SPLITS,
    default_split_variant="public",
    homepage="https://endovissub-workflowandskill.grand-challenge.org/Data (Synapse, data agreement)",
    license="unknown",
    unconfirmed=(
        "folder layout (Videos/Full, Annotations/<Kind>; from third-party loaders)",
        "instrument CSV columns (8 or 22 cells; the 22-cell slots read as categories after a third-party audit)",
        "instrument/action rows at every frame of the video (25 or 50 fps, read from the video)",
        "license",
    ),
)
